-- operating_points: the best operating point of each label over its distinct scores taken as
-- thresholds (predicted positive iff score >= threshold; the origin at +inf is no operating
-- point), and the threshold that reaches it.
--   max_f1: the highest F1 = 2tp / (2tp + fp + fn).
--   precision_at_recall: the highest precision among thresholds with recall >= $min_recall.
--   recall_at_precision: the highest recall among thresholds with precision >= $min_precision
--   (precision defined: tp + fp > 0).
-- Ties in the value go to the highest threshold (the fewest predicted positives). A label with no
-- positive weight (recall undefined), or with no threshold that qualifies, gets NULL value and
-- threshold. Rows per label (average NULL; NULL for a label of the input that a segment lacks)
-- and 'macro': the mean over the labels with a value (its threshold NULL). The threshold reached
-- is operating_threshold (a result's threshold column is the one decisions are made at).
-- Reads:  curve_points(segment, label, threshold, tp, fp, fn, tn)  (ranked_points.sql)
-- Params: $min_recall, $min_precision
-- Gives:  segment, metric, average, label, operating_threshold, value

WITH params AS (
    SELECT CAST($min_recall AS DOUBLE) AS min_recall,
           CAST($min_precision AS DOUBLE) AS min_precision
),
points AS (
    -- the origin keeps its label in the grid but is no candidate: its rates are NULL
    SELECT
        segment,
        label,
        threshold,
        CASE WHEN 2 * tp + fp + fn = 0 OR threshold = CAST('inf' AS DOUBLE) THEN NULL
            ELSE 2 * tp / (2 * tp + fp + fn) END AS f1,
        CASE WHEN tp + fp = 0 OR threshold = CAST('inf' AS DOUBLE) THEN NULL
            ELSE tp / (tp + fp) END AS precision,
        CASE WHEN tp + fn = 0 OR threshold = CAST('inf' AS DOUBLE) THEN NULL
            ELSE tp / (tp + fn) END AS recall
    FROM curve_points
),
best AS (
    -- one pass per label for the best values, one more for the highest threshold reaching each
    SELECT
        segment,
        label,
        max(f1) FILTER (WHERE recall IS NOT NULL) AS max_f1,
        max(precision) FILTER (WHERE recall >= min_recall) AS precision_at_recall,
        max(recall) FILTER (WHERE precision >= min_precision) AS recall_at_precision
    FROM points, params
    GROUP BY segment, label
),
reached AS (
    SELECT
        best.segment,
        best.label,
        max(best.max_f1) AS max_f1,
        max(points.threshold) FILTER (WHERE points.recall IS NOT NULL
                                      AND points.f1 = best.max_f1) AS max_f1_threshold,
        max(best.precision_at_recall) AS precision_at_recall,
        max(points.threshold) FILTER (WHERE points.recall >= params.min_recall
                                      AND points.precision = best.precision_at_recall)
            AS precision_at_recall_threshold,
        max(best.recall_at_precision) AS recall_at_precision,
        max(points.threshold) FILTER (WHERE points.precision >= params.min_precision
                                      AND points.recall = best.recall_at_precision)
            AS recall_at_precision_threshold
    FROM best
    CROSS JOIN params
    JOIN points
        ON points.segment IS NOT DISTINCT FROM best.segment AND points.label = best.label
    GROUP BY best.segment, best.label
),
candidates AS (
    SELECT segment, label, 'max_f1' AS metric, max_f1_threshold AS threshold, max_f1 AS value
    FROM reached
    UNION ALL
    SELECT segment, label, 'precision_at_recall', precision_at_recall_threshold,
           precision_at_recall
    FROM reached
    UNION ALL
    SELECT segment, label, 'recall_at_precision', recall_at_precision_threshold,
           recall_at_precision
    FROM reached
),
grid AS (
    SELECT segments.segment, labels.label, metrics.metric
    FROM (SELECT DISTINCT segment FROM best) AS segments
    CROSS JOIN (SELECT DISTINCT label FROM best) AS labels
    CROSS JOIN (VALUES ('max_f1'), ('precision_at_recall'), ('recall_at_precision'))
        AS metrics(metric)
),
per_label AS (
    SELECT grid.segment, grid.metric, CAST(NULL AS VARCHAR) AS average, grid.label,
           candidates.threshold AS operating_threshold, candidates.value
    FROM grid
    LEFT JOIN candidates
        ON candidates.segment IS NOT DISTINCT FROM grid.segment
        AND candidates.label = grid.label
        AND candidates.metric = grid.metric
)
SELECT segment, metric, average, label, operating_threshold, value FROM per_label
UNION ALL
SELECT segment, metric, 'macro', NULL, CAST(NULL AS DOUBLE), avg(value)
FROM per_label
GROUP BY segment, metric
