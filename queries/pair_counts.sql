-- pair_counts: for multiclass one-vs-one AUC, the weight of samples per (scored label, the
-- sample's true label, distinct score): every class's score distribution within every class.
-- Reads:  predictions(sample, label, score, truth, weight, segment)
-- Gives:  pair_counts(segment, label, truth_label, score, weight)
SELECT p.segment, p.label, t.label AS truth_label, p.score, sum(p.weight) AS weight
FROM predictions AS p
JOIN predictions AS t
    ON t.segment IS NOT DISTINCT FROM p.segment AND t.sample = p.sample AND t.truth
GROUP BY p.segment, p.label, t.label, p.score
