-- estimated_variance: how far each label's realised metric may lie from its estimate: the
-- variance of the realised value when every row's outcome is drawn independently with its
-- probability, to first order (the delta method) around the expected outcomes.
-- Reads:  expected_points(segment, label, score, pos, neg, noise, neg_below, pos_above, p, n),
--         estimated_counts(segment, label, tp, fp, fn, tn, p, n, noise_positive,
--         noise_negative, pairs)
-- Gives:  segment, metric, label, variance
--   With a row's outcome Y (weight w, probability q; var Y = q (1 - q)), each metric is a
--   function of the outcomes whose gradient is, per row:
--   accuracy (2 d - 1) w / (p + n); precision d w / (tp + fp) (its denominator is the
--   decisions'); recall (d - R) w / p; F1 (2 d - F) w / (tp + fp + p), d = 1 for a row
--   predicted positive, R and F the estimates. ROC AUC: w (L - G) / (p n) - A w (1 / p - 1 / n),
--   L the negative weight below the row's score and G the positive weight above it (half of
--   its own score's), A the estimate. The variance sums gradient^2 q (1 - q), which the
--   noise sums carry; NULL where the estimate is.
WITH estimates AS (
    SELECT
        segment, label, tp, fp, p, n, noise_positive, noise_negative,
        tp / nullif(p, 0) AS recall,
        2 * tp / nullif(tp + fp + p, 0) AS f1,
        CASE WHEN p > 0 AND n > 0 THEN pairs / (p * n) END AS auc
    FROM estimated_counts
),
ranked AS (
    SELECT
        e.segment,
        e.label,
        sum(power((x.neg_below + 0.5 * x.neg - x.pos_above - 0.5 * x.pos) / (e.p * e.n)
                  - e.auc * (1 / e.p - 1 / e.n), 2) * x.noise) AS variance
    FROM expected_points AS x
    JOIN estimates AS e
        ON x.segment IS NOT DISTINCT FROM e.segment AND x.label IS NOT DISTINCT FROM e.label
    WHERE e.auc IS NOT NULL
    GROUP BY e.segment, e.label
)
SELECT segment, 'estimated_accuracy' AS metric, label,
       (noise_positive + noise_negative) / nullif(power(p + n, 2), 0) AS variance
FROM estimates
UNION ALL
SELECT segment, 'estimated_precision', label, noise_positive / nullif(power(tp + fp, 2), 0)
FROM estimates
UNION ALL
SELECT segment, 'estimated_recall', label,
       (noise_positive * power(1 - recall, 2) + noise_negative * power(recall, 2))
       / nullif(power(p, 2), 0)
FROM estimates
UNION ALL
SELECT segment, 'estimated_f1', label,
       (noise_positive * power(2 - f1, 2) + noise_negative * power(f1, 2))
       / nullif(power(tp + fp + p, 2), 0)
FROM estimates
UNION ALL
SELECT e.segment, 'estimated_roc_auc', e.label, r.variance
FROM estimates AS e
LEFT JOIN ranked AS r
    ON e.segment IS NOT DISTINCT FROM r.segment AND e.label IS NOT DISTINCT FROM r.label
