-- clustering_metrics: every clustering metric of each segment from its contingency table, as
-- scikit-learn's functions of the same name (without _score) define them, degenerate cases
-- included; plus purity and the pair confusion matrix.
-- Reads:  contingency(segment, truth, cluster, weight)
-- Gives:  segment, metric, average, label (both NULL), truth, cluster (the cell of the pair
--         confusion matrix, 0 or 1; NULL otherwise), value
--   With N the total weight, a_i the classes' and b_j the clusters' weights, n_ij the cells':
--   pairs (ordered, as scikit-learn): tp = sum n_ij^2 - N (pair confusion cell [1][1]: same
--     class, same cluster), fp = sum b_j^2 - sum n_ij^2 ([0][1]), fn = sum a_i^2 - sum n_ij^2
--     ([1][0]), tn = N^2 - fp - fn - sum n_ij^2 ([0][0]).
--   rand = (tp + tn) / (N^2 - N), 1 when that is 0/0 or every pair agrees;
--   adjusted_rand = 2 (tp tn - fn fp) / ((tp + fn)(fn + tn) + (tp + fp)(fp + tn)), 1 when
--     fn = fp = 0; fowlkes_mallows = tp / sqrt((tp + fp)(tp + fn)), 0 when tp = 0.
--   entropies H(class), H(cluster) and mutual_info MI = sum p_ij ln(p_ij / (p_i p_j)) (terms
--     below machine epsilon dropped and MI clipped at 0, as scikit-learn; 0 with one class or
--     one cluster); homogeneity = MI / H(class), completeness = MI / H(cluster) (1 when the
--     entropy is 0); v_measure = (1 + $beta) h c / ($beta h + c), 0 when h + c = 0;
--   normalized_mutual_info = MI / mean(H(class), H(cluster)) by $average_method ('arithmetic',
--     'geometric', 'min', 'max'), 1 with one class and one cluster, 0 when MI = 0;
--   adjusted_mutual_info = (MI - E[MI]) / (mean - E[MI]) (each difference kept at least
--     machine epsilon from 0, as scikit-learn), 1 with one class and one cluster, 0 with one of
--     either. E[MI], computed only when $adjusted is true, is the expected MI under the
--     hypergeometric model (Vinh et al. 2010) over the margins: for each pair of margins (a, b),
--     sum over n = max(1, a + b - N) .. min(a, b) of (n / N) ln(N n / (a b)) P(n), P(n) =
--     a! b! (N - a)! (N - b)! / (N! n! (a - n)! (b - n)! (N - a - b + n)!) via lgamma. Terms
--     further than t = 70/3 + sqrt((70/3)^2 + 140 v) from the mean a b / N, where
--     v = a b (N - max(a, b)) / N^2, are left out: by Bernstein's inequality (which holds for
--     draws without replacement, Hoeffding 1963) their probability sums to less than
--     2 exp(-70) (1e-30), far below rounding, and the sum costs O(sqrt(v)) terms per pair
--     instead of O(min(a, b)). Pairs of equal margins are summed once and multiplied.
--   purity = sum over clusters of the largest cell / N.
--   A segment whose weights are all 0 gets NULL for every metric (pair cells 0).
WITH cells AS (
    SELECT segment, truth, cluster, weight AS n FROM contingency WHERE weight > 0
),
totals AS (
    SELECT segment, sum(n) AS total, sum(n * n) AS sum_n2 FROM cells GROUP BY segment
),
classes AS (
    SELECT segment, truth, sum(n) AS a FROM cells GROUP BY segment, truth
),
clusters AS (
    SELECT segment, cluster, sum(n) AS b, max(n) AS top FROM cells GROUP BY segment, cluster
),
class_stats AS (
    SELECT
        c.segment,
        count(*) AS n_classes,
        sum(c.a * c.a) AS sum_a2,
        -sum(c.a / t.total * (ln(c.a) - ln(t.total))) AS h_class
    FROM classes AS c JOIN totals AS t ON c.segment IS NOT DISTINCT FROM t.segment
    GROUP BY c.segment
),
cluster_stats AS (
    SELECT
        c.segment,
        count(*) AS n_clusters,
        sum(c.b * c.b) AS sum_b2,
        -sum(c.b / t.total * (ln(c.b) - ln(t.total))) AS h_cluster,
        sum(c.top) AS top_total
    FROM clusters AS c JOIN totals AS t ON c.segment IS NOT DISTINCT FROM t.segment
    GROUP BY c.segment
),
mi_terms AS (
    SELECT
        x.segment,
        x.n / t.total * (ln(x.n) - ln(t.total))
            + x.n / t.total * (-ln(k.a * l.b) + ln(t.total) + ln(t.total)) AS term
    FROM cells AS x
    JOIN totals AS t ON x.segment IS NOT DISTINCT FROM t.segment
    JOIN classes AS k ON x.segment IS NOT DISTINCT FROM k.segment AND x.truth = k.truth
    JOIN clusters AS l ON x.segment IS NOT DISTINCT FROM l.segment AND x.cluster = l.cluster
),
mutual AS (
    SELECT segment,
           greatest(sum(CASE WHEN abs(term) < 2.220446049250313e-16 THEN 0.0 ELSE term END),
                    0.0) AS mi_sum
    FROM mi_terms
    GROUP BY segment
),
margin_pairs AS (
    SELECT
        k.segment, k.a, l.b, t.total, count(*) AS n_pairs,
        70.0 / 3 + sqrt((70.0 / 3) * (70.0 / 3)
                        + 140 * k.a * l.b * (t.total - greatest(k.a, l.b))
                        / (t.total * t.total)) AS reach
    FROM classes AS k
    JOIN clusters AS l ON k.segment IS NOT DISTINCT FROM l.segment
    JOIN totals AS t ON k.segment IS NOT DISTINCT FROM t.segment
    WHERE $adjusted
    GROUP BY k.segment, k.a, l.b, t.total
),
emi_ranges AS (
    SELECT
        segment, a, b, total, n_pairs,
        -- what the terms of a pair share, computed once per pair
        lgamma(a + 1) + lgamma(b + 1) + lgamma(total - a + 1) + lgamma(total - b + 1) AS fixed,
        lgamma(total + 1) AS lgamma_total,
        ln(total) - ln(a) - ln(b) AS log_ratio,
        unnest(generate_series(
            CAST(greatest(1, a + b - total, ceil(a * b / total - reach)) AS BIGINT),
            CAST(least(a, b, floor(a * b / total + reach)) AS BIGINT)
        )) AS n
    FROM margin_pairs
),
expected AS (
    SELECT
        segment,
        sum(n_pairs * (n / total) * (log_ratio + ln(n)) * exp(
            fixed - (lgamma(n + 1) + lgamma_total) - lgamma(a - n + 1) - lgamma(b - n + 1)
            - lgamma(total - a - b + n + 1))) AS emi
    FROM emi_ranges
    GROUP BY segment
),
stats AS (
    SELECT
        s.segment,
        t.total,
        k.n_classes,
        l.n_clusters,
        k.h_class,
        l.h_cluster,
        l.top_total,
        CASE WHEN k.n_classes = 1 OR l.n_clusters = 1 THEN 0.0 ELSE m.mi_sum END AS mi,
        coalesce(e.emi, 0.0) AS emi,
        CASE $average_method
            WHEN 'min' THEN least(k.h_class, l.h_cluster)
            WHEN 'geometric' THEN sqrt(k.h_class * l.h_cluster)
            WHEN 'max' THEN greatest(k.h_class, l.h_cluster)
            ELSE (k.h_class + l.h_cluster) / 2
        END AS mean_entropy,
        coalesce(t.sum_n2 - t.total, 0.0) AS tp,
        coalesce(l.sum_b2 - t.sum_n2, 0.0) AS fp,
        coalesce(k.sum_a2 - t.sum_n2, 0.0) AS fn,
        coalesce(t.total * t.total - (l.sum_b2 - t.sum_n2) - (k.sum_a2 - t.sum_n2) - t.sum_n2,
                 0.0) AS tn
    FROM (SELECT DISTINCT segment FROM contingency) AS s
    LEFT JOIN totals AS t ON s.segment IS NOT DISTINCT FROM t.segment
    LEFT JOIN class_stats AS k ON s.segment IS NOT DISTINCT FROM k.segment
    LEFT JOIN cluster_stats AS l ON s.segment IS NOT DISTINCT FROM l.segment
    LEFT JOIN mutual AS m ON s.segment IS NOT DISTINCT FROM m.segment
    LEFT JOIN expected AS e ON s.segment IS NOT DISTINCT FROM e.segment
),
scores AS (
    SELECT
        segment,
        CASE WHEN total > 0 THEN
            CASE WHEN fn = 0 AND fp = 0 THEN 1.0
                 ELSE 2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn))
            END
        END AS adjusted_rand,
        CASE WHEN total > 0 THEN
            CASE WHEN tp + tn + fp + fn = 0 OR fp + fn = 0 THEN 1.0
                 ELSE (tp + tn) / (tp + tn + fp + fn)
            END
        END AS rand,
        CASE WHEN total > 0 THEN mi END AS mutual_info,
        CASE WHEN total > 0 THEN
            CASE WHEN n_classes = 1 AND n_clusters = 1 THEN 1.0
                 WHEN mi = 0 THEN 0.0
                 ELSE mi / mean_entropy
            END
        END AS normalized_mutual_info,
        CASE WHEN total > 0 AND $adjusted THEN
            CASE WHEN n_classes = 1 AND n_clusters = 1 THEN 1.0
                 WHEN n_classes = 1 OR n_clusters = 1 THEN 0.0
                 ELSE (CASE WHEN mi - emi < 0 THEN least(mi - emi, -2.220446049250313e-16)
                            ELSE greatest(mi - emi, 2.220446049250313e-16) END)
                      / (CASE WHEN mean_entropy - emi < 0
                              THEN least(mean_entropy - emi, -2.220446049250313e-16)
                              ELSE greatest(mean_entropy - emi, 2.220446049250313e-16) END)
            END
        END AS adjusted_mutual_info,
        CASE WHEN total > 0 THEN
            CASE WHEN h_class = 0 THEN 1.0 ELSE mi / h_class END
        END AS homogeneity,
        CASE WHEN total > 0 THEN
            CASE WHEN h_cluster = 0 THEN 1.0 ELSE mi / h_cluster END
        END AS completeness,
        CASE WHEN total > 0 THEN
            CASE WHEN tp <> 0 THEN sqrt(tp / (tp + fp)) * sqrt(tp / (tp + fn)) ELSE 0.0 END
        END AS fowlkes_mallows,
        top_total / nullif(total, 0) AS purity,
        tp, fp, fn, tn
    FROM stats
),
with_v AS (
    SELECT
        *,
        CASE WHEN homogeneity + completeness = 0 THEN 0.0
             ELSE (1 + $beta) * homogeneity * completeness / ($beta * homogeneity + completeness)
        END AS v_measure
    FROM scores
),
long AS (
    SELECT segment, metric, value
    FROM with_v UNPIVOT INCLUDE NULLS (value FOR metric IN (
        adjusted_rand, rand, mutual_info, normalized_mutual_info, adjusted_mutual_info,
        homogeneity, completeness, v_measure, fowlkes_mallows, purity))
)
SELECT segment, metric, CAST(NULL AS VARCHAR) AS average, CAST(NULL AS VARCHAR) AS label,
       CAST(NULL AS INTEGER) AS truth, CAST(NULL AS INTEGER) AS cluster, value
FROM long
UNION ALL
SELECT segment, 'pair_confusion_matrix', NULL, NULL,
       CASE WHEN cell IN ('tp', 'fn') THEN 1 ELSE 0 END,
       CASE WHEN cell IN ('tp', 'fp') THEN 1 ELSE 0 END,
       value
FROM with_v UNPIVOT (value FOR cell IN (tp, fp, fn, tn))
