"""Performance estimated without the truth: expected outcomes at each distinct score, the
expected confusion counts and ROC AUC, and how far the realised values may lie from them.

Mirrors queries/expected_points.sql, estimated_counts.sql, estimated_metrics.sql and
estimated_variance.sql (their headers hold the formulas). ``truth`` holds each row's
probability of being true.
"""

from __future__ import annotations

import polars as pl

from mleval_sql.engines.polars._common import truth, weight
from mleval_sql.registry import ESTIMATED, metrics_of

__all__ = ["estimated_counts", "estimated_metrics", "estimated_variance", "expected_points"]

_KEYS = ("segment", "label")
METRICS = metrics_of(ESTIMATED)


def expected_points(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """Per (segment, label, score): pos, neg, noise, neg_below, pos_above, p and n."""
    q = truth.cast(pl.Float64)
    # weights as shares of the label's largest: the estimates are ratios, and the products of
    # weights (pairs, squares) neither over- nor underflow at 1e+-300
    largest = weight.max().over(_KEYS)
    w = pl.col("_share")
    points = predictions.with_columns(
        _share=weight / pl.when(largest != 0).then(largest)).group_by(*_KEYS, "score").agg(
        pos=(w * q).sum(), neg=(w * (1.0 - q)).sum(), noise=(w * w * q * (1.0 - q)).sum())
    # the sums of the scores below and above, each row left out of its own
    before = pl.col("neg").shift(1, fill_value=0.0).cum_sum()
    after = pl.col("pos").reverse().shift(1, fill_value=0.0).cum_sum().reverse()
    return points.with_columns(
        neg_below=before.over(_KEYS, order_by="score"),
        pos_above=after.over(_KEYS, order_by="score"),
        p=pl.col("pos").sum().over(_KEYS), n=pl.col("neg").sum().over(_KEYS))


def estimated_counts(expected_points: pl.LazyFrame, *, threshold: float) -> pl.LazyFrame:
    """Per (segment, label): tp, fp, fn, tn, p, n, noise_positive, noise_negative, pairs."""
    positive = pl.col("score") >= threshold
    negative = pl.col("score") < threshold
    pos, neg, noise = pl.col("pos"), pl.col("neg"), pl.col("noise")
    return expected_points.group_by(*_KEYS).agg(
        tp=pos.filter(positive).sum(), fp=neg.filter(positive).sum(),
        fn=pos.filter(negative).sum(), tn=neg.filter(negative).sum(),
        p=pos.sum(), n=neg.sum(),
        noise_positive=noise.filter(positive).sum(),
        noise_negative=noise.filter(negative).sum(),
        pairs=(pos * (pl.col("neg_below") + 0.5 * neg)).sum())


def _ratio(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    return pl.when(denominator != 0).then(numerator / denominator)


def _estimates() -> dict[str, pl.Expr]:
    tp, fp, fn, tn = (pl.col(c) for c in ("tp", "fp", "fn", "tn"))
    p, n = pl.col("p"), pl.col("n")
    return {
        "estimated_accuracy": _ratio(tp + tn, p + n),
        "estimated_precision": _ratio(tp, tp + fp),
        "estimated_recall": _ratio(tp, p),
        "estimated_f1": _ratio(2 * tp, 2 * tp + fp + fn),
        "estimated_roc_auc": pl.when((p > 0) & (n > 0)).then(pl.col("pairs") / (p * n)),
    }


def estimated_metrics(estimated_counts: pl.LazyFrame) -> pl.LazyFrame:
    """The estimated metrics per label (average null, support the expected positive weight);
    label_averages adds the rest."""
    estimates = _estimates()
    return (estimated_counts.select(*_KEYS, support="p", **{m: estimates[m] for m in METRICS})
            .unpivot(on=list(METRICS), index=[*_KEYS, "support"], variable_name="metric",
                     value_name="value")
            .select("segment", "metric", average=pl.lit(None, pl.String), label="label",
                    value="value", support="support"))


def estimated_variance(expected_points: pl.LazyFrame,
                       estimated_counts: pl.LazyFrame) -> pl.LazyFrame:
    """Per (segment, metric, label): the variance of the realised value around the estimate
    (the delta method over independent outcomes)."""
    estimates = _estimates()
    tp, fp, p, n = (pl.col(c) for c in ("tp", "fp", "p", "n"))
    positive, negative = pl.col("noise_positive"), pl.col("noise_negative")
    recall, f1 = estimates["estimated_recall"], _ratio(2 * tp, tp + fp + p)
    counted = estimated_counts.with_columns(auc=estimates["estimated_roc_auc"])
    gradient = ((pl.col("neg_below") + 0.5 * pl.col("neg") - pl.col("pos_above")
                 - 0.5 * pl.col("pos")) / (p * n) - pl.col("auc") * (1.0 / p - 1.0 / n))
    ranked = (expected_points.drop("p", "n")
              .join(counted.filter(pl.col("auc").is_not_null()), on=list(_KEYS),
                    nulls_equal=True)
              .group_by(*_KEYS).agg(estimated_roc_auc=(gradient.pow(2) * pl.col("noise")).sum()))
    variances = counted.join(ranked, on=list(_KEYS), how="left", nulls_equal=True).select(
        *_KEYS,
        estimated_accuracy=_ratio(positive + negative, (p + n).pow(2)),
        estimated_precision=_ratio(positive, (tp + fp).pow(2)),
        estimated_recall=_ratio(positive * (1.0 - recall).pow(2) + negative * recall.pow(2),
                                p.pow(2)),
        estimated_f1=_ratio(positive * (2.0 - f1).pow(2) + negative * f1.pow(2),
                            (tp + fp + p).pow(2)),
        estimated_roc_auc="estimated_roc_auc")
    return variances.unpivot(on=list(METRICS), index=list(_KEYS), variable_name="metric",
                             value_name="variance").select("segment", "metric", "label",
                                                           "variance")
