-- estimated_metrics: each label's performance estimated without the truth (confidence-based
-- estimation): the metrics of its expected confusion counts, and the ROC AUC of its expected
-- outcomes (each row a positive of weight w * probability and a negative of w * (1 -
-- probability)).
-- Reads:  estimated_counts(segment, label, tp, fp, fn, tn, p, n, noise_positive,
--         noise_negative, pairs)  (estimated_counts.sql)
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro, weighted and macro_std averages)
--   estimated_accuracy (tp + tn) / (p + n), estimated_precision tp / (tp + fp),
--   estimated_recall tp / p, estimated_f1 2 tp / (2 tp + fp + fn), estimated_roc_auc
--   pairs / (p n); NULL where the denominator is 0. support: the expected positive weight p.
SELECT segment, 'estimated_accuracy' AS metric, CAST(NULL AS VARCHAR) AS average, label,
       (tp + tn) / nullif(p + n, 0) AS value, p AS support
FROM estimated_counts
UNION ALL
SELECT segment, 'estimated_precision', NULL, label, tp / nullif(tp + fp, 0), p
FROM estimated_counts
UNION ALL
SELECT segment, 'estimated_recall', NULL, label, tp / nullif(p, 0), p
FROM estimated_counts
UNION ALL
SELECT segment, 'estimated_f1', NULL, label, 2 * tp / nullif(2 * tp + fp + fn, 0), p
FROM estimated_counts
UNION ALL
SELECT segment, 'estimated_roc_auc', NULL, label,
       CASE WHEN p > 0 AND n > 0 THEN pairs / (p * n) END, p
FROM estimated_counts
