-- estimated_counts: each label's expected confusion counts at the threshold and the sums its
-- estimated metrics and their variances read, from its expected points.
-- A label is predicted positive iff score >= $threshold.
-- Reads:  expected_points(segment, label, score, pos, neg, noise, neg_below, pos_above, p, n)
--         (expected_points.sql)
-- Params: $threshold
-- Gives:  estimated_counts(segment, label, tp, fp, fn, tn, p, n, noise_positive,
--         noise_negative, pairs)
--   tp, fp, fn, tn: the expected confusion counts (weights summed); p, n: the expected positive
--   and negative weight; noise_positive / noise_negative: the outcomes' variance summed over
--   the rows predicted positive / negative; pairs: the expected weight of (positive, negative)
--   pairs ranked right, ties counting half (the ROC AUC's numerator).
SELECT
    segment,
    label,
    coalesce(sum(pos) FILTER (WHERE score >= $threshold), 0) AS tp,
    coalesce(sum(neg) FILTER (WHERE score >= $threshold), 0) AS fp,
    coalesce(sum(pos) FILTER (WHERE score < $threshold), 0) AS fn,
    coalesce(sum(neg) FILTER (WHERE score < $threshold), 0) AS tn,
    sum(pos) AS p,
    sum(neg) AS n,
    coalesce(sum(noise) FILTER (WHERE score >= $threshold), 0) AS noise_positive,
    coalesce(sum(noise) FILTER (WHERE score < $threshold), 0) AS noise_negative,
    sum(pos * (neg_below + 0.5 * neg)) AS pairs
FROM expected_points
GROUP BY segment, label
