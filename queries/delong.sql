-- delong: DeLong's variance of the ROC AUC of each label (DeLong, DeLong & Clarke-Pearson 1988),
-- from the curve's blocks of tied scores (the O(n log n) form of Sun & Xu 2014: the sort is
-- ranked_points').
--   Weights are frequency weights; P and N are the label's positive and negative weight, V10_b
--   and V01_b the placements of block b's positives and negatives (block_placements.sql).
--   auc = sum_b pos_b V10_b / P: the trapezoidal AUC (ranking_metrics' roc_auc).
--   variance = S10 / P + S01 / N, S10 = sum_b pos_b (V10_b - auc)^2 / (P - 1) and
--   S01 = sum_b neg_b (V01_b - auc)^2 / (N - 1): the deviations summed in a second pass, with
--   auc known (no sum of squares less a square). Every term is a share (pos_b / P, tn_b / N),
--   never a product of weights, so weights of 1e-300 or 1e300 neither under- nor overflow.
--   NULL: auc where P = 0 or N = 0; variance where P <= 1 or N <= 1. The binned curve
--   (ranked_points.sql with bins) is read the same way: its blocks are its bins.
-- Reads:  block_placements(segment, label, threshold, pos, neg, p, n, v10, v01)
-- Gives:  segment, label, p, n, auc, variance
WITH placed AS (
    -- each block's shares of P and N (the origin's are 0)
    SELECT
        segment, label, p, n, v10, v01,
        CASE WHEN p > 0 AND n > 0 THEN pos / p END AS pos_share,
        CASE WHEN p > 0 AND n > 0 THEN neg / n END AS neg_share
    FROM block_placements
),
label_auc AS (
    SELECT segment, label, max(p) AS p, max(n) AS n, sum(pos_share * v10) AS auc
    FROM placed
    GROUP BY segment, label
)
SELECT
    placed.segment,
    placed.label,
    max(totals.p) AS p,
    max(totals.n) AS n,
    max(totals.auc) AS auc,
    CASE WHEN max(totals.p) > 1 AND max(totals.n) > 1 THEN
        sum(placed.pos_share * (placed.v10 - totals.auc) * (placed.v10 - totals.auc))
            / (max(totals.p) - 1)
        + sum(placed.neg_share * (placed.v01 - totals.auc) * (placed.v01 - totals.auc))
            / (max(totals.n) - 1)
    END AS variance
FROM placed
JOIN label_auc AS totals
    ON totals.segment IS NOT DISTINCT FROM placed.segment AND totals.label = placed.label
GROUP BY placed.segment, placed.label
