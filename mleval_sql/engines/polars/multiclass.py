"""Multiclass metrics by argmax and top-k accuracy (polars plans).

Mirrors queries/argmax_matrix.sql, matrix_counts.sql, multiclass_metrics.sql, true_ranks.sql and
top_k_metrics.sql.
"""

from __future__ import annotations

import polars as pl

from mleval_sql.engines.polars._common import truth, weight

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
    """One-vs-rest tp, fp, fn, tn per class from the confusion matrix."""
    hit = pl.when(pl.col("truth_label") == pl.col("predicted_label")).then(weight).otherwise(0.0)
    marginals = pl.concat([
        confusion_matrix.select("segment", label="truth_label", n_true=weight,
                                n_pred=pl.lit(0.0), n_hit=hit),
        confusion_matrix.select("segment", label="predicted_label", n_true=pl.lit(0.0),
                                n_pred=weight, n_hit=pl.lit(0.0)),
    ]).group_by("segment", "label").agg(pl.col("n_true", "n_pred", "n_hit").sum())
    n_true, n_pred, n_hit = pl.col("n_true"), pl.col("n_pred"), pl.col("n_hit")
    return marginals.select(
        "segment", "label", tp=n_hit, fp=n_pred - n_hit, fn=n_true - n_hit,
        tn=n_true.sum().over("segment") - n_hit - (n_pred - n_hit) - (n_true - n_hit))


def multiclass_metrics(confusion_matrix: pl.LazyFrame,
                       confusion_counts: pl.LazyFrame) -> pl.LazyFrame:
    """accuracy, hamming_loss, balanced_accuracy, mcc, cohen_kappa and the confusion matrix."""
    tp, fp, fn = pl.col("tp"), pl.col("fp"), pl.col("fn")
    t = confusion_counts.group_by("segment").agg(
        n=(tp + fn).sum(), hits=tp.sum(), chance_hits=((tp + fn) * (tp + fp)).sum(),
        true_square=((tp + fn) ** 2).sum(), pred_square=((tp + fp) ** 2).sum(),
        balanced_accuracy=(tp / (tp + fn)).filter(tp + fn > 0).mean(),
    )
    n, hits, chance = pl.col("n"), pl.col("hits"), pl.col("chance_hits")
    nonzero_n = pl.when(n != 0).then(n)
    mcc_den = (n * n - pl.col("pred_square")) * (n * n - pl.col("true_square"))
    kappa_den = n - chance / nonzero_n
    scores = t.select(
        "segment",
        accuracy=hits / nonzero_n,
        hamming_loss=(n - hits) / nonzero_n,
        balanced_accuracy="balanced_accuracy",
        mcc=pl.when(mcc_den == 0).then(0.0).otherwise((hits * n - chance) / mcc_den.sqrt()),
        cohen_kappa=1 - (n - hits) / pl.when(kappa_den != 0).then(kappa_den),
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
    """Labels ranked above each sample's true label; ties rank the larger label first."""
    truths = predictions.filter(truth).select("segment", "sample", true_score=_score,
                                               true_label=_label)
    above = (_score > pl.col("true_score")) | (
        (_score == pl.col("true_score")) & (_label > pl.col("true_label")))
    return (predictions.join(truths, on=["segment", "sample"], nulls_equal=True)
            .group_by("segment", "sample")
            .agg(weight=weight.first(), n_above=above.sum()))


def top_k_metrics(true_ranks: pl.LazyFrame, *, k: int) -> pl.LazyFrame:
    """Top-k accuracy per segment."""
    total = weight.sum()
    return true_ranks.group_by("segment").agg(
        metric=pl.lit("top_k_accuracy"),
        average=pl.lit(None, dtype=pl.String),
        label=pl.lit(None),
        value=weight.filter(pl.col("n_above") < k).sum() / pl.when(total != 0).then(total),
    )
