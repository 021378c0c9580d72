-- curve_rates: the ROC or precision-recall curve of each label as a table: counts and rates at
-- every distinct score taken as threshold, plus the origin (threshold +inf, nothing predicted).
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn)  (ranked_points.sql)
-- Params: $kind ('roc', 'pr', or 'both': the points that draw both curves),
--         $drop_intermediate (drop the points scikit-learn drops),
--         $max_points (NULL or 0: every point; N >= 8: at most N points per curve, below)
-- Gives:  segment, label, threshold, tp, fp, fn, tn, tpr, fpr, precision, recall
--   tpr = recall = tp / (tp + fn), fpr = fp / (fp + tn), precision = tp / (tp + fp); NULL where
--   0/0 (tpr and recall of a label without positives, fpr of a label without negatives), except
--   precision at the origin, which is 1 as in scikit-learn's precision_recall_curve.
--   $drop_intermediate, among the points other than the origin (which is always kept), keeps
--   the first and the last, and for 'roc' the corners: points where the second difference of fp
--   or of tp is not 0 (scikit-learn's roc_curve); for 'pr' the points whose tp differs from the
--   previous or the next point's (scikit-learn's precision_recall_curve); for 'both' either.
--   Each rule drops only points the drawn curve passes through anyway.
--   $max_points: a curve with more points than that (after $drop_intermediate) keeps, in each
--   of B equal-width bins of its x axis (fpr for 'roc', recall for 'pr'), its first and last
--   point and ('pr') its points of lowest and highest precision (ties: the higher threshold);
--   B = floor(N / 2) for 'roc', floor(N / 4) for 'pr', and for 'both' floor(N / 4) bins of
--   fpr and floor(N / 8) of recall (the union of the two). So at most N points, and the
--   curve drawn through them (lines or steps) and the exact one are within 1 / B of each other
--   horizontally: a segment between two bins is the exact curve's own, and within a bin both
--   pass through its lowest and highest point. A curve without x (no negatives for 'roc', no
--   positives for 'pr') is one bin. AUC and AP come from every point (ranking_metrics.sql).
WITH points AS (
    SELECT
        segment, label, threshold, tp, fp, fn, tn,
        lag(tp) OVER ordered AS tp_prev,
        lead(tp) OVER ordered AS tp_next,
        lag(fp) OVER ordered AS fp_prev,
        lead(fp) OVER ordered AS fp_next
    FROM curve_points
    WHERE tp + fp > 0
    WINDOW ordered AS (PARTITION BY segment, label ORDER BY threshold DESC)
),
kept AS (
    SELECT segment, label, threshold, tp, fp, fn, tn
    FROM points
    WHERE NOT $drop_intermediate
        OR tp_prev IS NULL
        OR tp_next IS NULL
        OR ($kind <> 'roc' AND (tp <> tp_prev OR tp_next <> tp))
        OR ($kind <> 'pr' AND ((fp_next - fp) - (fp - fp_prev) <> 0
                               OR (tp_next - tp) - (tp - tp_prev) <> 0))
    UNION ALL
    SELECT segment, label, threshold, tp, fp, fn, tn
    FROM curve_points
    WHERE tp + fp = 0
),
rates AS (
    SELECT
        segment, label, threshold, tp, fp, fn, tn,
        CASE WHEN tp + fn <> 0 THEN tp / (tp + fn) END AS tpr,
        CASE WHEN fp + tn <> 0 THEN fp / (fp + tn) END AS fpr,
        CASE WHEN tp + fp = 0 THEN 1.0 ELSE tp / (tp + fp) END AS precision
    FROM kept
),
bins AS (
    SELECT
        CASE
            WHEN $kind = 'roc' THEN CAST(floor($max_points / 2.0) AS DOUBLE)
            WHEN $kind = 'both' THEN CAST(floor($max_points / 4.0) AS DOUBLE)
        END AS roc_bins,
        CASE
            WHEN $kind = 'pr' THEN CAST(floor($max_points / 4.0) AS DOUBLE)
            WHEN $kind = 'both' THEN CAST(floor($max_points / 8.0) AS DOUBLE)
        END AS pr_bins
),
binned AS (
    -- only with $max_points: each point's bin of each kind drawn (-1: no x)
    SELECT
        r.segment, r.label, r.threshold, r.tp, r.fp, r.fn, r.tn, r.tpr, r.fpr, r.precision,
        CASE
            WHEN b.roc_bins IS NULL THEN NULL
            WHEN r.fpr IS NULL THEN -1.0
            ELSE least(floor(r.fpr * b.roc_bins), b.roc_bins - 1)
        END AS roc_bin,
        CASE
            WHEN b.pr_bins IS NULL THEN NULL
            WHEN r.tpr IS NULL THEN -1.0
            ELSE least(floor(r.tpr * b.pr_bins), b.pr_bins - 1)
        END AS pr_bin
    FROM rates AS r
    CROSS JOIN bins AS b
    WHERE coalesce($max_points, 0) > 0
),
counts AS (
    SELECT segment, label, count(*) AS points
    FROM binned
    GROUP BY segment, label
),
roc_picks AS (
    SELECT segment, label, roc_bin, max(threshold) AS first_t, min(threshold) AS last_t
    FROM binned
    WHERE roc_bin IS NOT NULL
    GROUP BY segment, label, roc_bin
),
pr_picks AS (
    SELECT
        segment, label, pr_bin, max(threshold) AS first_t, min(threshold) AS last_t,
        arg_min(threshold, (precision, -threshold)) AS low_t,
        arg_max(threshold, (precision, threshold)) AS high_t
    FROM binned
    WHERE pr_bin IS NOT NULL
    GROUP BY segment, label, pr_bin
),
thinned AS (
    SELECT b.segment, b.label, b.threshold, b.tp, b.fp, b.fn, b.tn, b.tpr, b.fpr, b.precision
    FROM binned AS b
    JOIN counts AS n
        ON n.segment IS NOT DISTINCT FROM b.segment AND n.label = b.label
    LEFT JOIN roc_picks AS r
        ON r.segment IS NOT DISTINCT FROM b.segment AND r.label = b.label
        AND r.roc_bin = b.roc_bin
    LEFT JOIN pr_picks AS p
        ON p.segment IS NOT DISTINCT FROM b.segment AND p.label = b.label
        AND p.pr_bin = b.pr_bin
    WHERE n.points <= $max_points
        OR b.threshold IN (r.first_t, r.last_t)
        OR b.threshold IN (p.first_t, p.last_t, p.low_t, p.high_t)
),
drawn AS (
    SELECT segment, label, threshold, tp, fp, fn, tn, tpr, fpr, precision
    FROM rates
    WHERE coalesce($max_points, 0) = 0
    UNION ALL
    SELECT segment, label, threshold, tp, fp, fn, tn, tpr, fpr, precision
    FROM thinned
)
SELECT segment, label, threshold, tp, fp, fn, tn, tpr, fpr, precision, tpr AS recall
FROM drawn
