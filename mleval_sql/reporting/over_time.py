"""A job over time ([window]): every table of the job is per time window; the page and its
tables are of the latest window of the job's first granularity, the trend charts and the
history of every window.

The latest window is the last ``window_start`` of the first granularity that any row has; the
baseline of its alerts may be the window before it (``[baseline] previous = true``) or a
window named by its start (``[baseline] window = "2026-10"``: the first granularity's window
that starts then, as text of the start's date and time, ``2026-10`` or ``2026-10-05``).

>>> import datetime as dt
>>> rows = pl.DataFrame({"granularity": ["1d", "1d"], "value": [0.5, 0.7],
...                      "window_start": [dt.date(2026, 11, 1), dt.date(2026, 11, 2)],
...                      "window_end": [dt.date(2026, 11, 2), dt.date(2026, 11, 3)]})
>>> latest_window(rows, ("1d",))
('1d', datetime.date(2026, 11, 2))
>>> at(rows, ("1d", dt.date(2026, 11, 2)))["value"].to_list()
[0.7]
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

import polars as pl

from mleval_sql.engines import memory_bytes
from mleval_sql.history import ADDED, History
from mleval_sql.history import read as read_history
from mleval_sql.labels import COVERAGE, joined_once, outcome_map, start_text, window_inputs
from mleval_sql.registry import DECLARED_FAMILIES, METRICS
from mleval_sql.reporting.job import Baseline, Job, JobError
from mleval_sql.sources import Source, as_source
from mleval_sql.windows import (
    COLUMNS,
    END,
    GRANULARITY,
    LOCAL_START,
    START,
    Period,
    candidates,
)

#: The fingerprint of a window no file holds any more, and of one whose inputs are not files.
NO_INPUTS, UNKNOWN_INPUTS = "none", "unknown"
#: A window: its granularity and start.
WindowKey = tuple[str, Any]


def latest_window(rows: pl.DataFrame, every: Sequence[str]) -> WindowKey | None:
    """The last window of the first of ``every`` that ``rows`` have (None: no rows)."""
    for grain in every:
        starts = rows.filter(pl.col(GRANULARITY) == grain)[START]
        if starts.len():
            return grain, starts.max()
    return None


def at(rows: pl.DataFrame, window: WindowKey | None) -> pl.DataFrame:
    """The rows of ``window`` without the window's columns (none: no rows)."""
    if window is None:
        return rows.clear().drop(*COLUMNS, END)
    grain, start = window
    return rows.filter(pl.col(GRANULARITY) == grain, pl.col(START) == start).drop(*COLUMNS, END)


def reference_window(rows: pl.DataFrame, latest: WindowKey | None,
                     baseline: Baseline) -> WindowKey | None:
    """The window a baseline of this job's windows names: the one before ``latest`` (of its
    granularity), or the one whose start reads as ``baseline.window``; None where there is
    no earlier window (the first night)."""
    if latest is None:
        return None
    grain, start = latest
    starts = rows.filter(pl.col(GRANULARITY) == grain)[START].unique().sort()
    if baseline.previous:
        earlier = starts.filter(starts < start)
        return (grain, earlier.max()) if earlier.len() else None
    assert baseline.window is not None
    period = Period.parse(baseline.window)  # checked when the job was read
    low, high = ((period.start.date(), period.end.date()) if starts.dtype == pl.Date
                 else (period.start, period.end))
    local = (starts.dt.replace_time_zone(None)  # wall-clock times, as a period reads them
             if isinstance(starts.dtype, pl.Datetime) and starts.dtype.time_zone else starts)
    named = starts.filter((local >= low) & (local < high))
    if not named.len():
        text = starts.cast(pl.String)
        raise JobError(f"baseline.window: no {grain} window starts in {period.text} "
                       f"(from {low} to {high}); "
                       f"the job's {grain} windows start at {text.head(5).to_list()}"
                       f"{' ...' if text.len() > 5 else ''}")
    return grain, named.min()


@dataclass
class Night:
    """What a job with a [history] computes tonight: the windows whose inputs or request
    changed since the history's run (``stale``: each with its ``reason``), the files of each
    source that can hold their rows (``files``, by source key; None: the whole source), and
    the history, locked while the night runs; ``outcomes``: the map of outcome files to
    windows ([labels]) that the history keeps for the next night."""

    store: History
    request_hash: str
    stale: pl.DataFrame
    kept: int  # the windows the history keeps as they are
    files: dict[str, list[str] | None]
    rows_read: int | None  # the rows of those files (None: not known, a source not files)
    outcomes: pl.DataFrame | None = None
    #: every window of each source's files: source, granularity, local_start, files
    inputs: pl.DataFrame | None = None

    @property
    def files_known(self) -> bool:
        """Whether each source's files tell its windows apart (else every window is
        computed)."""
        return all(f is not None for f in self.files.values())

    def keep(self, rows: pl.DataFrame) -> None:
        """Tonight's rows (every window's columns, ``samples`` and ``weight``) in the history:
        they replace the rows of the windows computed, which are the stale ones (or, where
        the files cannot tell the windows apart, those the rows have and every window kept
        before), at once."""
        if self.files_known:
            windows = self.stale.select(GRANULARITY, START, END, "fingerprint")
        else:
            windows = rows.select(GRANULARITY, START, END).unique(maintain_order=True)
            stored = self.store.windows().select(GRANULARITY, START, END)
            if stored.height:  # every window kept before is computed anew, or emptied
                windows = pl.concat([windows, stored.cast(windows.schema)]).unique(
                    [GRANULARITY, START], maintain_order=True)
            windows = windows.with_columns(fingerprint=pl.lit(UNKNOWN_INPUTS))
            self.stale = windows.select(GRANULARITY, START, reason=pl.lit("inputs_unknown"))
        if START not in rows.columns:  # nothing computed: the windows are emptied
            rows = windows.select(GRANULARITY, START, END).clear()
        run_id = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        self.store.replace(rows, windows, run_id=run_id, request_hash=self.request_hash,
                           outcomes=self.outcomes)

    def read(self) -> pl.DataFrame:
        """Every window's rows the history holds now."""
        return read_history(self.store.path)

    @property
    def windows(self) -> tuple[tuple[str, Any], ...]:
        """The stale windows as :attr:`~mleval_sql.windows.Window.only` takes them."""
        return tuple(self.stale.drop_nulls(LOCAL_START)  # a window no file holds: no rows
                     .select(GRANULARITY, LOCAL_START).iter_rows())

    def with_reference(self, key: str, reference: Any) -> tuple[list[str], tuple[
            tuple[str, Any], ...]] | None:
        """What a drift of tonight's windows against ``reference`` reads of the source
        ``key``: tonight's files and those of the reference's windows (``"previous"``: the
        window before each of tonight's; a :class:`~mleval_sql.windows.Period`: every window
        it meets), and the windows to make (tonight's, and the ones before them). None: the
        reference is not of the input's windows (another source, rows selected by value),
        or the files do not tell the windows apart."""
        files = self.files.get(key)
        if files is None or self.inputs is None:
            return None
        tonight = list(self.windows)
        own = self.inputs.filter(pl.col("source") == key)
        local = pl.col(LOCAL_START)
        if isinstance(reference, str) and reference == "previous":
            wanted = pl.DataFrame(tonight, schema={GRANULARITY: pl.String,
                                                   LOCAL_START: own.schema[LOCAL_START]},
                                  orient="row").with_columns(
                local.dt.offset_by("-" + pl.col(GRANULARITY)))
            met = own.join(wanted, on=[GRANULARITY, LOCAL_START], how="semi")
            windows = tuple(dict.fromkeys([*tonight, *met.select(GRANULARITY, LOCAL_START)
                                           .iter_rows()]))
        elif isinstance(reference, Period):
            start = local.cast(pl.Datetime("us"))
            met = own.filter(start < reference.end,
                             start.dt.offset_by(pl.col(GRANULARITY)) > reference.start)
            windows = tuple(tonight)
        else:
            return None
        more = met["files"].explode().drop_nulls().to_list()
        return sorted({*files, *more}), windows

    def summary(self) -> dict[str, Any]:
        """What ``summary.json`` says of the night: the windows computed (with why), how many
        kept, and the files and rows read."""
        computed = self.stale.select(GRANULARITY, START, "reason").with_columns(
            pl.col(START).cast(pl.String))
        files = None if any(f is None for f in self.files.values()) else sum(
            len(f) for f in self.files.values() if f is not None)
        return {"history": os.fspath(self.store.path), "computed": computed.to_dicts(),
                "kept": self.kept, "files_read": files, "rows_read": self.rows_read}


@contextmanager
def night(job: Job, sources: Mapping[str, Source], *,
          full_refresh: bool = False) -> Iterator[Night]:
    """The job's history ([history] path), locked while the block runs, and what tonight
    computes of it: the windows of each source's files (:func:`mleval_sql.windows.candidates`)
    that the history lacks or has from other inputs or another request, and the windows it
    has that no file holds any more (kept with no rows). A source that is not local parquet
    files cannot tell its windows apart: every window is computed then. Outcomes ([labels])
    are joined once for every request of the night (:func:`mleval_sql.labels.joined_once`)."""
    assert job.history is not None and job.window is not None
    store = History.open(job.history, _job_name(job), full_refresh=full_refresh)
    with store.lock(), joined_once():
        found = {key: candidates(source, job.window) for key, source in sources.items()}
        digest = request_hash(job)
        if any(c is None for c in found.values()):  # every window, from every file
            stale = pl.DataFrame(schema={GRANULARITY: pl.String, START: pl.Null,
                                         LOCAL_START: pl.Null, "reason": pl.String})
            yield Night(store, digest, stale, 0, dict.fromkeys(sources), None)
            return
        every = pl.concat([c.with_columns(source=pl.lit(k)) for k, c in found.items()
                           if c is not None])
        mapped = None
        if job.labels is not None:  # late outcomes change the windows of their samples
            mapped = _outcome_map(job, sources, store.outcome_map())
            if mapped is None:
                every = every.with_columns(fingerprint=pl.lit(UNKNOWN_INPUTS))
            else:
                local = start_text(pl.col(LOCAL_START), every.schema[LOCAL_START])
                every = every.with_columns(local.alias("_local")).join(
                    window_inputs(mapped).rename({LOCAL_START: "_local"}),
                    on=[GRANULARITY, "_local"], how="left", maintain_order="left").with_columns(
                    fingerprint=pl.concat_str(
                        "fingerprint", pl.col("inputs").list.join("\n").fill_null(""),
                        separator="\n")).drop("inputs", "_local")
        windows = every.sort("source").group_by(GRANULARITY, START, maintain_order=True).agg(
            pl.col(END).first(), pl.col(LOCAL_START).first(),
            pl.col("fingerprint").str.join("\n"))
        windows = windows.with_columns(fingerprint=pl.col("fingerprint").map_elements(
            lambda text: hashlib.sha256(text.encode()).hexdigest(), return_dtype=pl.String))
        stale = store.stale(windows.select(GRANULARITY, START, END, "fingerprint"), digest)
        stored = store.windows()
        if stored.height and not full_refresh:  # windows no file holds any more
            gone = stored.filter(pl.col("fingerprint") != NO_INPUTS).join(
                windows, on=[GRANULARITY, START], how="anti")
            if gone.height:
                stale = pl.concat([stale, gone.select(
                    GRANULARITY, START, END, pl.lit(NO_INPUTS).alias("fingerprint"),
                    reason=pl.lit("deleted"))], how="vertical_relaxed")
        stale = stale.join(windows.select(GRANULARITY, START, LOCAL_START),
                           on=[GRANULARITY, START], how="left", maintain_order="left")
        wanted = every.join(stale.select(GRANULARITY, START), on=[GRANULARITY, START])
        files = {key: sorted(set(wanted.filter(pl.col("source") == key)["files"].explode()
                                 .drop_nulls().to_list())) for key in sources}
        rows = _rows_of(files)
        kept = 0 if full_refresh else \
            windows.height - stale.filter(pl.col("reason") != "deleted").height
        yield Night(store, digest, stale, kept, dict(files), rows, mapped,
                    every.select("source", GRANULARITY, LOCAL_START, "files"))


def _outcome_map(job: Job, sources: Mapping[str, Source],
                 cached: pl.DataFrame | None) -> pl.DataFrame | None:
    """The map of outcome files ([labels]) to the windows of their samples, over every source
    (:func:`mleval_sql.labels.outcome_map`: only files new or changed since ``cached``, the
    history's, are read); None: the outcomes or a source are not local parquet files."""
    assert job.labels is not None and job.window is not None
    outcomes = as_source(job.labels)
    budget = memory_bytes(job.memory_limit) if job.memory_limit else None
    parts = []
    for source, spec in zip(sources.values(), job.sources, strict=True):
        sample = spec.columns.get("sample") or "sample"
        found = outcome_map(source, outcomes, job.window, sample, cached, memory_limit=budget)
        if found is None:
            return None
        parts.append(found)
    return pl.concat(parts).unique(maintain_order=True)


def request_hash(job: Job) -> str:
    """A hash of what a window's values depend on besides its inputs: the metrics, averages,
    options, segmentations, window, and each source's reading (paths, models, columns)."""
    assert job.window is not None
    said = {"metrics": job.metrics, "average": job.average, "task": job.task,
            "options": job.options, "segments": [list(s.columns) for s in job.segmentations],
            "window": [job.window.column, list(job.window.every), job.window.time_zone],
            "sources": [[list(s.paths), s.model, s.model_column, dict(s.columns)]
                        for s in job.sources],
            "labels": job.labels, "unlabelled": job.unlabelled}
    mine = [m for m in job.metrics
            if any(f in DECLARED_FAMILIES for f in METRICS[m].families.values())]
    if mine:  # a declared metric's expression, wherever it was declared (a lake's file...)
        from mleval_sql.declared import DECLARED as declared

        said["declared"] = {m: [declared[m].text, list(declared[m].tasks)] for m in mine}
    if job.estimation is not None:  # the estimates' reference and map (its files' sizes, times)
        said["estimation"] = job.estimation.said()
    return hashlib.sha256(json.dumps(said, sort_keys=True, default=str).encode()).hexdigest()


def _job_name(job: Job) -> str:
    """The name a history knows its job by: the job file's stem, else its title."""
    return job.file.stem if job.file is not None else job.title


def _rows_of(files: Mapping[str, list[str] | None]) -> int:
    import pyarrow.parquet as pq

    return sum(pq.read_metadata(f).num_rows for part in files.values() for f in part or ())


def unsized(rows: pl.DataFrame, keys: Sequence[str]) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A history's rows as the job's metric rows and segment sizes (``keys``, the window's
    columns, ``samples`` and ``weight``), without what the history adds."""
    windowed = [*COLUMNS, END]
    metrics = rows.drop(*(c for c in (*ADDED, "samples", "weight") if c in rows.columns))
    coverage = [COVERAGE] if COVERAGE in rows.columns else []
    sizes = rows.select(*keys, *windowed, "samples", "weight", *coverage).unique(
        [*keys, *windowed], maintain_order=True)
    return metrics, sizes
