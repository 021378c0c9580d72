-- point_counts: the counts at every distinct score of each label's curve as confusion counts,
-- each (segment, threshold) becoming one segment, so that decision_metrics.sql gives every
-- decision metric at every threshold (scikit-learn's confusion_matrix_at_thresholds and
-- metric_at_thresholds); the origin (threshold +inf, nothing predicted) is not a score.
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn)  (ranked_points.sql)
-- Gives:  confusion_counts(segment, label, tp, fp, fn, tn), segment = {segment, threshold}
SELECT
    struct_pack(segment := segment, threshold := threshold) AS segment,
    label,
    tp,
    fp,
    fn,
    tn
FROM curve_points
WHERE tp + fp > 0
