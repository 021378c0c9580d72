-- drift_points: the numeric values of each compared column, segment and label, merged by value:
-- each side's weight and rows at each distinct value (what drift's sorted pass reads).
-- Reads:  drift_rows(segment, compared, label, current, value, category, bin, given_bins,
--                    weight)
-- Gives:  drift_points(segment, compared, label, value, bin, given_bins, reference_weight,
--                      current_weight, reference_rows, current_rows)
--   bin, given_bins  the value's bin of the edges given, and their bins (NULL: none given)
SELECT
    segment,
    compared,
    label,
    value,
    max(bin) AS bin,
    max(given_bins) AS given_bins,
    coalesce(sum(weight) FILTER (WHERE NOT current), 0) AS reference_weight,
    coalesce(sum(weight) FILTER (WHERE current), 0) AS current_weight,
    count(*) FILTER (WHERE NOT current) AS reference_rows,
    count(*) FILTER (WHERE current) AS current_rows
FROM drift_rows
WHERE value IS NOT NULL
GROUP BY segment, compared, label, value
