-- drift_histogram: each side's weight and rows in each bin of each numeric compared column,
-- segment and label: the bins (-inf, e1], (e1, e2], ..., (ek, +inf) of its edges, found in one
-- pass down the values and edges in order (a value equal to an edge falls in the bin it
-- closes). A bin that no row falls in has no row.
-- Reads:  drift_points(segment, compared, label, value, reference_weight, current_weight,
--                      reference_rows, current_rows), drift_edges(segment, compared, label, edge)
-- Gives:  drift_bins(segment, compared, label, bins, reference_weight, current_weight,
--                    reference_rows, current_rows)
--   bins  the number of bins of the column, segment and label (edges + 1), empty ones included
WITH marked AS (
    SELECT segment, compared, label, value, reference_weight, current_weight, reference_rows,
           current_rows, 0 AS is_edge
    FROM drift_points
    UNION ALL
    SELECT segment, compared, label, edge, 0, 0, 0, 0, 1
    FROM drift_edges
),
placed AS (
    SELECT
        *,
        sum(is_edge) OVER (PARTITION BY segment, compared, label ORDER BY value, is_edge
                           ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS bin,
        sum(is_edge) OVER (PARTITION BY segment, compared, label) + 1 AS bins
    FROM marked
)
SELECT
    segment,
    compared,
    label,
    max(bins) AS bins,
    sum(reference_weight) AS reference_weight,
    sum(current_weight) AS current_weight,
    sum(reference_rows) AS reference_rows,
    sum(current_rows) AS current_rows
FROM placed
WHERE is_edge = 0
GROUP BY segment, compared, label, bin
