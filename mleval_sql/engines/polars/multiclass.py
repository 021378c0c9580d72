"""Multiclass metrics by argmax and top-k accuracy (polars plans).

Mirrors queries/argmax_matrix.sql, matrix_counts.sql, multiclass_metrics.sql, true_ranks.sql and
top_k_metrics.sql.
"""

from __future__ import annotations

import polars as pl

from mleval_sql.engines.polars._common import truth, weight

__all__ = ["argmax_matrix", "matrix_counts", "multiclass_metrics", "top_k_metrics", "true_ranks"]

_score, _label = pl.col("score"), pl.col("label")


def argmax_matrix(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """Weighted (truth_label, predicted_label) cells; argmax ties go to the smallest label."""
    per_sample = predictions.group_by("segment", "sample").agg(
        truth_label=_label.filter(truth).first(),
        predicted_label=_label.filter(_score == _score.max()).min(),
        weight=weight.first(),
    )
    diagonal = predictions.select("segment", "label").unique().select(
        "segment", truth_label=_label, predicted_label=_label, weight=pl.lit(0.0))
    return (pl.concat([per_sample.drop("sample"), diagonal], how="diagonal")
            .group_by("segment", "truth_label", "predicted_label")
            .agg(weight=weight.sum()))


def matrix_counts(confusion_matrix: pl.LazyFrame) -> pl.LazyFrame:
    """One-vs-rest tp, fp, fn, tn per class from the confusion matrix, each a sum of its own
    cells' weights (a difference of sums would cancel a small weight next to a large one)."""
    hit = pl.col("truth_label") == pl.col("predicted_label")
    on_diagonal = pl.when(hit).then(weight).otherwise(0.0)
    off_diagonal = pl.when(hit).then(0.0).otherwise(weight)
    counts = pl.concat([
        confusion_matrix.select("segment", label="truth_label", tp=on_diagonal,
                                fp=pl.lit(0.0), fn=off_diagonal),
        confusion_matrix.select("segment", label="predicted_label", tp=pl.lit(0.0),
                                fp=off_diagonal, fn=pl.lit(0.0)),
    ]).group_by("segment", "label").agg(pl.col("tp", "fp", "fn").sum())
    negatives = (counts.select("segment", "label")
                 .join(confusion_matrix, on="segment", nulls_equal=True)
                 .filter((pl.col("truth_label") != _label) & (pl.col("predicted_label") != _label))
                 .group_by("segment", "label").agg(tn=weight.sum()))
    return counts.join(negatives, on=["segment", "label"], how="left", nulls_equal=True
                       ).with_columns(pl.col("tn").fill_null(0.0))


def multiclass_metrics(confusion_matrix: pl.LazyFrame,
                       confusion_counts: pl.LazyFrame) -> pl.LazyFrame:
    """accuracy, hamming_loss, zero_one_loss, balanced_accuracy, mcc, cohen_kappa and the
    confusion matrix."""
    tp, fp, fn = pl.col("tp"), pl.col("fp"), pl.col("fn")
    # every product of counts is taken of shares of the segment's weight n, so that none under-
    # or overflows (weights of 1e-300 or 1e300 give the same values as weights of 1)
    n = (tp + fn).sum().over("segment")
    nonzero_n = pl.when(n != 0).then(n)
    true_share, pred_share = (tp + fn) / nonzero_n, (tp + fp) / nonzero_n
    t = confusion_counts.group_by("segment").agg(
        n=n.first(), accuracy=tp.sum() / nonzero_n.first(), errors=fn.sum() / nonzero_n.first(),
        chance=(true_share * pred_share).sum(),
        true_square=(true_share * true_share).sum(), pred_square=(pred_share * pred_share).sum(),
        one_class=((tp + fp > 0).sum() <= 1) | ((tp + fn > 0).sum() <= 1),
        balanced_accuracy=(tp / (tp + fn)).filter(tp + fn > 0).mean(),
    )
    accuracy, errors, chance = pl.col("accuracy"), pl.col("errors"), pl.col("chance")
    mcc_den = (1 - pl.col("pred_square")) * (1 - pl.col("true_square"))
    scores = t.select(
        "segment",
        accuracy=accuracy,
        hamming_loss=errors,
        zero_one_loss=1 - accuracy,
        balanced_accuracy="balanced_accuracy",
        mcc=pl.when((pl.col("n") == 0) | pl.col("one_class")).then(0.0)
        .otherwise((accuracy - chance) / mcc_den.sqrt()),
        cohen_kappa=1 - errors / pl.when(chance != 1).then(1 - chance),
    ).unpivot(index="segment", variable_name="metric", value_name="value")
    labels = confusion_counts.select("segment", "label")
    matrix = (labels.join(labels.rename({"label": "predicted"}), on="segment", nulls_equal=True)
              .join(confusion_matrix, left_on=["segment", "label", "predicted"],
                    right_on=["segment", "truth_label", "predicted_label"], how="left",
                    nulls_equal=True)
              .select("segment", "label", "predicted", metric=pl.lit("confusion_matrix"),
                      value=weight.fill_null(0.0)))
    return pl.concat([scores, matrix], how="diagonal").select(
        "segment", "metric", average=pl.lit(None, dtype=pl.String), label=_label,
        predicted=pl.col("predicted"), value=pl.col("value"))


def true_ranks(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """Labels ranked above each sample's true label (ties rank the larger label first), and
    its margin: the true label's score minus the largest other score (null: no other)."""
    truths = predictions.filter(truth).select("segment", "sample", true_score=_score,
                                               true_label=_label)
    above = (_score > pl.col("true_score")) | (
        (_score == pl.col("true_score")) & (_label > pl.col("true_label")))
    return (predictions.join(truths, on=["segment", "sample"], nulls_equal=True)
            .group_by("segment", "sample")
            .agg(weight=weight.first(), n_above=above.sum(),
                 margin=pl.col("true_score").first() - _score.filter(~truth).max()))


def top_k_metrics(true_ranks: pl.LazyFrame, *, k: int) -> pl.LazyFrame:
    """Top-k accuracy and the multiclass (Crammer-Singer) hinge loss per segment."""
    total = pl.when(weight.sum() != 0).then(weight.sum())
    hinge = (weight * (1.0 - pl.col("margin")).clip(lower_bound=0.0)).sum()
    return (true_ranks.group_by("segment")
            .agg(top_k_accuracy=weight.filter(pl.col("n_above") < k).sum() / total,
                 hinge_loss=hinge / total)
            .unpivot(on=["top_k_accuracy", "hinge_loss"], index="segment",
                     variable_name="metric", value_name="value")
            .select("segment", "metric", average=pl.lit(None, dtype=pl.String),
                    label=pl.lit(None), value="value"))
