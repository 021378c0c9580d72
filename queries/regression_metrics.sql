-- regression_metrics: MSE, RMSE, MAE, MAPE and R² of each output (label), and their averages.
-- Reads:  regression_sums(segment, label, weight, mean_truth, sse, sae, sape, sst)
-- Gives:  segment, metric, average, label, value
--   per output (label, average NULL): mse = sse / weight, rmse = sqrt(mse), mae = sae / weight,
--   mape = sape / weight (a share, not a percentage, as scikit-learn), r2 = 1 - sse / sst.
--   A segment whose weights sum to 0: NULL. A label of the input that a segment lacks: NULL.
--   R² where the truth is constant (sst = 0, e.g. a single sample) is undefined: NULL, where
--   scikit-learn's default force_finite=True gives 1.0 (perfect predictions) or 0.0.
--   macro: mean over the outputs with a value (scikit-learn's multioutput='uniform_average'
--   when every output has one; rmse: the mean of per-output RMSE, as scikit-learn).
--   variance_weighted (r2 only): outputs weighted by their sst, i.e. 1 - sum(sse) / sum(sst)
--   over outputs with a defined R²; NULL when none has one.
WITH grid AS (
    SELECT segments.segment, labels.label, s.weight, s.sse, s.sae, s.sape, s.sst
    FROM (SELECT DISTINCT segment FROM regression_sums) AS segments
    CROSS JOIN (SELECT DISTINCT label FROM regression_sums) AS labels
    LEFT JOIN regression_sums AS s
        ON s.segment IS NOT DISTINCT FROM segments.segment AND s.label = labels.label
),
scores AS (
    SELECT
        segment, label, sse, sst,
        sse / nullif(weight, 0) AS mse,
        sqrt(sse / nullif(weight, 0)) AS rmse,
        sae / nullif(weight, 0) AS mae,
        sape / nullif(weight, 0) AS mape,
        CASE WHEN weight > 0 AND sst > 0 THEN 1 - sse / sst END AS r2
    FROM grid
),
long AS (
    SELECT *
    FROM scores UNPIVOT INCLUDE NULLS (value FOR metric IN (mse, rmse, mae, mape, r2))
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, label, value FROM long
UNION ALL
SELECT segment, metric, 'macro', NULL, avg(value) FROM long GROUP BY segment, metric
UNION ALL
SELECT segment, 'r2', 'variance_weighted', NULL,
       1 - sum(sse) FILTER (WHERE r2 IS NOT NULL) / sum(sst) FILTER (WHERE r2 IS NOT NULL)
FROM scores GROUP BY segment
