-- reliability_table: the reliability diagram of each label (the "reliability" curve): per bin
-- the weighted mean score against the weighted observed rate of true rows.
-- Reads:  calibration_bins(segment, label, bin, lower, upper, weight, pos, score_sum)
--         (calibration_bins.sql)
-- Gives:  segment, label, bin, lower, upper, mean_score, observed_rate, weight
--   Only bins with positive weight (as scikit-learn's calibration_curve, which drops empty
--   bins); mean_score = score_sum / weight, observed_rate = pos / weight.
SELECT
    segment,
    label,
    bin,
    lower,
    upper,
    score_sum / weight AS mean_score,
    pos / weight AS observed_rate,
    weight
FROM calibration_bins
WHERE weight > 0
