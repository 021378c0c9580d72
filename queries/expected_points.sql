-- expected_points: what a label's outcomes are expected to be at each of its distinct scores,
-- from the probability that each row is true (performance estimated without the truth).
-- Reads:  predictions(sample, label, score, truth, weight, segment)  with truth each row's
--         probability of being true, a number in [0, 1] (mleval_sql/estimation.py: the score,
--         or the score through a calibration map learnt on labelled rows)
-- Gives:  expected_points(segment, label, score, pos, neg, noise, neg_below, pos_above, p, n)
--   Weights are taken as shares of the label's largest weight (the estimates are ratios).
--   pos: sum of weight * probability, the expected positive weight at the score; neg: sum of
--   weight * (1 - probability); noise: sum of weight^2 * probability * (1 - probability), the
--   variance of the realised positive weight at the score (outcomes drawn independently).
--   neg_below: neg of the label's lower scores; pos_above: pos of its higher scores; p, n: the
--   label's expected positive and negative weight.
WITH scales AS (
    SELECT segment, label, max(weight) AS scale
    FROM predictions
    GROUP BY segment, label
),
probabilities AS (
    -- weights as shares of the label's largest: every estimate is a ratio of them, and the
    -- products of weights below (pairs, squares) neither over- nor underflow at 1e+-300
    SELECT p.segment, p.label, p.score, p.weight / nullif(s.scale, 0) AS weight,
           CAST(p.truth AS DOUBLE) AS q
    FROM predictions AS p
    JOIN scales AS s
        ON s.segment IS NOT DISTINCT FROM p.segment AND s.label IS NOT DISTINCT FROM p.label
),
points AS (
    SELECT
        segment,
        label,
        score,
        sum(weight * q) AS pos,
        sum(weight * (1 - q)) AS neg,
        sum(weight * weight * q * (1 - q)) AS noise
    FROM probabilities
    GROUP BY segment, label, score
)
SELECT
    segment,
    label,
    score,
    pos,
    neg,
    noise,
    -- a score is never null (evaluate refuses one): NULLS FIRST is every dialect's own
    -- order ascending or written as is (BigQuery cannot reorder nulls in a framed window)
    coalesce(sum(neg) OVER (PARTITION BY segment, label ORDER BY score NULLS FIRST
                            ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING), 0) AS neg_below,
    coalesce(sum(pos) OVER (PARTITION BY segment, label ORDER BY score NULLS FIRST
                            ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING), 0) AS pos_above,
    sum(pos) OVER (PARTITION BY segment, label) AS p,
    sum(neg) OVER (PARTITION BY segment, label) AS n
FROM points
