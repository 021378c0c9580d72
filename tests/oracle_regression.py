"""Expected rows for the regression metrics (scikit-learn, or hand-worked where it has none).

Each function takes (segment, task, metric, averages) and returns rows (average, label,
predicted, value); see tests/oracle.py for Segment and the per-label helpers.

Each label is one output: ``seg.target`` holds the truths and ``seg.score`` the predictions.
Our documented differences from scikit-learn's defaults, and how the oracle follows them:

- R² of an output whose truth is constant (total sum of squares 0) is undefined, None: r2_score
  with force_finite=False gives nan (0/0) or -inf there, mapped to None. Constant means equal over
  the samples of positive weight; it is checked here too, since a weighted mean that rounds off
  would give scikit-learn a tiny positive variance and a meaningless huge negative R².
- A segment whose weights sum to 0: None (scikit-learn raises ZeroDivisionError).
- macro skips outputs without a value (scikit-learn's uniform_average would be nan).
- variance_weighted: scikit-learn weights the outputs by their total sum of squares, so outputs
  with a constant truth weigh 0 and its force_finite=True value equals ours; where every output
  is constant it falls back to a uniform mean of 1.0 / 0.0, and we give None.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable

import numpy as np
from sklearn import metrics as skm

from tests.oracle import ORACLES, Rows, Segment

_ERRORS: dict[str, Callable[..., np.ndarray]] = {
    "mse": skm.mean_squared_error,
    "rmse": skm.root_mean_squared_error,
    "mae": skm.mean_absolute_error,
    "mape": skm.mean_absolute_percentage_error,
}


def _finite(value: float) -> float | None:
    value = float(value)
    return value if math.isfinite(value) else None


def _constant(seg: Segment, j: int) -> bool:
    kept = seg.target[seg.weight > 0, j]
    return kept.size == 0 or bool(np.all(kept == kept[0]))


def _per_output(seg: Segment, metric: str) -> list[float | None]:
    """The metric of each of the segment's outputs (scikit-learn's multioutput='raw_values')."""
    if seg.weight.sum() == 0:
        return [None] * len(seg.labels)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if metric == "r2":
            if len(seg.weight) < 2:  # r2_score returns one nan for the whole call
                return [None] * len(seg.labels)
            values = skm.r2_score(seg.target, seg.score, sample_weight=seg.weight,
                                  multioutput="raw_values", force_finite=False)
            return [None if _constant(seg, j) else _finite(v) for j, v in enumerate(values)]
        values = _ERRORS[metric](seg.target, seg.score, sample_weight=seg.weight,
                                 multioutput="raw_values")
    return [_finite(v) for v in values]


def _macro(seg: Segment, metric: str, values: list[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    if not kept:
        return None
    if len(kept) < len(values):  # scikit-learn's uniform mean would be nan: skip those outputs
        return float(np.mean(kept))
    fn = _ERRORS.get(metric, skm.r2_score)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(fn(seg.target, seg.score, sample_weight=seg.weight,
                          multioutput="uniform_average"))


def _variance_weighted(seg: Segment) -> float | None:
    if seg.weight.sum() == 0 or all(_constant(seg, j) for j in range(len(seg.labels))):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(skm.r2_score(seg.target, seg.score, sample_weight=seg.weight,
                                    multioutput="variance_weighted", force_finite=True))


#: scikit-learn's functions of one output (y, prediction, weights, parameters) -> value; those
#: marked as D² are None where the truth is constant (tests/oracle_regression.py's docstring)
_ONE_OUTPUT: dict[str, Callable[..., float]] = {
    "explained_variance": lambda y, p, w, a: skm.explained_variance_score(
        y, p, sample_weight=w, force_finite=False),
    # max_error takes no weights: the rows of positive weight are the rows there are
    "max_error": lambda y, p, w, a: skm.max_error(y[w > 0], p[w > 0]),
    "median_absolute_error": lambda y, p, w, a: skm.median_absolute_error(y, p, sample_weight=w),
    "mean_squared_log_error": lambda y, p, w, a: skm.mean_squared_log_error(
        y, p, sample_weight=w),
    "root_mean_squared_log_error": lambda y, p, w, a: skm.root_mean_squared_log_error(
        y, p, sample_weight=w),
    "mean_pinball_loss": lambda y, p, w, a: skm.mean_pinball_loss(
        y, p, sample_weight=w, alpha=a["pinball_alpha"]),
    "mean_poisson_deviance": lambda y, p, w, a: skm.mean_poisson_deviance(y, p, sample_weight=w),
    "mean_gamma_deviance": lambda y, p, w, a: skm.mean_gamma_deviance(y, p, sample_weight=w),
    "mean_tweedie_deviance": lambda y, p, w, a: skm.mean_tweedie_deviance(
        y, p, sample_weight=w, power=a["power"]),
    "d2_absolute_error": lambda y, p, w, a: skm.d2_absolute_error_score(y, p, sample_weight=w),
    "d2_pinball": lambda y, p, w, a: skm.d2_pinball_score(
        y, p, sample_weight=w, alpha=a["pinball_alpha"]),
    "d2_tweedie": lambda y, p, w, a: skm.d2_tweedie_score(
        y, p, sample_weight=w, power=a["power"]),
}
_UNDEFINED_WHEN_CONSTANT = ("explained_variance", "d2_absolute_error", "d2_pinball",
                            "d2_tweedie")


def _one_output(seg: Segment, metric: str) -> list[float | None]:
    if seg.weight.sum() == 0:
        return [None] * len(seg.labels)
    out: list[float | None] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for j in range(len(seg.labels)):
            if metric in _UNDEFINED_WHEN_CONSTANT and _constant(seg, j):
                out.append(None)
                continue
            out.append(_finite(_ONE_OUTPUT[metric](seg.target[:, j], seg.score[:, j],
                                                   seg.weight, seg.params)))
    return out


def _variance_weighted_ev(seg: Segment) -> float | None:
    if seg.weight.sum() == 0 or all(_constant(seg, j) for j in range(len(seg.labels))):
        return None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _finite(skm.explained_variance_score(
            seg.target, seg.score, sample_weight=seg.weight, multioutput="variance_weighted"))


def _regression_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    own = metric in _ONE_OUTPUT
    per_output = _one_output(seg, metric) if own else _per_output(seg, metric)
    values = dict(zip(seg.labels, per_output, strict=True))
    rows: Rows = []
    for average in averages:
        if average == "none":
            rows += [(None, label, None, values.get(label)) for label in seg.all_labels]
        elif average == "macro":
            kept = [v for v in values.values() if v is not None]
            rows.append(("macro", None, None,
                         (float(np.mean(kept)) if kept else None) if own
                         else _macro(seg, metric, list(values.values()))))
        elif average == "variance_weighted":
            rows.append(("variance_weighted", None, None,
                         _variance_weighted_ev(seg) if metric == "explained_variance"
                         else _variance_weighted(seg)))
    return rows


ORACLES.update(dict.fromkeys(("mse", "rmse", "mae", "mape", "r2", *_ONE_OUTPUT),
                             _regression_rows))
