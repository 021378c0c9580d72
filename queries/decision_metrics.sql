-- decision_metrics: decision metrics of each label and their averages, from confusion counts.
-- Reads:  confusion_counts(segment, label, tp, fp, fn, tn)  (threshold_counts.sql or matrix_counts.sql)
-- Params: $beta (of F-beta), $zero_division (the value of 0/0: 0, 1 or NULL)
-- Gives:  segment, metric, average, label, value
--   per label: average NULL. A label of the input that a segment lacks gets NULL values.
--   micro: from counts summed over labels; macro: mean over labels; weighted: mean weighted by
--   support; macro_std: population standard deviation over labels. Averages skip NULL values
--   (scikit-learn's zero_division=np.nan); weighted falls back to macro when no label has support.
--   hamming_loss: the share of wrong label decisions (micro), one row with average NULL.
WITH params AS (
    SELECT CAST($beta AS DOUBLE) AS beta, CAST($zero_division AS DOUBLE) AS zero_division
),
fbeta_shares AS (
    -- F-beta = (1 + b²) tp / ((1 + b²) tp + b² fn + fp) = tp / (tp + fn_share fn + fp_share fp)
    -- with fn_share = b² / (1 + b²), fp_share = 1 / (1 + b²), written so that b² neither
    -- under- nor overflows (beta = 1e-200 gives precision, 1e200 recall, never NaN)
    SELECT
        CASE WHEN beta > 1 THEN 1 / (1 + (1 / beta) * (1 / beta))
             ELSE beta * beta / (1 + beta * beta) END AS fn_share,
        CASE WHEN beta > 1 THEN (1 / beta) * (1 / beta) / (1 + (1 / beta) * (1 / beta))
             ELSE 1 / (1 + beta * beta) END AS fp_share
    FROM params
),
grid AS (
    SELECT segments.segment, labels.label, c.tp, c.fp, c.fn, c.tn
    FROM (SELECT DISTINCT segment FROM confusion_counts) AS segments
    CROSS JOIN (SELECT DISTINCT label FROM confusion_counts) AS labels
    LEFT JOIN confusion_counts AS c
        ON c.segment IS NOT DISTINCT FROM segments.segment AND c.label = labels.label
),
counts AS (
    SELECT *, tp + fp + fn + tn AS total
    FROM (
        SELECT segment, CAST(NULL AS VARCHAR) AS average, label, tp, fp, fn, tn FROM grid
        UNION ALL
        SELECT segment, 'micro', NULL, sum(tp), sum(fp), sum(fn), sum(tn)
        FROM confusion_counts
        GROUP BY segment
    ) AS pooled
),
scores AS (
    SELECT
        segment, average, label, tp, fp, fn, tn,
        tp + fn AS support,
        tp + fn AS label_support,
        (tp + tn) / nullif(total, 0) AS accuracy,
        CASE WHEN tp + fp = 0 THEN zero_division ELSE tp / (tp + fp) END AS precision,
        CASE WHEN tp + fn = 0 THEN zero_division ELSE tp / (tp + fn) END AS recall,
        CASE WHEN tp + fp + fn = 0 THEN zero_division ELSE 2 * tp / (2 * tp + fn + fp) END AS f1,
        CASE WHEN tp + fp + fn = 0 THEN zero_division WHEN tp = 0 THEN 0.0
             ELSE tp / (tp + fn_share * fn + fp_share * fp)
        END AS fbeta,
        CASE WHEN tn + fp = 0 THEN zero_division ELSE tn / (tn + fp) END AS specificity,
        CASE WHEN tp + fp + fn = 0 THEN zero_division ELSE tp / (tp + fp + fn) END AS jaccard,
        -- from the counts as shares of the total, so that no product of counts under- or
        -- overflows (weights of 1e-300 or 1e300 give the same MCC as weights of 1)
        CASE WHEN tp + fp = 0 OR tp + fn = 0 OR tn + fp = 0 OR tn + fn = 0 THEN 0.0
             ELSE ((tp / total) * (tn / total) - (fp / total) * (fn / total))
                  / (sqrt((tp + fp) / total * ((tp + fn) / total))
                     * sqrt((tn + fp) / total * ((tn + fn) / total)))
        END AS mcc
    FROM counts, params, fbeta_shares
),
long AS (
    SELECT *
    FROM scores UNPIVOT INCLUDE NULLS (
        value FOR metric IN (tp, fp, fn, tn, support, accuracy, precision, recall, f1, fbeta, specificity, jaccard, mcc)
    )
),
per_label AS (
    -- supports as shares of the largest, so that a count times a support cannot overflow
    -- and values as shares of the largest for their spread (a squared count under- or overflows)
    SELECT *, label_support / nullif(max(label_support) OVER (PARTITION BY segment, metric), 0)
               AS share,
           max(abs(value)) OVER (PARTITION BY segment, metric) AS scale
    FROM long WHERE average IS NULL
)
SELECT segment, metric, average, label, value FROM long
UNION ALL
SELECT segment, metric, 'macro', NULL, avg(value) FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, metric, 'weighted', NULL,
       coalesce(sum(value * share) / nullif(sum(share) FILTER (WHERE value IS NOT NULL), 0),
                avg(value))
FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, metric, 'macro_std', NULL,
       coalesce(stddev_pop(value / nullif(scale, 0)) * max(scale), stddev_pop(value))
FROM per_label GROUP BY segment, metric
UNION ALL
SELECT segment, 'hamming_loss', NULL, NULL, (fp + fn) / nullif(tp + fp + fn + tn, 0)
FROM counts WHERE average = 'micro'
