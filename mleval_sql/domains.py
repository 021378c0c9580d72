"""The values scikit-learn's regression losses refuse, refused here too: one line naming the
metric, the bound and the value at fault (the smallest truth or prediction of the input).

>>> bounds("mean_gamma_deviance", power=0.0)
((0.0, True), (0.0, True))
>>> bounds("mse", power=0.0) is None
True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import polars as pl

from mleval_sql.errors import InputError
from mleval_sql.schema import Columns

#: (low, strict) of the truth and of the prediction: values must be > low (strict) or >= low;
#: None where any value goes.
Bound = tuple[float, bool] | None

_LOG = ((-1.0, True), (-1.0, True))  # log1p: values <= -1 refused, as scikit-learn


def _tweedie(power: float) -> tuple[Bound, Bound] | None:
    """scikit-learn's mean_tweedie_deviance's checks of power ``power``."""
    if power < 0:
        return None, (0.0, True)
    if power == 0:
        return None
    if power < 2:
        return (0.0, False), (0.0, True)
    return (0.0, True), (0.0, True)


def bounds(metric: str, *, power: float) -> tuple[Bound, Bound] | None:
    """The bounds of ``metric``'s truth and prediction (None: it reads any finite value)."""
    if metric in ("mean_squared_log_error", "root_mean_squared_log_error"):
        return _LOG
    if metric == "mean_poisson_deviance":
        return _tweedie(1.0)
    if metric == "mean_gamma_deviance":
        return _tweedie(2.0)
    if metric in ("mean_tweedie_deviance", "d2_tweedie"):
        return _tweedie(power)
    return None


#: The metrics with a domain of their own (for any power).
RESTRICTED = ("mean_squared_log_error", "root_mean_squared_log_error", "mean_poisson_deviance",
              "mean_gamma_deviance", "mean_tweedie_deviance", "d2_tweedie")


def _outside(value: float, bound: Bound) -> bool:
    return bound is not None and (value <= bound[0] if bound[1] else value < bound[0])


def check(summary: pl.DataFrame, columns: Columns, metrics: Iterable[str],
          params: dict[str, Any]) -> None:
    """An ``InputError`` where a metric asked reads a value outside its domain (the input
    checks' smallest truth and score; the smallest negative truth's row where one is named)."""
    low_truth, low_score = summary["min_truth"].min(), summary["min_score"].min()
    for metric in metrics:
        found = bounds(metric, power=params.get("power", 0.0))
        if found is None:
            continue
        for (column, value), bound in zip(((columns.truth, low_truth), (columns.score, low_score)),
                                          found, strict=True):
            if value is not None and _outside(value, bound):
                assert bound is not None
                need = f"{'>' if bound[1] else '>='} {bound[0]:g}"
                power = (f" with power={params['power']:g}"
                         if metric in ("mean_tweedie_deviance", "d2_tweedie") else "")
                example = _example(summary) if column == columns.truth and bound[0] >= 0 \
                    else ""
                raise InputError(f"{metric}{power} needs column {column!r} {need} (as "
                                 f"scikit-learn), but it has values down to {value:g}{example}")


def _example(summary: pl.DataFrame) -> str:
    """``, e.g. -2 at sample 's003', label 'y'``: the smallest (sample, label) row with a
    negative truth, where the input checks named one."""
    name = "example_negative_truth"
    if f"{name}_sample" not in summary.columns:
        return ""
    rows = summary.filter(pl.col(f"{name}_sample").is_not_null()).sort(
        f"{name}_sample", f"{name}_label")
    if rows.is_empty():
        return ""
    row = rows.row(0, named=True)
    return (f", e.g. {row[f'{name}_value']:g} at sample {row[f'{name}_sample']!r}, "
            f"label {row[f'{name}_label']!r}")
