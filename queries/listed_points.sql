-- listed_points: confusion counts of each label at each listed threshold (predicted positive iff
-- score >= threshold), in one sorted pass: the thresholds are merged into the stream of distinct
-- scores, and running sums down the scores give what lies at or above and below each threshold
-- (no scan of the scores per threshold). A score equal to a threshold counts as predicted
-- positive; a threshold above every score predicts nothing (tp = fp = 0); one below every score
-- predicts everything (fn = tn = 0). Every (segment, label) of score_counts gets every threshold.
-- Reads:  score_counts(segment, label, score, pos, neg)  (score_counts.sql)
-- Params: $thresholds (a list of numbers, DOUBLE[]; sorted and distinct)
-- Gives:  sweep_points(segment, label, threshold, tp, fp, fn, tn), each a sum of weight

WITH listed AS (
    SELECT keys.segment, keys.label, thresholds.threshold
    FROM (SELECT DISTINCT segment, label FROM score_counts) AS keys
    CROSS JOIN (SELECT unnest(CAST($thresholds AS DOUBLE[])) AS threshold) AS thresholds
),
merged AS (
    -- at equal values a score sorts before a threshold, so it counts as at or above it
    SELECT segment, label, score AS point, 0 AS is_threshold, pos, neg FROM score_counts
    UNION ALL
    SELECT segment, label, threshold, 1, 0.0, 0.0 FROM listed
),
swept AS (
    SELECT
        segment,
        label,
        point,
        is_threshold,
        sum(pos) OVER above AS tp,
        sum(neg) OVER above AS fp,
        coalesce(sum(pos) OVER below, 0) AS fn,
        coalesce(sum(neg) OVER below, 0) AS tn
    FROM merged
    WINDOW
        above AS (PARTITION BY segment, label ORDER BY point DESC, is_threshold
                  ROWS UNBOUNDED PRECEDING),
        below AS (PARTITION BY segment, label ORDER BY point DESC, is_threshold
                  ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
)
SELECT segment, label, point AS threshold, tp, fp, fn, tn
FROM swept
WHERE is_threshold = 1
