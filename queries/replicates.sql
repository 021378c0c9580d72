-- replicates: the predictions once per bootstrap replicate of $replicates, each copy weighing
-- every sample by a Poisson(1) draw (a Poisson bootstrap): every statistics step then reads
-- (segment, replicate) as its segment, so a replicate is one more key of every statistics
-- table, and no row is resampled.
--   The draw comes from a hash of (the sample's id, the replicate, $seed), not from a random
--   state: the same sample has the same draws in every segment, label and model, whatever the
--   order of the rows, the files they are read from, or the engine. A sample's id is its rank
--   among the distinct samples of the input (sample_ids). The hash is integer arithmetic every
--   SQL engine and polars compute alike (values below 2^32, products below 2^63):
--   k = mix(replicate * 668265261 + seed * 374761393), h = mix(id xor k), with mix(x) three
--   rounds of x xor (x >> 16), times 73244475, modulo 2^32 (Mueller's 32-bit hash); the draw
--   is the smallest n with Poisson(1)'s CDF at n above u = (h + 1/2) / 2^32.
-- Reads:  predictions(sample, label, score, truth, weight, segment), sample_ids(sample, id)
-- Params: $replicates (a list of replicate numbers, BIGINT[]), $seed
-- Gives:  predictions(sample, label, score, truth, weight, segment), segment = {segment,
--         replicate}, weight = weight * draw
WITH keys AS (
    SELECT replicate, (CAST(replicate AS BIGINT) * 668265261
                       + CAST($seed AS BIGINT) % 4294967296 * 374761393) % 4294967296 AS x
    FROM (SELECT unnest(CAST($replicates AS BIGINT[])) AS replicate) AS listed
),
-- each xor in a column of its own: in other dialects it binds more loosely than arithmetic
keys_x1 AS (
    SELECT replicate, xor(x, CAST(floor(x / 65536.0) AS BIGINT)) AS y FROM keys
),
keys_m1 AS (
    SELECT replicate, y * 73244475 % 4294967296 AS x FROM keys_x1
),
keys_x2 AS (
    SELECT replicate, xor(x, CAST(floor(x / 65536.0) AS BIGINT)) AS y FROM keys_m1
),
keys_m2 AS (
    SELECT replicate, y * 73244475 % 4294967296 AS x FROM keys_x2
),
replicate_keys AS (
    SELECT replicate, xor(x, CAST(floor(x / 65536.0) AS BIGINT)) AS k FROM keys_m2
),
crossed AS (
    SELECT p.sample, p.label, p.score, p.truth, p.weight, p.segment, r.replicate,
           xor(ids.id % 4294967296, r.k) AS x
    FROM predictions AS p
    JOIN sample_ids AS ids ON p.sample = ids.sample
    CROSS JOIN replicate_keys AS r
),
mixed_x1 AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           xor(x, CAST(floor(x / 65536.0) AS BIGINT)) AS y
    FROM crossed
),
mixed_m1 AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           y * 73244475 % 4294967296 AS x
    FROM mixed_x1
),
mixed_x2 AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           xor(x, CAST(floor(x / 65536.0) AS BIGINT)) AS y
    FROM mixed_m1
),
mixed_m2 AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           y * 73244475 % 4294967296 AS x
    FROM mixed_x2
),
hashed AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           xor(x, CAST(floor(x / 65536.0) AS BIGINT)) AS h
    FROM mixed_m2
),
drawn AS (
    SELECT sample, label, score, truth, weight, segment, replicate,
           (h + 0.5) / 4294967296.0 AS u
    FROM hashed
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
