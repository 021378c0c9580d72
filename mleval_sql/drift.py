"""Has what the model sees or says moved? The distribution of each compared column in each
segment (and time window) against a reference, before the truth is known.

Both sides' rows are tagged into one long table, ``drift_rows`` (``segment, compared, label,
current, value`` or ``category``, ``weight``), and the drift steps of the registry run on it
(``queries/drift_*.sql`` and their polars plans): a numeric column's values, merged by value,
are read once in order per (segment, column, label), which gives each value's bin (of the
reference's quantiles, or of given ``edges``) and, from running sums of each side's weight,
the exact statistics (Kolmogorov-Smirnov's D, the Wasserstein-1 distance) in parts per bin; a
categorical column's values are its bins. The bins give PSI, the Jensen-Shannon distance, total
variation, the L-infinity distance and the chi-square test. The p-values, a function of a
statistic and the sizes, are scipy's.

A reference is another source (each segment compared with the reference's rows of the same
segment where it has the segment's columns, with all of it where it does not), the rows of the
input where columns hold values (``{"model": "a"}``: every other model's rows against model
a's, segment by segment and window by window), ``"previous"``: each window against the
window before it, or a fixed period of the input's time column (``{"period": "2026-10"}``, a
:class:`~mleval_sql.windows.Period`: each segment, and each window, against the period's rows
of the same segment; without windows, the rows outside the period against those in it).

>>> import mleval_sql as me
>>> rows = me.drift("fixtures/lake", {"model": "a"}, by="region")
>>> rows.select("model", "region", "label", "statistic").row(0)
('b', 'asia', 'bird', 'ks')
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from mleval_sql import windows
from mleval_sql.api import Derivation, SourceOptions, derived
from mleval_sql.engines import ENGINES, choose_engine, local_engines
from mleval_sql.request import DRIFT_STATISTICS as STATISTICS
from mleval_sql.request import Request, unpack_segment
from mleval_sql.schema import InputError
from mleval_sql.sources import Derived, Source, as_source

if TYPE_CHECKING:
    from sqlglot import exp
    from typing_extensions import Unpack

#: The statistics of a numeric column's values in order, not of bins.
EXACT = ("ks", "wasserstein")
#: The statistics computed when none are named, by the compared column's kind.
DEFAULT_STATISTICS = {"numeric": ("ks", "wasserstein", "psi"),
                      "categorical": ("chi2", "psi", "jensen_shannon")}
#: What ``compared`` names besides the table's own columns: the scores per label, the
#: decisions at the threshold per label (``true`` / ``false``), the truth per label.
ROLES = ("score", "decision", "truth")
#: Below this many reference rows a test's p-value is flagged in ``note``.
MIN_REFERENCE_ROWS = 30
#: The largest sample scipy's ``ks_2samp`` computes an exact p-value for (its ``auto``).
EXACT_KS_ROWS = 10_000
_KEYS = ["segment", "compared", "label"]
#: The result's columns after the segment and window columns.
COLUMNS = ("compared", "label", "statistic", "value", "p_value", "p_value_method",
           "reference_rows", "current_rows", "reference_weight", "current_weight",
           "reference_null_share", "current_null_share", "bins", "epsilon", "note")


def drift(
    source: Any,
    reference: Any,
    compared: str | Sequence[str] | None = None,
    *,
    statistics: str | Sequence[str] | None = None,
    bins: int | None = None,
    edges: Sequence[float] | None = None,
    epsilon: float | None = None,
    threshold: float | None = None,
    **options: Unpack[SourceOptions],
) -> pl.DataFrame:
    """How far each ``compared`` column's distribution in ``source`` has moved from
    ``reference``'s, per segment (``by``), window (``window``) and label. One row per
    segment, compared column, label (null for a feature) and statistic: ``value``,
    ``p_value`` (``ks`` and ``chi2``; ``p_value_method`` says how), each side's rows and weight
    of known values and share of null ones, ``bins`` and ``epsilon`` of a binned statistic, and
    a ``note`` where a p-value rests on few reference rows.

    ``compared``: ``score`` (per label, numeric; the default), ``decision`` (``score >=
    threshold`` per label), ``truth`` (per label), or a column with one value per sample (a
    feature; numeric, else categorical). ``statistics``: of :data:`STATISTICS` (default: ks,
    wasserstein and psi for numeric columns, chi2, psi and jensen_shannon for categorical ones;
    ks and wasserstein apply to numeric columns only). ``bins``: the reference's quantile bins
    of a numeric column (default 10), or ``edges``; ``epsilon``: the share an empty bin counts
    as in PSI (default 1e-4). ``reference``: a source, ``{column: value}`` selecting the
    input's reference rows, ``"previous"``: with ``window``, each window against the one
    before it (of its granularity; the first has none), or a period of the input's time
    column, ``{"period": P, "column": ..., "time_zone": ...}``: ``P`` a year ``"2026"``,
    quarter ``"2026-Q4"``, month ``"2026-10"``, ISO week ``"2026-W41"``, day ``"2026-10-05"``
    or hour ``"2026-10-05T08"``, or a half-open range ``["2026-10-01", "2026-10-15"]`` of days
    or wall-clock times; the column and time zone are the window's where ``window`` is given
    (else name the column; UTC). Each segment, and with ``window`` each window (the period's
    own too), is compared with the period's rows of the same segment; without windows, the
    rows outside the period are (rows of no time are in neither, said in a warning). A
    segment the period has no row of gets null statistics and a ``note`` saying so.

    >>> rows = drift("fixtures/lake", {"model": "a"}, statistics="ks")
    >>> rows.filter(pl.col("label") == "bird").select("value", "p_value").row(0)  # doctest: +SKIP
    >>> daily = drift("fixtures/lake", {"period": "2026-11-01"}, window="date:1d")  # doctest: +SKIP
    """
    given = {k: v for k, v in (("compared", compared), ("statistics", statistics),
                               ("bins", bins), ("edges", edges), ("epsilon", epsilon),
                               ("threshold", threshold)) if v is not None}
    request = Request.build("drift", reference=reference, **given, **options)
    return drifted(request, source)


#: ``reference=PREVIOUS``: each window against the window before it.
PREVIOUS = "previous"


@dataclass(frozen=True)
class Following:
    """The rows of each window as the next window's (its ``window_start`` moved to its end):
    the derivation of the reference ``previous``."""

    window: windows.Window
    kind: windows.Kind
    columns: tuple[str, ...]  # the input's

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        start = pl.col(windows.START)
        return self.window.polars(frame, self.kind).with_columns(
            start.dt.offset_by(pl.col(windows.GRANULARITY)).alias(windows.START))

    def sql(self, table: exp.Expression) -> exp.Query:
        from sqlglot import exp

        made = self.window.sql(table, self.kind, end=True)
        return exp.select(
            *(exp.column(exp.to_identifier(c, quoted=True)) for c in self.columns),
            exp.column(windows.GRANULARITY), exp.column(windows.END).as_(windows.START),
        ).from_(exp.alias_(exp.paren(made), "windowed"))


@dataclass(frozen=True)
class Compared:
    """A compared column: its name as asked, the table's column it reads, how (``score`` and
    ``truth``: per label; ``decision``: the score at the threshold, per label; ``argmax``: a
    multiclass sample's top-scored label, the smallest of tied ones, as numpy's argmax;
    ``feature``: one value per sample) and whether it is numeric."""

    name: str
    column: str
    kind: Literal["score", "decision", "truth", "feature", "argmax"]
    numeric: bool

    @property
    def per_sample(self) -> bool:
        """One value per sample: a feature's, or a multiclass sample's top-scored label."""
        return self.kind in ("feature", "argmax")


@dataclass(frozen=True)
class Sides:
    """The two sides of a drift request, as read: the current rows and the reference rows
    (sources), the segment columns of the result, and those the reference shares (the others
    it is compared under whole)."""

    current: Source
    reference: Source
    by: list[str]
    shared: list[str]
    selected: Mapping[str, Any]  # {column: value} selecting the input's reference rows


def drifted(request: Request, source: Any) -> pl.DataFrame:
    """The rows of a ``drift`` request (see :func:`drift`)."""
    inner, underlying, derivation = _underlying(request, source)
    if derivation is not None:
        rows = drifted(inner, underlying)
        if _previous(request):
            # the window after the last is the last one's reference only: no window of the data
            rows = rows.filter(pl.col("current_null_share").is_not_null())
        return derivation.finished(rows)
    request, source = inner, underlying  # a period's: its rows on each side
    # a memory budget: DuckDB's, whose sorts spill (polars sorts each side's values whole)
    name = request.engine or ("duckdb" if request.memory_limit else choose_engine(
        source, connection=request.connection, memory_limit=request.memory_limit,
        threads=request.threads, reproducible=request.reproducible)[0])
    if ENGINES[name].reader is not None or name not in local_engines():
        raise InputError(f"drift runs on the engines that read files and frames "
                         f"({', '.join(e for e in local_engines() if e != 'spark')}), not on "
                         f"engine {name!r}")
    sides = _sides(request, source)
    compared = _compared(request, sides)
    statistics = statistics_of(request, compared)
    weight = request.column_map.weight
    weights = {s: weight if weight in src.schema() else None
               for s, src in (("current", sides.current), ("reference", sides.reference))}
    _check_features(compared, sides, request)
    run = _run_duckdb if name == "duckdb" else _run_polars
    sizes, exact, binned = run(request, sides, compared, weights)
    return _finished(sizes, exact, binned, request, sides, compared, statistics)


def _previous(request: Request) -> bool:
    return isinstance(request.reference, str) and request.reference == PREVIOUS


def _underlying(request: Request, source: Any) -> tuple[Request, Any, Derivation | None]:
    """The request and source a drift request runs as, once its window, outcomes and
    unknown truth are derived (``reference='previous'``: each window's rows as the next
    window's reference), and the derivation (None: ``request`` on ``source`` as they are)."""
    previous = _previous(request)
    if previous and request.window is None:
        raise InputError("reference='previous' compares each window with the one before it: "
                         "name the windows (window=, --window)")
    if isinstance(request.reference, windows.Period):
        return _in_period(request, source, request.reference)
    derivation = derived(request, source)
    if derivation is None:
        return request, source, None
    inner = derivation.request
    if previous:
        assert request.window is not None
        src = as_source(source, storage_options=request.storage_options, as_of=request.as_of)
        schema = src.schema()
        inner = replace(inner, reference=Derived(src, Following(
            request.window, request.window.kind(schema), tuple(schema.names()))))
    return inner, derivation.source, derivation


def _in_period(request: Request, source: Any, period: windows.Period
               ) -> tuple[Request, Any, Derivation | None]:
    """:func:`_underlying` of a period reference: the reference is the input's rows in the
    period (every window's, not windowed: compared whole under each); the current rows are
    every window's, or without windows those with a time outside the period. An
    ``InputError`` says where the period holds no row, or leaves none to compare."""
    src = as_source(source, storage_options=request.storage_options, as_of=request.as_of)
    kind = period.kind(src.schema())
    time = period.local(kind)
    counts = src.polars().select(
        inside=period.polars(kind).sum(), known=time.count(), nulls=time.null_count(),
        low=time.min(), high=time.max()).collect(engine="streaming").row(0, named=True)
    if not counts["inside"]:
        held = (f"its {period.column!r} runs from {counts['low']} to {counts['high']}"
                + (f" in {period.zone}" if kind == "aware" else "")
                if counts["known"] else f"it has no row with a {period.column!r}")
        raise InputError(f"reference: the period {period.said()} holds no row of the input "
                         f"({held}): every statistic would be null")
    reference = Derived(src, windows.PeriodRows(period, kind, inside=True))
    derivation = derived(request, source)
    if derivation is not None:  # the windows: every one, the period's own too
        return replace(derivation.request, reference=reference), derivation.source, derivation
    if counts["inside"] == counts["known"]:
        raise InputError(f"reference: every row of the input is in the period "
                         f"{period.said()}: none is left to compare with it (give windows, "
                         "window=, to compare each with the period)")
    if counts["nulls"]:
        import warnings

        from mleval_sql.errors import DataWarning

        nulls = counts["nulls"]
        warnings.warn(f"reference: {nulls:,} row{'s' if nulls != 1 else ''} with a null "
                      f"{period.column!r} {'are' if nulls != 1 else 'is'} in no period, left "
                      "out of both sides", DataWarning, stacklevel=5)
    current = Derived(src, windows.PeriodRows(period, kind, inside=False))
    return replace(request, reference=reference), current, None


#: The bins of :func:`score_bins`: fine enough to draw an ECDF by, few enough to read back.
SCORE_BINS = 200


def score_bins(request: Request, source: Any, segment: Mapping[str, Any], label: str,
               *, bins: int = SCORE_BINS) -> pl.DataFrame:
    """The distributions of one segment's scores of ``label`` on both sides of a drift
    request, as each side's weight in ``bins`` equal bins over the range of both: ``current``
    (false: the reference), ``bin``, ``low``, ``high``, ``weight``, a row per bin that holds
    any. Read as two small aggregations (the range, then the bins), never row by row.
    ``segment``: the value of each of the request's ``by`` columns, and with a window its
    ``granularity`` and ``window_start`` as the result's rows give them."""
    import warnings

    with warnings.catch_warnings():  # the drift run warned of the same rows already
        warnings.simplefilter("ignore")
        inner, underlying, derivation = _underlying(request, source)
    segment = dict(segment)
    if derivation is not None and derivation.window is not None and \
            getattr(segment.get(windows.START), "tzinfo", None) is not None:
        from zoneinfo import ZoneInfo

        # the derived rows' windows start at wall-clock times of the window's time zone
        local = segment[windows.START].astimezone(ZoneInfo(derivation.window.time_zone))
        segment[windows.START] = local.replace(tzinfo=None)
    sides = _sides(inner, underlying)
    cols = inner.column_map

    def side(source: Source, current: bool) -> pl.LazyFrame:
        frame = source.polars()
        schema = frame.collect_schema()
        if sides.selected:
            chosen = pl.all_horizontal(pl.col(c).eq_missing(pl.lit(v))
                                       for c, v in sides.selected.items())
            frame = frame.filter(~chosen if current else chosen)
        for column in sides.by if current else sides.shared:
            frame = frame.filter(pl.col(column).eq_missing(
                pl.lit(segment[column]).cast(schema[column])))
        if cols.label in schema:
            frame = frame.filter(pl.col(cols.label).cast(pl.String) == label)
        weight = pl.col(cols.weight).cast(pl.Float64) if cols.weight in schema else pl.lit(1.0)
        return frame.select(current=pl.lit(current), value=pl.col(cols.score).cast(pl.Float64),
                            weight=weight).filter(pl.col("value").is_not_null())

    rows = pl.concat([side(sides.reference, False), side(sides.current, True)])
    low, high = rows.select(low=pl.col("value").min(), high=pl.col("value").max()).collect(
        engine="streaming").row(0)
    if low is None:
        return pl.DataFrame(schema={"current": pl.Boolean, "bin": pl.Int64,
                                    "low": pl.Float64, "high": pl.Float64,
                                    "weight": pl.Float64})
    width = (high - low) / bins if high > low else 1.0
    at = ((pl.col("value") - low) / width).floor().cast(pl.Int64).clip(0, bins - 1)
    return rows.group_by("current", at.alias("bin")).agg(pl.col("weight").sum()).collect(
        engine="streaming").with_columns(
            low=low + pl.col("bin") * width, high=low + (pl.col("bin") + 1) * width).select(
                "current", "bin", "low", "high", "weight").sort("current", "bin")


# -- the request's sides and columns ---------------------------------------------------------

def _sides(request: Request, source: Any) -> Sides:
    options = {"storage_options": request.storage_options, "as_of": request.as_of}
    current = as_source(source, **options)
    by = list(request.by)
    if isinstance(request.reference, Mapping):
        selected = dict(request.reference)
        schema = current.schema()
        for column in selected:
            if column not in schema:
                raise InputError(f"reference: the input has no column {column!r} (it selects "
                                 f"the reference rows); it has {sorted(schema.names())}")
        segments = [c for c in selected if c not in by]
        windowed = [c for c in by if c in windows.COLUMNS]  # the windows first, as ever
        rest = [c for c in by if c not in windowed]
        return Sides(current, current, [*windowed, *segments, *rest],
                     [c for c in by if c not in selected], selected)
    reference = as_source(request.reference, **options)
    shared = [c for c in by if c in reference.schema()]
    return Sides(current, reference, by, shared, {})


def _compared(request: Request, sides: Sides) -> list[Compared]:
    return compared_columns(request, {"input": sides.current.schema(),
                                      "reference": sides.reference.schema()})


def compared_columns(request: Request, schemas: Mapping[str, pl.Schema | None]
                     ) -> list[Compared]:
    """The compared columns of ``request`` read from tables of these columns (by side:
    ``input`` and ``reference``; None: not known, as a statement's table may be, where the
    score is read as a number and a feature cannot be read)."""
    cols = request.column_map
    found = []
    for name in request.compared:
        column = {"score": cols.score, "decision": cols.score, "truth": cols.truth}.get(name,
                                                                                        name)
        kind = name if name in ROLES else "feature"
        if kind == "decision" and request.task == "multiclass":
            kind = "argmax"  # a multiclass sample's decision is one label
            if cols.label is None or (schemas["input"] is not None
                                      and cols.label not in schemas["input"]):
                raise InputError(f"drift: a multiclass decision is a sample's top-scored "
                                 f"label; the input has no label column {cols.label!r}")
        types = {}
        for side, schema in schemas.items():
            if schema is None:
                continue
            if column not in schema:
                raise InputError(f"drift: the {side} has no column {column!r} (compared: "
                                 f"{name}); it has {sorted(schema.names())}")
            types[side] = schema[column]
        if not types:
            if kind == "feature":
                raise InputError(f"drift: {column!r} is compared by its type (numeric or "
                                 "categorical): name the table's columns (--schema-from FILE, "
                                 "or a connection)")
            found.append(Compared(name, column, kind, kind == "score"))  # type: ignore[arg-type]
            continue
        numeric = {side: t.is_numeric() for side, t in types.items()}
        if len(set(numeric.values())) > 1:
            raise InputError(f"drift: {column!r} is {types['input']} in the input and "
                             f"{types['reference']} in the reference: compare a column of one "
                             "kind (cast one side)")
        first = next(iter(types.values()))
        if kind == "score" and not first.is_numeric():
            raise InputError(f"drift: the score column {column!r} is {first}, not a number")
        found.append(Compared(name, column, kind,  # type: ignore[arg-type]
                              first.is_numeric() and kind in ("score", "feature")))
    return found


def statistics_of(request: Request, compared: list[Compared]) -> dict[str, tuple[str, ...]]:
    """The statistics of each compared column (by name)."""
    if request.statistics is None:
        return {c.name: DEFAULT_STATISTICS["numeric" if c.numeric else "categorical"]
                for c in compared}
    exact = [s for s in request.statistics if s in EXACT]
    if exact and not any(c.numeric for c in compared):
        raise InputError(f"{exact[0]} compares numeric columns; "
                         f"{', '.join(c.name for c in compared)} "
                         f"{'is' if len(compared) == 1 else 'are'} categorical: use psi, "
                         "jensen_shannon, total_variation, l_infinity or chi2")
    return {c.name: tuple(s for s in request.statistics if c.numeric or s not in EXACT)
            for c in compared}


def _check_features(compared: list[Compared], sides: Sides, request: Request) -> None:
    """A feature has one value per sample (on either side): else an error naming a sample."""
    sample = request.column_map.sample
    features = [c for c in compared if c.kind == "feature"]
    if not features:
        return
    for side, source in (("input", sides.current), ("reference", sides.reference)):
        if sample not in source.schema():
            raise InputError(f"drift: the {side} has no sample column {sample!r}: a feature "
                             "is compared once per sample")
        if sides.selected and side == "reference":
            continue
        varying = source.polars().group_by(sample).agg(
            pl.col(c.column).n_unique().alias(c.column) for c in features
        ).filter(pl.any_horizontal(pl.col(c.column) > 1 for c in features)).head(1).collect()
        if varying.height:
            column = next(c.column for c in features if varying[c.column][0] > 1)
            raise InputError(f"drift: {column!r} varies within sample "
                             f"{varying[sample][0]!r} (in the {side}): a feature has one value "
                             "per sample")


# -- polars ----------------------------------------------------------------------------------

def _run_polars(request: Request, sides: Sides, compared: list[Compared],
                weights: dict[str, str | None]
                ) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame]:
    from mleval_sql.engines import polars as plans
    from mleval_sql.engines.polars.collect import as_text

    rows = _rows_polars(request, sides, compared, weights)
    sizes = plans.drift_sizes(rows)
    bins = []
    if any(c.numeric for c in compared):
        bins.append(plans.drift_histogram(plans.drift_points(rows), sizes,
                                          bins=_bins(request)))
    if not all(c.numeric for c in compared):
        bins.append(plans.drift_categories(rows))
    binned = pl.concat(bins, how="diagonal_relaxed")
    sizes_, bins_ = (as_text(f) for f in pl.collect_all([sizes, binned], engine="streaming"))
    exact, stats = pl.collect_all([plans.drift_ecdf(bins_.lazy()), plans.drift_binned(
        bins_.lazy(), sizes_.lazy(), epsilon=_epsilon(request))])
    return sizes_, exact, stats


def _rows_polars(request: Request, sides: Sides, compared: list[Compared],
                 weights: dict[str, str | None]) -> pl.LazyFrame:
    cols = request.column_map
    threshold = request.params["threshold"]

    def side(source: Source, current: bool) -> pl.LazyFrame:
        frame = source.polars()
        if sides.selected:
            chosen = pl.all_horizontal(pl.col(c).eq_missing(pl.lit(v))
                                       for c, v in sides.selected.items())
            frame = frame.filter(~chosen if current else chosen)
        schema = frame.collect_schema()
        by = sides.by if current else sides.shared
        weight = weights["current" if current else "reference"]
        w = pl.col(weight).cast(pl.Float64) if weight else pl.lit(1.0)
        # text keys as Categorical: the plans group and sort by them, and a Categorical hashes
        # its code, not its text (results give text back)
        label = (pl.col(cols.label).cast(pl.String).cast(pl.Categorical)
                 if cols.label in schema else pl.lit(cols.single_label, pl.Categorical))
        parts = []
        for c in compared:
            tag = {"compared": pl.lit(c.name, pl.Categorical), "current": pl.lit(current)}
            if c.per_sample:
                chosen = pl.col(c.column).min() if c.kind == "feature" else pl.col(
                    cols.label).sort_by([pl.col(c.column), pl.col(cols.label)],
                                        descending=[True, False], nulls_last=True).first()
                per_sample = frame.group_by(*by, cols.sample).agg(
                    chosen.alias("_v"), w.min().alias("weight"))
                value = pl.col("_v")
                given = _given_bins_polars(request.edges if c.numeric else None,
                                           value.cast(pl.Float64))
                parts.append(per_sample.select(
                    *by, **tag, label=pl.lit(None, pl.Categorical),
                    value=value.cast(pl.Float64) if c.numeric else pl.lit(None, pl.Float64),
                    category=pl.lit(None, pl.String) if c.numeric else value.cast(pl.String),
                    weight="weight", **given))
                continue
            score = pl.col(c.column)
            given = _given_bins_polars(request.edges if c.numeric else None,
                                       score.cast(pl.Float64))
            category = {"decision": pl.when(score >= threshold).then(pl.lit("true"))
                        .when(score < threshold).then(pl.lit("false")),
                        "truth": score.cast(pl.String)}.get(c.kind, pl.lit(None, pl.String))
            parts.append(frame.select(
                *by, **tag, label=label,
                value=score.cast(pl.Float64) if c.numeric else pl.lit(None, pl.Float64),
                category=category.cast(pl.String), weight=w, **given))
        return pl.concat(parts, how="vertical_relaxed")

    current, reference = side(sides.current, True), side(sides.reference, False)
    only = [c for c in sides.by if c not in sides.shared]
    if only:  # the reference is compared whole under each of these columns' values
        keys = current.select(*sides.by).unique()
        reference = (reference.join(keys, on=sides.shared, nulls_equal=True) if sides.shared
                     else reference.join(keys, how="cross"))
    by, schema = sides.by, current.collect_schema()
    keys = [pl.col(b).cast(pl.Categorical) if schema[b] == pl.String else pl.col(b) for b in by]
    segment = (keys[0] if len(keys) == 1 else pl.struct(*keys) if keys else pl.lit(0))
    tagged = [segment.alias("segment"), "compared", "label", "current", "value", "category",
              pl.col("bin").cast(pl.Int32), pl.col("given_bins").cast(pl.Int32), "weight"]
    return pl.concat([current.select(tagged), reference.select(tagged)], how="diagonal_relaxed")


def _given_bins_polars(edges: Sequence[float] | None, value: pl.Expr) -> dict[str, pl.Expr]:
    """A value's bin of the ``edges`` given, (-inf, e1] = 0, (e1, e2] = 1, ..., and their
    number of bins (none given: null, the reference's quantile bins)."""
    if edges is None:
        return {"bin": pl.lit(None, pl.Int32), "given_bins": pl.lit(None, pl.Int32)}
    return {"bin": pl.sum_horizontal(*((value > e).cast(pl.Int32) for e in edges)),
            "given_bins": pl.lit(len(edges) + 1, pl.Int32)}


# -- DuckDB ----------------------------------------------------------------------------------

#: What a row of drift_rows costs DuckDB at the most, in bytes, under a memory budget: the
#: merged values and their window hold a group's rows at once, so the groups run in batches of
#: about budget / ROW_BYTES rows (a group larger than that runs alone).
ROW_BYTES = 400


def _run_duckdb(request: Request, sides: Sides, compared: list[Compared],
                weights: dict[str, str | None]
                ) -> tuple[pl.DataFrame, pl.DataFrame | None, pl.DataFrame]:
    from sqlglot import exp

    from mleval_sql import queries
    from mleval_sql.engines import duckdb as engine
    from mleval_sql.engines import memory_bytes

    prefix = f"mleval_drift_{uuid.uuid4().hex[:8]}_"
    names = {r: prefix + r for r in ("current", "reference", "drift_rows", "drift_sizes",
                                     "drift_points", "drift_bins", "batches", "batch_rows")}
    created: list[tuple[str, str]] = []
    numeric = any(c.numeric for c in compared)

    def step(name: str, reads: Mapping[str, str] | None = None,
             **params: object) -> tuple[str, dict[str, object]]:
        sql = queries.rename_relations(queries.load(name), {**names, **(reads or {})})
        return sql, {p: params[p] for p in queries.parameters(sql)}

    with engine.session(request.connection, request.memory_limit, request.threads) as con:
        def create(kind: str, relation: str, sql: str,
                   params: Mapping[str, object] | None = None) -> None:
            con.execute(f"CREATE OR REPLACE TEMP {kind} {queries.identifier(names[relation])} "
                        f"AS {sql}", dict(params or {}))
            if (kind, names[relation]) not in created:
                created.append((kind, names[relation]))

        def fetch(sql: str, params: Mapping[str, object]) -> pl.DataFrame:
            return con.sql(sql, params=dict(params)).pl()

        def binned(rows: str) -> tuple[pl.DataFrame | None, pl.DataFrame]:
            """The exact and binned statistics of the groups of ``rows`` (drift_rows or a
            batch of its groups)."""
            reads = {"drift_rows": names[rows]}
            bins = []
            if numeric:
                create("TABLE", "drift_points", *step("drift_points", reads))
                bins.append(step("drift_histogram", reads, bins=_bins(request)))
            if not all(c.numeric for c in compared):
                bins.append(step("drift_categories", reads))
            create("TABLE", "drift_bins", " UNION ALL ".join(f"({sql})" for sql, _ in bins),
                   {k: v for _, p in bins for k, v in p.items()})
            exact = fetch(*step("drift_ecdf")) if numeric else None
            return exact, fetch(*step("drift_binned", epsilon=_epsilon(request)))

        try:
            for side, source in (("current", sides.current), ("reference", sides.reference)):
                engine.read(source, con).create_view(names[side], replace=True)
                created.append(("VIEW", names[side]))
            views = tuple(exp.to_table(names[s], quoted=True) for s in ("current", "reference"))
            labelled = tuple(request.column_map.label in src.schema()
                             for src in (sides.current, sides.reference))
            create("VIEW", "drift_rows", rows_query(
                request, compared, views, by=sides.by, shared=sides.shared,  # type: ignore[arg-type]
                selected=sides.selected, labelled=labelled,  # type: ignore[arg-type]
                weights=(weights["current"], weights["reference"])).sql("duckdb"))
            create("TABLE", "drift_sizes", *step("drift_sizes"))
            sizes = con.sql(f"SELECT * FROM {queries.identifier(names['drift_sizes'])}").pl()
            batches = _batches(sizes, None if request.memory_limit is None else
                               memory_bytes(request.memory_limit) // ROW_BYTES)
            if batches.get_column("batch").max() in (None, 0):  # one batch: every group
                exact, stats = binned("drift_rows")
                return sizes, exact, stats
            arrow = names["batches"] + "_arrow"
            con.register(arrow, batches.to_arrow())
            create("TABLE", "batches", f"SELECT * FROM {queries.identifier(arrow)}")
            con.unregister(arrow)
            keys = ("segment", "compared", "label")
            on = " AND ".join(f"r.{k} IS NOT DISTINCT FROM b.{k}" for k in keys)
            parts: list[tuple[pl.DataFrame | None, pl.DataFrame]] = []
            for number in range(int(batches["batch"].max()) + 1):
                batch = exp.Literal.number(number).sql("duckdb")  # a view takes no parameter
                rows, groups = (queries.identifier(names[r]) for r in ("drift_rows", "batches"))
                create("VIEW", "batch_rows", f"SELECT r.* FROM {rows} AS r JOIN {groups} AS b "
                       f"ON {on} WHERE b.batch = {batch}")
                parts.append(binned("batch_rows"))
            exact = pl.concat([e for e, _ in parts if e is not None]) if numeric else None
            return sizes, exact, pl.concat([b for _, b in parts])
        finally:
            for kind, name in reversed(created):
                con.execute(f"DROP {kind} IF EXISTS {queries.identifier(name)}")


def _batches(sizes: pl.DataFrame, rows: int | None) -> pl.DataFrame:
    """Each (segment, compared, label) group's batch: groups in turn, a batch closed where the
    next group would take it past ``rows`` rows (None: one batch)."""
    keys = ["segment", "compared", "label"]
    groups = sizes.group_by(keys, maintain_order=True).agg(
        (pl.col("rows") + (pl.col("null_weight") > 0).cast(pl.Int64)).sum().alias("n"))
    if rows is None:
        return groups.select(*keys, batch=pl.lit(0, pl.Int64))
    batch, filled, numbers = 0, 0, []
    for n in groups["n"].to_list():
        if filled and filled + n > rows:
            batch, filled = batch + 1, 0
        filled += n
        numbers.append(batch)
    return groups.select(*keys, batch=pl.Series(numbers, dtype=pl.Int64))


def rows_query(request: Request, compared: list[Compared], tables: tuple[exp.Expression,
               exp.Expression], *, by: Sequence[str], shared: Sequence[str],
               selected: Mapping[str, Any], labelled: tuple[bool, bool],
               weights: tuple[str | None, str | None],
               keys: Sequence[str] | None = None) -> exp.Query:
    """``drift_rows`` as one query over ``tables`` (the current rows', the reference's),
    written by sqlglot: each side's rows per compared column, the reference's joined to the
    current segments' values of the ``by`` columns it does not have (``shared``: those it
    has). ``labelled``, ``weights``: whether each side has a label column, its weight column.
    The segment is ``segment`` (the ``by`` columns packed in a struct, as the DuckDB engine
    reads it), or spread over ``keys`` (a statement's: :func:`mleval_sql.dialects
    .segment_keys`)."""
    from sqlglot import exp

    cols = request.column_map
    threshold = exp.Literal.number(request.params["threshold"])

    def col(name: str) -> exp.Column:
        return exp.column(exp.to_identifier(name, quoted=True))

    def side(current: bool) -> list[exp.Select]:
        at = 0 if current else 1
        table, mine = tables[at], by if current else shared
        weight = weights[at]
        w = exp.cast(col(weight) if weight else exp.Literal.number(1), "DOUBLE")
        label = (exp.cast(col(cols.label), "VARCHAR") if labelled[at]
                 else exp.Literal.string(cols.single_label))
        where = None
        if selected:
            chosen = exp.and_(*(exp.NullSafeEQ(this=col(c), expression=exp.convert(v))
                                for c, v in selected.items()))
            where = exp.not_(chosen) if current else chosen
        selects = []
        for c in compared:
            tag = [exp.Literal.string(c.name).as_("compared"),
                   exp.Boolean(this=current).as_("current")]
            null_value = exp.cast(exp.Null(), "DOUBLE").as_("value")
            null_category = exp.cast(exp.Null(), "VARCHAR").as_("category")
            if c.per_sample:
                value = exp.Min(this=col(c.column)) if c.kind == "feature" else exp.func(
                    "arg_min", col(cols.label), exp.Tuple(expressions=[
                        exp.Neg(this=col(c.column)), col(cols.label)]))
                select = exp.select(
                    *(col(b) for b in mine), *tag, exp.cast(exp.Null(), "VARCHAR").as_("label"),
                    exp.cast(value, "DOUBLE").as_("value") if c.numeric else null_value,
                    null_category if c.numeric else exp.cast(value, "VARCHAR").as_("category"),
                    *given(exp.cast(value, "DOUBLE"), c.numeric),
                    exp.Min(this=w).as_("weight"),
                ).from_(table.copy()).group_by(*(col(b) for b in mine), col(cols.sample))
            else:
                score = col(c.column)
                category = {
                    "decision": exp.Case().when(exp.GTE(this=score, expression=threshold),
                                                exp.Literal.string("true"))
                    .when(exp.LT(this=score.copy(), expression=threshold.copy()),
                          exp.Literal.string("false")),
                    "truth": exp.cast(score, "VARCHAR")}.get(c.kind)
                select = exp.select(
                    *(col(b) for b in mine), *tag, label.copy().as_("label"),
                    exp.cast(score, "DOUBLE").as_("value") if c.numeric else null_value,
                    null_category if category is None else category.as_("category"),
                    *given(exp.cast(score, "DOUBLE"), c.numeric),
                    w.copy().as_("weight"),
                ).from_(table.copy())
            selects.append(select.where(where.copy()) if where is not None else select)
        return selects

    def given(value: exp.Expression, numeric: bool) -> list[exp.Expression]:
        """A numeric value's bin of the edges given, (-inf, e1] = 0, (e1, e2] = 1, ..., and
        their number of bins (none given: NULL, the reference's quantile bins)."""
        if not numeric or request.edges is None:
            return [exp.cast(exp.Null(), "INT").as_("bin"),
                    exp.cast(exp.Null(), "INT").as_("given_bins")]
        above: exp.Expression = exp.Literal.number(0)
        for edge in request.edges:
            above = exp.Add(this=above, expression=exp.Case().when(
                exp.GT(this=value.copy(), expression=exp.Literal.number(edge)),
                exp.Literal.number(1)).else_(exp.Literal.number(0)))
        return [exp.cast(above, "INT").as_("bin"),
                exp.cast(exp.Literal.number(len(request.edges) + 1), "INT").as_("given_bins")]

    def union(selects: list[exp.Select], alias: str) -> exp.Select:
        out: exp.Query = selects[0]
        for s in selects[1:]:
            out = exp.union(out, s, distinct=False)
        return exp.select("*").from_(exp.alias_(exp.paren(out), alias))

    current, reference = union(side(True), "c"), union(side(False), "r")
    if [c for c in by if c not in shared]:  # the reference whole under these columns' values
        values = exp.select(*(col(b) for b in by)).distinct().from_(
            exp.alias_(exp.paren(current.copy()), "k"))
        on = exp.and_(*(exp.NullSafeEQ(this=exp.column(b, "r", quoted=True),
                                       expression=exp.column(b, "k", quoted=True))
                        for b in shared)) if shared else None
        reference = exp.select(
            *(exp.column(b, "k", quoted=True) for b in by),
            *(exp.column(c, "r") for c in ("compared", "label", "current", "value",
                                           "category", "bin", "given_bins", "weight")),
        ).from_(exp.alias_(exp.paren(reference), "r")).join(
            exp.alias_(exp.paren(values), "k"), on=on, join_type="inner" if on else "cross")
    if keys is not None:
        segment = ([exp.alias_(col(b), k) for b, k in zip(by, keys, strict=True)] if by
                   else [exp.alias_(exp.Literal.number(0), "segment")])
    else:
        packed = (col(by[0]) if len(by) == 1 else exp.func(
            "struct_pack", *(exp.PropertyEQ(this=exp.to_identifier(b, quoted=True),
                                            expression=col(b)) for b in by)) if by
            else exp.Literal.number(0))
        segment = [packed.as_("segment")]
    tagged = [exp.select(*(e.copy() for e in segment), "compared", "label", "current", "value",
                         "category", "bin", "given_bins", "weight").from_(
                             exp.alias_(exp.paren(s), "t"))
              for s in (current, reference)]
    return exp.union(tagged[0], tagged[1], distinct=False)


# -- the result ------------------------------------------------------------------------------

def _bins(request: Request) -> int:
    return request.params["bins"] or 10


def _epsilon(request: Request) -> float:
    return request.epsilon


def _finished(sizes: pl.DataFrame, exact: pl.DataFrame | None, binned: pl.DataFrame,
              request: Request, sides: Sides, compared: list[Compared],
              statistics: dict[str, tuple[str, ...]]) -> pl.DataFrame:
    _check_values(sizes, compared)
    side = {}
    for name, current in (("reference", False), ("current", True)):
        side[name] = sizes.filter(pl.col("current") == current).select(
            *_KEYS,
            pl.col("rows").alias(f"{name}_rows"),
            pl.col("weight").alias(f"{name}_weight"),
            (pl.col("weight") ** 2 / pl.col("weight_squares")).alias(f"{name}_size"),
            (pl.col("rows").cast(pl.Float64) == pl.col("weight")).and_(
                pl.col("weight") == pl.col("weight_squares")).alias(f"{name}_counted"),
            (pl.col("null_weight") / (pl.col("weight") + pl.col("null_weight")))
            .alias(f"{name}_null_share"))
    groups = side["reference"].join(side["current"], on=_KEYS, how="full", coalesce=True,
                                    nulls_equal=True)
    values = groups.join(binned, on=_KEYS, how="left", nulls_equal=True)
    if exact is not None:
        values = values.join(exact, on=_KEYS, how="left", nulls_equal=True)
    out = []
    for c in compared:
        mine = values.filter(pl.col("compared") == c.name)
        for statistic in statistics[c.name]:
            out.append(_statistic_rows(mine, statistic, request))
    if not out:
        raise InputError("drift: no statistic applies to the compared columns")
    table = pl.concat(out, how="diagonal_relaxed")
    order = {c.name: i for i, c in enumerate(compared)}
    table = table.with_columns(
        _order_c=pl.col("compared").replace_strict(order, return_dtype=pl.Int32),
        _order_s=pl.col("statistic").replace_strict(
            {s: i for i, s in enumerate(request.statistics or STATISTICS)},
            return_dtype=pl.Int32))
    table = unpack_segment(table, sides.by).sort(
        *sides.by, "_order_c", "label", "_order_s", nulls_last=True).drop("_order_c", "_order_s")
    return table.select(*sides.by, *COLUMNS)


def _statistic_rows(values: pl.DataFrame, statistic: str, request: Request) -> pl.DataFrame:
    column = "chi2" if statistic == "chi2" else statistic
    rows = values.with_columns(
        statistic=pl.lit(statistic),
        value=pl.col(column) if column in values.columns else pl.lit(None, pl.Float64),
        bins=None if statistic in EXACT else pl.col("bins"),
        epsilon=pl.lit(_epsilon(request) if statistic == "psi" else None, pl.Float64))
    p_values, methods, notes = [], [], []
    for row in rows.iter_rows(named=True):
        p, method, note = _p_value(statistic, row)
        empty = [side for side in ("reference", "current") if not row[f"{side}_rows"]]
        if empty:  # said, not left to a null to tell: a new segment, a period without it
            note = (f"no {' and no '.join(empty)} value (no row of the segment, or only "
                    "nulls): the statistic is null")
        p_values.append(p)
        methods.append(method)
        notes.append(note)
    return rows.with_columns(
        p_value=pl.Series(p_values, dtype=pl.Float64),
        p_value_method=pl.Series(methods, dtype=pl.String),
        note=pl.Series(notes, dtype=pl.String),
        bins=pl.col("bins").cast(pl.Int64) if "bins" in rows.columns else None,
        reference_rows=pl.col("reference_rows").fill_null(0),
        current_rows=pl.col("current_rows").fill_null(0),
        reference_weight=pl.col("reference_weight").fill_null(0.0),
        current_weight=pl.col("current_weight").fill_null(0.0),
    )


def _p_value(statistic: str, row: dict[str, Any]) -> tuple[float | None, str | None,
                                                           str | None]:
    """The p-value of a test's row, how it was computed, and a note where it rests on few
    reference rows."""
    if statistic not in ("ks", "chi2") or row["value"] is None:
        return None, None, None
    from scipy import stats

    note = None
    if (row["reference_rows"] or 0) < MIN_REFERENCE_ROWS:
        note = (f"{row['reference_rows']} reference rows (fewer than {MIN_REFERENCE_ROWS}): "
                "the p-value is unreliable")
    if statistic == "chi2":
        dof = int(row["chi2_dof"])
        method = "yates" if dof == 1 else "pearson"
        return (1.0 if dof == 0 else float(stats.chi2.sf(row["value"], dof))), method, note
    d = float(row["value"])
    n1, n2 = row["reference_size"], row["current_size"]
    if row["reference_counted"] and row["current_counted"] and \
            max(n1, n2) <= EXACT_KS_ROWS:
        exact = _exact_ks(int(n1), int(n2), d)
        if exact is not None:
            return exact, "exact", note
    m, n = sorted([float(n1), float(n2)], reverse=True)
    en = round(m * n / (m + n))  # half to even, as numpy's round in ks_2samp
    if en < 1:  # one row against one: no distribution to test against (scipy's NaN)
        return None, "asymp", note
    return float(min(max(stats.kstwo.sf(d, en), 0.0), 1.0)), "asymp", note


def _exact_ks(n1: int, n2: int, d: float) -> float | None:
    """scipy's exact two-sided p-value of D for samples of n1 and n2 rows (as its
    ``ks_2samp(method="auto")`` gives up to :data:`EXACT_KS_ROWS` rows), or None where it
    cannot compute one."""
    try:
        from scipy.stats._stats_py import _attempt_exact_2kssamp
    except ImportError:  # a scipy without it: the asymptotic p-value
        return None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        success, _, p = _attempt_exact_2kssamp(n1, n2, math.gcd(n1, n2), d, "two-sided")
    return float(min(max(p, 0.0), 1.0)) if success else None


def _check_values(sizes: pl.DataFrame, compared: list[Compared]) -> None:
    """NaN or infinite values, and a compared column with no known value on a side, are
    errors naming the column."""
    for c in compared:
        for side, current in (("reference", False), ("input", True)):
            mine = sizes.filter((pl.col("compared") == c.name) & (pl.col("current") == current))
            bad = int(mine["nonfinite"].sum())
            if bad:
                raise InputError(f"drift: {bad} NaN or infinite values in {c.column!r} "
                                 f"(compared: {c.name}) in the {side}")
            if int(mine["rows"].sum()) == 0:
                raise InputError(f"drift: {c.column!r} (compared: {c.name}) has no value in "
                                 f"the {side} (every row is null, or there are no rows)")

