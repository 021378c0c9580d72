-- regression_metrics: the regression metrics of each output (label) from its sums, and their
-- averages (mse, rmse, mae, mape and max_error: regression_errors.sql, one pass of their own
-- sums, or regression_sum_errors.sql off these).
-- Reads:  regression_sums(segment, label, weight, sse, sst, sde, ssle, pinball, poisson, gamma,
--         tweedie, tweedie_of_mean)
-- Gives:  segment, metric, average, label, value
--   per output (label, average NULL): r2 = 1 - sse / sst,
--   explained_variance = 1 - sde / sst, mean_squared_log_error = ssle / weight and
--   its root, mean_pinball_loss = pinball / weight, the mean Poisson, gamma and Tweedie
--   deviances, d2_tweedie = 1 - tweedie / tweedie_of_mean.
--   A segment whose weights sum to 0: NULL. A label of the input that a segment lacks: NULL.
--   A sum NULL as a row lies outside its loss's domain: NULL (evaluate refuses such rows).
--   R², explained variance and D² where the truth is constant (sst = 0, e.g. a single sample)
--   are undefined: NULL, where scikit-learn's default force_finite=True gives 1.0 (perfect
--   predictions) or 0.0.
--   macro: mean over the outputs with a value (scikit-learn's multioutput='uniform_average'
--   when every output has one; root_mean_squared_log_error: the mean of per-output roots).
--   variance_weighted (r2, explained_variance): outputs weighted by their sst, i.e.
--   1 - sum(numerator) / sum(sst) over outputs with a defined value; NULL when none has one.
WITH grid AS (
    SELECT segments.segment, labels.label, s.weight, s.sse, s.sst, s.sde, s.ssle, s.pinball,
           s.poisson, s.gamma, s.tweedie, s.tweedie_of_mean
    FROM (SELECT DISTINCT segment FROM regression_sums) AS segments
    CROSS JOIN (SELECT DISTINCT label FROM regression_sums) AS labels
    LEFT JOIN regression_sums AS s
        ON s.segment IS NOT DISTINCT FROM segments.segment AND s.label = labels.label
),
scores AS (
    SELECT
        segment, label, sse, sde, sst,
        CASE WHEN weight > 0 AND sst > 0 THEN 1 - sse / sst END AS r2,
        CASE WHEN weight > 0 AND sst > 0 THEN 1 - sde / sst END AS explained_variance,
        ssle / nullif(weight, 0) AS mean_squared_log_error,
        sqrt(ssle / nullif(weight, 0)) AS root_mean_squared_log_error,
        pinball / nullif(weight, 0) AS mean_pinball_loss,
        poisson / nullif(weight, 0) AS mean_poisson_deviance,
        gamma / nullif(weight, 0) AS mean_gamma_deviance,
        tweedie / nullif(weight, 0) AS mean_tweedie_deviance,
        CASE WHEN weight > 0 AND sst > 0 THEN 1 - tweedie / nullif(tweedie_of_mean, 0) END
            AS d2_tweedie
    FROM grid
),
long AS (
    SELECT *
    FROM scores UNPIVOT INCLUDE NULLS (value FOR metric IN (
        r2, explained_variance, mean_squared_log_error, root_mean_squared_log_error,
        mean_pinball_loss, mean_poisson_deviance, mean_gamma_deviance, mean_tweedie_deviance,
        d2_tweedie))
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, label, value FROM long
UNION ALL
SELECT segment, metric, 'macro', NULL, avg(value) FROM long GROUP BY segment, metric
UNION ALL
SELECT segment, 'r2', 'variance_weighted', NULL,
       1 - sum(sse) FILTER (WHERE r2 IS NOT NULL) / sum(sst) FILTER (WHERE r2 IS NOT NULL)
FROM scores GROUP BY segment
UNION ALL
SELECT segment, 'explained_variance', 'variance_weighted', NULL,
       1 - sum(sde) FILTER (WHERE explained_variance IS NOT NULL)
           / sum(sst) FILTER (WHERE explained_variance IS NOT NULL)
FROM scores GROUP BY segment
