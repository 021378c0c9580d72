-- distinct_points: confusion counts of each label at every distinct score taken as threshold
-- (predicted positive iff score >= threshold: tied scores are one point), plus the origin at
-- threshold +inf, where nothing is predicted positive. Scores that only zero-weight rows have
-- make no point (as scikit-learn, which drops zero-weight samples from its curves).
-- Reads:  score_counts(segment, label, score, pos, neg)  (score_counts.sql)
-- Gives:  curve_points(segment, label, threshold, tp, fp, fn, tn, pos, neg)
--   pos and neg: the weight of true and false rows at the point's score (0 at the origin), so
--   the previous point (the next higher threshold) is (tp - pos, fp - neg) and P = tp + fn.
--   One running sum down the scores; fn = P - tp and tn = N - fp, where P and N are the running
--   sums at the lowest point (as scikit-learn's tps[-1] - tps), and exactly 0 at and below the
--   lowest score with positive (negative) weight: running sums in a window need not add up in
--   order, so P - tp alone could leave a rounding residue where nothing is left below.
WITH points AS (
    SELECT
        segment, label, score, pos, neg,
        sum(pos) OVER above AS tp,
        sum(neg) OVER above AS fp
    FROM score_counts
    WHERE pos + neg > 0
    WINDOW above AS (PARTITION BY segment, label ORDER BY score DESC ROWS UNBOUNDED PRECEDING)
),
totals AS (
    SELECT
        segment, label, arg_min(tp, score) AS p, arg_min(fp, score) AS n,
        min(score) FILTER (WHERE pos > 0) AS lowest_pos,
        min(score) FILTER (WHERE neg > 0) AS lowest_neg
    FROM points
    GROUP BY segment, label
)
SELECT
    points.segment,
    points.label,
    points.score AS threshold,
    points.tp,
    points.fp,
    CASE WHEN points.score > totals.lowest_pos THEN totals.p - points.tp ELSE 0.0 END AS fn,
    CASE WHEN points.score > totals.lowest_neg THEN totals.n - points.fp ELSE 0.0 END AS tn,
    points.pos,
    points.neg
FROM points
JOIN totals
    ON points.segment IS NOT DISTINCT FROM totals.segment AND points.label = totals.label
UNION ALL
SELECT
    labels.segment, labels.label, CAST('inf' AS DOUBLE), 0.0, 0.0,
    coalesce(totals.p, 0.0), coalesce(totals.n, 0.0), 0.0, 0.0
FROM (SELECT DISTINCT segment, label FROM score_counts) AS labels
LEFT JOIN totals
    ON labels.segment IS NOT DISTINCT FROM totals.segment AND labels.label = totals.label
