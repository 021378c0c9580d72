-- probability_metrics: log loss and Brier score of each label and of the labels pooled (binary,
-- multilabel), from probability sums.
-- Reads:  probability_sums(segment, label, weight, pos, loss_true, loss_false, squared_error)
--         (probability_sums.sql)
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro, weighted and macro_std averages)
--   log_loss per label: (loss_true + loss_false) / weight, scikit-learn's binary log_loss with
--   its clipping; brier_score per label: squared_error / weight, scikit-learn's binary
--   brier_score_loss. NULL where the label's weight is 0. support: the label's positive weight.
--   micro: the sums pooled over labels (every (sample, label) row one case).
WITH sums AS (
    SELECT segment, CAST(NULL AS VARCHAR) AS average, label, weight, pos, loss_true,
           loss_false, squared_error
    FROM probability_sums
    UNION ALL
    SELECT segment, 'micro', NULL, sum(weight), sum(pos), sum(loss_true), sum(loss_false),
           sum(squared_error)
    FROM probability_sums
    GROUP BY segment
)
SELECT segment, 'log_loss' AS metric, average, label,
       CASE WHEN weight = 0 THEN NULL ELSE (loss_true + loss_false) / weight END AS value,
       pos AS support
FROM sums
UNION ALL
SELECT segment, 'brier_score', average, label,
       CASE WHEN weight = 0 THEN NULL ELSE squared_error / weight END, pos
FROM sums
