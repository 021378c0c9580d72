-- sample_ranks: each sample's ranking of its labels by score, summed up per sample
-- (multilabel, multiclass), in one pass of window functions over (segment, sample).
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $k (how many top-scored labels precision@k and recall@k look at)
-- Gives:  sample_ranks(segment, sample, weight, n_labels, n_true, coverage, wrong_pairs, lrap,
--         top_true, n_at_k, hits_at_k)
--   Ties as scikit-learn: a label's rank is the number of the sample's labels scored >= it.
--   coverage: the rank of the lowest-scored true label (0 for a sample with no true label).
--   wrong_pairs: (true, false) label pairs with score_true <= score_false (a tie is wrong).
--   lrap: mean over true labels of (true labels scored >= it) / (labels scored >= it); 1 for
--         a sample with no true label or with every label true.
--   top_true: whether the top-scored label is true; n_at_k: min($k, n_labels), the labels at
--   positions 1..$k; hits_at_k: the true ones among them. Positions order by score descending,
--   ties by the smallest label first (as argmax).
WITH ranked AS (
    SELECT
        segment,
        sample,
        weight,
        truth,
        count(*) OVER (
            PARTITION BY segment, sample ORDER BY score DESC
            RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS n_ge,
        sum(CASE WHEN truth THEN 1 ELSE 0 END) OVER (
            PARTITION BY segment, sample ORDER BY score DESC
            RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW
        ) AS true_ge,
        row_number() OVER (
            PARTITION BY segment, sample ORDER BY score DESC, label
        ) AS label_position
    FROM predictions
),
per_sample AS (
    SELECT
        segment,
        sample,
        any_value(weight) AS weight,
        count(*) AS n_labels,
        count(*) FILTER (WHERE truth) AS n_true,
        coalesce(max(n_ge) FILTER (WHERE truth), 0) AS coverage,
        coalesce(sum(n_ge - true_ge) FILTER (WHERE truth), 0) AS wrong_pairs,
        avg(CAST(true_ge AS DOUBLE) / n_ge) FILTER (WHERE truth) AS true_lrap,
        coalesce(bool_or(truth AND label_position = 1), FALSE) AS top_true,
        count(*) FILTER (WHERE label_position <= $k) AS n_at_k,
        count(*) FILTER (WHERE truth AND label_position <= $k) AS hits_at_k
    FROM ranked
    GROUP BY segment, sample
)
SELECT
    segment,
    sample,
    weight,
    n_labels,
    n_true,
    coverage,
    wrong_pairs,
    CASE WHEN n_true = 0 OR n_true = n_labels THEN 1.0 ELSE true_lrap END AS lrap,
    top_true,
    n_at_k,
    hits_at_k
FROM per_sample
