-- ovo_metrics: multiclass one-vs-one ROC AUC (Hand & Till 2001), averaged over class pairs.
-- Reads:  pair_counts(segment, label, truth_label, score, weight)  (pair_counts.sql)
-- Gives:  segment, metric, average, label, value
--   For classes a, b of a segment, AUC(a|b) is the AUC of the score of label a separating the
--   samples of true class a (positives) from those of true class b (negatives), ties counting
--   one half: sum_s pos(s) / P * (neg_below(s) + neg(s) / 2) / N. The pair's value is
--   (AUC(a|b) + AUC(b|a)) / 2. A pair is NULL and skipped when one of its classes has no
--   weight in the segment (classes without true samples make no pair, as in scikit-learn).
--   macro: mean over pairs; weighted: mean weighted by the pair's prevalence, the weight of
--   the samples of a or b (scikit-learn's average='weighted', which is unweighted: scikit-learn
--   takes no sample_weight for ovo). NULL when no pair is defined (one class only).
WITH classes AS (
    SELECT segment, truth_label AS class, sum(weight) AS prevalence
    FROM pair_counts
    WHERE label = truth_label
    GROUP BY segment, truth_label
),
directed AS (
    SELECT
        c.segment, c.label, k.class AS other, c.score,
        coalesce(sum(c.weight) FILTER (WHERE c.truth_label = c.label), 0) AS pos,
        coalesce(sum(c.weight) FILTER (WHERE c.truth_label = k.class), 0) AS neg
    FROM pair_counts AS c
    JOIN classes AS k
        ON k.segment IS NOT DISTINCT FROM c.segment
        AND k.class <> c.label
        AND (c.truth_label = c.label OR c.truth_label = k.class)
    GROUP BY c.segment, c.label, k.class, c.score
),
ranked AS (
    SELECT
        segment, label, other, pos, neg,
        sum(pos) OVER (PARTITION BY segment, label, other) AS p,
        sum(neg) OVER (PARTITION BY segment, label, other) AS n,
        coalesce(sum(neg) OVER (PARTITION BY segment, label, other ORDER BY score DESC
                                ROWS BETWEEN 1 FOLLOWING AND UNBOUNDED FOLLOWING), 0) AS neg_below
    FROM directed
),
directed_auc AS (
    SELECT
        segment, label, other,
        -- as shares of P and N: a product of weights (pos * neg) would under- or overflow
        CASE WHEN max(p) > 0 AND max(n) > 0 THEN sum(pos / p * ((neg_below + neg / 2) / n)) END
            AS auc
    FROM ranked
    GROUP BY segment, label, other
),
pairs AS (
    SELECT x.segment, (x.auc + y.auc) / 2 AS auc, a.prevalence + b.prevalence AS prevalence
    FROM directed_auc AS x
    JOIN directed_auc AS y
        ON y.segment IS NOT DISTINCT FROM x.segment AND y.label = x.other AND y.other = x.label
    JOIN classes AS a ON a.segment IS NOT DISTINCT FROM x.segment AND a.class = x.label
    JOIN classes AS b ON b.segment IS NOT DISTINCT FROM x.segment AND b.class = x.other
    WHERE x.label < x.other
),
segment_pairs AS (
    SELECT s.segment, p.auc, p.prevalence
    FROM (SELECT DISTINCT segment FROM pair_counts) AS s
    LEFT JOIN pairs AS p ON p.segment IS NOT DISTINCT FROM s.segment
)
SELECT segment, 'roc_auc_ovo' AS metric, 'macro' AS average, NULL AS label, avg(auc) AS value
FROM segment_pairs
GROUP BY segment
UNION ALL
SELECT segment, 'roc_auc_ovo', 'weighted', NULL,
       coalesce(sum(auc * prevalence) / nullif(sum(prevalence) FILTER (WHERE auc IS NOT NULL), 0),
                avg(auc))
FROM segment_pairs
GROUP BY segment
