-- grid: a score's place on the grid 0, 1/n, 2/n, ... (the $bins of ranked_points.sql,
-- ranking_metrics.sql, placements.sql and threshold_buckets.sql; the $n_bins of
-- calibration_bins.sql), exactly as the polars plans put it (engines/polars/_common.py).
--   grid_index(score, n): the largest whole k with k / n <= score, k / n being the correctly
--     rounded double: floor(score * n) rounds the product, so it is moved up or down by one
--     where k / n says otherwise (0.7 * 10 = 7.000000000000001, 0.3 * 10 = 3.0000000000000004).
--   on_grid(score, n): the score moved down to the grid, grid_index(score, n) / n; the score
--     itself where n is NULL (no grid).
CREATE OR REPLACE TEMP MACRO grid_index(score, n) AS
    CASE
        WHEN (floor(score * n) + 1) / n <= score THEN floor(score * n) + 1
        WHEN floor(score * n) / n > score THEN floor(score * n) - 1
        ELSE floor(score * n)
    END;
CREATE OR REPLACE TEMP MACRO on_grid(score, n) AS
    CASE WHEN n IS NULL THEN score ELSE grid_index(score, n) / n END;
