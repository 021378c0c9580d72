-- gain_metrics: DCG and NDCG averaged over samples, weighted by sample weight (scikit-learn's
-- sample_weight); NULL where the weights sum to 0.
-- Reads:  sample_gains(segment, sample, weight, dcg, ndcg)  (sample_gains.sql)
-- Gives:  segment, metric, average, label, value  (one row per metric, average and label NULL)
SELECT
    segment,
    'dcg' AS metric,
    CAST(NULL AS VARCHAR) AS average,
    CAST(NULL AS VARCHAR) AS label,
    sum(dcg * weight) / nullif(sum(weight), 0) AS value
FROM sample_gains
GROUP BY segment
UNION ALL
SELECT
    segment,
    'ndcg',
    CAST(NULL AS VARCHAR),
    CAST(NULL AS VARCHAR),
    sum(ndcg * weight) / nullif(sum(weight), 0)
FROM sample_gains
GROUP BY segment
