-- top_k_metrics: top-k accuracy and the multiclass hinge loss, from each sample's rank and
-- margin of its true label.
-- Reads:  true_ranks(segment, sample, weight, n_above, margin)  (true_ranks.sql)
-- Params: $k
-- Gives:  segment, metric, average, label, value
--   top_k_accuracy: the weighted share of samples whose true label is among the $k
--   highest-scored (ties as in true_ranks.sql).
--   hinge_loss: the weighted mean of max(0, 1 - margin), scores read as decision values, as
--   scikit-learn's multiclass hinge_loss (a sample without another label: no loss).
--   Both NULL where every weight is 0.
WITH totals AS (
    SELECT
        segment,
        coalesce(sum(weight) FILTER (WHERE n_above < $k), 0) AS top_k,
        coalesce(sum(weight * greatest(1 - margin, 0)), 0) AS hinge,
        sum(weight) AS weight
    FROM true_ranks
    GROUP BY segment
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, NULL AS label, value
FROM (
    SELECT segment, 'top_k_accuracy' AS metric, top_k / nullif(weight, 0) AS value
    FROM totals
    UNION ALL
    SELECT segment, 'hinge_loss', hinge / nullif(weight, 0)
    FROM totals
) AS metrics
