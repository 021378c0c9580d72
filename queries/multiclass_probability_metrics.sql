-- multiclass_probability_metrics: multiclass log loss and Brier score, one value per segment.
-- Reads:  probability_sums(segment, label, weight, pos, loss_true, loss_false, squared_error)
--         (probability_sums.sql)
-- Gives:  segment, metric, average, label, value (average and label NULL)
--   Every sample has one true label, so the positive weights sum to the samples' weight W.
--   log_loss: sum over samples of weight * -ln(clipped probability of the true class) / W, as
--   scikit-learn's log_loss; the true class's own score is used as given, never renormalised
--   (scikit-learn 1.9 only warns when a row's scores do not sum to 1).
--   brier_score: sum over samples of weight * sum over classes (truth - score)^2 / W: summed
--   over classes and never halved (scikit-learn's brier_score_loss with scale_by_half=False,
--   its default for 3 or more classes). NULL where W is 0.
WITH totals AS (
    SELECT segment, sum(pos) AS w, sum(loss_true) AS loss, sum(squared_error) AS squared_error
    FROM probability_sums
    GROUP BY segment
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, NULL AS label, value
FROM (
    SELECT segment, 'log_loss' AS metric, CASE WHEN w = 0 THEN NULL ELSE loss / w END AS value
    FROM totals
    UNION ALL
    SELECT segment, 'brier_score', CASE WHEN w = 0 THEN NULL ELSE squared_error / w END
    FROM totals
) AS metrics
