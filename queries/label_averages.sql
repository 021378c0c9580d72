-- label_averages: every label in every segment, and the averages over labels, from the rows of
-- a final step that gives one row per label (decision_metrics, ranking_metrics,
-- probability_metrics, calibration_metrics: the steps the registry marks `averaged`).
-- Reads:  label_values(segment, metric, average, label, value, support)  (that step's rows)
-- Gives:  segment, metric, average, label, value
--   A row with a label and average NULL is a label's value; its support is the label's
--   positive weight. The step's other rows (micro: label NULL; a one-row metric such as
--   hamming_loss: both NULL) are kept as they are.
--   Every (metric, average, label) that a segment has, every segment has: a label of the input
--   that a segment lacks gets NULL values.
--   macro: mean over labels; weighted: mean weighted by support, falling back to macro when
--   no label with a value has support; macro_std: population standard deviation over labels.
--   Averages skip NULL values (scikit-learn's zero_division=np.nan). Supports enter as shares
--   of the largest, so that a value times a support cannot overflow, and values as shares of
--   the largest for their spread (a squared count under- or overflows at weights of 1e±300).
WITH segments AS (
    SELECT DISTINCT segment FROM label_values
),
row_keys AS (
    SELECT DISTINCT metric, average, label FROM label_values
),
grid AS (
    SELECT s.segment, k.metric, k.average, k.label, v.value, v.support
    FROM segments AS s
    CROSS JOIN row_keys AS k
    LEFT JOIN label_values AS v
        ON v.segment IS NOT DISTINCT FROM s.segment AND v.metric = k.metric
        AND v.average IS NOT DISTINCT FROM k.average AND v.label IS NOT DISTINCT FROM k.label
),
per_label AS (
    SELECT segment, metric, value,
           support / nullif(max(support) OVER (PARTITION BY segment, metric), 0) AS share,
           max(abs(value)) OVER (PARTITION BY segment, metric) AS scale
    FROM grid
    WHERE average IS NULL AND label IS NOT NULL
)
SELECT segment, metric, average, label, value FROM grid
UNION ALL
SELECT segment, metric, 'macro', NULL, avg(value) FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, metric, 'weighted', NULL,
       coalesce(sum(value * share) / nullif(sum(share) FILTER (WHERE value IS NOT NULL), 0),
                avg(value))
FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, metric, 'macro_std', NULL,
       coalesce(stddev_pop(value / nullif(scale, 0)) * max(scale), stddev_pop(value))
FROM per_label GROUP BY segment, metric
