-- ranked_points: the exact ROC / PR curve of each label as a table, in one sorted pass and with
-- no aggregation over distinct scores: confusion counts at every distinct score taken as
-- threshold (predicted positive iff score >= threshold: tied scores are one point), plus the
-- origin at threshold +inf, where nothing is predicted positive.
--   The rows of each (segment, label) are sorted by score, descending; running sums give the
--   positive (tp) and negative (fp) weight at or above each row. A row ends its block of tied
--   scores where the next row has another score (lead): its running sums are the counts at
--   that score, and its peers' sums (a RANGE frame of the row's own score) the block's weight
--   (pos, neg). Blocks with no weight (only zero-weight rows) make no point, as scikit-learn
--   drops zero-weight samples from its curves. The label's first row (no lag) also gives its
--   origin. P and N, the label's totals, are sums over its whole partition: fn = P - tp and
--   tn = N - fp, set to exactly 0 at and below the lowest score with positive (negative)
--   weight, where sums added in another order could leave a rounding residue.
--   Portable SQL, one window pass: every window has the same partition and order (one sort),
--   and no join, GROUP BY or CTE read twice, so nothing wide is materialised but the result.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $bins (NULL: every distinct score, exact; N: each score first moved down to the grid
--         0, 1/N, 2/N, ..., to the largest k/N <= score, exactly)
-- Uses:   macros/grid.sql
-- Gives:  curve_points(segment, label, threshold, tp, fp, fn, tn, pos, neg)
--   pos and neg: the weight of true and false rows at the point's score (0 at the origin), so
--   the previous point (the next higher threshold) is (tp - pos, fp - neg) and P = tp + fn.
WITH scored AS (
    SELECT
        segment,
        label,
        on_grid(score, $bins) AS score,
        CASE WHEN truth THEN weight ELSE 0.0 END AS pos,
        CASE WHEN truth THEN 0.0 ELSE weight END AS neg
    FROM predictions
),
ranked AS (
    SELECT
        segment, label, score,
        sum(pos) OVER running AS tp,
        sum(neg) OVER running AS fp,
        sum(pos) OVER tied AS block_pos,
        sum(neg) OVER tied AS block_neg,
        lag(score) OVER ordered AS previous_score,
        lead(score) OVER ordered AS next_score,
        sum(pos) OVER whole AS p,
        sum(neg) OVER whole AS n,
        min(CASE WHEN pos > 0 THEN score END) OVER whole AS lowest_pos,
        min(CASE WHEN neg > 0 THEN score END) OVER whole AS lowest_neg
    FROM scored
    WINDOW
        -- one partition and order for all (each spelled out: Spark cannot refer to another)
        whole AS (PARTITION BY segment, label),
        ordered AS (PARTITION BY segment, label ORDER BY score DESC),
        running AS (PARTITION BY segment, label ORDER BY score DESC ROWS UNBOUNDED PRECEDING),
        tied AS (PARTITION BY segment, label ORDER BY score DESC
                 RANGE BETWEEN CURRENT ROW AND CURRENT ROW)
)
SELECT
    segment,
    label,
    CASE WHEN origin THEN CAST('inf' AS DOUBLE) ELSE score END AS threshold,
    CASE WHEN origin THEN 0.0 ELSE tp END AS tp,
    CASE WHEN origin THEN 0.0 ELSE fp END AS fp,
    CASE WHEN origin THEN p WHEN score > lowest_pos THEN p - tp ELSE 0.0 END AS fn,
    CASE WHEN origin THEN n WHEN score > lowest_neg THEN n - fp ELSE 0.0 END AS tn,
    CASE WHEN origin THEN 0.0 ELSE block_pos END AS pos,
    CASE WHEN origin THEN 0.0 ELSE block_neg END AS neg
FROM ranked
-- each row read twice in the same stream: as a point (the end of its block) and as the
-- origin (the label's first row)
CROSS JOIN (VALUES (false), (true)) AS points (origin)
WHERE CASE
    WHEN origin THEN previous_score IS NULL
    ELSE (next_score IS NULL OR next_score <> score) AND block_pos + block_neg > 0
END
