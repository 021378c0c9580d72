-- argmax_matrix: the weighted multiclass confusion matrix. Each sample is predicted as its
-- top-scored label; among tied scores the smallest label wins, as numpy's argmax does.
-- Every label of a segment gets a (zero-weight) diagonal cell, so a label that is neither true
-- nor predicted still counts.
-- Reads:  predictions(sample, label, score, truth, weight, segment), one true label per sample
-- Gives:  confusion_matrix(segment, truth_label, predicted_label, weight)
WITH per_sample AS (
    SELECT
        segment,
        any_value(weight) AS weight,
        arg_min(label, (-score, label)) AS predicted_label,
        any_value(label) FILTER (WHERE truth) AS truth_label
    FROM predictions
    GROUP BY segment, sample
),
segment_labels AS (
    SELECT DISTINCT segment, label FROM predictions
)
SELECT segment, truth_label, predicted_label, sum(weight) AS weight
FROM (
    SELECT segment, truth_label, predicted_label, weight FROM per_sample
    UNION ALL
    SELECT segment, label, label, 0.0 FROM segment_labels
)
GROUP BY segment, truth_label, predicted_label
