"""Time windows: a time column cut into calendar windows, one segmentation more.

A :class:`Window` names a time column, one or more granularities and a time zone. The engines
never see it: :func:`windowed` gives the input with two more columns, ``granularity`` and
``window_start`` (the start of the row's window as wall-clock time in the window's time zone,
made by one truncation: polars' ``dt.truncate``, SQL's ``date_trunc`` written by sqlglot), and
the request segments by them before its own ``by`` columns; several granularities are the
input's rows once for each. :func:`finished` then gives a result its ``window_end`` and its
times their time zone, and leaves out the rows of no window (a null time), saying how many.

How a time is read: a timestamp with a time zone is converted to the window's time zone; a
timestamp without one is taken as wall-clock time there already; a date is a calendar day.
Windows are calendar-aligned there: days from midnight, ISO weeks from Monday, months,
quarters and years from their first day, hours on the hour. A day at a change of daylight
saving time is 23 or 25 hours long; the hour repeated when clocks go back is one window of two
hours, and the hour skipped when they go forward has none.

A :class:`Period` is a stated span of the same time column, read the same way: a calendar unit
(``2026``, ``2026-Q4``, ``2026-10``, ``2026-W41``, ``2026-10-05``, ``2026-10-05T08``) or a
half-open range of days or times (``2026-10-01/2026-10-15``), in the window's time zone: the
rows a drift reference reads (:class:`PeriodRows`).

>>> window = Window.parse("ts:1d,1w@Europe/Paris")
>>> window.column, window.every, window.time_zone
('ts', ('1d', '1w'), 'Europe/Paris')
>>> Period.parse({"period": "2026-10"}).resolved(window).said()
"2026-10 of 'ts' (from 2026-10-01 to 2026-11-01, Europe/Paris)"
"""

from __future__ import annotations

import hashlib
import os
import re
import warnings
import zoneinfo
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import polars as pl

from mleval_sql.errors import DataWarning, InputError
from mleval_sql.sources import Derived, Parquet, Source, underlying

if TYPE_CHECKING:  # SQL is written only where a request reads it: sqlglot loads then
    from sqlglot import exp

#: Each granularity and its SQL ``date_trunc`` part; polars truncates and offsets by the
#: granularity's own name (``1w``: ISO weeks, from Monday).
GRANULARITIES: dict[str, str] = {"1h": "hour", "1d": "day", "1w": "week", "1mo": "month",
                                 "1q": "quarter", "1y": "year"}
GRANULARITY, START, END = "granularity", "window_start", "window_end"
#: A window's start as wall-clock time (or a date): how :attr:`Window.only` names it.
LOCAL_START = "local_start"
#: The segment columns a window adds before the request's own (``by``).
COLUMNS = (GRANULARITY, START)
#: How a time column is read: a date, wall-clock time (no time zone), an instant (with one).
Kind = Literal["date", "naive", "aware"]


@dataclass(frozen=True)
class Window:
    """A time column cut into calendar windows of each granularity of ``every`` in
    ``time_zone`` (an IANA name, UTC by default)."""

    column: str
    every: tuple[str, ...]
    time_zone: str = "UTC"
    #: only these windows, each ``(granularity, window_start)`` (a start as wall-clock time,
    #: or a date): a nightly job's stale ones (:func:`candidates`); empty: every window
    only: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def parse(cls, value: str | Mapping[str, Any] | Window) -> Window:
        """A window from ``"COLUMN:EVERY[,EVERY...][@TIME_ZONE]"`` (the command line's and a
        job's short form) or ``{"column": ..., "every": ... , "time_zone": ...}``.

        >>> Window.parse({"column": "ts", "every": ["1d", "1mo"], "time_zone": "UTC"}).every
        ('1d', '1mo')
        >>> Window.parse("ts:1m")  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        mleval_sql.errors.InputError: window: unknown granularity '1m'; ...
        """
        if isinstance(value, Window):
            return value
        if isinstance(value, str):
            column, sep, rest = value.partition(":")
            every, _, zone = rest.partition("@")
            if not sep or not column.strip() or not every.strip():
                raise InputError(f"window must be COLUMN:EVERY[,EVERY...][@TIME_ZONE], e.g. "
                                 f"ts:1d or ts:1d,1w@Europe/Paris, got {value!r}")
            value = {"column": column.strip(), "every": every.split(","),
                     **({"time_zone": zone.strip()} if zone.strip() else {})}
        if not isinstance(value, Mapping):
            raise InputError(f"window must be 'COLUMN:EVERY' or a mapping with column, every "
                             f"and time_zone, got {value!r}")
        unknown = set(value) - {"column", "every", "time_zone"}
        if unknown:
            raise InputError(f"window: unknown key {sorted(unknown)[0]!r}; a window has "
                             "column, every and time_zone")
        column, every = value.get("column"), value.get("every")
        zone = value.get("time_zone", "UTC")
        if not isinstance(column, str) or not column:
            raise InputError(f"window: column must be a column name, got {column!r}")
        listed = [every] if isinstance(every, str) else every
        if not isinstance(listed, Sequence) or not listed:
            raise InputError(f"window: every must be a granularity or a list of them "
                             f"({', '.join(GRANULARITIES)}), got {every!r}")
        grains = tuple(dict.fromkeys(str(g).strip() for g in listed))
        for grain in grains:
            if grain not in GRANULARITIES:
                raise InputError(f"window: unknown granularity {grain!r}; granularities are "
                                 f"{list(GRANULARITIES)} (1w: ISO weeks from Monday)")
        if not isinstance(zone, str) or not _known_zone(zone):
            raise InputError(f"window: unknown time_zone {zone!r}; give an IANA name such as "
                             "UTC or Europe/Paris")
        return cls(column, grains, zone)

    def text(self) -> str:
        """The short form :meth:`parse` reads."""
        zone = "" if self.time_zone == "UTC" else f"@{self.time_zone}"
        return f"{self.column}:{','.join(self.every)}{zone}"

    def kind(self, schema: pl.Schema) -> Kind:
        """How the time column of an input with ``schema`` is read; an ``InputError`` names a
        column that is missing or not a date or timestamp."""
        if self.column not in schema:
            raise InputError(f"window column {self.column!r} is not in the input; it has "
                             f"{sorted(schema.names())}")
        dtype = schema[self.column]
        if dtype == pl.Date:
            hourly = [g for g in self.every if g == "1h"]
            if hourly:
                raise InputError(f"window: column {self.column!r} holds dates, which have no "
                                 "hours: 1h needs a timestamp")
            return "date"
        if isinstance(dtype, pl.Datetime):
            return "naive" if dtype.time_zone is None else "aware"
        raise InputError(f"window column {self.column!r} is {dtype}, not a date or a "
                         f"timestamp{_cast_hint(dtype)}")

    # -- the window columns, on each engine ---------------------------------------------------

    def polars(self, frame: pl.LazyFrame, kind: Kind) -> pl.LazyFrame:
        """``frame``'s rows with a time, with the window columns, once per granularity."""
        time = pl.col(self.column)
        if kind == "aware":  # the instant as wall-clock time in the window's zone
            time = time.dt.convert_time_zone(self.time_zone).dt.replace_time_zone(None)
        timed = frame.filter(pl.col(self.column).is_not_null())
        parts = []
        for grain in self.every:
            part = timed.with_columns(pl.lit(grain).alias(GRANULARITY),
                                      time.dt.truncate(grain).alias(START))
            if self.only:
                starts = [start for g, start in self.only if g == grain]
                if not starts:
                    continue
                part = part.filter(pl.col(START).is_in(
                    pl.Series(starts, dtype=_start_type(kind)).implode()))
            parts.append(part)
        if not parts:  # no window of any granularity: no rows, with the columns
            return timed.with_columns(pl.lit(self.every[0]).alias(GRANULARITY),
                                      time.dt.truncate(self.every[0]).alias(START)).clear()
        return parts[0] if len(parts) == 1 else pl.concat(parts)

    def sql(self, table: exp.Expression, kind: Kind, *, end: bool = False) -> exp.Query:
        """``table``'s rows with a time, with the window columns (``end``: and
        ``window_end``), once per granularity (UNION ALL): SQL for every dialect sqlglot
        writes (DuckDB's engine, the statements to paste)."""
        from sqlglot import exp

        time: exp.Expression = exp.column(exp.to_identifier(self.column, quoted=True))
        timed = exp.Not(this=exp.Is(this=time.copy(), expression=exp.Null()))
        if kind == "aware":
            time = exp.AtTimeZone(this=time, zone=exp.Literal.string(self.time_zone))
        parts = []
        for grain in self.every:
            unit = GRANULARITIES[grain]
            start: exp.Expression = exp.TimestampTrunc(this=time.copy(), unit=exp.var(unit))
            steps, unit = {"week": (7, "day"), "quarter": (3, "month")}.get(unit, (1, unit))
            after: exp.Expression = exp.Add(this=start.copy(), expression=exp.Interval(
                this=exp.Literal.string(str(steps)), unit=exp.var(unit.upper())))
            if kind == "date":
                start, after = exp.cast(start, "date"), exp.cast(after, "date")
            where: exp.Expression = timed.copy()
            if self.only:
                starts = [v for g, v in self.only if g == grain]
                if not starts:
                    continue
                where = exp.and_(where, exp.In(this=start.copy(), expressions=[
                    exp.cast(exp.Literal.string(str(v)), "date" if kind == "date"
                             else "timestamp") for v in starts]))
            parts.append(exp.select(
                exp.Star(), exp.alias_(exp.Literal.string(grain), GRANULARITY),
                exp.alias_(start, START), *([exp.alias_(after, END)] if end else []),
            ).from_(table.copy()).where(where))
        if not parts:  # no window of any granularity: no rows, with the columns
            return Window(self.column, self.every[:1], self.time_zone).sql(
                table, kind, end=end).where(exp.false())
        out: exp.Query = parts[0]
        for part in parts[1:]:
            out = exp.union(out, part, distinct=False)
        return out

    # -- the result ---------------------------------------------------------------------------

    def finished(self, table: pl.DataFrame) -> pl.DataFrame:
        """A result's rows with ``window_end`` after ``window_start`` and timestamps in the
        window's time zone, the granularities in the order given."""
        if START not in table.columns:
            return table
        dated = table.schema[START] == pl.Date
        # microseconds whatever the input's unit (DuckDB's, and polars keeps ms input's own)
        start = pl.col(START) if dated else pl.col(START).cast(pl.Datetime("us"))
        end = start.dt.offset_by(pl.col(GRANULARITY))
        if not dated:
            start, end = _instant(start, self.time_zone), _instant(end, self.time_zone)
        at = table.columns.index(START)
        columns = [*table.columns[:at + 1], END, *table.columns[at + 1:]]
        order = pl.col(GRANULARITY).replace_strict({g: i for i, g in enumerate(self.every)},
                                                   return_dtype=pl.Int32)
        return table.with_columns(start.alias(START), end.alias(END)).select(columns).sort(
            order, maintain_order=True)  # the granularities as given, each's rows as laid out


def _cast_hint(dtype: pl.DataType) -> str:
    """How a column of ``dtype`` becomes a time column, where it can."""
    return (" (an integer epoch: cast it to a timestamp first, e.g. pl.from_epoch or "
            "to_timestamp)" if dtype.is_integer() else
            " (text: parse it to a timestamp first, e.g. str.to_datetime or CAST)"
            if dtype == pl.String else "")


def _start_type(kind: Kind) -> pl.DataType:
    """The type of a window's start as the engines see it: wall-clock time, or a date."""
    return pl.Date() if kind == "date" else pl.Datetime("us")


def _instant(local: pl.Expr, zone: str) -> pl.Expr:
    """Wall-clock times in ``zone`` as instants there: a time repeated when clocks go back is
    its first instant; a time skipped when they go forward, the instant they went (a day
    that starts at a skipped midnight starts then)."""
    # a skipped time read at the offset before the change (an hour earlier exists, then an
    # hour later as an instant): the start of a skipped hour or midnight is the change itself
    shifted = (local - timedelta(hours=1)).dt.replace_time_zone(
        zone, ambiguous="earliest", non_existent="null") + timedelta(hours=1)
    return local.dt.replace_time_zone(zone, ambiguous="earliest",
                                      non_existent="null").fill_null(shifted)


def _known_zone(name: str) -> bool:
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True


def candidates(source: Source, window: Window) -> pl.DataFrame | None:
    """Each window the input's files can hold rows of, with the fingerprint of its inputs:
    ``granularity, window_start, window_end, fingerprint, files, rows`` (the files' paths,
    and how many rows they hold). A file's times come from its hive folder of the window's
    column (``date=2026-11-01``), else from its parquet row groups' statistics; a file with
    neither can hold any window's rows and is an input of every window. The fingerprint
    hashes each input's path, size and modification time: a window whose fingerprint changed
    has an input written, rewritten or deleted since. The window's start and end are as a
    result gives them; ``local_start`` is its start as :attr:`Window.only` takes it. None:
    the input is not local parquet files (a frame, a table, object storage), whose windows
    cannot be told apart so."""
    import pyarrow.parquet as pq  # footers only, and only for a nightly job's windows

    files = underlying(source)
    if not isinstance(files, Parquet) or any("://" in f for f in files.files):
        return None
    kind = window.kind(files.schema())
    dtype = files.schema()[window.column]
    known, anywhere = [], []
    for path in files.files:
        meta = pq.read_metadata(path)
        stat = os.stat(path)
        low, high = _file_range(path, meta, window.column, dtype)
        entry = (path, stat.st_size, stat.st_mtime_ns, meta.num_rows)
        (known if low is not None else anywhere).append((*entry, low, high))
    if not known:
        return None
    ranges = pl.DataFrame(known, orient="row", schema={
        "file": pl.String, "size": pl.Int64, "mtime": pl.Int64, "rows": pl.Int64,
        "low": dtype, "high": dtype})
    time = pl.col("low", "high")
    if kind == "aware":
        time = time.dt.convert_time_zone(window.time_zone).dt.replace_time_zone(None)
    ranges = ranges.with_columns(time)
    spans = pl.date_ranges if kind == "date" else pl.datetime_ranges
    touched = pl.concat([ranges.select(
        "file", "size", "mtime", "rows", pl.lit(grain).alias(GRANULARITY),
        spans(pl.col("low").dt.truncate(grain), pl.col("high").dt.truncate(grain),
              interval=grain).alias(START)).explode(START) for grain in window.every])
    if anywhere:  # a file of unknown times is an input of every window
        windows = touched.select(GRANULARITY, START).unique()
        touched = pl.concat([touched, windows.join(pl.DataFrame(
            [entry[:4] for entry in anywhere], orient="row",
            schema=["file", "size", "mtime", "rows"]), how="cross").select(touched.columns)])
    out = touched.sort("file").group_by(GRANULARITY, START, maintain_order=True).agg(
        pl.concat_str("file", "size", "mtime", separator="\t").alias("inputs"),
        pl.col("file").alias("files"), pl.col("rows").sum())
    digests = [hashlib.sha256("\n".join(inputs).encode()).hexdigest()
               for inputs in out["inputs"].to_list()]
    local = pl.col(START)
    start, end = local, local.dt.offset_by(pl.col(GRANULARITY))
    if kind != "date":
        start, end = _instant(start, window.time_zone), _instant(end, window.time_zone)
    return out.select(
        GRANULARITY, start.alias(START), end.alias(END), local.alias(LOCAL_START),
        pl.Series("fingerprint", digests, dtype=pl.String), "files", "rows",
    ).sort(GRANULARITY, START)


def _file_range(path: str, meta: Any, column: str,
                dtype: pl.DataType) -> tuple[Any, Any]:
    """The earliest and latest time ``column`` (of type ``dtype``) holds in a parquet file
    (``meta``: its pyarrow footer): its hive folder's value, else its row groups' statistics
    (None, None: unknown)."""
    names = meta.schema.to_arrow_schema().names
    if column not in names:
        for part in reversed(path.replace(os.sep, "/").split("/")[:-1]):
            key, sep, value = part.partition("=")
            if sep and key == column:
                text = pl.Series([unquote(value)])
                typed = (text.str.to_date(strict=False) if dtype == pl.Date else
                         text.str.to_datetime(strict=False).cast(dtype))[0]
                return typed, typed
        return None, None
    index = names.index(column)
    lows, highs = [], []
    for group in range(meta.num_row_groups):
        stats = meta.row_group(group).column(index).statistics
        if stats is None or not stats.has_min_max:
            if meta.row_group(group).num_rows:
                return None, None
            continue
        lows.append(stats.min)
        highs.append(stats.max)
    return (min(lows), max(highs)) if lows else (None, None)


@dataclass(frozen=True)
class WindowColumns:
    """The window columns of ``window`` over an input whose time column is of ``kind``: a
    :class:`~mleval_sql.sources.Derived` input's derivation."""

    window: Window
    kind: Kind

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        return self.window.polars(frame, self.kind)

    def sql(self, table: exp.Expression) -> exp.Query:
        return self.window.sql(table, self.kind)


def windowed(source: Source, window: Window, by: Sequence[str]) -> Derived:
    """``source`` with the window columns of ``window``; an ``InputError`` names a time
    column that is missing or not temporal, or a segment column named as a window column."""
    clash = [c for c in by if c in (*COLUMNS, END)]
    if clash:
        raise InputError(f"segment column {clash[0]!r} is a column a window gives "
                         f"({', '.join((*COLUMNS, END))}); rename it")
    kind = window.kind(source.schema())
    nulls = source.polars().select(pl.col(window.column).null_count()).collect().item()
    if nulls:
        warnings.warn(f"window: {nulls:,} row{'s' if nulls != 1 else ''} with a null "
                      f"{window.column!r} {'are' if nulls != 1 else 'is'} in no window, left "
                      "out of the result", DataWarning, stacklevel=3)
    return Derived(source, WindowColumns(window, kind))


# -- periods: a stated span of the time column ------------------------------------------------

#: A period of one calendar unit, spelt as the granularity it spans (the window's vocabulary:
#: ``2026`` a year, ``2026-Q4`` a quarter, ``2026-10`` a month, ``2026-W41`` an ISO week from
#: Monday, ``2026-10-05`` a day, ``2026-10-05T08`` an hour).
UNITS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(\d{4})"), "1y"),
    (re.compile(r"(\d{4})-[Qq]([1-4])"), "1q"),
    (re.compile(r"(\d{4})-(\d{2})"), "1mo"),
    (re.compile(r"(\d{4})-W(\d{2})"), "1w"),
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})"), "1d"),
    (re.compile(r"(\d{4})-(\d{2})-(\d{2})[T ](\d{2})"), "1h"),
)
#: A bound of a range: a day, or a time of one (to the hour, minute, second or microsecond).
_BOUND = re.compile(r"\d{4}-\d{2}-\d{2}(?:[T ]\d{2}(?::\d{2}(?::\d{2}(?:\.\d{1,6})?)?)?)?")
_SPELLINGS = ("a year (2026), a quarter (2026-Q4), a month (2026-10), an ISO week (2026-W41), "
              "a day (2026-10-05) or an hour (2026-10-05T08), or a half-open range [start, "
              "end) of two days or times, e.g. ['2026-10-01', '2026-10-15'] or "
              "2026-10-01/2026-10-15")
#: The keys of a period given as a mapping.
PERIOD_KEYS = ("period", "column", "time_zone")


def _months_after(day: datetime, months: int) -> datetime:
    index = day.year * 12 + day.month - 1 + months
    return day.replace(year=index // 12, month=index % 12 + 1)


def _unit(text: str) -> tuple[datetime, datetime] | None:
    """The span ``[start, end)`` of a calendar unit's spelling (None: not one); an
    ``InputError`` where it is spelt as one but is no date (``2026-13``, ``2026-W54``)."""
    for pattern, grain in UNITS:
        found = pattern.fullmatch(text)
        if found is None:
            continue
        y, *rest = (int(g) for g in found.groups())
        try:
            if grain == "1w":
                start = datetime.combine(date.fromisocalendar(y, rest[0], 1), datetime.min.time())
                return start, start + timedelta(days=7)
            if grain == "1q":
                start = datetime(y, 3 * rest[0] - 2, 1)
            else:
                # a year: its first month and day; a month: its first day
                start = datetime(y, *[*rest, 1, 1][:max(len(rest), 2)])
        except ValueError as error:
            raise InputError(f"reference: the period {text!r} is no date ({error})") from None
        months = {"1y": 12, "1q": 3, "1mo": 1}.get(grain)
        if months is not None:
            return start, _months_after(start, months)
        return start, start + (timedelta(hours=1) if grain == "1h" else timedelta(days=1))
    return None


def _bound(value: Any, which: str) -> datetime:
    """A range's ``which`` bound (start or end): a day or a wall-clock time."""
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            raise InputError(f"reference: the period's {which} {value.isoformat()} has a time "
                             "zone; give wall-clock time (the period is read in time_zone=, "
                             "or the window's)")
        return value
    if isinstance(value, date):
        return datetime.combine(value, datetime.min.time())
    text = value.strip() if isinstance(value, str) else None
    if text is None or not _BOUND.fullmatch(text):
        if text is not None and _unit(text) is not None:
            # 2026-10/2026-12: through December, or to its start? A range says its bounds.
            raise InputError(f"reference: a range's bounds are days or times ([start, end), "
                             f"half-open); give {which} as a day, e.g. "
                             f"{_unit(text)[0].date().isoformat()}, not {text!r}")  # type: ignore[index]
        zoned = text is not None and re.fullmatch(
            r".*\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})", text)
        raise InputError(f"reference: cannot read the period's {which} {value!r}: "
                         + ("give wall-clock time, without an offset (the period is read in "
                            "time_zone=, or the window's)" if zoned else
                            "give a day (2026-10-01) or a time (2026-10-01T08:30)"))
    try:
        return datetime.fromisoformat(text.replace(" ", "T"))
    except ValueError as error:
        raise InputError(f"reference: the period's {which} {text!r} is no date or time "
                         f"({error})") from None


def _span(value: Any) -> tuple[datetime, datetime, str]:
    """A period's ``[start, end)`` and its text, from its spelling (see :data:`UNITS`), a
    ``date`` (a day) or a range (two bounds, or ``START/END``)."""
    if isinstance(value, str) and "/" in value:
        value = value.split("/", 1)
    if isinstance(value, str):
        text = value.strip()
        span = _unit(text)
        if span is None:
            raise InputError(f"reference: cannot read the period {value!r}: give {_SPELLINGS}")
        return span[0], span[1], text
    if isinstance(value, date) and not isinstance(value, datetime):
        return _bound(value, "day"), _bound(value, "day") + timedelta(days=1), value.isoformat()
    if isinstance(value, Sequence) and len(value) == 2:
        start, end = _bound(value[0], "start"), _bound(value[1], "end")
        if end <= start:
            raise InputError(f"reference: the period's end {_shown(end)} is not after its "
                             f"start {_shown(start)} (a range is [start, end), half-open)")
        return start, end, f"{_shown(start)}/{_shown(end)}"
    raise InputError(f"reference: cannot read the period {value!r}: give {_SPELLINGS}")


def _shown(moment: datetime) -> str:
    """A bound as a person writes it: a day at midnight as the day."""
    if moment.time() == datetime.min.time():
        return moment.date().isoformat()
    return moment.isoformat(sep="T", timespec="minutes" if not moment.second
                            and not moment.microsecond else "auto")


@dataclass(frozen=True)
class Period:
    """The rows whose time ``column`` falls in ``[start, end)``, wall-clock times (a date
    column: days) in a time zone, read as a window reads its column (:meth:`Window.kind`).
    ``column`` and ``time_zone`` are as given (None: the window's, and without a window no
    column, UTC); :meth:`resolved` fills them in, and ``zone`` is the time zone it is read in.
    ``text`` spells it as given: ``2026-10``, ``2026-10-01/2026-10-15``."""

    start: datetime
    end: datetime
    text: str
    column: str | None = None
    time_zone: str | None = None
    zone: str = "UTC"

    @classmethod
    def parse(cls, value: Any) -> Period:
        """A period from ``{"period": ..., "column": ..., "time_zone": ...}`` (``period``: a
        calendar unit, a ``date``, or a range ``[start, end)`` of two days or times, or
        ``START/END``) or its short form ``[COLUMN:]PERIOD[@TIME_ZONE]`` (the command line's:
        ``--reference period=ts:2026-10@Europe/Paris``), the window's spelling.

        >>> Period.parse("ts:2026-Q4").end
        datetime.datetime(2027, 1, 1, 0, 0)
        >>> Period.parse({"period": ["2026-10-15", "2026-10-01"]})  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        mleval_sql.errors.InputError: reference: the period's end 2026-10-01 is not after ...
        """
        if isinstance(value, Period):
            return value
        if isinstance(value, str):
            text, _, zone = value.partition("@")
            column = None
            # COLUMN: before a period, whose times have colons of their own (and a year first)
            if ":" in text and not _is_spelt(text) and not re.match(r"\s*\d{4}-", text):
                column, _, text = text.partition(":")
            value = {"period": text, **({"column": column.strip()} if column else {}),
                     **({"time_zone": zone.strip()} if zone.strip() else {})}
        if not isinstance(value, Mapping):
            value = {"period": value}
        unknown = [k for k in value if k not in PERIOD_KEYS]
        if unknown:
            raise InputError(f"reference: a period has {', '.join(PERIOD_KEYS)}; got "
                             f"{unknown[0]!r} (a period selects rows by their time alone)")
        if value.get("period") is None:
            raise InputError(f"reference: name the period (period=): {_SPELLINGS}")
        start, end, text = _span(value["period"])
        column, zone = value.get("column"), value.get("time_zone")
        if column is not None and (not isinstance(column, str) or not column.strip()):
            raise InputError(f"reference: the period's column must be a column name, got "
                             f"{column!r}")
        if zone is not None and (not isinstance(zone, str) or not _known_zone(zone)):
            raise InputError(f"reference: unknown time_zone {zone!r}; give an IANA name such "
                             "as UTC or Europe/Paris")
        return cls(start, end, text, column.strip() if column else None, zone, zone or "UTC")

    def resolved(self, window: Window | None) -> Period:
        """The period with its column and time zone: those given, else the window's (UTC
        without a window); an ``InputError`` where no column is named, or a time zone other
        than the window's is (a request reads its times in one)."""
        column = self.column or (window.column if window is not None else None)
        if column is None:
            raise InputError(f"reference: the period {self.text} is of which time column? Name "
                             f"it ({{'column': 'ts', 'period': {self.text!r}}}, on the command "
                             f"line period=ts:{self.text}), or give windows of it (window=, "
                             "--window)")
        zone = self.time_zone or (window.time_zone if window is not None else "UTC")
        if window is not None and self.time_zone is not None and \
                self.time_zone != window.time_zone:
            raise InputError(f"reference: the period is read in the window's time zone "
                             f"({window.time_zone}), not time_zone={self.time_zone!r}: leave "
                             "it out, or give the window that time zone")
        return replace(self, column=column, zone=zone)

    @property
    def timed(self) -> bool:
        """Whether a bound falls within a day (a date column cannot hold such a period)."""
        return any(b.time() != datetime.min.time() for b in (self.start, self.end))

    def said(self) -> str:
        """The period in words, for messages and headers."""
        return (f"{self.text} of {self.column!r} (from {_shown(self.start)} to "
                f"{_shown(self.end)}, {self.zone})")

    def kind(self, schema: pl.Schema) -> Kind:
        """How the time column of an input with ``schema`` is read; an ``InputError`` names a
        column that is missing or not temporal, a time zone or hours given for dates."""
        assert self.column is not None, "resolve the period first (Period.resolved)"
        if self.column not in schema:
            raise InputError(f"reference: the period's time column {self.column!r} is not in "
                             f"the input; it has {sorted(schema.names())}")
        dtype = schema[self.column]
        if dtype == pl.Date:
            if self.time_zone is not None:
                raise InputError(f"reference: {self.column!r} holds dates, which have no time "
                                 f"zone: leave out time_zone={self.time_zone!r} (a day is a "
                                 "calendar day)")
            if self.timed:
                raise InputError(f"reference: {self.column!r} holds dates, which have no "
                                 f"hours: the period {self.text} needs a timestamp (give days)")
            return "date"
        if isinstance(dtype, pl.Datetime):
            return "naive" if dtype.time_zone is None else "aware"
        raise InputError(f"reference: the period's time column {self.column!r} is {dtype}, "
                         f"not a date or a timestamp{_cast_hint(dtype)}")

    def local(self, kind: Kind) -> pl.Expr:
        """The time column as the period reads it: wall-clock time in its zone, or dates."""
        time = pl.col(self.column)
        if kind == "aware":  # the instant as wall-clock time, as a window reads it
            time = time.dt.convert_time_zone(self.zone).dt.replace_time_zone(None)
        return time

    def polars(self, kind: Kind) -> pl.Expr:
        """Whether a row's time is in the period (null where it has none)."""
        time = self.local(kind)
        low, high = ((self.start.date(), self.end.date()) if kind == "date"
                     else (self.start, self.end))
        return (time >= pl.lit(low)) & (time < pl.lit(high))

    def sql(self, kind: Kind) -> exp.Expression:
        """:meth:`polars` as a SQL condition, written by sqlglot."""
        from sqlglot import exp

        time: exp.Expression = exp.column(exp.to_identifier(self.column, quoted=True))
        if kind == "aware":
            time = exp.AtTimeZone(this=time, zone=exp.Literal.string(self.zone))
        dated = kind == "date"

        def bound(moment: datetime) -> exp.Expression:
            text = moment.date().isoformat() if dated else moment.isoformat(sep=" ")
            return exp.cast(exp.Literal.string(text), "date" if dated else "timestamp")

        return exp.and_(exp.GTE(this=time, expression=bound(self.start)),
                        exp.LT(this=time.copy(), expression=bound(self.end)))


def _is_spelt(text: str) -> bool:
    """Whether ``text`` is a period's spelling whole (no ``COLUMN:`` before it)."""
    parts = text.split("/", 1)
    return all(_BOUND.fullmatch(p.strip()) or any(u.fullmatch(p.strip()) for u, _ in UNITS)
               for p in parts)


@dataclass(frozen=True)
class PeriodRows:
    """The rows of an input in ``period`` (``inside``), or those with a time outside it: a
    :class:`~mleval_sql.sources.Derived` input's derivation (a drift reference's rows)."""

    period: Period
    kind: Kind
    inside: bool = True

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        within = self.period.polars(self.kind)
        return frame.filter(within if self.inside else ~within)  # a null time: neither

    def sql(self, table: exp.Expression) -> exp.Query:
        from sqlglot import exp

        within = self.period.sql(self.kind)
        return exp.select(exp.Star()).from_(table.copy()).where(
            within if self.inside else exp.not_(within))
