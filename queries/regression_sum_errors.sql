-- regression_sum_errors: mse, rmse, mae, mape and max_error of each output read off the
-- regression sums, where a request asks for a metric of theirs too (registry.FUSED): one pass
-- over the predictions serves both, and regression_errors.sql's own is not run.
-- Reads:  regression_sums(segment, label, weight, sse, sae, sape, max_error)
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro average)
--   regression_errors.sql's rows, from the same sums.
WITH scores AS (
    SELECT
        segment,
        label,
        weight,
        sse / nullif(weight, 0) AS mse,
        sqrt(sse / nullif(weight, 0)) AS rmse,
        sae / nullif(weight, 0) AS mae,
        sape / nullif(weight, 0) AS mape,
        max_error
    FROM regression_sums
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, label, value, weight AS support
FROM scores UNPIVOT INCLUDE NULLS (value FOR metric IN (mse, rmse, mae, mape, max_error))
