-- deviance: the per-row losses of scikit-learn's pinball loss and Tweedie deviances
-- (regression_sums.sql), as engines/polars/regression.py writes them.
--   pinball(y, s, a): the pinball loss at quantile a of predicting s for the truth y.
--   tweedie_deviance(y, s, p): the unit deviance of scikit-learn's _mean_tweedie_deviance of
--     power p; NULL outside its domain (p < 0: s > 0; 1 <= p < 2: y >= 0 and s > 0; p >= 2:
--     y > 0 and s > 0), so that no logarithm or power is taken of a value outside it.
CREATE OR REPLACE TEMP MACRO pinball(y, s, a) AS
    CASE WHEN y >= s THEN a * (y - s) ELSE (1 - a) * (s - y) END;
CREATE OR REPLACE TEMP MACRO tweedie_deviance(y, s, p) AS
    CASE
        WHEN p = 0 THEN (y - s) * (y - s)
        WHEN p = 1 AND y > 0 AND s > 0 THEN 2 * (y * ln(y / s) - y + s)
        WHEN p = 1 AND y = 0 AND s > 0 THEN 2 * s
        WHEN p = 2 AND y > 0 AND s > 0 THEN 2 * (ln(s / y) + y / s - 1)
        WHEN p <> 1 AND p <> 2 AND s > 0 AND (p < 0 OR (p < 2 AND y >= 0) OR y > 0)
            THEN 2 * (power(greatest(y, 0), 2 - p) / ((1 - p) * (2 - p))
                      - y * power(s, 1 - p) / (1 - p) + power(s, 2 - p) / (2 - p))
    END;
