-- sample_gains: each sample's discounted cumulative gain (DCG) and normalized DCG over its
-- labels ranked by score, the truth read as graded relevance (multilabel, multiclass), in one
-- pass of window functions over (segment, sample), as scikit-learn's dcg_score / ndcg_score.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $k (positions 1..$k count; a larger k than the labels: every one),
--         $log_base (the discount is 1 / log_base(position + 1)),
--         $ignore_ties (TRUE: tied scores in label order, the last label first, as
--         scikit-learn's reversed argsort; FALSE: each tied label gets its block's mean gain)
-- Gives:  sample_gains(segment, sample, weight, dcg, ndcg)
--   gain: the truth as a number (a boolean truth: 1 or 0). Ties as scikit-learn (McSherry &
--   Najork): every label of a block of tied scores gains the block's mean relevance at its
--   own position, so the block adds its mean relevance times the discounts of the positions
--   it covers. The ideal DCG ranks the labels by relevance (ties do not change it).
--   dcg = ln(log_base) * sum(gain / ln(position + 1)); ndcg = dcg / ideal dcg with the same
--   discounts (the base cancels), 0 where the ideal DCG is 0 (no relevant label).
WITH gains AS (
    SELECT
        segment,
        sample,
        label,
        score,
        weight,
        -- a boolean's text is 'true' / 'false'; a number's its value (no cast from a boolean
        -- to a number is portable)
        CASE CAST(truth AS VARCHAR)
            WHEN 'true' THEN 1.0
            WHEN 'false' THEN 0.0
            ELSE CAST(CAST(truth AS VARCHAR) AS DOUBLE)
        END AS gain
    FROM predictions
),
positioned AS (
    SELECT
        segment,
        sample,
        weight,
        CASE WHEN $ignore_ties THEN gain ELSE avg(gain) OVER tied END AS ranked_gain,
        gain,
        row_number() OVER (
            PARTITION BY segment, sample ORDER BY score DESC, label DESC
        ) AS position,
        row_number() OVER (PARTITION BY segment, sample ORDER BY gain DESC) AS ideal_position
    FROM gains
    WINDOW tied AS (PARTITION BY segment, sample, score)
),
per_sample AS (
    SELECT
        segment,
        sample,
        any_value(weight) AS weight,
        sum(CASE WHEN position <= $k
                 THEN ranked_gain / ln(CAST(position + 1 AS DOUBLE)) ELSE 0.0 END) AS gained,
        sum(CASE WHEN ideal_position <= $k
                 THEN gain / ln(CAST(ideal_position + 1 AS DOUBLE)) ELSE 0.0 END) AS ideal
    FROM positioned
    GROUP BY segment, sample
)
SELECT
    segment,
    sample,
    weight,
    gained * ln(CAST($log_base AS DOUBLE)) AS dcg,
    CASE WHEN ideal = 0 THEN 0.0 ELSE gained / ideal END AS ndcg
FROM per_sample
