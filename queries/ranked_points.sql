-- ranked_points: the exact ROC / PR curve of each label as a table, in one sorted pass and with
-- no aggregation over distinct scores: confusion counts at every distinct score taken as
-- threshold (predicted positive iff score >= threshold: tied scores are one point), plus the
-- origin at threshold +inf, where nothing is predicted positive.
--   The rows of each (segment, label) are sorted by score, descending; running sums give the
--   positive (tp) and negative (fp) weight at or above each row. A row ends its block of tied
--   scores where the next row has another score: its running sums are the counts at that score.
--   A block's own weight (pos, neg) is the row's own for a block of one row; for a block of
--   several, its end minus what lay above its first row. Blocks with no weight (only zero-weight
--   rows) make no point, as scikit-learn drops zero-weight samples from its curves. Each label's
--   totals P, N come from the same partition: fn = P - tp and tn = N - fp, set to exactly 0 at
--   and below the lowest score with positive (negative) weight, where a window's sums added in
--   another order could leave a rounding residue.
--   Portable SQL: window sums, lag and lead, a join on the few multi-row blocks.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $bins (NULL: every distinct score, exact; N: each score first moved down to the grid
--         0, 1/N, 2/N, ..., to the largest k/N <= score, exactly)
-- Gives:  curve_points(segment, label, threshold, tp, fp, fn, tn, pos, neg)
--   pos and neg: the weight of true and false rows at the point's score (0 at the origin), so
--   the previous point (the next higher threshold) is (tp - pos, fp - neg) and P = tp + fn.
WITH gridded AS (
    SELECT segment, label, truth, weight, score, floor(score * $bins) AS k
    FROM predictions
),
scored AS (
    SELECT
        segment,
        label,
        CASE
            WHEN $bins IS NULL THEN score
            WHEN (k + 1) / $bins <= score THEN (k + 1) / $bins
            WHEN k / $bins > score THEN (k - 1) / $bins
            ELSE k / $bins
        END AS score,
        CASE WHEN truth THEN weight ELSE 0.0 END AS pos,
        CASE WHEN truth THEN 0.0 ELSE weight END AS neg
    FROM gridded
),
ranked AS (
    SELECT
        segment, label, score, pos, neg,
        sum(pos) OVER running AS tp,
        sum(neg) OVER running AS fp,
        lag(score) OVER running AS previous_score,
        lead(score) OVER running AS next_score,
        sum(pos) OVER curve AS p,
        sum(neg) OVER curve AS n,
        min(CASE WHEN pos > 0 THEN score END) OVER curve AS lowest_pos,
        min(CASE WHEN neg > 0 THEN score END) OVER curve AS lowest_neg
    FROM scored
    WINDOW
        running AS (PARTITION BY segment, label ORDER BY score DESC ROWS UNBOUNDED PRECEDING),
        curve AS (PARTITION BY segment, label)
),
marked AS (
    SELECT
        *,
        previous_score IS NULL OR previous_score <> score AS first_tied,
        next_score IS NULL OR next_score <> score AS last_tied
    FROM ranked
),
long_blocks AS (
    -- the first row of each block of several tied rows: the counts just above the block
    SELECT segment, label, score, tp - pos AS tp_above, fp - neg AS fp_above
    FROM marked
    WHERE first_tied AND NOT last_tied
),
blocks AS (
    SELECT
        ends.segment,
        ends.label,
        ends.score AS threshold,
        ends.tp,
        ends.fp,
        CASE WHEN ends.score > ends.lowest_pos THEN ends.p - ends.tp ELSE 0.0 END AS fn,
        CASE WHEN ends.score > ends.lowest_neg THEN ends.n - ends.fp ELSE 0.0 END AS tn,
        CASE WHEN ends.first_tied THEN ends.pos ELSE ends.tp - above.tp_above END AS pos,
        CASE WHEN ends.first_tied THEN ends.neg ELSE ends.fp - above.fp_above END AS neg
    FROM marked AS ends
    LEFT JOIN long_blocks AS above
        ON NOT ends.first_tied
        AND above.segment IS NOT DISTINCT FROM ends.segment
        AND above.label = ends.label
        AND above.score = ends.score
    WHERE ends.last_tied
)
SELECT segment, label, threshold, tp, fp, fn, tn, pos, neg
FROM blocks
WHERE pos + neg > 0
UNION ALL
SELECT segment, label, CAST('inf' AS DOUBLE), 0.0, 0.0, p, n, 0.0, 0.0
FROM marked
WHERE previous_score IS NULL
