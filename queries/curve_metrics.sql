-- curve_metrics: ROC AUC (with $max_fpr: partial, McClish-corrected), average precision and the
-- precision = recall break-even point of each label and of the labels pooled, read off the exact
-- curve: ranking_metrics' rows where the curve table is made anyway (operating points, curves,
-- DeLong's intervals; the Spark engine's curve, sorted across partitions).
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn, pos, neg)  (ranked_points.sql)
-- Params: $max_fpr (NULL or 1: the whole ROC curve); $micro (false: no pooled curve, whose
--         sort costs more than all the per-label curves together); $unit_weights (every weight
--         is 1: the fractional terms are summed exactly, in no particular order, as in
--         ranking_metrics.sql, and the trapezoids are whole numbers scaled by powers of two)
-- Uses:   macros/exact_sum.sql
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro, weighted and macro_std averages)
--   Each curve is walked by threshold, descending from the origin (+inf); P and N are the
--   positive and negative weight of the label (tp and fp at the lowest threshold), and tied
--   scores are one point, so every metric counts ties as scikit-learn does. Every term is local
--   to a point: its block of tied weight (pos, neg) leads from the previous point
--   (tp - pos, fp - neg) to it, so each curve is one GROUP BY (the pooled micro curve: one
--   window over every label's points, whose RANGE frames make tied scores one block). The
--   metrics' definitions: ranking_metrics.sql.
WITH params AS (
    SELECT CAST($max_fpr AS DOUBLE) AS max_fpr
),
label_points AS (
    -- P and N from the origin (+inf), where fn = P and tn = N: the same value on every point
    SELECT
        c.segment, CAST(NULL AS VARCHAR) AS average, c.label, c.threshold, c.tp, c.fp,
        c.tp - c.pos AS tp0, c.fp - c.neg AS fp0, c.pos, c.neg, totals.p, totals.n,
        totals.p_scale, totals.n_scale
    FROM curve_points AS c
    JOIN (
        -- powers of two near 1 / P and 1 / N: scaling by them is exact, so the trapezoids of
        -- whole weights sum exactly (as P * N would) without P * N overflowing or underflowing
        SELECT
            segment, label, fn AS p, tn AS n,
            CASE WHEN fn > 0 THEN power(2.0, -ceil(ln(fn) / ln(2.0))) END AS p_scale,
            CASE WHEN tn > 0 THEN power(2.0, -ceil(ln(tn) / ln(2.0))) END AS n_scale
        FROM curve_points
        WHERE threshold = CAST('inf' AS DOUBLE)
    ) AS totals
        ON totals.segment IS NOT DISTINCT FROM c.segment AND totals.label = c.label
),
micro_points AS (
    -- every label's points on one curve per segment: a row is one label's weight at a score,
    -- tp and fp are those of its tied block (RANGE frame: all rows at a score or above)
    SELECT
        segment, 'micro' AS average, threshold, tp, fp,
        tp - block_pos AS tp0, fp - block_neg AS fp0, pos, neg, p, n,
        CASE WHEN p > 0 THEN power(2.0, -ceil(ln(p) / ln(2.0))) END AS p_scale,
        CASE WHEN n > 0 THEN power(2.0, -ceil(ln(n) / ln(2.0))) END AS n_scale
    FROM (
        SELECT
            segment, threshold, pos, neg,
            sum(pos) OVER upto AS tp,
            sum(neg) OVER upto AS fp,
            sum(pos) OVER tied AS block_pos,
            sum(neg) OVER tied AS block_neg,
            sum(pos) OVER pooled AS p,
            sum(neg) OVER pooled AS n
        FROM curve_points
        WHERE $micro AND pos + neg > 0  -- not the origins
        WINDOW
            upto AS (PARTITION BY segment ORDER BY threshold DESC
                     RANGE BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW),
            tied AS (PARTITION BY segment ORDER BY threshold DESC
                     RANGE BETWEEN CURRENT ROW AND CURRENT ROW),
            pooled AS (PARTITION BY segment)
    ) AS pooled_points
),
rates AS (
    SELECT
        segment, average, label, threshold, tp, fp, tp0, fp0, pos, neg, p, n, p_scale, n_scale,
        CASE WHEN p > 0 THEN tp / p END AS tpr,
        CASE WHEN p > 0 THEN tp0 / p END AS tpr0,
        CASE WHEN n > 0 THEN fp / n END AS fpr,
        CASE WHEN n > 0 THEN fp0 / n END AS fpr0
    FROM (
        SELECT * FROM label_points
        UNION ALL
        -- NULL here, not in micro_points: a NULL a CTE gives is text in PostgreSQL, which no
        -- UNION with an integer or boolean label matches
        SELECT segment, average, NULL, threshold, tp, fp, tp0, fp0, pos, neg, p, n, p_scale,
               n_scale
        FROM micro_points
    ) AS points
),
terms AS (
    -- no product of raw weight sums (P * N overflows at weights of 1e300): the trapezoids in
    -- units of P and N scaled by powers of two, the other terms from rates (tp / P, fp / N)
    SELECT
        segment, average, label, p * p_scale AS p_scaled, n * n_scale AS n_scaled, p, n,
        max_fpr,
        -- the row's trapezoid under the ROC curve, times 2 P N (scaled)
        (neg * n_scale) * ((tp + tp0) * p_scale) AS area,
        CASE
            WHEN fpr <= max_fpr THEN neg / n * (tpr + tpr0) / 2
            WHEN fpr0 <= max_fpr  -- the block crossing max_fpr, cut there
                THEN neg / (fp - fp0) * (max_fpr - fpr0)
                     * (2 * tpr0 + (tpr - tpr0) * (max_fpr - fpr0) / (fpr - fpr0)) / 2
            ELSE 0.0
        END AS partial_area,
        CASE WHEN pos > 0 THEN pos / p * (tp / (tp + fp)) END AS precision_step,
        -- the row's share of positive weight among the first P predicted: all of it in blocks
        -- that end by P, none past P, the share (P - n_before) / n_block in the block that
        -- crosses P
        CASE WHEN pos > 0 AND tp + fp > tp0 + fp0
            THEN pos / p * greatest(0.0, least(1.0, (p - (tp0 + fp0)) / ((tp + fp) - (tp0 + fp0))))
        END AS break_even_step
    FROM rates, params
),
curve_values AS (
    SELECT
        segment, average, label,
        max(p) AS support,
        CASE
            WHEN max(p) = 0 OR max(n) = 0 THEN NULL
            WHEN max(max_fpr) IS NULL OR max(max_fpr) >= 1
                THEN sum(area) / (2 * max(p_scaled) * max(n_scaled))
            ELSE 0.5 * (1 + (exact_sum(partial_area, $unit_weights)
                             - max(max_fpr) * max(max_fpr) / 2)
                            / (max(max_fpr) - max(max_fpr) * max(max_fpr) / 2))
        END AS roc_auc,
        CASE WHEN max(p) > 0
            THEN exact_sum(precision_step, $unit_weights)
        END AS average_precision,
        CASE WHEN max(p) > 0
            THEN exact_sum(break_even_step, $unit_weights)
        END AS break_even
    FROM terms
    GROUP BY segment, average, label
),
segments AS (
    SELECT DISTINCT segment FROM curve_values
),
per_curve AS (
    SELECT segment, average, label, support, roc_auc, average_precision, break_even
    FROM curve_values
    WHERE average IS NULL
    UNION ALL
    SELECT s.segment, 'micro', NULL, v.support, v.roc_auc, v.average_precision, v.break_even
    FROM segments AS s
    LEFT JOIN curve_values AS v
        ON v.segment IS NOT DISTINCT FROM s.segment AND v.average = 'micro'
    WHERE $micro
)
SELECT segment, 'roc_auc' AS metric, average, label, roc_auc AS value, support FROM per_curve
UNION ALL
SELECT segment, 'average_precision', average, label, average_precision, support FROM per_curve
UNION ALL
SELECT segment, 'break_even', average, label, break_even, support FROM per_curve
