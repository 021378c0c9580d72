-- regression_quantile_medians: median_absolute_error of each output read off the quantiles'
-- pass, where a request asks for their D² too (registry.FUSED): their sort of the errors
-- serves both, and regression_medians.sql's own sort is not run.
-- Reads:  regression_sums(segment, label, weight),
--         regression_quantiles(segment, label, median_error)
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro average)
--   value: the weighted median of |score - truth| (regression_quantiles.sql), NULL where the
--   output's weights sum to 0 in the segment; support: that sum (regression_medians.sql's rows).
SELECT
    s.segment,
    'median_absolute_error' AS metric,
    CAST(NULL AS VARCHAR) AS average,
    s.label,
    CASE WHEN s.weight > 0 THEN q.median_error END AS value,
    s.weight AS support
FROM regression_sums AS s
LEFT JOIN regression_quantiles AS q
    ON q.segment IS NOT DISTINCT FROM s.segment AND q.label = s.label
