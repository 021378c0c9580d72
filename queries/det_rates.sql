-- det_rates: the detection error tradeoff (DET) curve of each label as scikit-learn's
-- det_curve: the false positive and false negative rates at every distinct score taken as
-- threshold, plus the origin (threshold +inf), cut to the points between the last one with
-- no false positive and the first one with no false negative.
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn)  (ranked_points.sql)
-- Params: $drop_intermediate (drop the points whose tp equals the previous and the next
--         point's, as det_curve(drop_intermediate=True), before the cut)
-- Gives:  segment, label, threshold, tp, fp, fn, tn, fpr, fnr
--   fpr = fp / (fp + tn), fnr = fn / (tp + fn); NULL where 0/0 (a label without negatives or
--   without positives, where scikit-learn refuses the curve). The points kept: threshold at
--   or below the lowest one with fp = 0 and at or above the highest one with fn = 0 (fn is
--   exactly 0 there: ranked_points.sql).
WITH points AS (
    SELECT
        segment, label, threshold, tp, fp, fn, tn,
        lag(tp) OVER ordered AS tp_prev,
        lead(tp) OVER ordered AS tp_next
    FROM curve_points
    WINDOW ordered AS (PARTITION BY segment, label ORDER BY threshold DESC)
),
kept AS (
    SELECT segment, label, threshold, tp, fp, fn, tn
    FROM points
    WHERE NOT $drop_intermediate
        OR tp_prev IS NULL
        OR tp_next IS NULL
        OR tp <> tp_prev
        OR tp <> tp_next
),
bounds AS (
    SELECT
        segment,
        label,
        min(CASE WHEN fp = 0 THEN threshold END) AS highest,
        max(CASE WHEN fn = 0 THEN threshold END) AS lowest
    FROM kept
    GROUP BY segment, label
)
SELECT
    k.segment, k.label, k.threshold, k.tp, k.fp, k.fn, k.tn,
    CASE WHEN k.fp + k.tn <> 0 THEN k.fp / (k.fp + k.tn) END AS fpr,
    CASE WHEN k.tp + k.fn <> 0 THEN k.fn / (k.tp + k.fn) END AS fnr
FROM kept AS k
JOIN bounds AS b ON b.segment IS NOT DISTINCT FROM k.segment AND b.label = k.label
WHERE k.threshold <= b.highest AND k.threshold >= b.lowest
