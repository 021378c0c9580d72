-- threshold_counts: weighted confusion counts of each label at one threshold (binary, multilabel).
-- A label is predicted positive iff score >= $threshold.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $threshold
-- Gives:  confusion_counts(segment, label, tp, fp, fn, tn), each a sum of weight
SELECT
    segment,
    label,
    coalesce(sum(weight) FILTER (WHERE truth AND score >= $threshold), 0) AS tp,
    coalesce(sum(weight) FILTER (WHERE NOT truth AND score >= $threshold), 0) AS fp,
    coalesce(sum(weight) FILTER (WHERE truth AND score < $threshold), 0) AS fn,
    coalesce(sum(weight) FILTER (WHERE NOT truth AND score < $threshold), 0) AS tn
FROM predictions
GROUP BY segment, label
