-- ranking_metrics: ROC AUC (with $max_fpr: partial, McClish-corrected), average precision and the
-- precision = recall break-even point of each label and of the labels pooled, from one sorted
-- pass over the predictions: no curve table (curve_metrics.sql reads the same metrics off one
-- where a request makes it anyway).
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Params: $bins (NULL: every distinct score; N: scores first moved down to the grid 0, 1/N, ...,
--         as ranked_points.sql does); $max_fpr (NULL or 1: the whole ROC curve); $micro (false:
--         no pooled rows, whose sort costs more than every label's own); $unit_weights (every
--         weight is 1: counts from ranks); $class_counts (a metric asked needs each score's true
--         and false counts: average_precision, a partial AUC); $label_totals (a metric asked
--         needs P and N on every row: break_even, a partial AUC)
-- Uses:   macros/grid.sql, macros/exact_sum.sql
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro, weighted and macro_std averages)
--   Each label's rows (and with $micro every label's rows of a segment, pooled: average
--   'micro', label NULL, windows of their own) sorted by score, descending: for a row, tp and fp are the positive and
--   negative weight scored at or above its score (its block of tied scores included), tp0 and
--   fp0 those above it, P and N the label's totals. Tied scores are one threshold, so every
--   metric counts ties as scikit-learn does, and each term is the row's share of its block's.
--   With weights the counts are running sums (RANGE frames: a block of ties is one step).
--   Every weight 1 ($unit_weights): counts over the same sort, rank() - 1 rows above the score
--   and a count of the rows at or above it, no running sum; only where $class_counts asks for
--   them, a count of the true rows at or above it over the same sort, and only for a partial
--   AUC ($max_fpr < 1) the rows above it of the row's own class (a second sort, by truth and
--   score); only where $label_totals asks for them, the label's totals on each row. The windows and terms of what
--   is not asked are constant NULLs, which the databases do not compute.
--   roc_auc: the trapezoidal area under (fpr, tpr) = scikit-learn's roc_auc_score; NULL when
--     P = 0 or N = 0. Every weight 1: the rank-sum (Mann-Whitney) U = sum over true rows of
--     the rows below them plus half those tied with them, less P^2 / 2 (the true rows among
--     them), over P N; exact in integers. Weighted: each false row's trapezoid (its weight
--     times tp + tp0) in units of P and N scaled by powers of two, so that the sums of whole
--     weights are exact and P * N never overflows (weights of 1e300). With $max_fpr < 1: the
--     area for fpr <= $max_fpr (the curve interpolated linearly at $max_fpr), McClish-corrected:
--     0.5 * (1 + (A - m^2/2) / (m - m^2/2)), as scikit-learn.
--   average_precision: sum over thresholds of (R_n - R_(n-1)) * P_n (step-wise, no
--     interpolation) = scikit-learn's average_precision_score: each true row's weight / P times
--     the precision tp / (tp + fp) at its score; NULL when P = 0 (scikit-learn 1.9 returns 0
--     there, with a warning).
--   break_even: precision = recall exactly where the predicted weight n = tp + fp equals P.
--     The point is found in the tied block within which n reaches P, and tp is interpolated
--     linearly inside it (its expectation when the tie is broken at random): each true row's
--     weight / P times the share of its block within the first P predicted (1 before the
--     crossing block, 0 after it). Without ties and with unit weights this is the
--     R-precision. NULL when P = 0.
--   support: P. The averages skip NULL labels (where scikit-learn returns nan, or raises).
--   Every weight 1: the sums of fractional terms (precision, break-even and partial-area steps,
--   each at most 1) are exact (exact_sum, macros/exact_sum.sql: in no particular order, the same
--   bits on any number of threads); every other sum is of whole numbers.
--   Binned mode ($bins): scores within a bin are tied, so
--   |AUC_binned - AUC| <= sum over bins b of pos_b * neg_b / (2 P N).
WITH params AS (
    SELECT CAST($max_fpr AS DOUBLE) AS max_fpr
),
binned AS (
    SELECT segment, label, truth, weight, on_grid(score, $bins) AS score
    FROM predictions
),
ranked AS (
    -- each label's rows sorted once by score, descending, for every window but the own
    -- class's; with $micro, every label's rows of a segment pooled (label NULL) as well
    SELECT
        segment, CAST(NULL AS VARCHAR) AS average, label, truth,
        -- every weight 1: a constant, which the windows need not carry through their sort
        CASE WHEN $unit_weights THEN 1.0 ELSE weight END AS weight,
        CASE WHEN $label_totals OR NOT $unit_weights
            THEN sum(CASE WHEN truth THEN weight ELSE 0.0 END) OVER curve END AS p,
        CASE WHEN $label_totals OR NOT $unit_weights
            THEN sum(CASE WHEN truth THEN 0.0 ELSE weight END) OVER curve END AS n,
        CASE WHEN $unit_weights THEN rank() OVER higher - 1 END AS rows_above,
        CASE WHEN $unit_weights THEN count(*) OVER higher END AS rows_upto,
        CASE WHEN $unit_weights AND $class_counts THEN count(CASE WHEN truth THEN 1 END) OVER higher
        END AS pos_upto,
        CASE WHEN $unit_weights AND $max_fpr < 1 THEN rank() OVER own_higher - 1
        END AS own_above,
        CASE WHEN NOT $unit_weights
            THEN sum(CASE WHEN truth THEN weight ELSE 0.0 END) OVER higher END AS tp_sum,
        CASE WHEN NOT $unit_weights
            THEN sum(CASE WHEN truth THEN 0.0 ELSE weight END) OVER higher END AS fp_sum,
        CASE WHEN NOT $unit_weights
            THEN sum(CASE WHEN truth THEN weight ELSE 0.0 END) OVER tied END AS block_pos,
        CASE WHEN NOT $unit_weights
            THEN sum(CASE WHEN truth THEN 0.0 ELSE weight END) OVER tied END AS block_neg
    FROM binned
    WINDOW
        -- each spelled out: Spark cannot refer to another. An ordered window's frame is the
        -- rows up to the current row's score, ties included (RANGE UNBOUNDED PRECEDING), so
        -- rank() and the counts and sums up to the score share one window: one sort and one
        -- pass (PostgreSQL runs a window of its own for each distinct frame)
        curve AS (PARTITION BY segment, label),
        higher AS (PARTITION BY segment, label ORDER BY score DESC),
        tied AS (PARTITION BY segment, label ORDER BY score DESC
                 RANGE BETWEEN CURRENT ROW AND CURRENT ROW),
        own_higher AS (PARTITION BY segment, label, truth ORDER BY score DESC)
    UNION ALL
    SELECT
        segment, 'micro', NULL, truth, CASE WHEN $unit_weights THEN 1.0 ELSE weight END,
        CASE WHEN $label_totals OR NOT $unit_weights
            THEN sum(CASE WHEN truth THEN weight ELSE 0.0 END) OVER curve END,
        CASE WHEN $label_totals OR NOT $unit_weights
            THEN sum(CASE WHEN truth THEN 0.0 ELSE weight END) OVER curve END,
        CASE WHEN $unit_weights THEN rank() OVER higher - 1 END,
        CASE WHEN $unit_weights THEN count(*) OVER higher END,
        CASE WHEN $unit_weights AND $class_counts THEN count(CASE WHEN truth THEN 1 END) OVER higher
        END,
        CASE WHEN $unit_weights AND $max_fpr < 1 THEN rank() OVER own_higher - 1 END,
        CASE WHEN NOT $unit_weights
            THEN sum(CASE WHEN truth THEN weight ELSE 0.0 END) OVER higher END,
        CASE WHEN NOT $unit_weights
            THEN sum(CASE WHEN truth THEN 0.0 ELSE weight END) OVER higher END,
        CASE WHEN NOT $unit_weights
            THEN sum(CASE WHEN truth THEN weight ELSE 0.0 END) OVER tied END,
        CASE WHEN NOT $unit_weights
            THEN sum(CASE WHEN truth THEN 0.0 ELSE weight END) OVER tied END
    FROM binned
    WHERE $micro
    WINDOW
        curve AS (PARTITION BY segment),
        higher AS (PARTITION BY segment ORDER BY score DESC),
        tied AS (PARTITION BY segment ORDER BY score DESC
                 RANGE BETWEEN CURRENT ROW AND CURRENT ROW),
        own_higher AS (PARTITION BY segment, truth ORDER BY score DESC)
),
counted AS (
    -- tp, fp at the row's score, tp0, fp0 above it (every weight 1 without $class_counts:
    -- NULL, and only rows_above / rows_upto; tp0, fp0 only for a partial AUC)
    SELECT
        segment, average, label, truth, p, n, rows_above, rows_upto,
        CASE WHEN truth THEN weight ELSE 0.0 END AS pos,
        CASE WHEN truth THEN 0.0 ELSE weight END AS neg,
        CASE WHEN NOT $unit_weights THEN tp_sum ELSE pos_upto END AS tp,
        CASE WHEN NOT $unit_weights THEN fp_sum ELSE rows_upto - pos_upto END AS fp,
        CASE
            WHEN NOT $unit_weights THEN tp_sum - block_pos
            WHEN truth THEN own_above ELSE rows_above - own_above
        END AS tp0,
        CASE
            WHEN NOT $unit_weights THEN fp_sum - block_neg
            WHEN truth THEN rows_above - own_above ELSE own_above
        END AS fp0
    FROM ranked
),
terms AS (
    SELECT
        segment, average, label, pos, neg, max_fpr,
        -- every weight 1: a true row's rows at or above it and above it (its rank-sum term)
        CASE WHEN $unit_weights AND truth THEN rows_upto + rows_above END AS rank_term,
        -- weighted: the false row's trapezoid, times 2 P N, scaled by powers of two near 1 / N
        -- and 1 / P (scaling by them is exact)
        CASE WHEN NOT $unit_weights AND neg > 0 AND p > 0 AND n > 0
            THEN (neg * power(2.0, -ceil(ln(n) / ln(2.0))))
                 * ((tp + tp0) * power(2.0, -ceil(ln(p) / ln(2.0))))
        END AS area,
        CASE
            WHEN neg = 0 OR n = 0 OR p = 0 OR max_fpr IS NULL OR max_fpr >= 1 THEN NULL
            WHEN fp / n <= max_fpr THEN neg / n * (tp / p + tp0 / p) / 2
            WHEN fp0 / n <= max_fpr  -- the block crossing max_fpr, cut there
                THEN neg / (fp - fp0) * (max_fpr - fp0 / n)
                     * (2 * tp0 / p + (tp / p - tp0 / p) * (max_fpr - fp0 / n)
                        / (fp / n - fp0 / n)) / 2
            ELSE 0.0
        END AS partial_area,
        -- the true row's weight times the precision at its score (over P below)
        CASE WHEN pos > 0 AND $class_counts THEN pos * (tp / (tp + fp)) END AS precision_step,
        -- the row's share of positive weight among the first P predicted: all of it in blocks
        -- that end by P, none past P, the share (P - n_before) / n_block in the block that
        -- crosses P
        CASE
            WHEN pos = 0 OR NOT $label_totals THEN NULL
            WHEN $unit_weights
                THEN pos / p * greatest(0.0, least(1.0, (p - rows_above)
                                                        / (rows_upto - rows_above)))
            WHEN tp + fp > tp0 + fp0
                THEN pos / p * greatest(0.0, least(1.0, (p - (tp0 + fp0))
                                                        / ((tp + fp) - (tp0 + fp0))))
        END AS break_even_step
    FROM counted, params
),
curve_values AS (
    SELECT
        segment, average, label,
        sum(pos) AS support,
        CASE
            WHEN sum(pos) = 0 OR sum(neg) = 0 THEN NULL
            WHEN max(max_fpr) IS NOT NULL AND max(max_fpr) < 1
                THEN 0.5 * (1 + (exact_sum(partial_area, $unit_weights)
                                 - max(max_fpr) * max(max_fpr) / 2)
                                / (max(max_fpr) - max(max_fpr) * max(max_fpr) / 2))
            -- U = P (P + N) - P^2 / 2 - the true rows' (rows at or above + rows above) / 2
            WHEN $unit_weights
                THEN (sum(pos) * (sum(pos) + sum(neg)) - sum(pos) * sum(pos) / 2
                      - sum(rank_term) / 2) / (sum(pos) * sum(neg))
            ELSE coalesce(sum(area), 0)
                 / (2 * (sum(pos) * power(2.0, -ceil(ln(sum(pos)) / ln(2.0))))
                    * (sum(neg) * power(2.0, -ceil(ln(sum(neg)) / ln(2.0)))))
        END AS roc_auc,
        CASE WHEN sum(pos) > 0 AND $class_counts
            THEN exact_sum(precision_step, $unit_weights) / sum(pos)
        END AS average_precision,
        CASE WHEN sum(pos) > 0 AND $label_totals
            THEN exact_sum(break_even_step, $unit_weights)
        END AS break_even
    FROM terms
    GROUP BY segment, average, label
),
long AS (
    SELECT *
    FROM curve_values UNPIVOT INCLUDE NULLS (
        value FOR metric IN (roc_auc, average_precision, break_even)
    )
)
SELECT segment, metric, average, label, value, support FROM long
