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
--   $max_points: a curve of more than N points (the origin included) keeps, in each of B
--   equal-width bins of its x axis (fpr for 'roc', recall for 'pr'), its first and last point
--   and ('pr') its points of lowest and highest precision (ties: the higher threshold); B =
--   floor(N / 2) for 'roc', floor(N / 4) for 'pr', and for 'both' floor(N / 4) bins of fpr and
--   floor(N / 8) of recall (the union of the two). So at most N points, and the curve drawn
--   through them (lines or steps) and the exact one are within 1 / B of each other
--   horizontally: a segment between two bins is the exact curve's own, and within a bin both
--   pass through its lowest and highest point. A curve without x (no negatives for 'roc', no
--   positives for 'pr') is one bin. A curve of at most N points keeps its points (with
--   $drop_intermediate, those the rule keeps): only the curves that fit are sorted by
--   threshold. AUC and AP come from every point (ranking_metrics.sql).
WITH thinned AS (
    -- the curves of more than $max_points points
    SELECT segment, label, true AS thin
    FROM curve_points
    WHERE coalesce($max_points, 0) > 0
    GROUP BY segment, label
    HAVING count(*) > $max_points
),
rated AS (
    SELECT
        segment, label, threshold, tp, fp, fn, tn,
        CASE WHEN tp + fn <> 0 THEN tp / (tp + fn) END AS tpr,
        CASE WHEN fp + tn <> 0 THEN fp / (fp + tn) END AS fpr,
        CASE WHEN tp + fp = 0 THEN 1.0 ELSE tp / (tp + fp) END AS precision,
        -- the bins of each axis drawn (NULL: not drawn)
        CAST(CASE $kind WHEN 'roc' THEN floor($max_points / 2.0)
                        WHEN 'both' THEN floor($max_points / 4.0) END AS DOUBLE) AS roc_bins,
        CAST(CASE $kind WHEN 'pr' THEN floor($max_points / 4.0)
                        WHEN 'both' THEN floor($max_points / 8.0) END AS DOUBLE) AS pr_bins
    FROM curve_points
),
points AS (
    -- the points of the curves not thinned with their neighbours (the origin first: it has the
    -- highest threshold, and no other point has tp + fp = 0)
    SELECT
        r.segment, r.label, r.threshold, r.tp, r.fp, r.fn, r.tn, r.tpr, r.fpr, r.precision,
        lag(r.tp) OVER ordered AS tp_prev,
        lead(r.tp) OVER ordered AS tp_next,
        lag(r.fp) OVER ordered AS fp_prev,
        lead(r.fp) OVER ordered AS fp_next
    FROM rated AS r
    LEFT JOIN thinned AS t ON t.segment IS NOT DISTINCT FROM r.segment AND t.label = r.label
    WHERE t.thin IS NULL
    WINDOW ordered AS (PARTITION BY r.segment, r.label ORDER BY r.threshold DESC)
),
kept AS (
    -- the origin, the first point (after the origin) and the last, and the rule's points
    SELECT segment, label, threshold, tp, fp, fn, tn, tpr, fpr, precision
    FROM points
    WHERE NOT $drop_intermediate
        OR tp + fp = 0
        OR tp_prev + fp_prev = 0
        OR tp_next IS NULL
        OR ($kind <> 'roc' AND (tp <> tp_prev OR tp_next <> tp))
        OR ($kind <> 'pr' AND ((fp_next - fp) - (fp - fp_prev) <> 0
                               OR (tp_next - tp) - (tp - tp_prev) <> 0))
),
binned AS (
    -- each point's bin of each axis drawn (-1: no x)
    SELECT
        segment, label, threshold, precision,
        CASE WHEN fpr IS NULL THEN -1.0 ELSE least(floor(fpr * roc_bins), roc_bins - 1)
        END AS roc_bin,
        CASE WHEN tpr IS NULL THEN -1.0 ELSE least(floor(tpr * pr_bins), pr_bins - 1)
        END AS pr_bin
    FROM rated
),
roc_picks AS (
    SELECT b.segment, b.label, max(b.threshold) AS first_t, min(b.threshold) AS last_t
    FROM binned AS b
    JOIN thinned AS t ON t.segment IS NOT DISTINCT FROM b.segment AND t.label = b.label
    WHERE $kind <> 'pr'
    GROUP BY b.segment, b.label, b.roc_bin
),
pr_picks AS (
    SELECT
        b.segment, b.label, max(b.threshold) AS first_t, min(b.threshold) AS last_t,
        arg_min(b.threshold, (b.precision, -b.threshold)) AS low_t,
        arg_max(b.threshold, (b.precision, b.threshold)) AS high_t
    FROM binned AS b
    JOIN thinned AS t ON t.segment IS NOT DISTINCT FROM b.segment AND t.label = b.label
    WHERE $kind <> 'roc'
    GROUP BY b.segment, b.label, b.pr_bin
),
picked AS (
    SELECT segment, label, first_t AS threshold FROM roc_picks
    UNION
    SELECT segment, label, last_t FROM roc_picks
    UNION
    SELECT segment, label, first_t FROM pr_picks
    UNION
    SELECT segment, label, last_t FROM pr_picks
    UNION
    SELECT segment, label, low_t FROM pr_picks
    UNION
    SELECT segment, label, high_t FROM pr_picks
),
drawn AS (
    SELECT segment, label, threshold, tp, fp, fn, tn, tpr, fpr, precision
    FROM kept
    UNION ALL
    SELECT r.segment, r.label, r.threshold, r.tp, r.fp, r.fn, r.tn, r.tpr, r.fpr, r.precision
    FROM rated AS r
    JOIN picked AS p
        ON p.segment IS NOT DISTINCT FROM r.segment AND p.label = r.label
        AND p.threshold = r.threshold
)
SELECT segment, label, threshold, tp, fp, fn, tn, tpr, fpr, precision, tpr AS recall
FROM drawn
