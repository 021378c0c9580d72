-- score_counts: the weight of true and of false rows at each distinct score of each label: the
-- one aggregation that ROC and PR curves, ranking metrics, operating points and threshold sweeps
-- share. With $bins = N each score is first moved down to the grid 0, 1/N, 2/N, ... (to the
-- largest k/N <= score, exactly), so the table is small and exact at the grid's thresholds.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $bins (NULL: every distinct score, exact)
-- Gives:  score_counts(segment, label, score, pos, neg)
WITH gridded AS (
    SELECT segment, label, truth, weight, score, floor(score * $bins) AS k
    FROM predictions
),
scored AS (
    SELECT
        segment, label, truth, weight,
        CASE
            WHEN $bins IS NULL THEN score
            WHEN (k + 1) / $bins <= score THEN (k + 1) / $bins
            WHEN k / $bins > score THEN (k - 1) / $bins
            ELSE k / $bins
        END AS score
    FROM gridded
)
SELECT
    segment,
    label,
    score,
    coalesce(sum(weight) FILTER (WHERE truth), 0) AS pos,
    coalesce(sum(weight) FILTER (WHERE NOT truth), 0) AS neg
FROM scored
GROUP BY segment, label, score
