-- drift_binned: the binned statistics of each compared column, segment and label, from each
-- side's weight in each bin: p and q, the reference's and the current data's shares.
-- Reads:  drift_bins(segment, compared, label, bins, reference_weight, current_weight, ...),
--         drift_sizes(segment, compared, label, current, weight, weight_squares, ...)
-- Params: $epsilon
-- Gives:  rows (segment, compared, label, bins, psi, jensen_shannon, total_variation,
--         l_infinity, chi2, chi2_dof)
--   psi              sum over bins of (q' - p') * ln(q' / p'), an empty share counted as $epsilon
--   jensen_shannon   sqrt of (KL(p || m) + KL(q || m)) / 2 in bits, m = (p + q) / 2 (a distance)
--   total_variation  sum |p - q| / 2;  l_infinity  max |p - q|
--   chi2             Pearson's statistic of the 2 x K table of counts over the K bins where
--                    either side has weight, Yates-corrected when K = 2 (as scipy's
--                    chi2_contingency); a side's counts are its weights scaled to its effective
--                    size (weight^2 / weight_squares): the row counts when every weight is 1;
--                    chi2_dof = K - 1 (0: one bin, chi2 = 0)
--   NULL where either side has no weight.
WITH counted AS (
    SELECT
        b.segment,
        b.compared,
        b.label,
        b.bins,
        b.reference_weight,
        b.current_weight,
        b.reference_weight * r.weight / nullif(r.weight_squares, 0) AS reference_count,
        b.current_weight * c.weight / nullif(c.weight_squares, 0) AS current_count
    FROM drift_bins AS b
    JOIN drift_sizes AS r
        ON b.segment IS NOT DISTINCT FROM r.segment AND b.compared = r.compared
        AND b.label IS NOT DISTINCT FROM r.label AND NOT r.current
    JOIN drift_sizes AS c
        ON b.segment IS NOT DISTINCT FROM c.segment AND b.compared = c.compared
        AND b.label IS NOT DISTINCT FROM c.label AND c.current
    WHERE b.reference_weight > 0 OR b.current_weight > 0
),
shared AS (
    SELECT
        *,
        reference_weight / nullif(sum(reference_weight) OVER side, 0) AS p,
        current_weight / nullif(sum(current_weight) OVER side, 0) AS q,
        sum(reference_count) OVER side AS reference_total,
        sum(current_count) OVER side AS current_total,
        count(*) OVER side AS filled
    FROM counted
    WINDOW side AS (PARTITION BY segment, compared, label)
),
expected AS (
    SELECT
        *,
        reference_total * (reference_count + current_count)
            / nullif(reference_total + current_total, 0) AS reference_expected,
        current_total * (reference_count + current_count)
            / nullif(reference_total + current_total, 0) AS current_expected,
        CASE WHEN p > 0 THEN p WHEN p = 0 THEN $epsilon END AS p_floor,
        CASE WHEN q > 0 THEN q WHEN q = 0 THEN $epsilon END AS q_floor
    FROM shared
),
corrected AS (
    -- Yates: with one degree of freedom each count moves by up to 0.5 towards its expectation
    SELECT
        *,
        CASE WHEN filled = 2 THEN reference_count + sign(reference_expected - reference_count)
            * least(0.5, abs(reference_expected - reference_count)) ELSE reference_count END
            AS reference_observed,
        CASE WHEN filled = 2 THEN current_count + sign(current_expected - current_count)
            * least(0.5, abs(current_expected - current_count)) ELSE current_count END
            AS current_observed
    FROM expected
)
SELECT
    segment,
    compared,
    label,
    max(bins) AS bins,
    sum((q_floor - p_floor) * ln(q_floor / p_floor)) AS psi,
    CASE WHEN count(p) > 0 AND count(q) > 0 THEN sqrt(greatest(sum(
        CASE WHEN p > 0 THEN p * ln(2 * p / (p + q)) ELSE 0 END
        + CASE WHEN q > 0 THEN q * ln(2 * q / (p + q)) ELSE 0 END) / (2 * ln(2)), 0)) END
        AS jensen_shannon,
    sum(abs(p - q)) / 2 AS total_variation,
    max(abs(p - q)) AS l_infinity,
    CASE WHEN count(p) = 0 OR count(q) = 0 THEN NULL WHEN max(filled) = 1 THEN 0.0 ELSE sum(
        (reference_observed - reference_expected) * (reference_observed - reference_expected)
            / nullif(reference_expected, 0)
        + (current_observed - current_expected) * (current_observed - current_expected)
            / nullif(current_expected, 0)) END AS chi2,
    max(filled) - 1 AS chi2_dof
FROM corrected
GROUP BY segment, compared, label
