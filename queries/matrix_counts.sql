-- matrix_counts: one-vs-rest confusion counts of each class, from the multiclass confusion matrix.
-- Reads:  confusion_matrix(segment, truth_label, predicted_label, weight)  (argmax_matrix.sql)
-- Gives:  confusion_counts(segment, label, tp, fp, fn, tn)
--   Every count is a sum of the weights of its own cells, never a difference of sums (total -
--   tp - fp - fn would cancel a weight of 1 next to one of 1e17 away): tn of a class sums the
--   cells that touch it neither as truth nor as prediction, one pass over the cells per class.
WITH counts AS (
    SELECT segment, label, sum(tp) AS tp, sum(fp) AS fp, sum(fn) AS fn
    FROM (
        SELECT segment, truth_label AS label,
               CASE WHEN truth_label = predicted_label THEN weight ELSE 0.0 END AS tp,
               0.0 AS fp,
               CASE WHEN truth_label = predicted_label THEN 0.0 ELSE weight END AS fn
        FROM confusion_matrix
        UNION ALL
        SELECT segment, predicted_label, 0.0,
               CASE WHEN truth_label = predicted_label THEN 0.0 ELSE weight END, 0.0
        FROM confusion_matrix
    )
    GROUP BY segment, label
),
negatives AS (
    SELECT c.segment, c.label, sum(m.weight) AS tn
    FROM counts AS c
    JOIN confusion_matrix AS m
        ON m.segment IS NOT DISTINCT FROM c.segment
        AND m.truth_label <> c.label AND m.predicted_label <> c.label
    GROUP BY c.segment, c.label
)
SELECT c.segment, c.label, c.tp, c.fp, c.fn, coalesce(n.tn, 0.0) AS tn
FROM counts AS c
LEFT JOIN negatives AS n ON n.segment IS NOT DISTINCT FROM c.segment AND n.label = c.label
