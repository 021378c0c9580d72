-- cluster_summary: what the clustering input checks need, one row per segment (see
-- mleval_sql/clustering.py).
-- Reads:  predictions(sample, truth, cluster, weight, segment), one row per sample
-- Gives:  segment, n_rows, n_samples, sample_weight (their weight), counts of null ids, classes and clusters, of bad and of
--         fractional weights, duplicate rows, and for each kind of problem the smallest sample
--         of the segment that has it (null when none has).
--   Only duplicates need a grouping by sample; every other check is one aggregate per segment.
WITH per_sample AS (
    SELECT segment, sample, count(*) AS n_rows
    FROM predictions
    WHERE sample IS NOT NULL
    GROUP BY segment, sample
),
sample_checks AS (
    SELECT
        segment,
        count(*) AS n_samples,
        sum(n_rows - 1) AS dup_rows,
        min(sample) FILTER (WHERE n_rows > 1) AS example_dup
    FROM per_sample
    GROUP BY segment
),
value_checks AS (
    SELECT
        segment,
        count(*) AS n_rows,
        sum(weight) AS sample_weight,
        count(*) FILTER (WHERE sample IS NULL) AS null_sample,
        count(*) FILTER (WHERE truth IS NULL) AS null_truth,
        count(*) FILTER (WHERE cluster IS NULL) AS null_cluster,
        count(*) FILTER (WHERE weight IS NULL OR weight < 0 OR isnan(weight) OR isinf(weight))
            AS bad_weight,
        count(*) FILTER (WHERE weight <> floor(weight)) AS fractional_weight,
        min(sample) FILTER (WHERE truth IS NULL) AS example_null_truth,
        min(sample) FILTER (WHERE cluster IS NULL) AS example_null_cluster,
        min(sample) FILTER (WHERE weight <> floor(weight)) AS example_fractional
    FROM predictions
    GROUP BY segment
)
SELECT
    v.segment, v.n_rows, coalesce(s.n_samples, 0) AS n_samples, v.sample_weight,
    v.null_sample, v.null_truth,
    v.null_cluster, v.bad_weight, v.fractional_weight, coalesce(s.dup_rows, 0) AS dup_rows,
    v.example_null_truth, v.example_null_cluster, s.example_dup, v.example_fractional
FROM value_checks AS v
LEFT JOIN sample_checks AS s ON v.segment IS NOT DISTINCT FROM s.segment
