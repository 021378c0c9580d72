-- calibration_metrics: expected calibration error (ECE) of each label and its averages, from
-- calibration bins (multiclass: each class one-vs-rest).
-- Reads:  calibration_bins(segment, label, bin, lower, upper, weight, pos, score_sum)
--         (calibration_bins.sql)
-- Gives:  segment, metric, average, label, value (metric 'calibration_error')
--   ECE = sum over bins of (w_b / W) * |observed rate_b - mean score_b|
--       = sum over bins of |pos_b - score_sum_b| / W,
--   with w_b the bin's weight, W the label's weight, rate_b = pos_b / w_b and mean score_b =
--   score_sum_b / w_b (weighted). NULL where W is 0, and for a label of the input that a
--   segment lacks. micro: the ECE of every (sample, label) row pooled (bins summed over
--   labels); macro: mean over labels; weighted: mean weighted by the labels' positive weight,
--   falling back to macro when those sum to 0; macro_std: population standard deviation over
--   labels. Averages skip NULL values.
WITH labelled AS (
    SELECT segment, label, sum(weight) AS weight, sum(pos) AS pos,
           sum(abs(pos - score_sum)) AS gap
    FROM calibration_bins
    GROUP BY segment, label
),
pooled AS (
    SELECT segment, bin, sum(weight) AS weight, sum(pos) AS pos, sum(score_sum) AS score_sum
    FROM calibration_bins
    GROUP BY segment, bin
),
grid AS (
    SELECT segments.segment, labels.label, l.weight, l.pos, l.gap
    FROM (SELECT DISTINCT segment FROM calibration_bins) AS segments
    CROSS JOIN (SELECT DISTINCT label FROM calibration_bins) AS labels
    LEFT JOIN labelled AS l
        ON l.segment IS NOT DISTINCT FROM segments.segment AND l.label = labels.label
),
per_label AS (
    SELECT segment, label, pos AS label_support,
           CASE WHEN weight = 0 THEN NULL ELSE gap / weight END AS value
    FROM grid
),
micro AS (
    SELECT segment, sum(weight) AS weight, sum(abs(pos - score_sum)) AS gap
    FROM pooled
    GROUP BY segment
)
SELECT segment, 'calibration_error' AS metric, average, label, value
FROM (
    SELECT segment, CAST(NULL AS VARCHAR) AS average, label, value FROM per_label
    UNION ALL
    SELECT segment, 'micro', NULL, CASE WHEN weight = 0 THEN NULL ELSE gap / weight END
    FROM micro
    UNION ALL
    SELECT segment, 'macro', NULL, avg(value) FROM per_label GROUP BY segment
    UNION ALL
    SELECT segment, 'weighted', NULL,
           coalesce(sum(value * label_support)
                    / nullif(sum(label_support) FILTER (WHERE value IS NOT NULL), 0),
                    avg(value))
    FROM per_label GROUP BY segment
    UNION ALL
    SELECT segment, 'macro_std', NULL, stddev_pop(value) FROM per_label GROUP BY segment
) AS ece
