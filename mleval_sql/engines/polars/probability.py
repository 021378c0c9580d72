"""Probabilistic metrics (log loss, Brier score, their D², the hinge loss) and calibration
(ECE, reliability table).

Mirrors queries/probability_sums.sql, probability_metrics.sql,
multiclass_probability_metrics.sql, calibration_bins.sql, calibration_metrics.sql and
reliability_table.sql.
"""

from __future__ import annotations

import sys

import polars as pl

from mleval_sql.engines.polars._common import grid_index, truth, weight

__all__ = [
    "calibration_bins",
    "calibration_metrics",
    "multiclass_probability_metrics",
    "probability_metrics",
    "probability_sums",
    "reliability_table",
]

#: scikit-learn's log_loss clips probabilities to [eps, 1 - eps], eps the float64 epsilon
EPS = sys.float_info.epsilon
_KEYS = ("segment", "label")


def probability_sums(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """Per (segment, label): weight, pos, neg, loss_true, loss_false, squared_error, hinge
    (weighted sums; hinge reads the score as a decision value, truth +1 and -1)."""
    score = pl.col("score")
    # the probability of what happened, clipped as scikit-learn's log_loss clips
    p = pl.when(truth).then(score).otherwise(1.0 - score).clip(EPS, 1.0 - EPS)
    loss = weight * -p.log()
    miss = pl.when(truth).then(1.0 - score).otherwise(score)
    margin = pl.when(truth).then(score).otherwise(-score)
    return predictions.group_by(*_KEYS).agg(
        weight=weight.sum(),
        pos=weight.filter(truth).sum(),
        neg=weight.filter(~truth).sum(),
        loss_true=loss.filter(truth).sum(),
        loss_false=loss.filter(~truth).sum(),
        squared_error=(weight * miss * miss).sum(),
        hinge=(weight * (1.0 - margin).clip(lower_bound=0.0)).sum(),
    )


def probability_metrics(probability_sums: pl.LazyFrame) -> pl.LazyFrame:
    """log_loss, brier_score, d2_log_loss, d2_brier and hinge_loss per label (average null,
    support the positive weight) and of the labels pooled (micro); label_averages adds the
    rest. The D² are null where the truth is constant (pos or neg 0)."""
    sums = ("weight", "pos", "neg", "loss_true", "loss_false", "squared_error", "hinge")
    micro = probability_sums.group_by("segment").agg(pl.col(*sums).sum())
    w, pos, neg = pl.col("weight"), pl.col("pos"), pl.col("neg")
    loss = pl.col("loss_true") + pl.col("loss_false")
    two_classes = (pos != 0) & (neg != 0)
    # the log loss and the squared error of the prevalence (pos / weight for every row)
    null_loss = -(pos * (pos / w).clip(EPS, 1.0 - EPS).log()
                  + neg * (neg / w).clip(EPS, 1.0 - EPS).log())
    scores = {
        "log_loss": _per(loss, w),
        "brier_score": _per(pl.col("squared_error"), w),
        "d2_log_loss": pl.when(two_classes).then(1.0 - loss / null_loss),
        "d2_brier": pl.when(two_classes).then(1.0 - pl.col("squared_error") / (pos / w * neg)),
        "hinge_loss": _per(pl.col("hinge"), w),
    }
    return _with_micro(probability_sums, micro, scores)


def multiclass_probability_metrics(probability_sums: pl.LazyFrame) -> pl.LazyFrame:
    """One log_loss, brier_score, d2_log_loss and d2_brier per segment (average and label
    null); the D² null where fewer than two classes have weight."""
    pos = pl.col("pos")
    total = pos.sum()  # one true row per sample: the samples' weight
    null_loss = -(pos * (pos / total).clip(EPS, 1.0 - EPS).log()).sum()
    null_squared_error = (pos / total * pl.col("neg")).sum()
    loss, squared_error = pl.col("loss_true").sum(), pl.col("squared_error").sum()
    two_classes = (pos > 0).sum() >= 2
    metrics = ["log_loss", "brier_score", "d2_log_loss", "d2_brier"]
    return (probability_sums.group_by("segment")
            .agg(log_loss=_per(loss, total), brier_score=_per(squared_error, total),
                 d2_log_loss=pl.when(two_classes).then(1.0 - loss / null_loss),
                 d2_brier=pl.when(two_classes).then(1.0 - squared_error / null_squared_error))
            .unpivot(on=metrics, index="segment", variable_name="metric", value_name="value")
            .select("segment", "metric", average=pl.lit(None, dtype=pl.String),
                    label=pl.lit(None), value="value"))


def calibration_bins(predictions: pl.LazyFrame, *, n_bins: int) -> pl.LazyFrame:
    """weight, pos and score_sum per (segment, label, bin) over n_bins equal-width bins."""
    score = pl.col("score")
    k, n = grid_index(score, n_bins)
    binned = predictions.with_columns(bin=pl.min_horizontal(k, n - 1), n=n)
    b = pl.col("bin")
    return binned.group_by(*_KEYS, "bin", "n").agg(
        weight=weight.sum(),
        pos=weight.filter(truth).sum(),
        score_sum=(weight * score).sum(),
    ).select(*_KEYS, b.cast(pl.Int64), lower=b / pl.col("n"), upper=(b + 1) / pl.col("n"),
             weight="weight", pos="pos", score_sum="score_sum")


def calibration_metrics(calibration_bins: pl.LazyFrame) -> pl.LazyFrame:
    """calibration_error (ECE) per label (average null, support the positive weight) and of
    the labels pooled (micro); label_averages adds the rest."""
    gap = (pl.col("pos") - pl.col("score_sum")).abs().sum()
    labelled = calibration_bins.group_by(*_KEYS).agg(weight=pl.col("weight").sum(),
                                                    pos=pl.col("pos").sum(), gap=gap)
    micro = (calibration_bins.group_by("segment", "bin")
             .agg(pl.col("weight", "pos", "score_sum").sum())
             .group_by("segment").agg(weight=pl.col("weight").sum(), pos=pl.col("pos").sum(),
                                      gap=gap))
    scores = {"calibration_error": _per(pl.col("gap"), pl.col("weight"))}
    return _with_micro(labelled, micro, scores)


def reliability_table(calibration_bins: pl.LazyFrame) -> pl.LazyFrame:
    """Per non-empty bin (positive weight): bounds, mean score, observed rate and weight."""
    w = pl.col("weight")
    return calibration_bins.filter(w > 0).select(
        *_KEYS, "bin", "lower", "upper",
        mean_score=pl.col("score_sum") / w,
        observed_rate=pl.col("pos") / w,
        weight=w,
    )


# -- shared ------------------------------------------------------------------------------------

def _per(total: pl.Expr, weights: pl.Expr) -> pl.Expr:
    """``total / weights``, null where the weights sum to 0 (or are null: a missing label)."""
    return pl.when(weights != 0).then(total / weights)


def _with_micro(per_label: pl.LazyFrame, micro: pl.LazyFrame,
                scores: dict[str, pl.Expr]) -> pl.LazyFrame:
    """Tidy rows of ``scores``: per label (support = positive weight), and micro from
    ``micro``'s sums pooled over labels."""
    rows = pl.concat([per_label.with_columns(average=pl.lit(None, dtype=pl.String)),
                      micro.with_columns(average=pl.lit("micro"))], how="diagonal")
    return (rows.select("segment", "average", "label", support="pos", **scores)
            .unpivot(on=list(scores), index=["segment", "average", "label", "support"],
                     variable_name="metric", value_name="value")
            .select("segment", "metric", "average", "label", "value", "support"))
