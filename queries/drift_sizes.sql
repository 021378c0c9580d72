-- drift_sizes: each side's rows and weight per compared column, segment and label (drift), and
-- what the statistics leave out: null values (their weight) and values that are not finite.
-- Reads:  drift_rows(segment, compared, label, current, value, category, bin, given_bins,
--                    weight)
-- Gives:  drift_sizes(segment, compared, label, current, rows, weight, weight_squares,
--                     null_weight, nonfinite)
--   rows, weight    the rows whose value (numeric) or category is known, their weight sum
--   weight_squares  sum(weight^2) of those rows: the effective size is weight^2 / weight_squares
--   null_weight     the weight of the rows whose value is null
--   nonfinite       rows whose value is NaN or infinite (a NaN orders above every number)
SELECT
    segment,
    compared,
    label,
    current,
    count(*) FILTER (WHERE value IS NOT NULL OR category IS NOT NULL) AS rows,
    coalesce(sum(weight) FILTER (WHERE value IS NOT NULL OR category IS NOT NULL), 0) AS weight,
    coalesce(sum(weight * weight) FILTER (WHERE value IS NOT NULL OR category IS NOT NULL), 0)
        AS weight_squares,
    coalesce(sum(weight) FILTER (WHERE value IS NULL AND category IS NULL), 0) AS null_weight,
    count(*) FILTER (WHERE abs(value) > 1.7976931348623157e308) AS nonfinite
FROM drift_rows
GROUP BY segment, compared, label, current
