-- matrix_counts: one-vs-rest confusion counts of each class, from the multiclass confusion matrix.
-- Reads:  confusion_matrix(segment, truth_label, predicted_label, weight)  (argmax_matrix.sql)
-- Gives:  confusion_counts(segment, label, tp, fp, fn, tn)
WITH marginals AS (
    SELECT segment, label, sum(n_true) AS n_true, sum(n_pred) AS n_pred, sum(n_hit) AS n_hit
    FROM (
        SELECT segment, truth_label AS label, weight AS n_true, 0.0 AS n_pred,
               CASE WHEN truth_label = predicted_label THEN weight ELSE 0.0 END AS n_hit
        FROM confusion_matrix
        UNION ALL
        SELECT segment, predicted_label, 0.0, weight, 0.0
        FROM confusion_matrix
    )
    GROUP BY segment, label
)
SELECT
    segment,
    label,
    n_hit AS tp,
    n_pred - n_hit AS fp,
    n_true - n_hit AS fn,
    sum(n_true) OVER (PARTITION BY segment) - n_hit - (n_pred - n_hit) - (n_true - n_hit) AS tn
FROM marginals
