-- ranking_metrics: ROC AUC (with $max_fpr: partial, McClish-corrected), average precision and the
-- precision = recall break-even point of each label and their averages, from the exact curve.
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn)  (distinct_points.sql)
--         score_counts(segment, label, score, pos, neg)  (score_counts.sql)
-- Params: $max_fpr (NULL or 1: the whole ROC curve)
-- Gives:  segment, metric, average, label, value
--   Each curve is walked by threshold, descending from the origin (+inf); P and N are the
--   positive and negative weight of the label (tp and fp at the lowest threshold), and tied
--   scores are one point, so every metric counts ties as scikit-learn does.
--   roc_auc: trapezoidal area under (fpr, tpr) = scikit-learn's roc_auc_score; NULL when P = 0
--     or N = 0. With $max_fpr < 1: the area for fpr <= $max_fpr (the curve interpolated linearly
--     at $max_fpr), McClish-corrected: 0.5 * (1 + (A - m^2/2) / (m - m^2/2)), as scikit-learn.
--   average_precision: sum over thresholds of (R_n - R_(n-1)) * P_n (step-wise, no
--     interpolation) = scikit-learn's average_precision_score; NULL when P = 0 (scikit-learn
--     1.9 returns 0 there, with a warning).
--   break_even: precision = recall exactly where the predicted weight n = tp + fp equals P.
--     The point is found in the tied block (one distinct score) within which n crosses P, and
--     tp is interpolated linearly inside it (its expectation when the tie is broken at random):
--     (tp_before + pos_block * (P - n_before) / n_block) / P. Without ties and with unit
--     weights this is the R-precision. NULL when P = 0.
--   micro: the same metrics on all labels pooled (scores of every label on one curve, as
--   scikit-learn's average='micro'); macro: mean over labels; weighted: mean weighted by P;
--   macro_std: population standard deviation over labels. Averages skip NULL labels (where
--   scikit-learn returns nan, or raises); weighted falls back to macro when no label has support.
--   A label of the input that a segment lacks gets NULL values.
--   Binned mode (score_counts with bins): scores within a bin are tied, so
--   |AUC_binned - AUC| <= sum over bins b of pos_b * neg_b / (2 P N)  (pairs tied inside a bin
--   count one half, instead of 0 or 1).
WITH params AS (
    SELECT CAST($max_fpr AS DOUBLE) AS max_fpr
),
pooled AS (
    SELECT segment, score, sum(pos) AS pos, sum(neg) AS neg
    FROM score_counts
    GROUP BY segment, score
    HAVING sum(pos) + sum(neg) > 0
    UNION ALL
    SELECT DISTINCT segment, CAST('inf' AS DOUBLE), 0.0, 0.0 FROM curve_points
),
curves AS (
    SELECT segment, CAST(NULL AS VARCHAR) AS average, label, threshold, tp, fp
    FROM curve_points
    UNION ALL
    SELECT segment, 'micro', NULL, score, sum(pos) OVER above, sum(neg) OVER above
    FROM pooled
    WINDOW above AS (PARTITION BY segment ORDER BY score DESC ROWS UNBOUNDED PRECEDING)
),
walked AS (
    SELECT
        segment, average, label, tp, fp,
        lag(tp) OVER ordered AS tp0,
        lag(fp) OVER ordered AS fp0,
        max(tp) OVER curve AS p,
        max(fp) OVER curve AS n
    FROM curves
    WINDOW
        curve AS (PARTITION BY segment, average, label),
        ordered AS (PARTITION BY segment, average, label ORDER BY threshold DESC)
),
rates AS (
    SELECT
        segment, average, label, tp, fp, tp0, fp0, p, n,
        CASE WHEN p > 0 THEN tp / p END AS tpr,
        CASE WHEN p > 0 THEN tp0 / p END AS tpr0,
        CASE WHEN n > 0 THEN fp / n END AS fpr,
        CASE WHEN n > 0 THEN fp0 / n END AS fpr0
    FROM walked
),
terms AS (
    SELECT
        segment, average, label, p, n, max_fpr,
        (fpr - fpr0) * (tpr + tpr0) / 2 AS area,
        CASE
            WHEN fpr <= max_fpr THEN (fpr - fpr0) * (tpr + tpr0) / 2
            WHEN fpr0 <= max_fpr
                THEN (max_fpr - fpr0)
                     * (2 * tpr0 + (tpr - tpr0) * (max_fpr - fpr0) / (fpr - fpr0)) / 2
            ELSE 0.0
        END AS partial_area,
        CASE WHEN tp + fp > 0 THEN (tpr - tpr0) * (tp / (tp + fp)) END AS precision_step,
        CASE WHEN tp0 + fp0 < p AND tp + fp >= p
            THEN (tp0 + (tp - tp0) * (p - (tp0 + fp0)) / ((tp + fp) - (tp0 + fp0))) / p
        END AS break_even
    FROM rates, params
),
curve_values AS (
    SELECT
        segment, average, label,
        max(p) AS support,
        CASE
            WHEN max(p) = 0 OR max(n) = 0 THEN NULL
            WHEN max(max_fpr) IS NULL OR max(max_fpr) >= 1 THEN sum(area)
            ELSE 0.5 * (1 + (sum(partial_area) - max(max_fpr) * max(max_fpr) / 2)
                            / (max(max_fpr) - max(max_fpr) * max(max_fpr) / 2))
        END AS roc_auc,
        CASE WHEN max(p) > 0 THEN sum(precision_step) END AS average_precision,
        max(break_even) AS break_even
    FROM terms
    GROUP BY segment, average, label
),
segments AS (
    SELECT DISTINCT segment FROM curve_points
),
grid AS (
    SELECT s.segment, CAST(NULL AS VARCHAR) AS average, l.label, v.support, v.roc_auc,
           v.average_precision, v.break_even
    FROM segments AS s
    CROSS JOIN (SELECT DISTINCT label FROM curve_points) AS l
    LEFT JOIN curve_values AS v
        ON v.segment IS NOT DISTINCT FROM s.segment AND v.average IS NULL AND v.label = l.label
    UNION ALL
    SELECT s.segment, 'micro', NULL, v.support, v.roc_auc, v.average_precision, v.break_even
    FROM segments AS s
    LEFT JOIN curve_values AS v
        ON v.segment IS NOT DISTINCT FROM s.segment AND v.average = 'micro'
),
long AS (
    SELECT *
    FROM grid UNPIVOT INCLUDE NULLS (
        value FOR metric IN (roc_auc, average_precision, break_even)
    )
),
per_label AS (
    SELECT * FROM long WHERE average IS NULL
)
SELECT segment, metric, average, label, value FROM long
UNION ALL
SELECT segment, metric, 'macro', NULL, avg(value) FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, metric, 'weighted', NULL,
       coalesce(sum(value * support) / nullif(sum(support) FILTER (WHERE value IS NOT NULL), 0),
                avg(value))
FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, metric, 'macro_std', NULL, stddev_pop(value) FROM per_label GROUP BY segment, metric
