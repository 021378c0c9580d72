-- sample_counts: each sample's decisions over its labels at one threshold (multilabel).
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $threshold (a label is predicted iff score >= $threshold)
-- Gives:  sample_counts(segment, sample, weight, tp, fp, fn, top_true): label counts of the
--         sample, and whether its top-scored label (ties: the smallest label) is a true one
SELECT
    segment,
    sample,
    any_value(weight) AS weight,
    count(*) FILTER (WHERE truth AND score >= $threshold) AS tp,
    count(*) FILTER (WHERE NOT truth AND score >= $threshold) AS fp,
    count(*) FILTER (WHERE truth AND score < $threshold) AS fn,
    arg_min(truth, (-score, label)) AS top_true
FROM predictions
GROUP BY segment, sample
