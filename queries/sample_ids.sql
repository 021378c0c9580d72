-- sample_ids: every distinct sample of the whole input numbered by its rank (0, 1, ...): the id
-- the bootstrap's draws hash (replicates.sql), the same for a sample in every segment, label,
-- model and batch, whatever the order of the rows or the files they come from.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  sample_ids(sample, id)
SELECT sample, row_number() OVER (ORDER BY sample) - 1 AS id
FROM (SELECT DISTINCT sample FROM predictions) AS samples
