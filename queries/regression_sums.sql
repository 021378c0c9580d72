-- regression_sums: weighted error sums of each output (label) of each segment, for regression:
-- `score` is the prediction and `truth` the target.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  regression_sums(segment, label, weight, mean_truth, sse, sae, sape, sst, se, sde,
--         max_error, ssle, pinball, poisson, gamma, tweedie, tweedie_of_mean)
-- Uses:   macros/deviance.sql
--   weight      sum of weight;  mean_truth  weighted mean of truth (NULL when weight is 0)
--   sse         sum(weight * (score - truth)^2)
--   sae         sum(weight * |score - truth|)
--   sape        sum(weight * |score - truth| / max(|truth|, eps)), eps = 2^-52 (numpy's float64
--               eps, as scikit-learn's MAPE: a zero truth gives a huge, finite term)
--   sst         sum(weight * (truth - mean_truth)^2), the total sum of squares of R², taken around
--               the weighted mean computed first: the one-pass sum(w y²) - sum(w y)² / sum(w)
--               cancels catastrophically when the targets are large and close (1e6 + noise);
--               the mean itself is taken of the truths shifted by the smallest truth.
--               Exactly 0 when the truth is constant over the rows of positive weight (so a mean
--               that rounds off cannot fake a tiny variance); NULL when weight is 0.
--   se          sum(weight * (score - truth)), the signed error (a declared metric's bias)
--   sde         sum(weight * (error - mean error)^2), the explained variance's numerator, around
--               the weighted mean error computed first (as sst)
--   max_error   max |score - truth| over the rows of positive weight
--   ssle        sum(weight * (ln(1 + score) - ln(1 + truth))^2); NULL where a value is <= -1
--   pinball     sum(weight * pinball loss at $pinball_alpha)
--   poisson, gamma, tweedie   sum(weight * unit deviance) of power 1, 2 and $power; NULL where
--               a row is outside the deviance's domain (scikit-learn refuses it; evaluate too)
--   tweedie_of_mean           the same of the weighted mean truth as the prediction (d2_tweedie)
--   With mean_truth and sst kept, tables of two partitions can later be merged (Chan et al.).
WITH origins AS (
    -- every truth is first shifted by one of its output's own truths (the smallest), so that a
    -- large common offset (1e12 + noise) cancels exactly before anything is summed
    SELECT segment, label, min(CAST(truth AS DOUBLE)) AS origin
    FROM predictions
    GROUP BY segment, label
),
shifted AS (
    SELECT p.segment, p.label, p.weight, o.origin, CAST(p.truth AS DOUBLE) - o.origin AS shifted,
           p.score - CAST(p.truth AS DOUBLE) AS error
    FROM predictions AS p
    JOIN origins AS o ON p.segment IS NOT DISTINCT FROM o.segment AND p.label = o.label
),
means AS (
    SELECT
        segment,
        label,
        max(origin) AS origin,
        sum(weight * shifted) / nullif(sum(weight), 0) AS shifted_mean,
        sum(weight * error) / nullif(sum(weight), 0) AS mean_error,
        min(shifted) FILTER (WHERE weight > 0)
            = max(shifted) FILTER (WHERE weight > 0) AS constant_truth
    FROM shifted
    GROUP BY segment, label
),
errors AS (
    SELECT
        p.segment,
        p.label,
        p.weight,
        m.origin + m.shifted_mean AS mean_truth,
        m.constant_truth,
        p.score,
        CAST(p.truth AS DOUBLE) AS y,
        p.score - CAST(p.truth AS DOUBLE) AS error,
        (p.score - CAST(p.truth AS DOUBLE)) - m.mean_error AS error_deviation,
        (CAST(p.truth AS DOUBLE) - m.origin) - m.shifted_mean AS deviation,
        greatest(abs(CAST(p.truth AS DOUBLE)), CAST(2.220446049250313e-16 AS DOUBLE)) AS scale,
        CASE WHEN CAST(p.truth AS DOUBLE) > -1 AND p.score > -1
             THEN ln(1 + p.score) - ln(1 + CAST(p.truth AS DOUBLE)) END AS log_error
    FROM predictions AS p
    JOIN means AS m
        ON p.segment IS NOT DISTINCT FROM m.segment AND p.label = m.label
),
deviances AS (
    SELECT
        *,
        tweedie_deviance(y, score, 1) AS poisson,
        tweedie_deviance(y, score, 2) AS gamma,
        tweedie_deviance(y, score, $power) AS tweedie,
        tweedie_deviance(y, mean_truth, $power) AS tweedie_of_mean
    FROM errors
)
SELECT
    segment,
    label,
    sum(weight) AS weight,
    mean_truth,
    sum(weight * (error * error)) AS sse,
    sum(weight * abs(error)) AS sae,
    sum(weight * (abs(error) / scale)) AS sape,
    CASE WHEN constant_truth THEN 0.0 ELSE sum(weight * (deviation * deviation)) END AS sst,
    sum(weight * error) AS se,
    sum(weight * (error_deviation * error_deviation)) AS sde,
    max(abs(error)) FILTER (WHERE weight > 0) AS max_error,
    -- a row outside a loss's domain (its term NULL) makes the sum NULL: no value of part
    CASE WHEN count(log_error) = count(*) THEN sum(weight * (log_error * log_error)) END AS ssle,
    sum(weight * pinball(y, score, $pinball_alpha)) AS pinball,
    CASE WHEN count(poisson) = count(*) THEN sum(weight * poisson) END AS poisson,
    CASE WHEN count(gamma) = count(*) THEN sum(weight * gamma) END AS gamma,
    CASE WHEN count(tweedie) = count(*) THEN sum(weight * tweedie) END AS tweedie,
    CASE WHEN count(tweedie_of_mean) = count(*) THEN sum(weight * tweedie_of_mean) END
        AS tweedie_of_mean
FROM deviances
GROUP BY segment, label, mean_truth, constant_truth
