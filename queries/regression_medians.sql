-- regression_medians: the weighted median of each output's absolute errors, for regression
-- (median_absolute_error): one sort of each output's rows by their error, nothing else.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro average)
--   The median is scikit-learn's _weighted_percentile with average=True (numpy's
--   "averaged_inverted_cdf"; np.median with unit weights), as regression_quantiles.sql takes
--   it, read off the rows themselves: no grouping of tied values (a hash table of every
--   distinct error) before the sort. In error order, with the running weight `below` (through
--   the row) out of `total`, the first row whose `below` reaches total / 2 holds the median;
--   where its `below` equals total / 2 (within float64's eps of the total) the median is the
--   mean of its error and the next row's (a tied row's error is its own). The running weight,
--   the error and the next row's error all grow along the order, so that first row's three
--   are each the least over the rows whose `below` reaches total / 2: plain aggregates, no
--   second window and no join. As scikit-learn's running sum, a tie's weights are added a
--   row at a time.
--   A row of weight 0 takes no part: its error is NULL, first in the order, its `below` 0.
--   value: NULL where the output's weights sum to 0 in the segment. support: that sum.
WITH errors AS (
    SELECT segment, label, weight,
           CASE WHEN weight > 0 THEN abs(score - CAST(truth AS DOUBLE)) END AS e
    FROM predictions
),
cumulative AS (
    SELECT
        segment, label, e,
        -- NULLS FIRST is every dialect's own ascending order or written as is (BigQuery's
        -- framed windows)
        sum(weight) OVER (PARTITION BY segment, label ORDER BY e NULLS FIRST
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS below,
        sum(weight) OVER (PARTITION BY segment, label) AS total,
        lead(e) OVER (PARTITION BY segment, label ORDER BY e NULLS FIRST) AS next_value
    FROM errors
),
reached AS (
    SELECT segment, label, max(total) AS total, min(below) AS below, min(e) AS value,
           min(next_value) AS next_value
    FROM cumulative
    WHERE below >= 0.5 * total
    GROUP BY segment, label
)
SELECT
    segment,
    'median_absolute_error' AS metric,
    CAST(NULL AS VARCHAR) AS average,
    label,
    CASE WHEN below - 0.5 * total > CAST(2.220446049250313e-16 AS DOUBLE) * total THEN value
         ELSE (value + coalesce(next_value, value)) / 2 END AS value,
    total AS support
FROM reached
