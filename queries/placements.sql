-- placements: each prediction's DeLong placement (delong.sql), the per-sample term of a paired
-- DeLong test: the covariance of two models' AUCs on the same samples is that of their
-- placements over the samples.
--   A positive row (truth) is placed at V10 = (tn + neg / 2) / N of its block of tied scores
--   (the share of the label's negative weight scored below it, ties counting one half), a
--   negative row at V01 = (tp - pos / 2) / P. A row finds its block by its score, moved down
--   to the grid with $bins exactly as ranked_points.sql does (there the blocks are the bins).
--   NULL where P = 0 or N = 0, and for a row whose score only zero-weight rows have (no point
--   on the curve; the row weighs nothing).
-- Reads:  predictions(sample, label, score, truth, weight, segment),
--         block_placements(segment, label, threshold, pos, neg, p, n, v10, v01)  (of the curve
--         of ranked_points.sql with the same $bins)
-- Params: $bins (NULL: the exact curve; N: scores on the grid 0, 1/N, 2/N, ...)
-- Uses:   macros/grid.sql
-- Gives:  segment, label, sample, truth, weight, placement
WITH scored AS (
    -- the score as ranked_points.sql puts it on the curve
    SELECT segment, label, sample, truth, weight, on_grid(score, $bins) AS score
    FROM predictions
)
SELECT
    r.segment,
    r.label,
    r.sample,
    r.truth,
    r.weight,
    CASE WHEN r.truth THEN b.v10 ELSE b.v01 END AS placement
FROM scored AS r
LEFT JOIN block_placements AS b
    ON b.segment IS NOT DISTINCT FROM r.segment AND b.label = r.label AND b.threshold = r.score
