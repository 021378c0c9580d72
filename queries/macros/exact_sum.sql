-- exact_sum: the sum of a column of fractional terms (ranking_metrics.sql, curve_metrics.sql).
--   exact_sum(x, exactly): sum(x), 0 over no rows; with exactly (every weight 1: $unit_weights)
--     a DECIMAL(38, 24) sum, exact, so in no particular order: each term is first rounded to
--     1e-24, far below a double's precision, at most 1e14 terms of at most 1 fit, and reruns
--     give the same bits on any number of threads. With weights a running sum over tied rows
--     already depends on the rows' order, and a double's sum is kept.
CREATE OR REPLACE TEMP MACRO exact_sum(x, exactly) AS
    coalesce(CASE WHEN exactly THEN CAST(sum(CAST(x AS DECIMAL(38, 24))) AS DOUBLE)
                  ELSE sum(x) END, 0);
