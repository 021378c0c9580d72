"""Regression: weighted error sums per (segment, output), then MSE, RMSE, MAE, MAPE and R².

Mirrors queries/regression_sums.sql, queries/regression_metrics.sql and
queries/declared_regression.sql (their headers hold the conventions). ``score`` is the
prediction, ``truth`` the target and ``label`` the output.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from mleval_sql.engines.polars._common import weight
from mleval_sql.registry import REGRESSION, metrics_of

__all__ = ["declared_regression", "regression_metrics", "regression_sums"]

_KEYS = ("segment", "label")
#: numpy's float64 eps, the floor of |truth| in scikit-learn's MAPE (2**-52, exact)
EPS = 2.0**-52
METRICS = metrics_of(REGRESSION)


def regression_sums(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """weight, mean_truth, sse, sae, sape, sst and se per (segment, label)."""
    y = pl.col("truth").cast(pl.Float64)
    error = pl.col("score") - y
    total = weight.sum()
    # truths shifted by one of the output's own (the smallest) first: a large common offset
    # (1e12 + noise) cancels exactly before anything is summed
    origin = y.min()
    shifted = y - origin
    shifted_mean = (weight * shifted).sum() / pl.when(total != 0).then(total)
    # around the mean computed first: sum(w y²) - sum(w y)² / sum(w) would cancel catastrophically
    deviation = shifted - shifted_mean
    positive = shifted.filter(weight > 0)
    sst = (pl.when(total == 0).then(None)
           .when(positive.min() == positive.max()).then(0.0)  # constant truth: exactly 0
           .otherwise((weight * (deviation * deviation)).sum()))
    return predictions.group_by(*_KEYS).agg(
        weight=total,
        mean_truth=origin + shifted_mean,
        sse=(weight * (error * error)).sum(),
        sae=(weight * error.abs()).sum(),
        sape=(weight * (error.abs() / pl.max_horizontal(y.abs(), pl.lit(EPS)))).sum(),
        sst=sst,
        se=(weight * error).sum(),
    )


def regression_metrics(regression_sums: pl.LazyFrame) -> pl.LazyFrame:
    """Per-output values (average null), their macro mean and variance-weighted R²."""
    segments = regression_sums.select("segment").unique()
    labels = regression_sums.select("label").unique()
    grid = segments.join(labels, how="cross").join(
        regression_sums, on=list(_KEYS), how="left", nulls_equal=True)
    w, sse, sst = pl.col("weight"), pl.col("sse"), pl.col("sst")
    known = pl.when(w > 0).then(w)  # null where the weights sum to 0
    scores = grid.with_columns(
        mse=sse / known,
        rmse=(sse / known).sqrt(),
        mae=pl.col("sae") / known,
        mape=pl.col("sape") / known,
        r2=pl.when((w > 0) & (sst > 0)).then(1 - sse / sst),
    )
    long = scores.unpivot(on=list(METRICS), index=[*_KEYS, "sse", "sst"],
                          variable_name="metric", value_name="value").with_columns(
        average=pl.lit(None, dtype=pl.String))
    macro = long.group_by("segment", "metric").agg(value=pl.col("value").mean()).with_columns(
        average=pl.lit("macro"))
    defined = pl.col("r2").is_not_null()
    explained = sst.filter(defined).sum()
    weighted = scores.group_by("segment").agg(
        metric=pl.lit("r2"), average=pl.lit("variance_weighted"),
        value=pl.when(explained > 0).then(1 - sse.filter(defined).sum() / explained))
    return pl.concat([long, macro, weighted], how="diagonal").select(
        "segment", "metric", "average", "label", "value")


def declared_regression(regression_sums: pl.LazyFrame, *,
                        keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """The metrics declared over the regression sums (mleval_sql/declared.py) per output and
    micro (the expression over the outputs' summed sums); label_averages adds the macro mean.
    ``keep``: only these metrics and averages."""
    from mleval_sql import declared  # declared.py fills the registry this module reads

    w, mean = pl.col("weight"), pl.col("mean_truth")
    sums = regression_sums.select(  # the names an expression reads (declared.py)
        "segment", "label", n=w, error="se", absolute_error="sae", squared_error="sse",
        percentage_error="sape", truth=(w * mean).fill_null(0.0),
        truth_squared=(pl.col("sst") + w * mean * mean).fill_null(0.0),
        squared_deviation=pl.col("sst").fill_null(0.0))
    names = list(declared.REGRESSION_STATISTICS)
    parts = [sums.with_columns(average=pl.lit(None, dtype=pl.String))]
    if keep is None or "micro" in keep[1]:
        parts.append(sums.group_by("segment").agg(pl.col(names).sum())
                     .with_columns(average=pl.lit("micro")))
    statistics = pl.concat(parts, how="diagonal").with_columns(
        pl.col(names).cast(pl.Float64), support=pl.col("n").cast(pl.Float64))
    return declared.polars_rows(statistics, "declared_regression",
                                None if keep is None else keep[0])
