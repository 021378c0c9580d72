-- block_placements: the DeLong placement of each block of tied scores of each label's curve
-- (the terms of delong.sql and placements.sql), with the label's P and N.
--   The positives of a block (weight pos, neg; tp, tn at its score) are placed at
--   v10 = (tn + neg / 2) / N, the share of negative weight scored below them (ties count one
--   half), its negatives at v01 = (tp - pos / 2) / P. NULL where P = 0 or N = 0.
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn, pos, neg)  (ranked_points.sql)
-- Gives:  block_placements(segment, label, threshold, pos, neg, p, n, v10, v01)
SELECT
    c.segment, c.label, c.threshold, c.pos, c.neg, totals.p, totals.n,
    CASE WHEN totals.p > 0 AND totals.n > 0 THEN (c.tn + c.neg / 2) / totals.n END AS v10,
    CASE WHEN totals.p > 0 AND totals.n > 0 THEN (c.tp - c.pos / 2) / totals.p END AS v01
FROM curve_points AS c
JOIN (
    -- P and N from the origin (+inf), where fn = P and tn = N
    SELECT segment, label, fn AS p, tn AS n
    FROM curve_points
    WHERE threshold = CAST('inf' AS DOUBLE)
) AS totals
    ON totals.segment IS NOT DISTINCT FROM c.segment AND totals.label = c.label
