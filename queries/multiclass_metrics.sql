-- multiclass_metrics: whole-segment multiclass metrics and the confusion matrix.
-- Reads:  confusion_matrix(segment, truth_label, predicted_label, weight)  (argmax_matrix.sql)
--         confusion_counts(segment, label, tp, fp, fn, tn)  (matrix_counts.sql)
-- Gives:  segment, metric, average, label, predicted, value
--   accuracy, hamming_loss (= 1 - accuracy), balanced_accuracy (mean recall over classes that
--   have true samples), mcc (Gorodkin's multiclass form; 0 when its denominator is 0),
--   cohen_kappa (NULL when undefined): one row each, average and label NULL.
--   confusion_matrix: one row per (true label, predicted label) of the segment's labels, the
--   weight of samples in that cell (zeros included); label = true label.
WITH totals AS (
    SELECT
        segment,
        sum(tp + fn) AS n,
        sum(tp) AS hits,
        sum((tp + fn) * (tp + fp)) AS chance_hits,
        sum((tp + fn) * (tp + fn)) AS true_square,
        sum((tp + fp) * (tp + fp)) AS pred_square,
        avg(tp / (tp + fn)) FILTER (WHERE tp + fn > 0) AS balanced_accuracy
    FROM confusion_counts
    GROUP BY segment
),
labels AS (
    SELECT segment, label FROM confusion_counts
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, NULL AS label, NULL AS predicted, value
FROM (
    SELECT segment, 'accuracy' AS metric, hits / nullif(n, 0) AS value FROM totals
    UNION ALL
    SELECT segment, 'hamming_loss', (n - hits) / nullif(n, 0) FROM totals
    UNION ALL
    SELECT segment, 'balanced_accuracy', balanced_accuracy FROM totals
    UNION ALL
    SELECT segment, 'mcc',
           CASE WHEN (n * n - pred_square) * (n * n - true_square) = 0 THEN 0.0
                ELSE (hits * n - chance_hits) / sqrt((n * n - pred_square) * (n * n - true_square))
           END
    FROM totals
    UNION ALL
    SELECT segment, 'cohen_kappa', 1 - (n - hits) / nullif(n - chance_hits / nullif(n, 0), 0)
    FROM totals
)
UNION ALL
SELECT t.segment, 'confusion_matrix', NULL, t.label, p.label, coalesce(m.weight, 0.0)
FROM labels AS t
JOIN labels AS p ON p.segment IS NOT DISTINCT FROM t.segment
LEFT JOIN confusion_matrix AS m
    ON m.segment IS NOT DISTINCT FROM t.segment
    AND m.truth_label = t.label AND m.predicted_label = p.label
