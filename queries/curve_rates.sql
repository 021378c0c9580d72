-- curve_rates: the ROC or precision-recall curve of each label as a table: counts and rates at
-- every distinct score taken as threshold, plus the origin (threshold +inf, nothing predicted).
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn)  (ranked_points.sql)
-- Params: $kind ('roc' or 'pr'), $drop_intermediate (drop the points scikit-learn drops)
-- Gives:  segment, label, threshold, tp, fp, fn, tn, tpr, fpr, precision, recall
--   tpr = recall = tp / (tp + fn), fpr = fp / (fp + tn), precision = tp / (tp + fp); NULL where
--   0/0 (tpr and recall of a label without positives, fpr of a label without negatives), except
--   precision at the origin, which is 1 as in scikit-learn's precision_recall_curve.
--   $drop_intermediate, among the points other than the origin (which is always kept), keeps
--   the first and the last, and for 'roc' the corners: points where the second difference of fp
--   or of tp is not 0 (scikit-learn's roc_curve); for 'pr' the points whose tp differs from the
--   previous or the next point's (scikit-learn's precision_recall_curve).
WITH points AS (
    SELECT
        segment, label, threshold, tp, fp, fn, tn,
        lag(tp) OVER ordered AS tp_prev,
        lead(tp) OVER ordered AS tp_next,
        lag(fp) OVER ordered AS fp_prev,
        lead(fp) OVER ordered AS fp_next
    FROM curve_points
    WHERE tp + fp > 0
    WINDOW ordered AS (PARTITION BY segment, label ORDER BY threshold DESC)
),
kept AS (
    SELECT segment, label, threshold, tp, fp, fn, tn
    FROM points
    WHERE NOT $drop_intermediate
        OR tp_prev IS NULL
        OR tp_next IS NULL
        OR CASE
            WHEN $kind = 'pr' THEN tp <> tp_prev OR tp_next <> tp
            ELSE (fp_next - fp) - (fp - fp_prev) <> 0 OR (tp_next - tp) - (tp - tp_prev) <> 0
        END
    UNION ALL
    SELECT segment, label, threshold, tp, fp, fn, tn
    FROM curve_points
    WHERE tp + fp = 0
)
SELECT
    segment, label, threshold, tp, fp, fn, tn,
    CASE WHEN tp + fn <> 0 THEN tp / (tp + fn) END AS tpr,
    CASE WHEN fp + tn <> 0 THEN fp / (fp + tn) END AS fpr,
    CASE WHEN tp + fp = 0 THEN 1.0 ELSE tp / (tp + fp) END AS precision,
    CASE WHEN tp + fn <> 0 THEN tp / (tp + fn) END AS recall
FROM kept
