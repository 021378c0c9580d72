-- true_ranks: for each multiclass sample, how many labels rank above its true label, and by how
-- much its true label's score beats the others. Among tied scores the larger label ranks first,
-- as in scikit-learn's top_k_accuracy_score (so with ties, top-1 accuracy can differ from
-- argmax accuracy, where the smallest label wins).
-- Reads:  predictions(sample, label, score, truth, weight, segment), one true label per sample
-- Gives:  true_ranks(segment, sample, weight, n_above, margin)
--   margin: the true label's score minus the largest score of the other labels (Crammer and
--   Singer's, as scikit-learn's multiclass hinge_loss; NULL for a sample with one label).
WITH truths AS (
    SELECT segment, sample, score AS true_score, label AS true_label
    FROM predictions
    WHERE truth
)
SELECT
    p.segment,
    p.sample,
    any_value(p.weight) AS weight,
    count(*) FILTER (WHERE p.score > t.true_score
                     OR (p.score = t.true_score AND p.label > t.true_label)) AS n_above,
    any_value(t.true_score) - max(p.score) FILTER (WHERE NOT p.truth) AS margin
FROM predictions AS p
JOIN truths AS t ON t.segment IS NOT DISTINCT FROM p.segment AND t.sample = p.sample
GROUP BY p.segment, p.sample
