-- contingency_cells: the contingency table as tidy metric rows, one per cell of positive weight.
-- Reads:  contingency(segment, truth, cluster, weight)
-- Gives:  segment, metric ('contingency'), average, label (both NULL), truth (the reference
--         class), cluster, value (the cell's weight)
SELECT
    segment,
    'contingency' AS metric,
    CAST(NULL AS VARCHAR) AS average,
    CAST(NULL AS VARCHAR) AS label,
    truth,
    cluster,
    weight AS value
FROM contingency
WHERE weight > 0
