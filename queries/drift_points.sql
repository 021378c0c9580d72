-- drift_points: the numeric values of each compared column, segment and label, merged by value:
-- each side's weight and rows at each distinct value (what drift's sorted pass reads).
-- Reads:  drift_rows(segment, compared, label, current, value, category, weight)
-- Gives:  drift_points(segment, compared, label, value, reference_weight, current_weight,
--                      reference_rows, current_rows)
SELECT
    segment,
    compared,
    label,
    value,
    coalesce(sum(weight) FILTER (WHERE NOT current), 0) AS reference_weight,
    coalesce(sum(weight) FILTER (WHERE current), 0) AS current_weight,
    count(*) FILTER (WHERE NOT current) AS reference_rows,
    count(*) FILTER (WHERE current) AS current_rows
FROM drift_rows
WHERE value IS NOT NULL
GROUP BY segment, compared, label, value
