-- calibration_metrics: expected calibration error (ECE) of each label and of the labels pooled,
-- from calibration bins (multiclass: each class one-vs-rest).
-- Reads:  calibration_bins(segment, label, bin, lower, upper, weight, pos, score_sum)
--         (calibration_bins.sql)
-- Gives:  segment, metric, average, label, value, support (metric 'calibration_error';
--         label_averages.sql adds the grid of labels and the macro, weighted and macro_std
--         averages)
--   ECE = sum over bins of (w_b / W) * |observed rate_b - mean score_b|
--       = sum over bins of |pos_b - score_sum_b| / W,
--   with w_b the bin's weight, W the label's weight, rate_b = pos_b / w_b and mean score_b =
--   score_sum_b / w_b (weighted). NULL where W is 0. support: the label's positive weight.
--   micro: the ECE of every (sample, label) row pooled (bins summed over labels).
WITH pooled AS (
    SELECT segment, bin, sum(weight) AS weight, sum(pos) AS pos, sum(score_sum) AS score_sum
    FROM calibration_bins
    GROUP BY segment, bin
),
gaps AS (
    SELECT segment, CAST(NULL AS VARCHAR) AS average, label, sum(weight) AS weight,
           sum(pos) AS pos, sum(abs(pos - score_sum)) AS gap
    FROM calibration_bins
    GROUP BY segment, label
    UNION ALL
    SELECT segment, 'micro', NULL, sum(weight), sum(pos), sum(abs(pos - score_sum))
    FROM pooled
    GROUP BY segment
)
SELECT segment, 'calibration_error' AS metric, average, label,
       CASE WHEN weight = 0 THEN NULL ELSE gap / weight END AS value, pos AS support
FROM gaps
