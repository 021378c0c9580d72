-- sweep_counts: the counts of a threshold sweep as confusion counts, each (segment,
-- threshold) becoming one segment, so that decision_metrics.sql gives every decision metric at
-- every threshold (the runner unpacks the segment again).
-- Reads:  sweep_points(segment, label, threshold, tp, fp, fn, tn)  (listed_points.sql)
-- Gives:  confusion_counts(segment, label, tp, fp, fn, tn), segment = {segment, threshold}
SELECT
    struct_pack(segment := segment, threshold := threshold) AS segment,
    label,
    tp,
    fp,
    fn,
    tn
FROM sweep_points
