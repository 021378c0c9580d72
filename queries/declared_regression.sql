-- declared_regression: the metrics declared with me.define over the regression sums, each one
-- expression over the sums of each output (label) and of the outputs pooled
-- (mleval_sql/declared.py).
-- Reads:  regression_sums(segment, label, weight, mean_truth, sse, sae, sape, sst, se)
--         (regression_sums.sql)
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         outputs and the macro mean)
--   per output: average NULL, support the output's weight (n).
--   micro: the expression over the sums summed over outputs.
--   An expression reads the columns of `statistics`, each a sum of weight * ...:
--   n (weight), error (prediction - truth), absolute_error, squared_error, percentage_error
--   (|error| / max(|truth|, eps), as MAPE), truth, truth_squared and squared_deviation
--   ((truth - mean truth)^2 of the output: R²'s total sum of squares). As written, the last
--   SELECT gives no rows; the engines put one SELECT per declared metric in its place, the
--   expression rendered by sqlglot from its checked tree (a division by zero NULL).
WITH sums AS (
    SELECT segment, label, weight AS n, se AS error, sae AS absolute_error,
           sse AS squared_error, sape AS percentage_error,
           coalesce(weight * mean_truth, 0.0) AS truth,
           coalesce(sst + weight * mean_truth * mean_truth, 0.0) AS truth_squared,
           coalesce(sst, 0.0) AS squared_deviation
    FROM regression_sums
),
pooled AS (
    SELECT segment, CAST(NULL AS VARCHAR) AS average, label, n, error, absolute_error,
           squared_error, percentage_error, truth, truth_squared, squared_deviation
    FROM sums
    UNION ALL
    SELECT segment, 'micro', NULL, sum(n), sum(error), sum(absolute_error), sum(squared_error),
           sum(percentage_error), sum(truth), sum(truth_squared), sum(squared_deviation)
    FROM sums
    GROUP BY segment
),
statistics AS (
    SELECT segment, average, label, CAST(n AS DOUBLE) AS n, CAST(error AS DOUBLE) AS error,
           CAST(absolute_error AS DOUBLE) AS absolute_error,
           CAST(squared_error AS DOUBLE) AS squared_error,
           CAST(percentage_error AS DOUBLE) AS percentage_error,
           CAST(truth AS DOUBLE) AS truth, CAST(truth_squared AS DOUBLE) AS truth_squared,
           CAST(squared_deviation AS DOUBLE) AS squared_deviation, CAST(n AS DOUBLE) AS support
    FROM pooled
)
SELECT segment, CAST(NULL AS VARCHAR) AS metric, average, label, CAST(NULL AS DOUBLE) AS value,
       support
FROM statistics
WHERE 1 = 0
