"""Where is the model weak? The slices of the data (conjunctions of up to ``max_level``
predicates ``column = value`` over the ``over`` columns) whose metric is worst.

A row-wise error (``error_rate`` at the threshold, ``log_loss``, ``brier_score``; regression:
``mse``, ``mae``) ranks slices by SliceLine's score (Sagadeeva and Boehm, SIGMOD 2021),
``alpha * (slice error / mean error - 1) - (1 - alpha) * (n / size - 1)``, level by level with
its pruning (a slice's children are at most as large and as wrong as it): the same slices and
scores as the ``sliceline`` package for the same ``alpha``, ``top`` (its ``k``), ``max_level``
(``max_l``) and ``min_support`` (``min_sup``), ties included. Any other metric ranks the slices
of at least ``min_support`` samples by the metric itself, worst first, each with its value on
the rest of the data.

Each level is one grouped pass over the rows: every candidate of the level is a group of one
aggregate (row-wise errors) or a segment of one request (other metrics); candidates of level
l + 1 come only from slices of level l that survive. A binary ROC AUC is first bounded for
every candidate from a histogram of its scores in 1,024 bins; only the slices whose bounds
can reach the top are evaluated exactly, and the rest of the data's AUC follows from sums
over the slice, so the whole search costs a few ``evaluate`` calls.

>>> import mleval_sql as me
>>> me.slices("fixtures/lake", "roc_auc", over=["region", "date"], by="model",
...           average="macro", top=1).columns[:4]
['model', 'region', 'date', 'level']
"""

from __future__ import annotations

import math
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from functools import reduce
from itertools import combinations
from typing import TYPE_CHECKING, Any

import polars as pl

from mleval_sql import uncertainty
from mleval_sql.api import ComparisonOptions, derived, run
from mleval_sql.comparison import SIDE, against_rest
from mleval_sql.registry import LOWER_IS_BETTER, METRICS, default_averages, scoped
from mleval_sql.request import ESTIMATED_METRICS, Request
from mleval_sql.schema import InputError
from mleval_sql.sources import as_source

if TYPE_CHECKING:
    from sqlglot import exp
    from typing_extensions import Unpack

#: At most this many candidate slices a level (an error says to narrow ``over`` or raise
#: ``min_support`` beyond it, before any work on the level).
MAX_CANDIDATES = 200_000
#: A numeric slice column with more distinct values than this needs ``quantiles=``.
MAX_VALUES = 1_000
_EPS = sys.float_info.epsilon
#: A row's weight and error, under names no slice column takes.
W, E = "__weight", "__error"
#: The columns of the result besides the slice columns.
RESULT = ("level", "size", "value", "rest_value", "score", "error", "max_error")
_score, _truth = pl.col("score"), pl.col("truth")


def _error_rate(threshold: float) -> pl.Expr:
    return ((_score >= threshold) != _truth).cast(pl.Float64)


def _log_loss(threshold: float) -> pl.Expr:
    p = pl.when(_truth).then(_score).otherwise(1.0 - _score).clip(_EPS, 1.0 - _EPS)
    return -p.log()


def _squared(threshold: float) -> pl.Expr:
    return (_score - _truth.cast(pl.Float64)) ** 2


def _absolute(threshold: float) -> pl.Expr:
    return (_score - _truth.cast(pl.Float64)).abs()


#: The row-wise errors SliceLine ranks by: a row's error, and the tasks it is defined for.
ROW_ERRORS: dict[str, tuple[tuple[str, ...], Callable[[float], pl.Expr]]] = {
    "error_rate": (("binary", "multilabel"), _error_rate),
    "log_loss": (("binary", "multilabel"), _log_loss),
    "brier_score": (("binary", "multilabel"), _squared),
    "mse": (("regression",), _squared),
    "mae": (("regression",), _absolute),
}


@dataclass(frozen=True)
class Candidate:
    """A slice: each slice column's value index (1-based among the column's sorted values;
    0: unused), and its statistics (weight, weighted error, largest error)."""

    code: tuple[int, ...]
    size: float
    error: float
    max_error: float

    @property
    def level(self) -> int:
        return sum(1 for c in self.code if c)


@scoped
def slices(
    source: Any,
    metric: str = "error_rate",
    *,
    over: str | Sequence[str],
    max_level: int = 2,
    min_support: int | float = 10,
    top: int = 10,
    alpha: float = 0.6,
    quantiles: int | None = None,
    fdr: float = 0.05,
    **options: Unpack[ComparisonOptions],
) -> pl.DataFrame:
    """The slices of the data where the model is weakest: conjunctions of up to
    ``max_level`` predicates ``column = value`` over the columns ``over`` (numeric ones cut
    into ``quantiles`` quantile bins; nulls are a value) with at least ``min_support``
    samples. By a row-wise error (``error_rate`` at ``threshold``, ``log_loss``,
    ``brier_score``; regression: ``mse``, ``mae``): SliceLine's ``top`` slices by its score
    (``alpha`` weighs the slice's error against its size), the ``sliceline`` package's exactly.
    One row per slice: the slice's value of each ``over`` column (null where it does not use
    it), ``level``, ``size`` (the samples' weight), ``value`` (its mean error), ``rest_value``
    (the rest of the data's), ``score``, ``error`` (the weighted error sum) and ``max_error``.
    By any other metric: the slices ranked by it, worst first, with the rest's value and the
    ``difference``. With ``ci``: each slice tested against the rest of the data (DeLong for a
    ROC AUC, the bootstrap otherwise), and only those significant after Benjamini-Hochberg
    control at ``fdr`` over the slices tested given, with the difference's ``ci_low``,
    ``ci_high``, ``p_value`` and ``q_value``. Every option of :func:`evaluate`
    (``threshold``, ``task``, ``columns``, ``engine``...).

    >>> rows = slices("fixtures/lake", "error_rate", over=["region", "date"], by="model",
    ...               top=2, alpha=0.95)
    >>> rows.select("model", "region", "level", pl.col("score").round(4)).rows()
    [('b', 'eu', 2, 0.0852), ('b', None, 1, 0.0112)]
    """
    request = Request.build("slices", over=[over] if isinstance(over, str) else over,
                            max_level=max_level, min_support=min_support, top=top, alpha=alpha,
                            quantiles=quantiles, fdr=fdr, _source=source, **options)
    return sliced(request, source, metric)


def sliced(request: Request, source: Any, metric: str) -> pl.DataFrame:
    """The ``slices`` request's rows (see the module docstring)."""
    if metric in ESTIMATED_METRICS:
        raise InputError(f"{metric}: estimated metrics are evaluate's (they read each row's "
                         "probability, not its truth); slices takes the realised ones")
    if metric not in ROW_ERRORS and metric not in METRICS:
        raise InputError(f"unknown metric {metric!r} for slices; row-wise errors are "
                         f"{sorted(ROW_ERRORS)}, and any metric of `mleval metrics` ranks "
                         "slices by its value")
    derivation = derived(request, source)
    if derivation is not None:
        return derivation.finished(sliced(derivation.request, derivation.source, metric))
    src = as_source(source, storage_options=request.storage_options, as_of=request.as_of)
    frame = src.polars()
    over, by = list(request.over), list(request.by)
    clash = set(over) & set(by)
    if clash:
        raise InputError(f"column {sorted(clash)[0]!r} is both a slice column (over=) and a "
                         "segment column (by=)")
    task = run(replace(request, action="check", over=(), metrics=None), src).task
    binned, categories = _slice_columns(frame, over, request)
    if metric in ROW_ERRORS:
        tasks, error = ROW_ERRORS[metric]
        if task not in tasks:
            raise InputError(f"{metric} as a row-wise error is for {' and '.join(tasks)} "
                             f"tasks, not {task}")
    # each value as its 1-based place among the column's values, in two bytes (MAX_VALUES)
    coded = binned.with_columns(
        pl.col(name).replace_strict({v: i + 1 for i, v in enumerate(values) if v is not None},
                                    return_dtype=pl.UInt16).fill_null(1).alias(f"__{name}")
        for name, values in zip(over, categories, strict=True))
    inner = replace(request, task=task, by=())
    parts = []
    segments = binned.select(by).unique().sort(by, nulls_last=False).collect() if by else \
        pl.DataFrame([{}])
    for key in segments.iter_rows(named=True):  # slices within each segment
        rows = coded.filter(*(pl.col(c).eq_missing(v) for c, v in key.items())) if by \
            else coded
        if metric in ROW_ERRORS:
            found, codes = _sliceline(
                _rows(rows, inner, error(request.params["threshold"])), over, categories,
                inner, binned.select(over).collect_schema())
        else:
            found, codes = _ranked(rows, over, categories, replace(inner, metrics=(metric,)))
        if request.params["ci"] is not None:
            found = _significant(found.with_columns(slice=pl.Series([_key(c) for c in codes],
                                                                    dtype=pl.String)),
                                 _tested(rows, over, codes, inner, metric),
                                 request).drop("slice")
        parts.append(found.select(*(pl.lit(v, dtype=segments.schema[c]).alias(c)
                                    for c, v in key.items()), pl.all()))
    return pl.concat(parts, how="vertical_relaxed")


#: The registry's metric that tests a row-wise error's slices, and the sign that turns its
#: difference into the error's.
_TESTED_AS = {"error_rate": ("accuracy", -1.0)}


def _tested(coded: pl.LazyFrame, over: list[str], codes: list[tuple[int, ...]],
            request: Request, metric: str) -> pl.DataFrame:
    """Each slice of ``codes`` against the rest of the data (:func:`comparison.against_rest`:
    DeLong's test for a ROC AUC, the bootstrap's otherwise): ``slice`` (the code), the
    difference's ``ci_low``, ``ci_high``, ``ci_method`` and ``p_value``."""
    schema = {"slice": pl.String, "ci_low": pl.Float64, "ci_high": pl.Float64,
              "ci_method": pl.String, "p_value": pl.Float64}
    if not codes:
        return pl.DataFrame(schema=schema)
    keys = [f"__{name}" for name in over]
    tested, sign = _TESTED_AS.get(metric, (metric, 1.0))
    sides = pl.concat([coded.with_columns(
        __slice=pl.lit(_key(code)),
        **{SIDE: pl.when(pl.all_horizontal(pl.col(k) == v for k, v in zip(keys, code,
                                                                         strict=True) if v))
           .then(pl.lit("segment")).otherwise(pl.lit("rest"))}) for code in codes])
    rows = against_rest(replace(request, metrics=(tested,), action="compare"), sides,
                        ["__slice"])
    picked = _picked(rows, request)
    low, high = (("ci_high", "ci_low") if sign < 0 else ("ci_low", "ci_high"))
    return picked.select(slice="__slice", ci_low=pl.col(low) * sign,
                         ci_high=pl.col(high) * sign, ci_method="ci_method",
                         p_value="p_value").cast(schema)


def _significant(found: pl.DataFrame, tested: pl.DataFrame, request: Request) -> pl.DataFrame:
    """The slices whose difference from the rest is significant: Benjamini-Hochberg's
    adjusted p-value (``q_value``, over every slice tested) at most ``fdr``."""
    joined = found.join(tested, on="slice", how="left", maintain_order="left")
    tests = joined["p_value"].is_not_null()
    q = pl.Series("q_value", [None] * joined.height, dtype=pl.Float64)
    if tests.any():
        q = q.scatter(tests.arg_true(), uncertainty.adjusted(joined["p_value"].filter(tests)))
    return joined.with_columns(q).filter(pl.col("q_value") <= request.fdr)


def _picked(rows: pl.DataFrame, request: Request) -> pl.DataFrame:
    """The one row per slice that ranks it: the metric's value per label (binary: its one
    label), else the request's average."""
    average = (request.average or default_averages(request.task or "binary"))[0]
    picked = rows.filter(pl.col("average").is_null() if average == "none"
                         else pl.col("average") == average)
    if average == "none" and picked.select("__slice").n_unique() < picked.height:
        raise InputError(f"{request.metrics[0]} has a value per label here: rank slices by "
                         "one of its averages (average=, --average)")
    return picked


def _key(code: tuple[int, ...]) -> str:
    return ",".join(map(str, code))


def _slice_columns(frame: pl.LazyFrame, over: Sequence[str],
                   request: Request) -> tuple[pl.LazyFrame, list[list[Any]]]:
    """``frame`` with numeric slice columns cut into quantile bins where asked, and each slice
    column's values sorted (nulls are a value, first); an error names a column that cannot
    be one (a role's column, too many values)."""
    schema = frame.collect_schema()
    columns = request.column_map
    roles = {c for c in (*columns.required().values(), columns.weight) if c}
    for name in over:
        if name not in schema:
            raise InputError(f"slice column {name!r} is not in the input; it has "
                             f"{sorted(schema.names())}")
        if name in roles:
            raise InputError(f"slice column {name!r} is a column the metrics read (sample, "
                             "label, score, truth or weight): slice by other columns")
        if name in (*RESULT, W, E):
            raise InputError(f"slice column {name!r} clashes with the result column of the "
                             "same name; rename it in the input and slice by that")
    if len(set(over)) < len(over):
        raise InputError(f"slice columns repeat: {list(over)}")
    cuts = []
    for name in over:
        if schema[name].is_numeric() and request.quantiles is not None:
            edges = frame.select(pl.col(name).quantile(q / request.quantiles, "linear")
                                 .alias(str(q)) for q in range(1, request.quantiles)
                                 ).collect().row(0)
            cuts.append(pl.col(name).cut(sorted(set(edges)), left_closed=True).cast(pl.String)
                        .alias(name))
    frame = frame.with_columns(cuts) if cuts else frame
    counts = frame.select(pl.col(name).n_unique() for name in over).collect().row(0)
    for name, count in zip(over, counts, strict=True):
        if count > MAX_VALUES:
            hint = ("; cut it into quantiles with quantiles=N (--quantiles N)"
                    if schema[name].is_numeric() else "; slice by a coarser column")
            raise InputError(f"slice column {name!r} has {count} values, more than "
                             f"{MAX_VALUES}{hint}")
    values = [frame.select(pl.col(name).unique().sort(nulls_last=False)).collect()
              .to_series().to_list() for name in over]
    return frame, values


def _rows(frame: pl.LazyFrame, request: Request, error: pl.Expr) -> pl.LazyFrame:
    """The slice columns' codes, each row's weight and its error (``W``, ``E``), from the
    canonical columns (truth as a boolean, or the target for regression)."""
    schema = frame.collect_schema()
    columns = request.column_map.for_schema(schema)
    weight = pl.col(columns.weight).cast(pl.Float64) if columns.weight in schema else pl.lit(1.0)
    truth = pl.col(columns.truth).cast(pl.Float64 if request.task == "regression"
                                       else pl.Boolean)
    canonical = frame.with_columns(score=pl.col(columns.score).cast(pl.Float64), truth=truth)
    return canonical.select(*(f"__{name}" for name in request.over), weight.alias(W),
                            error.alias(E))


def _sliceline(rows: pl.LazyFrame, over: list[str], categories: list[list[Any]],
               request: Request, types: pl.Schema) -> tuple[pl.DataFrame,
                                                            list[tuple[int, ...]]]:
    """SliceLine's top slices of ``rows`` (codes, ``W``, ``E``), level by level (see the
    module), and their codes."""
    rows = rows.collect().lazy()  # every level reads these; kept once
    totals = rows.select(n=pl.col(W).sum(), error=(pl.col(W) * pl.col(E)).sum()).collect()
    n, total_error = totals.row(0)
    if not n:
        raise InputError("the input has no weight: no slice can be scored")
    average = total_error / n
    min_sup = (int(request.min_support * rows.select(pl.len()).collect().item())
               if isinstance(request.min_support, float) else request.min_support)
    alpha, k = request.alpha, request.top
    domains = [len(c) for c in categories]
    encoded = sum(domains)
    keys = [f"__{name}" for name in over]

    def score(size: float, error: float) -> float:
        if size <= 0:
            return -math.inf
        value = alpha * ((error / size) / average - 1) - (1 - alpha) * (n / size - 1)
        return -math.inf if math.isnan(value) else value

    def bound(c: Candidate) -> float:
        # the sliceline package's upper bound, its penalty on the encoded columns' count
        best = -math.inf
        options = [min_sup, max(c.error / c.max_error, min_sup) if c.max_error > 0 else min_sup,
                   c.size]
        for p in options:
            if p <= 0:
                continue
            best = max(best, (alpha * (min(p * c.max_error, c.error) / average - p)
                              - (1 - alpha) * (encoded - p)) / p)
        return best

    level = 1
    evaluated = _evaluate(rows, keys, _basic(len(over), domains))
    evaluated = [c for c in evaluated if c.size >= min_sup and c.error > 0]
    top = _top(evaluated, [], k, min_sup, score)
    while evaluated and level < min(len(over), request.max_level):
        level += 1
        parents = [c for c in evaluated if c.size >= min_sup and c.error > 0]
        candidates = _pairs(parents, level)
        floor = score(top[-1].size, top[-1].error) if top else -math.inf
        candidates = [c for c in candidates
                      if c.size >= min_sup and bound(c) > floor and bound(c) > 0]
        if len(candidates) > MAX_CANDIDATES:
            raise InputError(f"level {level} has {len(candidates)} candidate slices, more than "
                             f"{MAX_CANDIDATES}: raise min_support or slice over fewer columns")
        evaluated = _evaluate(rows, keys, [c.code for c in candidates])
        top = _top(evaluated, top, k, min_sup, score)
    return _table(top, over, categories, score, average, n, types), [c.code for c in top]


def _ranked(coded: pl.LazyFrame, over: list[str], categories: list[list[Any]],
            request: Request) -> tuple[pl.DataFrame, list[tuple[int, ...]]]:
    """The slices of at least ``min_support`` samples ranked by the metric, worst first, level
    by level (a level's candidates: the pairs of surviving slices of the level before), each
    with its value on the rest of the data; and their codes.

    A binary ROC AUC is bounded first (:func:`_scored`): only the slices whose bounds reach
    the top are evaluated exactly, and the rest's values follow from sums."""
    metric = request.metrics[0]  # type: ignore[index]
    sample = request.column_map.sample
    frame = coded
    keys = [f"__{name}" for name in over]
    min_sup = (int(request.min_support * frame.select(pl.col(sample).n_unique()).collect()
                   .item()) if isinstance(request.min_support, float) else request.min_support)
    scored = _scored(coded, keys, request) if metric == "roc_auc" and \
        request.task == "binary" else None
    stats: dict[tuple[int, ...], _Bounds] = {}
    values: dict[tuple[int, ...], float | None] = {}
    dims = [len(c) for c in categories]
    level, codes = 1, _basic(len(over), dims)
    while codes:
        summaries = (_bounded(scored, keys, dims, codes) if scored is not None else
                     {c: _Bounds(s) for c, s in _sizes(coded, keys, sample, codes).items()})
        kept = [code for code in codes if summaries[code].size >= min_sup]
        if len(kept) > MAX_CANDIDATES:
            raise InputError(f"level {level} has {len(kept)} candidate slices, more than "
                             f"{MAX_CANDIDATES}: raise min_support or slice over fewer columns")
        stats.update((code, summaries[code]) for code in kept)
        if scored is None:
            values.update(_values(coded, keys, kept, request))
        if level >= min(len(over), request.max_level):
            break
        level += 1
        codes = [c.code for c in _pairs([Candidate(code, 0, 0, 0) for code in kept], level)]
    if scored is not None:
        values = _values(coded, keys, _contenders(stats, request.top), request)
    found = [(code, s.size, values.get(code)) for code, s in stats.items()]
    worst = sorted((f for f in found if f[2] is not None),
                   key=lambda f: (f[2] if metric not in LOWER_IS_BETTER else -f[2],
                                  _tie_order(f[0])))
    cut = worst[request.top - 1][2] if len(worst) >= request.top else None
    top = [f for f in worst if cut is None or (f[2] <= cut if metric not in LOWER_IS_BETTER
                                              else f[2] >= cut)]
    rest = (_rest(coded, keys, [f[0] for f in top], request) if scored is None else
            {f[0]: _rest_auc(scored, keys, f[0], stats[f[0]], f[2]) for f in top})
    types = frame.select(over).collect_schema()
    return pl.DataFrame({
        **{name: pl.Series(name, [None if f[0][j] == 0 else categories[j][f[0][j] - 1]
                                  for f in top], dtype=types[name])
           for j, name in enumerate(over)},
        "level": pl.Series([sum(1 for v in f[0] if v) for f in top], dtype=pl.Int64),
        "size": pl.Series([f[1] for f in top], dtype=pl.Float64),
        "value": pl.Series([f[2] for f in top], dtype=pl.Float64),
        "rest_value": pl.Series([rest.get(f[0]) for f in top], dtype=pl.Float64),
    }).with_columns(difference=pl.col("value") - pl.col("rest_value")), [f[0] for f in top]


#: Bins of the score, of about equal count, whose counts bound a slice's ROC AUC (a power of
#: two: a coarser binning halves it).
BINS = 1024
#: The most cells of one set of columns' histogram (columns' values x bins x 2 classes);
#: beyond it the bins are merged in pairs until it fits.
MAX_CELLS = 1 << 24


@dataclass(frozen=True)
class _Bounds:
    """A slice's number of samples and, for a binary ROC AUC: bounds of its value and its
    positive and negative weight (see :func:`_scored`)."""

    size: float
    low: float | None = None
    high: float | None = None
    pos: float = 0.0
    neg: float = 0.0


def _scored(coded: pl.LazyFrame, keys: list[str], request: Request) -> pl.DataFrame:
    """Binary rows sorted by score: the slice codes, ``truth``, the weight ``w``, the
    score's ``bin`` (a tie's rows share one; bins rise with the score), and the row's pairs
    with the whole data: ``g``, a positive's weight times the negative weight below it (half
    the tied), and ``h``, a negative's weight times the positive weight above it (half the
    tied).

    A slice's ROC AUC is its positive-negative pairs in order over all its pairs. Pairs in
    two bins are in the bins' order; those within a bin anywhere from none to all: so the
    per-bin counts bound it (:func:`_bounded`). And the rest of the data's pairs are the
    whole data's, less the pairs with a side in the slice (its sums of ``g`` and ``h``), plus
    the slice's own, counted twice there (:func:`_rest_auc`)."""
    schema = coded.collect_schema()
    columns = request.column_map.for_schema(schema)
    weight = pl.col(columns.weight).cast(pl.Float64) if columns.weight in schema else pl.lit(1.0)
    rows = coded.select(*keys, score=pl.col(columns.score).cast(pl.Float64),
                        truth=pl.col(columns.truth).cast(pl.Boolean), w=weight).sort("score")
    first = (pl.col("score") != pl.col("score").shift(1)).fill_null(True)
    last = (pl.col("score") != pl.col("score").shift(-1)).fill_null(True)
    pos = pl.when("truth").then("w").otherwise(0.0)
    neg = pl.when("truth").then(0.0).otherwise("w")

    def tied(side: pl.Expr) -> pl.Expr:  # the side's weight before and through the row's tie
        cum = side.cum_sum()
        return pl.when(first).then(cum - side).forward_fill() + \
            pl.when(last).then(cum).backward_fill()

    return rows.with_columns(
        bin=(pl.when(first).then(pl.int_range(pl.len())).forward_fill() * BINS // pl.len()),
        g=pos * tied(neg) / 2, h=neg * (pos.sum() - tied(pos) / 2),
    ).drop("score").collect()


def _bounded(scored: pl.DataFrame, keys: list[str], dims: list[int],
             codes: list[tuple[int, ...]]) -> dict[tuple[int, ...], _Bounds]:
    """Each slice's :class:`_Bounds`, from one histogram per set of columns the slices use:
    the weight of each (values, bin, class) cell, a dense count (numpy's ``bincount``, four
    times a hash grouping's speed) whose cumulative sums along the bins give every slice's
    ordered pairs at once."""
    import numpy as np

    by_columns: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for code in codes:
        by_columns.setdefault(tuple(j for j, v in enumerate(code) if v), []).append(code)
    truth, weight = scored["truth"].to_numpy().astype(np.int64), scored["w"].to_numpy()
    weighted = bool((weight != 1).any())
    found: dict[tuple[int, ...], _Bounds] = {}
    for used, group in by_columns.items():
        values = [dims[j] + 1 for j in used]  # codes are 1-based
        bins, shift = BINS, 0
        while math.prod(values) * bins * 2 > MAX_CELLS and bins > 1:
            bins, shift = bins // 2, shift + 1
        shape = (*values, bins, 2)
        cell = np.ravel_multi_index(
            [*(scored[keys[j]].to_numpy() for j in used),
             scored["bin"].to_numpy() >> shift, truth], shape)
        mass = np.bincount(cell, weights=weight if weighted else None,
                           minlength=math.prod(shape)).reshape(shape)
        count = (np.bincount(cell, minlength=math.prod(shape)).reshape(shape) if weighted
                 else mass).sum(axis=(-2, -1))
        neg, pos = mass[..., 0], mass[..., 1]
        between = (pos * (np.cumsum(neg, axis=-1) - neg)).sum(axis=-1)
        within = (pos * neg).sum(axis=-1)
        positives, negatives = pos.sum(axis=-1), neg.sum(axis=-1)
        for code in group:
            at = tuple(code[j] for j in used)
            pairs = positives[at] * negatives[at]
            found[code] = _Bounds(float(count[at]),
                                  between[at] / pairs if pairs else None,
                                  (between[at] + within[at]) / pairs if pairs else None,
                                  float(positives[at]), float(negatives[at]))
    return found


def _contenders(stats: dict[tuple[int, ...], _Bounds], top: int) -> list[tuple[int, ...]]:
    """The slices whose ROC AUC can be among the ``top`` least: their lower bound at most the
    ``top``-th least upper bound (a margin for the bounds' rounding)."""
    highs = sorted(s.high for s in stats.values() if s.high is not None)
    cut = highs[top - 1] if len(highs) >= top else math.inf
    return [code for code, s in stats.items() if s.low is not None and s.low <= cut + 1e-9]


def _rest_auc(scored: pl.DataFrame, keys: list[str], code: tuple[int, ...],
              inside: _Bounds, value: float | None) -> float | None:
    """The ROC AUC of the data outside a slice whose own is ``value`` (see :func:`_scored`)."""
    in_slice = pl.all_horizontal(pl.col(k) == v for k, v in zip(keys, code, strict=True) if v)
    pairs, g, h, pos, neg = scored.select(
        pairs=pl.col("g").sum(), g=pl.col("g").filter(in_slice).sum(),
        h=pl.col("h").filter(in_slice).sum(), pos=pl.col("w").filter("truth").sum(),
        neg=pl.col("w").filter(~pl.col("truth")).sum()).row(0)
    rest = (pos - inside.pos) * (neg - inside.neg)
    if value is None or not rest:
        return None
    return (pairs - g - h + value * inside.pos * inside.neg) / rest


def _slice_rows(coded: pl.LazyFrame, keys: list[str], codes: list[tuple[int, ...]],
                *, rest: bool = False) -> pl.LazyFrame:
    """The rows of each slice of ``codes`` (with ``rest``: of the data outside it), once per
    slice, its code as the column ``__slice``: the slices as segments of one request."""
    parts = []
    for code in codes:
        inside = pl.all_horizontal(pl.col(k) == v for k, v in zip(keys, code, strict=True) if v)
        parts.append(coded.filter(~inside if rest else inside).with_columns(
            __slice=pl.lit(_key(code))))
    return pl.concat(parts)


def _sizes(coded: pl.LazyFrame, keys: list[str], sample: str,
           codes: list[tuple[int, ...]]) -> dict[tuple[int, ...], float]:
    """Each slice's number of samples: one grouped pass per set of columns the slices use."""
    sizes: dict[tuple[int, ...], float] = {}
    by_columns: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for code in codes:
        by_columns.setdefault(tuple(j for j, v in enumerate(code) if v), []).append(code)
    plans = [coded.group_by([keys[j] for j in used]).agg(n=pl.col(sample).n_unique())
             for used in by_columns]
    for used, frame in zip(by_columns, pl.collect_all(plans), strict=True):
        counts = {tuple(row[:-1]): row[-1] for row in frame.iter_rows()}
        for code in by_columns[used]:
            sizes[code] = counts.get(tuple(code[j] for j in used), 0)
    return sizes


def _values(coded: pl.LazyFrame, keys: list[str], codes: list[tuple[int, ...]],
            request: Request, *, rest: bool = False) -> dict[tuple[int, ...], float | None]:
    """The metric of each slice (or of the rest of the data), from one request whose
    segments are the slices."""
    if not codes:
        return {}
    inner = replace(request, action="evaluate", by=("__slice",), over=(), params={
        **request.params, "ci": None})
    rows = run(inner, _slice_rows(coded, keys, codes, rest=rest)).table
    assert rows is not None
    return {tuple(int(v) for v in key.split(",")): value
            for key, value in _picked(rows, request).select("__slice", "value").iter_rows()}


def _rest(coded: pl.LazyFrame, keys: list[str], codes: list[tuple[int, ...]],
          request: Request) -> dict[tuple[int, ...], float | None]:
    return _values(coded, keys, codes, request, rest=True)


def _basic(features: int, domains: list[int]) -> list[tuple[int, ...]]:
    """Every one-predicate slice, in the encoded columns' order."""
    return [tuple(v if j == f else 0 for j in range(features))
            for f in range(features) for v in range(1, domains[f] + 1)]


def _evaluate(coded: pl.LazyFrame, keys: list[str],
              codes: list[tuple[int, ...]]) -> list[Candidate]:
    """Each slice's weight, weighted error and largest error: one grouped pass per set of
    columns the slices use, over the rows of those slices only."""
    by_columns: dict[tuple[int, ...], list[tuple[int, ...]]] = {}
    for code in codes:
        by_columns.setdefault(tuple(j for j, v in enumerate(code) if v), []).append(code)
    plans = []
    for used, group in by_columns.items():
        names = [keys[j] for j in used]
        wanted = pl.DataFrame([[code[j] for j in used] for code in group], schema=names,
                              orient="row")
        plans.append(coded.join(wanted.lazy(), on=names, how="semi").group_by(names).agg(
            size=pl.col(W).sum(), error=(pl.col(W) * pl.col(E)).sum(),
            max_error=pl.col(E).max()))
    found: dict[tuple[int, ...], tuple[float, float, float]] = {}
    for used, frame in zip(by_columns, pl.collect_all(plans), strict=True):
        for row in frame.iter_rows():
            code = [0] * len(keys)
            for j, v in zip(used, row[:len(used)], strict=True):
                code[j] = v
            found[tuple(code)] = row[len(used):]
    return [Candidate(code, *found.get(code, (0.0, 0.0, 0.0))) for code in codes]


def _pairs(parents: list[Candidate], level: int) -> list[Candidate]:
    """The next level's candidates, as the sliceline package makes them: pairs of parents
    that share level - 2 predicates, at most one predicate a column, only where every parent
    of the child is among ``parents`` (then the first pair's statistics, as minima, bound the
    child's); in the order of the children's ids (columns in order, values 1-based)."""
    first: dict[tuple[int, ...], Candidate] = {}
    seen: dict[tuple[int, ...], int] = {}
    sets = [{(j, v) for j, v in enumerate(p.code) if v} for p in parents]
    for i, j in combinations(range(len(parents)), 2):
        if len(sets[i] & sets[j]) != level - 2:
            continue
        joined = sets[i] | sets[j]
        if len({f for f, _ in joined}) != len(joined):
            continue  # two predicates on one column
        code = tuple(next((v for f, v in joined if f == c), 0)
                     for c in range(len(parents[i].code)))
        seen[code] = seen.get(code, 0) + 1
        if code not in first:
            a, b = parents[i], parents[j]
            first[code] = Candidate(code, min(a.size, b.size), min(a.error, b.error),
                                    min(a.max_error, b.max_error))
    complete = level * (level - 1) // 2
    return [first[code] for code in sorted(first) if seen[code] == complete]


def _top(found: list[Candidate], top: list[Candidate], k: int, min_sup: float,
         score: Callable[[float, float], float]) -> list[Candidate]:
    """The top slices of ``top`` and ``found``: a score above 0 and at least ``min_sup``
    weight, those whose rank (ties: the lowest) is at most ``k``, by score and then the
    sliceline package's order of ties (lexicographic on the encoded columns)."""
    valid = [c for c in found if c.size >= min_sup and score(c.size, c.error) > 0]
    if not valid:
        return top
    pool = [*top, *valid]
    scores = [score(c.size, c.error) for c in pool]
    kept = [c for c, s in zip(pool, scores, strict=True)
            if 1 + sum(1 for t in scores if t > s) <= k]
    return sorted(kept, key=lambda c: (-score(c.size, c.error), _tie_order(c.code)))


def _tie_order(code: tuple[int, ...]) -> tuple[tuple[int, int], ...]:
    """The encoded slice's place among equal scores, as numpy's lexsort on its 0/1 columns
    puts it: column by column, a slice without the column first, then the later values."""
    return tuple((0, 0) if v == 0 else (1, -v) for v in code)


def _table(top: list[Candidate], over: list[str], categories: list[list[Any]],
           score: Callable[[float, float], float], average: float, n: float,
           types: pl.Schema) -> pl.DataFrame:
    """One row per slice: its value of each slice column (null where it does not use it),
    its level, size (weight), value (mean error), the rest's value, score, error sum and
    largest error."""
    values = {name: pl.Series(name, [None if c.code[j] == 0 else categories[j][c.code[j] - 1]
                                     for c in top], dtype=types[name])
              for j, name in enumerate(over)}
    return pl.DataFrame({
        **values,
        "level": pl.Series([c.level for c in top], dtype=pl.Int64),
        "size": pl.Series([c.size for c in top], dtype=pl.Float64),
        "value": pl.Series([c.error / c.size for c in top], dtype=pl.Float64),
        "rest_value": pl.Series([(average * n - c.error) / (n - c.size) if n > c.size else None
                                 for c in top], dtype=pl.Float64),
        "score": pl.Series([score(c.size, c.error) for c in top], dtype=pl.Float64),
        "error": pl.Series([c.error for c in top], dtype=pl.Float64),
        "max_error": pl.Series([c.max_error for c in top], dtype=pl.Float64),
    })


# -- the search as one statement to paste (mleval sql --slices) -----------------------------

#: Each row-wise error as SQL over the canonical columns (truth: boolean, or the target for
#: regression), parameters as ``$name``.
_ROW_ERROR_SQL = {
    "error_rate": "CASE WHEN (score >= $threshold) <> truth THEN 1.0 ELSE 0.0 END",
    "log_loss": "-LN(LEAST(GREATEST(CASE WHEN truth THEN score ELSE 1 - score END, $eps), "
                "1 - $eps))",
    "brier_score": "(score - CAST(CAST(truth AS INT) AS DOUBLE)) * "
                   "(score - CAST(CAST(truth AS INT) AS DOUBLE))",
    "mse": "(score - truth) * (score - truth)",
    "mae": "ABS(score - truth)",
}
#: SliceLine's score of a slice (its ``size``, weighted ``error``) in its segment (``n``,
#: ``total_error``), and the rest of the segment's mean error.
_SCORE_SQL = ("$alpha * ((error / size) / (total_error / NULLIF(n, 0)) - 1) "
              "- (1 - $alpha) * (n / size - 1)")
_REST_SQL = "CASE WHEN n > size THEN (total_error - error) / (n - size) END"


def statement(request: Request, metric: str = "error_rate", *, table: str = "predictions",
              dialect: str = "duckdb", pretty: bool = True) -> str:
    """SliceLine's search by a row-wise error (``metric``) as one statement to paste: every
    slice of up to ``max_level`` of the ``over`` columns in one ``GROUP BY GROUPING SETS``
    pass over ``table``, scored, and the ``top`` of each segment (``by``) by SliceLine's score,
    in :func:`slices`' columns and order. The level-wise search prunes only slices that cannot
    reach the top (too small, no error, a bound below the top's), so the statement, which
    scores them all, gives the same rows; it costs one grouped pass over every set of up to
    ``max_level`` columns, where :func:`slices` reads only the candidates. Ties in the last
    place are all kept; equal scores come in the order of the columns' values (the database's
    collation for text).

    >>> from mleval_sql.request import Request
    >>> request = Request.build("slices", over=["region", "date"], top=3)
    >>> print(statement(request, table="preds").splitlines()[0][:60])
    -- mleval_sql: the 3 worst slices by error_rate over region,
    """
    import sqlglot  # a statement's rendering only: evaluating needs no sqlglot
    from sqlglot import exp

    from mleval_sql import dialects
    from mleval_sql.engines.sql import canonical

    if metric not in ROW_ERRORS:
        raise InputError(f"a statement ranks slices by a row-wise error ({', '.join(ROW_ERRORS)}"
                         f"), not {metric!r}: `mleval slices` ranks them by any metric")
    if request.quantiles is not None:
        raise InputError("quantiles: a statement slices by the columns' own values; cut a "
                         "numeric column into bins in the table first (or use `mleval slices`)")
    if request.params["ci"] is not None:
        raise InputError("ci: a statement gives no intervals; `mleval slices --ci` does")
    over, by = list(request.over), list(request.by)
    clash = set(over) & set(by)
    if clash:
        raise InputError(f"column {sorted(clash)[0]!r} is both a slice column (over=) and a "
                         "segment column (by=)")
    if len(set(over)) < len(over):
        raise InputError(f"slice columns repeat: {over}")
    columns = request.column_map
    roles = {c for c in (*columns.required().values(), request.columns.get("weight")) if c}
    for name in over:
        if name in roles:
            raise InputError(f"slice column {name!r} is a column the metrics read (sample, "
                             "label, score, truth or weight): slice by other columns")
    regression = ROW_ERRORS[metric][0] == ("regression",)
    columns = replace(columns, label=None)  # each row is scored alone: its label is not read
    source = exp.to_table(table, dialect=dialect)
    for part in source.parts:
        part.set("quoted", True)
    weight = request.columns.get("weight")
    keys = dialects.segment_keys(by) if by else []
    sliced = [f"__slice_{j}" for j in range(len(over))]
    flags = [f"__grouped_{j}" for j in range(len(over))]

    def col(name: str, quoted: bool = True) -> exp.Column:
        return exp.column(exp.to_identifier(name, quoted=quoted))

    def parsed(text: str) -> exp.Expression:
        return dialects.bind(sqlglot.parse_one(text, read="duckdb"),
                             {"threshold": request.params["threshold"], "eps": _EPS,
                              "alpha": request.alpha})

    rows = canonical(source, columns, weight, by, truth="number" if regression else "bool")
    rows = rows.select(*(exp.alias_(col(name), s) for name, s in zip(over, sliced, strict=True)))
    errors = exp.select(*map(col, keys), *map(col, sliced), exp.alias_(col("weight"), "w"),
                        exp.alias_(parsed(_ROW_ERROR_SQL[metric]), "e")).from_("canonical_rows")
    totals = exp.select(*map(col, keys), "SUM(w) AS n", "SUM(w * e) AS total_error",
                        "COUNT(*) AS row_count").from_("row_errors")
    if keys:
        totals = totals.group_by(*map(col, keys))
    sets = [exp.Tuple(expressions=[*map(col, keys), *(col(sliced[j]) for j in used)])
            for level in range(1, min(len(over), request.max_level) + 1)
            for used in combinations(range(len(over)), level)]
    groups = exp.select(
        *map(col, keys), *map(col, sliced),
        *(exp.alias_(exp.Grouping(expressions=[col(s)]), f) for s, f in zip(sliced, flags,
                                                                             strict=True)),
        "SUM(w) AS size", "SUM(w * e) AS error", "MAX(e) AS max_error",
    ).from_("row_errors").group_by(exp.GroupingSets(expressions=sets))
    support = (exp.Floor(this=exp.Mul(this=dialects.literal(float(request.min_support)),
                                      expression=col("row_count", False)))
               if isinstance(request.min_support, float)
               else dialects.literal(request.min_support))
    level = exp.Sub(this=exp.Literal.number(len(over)),
                    expression=exp.paren(reduce(lambda a, b: exp.Add(this=a, expression=b),
                                               [col(f) for f in flags])))
    scored = exp.select(
        "slice_groups.*", exp.alias_(level, "level"), exp.alias_(parsed(_SCORE_SQL), "score"),
        exp.alias_(parsed(_REST_SQL), "rest_value"),
    ).from_("slice_groups")
    scored = (scored.join("segment_totals", using=keys) if keys
              else scored.join("segment_totals", join_type="cross"))
    scored = scored.where(exp.and_(exp.GTE(this=col("size", False), expression=support),
                                   "error > 0"))
    place = exp.Window(this=exp.Anonymous(this="RANK"),
                       partition_by=[col(k) for k in keys] or None,
                       order=exp.Order(expressions=[exp.Ordered(this=col("score", False),
                                                                desc=True)]))
    ranked = exp.select("*", exp.alias_(place, "place")).from_("scored_slices").where(
        "score > 0")
    shown = [*(exp.alias_(col(k), name, quoted=True) for k, name in zip(keys, by, strict=True)),
             *(exp.alias_(exp.Case(ifs=[exp.If(this=exp.EQ(this=col(f),
                                                            expression=exp.Literal.number(0)),
                                               true=col(s))]), name, quoted=True)
               for s, f, name in zip(sliced, flags, over, strict=True)),
             "level", "size", exp.alias_(sqlglot.parse_one("error / size"), "value"),
             "rest_value", "score", "error", "max_error"]
    order = [*(exp.Ordered(this=col(k), nulls_first=True) for k in keys),
             exp.Ordered(this=col("score", False), desc=True)]
    for s, f in zip(sliced, flags, strict=True):  # ties: as the level-wise search orders them
        order += [exp.Ordered(this=col(f), desc=True),
                  exp.Ordered(this=col(s), desc=True, nulls_first=False)]
    final = exp.select(*shown).from_("ranked_slices").where(
        exp.LTE(this=col("place", False), expression=dialects.literal(request.top)))
    final = final.order_by(*order)
    for name, body in (("canonical_rows", rows), ("row_errors", errors),
                       ("segment_totals", totals), ("slice_groups", groups),
                       ("scored_slices", scored), ("ranked_slices", ranked)):
        final = final.with_(name, as_=body)
    support_said = (f"{request.min_support:g} of the rows" if isinstance(request.min_support,
                                                                          float)
                    else f"{request.min_support} samples")
    header = (f"-- mleval_sql: the {request.top} worst slices by {metric} over "
              f"{', '.join(over)} (at most {request.max_level} columns a slice, at least "
              f"{support_said}, alpha {request.alpha:g})"
              f"{' in each ' + ', '.join(by) if by else ''} from {table}.\n"
              f"-- Weights: {'column ' + weight if weight else 'none, every row weighs 1'}.\n")
    return header + dialects.render(final, dialect, pretty=pretty, what="slices") + ";"

