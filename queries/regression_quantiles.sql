-- regression_quantiles: weighted quantiles of each output's absolute errors and truths, and the
-- truths' losses around them, for regression (one sort of each, after merging tied values).
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  regression_quantiles(segment, label, median_error, truth_median, truth_quantile,
--         median_loss, quantile_loss)
-- Uses:   macros/deviance.sql
--   A quantile at level q of values with weights is scikit-learn's _weighted_percentile with
--   average=True (numpy's "averaged_inverted_cdf"; np.median with unit weights): over the
--   distinct values in order, with the running weight `below` (through the value) out of
--   `total`, the first value whose `below` reaches q * total; the mean of it and the next
--   value where `below` equals q * total (within float64's eps of the total: scikit-learn's
--   eps is absolute, the same for totals of 1 and more). Rows of weight 0 take no part.
--   median_error    the weighted median of |score - truth| (median_absolute_error)
--   truth_median    the weighted median of the truth;  truth_quantile  its $pinball_alpha quantile
--   median_loss     sum(weight * |truth - truth_median|) (d2_absolute_error's denominator)
--   quantile_loss   sum(weight * pinball loss of truth_quantile at $pinball_alpha) (d2_pinball's)
--   A (segment, label) whose weights are all 0 has no row.
WITH kept AS (
    SELECT segment, label, weight, CAST(truth AS DOUBLE) AS y,
           abs(score - CAST(truth AS DOUBLE)) AS e
    FROM predictions
    WHERE weight > 0
),
blocks AS (
    SELECT segment, label, 'error' AS kind, e AS value, sum(weight) AS weight
    FROM kept
    GROUP BY segment, label, e
    UNION ALL
    SELECT segment, label, 'truth' AS kind, y AS value, sum(weight) AS weight
    FROM kept
    GROUP BY segment, label, y
),
cumulative AS (
    SELECT
        segment, label, kind, value,
        -- a value is never null (evaluate refuses a null truth or score): NULLS FIRST is
        -- every dialect's own ascending order or written as is (BigQuery's framed windows)
        sum(weight) OVER (PARTITION BY segment, label, kind ORDER BY value NULLS FIRST
                          ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS below,
        sum(weight) OVER (PARTITION BY segment, label, kind) AS total,
        lead(value) OVER (PARTITION BY segment, label, kind ORDER BY value NULLS FIRST)
            AS next_value
    FROM blocks
),
stepped AS (
    -- the running weight before each value: the previous value's own (not a sum of its own,
    -- which may round differently), so that exactly one value reaches each level
    SELECT *, lag(below) OVER (PARTITION BY segment, label, kind ORDER BY value NULLS FIRST)
           AS before
    FROM cumulative
),
levels AS (
    SELECT 'error' AS kind, 'median_error' AS name, CAST(0.5 AS DOUBLE) AS level
    UNION ALL
    SELECT 'truth' AS kind, 'truth_median' AS name, CAST(0.5 AS DOUBLE) AS level
    UNION ALL
    SELECT 'truth' AS kind, 'truth_quantile' AS name, CAST($pinball_alpha AS DOUBLE) AS level
),
quantiles AS (
    SELECT
        c.segment,
        c.label,
        l.name,
        CASE WHEN c.below - l.level * c.total > CAST(2.220446049250313e-16 AS DOUBLE) * c.total
             THEN c.value
             ELSE (c.value + coalesce(c.next_value, c.value)) / 2 END AS value
    FROM stepped AS c
    JOIN levels AS l ON c.kind = l.kind
    WHERE c.below >= l.level * c.total AND coalesce(c.before, 0) < l.level * c.total
),
picked AS (
    SELECT
        segment,
        label,
        max(value) FILTER (WHERE name = 'median_error') AS median_error,
        max(value) FILTER (WHERE name = 'truth_median') AS truth_median,
        max(value) FILTER (WHERE name = 'truth_quantile') AS truth_quantile
    FROM quantiles
    GROUP BY segment, label
)
SELECT
    q.segment,
    q.label,
    max(q.median_error) AS median_error,
    max(q.truth_median) AS truth_median,
    max(q.truth_quantile) AS truth_quantile,
    sum(b.weight * abs(b.value - q.truth_median)) AS median_loss,
    sum(b.weight * pinball(b.value, q.truth_quantile, $pinball_alpha)) AS quantile_loss
FROM picked AS q
JOIN blocks AS b
    ON b.segment IS NOT DISTINCT FROM q.segment AND b.label = q.label AND b.kind = 'truth'
GROUP BY q.segment, q.label
