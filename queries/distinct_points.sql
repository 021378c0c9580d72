-- distinct_points: confusion counts of each label at every distinct score taken as threshold
-- (predicted positive iff score >= threshold: tied scores are one point), plus the origin at
-- threshold +inf, where nothing is predicted positive. Scores that only zero-weight rows have
-- make no point (as scikit-learn, which drops zero-weight samples from its curves).
-- Reads:  score_counts(segment, label, score, pos, neg)  (score_counts.sql)
-- Gives:  curve_points(segment, label, threshold, tp, fp, fn, tn)
SELECT
    segment,
    label,
    score AS threshold,
    sum(pos) OVER above AS tp,
    sum(neg) OVER above AS fp,
    coalesce(sum(pos) OVER below, 0) AS fn,
    coalesce(sum(neg) OVER below, 0) AS tn
FROM score_counts
WHERE pos + neg > 0
WINDOW
    above AS (PARTITION BY segment, label ORDER BY score DESC ROWS UNBOUNDED PRECEDING),
    below AS (PARTITION BY segment, label ORDER BY score DESC
              ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
UNION ALL
SELECT segment, label, CAST('inf' AS DOUBLE), 0.0, 0.0, sum(pos), sum(neg)
FROM score_counts
GROUP BY segment, label
