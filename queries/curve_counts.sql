-- curve_counts: weighted confusion counts of each label at one threshold, read off the curve
-- table, so that a request for ranking and decision metrics together reads the predictions in
-- one sorted pass (ranked_points) instead of a second scan (threshold_counts).
-- A label is predicted positive iff score >= $threshold: the blocks of tied scores at or above
-- it are predicted positive, the others negative; the origin (+inf) adds no weight.
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn, pos, neg)  (ranked_points.sql)
-- Params: $threshold
-- Gives:  confusion_counts(segment, label, tp, fp, fn, tn), each a sum of weight
SELECT
    segment,
    label,
    coalesce(sum(pos) FILTER (WHERE threshold >= $threshold), 0) AS tp,
    coalesce(sum(neg) FILTER (WHERE threshold >= $threshold), 0) AS fp,
    coalesce(sum(pos) FILTER (WHERE threshold < $threshold), 0) AS fn,
    coalesce(sum(neg) FILTER (WHERE threshold < $threshold), 0) AS tn
FROM curve_points
GROUP BY segment, label
