-- calibration_bins: weight, positive weight and score sum per (segment, label, bin) over $n_bins
-- equal-width bins on [0, 1] (multiclass: each class one-vs-rest).
-- Bin b holds the scores in [b / n, (b + 1) / n), the last bin also holds 1: b is the largest k
-- with k / n <= score (k / n as a correctly rounded double, so a score equal to an edge, such as
-- 0.7 with n = 10, falls in the bin that starts there), capped at n - 1.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $n_bins (a whole number >= 1)
-- Uses:   macros/grid.sql
-- Gives:  calibration_bins(segment, label, bin, lower, upper, weight, pos, score_sum)
--   lower = bin / n, upper = (bin + 1) / n; weight: sum of weight; pos: weight of true rows;
--   score_sum: sum of weight * score. Bins without rows are absent; bins whose rows all have
--   weight 0 are present with weight 0.
WITH binned AS (
    SELECT
        segment, label, truth, weight, score, CAST($n_bins AS DOUBLE) AS n,
        least(grid_index(score, CAST($n_bins AS DOUBLE)), CAST($n_bins AS DOUBLE) - 1) AS bin
    FROM predictions
)
SELECT
    segment,
    label,
    CAST(bin AS BIGINT) AS bin,
    bin / n AS lower,
    (bin + 1) / n AS upper,
    sum(weight) AS weight,
    coalesce(sum(weight) FILTER (WHERE truth), 0) AS pos,
    sum(weight * score) AS score_sum
FROM binned
GROUP BY segment, label, bin, n
