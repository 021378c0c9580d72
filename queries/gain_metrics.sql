-- gain_metrics: DCG and NDCG averaged over samples, weighted by sample weight (scikit-learn's
-- sample_weight); NULL where the weights sum to 0.
-- Reads:  sample_gains(segment, sample, weight, dcg, ndcg)  (sample_gains.sql)
-- Gives:  segment, metric, average, label, value  (one row per metric, average and label NULL)
WITH gains AS (
    SELECT segment, weight, dcg, ndcg FROM sample_gains
),
long AS (
    SELECT *
    FROM gains UNPIVOT INCLUDE NULLS (value FOR metric IN (dcg, ndcg))
)
SELECT
    segment,
    metric,
    CAST(NULL AS VARCHAR) AS average,
    NULL AS label,
    sum(value * weight) / nullif(sum(weight), 0) AS value
FROM long
GROUP BY segment, metric
