-- listed_points: confusion counts of each label at each listed threshold (predicted positive iff
-- score >= threshold): running sums over the buckets of threshold_buckets, highest threshold
-- first, so tp and fp at a threshold are the weight of its bucket and every one above it, fn and
-- tn the weight of the buckets below (the NULL bucket, below every threshold, included). A
-- threshold above every score predicts nothing (tp = fp = 0); one at or below every score
-- predicts everything (fn = tn = 0). Every (segment, label) with rows gets every threshold.
-- Reads:  threshold_buckets(segment, label, threshold, pos, neg)  (threshold_buckets.sql)
-- Params: $thresholds (a list of numbers, DOUBLE[]; sorted and distinct)
-- Gives:  sweep_points(segment, label, threshold, tp, fp, fn, tn), each a sum of weight

WITH listed AS (
    SELECT keys.segment, keys.label, thresholds.threshold
    FROM (SELECT DISTINCT segment, label FROM threshold_buckets) AS keys
    CROSS JOIN (SELECT unnest(CAST($thresholds AS DOUBLE[])) AS threshold) AS thresholds
),
filled AS (
    SELECT
        listed.segment,
        listed.label,
        listed.threshold,
        coalesce(b.pos, 0) AS pos,
        coalesce(b.neg, 0) AS neg
    FROM listed
    LEFT JOIN threshold_buckets AS b
        ON listed.segment IS NOT DISTINCT FROM b.segment
        AND listed.label = b.label
        AND listed.threshold = b.threshold
    UNION ALL
    SELECT segment, label, threshold, pos, neg FROM threshold_buckets WHERE threshold IS NULL
),
swept AS (
    SELECT
        segment,
        label,
        threshold,
        sum(pos) OVER above AS tp,
        sum(neg) OVER above AS fp,
        coalesce(sum(pos) OVER below, 0) AS fn,
        coalesce(sum(neg) OVER below, 0) AS tn
    FROM filled
    WINDOW
        above AS (PARTITION BY segment, label ORDER BY threshold DESC NULLS LAST
                  ROWS UNBOUNDED PRECEDING),
        below AS (PARTITION BY segment, label ORDER BY threshold DESC NULLS LAST
                  ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING)
)
SELECT segment, label, threshold, tp, fp, fn, tn
FROM swept
WHERE threshold IS NOT NULL
