-- multiclass_metrics: whole-segment multiclass metrics and the confusion matrix.
-- Reads:  confusion_matrix(segment, truth_label, predicted_label, weight)  (argmax_matrix.sql)
--         confusion_counts(segment, label, tp, fp, fn, tn)  (matrix_counts.sql)
-- Gives:  segment, metric, average, label, predicted, value
--   accuracy, hamming_loss (the share of errors), zero_one_loss (1 - accuracy, as
--   scikit-learn computes it), balanced_accuracy (mean recall over classes that
--   have true samples), mcc (Gorodkin's multiclass form; 0 when its denominator is 0),
--   cohen_kappa (NULL when undefined): one row each, average and label NULL.
--   confusion_matrix: one row per (true label, predicted label) of the segment's labels, the
--   weight of samples in that cell (zeros included); label = true label.
WITH shares AS (
    -- every product of counts is taken of shares of the segment's weight n, so that none
    -- under- or overflows (weights of 1e-300 or 1e300 give the same values as weights of 1)
    SELECT
        segment, tp, fp, fn,
        sum(tp + fn) OVER (PARTITION BY segment) AS n,
        (tp + fn) / nullif(sum(tp + fn) OVER (PARTITION BY segment), 0) AS true_share,
        (tp + fp) / nullif(sum(tp + fn) OVER (PARTITION BY segment), 0) AS pred_share
    FROM confusion_counts
),
totals AS (
    SELECT
        segment,
        max(n) AS n,
        sum(tp) / nullif(max(n), 0) AS accuracy,
        sum(fn) / nullif(max(n), 0) AS errors,
        -- one class predicted (or true) for all: MCC's denominator is 0
        count(*) FILTER (WHERE tp + fp > 0) <= 1 OR count(*) FILTER (WHERE tp + fn > 0) <= 1
            AS one_class,
        sum(true_share * pred_share) AS chance,
        sum(true_share * true_share) AS true_square,
        sum(pred_share * pred_share) AS pred_square,
        avg(tp / (tp + fn)) FILTER (WHERE tp + fn > 0) AS balanced_accuracy
    FROM shares
    GROUP BY segment
),
labels AS (
    SELECT segment, label FROM confusion_counts
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, NULL AS label, NULL AS predicted, value
FROM (
    SELECT segment, 'accuracy' AS metric, accuracy AS value FROM totals
    UNION ALL
    SELECT segment, 'hamming_loss', errors FROM totals
    UNION ALL
    SELECT segment, 'zero_one_loss', 1 - accuracy FROM totals
    UNION ALL
    SELECT segment, 'balanced_accuracy', balanced_accuracy FROM totals
    UNION ALL
    SELECT segment, 'mcc',
           CASE WHEN n = 0 OR one_class THEN 0.0
                ELSE (accuracy - chance) / sqrt((1 - pred_square) * (1 - true_square))
           END
    FROM totals
    UNION ALL
    SELECT segment, 'cohen_kappa', 1 - errors / nullif(1 - chance, 0)
    FROM totals
)
UNION ALL
SELECT t.segment, 'confusion_matrix', NULL, t.label, p.label, coalesce(m.weight, 0.0)
FROM labels AS t
JOIN labels AS p ON p.segment IS NOT DISTINCT FROM t.segment
LEFT JOIN confusion_matrix AS m
    ON m.segment IS NOT DISTINCT FROM t.segment
    AND m.truth_label = t.label AND m.predicted_label = p.label
