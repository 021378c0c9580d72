-- top_k_metrics: top-k accuracy, the weighted share of samples whose true label is among the
-- $k highest-scored (ties as in true_ranks.sql).
-- Reads:  true_ranks(segment, sample, weight, n_above)  (true_ranks.sql)
-- Params: $k
-- Gives:  segment, metric, average, label, value
SELECT
    segment,
    'top_k_accuracy' AS metric,
    CAST(NULL AS VARCHAR) AS average,
    NULL AS label,
    coalesce(sum(weight) FILTER (WHERE n_above < $k), 0) / nullif(sum(weight), 0) AS value
FROM true_ranks
GROUP BY segment
