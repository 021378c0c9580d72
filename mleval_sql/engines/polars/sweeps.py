"""Threshold sweeps and operating points as polars plans.

Mirrors queries/listed_points.sql, queries/points_confusion.sql and queries/operating_points.sql.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

__all__ = ["listed_points", "operating_points", "points_confusion"]

_KEYS = ("segment", "label")
OPERATING_METRICS = ("max_f1", "precision_at_recall", "recall_at_precision")


def listed_points(score_counts: pl.LazyFrame, *, thresholds: Sequence[float]) -> pl.LazyFrame:
    """tp, fp, fn, tn per (segment, label) at each listed threshold, in one sorted pass.

    The thresholds join the stream of distinct scores; running sums down the scores give the
    weight at or above (predicted positive iff score >= threshold) and below each threshold.
    """
    listed = score_counts.select(*_KEYS).unique().join(
        pl.LazyFrame({"score": thresholds}, schema={"score": pl.Float64}), how="cross")
    merged = pl.concat([
        score_counts.with_columns(is_threshold=pl.lit(False)),
        listed.with_columns(pos=pl.lit(0.0), neg=pl.lit(0.0), is_threshold=pl.lit(True)),
    ], how="diagonal_relaxed")
    pos, neg = pl.col("pos"), pl.col("neg")
    # at equal values a score sorts before a threshold, so it counts as at or above it
    swept = merged.sort("score", "is_threshold", descending=[True, False]).with_columns(
        tp=pos.cum_sum().over(_KEYS),
        fp=neg.cum_sum().over(_KEYS),
        fn=pos.cum_sum(reverse=True).shift(-1, fill_value=0.0).over(_KEYS),
        tn=neg.cum_sum(reverse=True).shift(-1, fill_value=0.0).over(_KEYS),
    )
    return swept.filter("is_threshold").select(*_KEYS, threshold="score",
                                                tp="tp", fp="fp", fn="fn", tn="tn")


def points_confusion(sweep_points: pl.LazyFrame) -> pl.LazyFrame:
    """Confusion counts whose segment is the struct {segment, threshold}."""
    return sweep_points.select(segment=pl.struct("segment", "threshold"), label="label",
                               tp="tp", fp="fp", fn="fn", tn="tn")


def _guarded(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    return pl.when(denominator != 0).then(numerator / denominator)


def operating_points(curve_points: pl.LazyFrame, *, min_recall: float,
                     min_precision: float) -> pl.LazyFrame:
    """max_f1, precision_at_recall, recall_at_precision per label (with their threshold) and
    their macro mean; ties go to the highest threshold."""
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
        threshold=pl.col("threshold").sort_by(**order).first(),
        value=pl.col("value").sort_by(**order).first(),
    )
    grid = (curve_points.select("segment").unique()
            .join(curve_points.select("label").unique(), how="cross")
            .join(pl.LazyFrame({"metric": OPERATING_METRICS}), how="cross"))
    per_label = grid.join(best, on=[*_KEYS, "metric"], how="left", nulls_equal=True).with_columns(
        average=pl.lit(None, dtype=pl.String))
    macro = per_label.group_by("segment", "metric").agg(value=pl.col("value").mean()).with_columns(
        average=pl.lit("macro"), threshold=pl.lit(None, dtype=pl.Float64))
    return pl.concat([per_label, macro], how="diagonal").select(
        "segment", "metric", "average", "label", "threshold", "value")
