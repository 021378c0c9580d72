-- drift_categories: each side's weight and rows at each value of each categorical compared
-- column, segment and label: a bin per value seen on either side (one the reference never
-- shows is a bin of its own).
-- Reads:  drift_rows(segment, compared, label, current, value, category, bin, given_bins,
--                    weight)
-- Gives:  drift_bins(segment, compared, label, bins, reference_weight, current_weight,
--                    reference_rows, current_rows, ks, wasserstein)
--   bins  the number of values of the column, segment and label; ks, wasserstein: NULL (the
--         exact statistics are a numeric column's)
WITH counted AS (
    SELECT
        segment,
        compared,
        label,
        coalesce(sum(weight) FILTER (WHERE NOT current), 0) AS reference_weight,
        coalesce(sum(weight) FILTER (WHERE current), 0) AS current_weight,
        count(*) FILTER (WHERE NOT current) AS reference_rows,
        count(*) FILTER (WHERE current) AS current_rows
    FROM drift_rows
    WHERE category IS NOT NULL
    GROUP BY segment, compared, label, category
)
SELECT
    segment,
    compared,
    label,
    count(*) OVER (PARTITION BY segment, compared, label) AS bins,
    reference_weight,
    current_weight,
    reference_rows,
    current_rows,
    CAST(NULL AS DOUBLE) AS ks,
    CAST(NULL AS DOUBLE) AS wasserstein
FROM counted
