"""Threshold sweeps and operating points as polars plans.

Mirrors queries/threshold_buckets.sql, queries/listed_points.sql, queries/sweep_counts.sql
and queries/operating_points.sql.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from mleval_sql.engines.polars._common import grid_index, group_by_few, keys_as_text, truth, weight
from mleval_sql.registry import OPERATING, metrics_of

__all__ = ["listed_points", "operating_points", "sweep_counts", "threshold_buckets"]

_KEYS = ("segment", "label")
OPERATING_METRICS = metrics_of(OPERATING)


def threshold_buckets(predictions: pl.LazyFrame, *, thresholds: Sequence[float],
                      bins: int | None) -> pl.LazyFrame:
    """Weight of true (pos) and false (neg) rows per (segment, label, bucket), in one scan: each
    score goes to the highest threshold at or below it (null: below them all).

    With ``bins`` the thresholds are k/bins and a score's place is computed, exactly as
    ranked_points grids a score; otherwise a binary search of the sorted list.
    """
    score = pl.col("score")
    if bins is None:
        position = pl.lit(pl.Series(thresholds, dtype=pl.Float64)).search_sorted(
            score, side="right").cast(pl.Int64)
    else:
        k, _ = grid_index(score, bins)
        position = (k + 1).clip(0, bins + 1).cast(pl.Int64)
    split = predictions.select(
        *_KEYS, position=position,
        pos=pl.when(truth).then(weight).otherwise(0.0),
        neg=pl.when(truth).then(0.0).otherwise(weight),
    )
    counted = group_by_few(split, [*_KEYS, "position"], _KEYS,
                           pl.col("pos").sum(), pl.col("neg").sum())
    places = pl.LazyFrame({"position": range(len(thresholds) + 1),
                           "threshold": [None, *thresholds]},
                          schema={"position": pl.Int64, "threshold": pl.Float64})
    return counted.join(places, on="position").select(*_KEYS, "threshold", "pos", "neg")


def listed_points(threshold_buckets: pl.LazyFrame, *,
                  thresholds: Sequence[float]) -> pl.LazyFrame:
    """tp, fp, fn, tn per (segment, label) at each listed threshold: running sums over at most
    T + 1 buckets, highest threshold first (the bucket below every threshold last)."""
    listed = threshold_buckets.select(*_KEYS).unique().join(
        pl.LazyFrame({"threshold": thresholds}, schema={"threshold": pl.Float64}), how="cross")
    filled = pl.concat([
        listed.join(threshold_buckets, on=[*_KEYS, "threshold"], how="left",
                    nulls_equal=True).with_columns(pl.col("pos", "neg").fill_null(0.0)),
        threshold_buckets.filter(pl.col("threshold").is_null()),
    ], how="diagonal_relaxed")
    pos, neg = pl.col("pos"), pl.col("neg")
    swept = filled.sort("threshold", descending=True, nulls_last=True).with_columns(
        tp=pos.cum_sum().over(_KEYS),
        fp=neg.cum_sum().over(_KEYS),
        fn=pos.cum_sum(reverse=True).shift(-1, fill_value=0.0).over(_KEYS),
        tn=neg.cum_sum(reverse=True).shift(-1, fill_value=0.0).over(_KEYS),
    )
    return swept.filter(pl.col("threshold").is_not_null()).select(
        *_KEYS, "threshold", "tp", "fp", "fn", "tn")


def sweep_counts(sweep_points: pl.LazyFrame) -> pl.LazyFrame:
    """Confusion counts whose segment is the struct {segment, threshold}."""
    return sweep_points.select(segment=pl.struct("segment", "threshold"), label="label",
                               tp="tp", fp="fp", fn="fn", tn="tn")


def _guarded(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    return pl.when(denominator != 0).then(numerator / denominator)


def operating_points(curve_points: pl.LazyFrame, *, min_recall: float,
                     min_precision: float) -> pl.LazyFrame:
    """max_f1, precision_at_recall, recall_at_precision per label (with the threshold that
    reaches each: ``operating_threshold``) and their macro mean; ties go to the highest
    threshold."""
    tp, fp, fn = pl.col("tp"), pl.col("fp"), pl.col("fn")
    points = curve_points.filter(pl.col("threshold") < float("inf")).select(
        *_KEYS, "threshold",
        f1=_guarded(2 * tp, 2 * tp + fp + fn),
        precision=_guarded(tp, tp + fp),
        recall=_guarded(tp, tp + fn),
    )
    f1, precision, recall = pl.col("f1"), pl.col("precision"), pl.col("recall")
    candidates = pl.concat([
        points.filter(recall.is_not_null() & f1.is_not_null())
        .select(*_KEYS, "threshold", metric=pl.lit("max_f1"), value=f1),
        points.filter((recall >= min_recall) & precision.is_not_null())
        .select(*_KEYS, "threshold", metric=pl.lit("precision_at_recall"), value=precision),
        points.filter((precision >= min_precision) & recall.is_not_null())
        .select(*_KEYS, "threshold", metric=pl.lit("recall_at_precision"), value=recall),
    ])
    order = {"by": ["value", "threshold"], "descending": [True, True]}
    best = candidates.group_by(*_KEYS, "metric").agg(
        operating_threshold=pl.col("threshold").sort_by(**order).first(),
        value=pl.col("value").sort_by(**order).first(),
    )
    grid = (curve_points.select("segment").unique()
            .join(curve_points.select("label").unique(), how="cross")
            .join(pl.LazyFrame({"metric": OPERATING_METRICS}), how="cross"))
    per_label = grid.join(best, on=[*_KEYS, "metric"], how="left", nulls_equal=True).with_columns(
        average=pl.lit(None, dtype=pl.String))
    macro = per_label.group_by("segment", "metric").agg(value=pl.col("value").mean()).with_columns(
        average=pl.lit("macro"), operating_threshold=pl.lit(None, dtype=pl.Float64))
    return keys_as_text(pl.concat([per_label, macro], how="diagonal")).select(
        "segment", "metric", "average", "label", "operating_threshold", "value")
