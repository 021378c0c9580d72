-- validate_summary: what the input checks need, one row per segment (see mleval_sql/schema.py).
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  segment, n_rows, n_samples, sample_weight (their weight), n_labels, counts of bad values, the score range, rows
--         and true labels per sample (min/max), duplicate rows, and for each kind of problem the
--         smallest sample of the segment that has it (null when none has); bad scores and
--         truths name their row: the smallest (sample, label) with the problem, and the value
--         (example_<problem>_sample / _label / _value).
--   Checks of single values are one aggregate per segment; only what spans a sample's rows is
--   grouped by sample, and that grouping is kept narrow because it is the expensive one (one
--   group per sample). Distinct labels of a sample are counted exactly without count(DISTINCT)
--   (which DuckDB neither spills nor runs fast): each label gets a bit, a sample's bits are
--   OR-ed in 64-bit words and the set bits counted. The first 64 labels' word is OR-ed in the
--   one grouping by sample; labels 64 and up (later_words: rarely any, and then a join with
--   no rows) are counted by sample and word apart, and added.
WITH segment_labels AS (
    SELECT segment, label FROM predictions GROUP BY segment, label
),
label_bits AS (
    SELECT label, (row_number() OVER (ORDER BY label) - 1) AS bit
    FROM (SELECT DISTINCT label FROM segment_labels WHERE label IS NOT NULL) AS labels
),
value_checks AS (
    SELECT
        segment,
        count(*) FILTER (WHERE label IS NULL) AS null_label,
        count(*) FILTER (WHERE score IS NULL) AS null_score,
        count(*) FILTER (WHERE isnan(score) OR isinf(score)) AS nan_score,
        count(*) FILTER (WHERE truth IS NULL) AS null_truth,
        count(*) FILTER (WHERE CAST(truth AS DOUBLE) NOT IN (0, 1)) AS bad_truth,
        count(*) FILTER (WHERE isnan(CAST(truth AS DOUBLE)) OR isinf(CAST(truth AS DOUBLE)))
            AS nan_truth,
        min(score) AS min_score,
        max(score) AS max_score,
        min(CAST(truth AS DOUBLE)) AS min_truth,
        count(*) FILTER (WHERE weight IS NULL OR weight < 0 OR isnan(weight) OR isinf(weight))
            AS bad_weight
    FROM predictions
    GROUP BY segment
),
value_examples AS (
    -- the smallest (sample, label) row with each problem, one column per field, from the rows
    -- with a bad value only (almost always none): kept apart from the counts, whose scan would
    -- otherwise build a (sample, label) key for every row
    SELECT
        segment,
        min(sample) FILTER (WHERE score IS NULL) AS example_null_score_sample,
        arg_min(label, (sample, label)) FILTER (WHERE score IS NULL) AS example_null_score_label,
        min(sample) FILTER (WHERE isnan(score) OR isinf(score)) AS example_nan_score_sample,
        arg_min(label, (sample, label)) FILTER (WHERE isnan(score) OR isinf(score))
            AS example_nan_score_label,
        arg_min(score, (sample, label)) FILTER (WHERE isnan(score) OR isinf(score))
            AS example_nan_score_value,
        min(sample) FILTER (WHERE CAST(truth AS DOUBLE) NOT IN (0, 1)) AS example_bad_truth_sample,
        arg_min(label, (sample, label)) FILTER (WHERE CAST(truth AS DOUBLE) NOT IN (0, 1))
            AS example_bad_truth_label,
        arg_min(CAST(truth AS DOUBLE), (sample, label))
            FILTER (WHERE CAST(truth AS DOUBLE) NOT IN (0, 1)) AS example_bad_truth_value,
        min(CAST(truth AS DOUBLE)) FILTER (WHERE CAST(truth AS DOUBLE) NOT IN (0, 1))
            AS min_bad_truth,
        max(CAST(truth AS DOUBLE)) FILTER (WHERE CAST(truth AS DOUBLE) NOT IN (0, 1))
            AS max_bad_truth,
        -- a graded relevance (ndcg, dcg) may be any number >= 0: its negative values' row
        min(sample) FILTER (WHERE CAST(truth AS DOUBLE) < 0) AS example_negative_truth_sample,
        arg_min(label, (sample, label)) FILTER (WHERE CAST(truth AS DOUBLE) < 0)
            AS example_negative_truth_label,
        arg_min(CAST(truth AS DOUBLE), (sample, label)) FILTER (WHERE CAST(truth AS DOUBLE) < 0)
            AS example_negative_truth_value
    FROM predictions
    WHERE score IS NULL OR isnan(score) OR isinf(score) OR CAST(truth AS DOUBLE) NOT IN (0, 1)
    GROUP BY segment
),
per_sample AS (
    SELECT
        p.segment,
        p.sample,
        count(*) AS n_rows,
        count(p.label) AS n_labelled,
        bit_count(bit_or(CASE WHEN label_bits.bit < 64
                              THEN CAST(1 AS UBIGINT) << label_bits.bit END)) AS n_distinct,
        count(*) FILTER (WHERE CAST(p.truth AS DOUBLE) = 1) AS n_true,
        min(p.weight) AS min_weight,
        max(p.weight) AS max_weight
    FROM predictions AS p
    LEFT JOIN label_bits ON p.label = label_bits.label
    GROUP BY p.segment, p.sample
),
later_words AS (
    SELECT segment, sample, sum(n_distinct) AS n_distinct
    FROM (
        SELECT
            p.segment,
            p.sample,
            label_bits.bit // 64 AS word,
            bit_count(bit_or(CAST(1 AS UBIGINT) << (label_bits.bit % 64))) AS n_distinct
        FROM predictions AS p
        JOIN label_bits ON p.label = label_bits.label
        WHERE label_bits.bit >= 64
        GROUP BY p.segment, p.sample, word
    ) AS words
    GROUP BY segment, sample
),
samples AS (
    SELECT
        s.segment,
        s.sample,
        s.n_rows,
        s.n_labelled - coalesce(s.n_distinct, 0) - coalesce(w.n_distinct, 0) AS dup,
        s.n_true,
        s.min_weight <> s.max_weight AS uneven_weight,
        s.min_weight AS weight,
        l.n_labels
    FROM per_sample AS s
    LEFT JOIN later_words AS w
        ON s.segment IS NOT DISTINCT FROM w.segment AND s.sample IS NOT DISTINCT FROM w.sample
    JOIN (SELECT segment, count(label) AS n_labels FROM segment_labels GROUP BY segment) AS l
        ON s.segment IS NOT DISTINCT FROM l.segment
),
sample_checks AS (
    SELECT
        segment,
        sum(n_rows) AS n_rows,
        count(sample) AS n_samples,
        sum(weight) AS sample_weight,
        any_value(n_labels) AS n_labels,
        coalesce(sum(n_rows) FILTER (WHERE sample IS NULL), 0) AS null_sample,
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
)
SELECT
    s.segment, s.n_rows, s.n_samples, s.sample_weight, s.n_labels, s.null_sample,
    v.null_label, v.null_score, v.nan_score, v.null_truth, v.bad_truth, v.nan_truth,
    v.min_score, v.max_score, v.min_truth, v.bad_weight,
    e.example_null_score_sample, e.example_null_score_label,
    e.example_nan_score_sample, e.example_nan_score_label, e.example_nan_score_value,
    e.example_bad_truth_sample, e.example_bad_truth_label, e.example_bad_truth_value,
    e.min_bad_truth, e.max_bad_truth, e.example_negative_truth_sample,
    e.example_negative_truth_label, e.example_negative_truth_value,
    s.min_rows, s.max_rows, s.dup_rows, s.min_true, s.max_true, s.uneven_weight,
    s.example_dup, s.example_short, s.example_not_one_true, s.example_weight
FROM sample_checks AS s
JOIN value_checks AS v ON s.segment IS NOT DISTINCT FROM v.segment
LEFT JOIN value_examples AS e ON s.segment IS NOT DISTINCT FROM e.segment
