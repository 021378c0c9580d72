-- probability_metrics: log loss, Brier score, their D² and the hinge loss of each label and of
-- the labels pooled (binary, multilabel), from probability sums.
-- Reads:  probability_sums(segment, label, weight, pos, neg, loss_true, loss_false,
--         squared_error, hinge)  (probability_sums.sql)
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro, weighted and macro_std averages)
--   log_loss per label: (loss_true + loss_false) / weight, scikit-learn's binary log_loss with
--   its clipping; brier_score per label: squared_error / weight, scikit-learn's binary
--   brier_score_loss. NULL where the label's weight is 0. support: the label's positive weight.
--   d2_log_loss: 1 - log loss / log loss of the prevalence (each row scored pos / weight),
--   the prevalence clipped as the scores are: scikit-learn's d2_log_loss_score.
--   d2_brier: 1 - squared_error / (pos * neg / weight), the latter the Brier score of the
--   prevalence times the weight: scikit-learn's d2_brier_score. Both NULL where the truth is
--   constant (pos or neg 0), where scikit-learn gives NaN, -inf, or a huge negative number
--   from the clipped prevalence.
--   hinge_loss: hinge / weight, scikit-learn's binary hinge_loss (scores as decision values).
--   micro: the sums pooled over labels (every (sample, label) row one case).
WITH sums AS (
    SELECT segment, CAST(NULL AS VARCHAR) AS average, label, weight, pos, neg, loss_true,
           loss_false, squared_error, hinge
    FROM probability_sums
    UNION ALL
    SELECT segment, 'micro', NULL, sum(weight), sum(pos), sum(neg), sum(loss_true),
           sum(loss_false), sum(squared_error), sum(hinge)
    FROM probability_sums
    GROUP BY segment
),
clip AS (
    SELECT CAST(2.220446049250313e-16 AS DOUBLE) AS eps
),
skill AS (
    SELECT
        sums.*,
        CASE WHEN pos = 0 OR neg = 0 THEN NULL
             ELSE -(pos * ln(greatest(least(pos / weight, 1 - eps), eps))
                    + neg * ln(greatest(least(neg / weight, 1 - eps), eps)))
        END AS null_loss,
        CASE WHEN pos = 0 OR neg = 0 THEN NULL ELSE pos / weight * neg END AS null_squared_error
    FROM sums, clip
)
SELECT segment, 'log_loss' AS metric, average, label,
       CASE WHEN weight = 0 THEN NULL ELSE (loss_true + loss_false) / weight END AS value,
       pos AS support
FROM skill
UNION ALL
SELECT segment, 'brier_score', average, label,
       CASE WHEN weight = 0 THEN NULL ELSE squared_error / weight END, pos
FROM skill
UNION ALL
SELECT segment, 'd2_log_loss', average, label, 1 - (loss_true + loss_false) / null_loss, pos
FROM skill
UNION ALL
SELECT segment, 'd2_brier', average, label, 1 - squared_error / null_squared_error, pos
FROM skill
UNION ALL
SELECT segment, 'hinge_loss', average, label,
       CASE WHEN weight = 0 THEN NULL ELSE hinge / weight END, pos
FROM skill
