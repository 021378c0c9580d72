-- distinct_points: confusion counts of each label at every distinct score taken as threshold
-- (predicted positive iff score >= threshold: tied scores are one point), plus the origin at
-- threshold +inf, where nothing is predicted positive. Scores that only zero-weight rows have
-- make no point (as scikit-learn, which drops zero-weight samples from its curves).
-- Reads:  score_counts(segment, label, score, pos, neg)  (score_counts.sql)
-- Gives:  curve_points(segment, label, threshold, tp, fp, fn, tn, pos, neg)
--   pos and neg: the weight of true and false rows at the point's score (0 at the origin), so
--   the previous point (the next higher threshold) is (tp - pos, fp - neg) and P = tp + fn.
--   One running sum down the scores, and the label's totals P and N from the same partition
--   (one sort serves both); fn = P - tp and tn = N - fp, exactly 0 at and below the lowest
--   score with positive (negative) weight: running sums in a window need not add up in order,
--   so P - tp alone could leave a rounding residue where nothing is left below.
WITH points AS (
    SELECT
        segment, label, score, pos, neg,
        sum(pos) OVER above AS tp,
        sum(neg) OVER above AS fp,
        sum(pos) OVER curve AS p,
        sum(neg) OVER curve AS n,
        min(score) FILTER (WHERE pos > 0) OVER curve AS lowest_pos,
        min(score) FILTER (WHERE neg > 0) OVER curve AS lowest_neg
    FROM score_counts
    WHERE pos + neg > 0
    WINDOW
        above AS (PARTITION BY segment, label ORDER BY score DESC ROWS UNBOUNDED PRECEDING),
        curve AS (PARTITION BY segment, label)
)
SELECT
    segment,
    label,
    score AS threshold,
    tp,
    fp,
    CASE WHEN score > lowest_pos THEN p - tp ELSE 0.0 END AS fn,
    CASE WHEN score > lowest_neg THEN n - fp ELSE 0.0 END AS tn,
    pos,
    neg
FROM points
UNION ALL
SELECT segment, label, CAST('inf' AS DOUBLE), 0.0, 0.0, sum(pos), sum(neg), 0.0, 0.0
FROM score_counts
GROUP BY segment, label
