"""Expressions the polars plans share: weighted counts and guarded ratios."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

truth = pl.col("truth")
weight = pl.col("weight")


def grid_index(score: pl.Expr, bins: int) -> tuple[pl.Expr, pl.Expr]:
    """(k, n): the largest whole k with k / n <= score on the grid 0, 1/bins, 2/bins, ..., and
    n, ``bins`` as a column, to divide by (as queries/macros/grid.sql's grid_index): polars
    divides by a literal through its reciprocal (6 / 10 -> 0.6000000000000001), a divisor
    computed from the data keeps each k / n correctly rounded, as in SQL.

    >>> k, n = grid_index(pl.col("score"), 10)
    >>> pl.select(score=pl.Series([0.3, 0.7, 0.69, 1.0])).select(k)["score"].to_list()
    [3.0, 7.0, 6.0, 10.0]
    """
    n = score * 0.0 + bins
    k = (score * bins).floor()
    return (pl.when((k + 1) / n <= score).then(k + 1)
            .when(k / n > score).then(k - 1)
            .otherwise(k)), n


def group_by_few(frame: pl.LazyFrame, keys: Sequence[str], few: Sequence[str],
                 *aggs: pl.Expr, **named: pl.Expr) -> pl.LazyFrame:
    """``frame.group_by(*keys).agg(...)``, where the keys in ``few`` (segment, label: a handful of
    values) are grouped as Categorical when they are text, and given back as text: next to a key
    with millions of values, text keys cost polars more memory and time (12.5M distinct scores
    by segment, label and score: 1.96 GiB as text, 1.62 GiB as Categorical).

    >>> rows = pl.LazyFrame({"segment": ["a", "a", "b"], "sample": [1, 1, 1], "n": [1, 2, 3]})
    >>> group_by_few(rows, ["segment", "sample"], ["segment"], pl.col("n").sum()).sort(
    ...     "segment").collect()["n"].to_list()
    [3, 3]
    """
    schema = frame.collect_schema()
    text = [k for k in few if schema[k] == pl.String]
    return (frame.with_columns(pl.col(text).cast(pl.Categorical))
            .group_by(*keys).agg(*aggs, **named)
            .with_columns(pl.col(text).cast(pl.String)))


def keys_as_text(frame: pl.LazyFrame) -> pl.LazyFrame:
    """``frame`` with a Categorical segment or label as text: the curve table carries its text
    keys as Categorical (4 bytes a point instead of 16), and a plan that reads it gives them
    back as text once it has grouped its points.

    >>> rows = pl.LazyFrame({"segment": ["a"], "label": ["x"]}, schema_overrides={
    ...     "label": pl.Categorical})
    >>> keys_as_text(rows).collect_schema()["label"]
    String
    """
    schema = frame.collect_schema()
    coded = [k for k in ("segment", "label") if schema.get(k) == pl.Categorical]
    return frame.with_columns(pl.col(coded).cast(pl.String)) if coded else frame


def ratio(numerator: pl.Expr, denominator: pl.Expr, zero_division: float | None) -> pl.Expr:
    """``numerator / denominator``, or ``zero_division`` (null when None) where it is 0/0."""
    return (pl.when(denominator == 0)
            .then(pl.lit(zero_division, dtype=pl.Float64))
            .otherwise(numerator / denominator))


def weighted_mean(value: pl.Expr, weights: pl.Expr) -> pl.Expr:
    """Weighted mean skipping null values; null when their weights sum to 0. The weights are
    taken as shares of the largest, so that a value times a weight cannot overflow."""
    largest = weights.max()
    shares = weights / pl.when(largest > 0).then(largest).otherwise(1.0)
    kept = shares.filter(value.is_not_null()).sum()
    return pl.when(kept > 0).then((value * shares).sum() / kept)


def nan_average(value: pl.Expr, weights: pl.Expr) -> pl.Expr:
    """:func:`weighted_mean`, but the plain mean when the weights sum to 0 (an average over
    labels: weighted falls back to macro when no label has support, as in scikit-learn)."""
    return pl.coalesce(weighted_mean(value, weights), value.mean())


def rate_scores(tp: pl.Expr, fp: pl.Expr, fn: pl.Expr, beta: float,
                zero_division: float | None) -> dict[str, pl.Expr]:
    """precision, recall, f1, fbeta and jaccard from counts, as scikit-learn defines them.

    F-beta = (1 + b²) tp / ((1 + b²) tp + b² fn + fp) = tp / (tp + fn_share fn + fp_share fp),
    with shares written so that b² neither under- nor overflows; 0 where tp = 0 < fp + fn.

    >>> counts = pl.DataFrame({"tp": [0.0, 1.0], "fp": [0.0, 1.0], "fn": [1.0, 0.0]})
    >>> counts.select(**rate_scores(*map(pl.col, ("tp", "fp", "fn")), 1e-200, None))[
    ...     "fbeta"].to_list()  # a tiny beta: precision
    [0.0, 0.5]
    """
    fn_share, fp_share = fbeta_shares(beta)
    return {
        "precision": ratio(tp, tp + fp, zero_division),
        "recall": ratio(tp, tp + fn, zero_division),
        "f1": ratio(2 * tp, 2 * tp + fn + fp, zero_division),
        "fbeta": pl.when(tp + fp + fn == 0).then(pl.lit(zero_division, dtype=pl.Float64))
                 .when(tp == 0).then(0.0)
                 .otherwise(tp / (tp + fn_share * fn + fp_share * fp)),
        "jaccard": ratio(tp, tp + fp + fn, zero_division),
    }


def fbeta_shares(beta: float) -> tuple[float, float]:
    """(b² / (1 + b²), 1 / (1 + b²)) without b² under- or overflowing.

    >>> fbeta_shares(1.0), fbeta_shares(1e-200), fbeta_shares(1e200)
    ((0.5, 0.5), (0.0, 1.0), (1.0, 0.0))
    """
    if beta > 1:
        inverse = (1 / beta) * (1 / beta)
        return 1 / (1 + inverse), inverse / (1 + inverse)
    return beta * beta / (1 + beta * beta), 1 / (1 + beta * beta)
