-- probability_metrics: log loss and Brier score of each label and their averages (binary,
-- multilabel), from probability sums.
-- Reads:  probability_sums(segment, label, weight, pos, loss_true, loss_false, squared_error)
--         (probability_sums.sql)
-- Gives:  segment, metric, average, label, value
--   log_loss per label: (loss_true + loss_false) / weight, scikit-learn's binary log_loss with
--   its clipping; brier_score per label: squared_error / weight, scikit-learn's binary
--   brier_score_loss. NULL where the label's weight is 0, and for a label of the input that a
--   segment lacks. micro: the sums pooled over labels (every (sample, label) row one case);
--   macro: mean over labels; weighted: mean weighted by the labels' positive weight, falling
--   back to macro when those sum to 0; macro_std: population standard deviation over labels.
--   Averages skip NULL values.
WITH grid AS (
    SELECT segments.segment, labels.label, s.weight, s.pos, s.loss_true, s.loss_false,
           s.squared_error
    FROM (SELECT DISTINCT segment FROM probability_sums) AS segments
    CROSS JOIN (SELECT DISTINCT label FROM probability_sums) AS labels
    LEFT JOIN probability_sums AS s
        ON s.segment IS NOT DISTINCT FROM segments.segment AND s.label = labels.label
),
sums AS (
    SELECT segment, CAST(NULL AS VARCHAR) AS average, label, weight, pos, loss_true,
           loss_false, squared_error
    FROM grid
    UNION ALL
    SELECT segment, 'micro', NULL, sum(weight), sum(pos), sum(loss_true), sum(loss_false),
           sum(squared_error)
    FROM probability_sums
    GROUP BY segment
),
long AS (
    SELECT segment, 'log_loss' AS metric, average, label, pos AS label_support,
           CASE WHEN weight = 0 THEN NULL ELSE (loss_true + loss_false) / weight END AS value
    FROM sums
    UNION ALL
    SELECT segment, 'brier_score', average, label, pos,
           CASE WHEN weight = 0 THEN NULL ELSE squared_error / weight END
    FROM sums
),
per_label AS (
    SELECT * FROM long WHERE average IS NULL
)
SELECT segment, metric, average, label, value FROM long
UNION ALL
SELECT segment, metric, 'macro', NULL, avg(value) FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, metric, 'weighted', NULL,
       coalesce(sum(value * label_support)
                / nullif(sum(label_support) FILTER (WHERE value IS NOT NULL), 0),
                avg(value))
FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, metric, 'macro_std', NULL, stddev_pop(value) FROM per_label GROUP BY segment, metric
