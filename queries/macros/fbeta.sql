-- fbeta: the F-beta score from confusion counts (decision_metrics.sql, sample_metrics.sql), as
-- fbeta_shares does in engines/polars/_common.py.
--   F-beta = (1 + b²) tp / ((1 + b²) tp + b² fn + fp) = tp / (tp + fn_share fn + fp_share fp)
--   with fn_share = b² / (1 + b²), fp_share = 1 / (1 + b²), written so that b² neither under-
--   nor overflows (beta = 1e-200 gives precision, 1e200 recall, never NaN).
--   fbeta_score(tp, fp, fn, beta, zero_division): zero_division where tp + fp + fn = 0 (0/0),
--   0 where tp = 0.
CREATE OR REPLACE TEMP MACRO fbeta_fn_share(beta) AS
    CASE WHEN beta > 1 THEN 1 / (1 + (1 / beta) * (1 / beta))
         ELSE beta * beta / (1 + beta * beta) END;
CREATE OR REPLACE TEMP MACRO fbeta_fp_share(beta) AS
    CASE WHEN beta > 1 THEN (1 / beta) * (1 / beta) / (1 + (1 / beta) * (1 / beta))
         ELSE 1 / (1 + beta * beta) END;
CREATE OR REPLACE TEMP MACRO fbeta_score(tp, fp, fn, beta, zero_division) AS
    CASE WHEN tp + fp + fn = 0 THEN zero_division WHEN tp = 0 THEN 0.0
         ELSE tp / (tp + fbeta_fn_share(beta) * fn + fbeta_fp_share(beta) * fp) END;
