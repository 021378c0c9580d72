"""Truth that arrives late: predictions whose truth is not known yet, and outcomes kept apart
from the predictions.

- ``unlabelled="skip"`` lets the truth be null: those rows are left out of every metric (a
  :class:`~mleval_sql.sources.Derived` input of the rows whose truth is known), and each result
  row says its segment's ``label_coverage``, the share of its rows' weight whose truth is known
  (:func:`coverage`). Without it a null truth is the error it always is.
- ``labels=``: a second source of outcomes, ``sample[, label], truth`` (named as the
  predictions' columns are), joined to the predictions by sample, and by label where the
  outcomes have a label column (:class:`Outcomes`); a prediction without an outcome has a null
  truth, so unlabelled, and the predictions' own truth column, if any, is replaced. One outcome
  per key: a key given twice is an ``InputError``.

Where predictions and outcomes are both local parquet files (a lake), a request joins them once
(:func:`joined`): the files are grouped by the range of their samples (their parquet
statistics), so that a group of prediction files meets only the outcome files whose samples can
join to its rows, and the groups are joined one at a time, each within the memory budget, into
temporary parquet files that every pass of the request reads (removed after it); there a key
given twice is one that a prediction's row is joined to twice (outcomes that join to no
prediction are not read). Elsewhere (frames, tables, object storage) the join is a derivation
that each engine runs: polars joins, and DuckDB too where the outcomes are local parquet files
(its SQL); every outcome's key is checked first.

A nightly job's windows are fingerprinted by the outcome files their samples read:
:func:`outcome_map` maps each outcome file to the windows of its samples, incrementally from the
map its history keeps (only new or changed files, of either side, are read).

>>> rows = pl.DataFrame({"sample": [1, 2, 3], "score": [0.9, 0.2, 0.7],
...                      "truth": [True, None, False]})
>>> coverage(rows.lazy(), "truth", None, []).row(0)
(0.6666666666666666,)
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import polars as pl

from mleval_sql import files as listing
from mleval_sql.errors import InputError
from mleval_sql.schema import enums_as_strings
from mleval_sql.sources import Derived, Parquet, Source, underlying
from mleval_sql.windows import GRANULARITY, LOCAL_START, START, Window

if TYPE_CHECKING:  # SQL is written only where a request reads it: sqlglot loads then
    from sqlglot import exp

#: What a null truth gets: an error, or the row is left out (``unlabelled="skip"``).
UNLABELLED = ("error", "skip")
COVERAGE = "label_coverage"
#: Bytes a row of a group being joined holds at the peak (the join's table, the joined rows),
#: and more for each column: a group's rows are sized by them to the memory budget.
GROUP_ROW_BYTES, COLUMN_BYTES = 100, 16
#: Rows of predictions and outcomes joined at a time without a budget.
GROUP_ROWS = 10_000_000
#: The columns of the map of outcome files to windows (:func:`outcome_map`).
MAP_SCHEMA = {"basis": pl.String, "outcome": pl.String, "prediction": pl.String,
              GRANULARITY: pl.String, LOCAL_START: pl.String}
_FILE, _ROW = "_mleval_file", "_mleval_row"


@dataclass(frozen=True)
class Known:
    """The rows whose ``truth`` is known: a derivation of an input."""

    truth: str

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        return frame.filter(pl.col(self.truth).is_not_null())

    def sql(self, table: exp.Expression) -> exp.Query:
        from sqlglot import exp

        truth = exp.column(exp.to_identifier(self.truth, quoted=True))
        return exp.select(exp.Star()).from_(table.copy()).where(
            exp.Not(this=exp.Is(this=truth, expression=exp.Null())))


@dataclass(frozen=True)
class Outcomes:
    """The predictions with the truth of ``outcomes`` (a source of ``keys`` and ``truth``),
    joined by ``keys``: a derivation of an input, in SQL where the outcomes are local parquet
    files. ``replaces``: the predictions have a truth column, which the outcomes' replaces."""

    outcomes: Source
    keys: tuple[str, ...]
    truth: str
    replaces: bool = True

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        return _joined(frame, self.outcomes.polars().select(*self.keys, self.truth), self)

    @property
    def sql(self) -> Callable[[exp.Expression], exp.Query] | None:
        """DuckDB's join (None: polars joins, and DuckDB reads the joined rows)."""
        return self._sql if _local_files(self.outcomes) is not None else None

    def _sql(self, table: exp.Expression) -> exp.Query:
        from sqlglot import exp

        files = _local_files(self.outcomes)
        assert files is not None

        def name(column: str) -> exp.Identifier:
            return exp.to_identifier(column, quoted=True)

        def option(key: str, value: bool) -> exp.Expression:
            return exp.EQ(this=exp.column(key), expression=exp.true() if value else exp.false())

        # the outcomes as DuckDB's reader of a Parquet source reads them (engines/duckdb.py)
        read = exp.func("read_parquet", exp.Array(expressions=[
            exp.Literal.string(listing.glob_escape(f)) for f in files]),
            option("hive_partitioning", True), option("union_by_name", len(files) > 1))
        theirs = exp.select(*(exp.column(name(c)) for c in (*self.keys, self.truth))).from_(read)
        own = exp.select(exp.Star(except_=[exp.column(name(self.truth))]) if self.replaces
                         else exp.Star()).from_(table.copy())
        left, right = name("mleval_predictions"), name("mleval_outcomes")
        on = exp.and_(*(exp.column(name(k), table=left.copy()).eq(
            exp.column(name(k), table=right.copy())) for k in self.keys))
        return (exp.select(exp.Column(this=exp.Star(), table=left.copy()),
                           exp.column(name(self.truth), table=right.copy()))
                .from_(own.subquery(left.copy()))
                .join(theirs.subquery(right.copy()), on=on, join_type="left"))


def _joined(frame: pl.LazyFrame, theirs: pl.LazyFrame | None, join: Outcomes,
            dtype: pl.DataType | None = None, *, ordered: bool = False) -> pl.LazyFrame:
    """``frame`` with the truth of ``theirs`` (None: no outcome, a null truth of ``dtype``)
    in place of its own, last; ``ordered``: in ``frame``'s order."""
    own = frame.collect_schema().names()
    dropped = frame.drop(join.truth) if join.truth in own else frame
    if theirs is None:
        return dropped.with_columns(pl.lit(None, dtype).alias(join.truth))
    return dropped.join(theirs, on=list(join.keys), how="left", nulls_equal=False,
                        maintain_order="left" if ordered else None)


def outcomes(predictions: pl.Schema, labels: Source, sample: str, label: str | None,
             truth: str) -> Outcomes:
    """The join of ``labels`` to predictions with ``predictions``' columns, checked: the
    outcomes have the sample and truth columns (and the label column where the predictions
    have one and the outcomes too). One outcome per key is checked where they are joined
    (:func:`joined`)."""
    schema = labels.schema()
    missing = [c for c in (sample, truth) if c not in schema]
    if missing:
        raise InputError(f"labels: the outcomes have no column {missing[0]!r} (they join to "
                         f"the predictions by {sample!r} and give {truth!r}); they have "
                         f"{sorted(schema.names())}")
    keys = (sample, label) if label is not None and label in schema and label in predictions \
        else (sample,)
    return Outcomes(labels, keys, truth, replaces=truth in predictions)


def check_unique(outcomes: pl.LazyFrame, keys: Sequence[str]) -> None:
    """An ``InputError`` naming a key of ``outcomes`` given twice. The keys' 64-bit hashes,
    sorted, find the candidates (16 bytes a row, where grouping by the keys holds a table of
    every key); the rows of a hash seen twice are then grouped by their keys."""
    key = pl.struct(*keys).hash()
    hashes = outcomes.select(key.alias("hash")).collect(engine="streaming").to_series().sort()
    repeated = hashes.filter(hashes == hashes.shift(1)).unique()
    if not repeated.len():
        return
    twice = (outcomes.filter(key.is_in(repeated.implode())).group_by(*keys).len()
             .filter(pl.col("len") > 1).sort(*keys, nulls_last=True).head(1).collect())
    if twice.height:
        said = ", ".join(f"{k}={twice[k][0]!r}" for k in keys)
        raise InputError(f"labels: {int(twice['len'][0])} outcomes for {said}: one outcome per "
                         f"{' and '.join(keys)}")


@dataclass
class Joined:
    """Predictions with their outcomes' truth, as an input: ``source``, and the folder of the
    files written for it (None: a derivation, nothing written), removed by :meth:`close` (or
    once the object is gone; ``shared``: at the end of :func:`joined_once`'s block)."""

    source: Source
    folder: str | None = None
    shared: bool = False
    _removal: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.folder is not None:
            self._removal = weakref.finalize(self, shutil.rmtree, self.folder, True)

    def close(self) -> None:
        if self._removal is not None and not self.shared:
            self._removal()


#: The joins written in :func:`joined_once`'s block, by what they join (None: outside one).
_ONCE: ContextVar[dict[Any, Joined] | None] = ContextVar("mleval_joined_once", default=None)


@contextmanager
def joined_once() -> Iterator[None]:
    """Within the block, the same files joined again (each request of a report job: one per
    segmentation) read the files the first join wrote; they are removed at its end."""
    token = _ONCE.set({})
    try:
        yield
    finally:
        for held in (_ONCE.get() or {}).values():
            held.shared = False
            held.close()
        _ONCE.reset(token)


def joined(predictions: Source, join: Outcomes, *,
           memory_limit: int | None = None) -> Joined:
    """``predictions`` with the truth of ``join``'s outcomes: local parquet files on both
    sides are joined once, a group of files at a time within ``memory_limit`` (bytes), into
    temporary files (see the module docstring); any other input is a
    :class:`~mleval_sql.sources.Derived` one, its outcomes checked for a key given twice."""
    mine, theirs = _local_files(predictions), _local_files(join.outcomes)
    if mine is None or theirs is None or not isinstance(predictions, Parquet):
        check_unique(join.outcomes.polars(), join.keys)
        return Joined(Derived(predictions, join))
    kept = _ONCE.get()
    if kept is None:
        return _written(predictions, join, memory_limit)
    key = (mine, theirs, join.keys, join.truth, join.replaces)
    if key not in kept:
        kept[key] = _written(predictions, join, memory_limit)
        kept[key].shared = True
    return kept[key]


def _local_files(source: Source) -> tuple[str, ...] | None:
    """The files of a source that is local parquet files (None: any other)."""
    files = underlying(source)
    if not isinstance(files, Parquet) or any("://" in f for f in files.files):
        return None
    return files.files


def _written(predictions: Parquet, join: Outcomes, memory_limit: int | None) -> Joined:
    """The join of local parquet files, written a group at a time: each prediction file's rows
    in its order, in a file of their own (a part of each for a group split by hash) below the
    same folders, whose ``key=value`` folders give the same hive columns, so that the rows are
    read back as the files were (the truth before the hive columns)."""
    assert isinstance(join.outcomes, Parquet)
    scan, outcome_scan = _Scan.of(predictions.files), _Scan.of(join.outcomes.files)
    truth = join.outcomes.schema()[join.truth]
    groups = _groups(predictions.files, join.outcomes.files, join.keys[0],
                     _group_rows(memory_limit, len(scan.schema)), alone=True)
    place = {f: i for i, f in enumerate(predictions.files)}
    folder = tempfile.mkdtemp(prefix="mleval-outcomes-")
    written: list[tuple[int, int, str]] = []
    try:
        for group, part, split in _parts(groups, join.keys[0]):
            theirs = None if not group.outcomes else split(
                outcome_scan.frame(group.outcomes).select(*join.keys, join.truth))
            # the join keeps no order (keeping it costs twice the time): the rows' numbers
            # in the group's files put them back in order, and tell each file's rows apart
            rows = _joined(split(scan.frame(group.predictions, index=_ROW)), theirs, join,
                           truth).collect(engine="streaming")
            if not rows[_ROW].is_sorted():
                rows = rows.sort(_ROW)
            numbers = rows[_ROW]
            _check_joined_once(rows, numbers, join)
            bounds = pl.Series([0, *group.sizes], dtype=numbers.dtype).cum_sum()
            ends = numbers.search_sorted(bounds, side="left").to_list()
            for path, start, end in zip(group.predictions, ends, ends[1:], strict=False):
                out = _below(folder, path, f"{place[path]:08d}-{part:04d}.parquet")
                rows.slice(start, end - start).drop(_ROW, *scan.hive).write_parquet(
                    out, compression="lz4")
                written.append((place[path], part, out))
        files = tuple(out for *_, out in sorted(written))
        if set(Parquet(files).schema().names()) != {*scan.schema.names(), join.truth}:
            raise InputError(f"labels: the temporary folder {folder} has key=value folders "
                             "above it, which would read as columns: set TMPDIR to another")
    except pl.exceptions.PolarsError as error:
        shutil.rmtree(folder, ignore_errors=True)
        raise _named(error, predictions, join) from error
    except BaseException:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    return Joined(Parquet(files), folder)


def _below(folder: str, path: str, name: str) -> str:
    """A file ``name`` in ``folder`` below the folders of ``path``, made."""
    parent = os.path.splitdrive(os.path.dirname(os.path.abspath(path)))[1]
    below = os.path.join(folder, parent.lstrip("/\\"))
    os.makedirs(below, exist_ok=True)
    return os.path.join(below, name)


def _check_joined_once(rows: pl.DataFrame, numbers: pl.Series, join: Outcomes) -> None:
    """An ``InputError`` naming a key that two outcomes give a prediction: its row, joined
    twice, has its number twice (``rows`` in the order of their ``numbers``)."""
    again = numbers.filter(numbers == numbers.shift(1))
    if not again.len():
        return
    first = rows.filter(pl.col(_ROW) == again[0])
    said = ", ".join(f"{k}={first[k][0]!r}" for k in join.keys)
    raise InputError(f"labels: {first.height} outcomes for {said}: one outcome per "
                     f"{' and '.join(join.keys)}")


def _named(error: Exception, predictions: Parquet, join: Outcomes) -> Exception:
    """A read error of the join traced back to the file it is in, where one is."""
    assert isinstance(join.outcomes, Parquet)
    names = list(predictions.schema().names())
    try:
        listing.check_agreement(predictions.files, names)
        listing.check_agreement(join.outcomes.files, [*join.keys, join.truth])
    except InputError as found:
        return found
    return (predictions.unreadable(names)
            or join.outcomes.unreadable([*join.keys, join.truth]) or error)


@dataclass(frozen=True)
class _Scan:
    """How a group of a source's files is read as the whole source reads them
    (:meth:`~mleval_sql.sources.Parquet.polars`): the first file's columns, hive columns typed
    as the whole source's, each row with its file's path."""

    schema: pl.Schema  # every column, hive ones too, as the whole source gives them
    own: dict[str, pl.DataType]  # the columns in the files
    hive: dict[str, pl.DataType]

    @classmethod
    def of(cls, files: Sequence[str]) -> _Scan:
        schema = pl.scan_parquet(list(files), hive_partitioning=True, glob=False,
                                 missing_columns="insert",
                                 extra_columns="ignore").collect_schema()
        inside = listing.parquet_schema(files[0])
        own = {n: t for n, t in schema.items() if n in inside}
        return cls(schema, own, {n: t for n, t in schema.items() if n not in inside})

    def frame(self, files: Sequence[str], *, path: str | None = None,
              index: str | None = None) -> pl.LazyFrame:
        """The rows of ``files``, with each row's file (``path``) or number in them
        (``index``) where named."""
        scanned = pl.scan_parquet(list(files), schema=self.own, hive_partitioning=True,
                                  hive_schema=self.hive or None, glob=False,
                                  missing_columns="insert", extra_columns="ignore",
                                  include_file_paths=path, row_index_name=index)
        more = [c for c in (path, index) if c is not None]
        return enums_as_strings(scanned.select(*self.schema.names(), *more))


def _group_rows(memory_limit: int | None, columns: int) -> int:
    """The rows (predictions' and outcomes') a group joins at a time."""
    if memory_limit is None:
        return GROUP_ROWS
    return max(1, memory_limit // (GROUP_ROW_BYTES + COLUMN_BYTES * (columns + 1)))


@dataclass(frozen=True)
class _Group:
    """Prediction files and the outcome files whose samples can meet theirs, joined together;
    ``parts``: in so many parts by the hash of the sample (a group larger than a group's
    rows, whose files' samples all overlap)."""

    predictions: tuple[str, ...]
    outcomes: tuple[str, ...]
    sizes: tuple[int, ...]  # the rows of each prediction file
    parts: int = 1


def _groups(predictions: Sequence[str], outcomes: Sequence[str], sample: str, limit: int,
            *, alone: bool) -> list[_Group]:
    """The files in groups of overlapping ranges of ``sample`` (parquet statistics; a file
    without them overlaps every other), packed in order up to ``limit`` rows; a range larger
    than that alone, in parts. ``alone``: prediction files that meet no outcome file are a
    group too (else left out); outcome files that meet no prediction file are left out."""
    import pyarrow.parquet as pq

    items, empty = [], []
    for side, paths in ((0, predictions), (1, outcomes)):
        for path in paths:
            meta = pq.read_metadata(path)
            item = (_sample_range(meta, sample), meta.num_rows, side, path)
            (items if meta.num_rows else empty).append(item)
    ranges: list[list[tuple[Any, int, int, str]]] = []
    try:
        if any(r is None for r, *_ in items):
            raise TypeError("a file without statistics")
        high = None
        for (low, top), rows, side, path in sorted(items, key=lambda i: i[0][0]):
            if high is None or low > high:
                ranges.append([])
                high = top
            high = max(high, top)
            ranges[-1].append(((low, top), rows, side, path))
    except TypeError:  # no statistics, or samples of types that do not compare: one range
        ranges = [list(items)]
    ranges.extend([item] for item in empty)  # a file of no rows meets none
    items += empty
    groups, packed, size = [], ([], []), 0
    sizes = {p: n for _, n, s, p in items if s == 0}

    def group(mine: list[str], theirs: list[str], parts: int = 1) -> _Group:
        return _Group(tuple(mine), tuple(theirs), tuple(sizes[p] for p in mine), parts)

    def flush() -> None:
        nonlocal packed, size
        if packed[0]:
            groups.append(group(*packed))
        packed, size = ([], []), 0

    order = {p: i for i, p in enumerate((*predictions, *outcomes))}
    for found in ranges:
        mine = sorted((p for _, _, s, p in found if s == 0), key=order.__getitem__)
        theirs = sorted((p for _, _, s, p in found if s == 1), key=order.__getitem__)
        if not mine or (not theirs and not alone):
            continue
        rows = sum(n for _, n, _, _ in found) if theirs else \
            sum(n for _, n, s, _ in found if s == 0)
        if rows > limit:
            flush()
            groups.append(group(mine, theirs, math.ceil(rows / limit)))
            continue
        if size + rows > limit:
            flush()
        packed[0].extend(mine)
        packed[1].extend(theirs)
        size += rows
    flush()
    return groups


def _sample_range(meta: Any, sample: str) -> tuple[Any, Any] | None:
    """The least and greatest ``sample`` of a parquet file (``meta``: its footer), from its row
    groups' statistics; None where they do not say (or the file has no such column)."""
    leaves = [meta.schema.column(i).path for i in range(meta.num_columns)]
    if sample not in leaves:
        return None
    index = leaves.index(sample)
    lows, highs = [], []
    for group in range(meta.num_row_groups):
        if not meta.row_group(group).num_rows:
            continue
        stats = meta.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max:
            return None
        lows.append(stats.min)
        highs.append(stats.max)
    return (min(lows), max(highs)) if lows else None


def _parts(groups: list[_Group], sample: str) -> Any:
    """Each group's parts: the group, the part's number and how to keep a frame's rows of
    that part (a part of the sample's hash)."""
    for group in groups:
        for part in range(group.parts):
            if group.parts == 1:
                yield group, part, lambda frame: frame
            else:
                yield group, part, lambda frame, n=group.parts, k=part: frame.filter(
                    pl.col(sample).hash() % n == k)


def coverage(frame: pl.LazyFrame, truth: str, weight: str | None,
             by: Sequence[str]) -> pl.DataFrame:
    """Per segment of ``by``: ``label_coverage``, the share of the rows' weight whose
    ``truth`` is known (null where the segment weighs nothing)."""
    labelled = pl.col(truth).is_not_null()
    if weight is None:
        share = labelled.sum() / pl.len()
    else:
        weights = pl.col(weight).cast(pl.Float64)
        share = weights.filter(labelled).sum() / weights.sum()
    aggregated = (frame.group_by(list(by)).agg(share.alias(COVERAGE)) if by
                  else frame.select(share.alias(COVERAGE)))
    return aggregated.with_columns(
        pl.when(pl.col(COVERAGE).is_finite()).then(pl.col(COVERAGE))).collect()


# -- the map of outcome files to windows (a nightly job's fingerprints) -----------------------

def start_text(start: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """A window's wall-clock start as the map keeps it: a date's ISO text, a time's to the
    microsecond."""
    return start.cast(pl.String) if dtype == pl.Date else \
        start.cast(pl.Datetime("us")).cast(pl.String)


def outcome_map(predictions: Source, labels: Source, window: Window, sample: str,
                cached: pl.DataFrame | None = None, *,
                memory_limit: int | None = None) -> pl.DataFrame | None:
    """Which outcome files the rows of each prediction file join to, by window: a row per
    outcome file, prediction file and window of the rows of one that the other's samples meet
    (``outcome`` and ``prediction``: a file's path, size and modification time, one text;
    ``local_start``: :func:`start_text`), and a row per file read (the other file null: so
    that it is not read again), of :data:`MAP_SCHEMA`. ``cached``: the map of an earlier night,
    whose rows of files unchanged since are kept; only new or changed files are read, each
    against the files of the other side whose samples' range meets its own. ``basis`` tells
    maps of another sample column or window apart. None: either side is not local parquet
    files."""
    mine, theirs = _local_files(predictions), _local_files(labels)
    if mine is None or theirs is None:
        return None
    schema = predictions.schema()
    kind = window.kind(schema)
    basis = json.dumps([sample, window.column, list(window.every), window.time_zone,
                        str(schema[window.column])])
    files = {"prediction": {_stat(f): f for f in mine}, "outcome": {_stat(f): f for f in theirs}}
    kept = pl.DataFrame(schema=MAP_SCHEMA)
    if cached is not None and cached.schema == pl.Schema(MAP_SCHEMA):
        present = [pl.col(side).is_null() | pl.col(side).is_in(list(found))
                   for side, found in files.items()]
        kept = cached.filter(pl.col("basis") == basis, *present).unique(maintain_order=True)
    read = {side: set(kept.filter(pl.col(other).is_null())[side])
            for side, other in (("prediction", "outcome"), ("outcome", "prediction"))}
    new = {side: [s for s in found if s not in read[side]] for side, found in files.items()}
    parts = [kept]
    limit = _group_rows(memory_limit, 3)
    scans = (_Scan.of(mine), _Scan.of(theirs))
    for outcome_files, prediction_files in (
            ([files["outcome"][s] for s in new["outcome"]], mine),  # new outcomes: every file
            ([files["outcome"][s] for s in read["outcome"]],  # new predictions: known outcomes
             [files["prediction"][s] for s in new["prediction"]])):
        if outcome_files and prediction_files:
            found = _pairs(scans, prediction_files, outcome_files, window, kind, sample, limit)
            stats = {f: s for found_files in files.values() for s, f in found_files.items()}
            parts.append(found.select(
                basis=pl.lit(basis), outcome=pl.col("outcome").replace_strict(stats),
                prediction=pl.col("prediction").replace_strict(stats),
                **{GRANULARITY: pl.col(GRANULARITY),
                   LOCAL_START: start_text(pl.col(START), found.schema[START])}))
    for side, other in (("outcome", "prediction"), ("prediction", "outcome")):
        if new[side]:
            parts.append(pl.DataFrame({"basis": basis, side: new[side]}).with_columns(
                pl.lit(None, pl.String).alias(c) for c in (other, GRANULARITY, LOCAL_START)))
    return pl.concat([p.select(*MAP_SCHEMA).cast(MAP_SCHEMA) for p in parts]).unique(
        maintain_order=True)


def window_inputs(mapped: pl.DataFrame) -> pl.DataFrame:
    """The outcome files each window's samples read, from a map (:func:`outcome_map`):
    ``granularity, local_start`` (as text), ``inputs`` (a list of each file's text, sorted),
    the part of a window's fingerprint that changes when its late outcomes arrive."""
    return (mapped.drop_nulls(GRANULARITY).select(GRANULARITY, LOCAL_START, "outcome").unique()
            .sort("outcome").group_by(GRANULARITY, LOCAL_START, maintain_order=True)
            .agg(pl.col("outcome").alias("inputs")))


def _stat(path: str) -> str:
    """A file as the map names it: its path, size and modification time."""
    stat = os.stat(path)
    return f"{path}\t{stat.st_size}\t{stat.st_mtime_ns}"


def _pairs(scans: tuple[_Scan, _Scan], predictions: Sequence[str], outcomes: Sequence[str],
           window: Window, kind: Any, sample: str, limit: int) -> pl.DataFrame:
    """``outcome, prediction, granularity, window_start``: the windows of each prediction
    file's rows that each outcome file's samples meet, a group of files at a time."""
    found = [pl.DataFrame(schema={"outcome": pl.String, "prediction": pl.String,
                                  GRANULARITY: pl.String, START: pl.Null})]
    groups = _groups(predictions, outcomes, sample, limit, alone=False)
    for group, _, split in _parts(groups, sample):
        theirs = split(scans[1].frame(group.outcomes, path=_FILE).select(
            sample, pl.col(_FILE).alias("outcome")))
        rows = split(scans[0].frame(group.predictions, path=_FILE).select(
            sample, window.column, pl.col(_FILE).alias("prediction")))
        made = window.polars(rows, kind).select(sample, "prediction", GRANULARITY, START)
        found.append(theirs.unique().join(made.unique(), on=sample)
                     .select("outcome", "prediction", GRANULARITY, START).unique()
                     .collect(engine="streaming"))
    return pl.concat(found, how="vertical_relaxed")
