"""Every parameter of a request declared once: its default, type and bounds, help text, and
whether (and on which rows) it shows as a result column. ``evaluate``/``curve`` take their
defaults from here and check values with :func:`checked`; the command line builds its flags and
help from here; the result columns and the documentation's parameter table derive from it. The
metrics that use a parameter say so themselves (``Metric.params`` in the registry).

>>> PARAMS["beta"].default, PARAMS["beta"].flag
(1.0, '--beta')
>>> checked(beta=2)["beta"]
2.0
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from mleval_sql.errors import InputError

#: The means of two entropies that normalized_mutual_info and adjusted_mutual_info divide by.
AVERAGE_METHODS = ("arithmetic", "geometric", "min", "max")
#: What ``zero_division`` may be, and how the command line spells it.
ZERO_DIVISION = {"0": 0.0, "1": 1.0, "null": None}


@dataclass(frozen=True)
class Param:
    """One parameter.

    ``kind``: a finite ``number``, a ``whole`` number, one of ``choices``, or a list of
    ``numbers``. ``low``/``high`` bound it (``open_low`` / ``open_high``: ``low`` / ``high``
    itself is refused); ``None`` is allowed where it is the default. ``column``: shown as a
    result column on the rows of the metrics that name it (``"metric"``), on every row of a
    family whose steps read it (``"step"``), or not at all (``None``).
    """

    name: str
    default: Any
    help: str
    kind: Literal["number", "whole", "choice", "numbers"] = "number"
    low: float | None = None
    high: float | None = None
    open_low: bool = False
    open_high: bool = False
    choices: tuple[Any, ...] = ()
    column: Literal["metric", "step"] | None = None
    metavar: str | None = None
    #: an open interval of numbers refused although within the bounds (Tweedie's (0, 1))
    gap: tuple[float, float] | None = None

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def dtype(self) -> pl.DataType:
        """The type of its result column."""
        return {"whole": pl.Int64(), "choice": pl.String()}.get(self.kind, pl.Float64())

    def check(self, value: Any) -> Any:
        """``value`` as the engines take it (numbers as floats), or an ``InputError``."""
        if value is None and self.default is None:
            return None
        if self.kind == "choice":
            if value not in self.choices:
                raise InputError(f"{self.name} must be one of {list(self.choices)}, got "
                                 f"{value!r}")
            return self.choices[self.choices.index(value)]  # as declared: 1 -> 1.0
        if self.kind == "numbers":
            if isinstance(value, (str, bytes)) or not isinstance(value, Sequence) or not value:
                raise InputError(f"{self.name} must be a non-empty list of numbers, got "
                                 f"{value!r}")
            for v in value:
                _number(f"every {self.name[:-1]}", v)
            return sorted({float(v) for v in value})
        _number(self.name, value, low=self.low, high=self.high, whole=self.kind == "whole",
                open_low=self.open_low, open_high=self.open_high)
        if self.gap is not None and self.gap[0] < value < self.gap[1]:
            raise InputError(f"{self.name} must not lie in ({self.gap[0]:g}, {self.gap[1]:g}), "
                             f"got {value!r}")
        return value if self.kind == "whole" else float(value)


def _number(name: str, value: Any, *, low: float | None = None, high: float | None = None,
            whole: bool = False, open_low: bool = False, open_high: bool = False) -> None:
    kind = int if whole else (int, float)
    if isinstance(value, bool) or not isinstance(value, kind) or not math.isfinite(value) \
            or (low is not None and (value <= low if open_low else value < low)) \
            or (high is not None and (value >= high if open_high else value > high)):
        if high is not None:
            bounds = f" in {'(' if open_low else '['}{low}, {high}{')' if open_high else ']'}"
        else:
            bounds = f" > {low}" if open_low else f" >= {low}" if low is not None else ""
        raise InputError(f"{name} must be a finite {'whole ' if whole else ''}number{bounds}, "
                         f"got {value!r}")


def _params(*params: Param) -> dict[str, Param]:
    return {p.name: p for p in params}


#: In the order of their result columns, then the others.
PARAMS: dict[str, Param] = _params(
    Param("threshold", 0.5, "a label is predicted when its score is at least this",
          column="step"),
    Param("beta", 1.0, "recall weighted beta times as much as precision", low=0, open_low=True,
          column="metric"),
    Param("k", 2, "how many top-scored labels count", "whole", low=1,
          column="metric"),
    Param("log_base", 2.0, "the base of the logarithm of dcg's discount (a lower base: a "
          "sharper discount)", low=0, open_low=True, column="metric", metavar="B"),
    Param("ignore_ties", False, "ndcg / dcg: assume no tied scores (ties then in label order, "
          "the last label first, as scikit-learn's argsort) instead of averaging over them",
          "choice", choices=(False, True)),
    Param("max_fpr", None, "the false positive rate the ROC curve is cut at, "
          "McClish-corrected (none: the whole curve)", low=0, high=1, open_low=True,
          column="metric", metavar="X"),
    Param("min_recall", 0.9, "the recall an operating point must reach", low=0, high=1,
          column="metric", metavar="X"),
    Param("min_precision", 0.9, "the precision an operating point must reach", low=0, high=1,
          column="metric", metavar="X"),
    Param("n_bins", 10, "equal-width score bins (also of the reliability curve)", "whole",
          low=1, column="metric", metavar="N"),
    Param("average_method", "arithmetic", "the mean of the two entropies that "
          "mutual information is divided by", "choice",
          choices=AVERAGE_METHODS, column="metric"),
    Param("pinball_alpha", 0.5, "the quantile the pinball loss scores (mean_pinball_loss, "
          "d2_pinball: scikit-learn's alpha)",
          low=0, high=1, open_low=True, open_high=True, column="metric", metavar="X"),
    Param("power", 0.0, "the Tweedie power (mean_tweedie_deviance, d2_tweedie): below 0 "
          "extreme stable, 0 normal, 1 Poisson, 2 gamma, 3 inverse Gaussian; not in (0, 1)",
          column="metric", metavar="P", gap=(0.0, 1.0)),
    Param("bins", None, "sweep at thresholds 0, 1/N, ..., 1; ranking metrics and roc / pr "
          "curves become one-pass approximations on that grid", "whole", low=1,
          column="step", metavar="N"),
    Param("thresholds", None, "sweep the decision metrics over these thresholds, e.g. "
          "0,0.25,0.5", "numbers", metavar="T,T,..."),
    Param("zero_division", None, "the value of 0/0", "choice",
          choices=tuple(ZERO_DIVISION.values())),
    Param("ci", None, "the confidence level of an interval on every value (ci_low, ci_high): "
          "DeLong's for a label's ROC AUC, a Poisson bootstrap for the others", low=0, high=1,
          open_low=True, open_high=True, metavar="LEVEL"),
    Param("resamples", 200, "the bootstrap's replicates", "whole", low=10, metavar="N"),
    Param("seed", 0, "the bootstrap's seed: the same seed, the same intervals", "whole", low=0,
          metavar="N"),
)
#: Curve options: not metric parameters, but declared (and defaulted) here as well.
CURVE_PARAMS: dict[str, Param] = _params(
    Param("kind", "roc", "the curve", "choice",
          choices=("roc", "pr", "sweep", "reliability", "det", "thresholds")),
    Param("drop_intermediate", None, "drop the points scikit-learn drops (default: True for "
          "roc, False for pr, as scikit-learn)", "choice", choices=(True, False)),
    Param("max_points", None, "at most this many points per roc / pr curve (0: every point): "
          "a curve of more points keeps, in each of B equal-width bins of its x axis (fpr, "
          "recall), its first, last, lowest and highest point, so that the curve drawn through "
          "them stays within 1/B of the exact one (B = N/2 for roc, N/4 for pr)", "whole",
          low=0, metavar="N"),
)
#: The fewest points a thinned curve may be asked for (``max_points``): a bin of each kind
#: when a report draws ROC and PR curves from one table.
MIN_POINTS = 8


def curve_bins(kind: str, max_points: int) -> dict[str, int]:
    """The bins of each curve's x axis that ``max_points`` gives (queries/curve_rates.sql):
    the thinned curve and the exact one are within ``1 / bins`` of each other horizontally.
    ``kind`` "both": one table draws ROC and PR curves, half of the points each.

    >>> curve_bins("roc", 400), curve_bins("both", 400)
    ({'roc': 200}, {'roc': 100, 'pr': 50})
    """
    shares = {"roc": {"roc": 2}, "pr": {"pr": 4}, "both": {"roc": 4, "pr": 8}}[kind]
    return {name: max_points // share for name, share in shares.items()}


#: Switches of the steps that the request sets from what was asked, never a user's value.
SWITCHES: dict[str, Param] = _params(
    Param("micro", True, "pool every label's curve into one (asked: the micro average); the "
          "pooled sort costs more than every label's own", "choice", choices=(True, False)),
    Param("adjusted", True, "compute the expected mutual information (asked: "
          "adjusted_mutual_info); a sum over the margins", "choice", choices=(True, False)),
    Param("replicates", None, "the bootstrap replicates a run computes (a chunk of 0, 1, ..., "
          "resamples - 1)", "numbers"),
    Param("class_counts", True, "count each score's true and false rows (asked: "
          "average_precision, or a partial AUC); without them, with every weight 1, the ROC "
          "AUC and break-even points come from one sort of ranks", "choice",
          choices=(True, False)),
    Param("label_totals", True, "each row with its label's totals (asked: break_even, or a "
          "partial AUC)", "choice", choices=(True, False)),
    Param("unit_weights", False, "every weight is 1 (set by the engine: no weight column, and "
          "not a bootstrap replicate, whose draws weigh the rows): counts instead of sums",
          "choice", choices=(True, False)),
)
DEFAULTS: dict[str, Any] = {p.name: p.default for p in (*PARAMS.values(),
                                                         *CURVE_PARAMS.values())}
#: The parameters shown as result columns, in their order.
PARAM_COLUMNS = tuple(p.name for p in PARAMS.values() if p.column)
#: Column names of every result table (clustering adds the cell's truth and cluster): a
#: segment column may not take one.
RESULT_COLUMNS = ("metric", "average", "label", "predicted", *PARAM_COLUMNS, "value")


def checked(**values: Any) -> dict[str, Any]:
    """The request's parameters, each checked and with its default where not given; ``bins``
    becomes the list of ``thresholds`` it stands for (``bins`` itself is kept)."""
    unknown = sorted(set(values) - set(PARAMS))
    if unknown:
        raise TypeError(f"unknown parameter {unknown[0]!r}")
    if isinstance(values.get("zero_division"), float) and math.isnan(values["zero_division"]):
        values["zero_division"] = None  # scikit-learn's np.nan: null
    out = {name: p.check(values.get(name, p.default)) for name, p in PARAMS.items()}
    if out["bins"] is not None:
        if out["thresholds"] is not None:
            raise InputError("give thresholds= or bins=, not both")
        out["thresholds"] = [i / out["bins"] for i in range(out["bins"] + 1)]
    return out
