-- drift_ecdf: the exact two-sample statistics of each numeric compared column, segment and
-- label, from one pass down its values in order: the weighted empirical distribution functions
-- F_r (reference) and F_c (current), F(x) = sum of the weight at values <= x / all the weight.
-- Reads:  drift_points(segment, compared, label, value, reference_weight, current_weight, ...)
-- Gives:  rows (segment, compared, label, ks, wasserstein)
--   ks           max over x of |F_r(x) - F_c(x)| (Kolmogorov-Smirnov's D)
--   wasserstein  the integral of |F_r - F_c|: sum of |F_r(x) - F_c(x)| times the gap to the
--                next value (Wasserstein-1, the earth mover's distance)
--   NULL where either side has no weight.
WITH cumulated AS (
    SELECT
        segment,
        compared,
        label,
        sum(reference_weight) OVER running
            / nullif(sum(reference_weight) OVER whole, 0) AS reference_cdf,
        sum(current_weight) OVER running / nullif(sum(current_weight) OVER whole, 0) AS current_cdf,
        lead(value) OVER (PARTITION BY segment, compared, label ORDER BY value) - value AS width
    FROM drift_points
    WINDOW
        running AS (PARTITION BY segment, compared, label ORDER BY value
                    ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
        whole AS (PARTITION BY segment, compared, label)
)
SELECT
    segment,
    compared,
    label,
    max(abs(reference_cdf - current_cdf)) AS ks,
    CASE WHEN count(reference_cdf) > 0 AND count(current_cdf) > 0
        THEN coalesce(sum(abs(reference_cdf - current_cdf) * width), 0) END AS wasserstein
FROM cumulated
GROUP BY segment, compared, label
