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
--   totals P, N are its counts at the lowest score (one small GROUP BY over the blocks, cheaper
--   than whole-partition windows): fn = P - tp and tn = N - fp, set to exactly 0 at and below
--   the lowest score with positive (negative) weight, where a window's sums added in another
--   order could leave a rounding residue.
--   Portable SQL: one window (running sums, lag, lead), a join on the few multi-row blocks.
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
        lag(score) OVER ordered AS previous_score,
        lead(score) OVER ordered AS next_score
    FROM scored
    WINDOW
        -- one sort serves both (same partition and order); lag and lead take no frame
        ordered AS (PARTITION BY segment, label ORDER BY score DESC),
        running AS (PARTITION BY segment, label ORDER BY score DESC ROWS UNBOUNDED PRECEDING)
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
        CASE WHEN ends.first_tied THEN ends.pos ELSE ends.tp - above.tp_above END AS pos,
        CASE WHEN ends.first_tied THEN ends.neg ELSE ends.fp - above.fp_above END AS neg
    FROM marked AS ends
    LEFT JOIN long_blocks AS above
        ON NOT ends.first_tied
        AND above.segment IS NOT DISTINCT FROM ends.segment
        AND above.label = ends.label
        AND above.score = ends.score
    WHERE ends.last_tied
),
totals AS (
    -- P and N: the counts at the lowest score (every block, zero-weight ones included, keeps
    -- the label), and the lowest scores with positive and with negative weight
    SELECT
        segment,
        label,
        max(tp) AS p,
        max(fp) AS n,
        min(threshold) FILTER (WHERE pos > 0) AS lowest_pos,
        min(threshold) FILTER (WHERE neg > 0) AS lowest_neg
    FROM blocks
    GROUP BY segment, label
)
SELECT
    blocks.segment,
    blocks.label,
    blocks.threshold,
    blocks.tp,
    blocks.fp,
    CASE WHEN blocks.threshold > totals.lowest_pos THEN totals.p - blocks.tp ELSE 0.0 END AS fn,
    CASE WHEN blocks.threshold > totals.lowest_neg THEN totals.n - blocks.fp ELSE 0.0 END AS tn,
    blocks.pos,
    blocks.neg
FROM blocks
JOIN totals
    ON totals.segment IS NOT DISTINCT FROM blocks.segment AND totals.label = blocks.label
WHERE blocks.pos + blocks.neg > 0
UNION ALL
SELECT segment, label, CAST('inf' AS DOUBLE), 0.0, 0.0, p, n, 0.0, 0.0
FROM totals
