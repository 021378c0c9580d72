"""Regression: weighted error sums per (segment, output), then MSE, RMSE, MAE, MAPE and R².

Mirrors queries/regression_*.sql, queries/quantile_metrics.sql and
queries/declared_regression.sql (their headers hold the conventions). A request pays for what
it asks: mse, rmse, mae, mape and max_error alone are one pass of their own sums
(regression_errors), the median absolute error alone one sort of the errors
(regression_medians); asked beside the metrics of the full sums or of the quantiles, they are
read off those (registry.FUSED). ``score`` is the prediction, ``truth`` the target and
``label`` the output.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from mleval_sql.engines.polars._common import weight
from mleval_sql.registry import ERRORS, QUANTILES, REGRESSION, metrics_of

__all__ = ["declared_regression", "quantile_metrics", "regression_errors", "regression_medians",
           "regression_metrics", "regression_quantile_medians", "regression_quantiles",
           "regression_sum_errors", "regression_sums"]

_KEYS = ("segment", "label")
#: numpy's float64 eps, the floor of |truth| in scikit-learn's MAPE (2**-52, exact)
EPS = 2.0**-52
METRICS = metrics_of(REGRESSION)
ERROR_METRICS = metrics_of(ERRORS)
QUANTILE_METRICS = metrics_of(QUANTILES)


def pinball(y: pl.Expr, s: pl.Expr, alpha: float) -> pl.Expr:
    """The pinball loss at quantile ``alpha`` of predicting ``s`` for the truth ``y``
    (queries/macros/deviance.sql)."""
    return pl.when(y >= s).then(alpha * (y - s)).otherwise((1 - alpha) * (s - y))


def tweedie_deviance(y: pl.Expr, s: pl.Expr, p: float) -> pl.Expr:
    """scikit-learn's unit Tweedie deviance of power ``p``, null outside its domain
    (queries/macros/deviance.sql).

    >>> pl.select(tweedie_deviance(pl.lit(2.0), pl.lit(1.0), 0)).item()
    1.0
    """
    if p == 0:
        return (y - s) * (y - s)
    if p == 1:
        return (pl.when((y > 0) & (s > 0)).then(2 * (y * (y / s).log() - y + s))
                .when((y == 0) & (s > 0)).then(2 * s))
    if p == 2:
        return pl.when((y > 0) & (s > 0)).then(2 * ((s / y).log() + y / s - 1))
    domain = (s > 0) if p < 0 else (s > 0) & ((y >= 0) if p < 2 else (y > 0))
    return pl.when(domain).then(2 * (
        pl.max_horizontal(y, pl.lit(0.0)).pow(2 - p) / ((1 - p) * (2 - p))
        - y * s.pow(1 - p) / (1 - p) + s.pow(2 - p) / (2 - p)))


def _whole(term: pl.Expr) -> pl.Expr:
    """sum(weight * term), null where a row's term is (a row outside the loss's domain)."""
    return pl.when(term.count() == pl.len()).then((weight * term).sum())


def regression_sums(predictions: pl.LazyFrame, *, pinball_alpha: float,
                    power: float) -> pl.LazyFrame:
    """weight, mean_truth, sse, sae, sape, sst, se, sde, max_error, ssle, pinball and the
    deviances per (segment, label)."""
    y = pl.col("truth").cast(pl.Float64)
    score = pl.col("score")
    error = score - y
    total = weight.sum()
    known = pl.when(total != 0).then(total)
    # truths shifted by one of the output's own (the smallest) first: a large common offset
    # (1e12 + noise) cancels exactly before anything is summed
    origin = y.min()
    shifted = y - origin
    shifted_mean = (weight * shifted).sum() / known
    # around the mean computed first: sum(w y²) - sum(w y)² / sum(w) would cancel catastrophically
    deviation = shifted - shifted_mean
    error_deviation = error - (weight * error).sum() / known
    positive = shifted.filter(weight > 0)
    sst = (pl.when(total == 0).then(None)
           .when(positive.min() == positive.max()).then(0.0)  # constant truth: exactly 0
           .otherwise((weight * (deviation * deviation)).sum()))
    log_error = pl.when((y > -1) & (score > -1)).then(score.log1p() - y.log1p())
    mean_truth = origin + shifted_mean
    return predictions.group_by(*_KEYS).agg(
        weight=total,
        mean_truth=mean_truth,
        sse=(weight * (error * error)).sum(),
        sae=(weight * error.abs()).sum(),
        sape=(weight * (error.abs() / pl.max_horizontal(y.abs(), pl.lit(EPS)))).sum(),
        sst=sst,
        se=(weight * error).sum(),
        sde=(weight * (error_deviation * error_deviation)).sum(),
        max_error=error.abs().filter(weight > 0).max(),
        ssle=_whole(log_error * log_error),
        pinball=(weight * pinball(y, score, pinball_alpha)).sum(),
        poisson=_whole(tweedie_deviance(y, score, 1)),
        gamma=_whole(tweedie_deviance(y, score, 2)),
        tweedie=_whole(tweedie_deviance(y, score, power)),
        tweedie_of_mean=_whole(tweedie_deviance(y, mean_truth, power)),
    )


#: float64's eps: a running weight this close (relative to the total) to a level is on it
_ON_LEVEL = 2.0**-52


def regression_quantiles(predictions: pl.LazyFrame, *, pinball_alpha: float) -> pl.LazyFrame:
    """Weighted quantiles (scikit-learn's averaged inverted CDF) of |error| and of the truth
    per (segment, label), and the truth's losses around them (queries/regression_quantiles.sql)."""
    y = pl.col("truth").cast(pl.Float64)
    kept = predictions.filter(weight > 0).select(
        *_KEYS, weight=weight, y=y, e=(pl.col("score") - y).abs())
    blocks = pl.concat([
        kept.group_by(*_KEYS, "e").agg(pl.col("weight").sum()).select(
            *_KEYS, kind=pl.lit("error"), value="e", weight="weight"),
        kept.group_by(*_KEYS, "y").agg(pl.col("weight").sum()).select(
            *_KEYS, kind=pl.lit("truth"), value="y", weight="weight"),
    ])
    groups = [*_KEYS, "kind"]
    # rows of a group in value order, then running sums over each group
    cumulative = blocks.sort([*groups, "value"], nulls_last=True).with_columns(
        below=pl.col("weight").cum_sum().over(groups),
        total=pl.col("weight").sum().over(groups),
        next_value=pl.col("value").shift(-1).over(groups),
    ).with_columns(before=pl.col("below").shift(1).over(groups).fill_null(0.0))
    levels = pl.LazyFrame({"kind": ["error", "truth", "truth"],
                           "name": ["median_error", "truth_median", "truth_quantile"],
                           "level": [0.5, 0.5, float(pinball_alpha)]})
    target = pl.col("level") * pl.col("total")
    value = pl.col("value")
    quantiles = cumulative.join(levels, on="kind").filter(
        (pl.col("below") >= target) & (pl.col("before") < target)).select(
        *_KEYS, "name",
        value=pl.when(pl.col("below") - target > _ON_LEVEL * pl.col("total")).then(value)
        .otherwise((value + pl.col("next_value").fill_null(value)) / 2))
    name = pl.col("name")
    picked = quantiles.group_by(*_KEYS).agg(
        **{n: value.filter(name == n).max()
           for n in ("median_error", "truth_median", "truth_quantile")})
    truths = blocks.filter(pl.col("kind") == "truth")
    return picked.join(truths, on=list(_KEYS), nulls_equal=True).group_by(*_KEYS).agg(
        pl.col("median_error", "truth_median", "truth_quantile").max(),
        median_loss=(pl.col("weight") * (value - pl.col("truth_median")).abs()).sum(),
        quantile_loss=(pl.col("weight") * pinball(value, pl.col("truth_quantile"),
                                                       pinball_alpha)).sum(),
    )


def regression_medians(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """The weighted median of |error| per (segment, label) as median_absolute_error's rows,
    read off each output's rows in error order (queries/regression_medians.sql): the first
    row whose running weight reaches half the total holds it."""
    y = pl.col("truth").cast(pl.Float64)
    # a row of weight 0 takes no part: its error null, first in the order, below 0
    rows = predictions.select(*_KEYS, weight=weight, e=pl.when(weight > 0).then(
        (pl.col("score") - y).abs())).sort("e", nulls_last=False)
    # one sort of every row by its error (by the keys and the error: several times as long);
    # a window over a group takes its rows in the frame's order, each output's in error order
    keys, e, total = list(_KEYS), pl.col("e"), pl.col("total")
    picked = rows.with_columns(
        below=weight.cum_sum().over(keys), total=weight.sum().over(keys),
        next_value=e.shift(-1).over(keys),
    ).filter(pl.col("below") >= 0.5 * total).group_by(keys).agg(
        total.max(), pl.col("below").min(), value=e.min(), next_value=pl.col("next_value").min())
    value = pl.col("value")
    return picked.select(
        "segment", metric=pl.lit("median_absolute_error"),
        average=pl.lit(None, dtype=pl.String), label="label",
        value=pl.when(pl.col("below") - 0.5 * total > _ON_LEVEL * total).then(value)
        .otherwise((value + pl.col("next_value").fill_null(value)) / 2),
        support=total)


def regression_quantile_medians(regression_sums: pl.LazyFrame,
                                regression_quantiles: pl.LazyFrame) -> pl.LazyFrame:
    """median_absolute_error's rows off the quantiles' pass, where their D² are asked too
    (queries/regression_quantile_medians.sql)."""
    w = pl.col("weight")
    return regression_sums.join(regression_quantiles, on=list(_KEYS), how="left",
                                nulls_equal=True).select(
        "segment", metric=pl.lit("median_absolute_error"),
        average=pl.lit(None, dtype=pl.String), label="label",
        value=pl.when(w > 0).then(pl.col("median_error")), support=w)


def regression_errors(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """mse, rmse, mae, mape and max_error per (segment, label) from one pass of their own sums
    (queries/regression_errors.sql)."""
    y = pl.col("truth").cast(pl.Float64)
    error = pl.col("score") - y
    sums = predictions.group_by(*_KEYS).agg(
        weight=weight.sum(),
        sse=(weight * (error * error)).sum(),
        sae=(weight * error.abs()).sum(),
        sape=(weight * (error.abs() / pl.max_horizontal(y.abs(), pl.lit(EPS)))).sum(),
        max_error=error.abs().filter(weight > 0).max(),
    )
    return _error_rows(sums)


def regression_sum_errors(regression_sums: pl.LazyFrame) -> pl.LazyFrame:
    """regression_errors' rows off the regression sums, where a metric of theirs is asked too
    (queries/regression_sum_errors.sql)."""
    return _error_rows(regression_sums)


def _error_rows(sums: pl.LazyFrame) -> pl.LazyFrame:
    """Per-label rows (with support) of mse, rmse, mae, mape and max_error from their sums."""
    w = pl.col("weight")
    known = pl.when(w != 0).then(w)  # null where the weights sum to 0
    sse = pl.col("sse")
    scores = sums.select(
        *_KEYS, support=w, mse=sse / known, rmse=(sse / known).sqrt(),
        mae=pl.col("sae") / known, mape=pl.col("sape") / known, max_error="max_error")
    return scores.unpivot(on=list(ERROR_METRICS), index=[*_KEYS, "support"],
                          variable_name="metric", value_name="value").select(
        "segment", "metric", average=pl.lit(None, dtype=pl.String), label="label",
        value="value", support="support")


def regression_metrics(regression_sums: pl.LazyFrame) -> pl.LazyFrame:
    """Per-output values (average null), their macro mean and variance-weighted R²."""
    segments = regression_sums.select("segment").unique()
    labels = regression_sums.select("label").unique()
    grid = segments.join(labels, how="cross").join(
        regression_sums, on=list(_KEYS), how="left", nulls_equal=True)
    w, sse, sst, sde = pl.col("weight"), pl.col("sse"), pl.col("sst"), pl.col("sde")
    known = pl.when(w > 0).then(w)  # null where the weights sum to 0
    varies = (w > 0) & (sst > 0)
    tweedie_of_mean = pl.col("tweedie_of_mean")
    scores = grid.with_columns(
        r2=pl.when(varies).then(1 - sse / sst),
        explained_variance=pl.when(varies).then(1 - sde / sst),
        mean_squared_log_error=pl.col("ssle") / known,
        root_mean_squared_log_error=(pl.col("ssle") / known).sqrt(),
        mean_pinball_loss=pl.col("pinball") / known,
        mean_poisson_deviance=pl.col("poisson") / known,
        mean_gamma_deviance=pl.col("gamma") / known,
        mean_tweedie_deviance=pl.col("tweedie") / known,
        d2_tweedie=pl.when(varies & (tweedie_of_mean != 0))
        .then(1 - pl.col("tweedie") / tweedie_of_mean),
    )
    long = scores.unpivot(on=list(METRICS), index=list(_KEYS),
                          variable_name="metric", value_name="value").with_columns(
        average=pl.lit(None, dtype=pl.String))
    macro = long.group_by("segment", "metric").agg(value=pl.col("value").mean()).with_columns(
        average=pl.lit("macro"))
    weighted = [_variance_weighted(scores, metric, numerator)
                for metric, numerator in (("r2", sse), ("explained_variance", sde))]
    return pl.concat([long, macro, *weighted], how="diagonal").select(
        "segment", "metric", "average", "label", "value")


def _variance_weighted(scores: pl.LazyFrame, metric: str, numerator: pl.Expr) -> pl.LazyFrame:
    """1 - sum(numerator) / sum(sst) over the outputs where ``metric`` is defined."""
    defined = pl.col(metric).is_not_null()
    explained = pl.col("sst").filter(defined).sum()
    return scores.group_by("segment").agg(
        metric=pl.lit(metric), average=pl.lit("variance_weighted"),
        value=pl.when(explained > 0).then(1 - numerator.filter(defined).sum() / explained))


def quantile_metrics(regression_sums: pl.LazyFrame,
                     regression_quantiles: pl.LazyFrame) -> pl.LazyFrame:
    """d2_absolute_error and d2_pinball per output and their macro mean
    (queries/quantile_metrics.sql)."""
    segments = regression_sums.select("segment").unique()
    labels = regression_sums.select("label").unique()
    grid = segments.join(labels, how="cross").join(
        regression_sums, on=list(_KEYS), how="left", nulls_equal=True).join(
        regression_quantiles, on=list(_KEYS), how="left", nulls_equal=True)
    w, sst = pl.col("weight"), pl.col("sst")
    varies = (w > 0) & (sst > 0)
    median_loss, quantile_loss = pl.col("median_loss"), pl.col("quantile_loss")
    scores = grid.select(
        *_KEYS,
        d2_absolute_error=pl.when(varies & (median_loss != 0))
        .then(1 - pl.col("sae") / median_loss),
        d2_pinball=pl.when(varies & (quantile_loss != 0))
        .then(1 - pl.col("pinball") / quantile_loss),
    )
    long = scores.unpivot(on=list(QUANTILE_METRICS), index=list(_KEYS),
                          variable_name="metric", value_name="value").with_columns(
        average=pl.lit(None, dtype=pl.String))
    macro = long.group_by("segment", "metric").agg(value=pl.col("value").mean()).with_columns(
        average=pl.lit("macro"))
    return pl.concat([long, macro], how="diagonal").select(
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
