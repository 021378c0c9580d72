-- sample_metrics: metrics computed per sample over its labels, then averaged over samples
-- (weighted by sample weight), as scikit-learn's average='samples' (multilabel).
-- Reads:  sample_counts(segment, sample, weight, tp, fp, fn, top_true)  (sample_counts.sql)
-- Params: $beta (of F-beta), $zero_division (the value of 0/0: 0, 1 or NULL)
-- Uses:   macros/fbeta.sql
-- Gives:  segment, metric, average, label, value, undefined_samples
--   precision, recall, f1, fbeta, jaccard with average 'samples': the weighted mean of the
--   per-sample values, skipping NULLs (0/0 with zero_division NULL). As in scikit-learn, the
--   counts of a sample are scaled by its weight, so a zero-weight sample's values are 0/0.
--   Every value here is a mean weighted by the samples' weights: NULL in a segment whose
--   weights are all 0 (scikit-learn refuses such weights).
--   undefined_samples: how many samples of positive weight the mean skipped (0/0: where
--   scikit-learn's default, zero_division='warn', counts them as 0 instead).
--   subset_accuracy: share of samples whose every label is decided right (exact match);
--   zero_one_loss: share of samples with some label decided wrong (scikit-learn's multilabel
--   zero_one_loss, 1 - subset_accuracy).
--   adjusted_accuracy: share of samples whose top-scored label is true.
WITH params AS (
    SELECT CAST($beta AS DOUBLE) AS beta, CAST($zero_division AS DOUBLE) AS zero_division
),
counts AS (
    SELECT segment, weight, top_true, fp + fn = 0 AS exact,
           weight * tp AS tp, weight * fp AS fp, weight * fn AS fn
    FROM sample_counts
),
scores AS (
    SELECT
        segment,
        weight,
        CASE WHEN tp + fp = 0 THEN zero_division ELSE tp / (tp + fp) END AS precision,
        CASE WHEN tp + fn = 0 THEN zero_division ELSE tp / (tp + fn) END AS recall,
        CASE WHEN tp + fp + fn = 0 THEN zero_division ELSE 2 * tp / (2 * tp + fn + fp) END AS f1,
        fbeta_score(tp, fp, fn, beta, zero_division) AS fbeta,
        CASE WHEN tp + fp + fn = 0 THEN zero_division ELSE tp / (tp + fp + fn) END AS jaccard,
        CASE WHEN exact THEN 1.0 ELSE 0.0 END AS subset_accuracy,
        CASE WHEN exact THEN 0.0 ELSE 1.0 END AS zero_one_loss,
        CASE WHEN top_true THEN 1.0 ELSE 0.0 END AS adjusted_accuracy
    FROM counts, params
),
long AS (
    SELECT *
    FROM scores UNPIVOT INCLUDE NULLS (
        value FOR metric IN (precision, recall, f1, fbeta, jaccard, subset_accuracy, zero_one_loss,
                         adjusted_accuracy)
    )
)
SELECT
    segment,
    metric,
    CASE WHEN metric IN ('precision', 'recall', 'f1', 'fbeta', 'jaccard') THEN 'samples' END
        AS average,
    NULL AS label,
    sum(value * weight) / nullif(sum(weight) FILTER (WHERE value IS NOT NULL), 0) AS value,
    count(*) FILTER (WHERE value IS NULL AND weight > 0) AS undefined_samples
FROM long
GROUP BY segment, metric
