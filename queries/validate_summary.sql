-- validate_summary: what the input checks need, one row per segment (see mleval_sql/schema.py).
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  segment, n_rows, n_samples, n_labels, counts of bad values, the score range, rows
--         and true labels per sample (min/max), duplicate rows, and for each kind of problem the
--         smallest sample of the segment that has it (null when none has).
WITH segment_labels AS (
    SELECT segment, count(DISTINCT label) AS n_labels
    FROM predictions
    GROUP BY segment
),
per_sample AS (
    SELECT
        segment,
        sample,
        count(*) AS n_rows,
        count(DISTINCT label) AS n_distinct,
        count(*) FILTER (WHERE label IS NULL) AS null_label,
        count(*) FILTER (WHERE score IS NULL) AS null_score,
        count(*) FILTER (WHERE isnan(score) OR isinf(score)) AS nan_score,
        count(*) FILTER (WHERE truth IS NULL) AS null_truth,
        count(*) FILTER (WHERE CAST(truth AS DOUBLE) NOT IN (0, 1)) AS bad_truth,
        count(*) FILTER (WHERE isnan(CAST(truth AS DOUBLE)) OR isinf(CAST(truth AS DOUBLE)))
            AS nan_truth,
        min(score) AS min_score,
        max(score) AS max_score,
        count(*) FILTER (WHERE weight IS NULL OR weight < 0 OR isnan(weight) OR isinf(weight))
            AS bad_weight,
        count(*) FILTER (WHERE CAST(truth AS DOUBLE) = 1) AS n_true,
        min(weight) <> max(weight) AS uneven_weight
    FROM predictions
    GROUP BY segment, sample
),
samples AS (
    SELECT
        per_sample.*,
        n_rows - n_distinct - null_label AS dup,
        segment_labels.n_labels
    FROM per_sample
    JOIN segment_labels ON per_sample.segment IS NOT DISTINCT FROM segment_labels.segment
)
SELECT
    segment,
    sum(n_rows) AS n_rows,
    count(sample) AS n_samples,
    any_value(n_labels) AS n_labels,
    coalesce(sum(n_rows) FILTER (WHERE sample IS NULL), 0) AS null_sample,
    sum(null_label) AS null_label,
    sum(null_score) AS null_score,
    sum(nan_score) AS nan_score,
    sum(null_truth) AS null_truth,
    sum(bad_truth) AS bad_truth,
    sum(nan_truth) AS nan_truth,
    min(min_score) AS min_score,
    max(max_score) AS max_score,
    sum(bad_weight) AS bad_weight,
    min(n_rows) AS min_rows,
    max(n_rows) AS max_rows,
    sum(dup) AS dup_rows,
    min(n_true) AS min_true,
    max(n_true) AS max_true,
    count(*) FILTER (WHERE uneven_weight) AS uneven_weight,
    min(sample) FILTER (WHERE dup > 0) AS example_dup,
    min(sample) FILTER (WHERE n_rows < n_labels) AS example_short,
    min(sample) FILTER (WHERE n_true <> 1) AS example_not_one_true,
    min(sample) FILTER (WHERE uneven_weight) AS example_weight
FROM samples
GROUP BY segment
