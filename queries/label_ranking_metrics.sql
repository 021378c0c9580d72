-- label_ranking_metrics: ranking across labels, per sample, averaged over samples weighted by
-- sample weight (scikit-learn's sample_weight); NULL where the weights sum to 0.
-- Reads:  sample_ranks(segment, sample, weight, n_labels, n_true, coverage, wrong_pairs, lrap,
--         top_true, n_at_k, hits_at_k)  (sample_ranks.sql)
-- Gives:  segment, metric, average, label, value  (one row per metric, average and label NULL)
--   coverage_error: mean coverage; a sample with no true label counts 0 (scikit-learn).
--   label_ranking_loss: mean share of the sample's (true, false) pairs ranked wrong (ties are
--     wrong); a sample with no true or no false label counts 0 (scikit-learn).
--   label_ranking_average_precision: mean lrap (scikit-learn's LRAP).
--   one_error: share of samples whose top-scored label (ties: the smallest label) is false,
--     = 1 - adjusted_accuracy (multilabel) = 1 - accuracy (multiclass).
--   precision_at_k: mean of hits_at_k / min(k, n_labels): a sample with fewer than k labels
--     divides by its number of labels.
--   recall_at_k: mean of hits_at_k / n_true over the samples that have a true label (the
--     others are NULL and skipped); NULL when those samples' weights sum to 0.
WITH scores AS (
    SELECT
        segment,
        weight,
        CAST(coverage AS DOUBLE) AS coverage_error,
        CASE WHEN n_true = 0 OR n_true = n_labels THEN 0.0
             ELSE CAST(wrong_pairs AS DOUBLE) / (CAST(n_true AS DOUBLE) * (n_labels - n_true))
        END AS label_ranking_loss,
        CAST(lrap AS DOUBLE) AS label_ranking_average_precision,
        CASE WHEN top_true THEN 0.0 ELSE 1.0 END AS one_error,
        CAST(hits_at_k AS DOUBLE) / n_at_k AS precision_at_k,
        CASE WHEN n_true = 0 THEN NULL ELSE CAST(hits_at_k AS DOUBLE) / n_true END AS recall_at_k
    FROM sample_ranks
),
long AS (
    SELECT *
    FROM scores UNPIVOT INCLUDE NULLS (
        value FOR metric IN (coverage_error, label_ranking_loss, label_ranking_average_precision,
                             one_error, precision_at_k, recall_at_k)
    )
)
SELECT
    segment,
    metric,
    CAST(NULL AS VARCHAR) AS average,
    NULL AS label,
    sum(value * weight) / nullif(sum(weight) FILTER (WHERE value IS NOT NULL), 0) AS value
FROM long
GROUP BY segment, metric
