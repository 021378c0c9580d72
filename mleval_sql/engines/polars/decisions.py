"""Decision metrics at a threshold or by argmax, from confusion counts (polars plans).

Mirrors queries/threshold_counts.sql, queries/decision_metrics.sql,
queries/declared_metrics.sql, queries/declared_sweep.sql and queries/declared_argmax.sql.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from mleval_sql.engines.polars._common import rate_scores, ratio, truth, weight
from mleval_sql.registry import DECISIONS, METRICS, metrics_of

__all__ = ["decision_metrics", "declared_argmax", "declared_metrics", "declared_sweep",
           "threshold_counts"]

LABEL_METRICS = tuple(m for m in metrics_of(DECISIONS) if METRICS[m].per_label)
#: one row per segment, from the counts pooled over labels (micro)
POOLED_METRICS = ("hamming_loss", "zero_one_loss")


def threshold_counts(predictions: pl.LazyFrame, *, threshold: float) -> pl.LazyFrame:
    """Weighted tp, fp, fn, tn per (segment, label); predicted positive iff score >= threshold."""
    decided = pl.col("score") >= threshold
    return predictions.group_by("segment", "label").agg(
        tp=weight.filter(truth & decided).sum(),
        fp=weight.filter(~truth & decided).sum(),
        fn=weight.filter(truth & ~decided).sum(),
        tn=weight.filter(~truth & ~decided).sum(),
    )


def decision_metrics(confusion_counts: pl.LazyFrame, *, beta: float,
                     zero_division: float | None,
                     keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """Per-label metrics (average null, support the label's true weight) and micro ones, from
    counts summed over labels; hamming_loss and zero_one_loss one row per segment.
    label_averages adds the rest.

    ``keep``: only these metrics and averages ("none": per label), so that the work per
    segment is that of the rows asked for (the SQL gets the same rows by a filter).
    """
    metrics = [m for m in (*LABEL_METRICS, *POOLED_METRICS) if keep is None or m in keep[0]]
    per_label = [m for m in metrics if m in LABEL_METRICS]
    pooled = [m for m in metrics if m in POOLED_METRICS]
    micro = confusion_counts.group_by("segment").agg(pl.col("tp", "fp", "fn", "tn").sum())
    parts = [confusion_counts.with_columns(average=pl.lit(None, dtype=pl.String))]
    if keep is None or "micro" in keep[1] or pooled:
        parts.append(micro.with_columns(average=pl.lit("micro")))
    counts = pl.concat(parts, how="diagonal")

    tp, fp, fn, tn = (pl.col(c) for c in ("tp", "fp", "fn", "tn"))
    total = tp + fp + fn + tn
    # MCC from the counts as shares of the total: no product of counts under- or overflows
    share = {c: pl.col(c) / total for c in ("tp", "fp", "fn", "tn")}
    degenerate = (tp + fp == 0) | (tp + fn == 0) | (tn + fp == 0) | (tn + fn == 0)
    mcc = ((share["tp"] * share["tn"] - share["fp"] * share["fn"])
           / ((share["tp"] + share["fp"]) * (share["tp"] + share["fn"])).sqrt()
           / ((share["tn"] + share["fp"]) * (share["tn"] + share["fn"])).sqrt())
    scores = counts.with_columns(
        support=tp + fn,
        label_support=tp + fn,
        accuracy=(tp + tn) / pl.when(total != 0).then(total),
        specificity=ratio(tn, tn + fp, zero_division),
        mcc=pl.when(degenerate).then(0.0).otherwise(mcc),
        # ratios of rates rather than scikit-learn's products of counts: none overflows
        positive_likelihood_ratio=pl.when((fp != 0) & (tp + fn != 0))
        .then(tp / (tp + fn) / (fp / (fp + tn))),
        negative_likelihood_ratio=pl.when((tn != 0) & (tp + fn != 0))
        .then(fn / (tp + fn) / (tn / (fp + tn))),
        **rate_scores(tp, fp, fn, beta, zero_division),
    )
    long = scores.unpivot(on=per_label, index=["segment", "average", "label", "label_support"],
                          variable_name="metric", value_name="value")
    out = [long.rename({"label_support": "support"})] if per_label else []
    nonzero = pl.when(total != 0).then(total)
    values = {"hamming_loss": (fp + fn) / nonzero, "zero_one_loss": 1 - (tp + tn) / nonzero}
    out += [counts.filter(pl.col("average") == "micro").select(
        "segment", "label", metric=pl.lit(name),  # label: null, of its type
        average=pl.lit(None, dtype=pl.String), value=values[name],
        support=pl.lit(None, dtype=pl.Float64)) for name in pooled]
    return pl.concat(out, how="diagonal").select(
        "segment", "metric", "average", "label", "value", "support")


def declared_metrics(confusion_counts: pl.LazyFrame, *, threshold: float, beta: float,
                     keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """The declared metrics (mleval_sql/declared.py) per label and micro (the expression over
    counts summed over labels), rows as decision_metrics gives; label_averages adds the rest.
    ``keep``: only these metrics and averages. No metric declared (or kept): no rows.
    """
    return _declared(confusion_counts, pl.lit(threshold, dtype=pl.Float64), beta, keep,
                     "declared_metrics")


def declared_sweep(confusion_counts: pl.LazyFrame, *, beta: float,
                   keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """:func:`declared_metrics` over a sweep's counts (sweep_counts), whose segment is
    {segment, threshold}: each row's ``threshold`` is its segment's."""
    threshold = pl.col("segment").struct.field("threshold").cast(pl.Float64)
    return _declared(confusion_counts, threshold, beta, keep, "declared_sweep")


def declared_argmax(confusion_counts: pl.LazyFrame, *, beta: float,
                    keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """:func:`declared_metrics` over each class's counts one-vs-rest from the argmax
    (matrix_counts): no threshold decides there, so none is read."""
    return _declared(confusion_counts, pl.lit(None, dtype=pl.Float64), beta, keep,
                     "declared_argmax")


def _declared(confusion_counts: pl.LazyFrame, threshold: pl.Expr, beta: float,
              keep: tuple[Sequence[str], Sequence[str]] | None, step: str) -> pl.LazyFrame:
    from mleval_sql import declared  # declared.py fills the registry this module reads

    parts = [confusion_counts.with_columns(average=pl.lit(None, dtype=pl.String))]
    if keep is None or "micro" in keep[1]:
        parts.append(confusion_counts.group_by("segment").agg(pl.col("tp", "fp", "fn", "tn").sum())
                     .with_columns(average=pl.lit("micro")))
    tp, fp, fn, tn = (pl.col(c).cast(pl.Float64) for c in ("tp", "fp", "fn", "tn"))
    statistics = pl.concat(parts, how="diagonal").with_columns(
        tp=tp, fp=fp, fn=fn, tn=tn, support=tp + fn, n=tp + fp + fn + tn,
        threshold=threshold, beta=pl.lit(beta, dtype=pl.Float64))
    return declared.polars_rows(statistics, step, None if keep is None else keep[0])
