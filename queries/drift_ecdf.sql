-- drift_ecdf: the exact two-sample statistics of each numeric compared column, segment and
-- label, from its bins' parts (drift_histogram: one pass down the values in order).
-- Reads:  drift_bins(segment, compared, label, ks, wasserstein, ...)
-- Gives:  rows (segment, compared, label, ks, wasserstein)
--   ks           max over x of |F_r(x) - F_c(x)| (Kolmogorov-Smirnov's D)
--   wasserstein  the integral of |F_r - F_c| (Wasserstein-1, the earth mover's distance)
--   NULL where either side has no weight (and for a categorical column's bins).
SELECT
    segment,
    compared,
    label,
    max(ks) AS ks,
    CASE WHEN count(ks) > 0 THEN sum(wasserstein) END AS wasserstein
FROM drift_bins
GROUP BY segment, compared, label
