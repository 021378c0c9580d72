-- threshold_buckets: the weight of true and of false rows of each label between consecutive
-- thresholds of a sweep, in one scan: each score goes to the highest threshold at or below it
-- (NULL: below every threshold), so that the counts at each threshold are running sums over at
-- most T + 1 buckets per label (listed_points.sql), never a table of every distinct score.
-- With $bins = N the thresholds are the grid 0, 1/N, ..., 1 and a score's place on it is
-- computed (exactly: the largest k/N at or below the score); a listed score is compared with
-- each threshold (cheap for the few thresholds a list holds).
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $thresholds (a list of numbers, DOUBLE[]; sorted and distinct), $bins (N when the
--         thresholds are k/N, k = 0..N; NULL for any other list)
-- Uses:   macros/grid.sql
-- Gives:  threshold_buckets(segment, label, threshold, pos, neg)
WITH placed AS (
    SELECT
        segment, label, truth, weight,
        -- how many thresholds lie at or below the score: its bucket's threshold is that one
        CASE
            WHEN $bins IS NULL THEN list_sum(list_transform(CAST($thresholds AS DOUBLE[]),
                                                          lambda t: CAST(t <= score AS INTEGER)))
            ELSE least(greatest(grid_index(score, $bins) + 1, 0), $bins + 1)
        END AS position
    FROM predictions
),
counted AS (
    SELECT
        segment,
        label,
        CAST(position AS BIGINT) AS position,
        coalesce(sum(weight) FILTER (WHERE truth), 0) AS pos,
        coalesce(sum(weight) FILTER (WHERE NOT truth), 0) AS neg
    FROM placed
    GROUP BY segment, label, position
)
SELECT
    segment,
    label,
    -- position 0: below them all, NULL
    CASE WHEN position > 0 THEN CAST($thresholds AS DOUBLE[])[position] END AS threshold,
    pos,
    neg
FROM counted
