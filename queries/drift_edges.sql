-- drift_edges: the reference's quantile edges of each numeric compared column, segment and
-- label: for i = 1 .. $bins - 1, the smallest reference value x with F_r(x) >= i / $bins (the
-- inverse of its weighted distribution function), each edge once. The bins are then
-- (-inf, e1], (e1, e2], ..., (ek, +inf).
-- Reads:  drift_points(segment, compared, label, value, reference_weight, ...)
-- Params: $bins
-- Gives:  drift_edges(segment, compared, label, edge)
--   A value is an edge when some i in 1 .. $bins - 1 has before * $bins < i * total <= through
--   * $bins (before, through: the reference weight below it and up to it): i is the largest
--   such, least(floor(through * $bins / total), $bins - 1), compared in products, not shares.
WITH running AS (
    SELECT
        segment,
        compared,
        label,
        value,
        sum(reference_weight) OVER (PARTITION BY segment, compared, label ORDER BY value
                                    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS through,
        sum(reference_weight) OVER (PARTITION BY segment, compared, label) AS total
    FROM drift_points
    WHERE reference_weight > 0
),
stepped AS (
    SELECT
        segment,
        compared,
        label,
        value,
        total,
        coalesce(lag(through) OVER (PARTITION BY segment, compared, label ORDER BY value), 0)
            AS before,
        least(floor(through * $bins / total), $bins - 1) AS quantile
    FROM running
)
SELECT segment, compared, label, value AS edge
FROM stepped
WHERE quantile >= 1 AND quantile * total > before * $bins
