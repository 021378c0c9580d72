"""Expressions the polars plans share: weighted counts and guarded ratios."""

from __future__ import annotations

import polars as pl

truth = pl.col("truth")
weight = pl.col("weight")


def ratio(numerator: pl.Expr, denominator: pl.Expr, zero_division: float | None) -> pl.Expr:
    """``numerator / denominator``, or ``zero_division`` (null when None) where it is 0/0."""
    return (pl.when(denominator == 0)
            .then(pl.lit(zero_division, dtype=pl.Float64))
            .otherwise(numerator / denominator))


def nan_average(value: pl.Expr, weights: pl.Expr) -> pl.Expr:
    """Weighted mean skipping null values; the plain mean when the weights sum to 0."""
    kept = weights.filter(value.is_not_null()).sum()
    return pl.when(kept == 0).then(value.mean()).otherwise((value * weights).sum() / kept)


def rate_scores(tp: pl.Expr, fp: pl.Expr, fn: pl.Expr, beta: float,
                zero_division: float | None) -> dict[str, pl.Expr]:
    """precision, recall, f1, fbeta and jaccard from counts, as scikit-learn defines them."""
    b2 = beta * beta
    return {
        "precision": ratio(tp, tp + fp, zero_division),
        "recall": ratio(tp, tp + fn, zero_division),
        "f1": ratio(2 * tp, 2 * tp + fn + fp, zero_division),
        "fbeta": ratio((1 + b2) * tp, (1 + b2) * tp + b2 * fn + fp, zero_division),
        "jaccard": ratio(tp, tp + fp + fn, zero_division),
    }
