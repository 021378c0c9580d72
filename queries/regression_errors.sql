-- regression_errors: mse, rmse, mae, mape and max_error of each output (label), from one pass
-- of sums over the predictions: no means first, no logs or deviances (regression_sums.sql's
-- terms, which these metrics alone do not read, and which a request pays for as a whole: each
-- statistics step is made once, in full). With a metric of regression_sums asked too, these
-- come off its table instead (regression_sum_errors.sql, registry.FUSED): one pass, not two.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro average)
--   As regression_sums.sql and regression_metrics.sql: mse = sum(weight * error²) / weight,
--   rmse = sqrt(mse), mae = sum(weight * |error|) / weight, mape = sum(weight * |error| /
--   max(|truth|, eps)) / weight (eps = 2^-52), max_error = max |error| over the rows of
--   positive weight. NULL where the output's weights sum to 0 in the segment; support: that sum.
--   macro (label_averages.sql): mean over the outputs with a value (rmse: of their RMSEs).
WITH errors AS (
    SELECT segment, label, weight, CAST(truth AS DOUBLE) AS y,
           score - CAST(truth AS DOUBLE) AS error
    FROM predictions
),
sums AS (
    SELECT
        segment,
        label,
        sum(weight) AS weight,
        sum(weight * (error * error)) AS sse,
        sum(weight * abs(error)) AS sae,
        sum(weight * (abs(error) / greatest(abs(y), CAST(2.220446049250313e-16 AS DOUBLE))))
            AS sape,
        max(abs(error)) FILTER (WHERE weight > 0) AS max_error
    FROM errors
    GROUP BY segment, label
),
scores AS (
    SELECT
        segment,
        label,
        weight,
        sse / nullif(weight, 0) AS mse,
        sqrt(sse / nullif(weight, 0)) AS rmse,
        sae / nullif(weight, 0) AS mae,
        sape / nullif(weight, 0) AS mape,
        max_error
    FROM sums
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, label, value, weight AS support
FROM scores UNPIVOT INCLUDE NULLS (value FOR metric IN (mse, rmse, mae, mape, max_error))
