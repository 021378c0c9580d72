-- multiclass_probability_metrics: multiclass log loss, Brier score and their D², one value per
-- segment.
-- Reads:  probability_sums(segment, label, weight, pos, neg, loss_true, loss_false,
--         squared_error, hinge)  (probability_sums.sql)
-- Gives:  segment, metric, average, label, value (average and label NULL)
--   Every sample has one true label, so the positive weights sum to the samples' weight W, and
--   a class's neg is the weight of the samples of the other classes.
--   log_loss: sum over samples of weight * -ln(clipped probability of the true class) / W, as
--   scikit-learn's log_loss; the true class's own score is used as given, never renormalised
--   (scikit-learn 1.9 only warns when a row's scores do not sum to 1).
--   brier_score: sum over samples of weight * sum over classes (truth - score)^2 / W: summed
--   over classes and never halved (scikit-learn's brier_score_loss with scale_by_half=False,
--   its default for 3 or more classes). NULL where W is 0.
--   d2_log_loss: 1 - the summed loss / the loss of the prevalence, -sum over classes of
--   pos * ln(pos / W) (clipped as the scores are): scikit-learn's d2_log_loss_score.
--   d2_brier: 1 - the summed squared error / that of the prevalence, sum over classes of
--   pos * neg / W: scikit-learn's d2_brier_score. Both NULL where fewer than two classes have
--   weight (the truth is constant), where scikit-learn gives NaN, -inf or a huge negative
--   number from the clipped prevalence.
WITH totals AS (
    SELECT segment, sum(pos) AS w, sum(loss_true) AS loss, sum(squared_error) AS squared_error,
           count(*) FILTER (WHERE pos > 0) AS classes
    FROM probability_sums
    GROUP BY segment
),
skill AS (
    SELECT
        t.segment,
        -sum(s.pos * ln(greatest(least(s.pos / t.w, 1 - CAST(2.220446049250313e-16 AS DOUBLE)),
                                 CAST(2.220446049250313e-16 AS DOUBLE)))) AS null_loss,
        sum(s.pos / t.w * s.neg) AS null_squared_error
    FROM probability_sums AS s
    JOIN totals AS t ON t.segment IS NOT DISTINCT FROM s.segment
    WHERE t.classes >= 2
    GROUP BY t.segment
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, NULL AS label, value
FROM (
    SELECT segment, 'log_loss' AS metric, CASE WHEN w = 0 THEN NULL ELSE loss / w END AS value
    FROM totals
    UNION ALL
    SELECT segment, 'brier_score', CASE WHEN w = 0 THEN NULL ELSE squared_error / w END
    FROM totals
    UNION ALL
    SELECT t.segment, 'd2_log_loss', 1 - t.loss / k.null_loss
    FROM totals AS t
    LEFT JOIN skill AS k ON k.segment IS NOT DISTINCT FROM t.segment
    UNION ALL
    SELECT t.segment, 'd2_brier', 1 - t.squared_error / k.null_squared_error
    FROM totals AS t
    LEFT JOIN skill AS k ON k.segment IS NOT DISTINCT FROM t.segment
) AS metrics
