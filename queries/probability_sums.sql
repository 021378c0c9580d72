-- probability_sums: the weighted sums behind log loss and the Brier score, per (segment, label).
-- Each row's score is read as the probability that its label is true. Log loss scores the
-- probability of what happened (score on a true row, 1 - score on a false row), clipped to
-- [eps, 1 - eps] with eps = 2.220446049250313e-16 (float64 machine epsilon), as scikit-learn's
-- log_loss clips, so a probability of exactly 0 or 1 on the wrong side gives a finite loss.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  probability_sums(segment, label, weight, pos, neg, loss_true, loss_false, squared_error,
--                           hinge)
--   weight: sum of weight; pos, neg: weight of true rows, of false rows (each its own sum, so
--   that a class without weight has exactly 0); loss_true: sum of weight * -ln(score) over
--   true rows; loss_false: sum of weight * -ln(1 - score) over false rows (both clipped);
--   squared_error: sum of weight * (truth - score)^2; hinge: sum of weight * max(0, 1 - margin),
--   the score read as a decision value with margin score on a true row, -score on a false one
--   (scikit-learn's binary hinge_loss, its labels encoded -1 and +1).
WITH outcomes AS (
    SELECT
        segment, label, truth, weight, score,
        greatest(least(CASE WHEN truth THEN score ELSE 1 - score END,
                       1 - CAST(2.220446049250313e-16 AS DOUBLE)),
                 CAST(2.220446049250313e-16 AS DOUBLE)) AS p,
        CASE WHEN truth THEN 1 - score ELSE score END AS miss,
        CASE WHEN truth THEN score ELSE -score END AS margin
    FROM predictions
)
SELECT
    segment,
    label,
    sum(weight) AS weight,
    coalesce(sum(weight) FILTER (WHERE truth), 0) AS pos,
    coalesce(sum(weight) FILTER (WHERE NOT truth), 0) AS neg,
    coalesce(sum(weight * -ln(p)) FILTER (WHERE truth), 0) AS loss_true,
    coalesce(sum(weight * -ln(p)) FILTER (WHERE NOT truth), 0) AS loss_false,
    sum(weight * miss * miss) AS squared_error,
    sum(weight * greatest(1 - margin, 0)) AS hinge
FROM outcomes
GROUP BY segment, label
