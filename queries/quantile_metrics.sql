-- quantile_metrics: d2_absolute_error and d2_pinball of each output (label), and their macro
-- average (median_absolute_error: regression_medians.sql, or regression_quantile_medians.sql
-- off the same quantiles).
-- Reads:  regression_sums(segment, label, weight, sae, sst, pinball),
--         regression_quantiles(segment, label, median_loss, quantile_loss)
-- Gives:  segment, metric, average, label, value
--   d2_absolute_error = 1 - sae / median_loss;
--   d2_pinball = 1 - pinball / quantile_loss (the pinball loss at pinball_alpha of the predictions
--   over that of the truth's weighted pinball_alpha quantile, scikit-learn's d2_pinball_score).
--   A segment whose weights sum to 0, or a label it lacks: NULL. D² where the truth is
--   constant (sst = 0, e.g. a single sample) is undefined: NULL, where scikit-learn's
--   force_finite gives 1.0 (perfect predictions) or 0.0.
--   macro: mean over the outputs with a value (scikit-learn's multioutput='uniform_average'
--   when every output has one).
WITH grid AS (
    SELECT segments.segment, labels.label, s.weight, s.sae, s.sst, s.pinball, q.median_loss,
           q.quantile_loss
    FROM (SELECT DISTINCT segment FROM regression_sums) AS segments
    CROSS JOIN (SELECT DISTINCT label FROM regression_sums) AS labels
    LEFT JOIN regression_sums AS s
        ON s.segment IS NOT DISTINCT FROM segments.segment AND s.label = labels.label
    LEFT JOIN regression_quantiles AS q
        ON q.segment IS NOT DISTINCT FROM segments.segment AND q.label = labels.label
),
scores AS (
    SELECT
        segment,
        label,
        CASE WHEN weight > 0 AND sst > 0 THEN 1 - sae / nullif(median_loss, 0) END
            AS d2_absolute_error,
        CASE WHEN weight > 0 AND sst > 0 THEN 1 - pinball / nullif(quantile_loss, 0) END
            AS d2_pinball
    FROM grid
),
long AS (
    SELECT *
    FROM scores UNPIVOT INCLUDE NULLS (value FOR metric IN (d2_absolute_error, d2_pinball))
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, label, value FROM long
UNION ALL
SELECT segment, metric, 'macro', NULL, avg(value) FROM long GROUP BY segment, metric
