-- replicates: the predictions once per bootstrap replicate of $replicates, each copy weighing
-- every sample by a Poisson(1) draw (a Poisson bootstrap): every statistics step then reads
-- (segment, replicate) as its segment, so a replicate is one more key of every statistics
-- table, and no row is resampled.
--   The draw comes from a hash of (the sample's id, the replicate, $seed), not from a random
--   state: the same sample has the same draws in every segment, label and model, whatever the
--   order of the rows, the files they are read from, or the engine. A sample's id is its rank
--   among the distinct samples of the input (sample_ids). The hash is integer arithmetic every
--   SQL engine and polars compute alike (values below 2^32, sums of products below 2^63):
--   h = mix(id * 668265261 + replicate * 374761393 + seed * 2654435 modulo 2^32), with mix(x)
--   x xor (x >> 16), times 73244475, modulo 2^32, twice, then x xor (x >> 16) (Mueller's 32-bit
--   hash); the draw is the smallest n with Poisson(1)'s CDF at n above u = (h + 1/2) / 2^32.
-- Reads:  predictions(sample, label, score, truth, weight, segment), sample_ids(sample, id)
-- Params: $replicates (a list of replicate numbers, BIGINT[]), $seed
-- Gives:  predictions(sample, label, score, truth, weight, segment), segment = {segment,
--         replicate}, weight = weight * draw
WITH crossed AS (
    SELECT p.sample, p.label, p.score, p.truth, p.weight, p.segment, r.replicate,
           (ids.id % 4294967296 * 668265261 + CAST(r.replicate AS BIGINT) * 374761393
            + CAST($seed AS BIGINT) % 4294967296 * 2654435) % 4294967296 AS x
    FROM predictions AS p
    JOIN sample_ids AS ids ON p.sample = ids.sample
    CROSS JOIN (SELECT unnest(CAST($replicates AS BIGINT[])) AS replicate) AS r
),
-- Mueller's hash, a round a step; each xor in parentheses: in other dialects it binds more
-- loosely than arithmetic
round1 AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           (xor(x, CAST(floor(x / 65536.0) AS BIGINT))) * 73244475 % 4294967296 AS x
    FROM crossed
),
round2 AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           (xor(x, CAST(floor(x / 65536.0) AS BIGINT))) * 73244475 % 4294967296 AS x
    FROM round1
),
drawn AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           ((xor(x, CAST(floor(x / 65536.0) AS BIGINT))) + 0.5) / 4294967296.0 AS u
    FROM round2
)
SELECT
    sample,
    label,
    score,
    truth,
    weight * CASE
        WHEN u < 0.36787944117144233 THEN 0
        WHEN u < 0.7357588823428847 THEN 1
        WHEN u < 0.9196986029286058 THEN 2
        WHEN u < 0.9810118431238462 THEN 3
        WHEN u < 0.9963401531726563 THEN 4
        WHEN u < 0.9994058151824183 THEN 5
        WHEN u < 0.999916758850712 THEN 6
        WHEN u < 0.9999897508033254 THEN 7
        WHEN u < 0.999998874797402 THEN 8
        WHEN u < 0.9999998885745217 THEN 9
        WHEN u < 0.9999999899522336 THEN 10
        WHEN u < 0.9999999991683893 THEN 11
        ELSE 12
    END AS weight,
    struct_pack(segment := segment, replicate := replicate) AS segment
FROM drawn
