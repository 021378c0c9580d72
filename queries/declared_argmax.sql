-- declared_argmax: the metrics declared with me.define on multiclass rows, each one expression
-- over the decision counts of each class one-vs-rest from the argmax and of the classes pooled
-- (mleval_sql/declared.py); declared_metrics.sql at a threshold.
-- Reads:  confusion_counts(segment, label, tp, fp, fn, tn)  (matrix_counts.sql)
-- Params: $beta
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro, weighted and macro_std averages)
--   per class: average NULL, support the class's true weight (tp + fn).
--   micro: the expression over counts summed over classes (F1's micro is the accuracy).
--   An expression reads the columns of `statistics`: tp, fp, fn, tn, support (tp + fn),
--   n (tp + fp + fn + tn) and beta; no threshold decides here (an expression that reads it
--   does not serve multiclass). As written, the last SELECT gives no rows; the engines put one
--   SELECT per declared metric in its place, the expression rendered by sqlglot from its
--   checked tree (a division by zero NULL, through NULLIF).
WITH params AS (
    SELECT CAST($beta AS DOUBLE) AS beta
),
counts AS (
    SELECT segment, CAST(NULL AS VARCHAR) AS average, label, tp, fp, fn, tn
    FROM confusion_counts
    UNION ALL
    SELECT segment, 'micro', NULL, sum(tp), sum(fp), sum(fn), sum(tn)
    FROM confusion_counts
    GROUP BY segment
),
statistics AS (
    SELECT segment, average, label, tp, fp, fn, tn, tp + fn AS support,
           tp + fp + fn + tn AS n, beta
    FROM counts, params
)
SELECT segment, CAST(NULL AS VARCHAR) AS metric, average, label, CAST(NULL AS DOUBLE) AS value,
       support
FROM statistics
WHERE 1 = 0
