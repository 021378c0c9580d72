-- drift_histogram: each side's weight and rows in each bin of each numeric compared column,
-- segment and label, and the exact statistics' parts in each bin, from one pass down its
-- values in order: the weighted distribution functions F_r (reference) and F_c (current), F(x) =
-- the weight at values <= x over the side's weight.
-- Reads:  drift_points(segment, compared, label, value, bin, given_bins, reference_weight,
--                      current_weight, reference_rows, current_rows),
--         drift_sizes(segment, compared, label, current, weight, ...)
-- Params: $bins
-- Gives:  drift_bins(segment, compared, label, bins, reference_weight, current_weight,
--                    reference_rows, current_rows, ks, wasserstein)
--   The bins are (-inf, e1], (e1, e2], ..., (ek, +inf): given (a point's bin, given_bins of
--   them), or the reference's quantile edges: for i = 1 .. $bins - 1 the smallest reference value
--   x with F_r(x) >= i / $bins, each edge once. A value v lies above exactly the edges of the
--   levels i <= below(v) * $bins / total (below: the reference weight at values < v), so its
--   bin is least(floor(below * $bins / total), $bins - 1), compared in products, not shares; a
--   value is an edge where some level is reached at it. A bin that no value falls in has no row.
--   ks           the largest |F_r - F_c| at the bin's values (Kolmogorov-Smirnov's D: the
--                largest over the bins)
--   wasserstein  the integral of |F_r - F_c| from each of the bin's values to the next value
--                (Wasserstein-1: their sum over the bins); NULL where either side has no weight
WITH totals AS (
    SELECT
        segment,
        compared,
        label,
        sum(CASE WHEN NOT current THEN weight END) AS reference_total,
        sum(CASE WHEN current THEN weight END) AS current_total
    FROM drift_sizes
    GROUP BY segment, compared, label
),
running AS (
    SELECT
        p.segment,
        p.compared,
        p.label,
        p.value,
        p.bin,
        p.given_bins,
        p.reference_weight,
        p.current_weight,
        p.reference_rows,
        p.current_rows,
        t.reference_total,
        t.current_total,
        -- value is never null here: NULLS FIRST, every dialect's own order ascending or
        -- written as is (BigQuery cannot reorder nulls in a window with a frame)
        sum(p.reference_weight) OVER (
            PARTITION BY p.segment, p.compared, p.label ORDER BY p.value NULLS FIRST
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS reference_through,
        sum(p.current_weight) OVER (
            PARTITION BY p.segment, p.compared, p.label ORDER BY p.value NULLS FIRST
            ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS current_through,
        lead(p.value) OVER (PARTITION BY p.segment, p.compared, p.label ORDER BY p.value
                            NULLS FIRST)
            AS next_value
    FROM drift_points AS p
    JOIN totals AS t
        ON p.segment IS NOT DISTINCT FROM t.segment AND p.compared = t.compared
        AND p.label IS NOT DISTINCT FROM t.label
),
placed AS (
    SELECT
        *,
        next_value - value AS width,
        reference_through / nullif(reference_total, 0) AS reference_cdf,
        current_through / nullif(current_total, 0) AS current_cdf,
        least(floor((reference_through - reference_weight) * $bins
                    / nullif(reference_total, 0)), $bins - 1) AS level_below,
        least(floor(reference_through * $bins / nullif(reference_total, 0)), $bins - 1)
            AS level_through
    FROM running
)
SELECT
    segment,
    compared,
    label,
    coalesce(max(max(given_bins)) OVER whole,
             sum(count(CASE WHEN level_through > coalesce(level_below, 0) THEN 1 END))
                 OVER whole + 1) AS bins,
    sum(reference_weight) AS reference_weight,
    sum(current_weight) AS current_weight,
    sum(reference_rows) AS reference_rows,
    sum(current_rows) AS current_rows,
    max(abs(reference_cdf - current_cdf)) AS ks,
    sum(abs(reference_cdf - current_cdf) * coalesce(width, 0)) AS wasserstein
FROM placed
GROUP BY segment, compared, label, coalesce(bin, level_below)
WINDOW whole AS (PARTITION BY segment, compared, label)
