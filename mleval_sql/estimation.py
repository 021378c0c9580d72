"""Performance before the truth arrives: the ``estimated_*`` metrics (confidence-based
estimation).

Where scores are probabilities, a row's outcome is expected to be true with its probability
``q``: the expected confusion counts at the threshold are sums of ``w q`` and ``w (1 - q)``, and
the expected ROC AUC is that of the rows taken as a positive of weight ``w q`` and a negative of
weight ``w (1 - q)`` (queries/expected_points.sql and the steps after it). An estimated metric
is asked like any other (``me.evaluate(current, metrics=["estimated_f1", "f1"])``): its rows are
those of a request run on :class:`Expected` rows, whose truth column holds ``q``; the realised
metrics asked beside it run on the rows as they are.

Scores that are not calibrated probabilities are mapped first, per label, by a calibration map
learnt on labelled rows (``reference=``): ``isotonic`` (the weighted isotonic regression of the
truth on the score, read between its points linearly and clipped at its ends, as
scikit-learn's ``IsotonicRegression(out_of_bounds="clip")``) or ``histogram`` (the reference's
positive rate in each of ``n_bins`` score bins of equal reference weight).

With ``ci``, each label's estimate gets the interval in which its realised value lies when the
outcomes are drawn independently with their probabilities: ``estimate ± z·sd``, the variance to
first order (queries/estimated_variance.sql), ``ci_method`` "expected".

>>> import polars as pl
>>> ref = pl.DataFrame({"sample": range(6), "score": [0.1, 0.2, 0.3, 0.6, 0.7, 0.9],
...                     "truth": [0, 1, 0, 1, 1, 1]})
>>> knots = calibration_map(ref.lazy(), "isotonic", score="score", truth="truth", keys=(),
...                         weight=None, n_bins=10)
>>> Expected("truth", "score", (), knots).polars(ref.lazy()).sort("sample").collect()[
...     "truth"].to_list()
[0.0, 0.5, 0.5, 1.0, 1.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import polars as pl

from mleval_sql.errors import InputError
from mleval_sql.request import ESTIMATED_METRICS, Request
from mleval_sql.sources import Derived, Source, as_source

if TYPE_CHECKING:  # SQL is written only where a request reads it: sqlglot loads then
    from sqlglot import exp

#: A calibration map's columns: per label, the scores in [low, high) get level + slope (score
#: - low).
KNOTS = ("low", "high", "level", "slope")


def split(request: Request, source: Any) -> tuple[Request | None, Request] | None:
    """The request of the realised metrics asked (None: none) and that of the estimated ones,
    or None where no estimated metric is asked or ``source`` is already the expected rows."""
    asked = request.metrics or ()
    estimated = tuple(m for m in asked if m in ESTIMATED_METRICS)
    if not estimated or _is_expected(source):
        return None
    realised = tuple(m for m in asked if m not in ESTIMATED_METRICS)
    rest = replace(request, metrics=realised, reference=None, calibration=None) \
        if realised else None
    # the truth is the probability: outcomes, unknown truth and curves are the realised rows'
    return rest, replace(request, metrics=estimated, labels=None, unlabelled="error",
                         curves=())


def _is_expected(source: Any) -> bool:
    """Whether ``source`` is rows with their expected outcomes (:class:`Expected`)."""
    while isinstance(source, Derived):
        if isinstance(source.derive, Expected):
            return True
        source = source.inner
    return False


def expected(request: Request, source: Any) -> Source:
    """``source`` with its truth column holding each row's probability of being true (the
    score, or the score through the calibration map ``request`` asks for, learnt per label
    and per segment of the ``by`` columns the reference has)."""
    cols = request.column_map
    src = as_source(source, storage_options=request.storage_options, as_of=request.as_of)
    ours = src.schema()
    label = cols.label if cols.label in ours else None
    method = request.calibration or ("isotonic" if request.reference is not None else "none")
    knots, keys = None, ()
    if method != "none":
        reference = as_source(request.reference, storage_options=request.storage_options)
        theirs = reference.schema()
        missing = [c for c in (cols.score, cols.truth, *([label] if label else []))
                   if c not in theirs]
        if missing:
            raise InputError(f"reference: the labelled rows have no column {missing[0]!r} "
                             f"(the calibration map reads score, truth and label); they have "
                             f"{sorted(theirs.names())}")
        keys = (*(c for c in request.by if c in theirs), *([label] if label else []))
        for key in keys:
            if ours[key] != theirs[key]:
                raise InputError(f"reference: column {key!r} is {theirs[key]} there and "
                                 f"{ours[key]} in the input; the calibration map is learnt "
                                 "per label and segment")
        weight = cols.weight if cols.weight in theirs else None
        knots = calibration_map(reference.polars(), method, score=cols.score, truth=cols.truth,
                                keys=keys, weight=weight,
                                n_bins=int(request.params["n_bins"]))  # type: ignore[call-overload]
        if keys:
            _check_keys(src, keys, knots)
    return Derived(src, Expected(cols.truth, cols.score, keys, knots,
                                 replaces=cols.truth in ours))


def task_of(source: Source, label: str) -> str:
    """The task an evaluation of ``source``'s probabilities has where none is named: binary
    with one label (or no label column), multilabel with more (an estimate of a label is the
    same one-vs-rest in a multiclass task)."""
    if label not in source.schema():
        return "binary"
    labels = source.polars().select(pl.col(label).n_unique()).collect().item()
    return "binary" if labels == 1 else "multilabel"


def _check_keys(current: Source, keys: Sequence[str], knots: pl.DataFrame) -> None:
    """Every label (and segment) of the input has a calibration map."""
    found = current.polars().select(*keys).unique().collect()
    lacking = found.join(knots.select(*keys).unique(), on=list(keys), how="anti",
                         nulls_equal=True).sort(keys)
    if lacking.height:
        first = ", ".join(f"{k}={v!r}" for k, v in lacking.row(0, named=True).items())
        raise InputError(f"reference: no labelled row of {first} to learn its calibration map "
                         f"on ({lacking.height} of the input's {' x '.join(keys)} lack one)")


def calibration_map(reference: pl.LazyFrame, method: str, *, score: str, truth: str,
                    keys: Sequence[str], weight: str | None, n_bins: int) -> pl.DataFrame:
    """The calibration map learnt on labelled rows: per value of ``keys`` (a label, segment
    columns), the rows ``low, high, level, slope`` (:data:`KNOTS`) that cover every score."""
    w = pl.col(weight).cast(pl.Float64) if weight is not None else pl.lit(1.0)
    y = pl.col(truth).cast(pl.Float64)
    keys = list(keys)
    bad = reference.select(
        nulls=pl.col(truth).is_null().sum() + pl.col(score).is_null().sum(),
        outside=(~y.is_in([0.0, 1.0])).sum()).collect().row(0, named=True)
    if bad["nulls"] or bad["outside"]:
        raise InputError(f"reference: the calibration map is learnt on labelled rows; "
                         f"{bad['nulls']} null score or truth value(s) and {bad['outside']} "
                         f"truth value(s) outside {{0, 1}}")
    points = (reference.select(*keys, x=pl.col(score).cast(pl.Float64), w=w, wy=w * y)
              .filter(pl.col("w") > 0).group_by(*keys, "x").agg(pl.col("w", "wy").sum())
              .sort(*keys, "x").collect())
    if points.is_empty():
        raise InputError("reference: no labelled row with a positive weight to learn the "
                         "calibration map on")
    fit = _isotonic if method == "isotonic" else _histogram
    parts = [fit(part, n_bins).select(*(pl.lit(part[k][0], points.schema[k]).alias(k)
                                        for k in keys), *KNOTS)
             for part in (points.partition_by(keys, maintain_order=True) if keys
                          else [points])]
    return pl.concat(parts)


def _isotonic(points: pl.DataFrame, n_bins: int) -> pl.DataFrame:
    """The weighted isotonic fit at each distinct score, joined linearly, flat beyond."""
    from scipy.optimize import isotonic_regression

    x = points["x"].to_numpy()
    fitted = isotonic_regression((points["wy"] / points["w"]).to_numpy(),
                                 weights=points["w"].to_numpy(), increasing=True).x
    level = pl.Series(fitted)
    inner = pl.DataFrame({"low": x[:-1], "high": x[1:], "level": fitted[:-1],
                          "slope": (level.slice(1) - level.slice(0, len(x) - 1))
                          / (pl.Series(x[1:]) - pl.Series(x[:-1]))})
    ends = pl.DataFrame({"low": [float("-inf"), x[-1]], "high": [x[0], float("inf")],
                         "level": [fitted[0], fitted[-1]], "slope": [0.0, 0.0]})
    knots = pl.concat([ends.head(1), inner, ends.tail(1)])
    # a flat stretch of the fit is one knot (a fit has few levels, a reference many scores)
    flat = pl.col("slope") == 0
    joined = flat & flat.shift(1) & (pl.col("level") == pl.col("level").shift(1))
    return knots.group_by((~joined.fill_null(False)).cum_sum().alias("_stretch"),
                          maintain_order=True).agg(
        pl.col("low").first(), pl.col("high").last(), pl.col("level").first(),
        pl.col("slope").first()).drop("_stretch")


def _histogram(points: pl.DataFrame, n_bins: int) -> pl.DataFrame:
    """The positive rate in each of ``n_bins`` bins of equal weight (ties keep a score in one
    bin, so there may be fewer)."""
    share = points["w"].cum_sum() / points["w"].sum()
    binned = points.with_columns(bin=(share * n_bins - 1e-12).floor().clip(0, n_bins - 1)
                                 .cast(pl.Int64)).group_by("bin", maintain_order=True).agg(
        low=pl.col("x").first(), level=pl.col("wy").sum() / pl.col("w").sum())
    lows = binned["low"].to_list()
    return pl.DataFrame({"low": [float("-inf"), *lows[1:]], "high": [*lows[1:], float("inf")],
                         "level": binned["level"], "slope": 0.0})


@dataclass(frozen=True)
class Expected:
    """The rows with ``truth`` the probability that each is true: its ``score``, or the score
    through ``knots`` (:func:`calibration_map`, per value of ``keys``), a derivation of an
    input."""

    truth: str
    score: str
    keys: tuple[str, ...]
    knots: pl.DataFrame | None
    replaces: bool = True  # the input has a truth column (else it gains one)

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        score = pl.col(self.score).cast(pl.Float64)
        if self.knots is None:
            return frame.with_columns(score.alias(self.truth))
        # each row's knot: the last whose low is at or below its score, of its keys
        knots = self.knots.lazy().rename({k: f"_knot_{k}" for k in KNOTS}).sort("_knot_low")
        found = frame.with_columns(_score=score).sort("_score").join_asof(
            knots, left_on="_score", right_on="_knot_low", by=list(self.keys) or None,
            strategy="backward", check_sortedness=False)  # both sorted just above
        low, level, slope = (pl.col(f"_knot_{k}") for k in ("low", "level", "slope"))
        # a flat knot is its level (the ends' low is -inf: no line through it)
        line = pl.when(slope == 0).then(level).otherwise(level + slope * (pl.col("_score") - low))
        return found.with_columns(line.clip(0.0, 1.0).alias(self.truth)).drop(
            "_score", *(f"_knot_{k}" for k in KNOTS))

    @property
    def sql(self) -> Callable[[exp.Expression], exp.Query] | None:
        """The rows' query in DuckDB's SQL where the scores are the probabilities; with a
        calibration map, polars derives the rows and DuckDB reads them (the map as a VALUES
        list of thousands of knots made DuckDB's checks of the rows 50x slower)."""
        return self._scores if self.knots is None else None

    def _scores(self, table: exp.Expression) -> exp.Query:
        from sqlglot import exp

        score = exp.cast(exp.column(exp.to_identifier(self.score, quoted=True)), "DOUBLE")
        named = exp.alias_(score, self.truth, quoted=True)
        star = exp.Star(**{"replace": [named]}) if self.replaces else exp.Star()
        return exp.select(star, *([] if self.replaces else [named])).from_(table.copy())
