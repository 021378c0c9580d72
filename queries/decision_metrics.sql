-- decision_metrics: decision metrics of each label and of the labels pooled, from confusion counts.
-- Reads:  confusion_counts(segment, label, tp, fp, fn, tn)  (threshold_counts.sql or matrix_counts.sql)
-- Params: $beta (of F-beta), $zero_division (the value of 0/0: 0, 1 or NULL)
-- Uses:   macros/fbeta.sql
-- Gives:  segment, metric, average, label, value, support  (label_averages.sql adds the grid of
--         labels and the macro, weighted and macro_std averages)
--   per label: average NULL, support the label's true weight (tp + fn).
--   micro: from counts summed over labels.
--   positive_likelihood_ratio, negative_likelihood_ratio: LR+ = recall / (fp / (fp + tn)) and
--   LR- = (fn / (tp + fn)) / specificity, scikit-learn's class_likelihood_ratios; NULL where it
--   is undefined (its NaN): LR+ where fp = 0, LR- where tn = 0, both where tp + fn = 0.
--   hamming_loss: the share of wrong label decisions (micro), one row with average NULL.
--   zero_one_loss: 1 - accuracy of the decisions pooled (binary: its one label), one row.
WITH params AS (
    SELECT CAST($beta AS DOUBLE) AS beta, CAST($zero_division AS DOUBLE) AS zero_division
),
counts AS (
    SELECT *, tp + fp + fn + tn AS total
    FROM (
        SELECT segment, CAST(NULL AS VARCHAR) AS average, label, tp, fp, fn, tn
        FROM confusion_counts
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
        tp + fn AS label_support,  -- the support of the rows, not unpivoted below
        (tp + tn) / nullif(total, 0) AS accuracy,
        CASE WHEN tp + fp = 0 THEN zero_division ELSE tp / (tp + fp) END AS precision,
        CASE WHEN tp + fn = 0 THEN zero_division ELSE tp / (tp + fn) END AS recall,
        CASE WHEN tp + fp + fn = 0 THEN zero_division ELSE 2 * tp / (2 * tp + fn + fp) END AS f1,
        fbeta_score(tp, fp, fn, beta, zero_division) AS fbeta,
        CASE WHEN tn + fp = 0 THEN zero_division ELSE tn / (tn + fp) END AS specificity,
        CASE WHEN tp + fp + fn = 0 THEN zero_division ELSE tp / (tp + fp + fn) END AS jaccard,
        -- from the counts as shares of the total, so that no product of counts under- or
        -- overflows (weights of 1e-300 or 1e300 give the same MCC as weights of 1)
        CASE WHEN tp + fp = 0 OR tp + fn = 0 OR tn + fp = 0 OR tn + fn = 0 THEN 0.0
             ELSE ((tp / total) * (tn / total) - (fp / total) * (fn / total))
                  / (sqrt((tp + fp) / total * ((tp + fn) / total))
                     * sqrt((tn + fp) / total * ((tn + fn) / total)))
        END AS mcc,
        -- ratios of rates rather than scikit-learn's products of counts: none overflows
        CASE WHEN fp = 0 OR tp + fn = 0 THEN NULL
             ELSE (tp / (tp + fn)) / (fp / (fp + tn))
        END AS positive_likelihood_ratio,
        CASE WHEN tn = 0 OR tp + fn = 0 THEN NULL
             ELSE (fn / (tp + fn)) / (tn / (fp + tn))
        END AS negative_likelihood_ratio
    FROM counts, params
),
long AS (
    SELECT *
    FROM scores UNPIVOT INCLUDE NULLS (
        value FOR metric IN (tp, fp, fn, tn, support, accuracy, precision, recall, f1, fbeta, specificity, jaccard, mcc,
                         positive_likelihood_ratio, negative_likelihood_ratio)
    )
)
SELECT segment, metric, average, label, value, label_support AS support FROM long
UNION ALL
SELECT segment, 'hamming_loss', NULL, NULL, (fp + fn) / nullif(tp + fp + fn + tn, 0), NULL
FROM counts WHERE average = 'micro'
UNION ALL
SELECT segment, 'zero_one_loss', NULL, NULL, 1 - (tp + tn) / nullif(total, 0), NULL
FROM counts WHERE average = 'micro'
