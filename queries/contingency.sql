-- contingency: the contingency table of each segment, the statistics every clustering metric
-- is computed from: the weight of the samples of each (reference class, cluster) cell.
-- Reads:  predictions(sample, truth, cluster, weight, segment), one row per sample
-- Gives:  contingency(segment, truth, cluster, weight)
--   Weights are frequency weights (a weight of 2 counts the sample twice). Cells of weight 0
--   are kept, so that a segment whose weights are all 0 still has rows; the metrics read the
--   cells of positive weight only.
SELECT segment, truth, cluster, sum(weight) AS weight
FROM predictions
GROUP BY segment, truth, cluster
