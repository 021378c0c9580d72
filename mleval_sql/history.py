"""The metrics history: every value a nightly job has computed, one table on disk, each time
window's rows replaced whole and at once when the job recomputes it.

A history is a folder (this layout is a public format, ``schema_version`` 1)::

    PATH/
      _mleval_history.json      {"schema_version": 1, "job": "nightly", "created_at": "..."}
      current -> v000007        the version to read: a relative symbolic link
      v000007/                  a version: a hive-partitioned parquet dataset, data files only
        granularity=1d/
          window_start=2024-03-31T00%3A00%3A00%2B01%3A00/
            part-<run_id>.parquet
      v000006/                  the version before, kept for readers still reading it
      _windows/v000007.parquet  the windows version 7 keeps, one row each
      _outcomes/v000007.parquet where the job has [labels]: its map of outcome files to windows
      _mleval_history.lock      while a run writes: its pid, host and start time

Every data file holds every column, typed: ``granularity`` (text: ``1h``, ``1d``, ``1w``,
``1mo``, ``1q``, ``1y``), ``window_start`` and ``window_end`` (dates, or timestamps with the
window's time zone), the segment columns, ``metric``, ``average``, ``label``, ``value``, optional
columns such as ``ci_low`` and ``ci_high``, and four the history adds: ``run_id`` and
``computed_at`` (UTC) of the run that computed the window, ``job``, and ``fingerprint`` (of the
window's inputs). Runs may differ in their optional columns, never in a column's type: read the
files with a union by name. A window's folder names its start in ISO 8601 (a timestamp as
wall-clock time in its zone with its UTC offset), ``:`` and ``+`` percent-encoded as Hive
escapes them (:func:`encode_start`); it decodes to the value in the files.

``_windows/vNNNNNN.parquet`` has one row per window of the version: ``granularity``,
``window_start``, ``window_end``, ``fingerprint``, ``request_hash`` (of the request that computed
it), ``run_id``, ``computed_at`` and ``rows`` (0: a window with no values).

``_outcomes/vNNNNNN.parquet`` (optional) is a cache, not data: a job with outcomes kept apart
keeps there which outcome files the samples of each prediction file's windows read
(:func:`mleval_sql.labels.outcome_map`; each file named by its path, size and modification
time), so that a night reads only the outcome files that are new or changed. A reader ignores
it; a version without it makes the next night map every file again.

How to read it: :func:`read`; DuckDB, ``read_parquet('PATH/current/**/*.parquet',
union_by_name=true, hive_partitioning=false)`` (with hive partitioning, DuckDB's default for
``key=value`` folders, it takes ``window_start`` of timestamps from the folder name as text,
unless given ``hive_types={'window_start': 'TIMESTAMPTZ'}``); polars, one ``pl.scan_parquet``
per file and ``pl.concat(scans, how="diagonal_relaxed")`` (a glob takes the first file's
columns). A reader that lists ``PATH/current/`` while a run swaps it can see some folders of
each version: one that must not should resolve ``current`` once (``os.path.realpath``) and
read that folder, as :func:`read` does.

A run makes a new version: the files of the windows it keeps are hard links to the current
version's, the windows it recomputes new files; then ``current`` is switched in one
``os.replace`` of a new link over it, after which versions before the previous one are deleted.
A reader sees one version whole; a run killed at any point leaves ``current`` where it was,
and the next run deletes what it left. It needs a POSIX filesystem: symbolic and hard links,
an atomic rename (on NFS a reader on another host may see the previous version until its
cache of ``current`` expires: it is kept whole for that).

A Delta history (:class:`DeltaHistory`: a path written ``delta://LOCATION``, or a LOCATION
holding ``_delta_log/``; a local folder; deltalake, the ``delta`` extra) is one Delta table of
the same rows in the same columns, partitioned by ``granularity``. A run is one commit: an
overwrite whose predicate names the windows it recomputes (a replaceWhere, rendered by sqlglot:
their rows go, the run's come; with no row kept, the whole table is overwritten), whose
commit's custom metadata (``commitInfo``, key ``mleval_history``) holds the run's
``schema_version``, ``job``, ``run_id``, ``schema`` (the rows' column types, which Delta lacks
some of: unsigned integers, time zones and units, categories, null columns; an Arrow IPC stream
of no rows, zlib, base64), ``windows`` (the manifest above: a list per column, times as ISO
8601 text, a timestamp with its UTC offset) and, for a job with outcomes kept apart,
``outcomes`` (the map of outcome files above, an Arrow IPC stream, zlib, base64). Rows and
manifest change in that one commit, so every version's agree; a run that fails before its
commit leaves the table as it was (files it wrote, which no commit lists, stay until
``VACUUM``), and a commit is made on the version the
run read or not at all (no retry). The job and schema_version are in the commit, not the
table's configuration: delta-rs takes only the ``delta.*`` keys it knows there, and sets them
only when the table is made, while a full refresh for another job must change them in its
commit. The history's state is the latest commit that has ``mleval_history`` (read from
``_delta_log/NNN.json``); another writer's commit that changes no row (OPTIMIZE, VACUUM) may
follow it, one that does makes the history refused until a full refresh. Delta keeps
timestamps in UTC: :func:`read` gives every column back the type its run wrote (a window's
start in its zone). Old versions stay for time travel until VACUUM; the lock is the folder
history's, ``LOCATION/_mleval_history.lock``.

>>> import tempfile
>>> from datetime import date
>>> path = Path(tempfile.mkdtemp()) / "history"
>>> history = History.open(path, job="nightly")
>>> windows = pl.DataFrame({"granularity": ["1d", "1d"],
...                         "window_start": [date(2024, 3, 1), date(2024, 3, 2)],
...                         "window_end": [date(2024, 3, 2), date(2024, 3, 3)],
...                         "fingerprint": ["a1", "b7"]})
>>> history.stale(windows, request_hash="r1")["reason"].to_list()
['new', 'new']
>>> rows = windows.select("granularity", "window_start", "window_end",
...                       metric=pl.lit("roc_auc"), value=pl.Series([0.91, 0.88]))
>>> with history.lock():
...     history.replace(rows, windows, run_id="night-1", request_hash="r1")
1
>>> read(path).select("window_start", "value", "run_id").rows()[0]
(datetime.date(2024, 3, 1), 0.91, 'night-1')
>>> history.stale(windows, request_hash="r1").height  # nothing to recompute
0
"""

from __future__ import annotations

import base64
import errno
import io
import json
import os
import re
import secrets
import shutil
import socket
import time
import warnings
import zlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import date, datetime, timezone
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote
from zoneinfo import ZoneInfo

import polars as pl

from mleval_sql.errors import InputError
from mleval_sql.outputs import atomic_output

#: The layout this module writes; a history of a newer one is refused.
SCHEMA_VERSION = 1
META = "_mleval_history.json"
CURRENT = "current"
LOCK = "_mleval_history.lock"
WINDOWS = "_windows"
OUTCOMES = "_outcomes"
#: Versions kept after a swap: the new one and the one before (its readers may still read it).
KEEP = 2
GRANULARITY, START, END = "granularity", "window_start", "window_end"
#: The columns the history adds to every row.
ADDED = ("run_id", "computed_at", "job", "fingerprint")
#: A lock older than this (seconds) is taken over even when its holder cannot be checked.
STALE_AFTER = 24 * 3600.0
UTC_TIME = pl.Datetime("us", "UTC")
_VERSION = re.compile(r"v(\d{6})")
_RUN_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
#: A Delta history's table log; the key of its commits' metadata that holds each run's job,
#: schema_version, column types and windows; the description of a new table.
DELTA_LOG = "_delta_log"
DELTA_KEY = "mleval_history"
DELTA_DESCRIPTION = (f"mleval_sql metrics history: the {DELTA_KEY} metadata of each run's commit "
                     "holds its job, schema_version, column types and windows")
#: Operations of other writers that change no row: the windows of the run before still hold.
_QUIET = frozenset({"OPTIMIZE", "VACUUM START", "VACUUM END", "SET TBLPROPERTIES",
                    "ADD CONSTRAINT", "DROP CONSTRAINT", "UPDATE TABLE METADATA",
                    "UPDATE FIELD METADATA"})


class HistoryWarning(UserWarning):
    """A history's lock taken over from a run that is gone, or lost to another run."""


def encode_start(value: date | datetime) -> str:
    """The text of a window start in its folder's name: ISO 8601, a timestamp with a time zone
    as wall-clock time there with its UTC offset (unambiguous when clocks go back), percent-
    encoded (``:`` is no file name on Windows, ``+`` reads as a space in some URLs).

    >>> encode_start(datetime(2024, 10, 27, 2, tzinfo=ZoneInfo("Europe/Paris")))
    '2024-10-27T02%3A00%3A00%2B02%3A00'
    >>> encode_start(date(2024, 3, 31))
    '2024-03-31'
    """
    return quote(value.isoformat(), safe="")


def decode_start(text: str, dtype: pl.DataType) -> date | datetime:
    """The window start :func:`encode_start` gave ``text`` for, as a value of ``dtype``.

    >>> decode_start("2024-10-27T02%3A00%3A00%2B01%3A00", pl.Datetime("us", "Europe/Paris"))
    datetime.datetime(2024, 10, 27, 2, 0, fold=1, tzinfo=zoneinfo.ZoneInfo(key='Europe/Paris'))
    """
    text = unquote(text)
    if dtype == pl.Date:
        return date.fromisoformat(text)
    value = datetime.fromisoformat(text)
    zone = getattr(dtype, "time_zone", None)
    return value.astimezone(ZoneInfo(zone)) if zone else value


def window_folder(granularity: str, start: date | datetime) -> str:
    """A window's folder in a version, relative to it.

    >>> window_folder("1d", date(2024, 3, 31))
    'granularity=1d/window_start=2024-03-31'
    """
    return f"{GRANULARITY}={quote(granularity, safe='')}/{START}={encode_start(start)}"


def _before_swap(version: Path) -> None:
    """Called once a new version is written in full, just before ``current`` is switched to it:
    a point where tests read the history or kill the run."""


@dataclass
class History:
    """A metrics history folder, opened for one job (see the module docstring)."""

    path: Path
    job: str
    #: Start over: every window is stale and the next :meth:`replace` keeps no other window.
    full_refresh: bool = False
    _token: str | None = field(default=None, repr=False)
    _write_meta: bool = field(default=False, repr=False)

    @classmethod
    def open(cls, path: str | os.PathLike[str], job: str, *,
             full_refresh: bool = False) -> History:
        """The history at ``path`` (made if missing) for ``job``: a :class:`DeltaHistory` where
        ``path`` is written ``delta://LOCATION`` or holds a ``_delta_log/`` folder.

        Raises ``InputError`` for a folder written by another job or by a newer layout, a
        folder with other files that is no history, and a history that cannot be read (nothing
        is changed then). With ``full_refresh`` each is started over instead, by the first
        :meth:`replace`: until its swap the old version stays readable, and files that are no
        part of a history are never deleted.
        """
        _check_job(job)
        if _delta_location(path) is not None:
            return DeltaHistory.open(path, job, full_refresh=full_refresh)
        root = Path(path)
        if root.exists() and not root.is_dir():
            raise InputError(f"history {root} is a file, not a folder")
        history = cls(root, job, full_refresh)
        if not root.exists() or not [p for p in os.listdir(root) if not p.startswith(".")]:
            root.mkdir(parents=True, exist_ok=True)
            history._save_meta()
            return history
        try:
            meta = _read_meta(root, hint=", and has other files: name an empty or new "
                              "folder, or start it over with full_refresh=True")
            _check_owner(root, meta, job)
            _current(root)  # a history that cannot be read is refused now, before any work
        except InputError:
            if not full_refresh:
                raise
            history._write_meta = True
        if _lexists_not_link(root / CURRENT):
            raise InputError(f"{root / CURRENT} is not a symbolic link: a history's current "
                             "version is one; move it away")
        return history

    @contextmanager
    def lock(self, *, timeout: float | None = None,
             stale_after: float = STALE_AFTER) -> Iterator[History]:
        """Hold the history's one writer lock while the block runs.

        A lock held by another run raises ``InputError`` naming it, at once or after waiting up
        to ``timeout`` seconds; one whose holder is gone (its pid is not alive on this host) or
        older than ``stale_after`` seconds is taken over, with a :class:`HistoryWarning`.
        """
        if self._token is not None:
            raise InputError(f"history {self.path} is locked by this History already")
        lock = self.path / LOCK
        token = secrets.token_hex(8)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fd = os.open(lock, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
            except FileExistsError:
                seen, holder = _read_lock(lock)
                if seen is None:  # released meanwhile
                    continue
                why = _stale(lock, holder, stale_after)
                if why and _take_over(lock, seen):
                    warnings.warn(f"took over the lock of history {self.path} from "
                                  f"{_holder(holder)}: {why}", HistoryWarning, stacklevel=3)
                    continue
                if why or (deadline is not None and time.monotonic() < deadline):
                    time.sleep(0.05)
                    continue
                waited = f" (waited {timeout:g} s)" if timeout else ""
                raise InputError(f"history {self.path} is being written by "
                                 f"{_holder(holder)}{waited}: one writer at a time. If that "
                                 f"run is gone, delete {lock}") from None
            try:
                os.write(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(),
                                         "started_at": _now().isoformat(),
                                         "token": token}).encode())
                os.fsync(fd)
            finally:
                os.close(fd)
            break
        self._token = token
        try:
            yield self
        finally:
            self._token = None
            if _read_lock(lock)[1].get("token") == token:
                lock.unlink()
            else:
                warnings.warn(f"the lock of history {self.path} was taken over by "
                              f"{_holder(_read_lock(lock)[1])} while this run held it",
                              HistoryWarning, stacklevel=3)

    def windows(self) -> pl.DataFrame:
        """The windows the current version keeps, one row each (empty when new).

        Columns: granularity, window_start, window_end, fingerprint, request_hash, run_id,
        computed_at, rows; sorted by granularity and window_start.
        """
        return _current(self.path)[1]

    def outcome_map(self) -> pl.DataFrame | None:
        """The map of outcome files to windows the current version keeps (None: none, one
        that cannot be read, or ``full_refresh``): a cache, see the module docstring."""
        if self.full_refresh:
            return None
        try:
            number = _current_number(self.path)
            if number is None:
                return None
            return pl.read_parquet(self.path / OUTCOMES / f"v{number:06d}.parquet",
                                   hive_partitioning=False)
        except (InputError, OSError, pl.exceptions.PolarsError):
            return None

    def stale(self, candidates: pl.DataFrame, request_hash: str) -> pl.DataFrame:
        """The ``candidates`` (granularity, window_start, window_end, fingerprint) to compute:
        those the history has not, or has from other inputs (fingerprint), another request
        (``request_hash``) or with another end; all with ``full_refresh``. Their columns, in
        their order, and ``reason``: new, fingerprint, request, window_end or full_refresh.
        """
        candidates = _windows_frame(candidates, "candidates", end=False)
        if self.full_refresh:
            return candidates.with_columns(reason=pl.lit("full_refresh"))
        stored = self.windows()
        if stored.height:
            _same_start(candidates, "candidates", stored)
        else:  # a new history's windows have no type yet
            stored = _manifest_frame(candidates.schema[START])
        theirs = stored.select(GRANULARITY, START, _end=END, _fingerprint="fingerprint",
                               _request="request_hash")
        joined = candidates.join(theirs, on=[GRANULARITY, START], how="left",
                                 maintain_order="left")
        reason = (pl.when(pl.col("_fingerprint").is_null()).then(pl.lit("new"))
                  .when(pl.col("_fingerprint") != pl.col("fingerprint")).then(pl.lit("fingerprint"))
                  .when(pl.col("_request") != request_hash).then(pl.lit("request")))
        if END in candidates.columns:
            reason = reason.when(pl.col("_end") != pl.col(END)).then(pl.lit("window_end"))
        return (joined.with_columns(reason=reason).filter(pl.col("reason").is_not_null())
                .select(*candidates.columns, "reason"))

    def replace(self, rows: pl.DataFrame, windows: pl.DataFrame, *, run_id: str,
                request_hash: str, outcomes: pl.DataFrame | None = None) -> int:
        """Make the version where each of ``windows`` (granularity, window_start, window_end,
        fingerprint) has the ``rows`` of its window (none: it keeps no rows) and every other
        window is as it was (none with ``full_refresh``), and make it current, with the map of
        ``outcomes`` (:meth:`outcome_map`). Returns its number (with no window to replace, the
        current one: nothing is written). Runs inside :meth:`lock`.

        Raises ``InputError`` for rows outside ``windows``, a column of another type than the
        kept rows have, or a run_id that is no file name; nothing is changed then.
        """
        rows, windows = self._checked(rows, windows, run_id)
        if not self.full_refresh:  # under the lock: what open() saw may have changed since
            _check_owner(self.path, _read_meta(self.path), self.job, now=" now")
        if self.full_refresh:  # nothing of the old version is read: it may be unreadable
            try:
                number = _current_number(self.path)
            except InputError:
                number = None
            stored = _manifest_frame(windows.schema[START])
        else:
            number, stored = _current(self.path)
            if not stored.height:
                stored = _manifest_frame(windows.schema[START])
        if not windows.height and not self.full_refresh:
            return number or 0  # nothing to replace: the current version stays
        kept = stored.join(windows.select(GRANULARITY, START), on=[GRANULARITY, START],
                           how="anti")
        if kept.height:
            _same_start(windows, "windows", kept)
            _same_types(rows, kept, self.path / f"v{number:06d}")
        _clean(self.path, number)
        new = max([*_versions(self.path), number or 0]) + 1
        version = self.path / f"v{new:06d}"
        manifest = self.path / WINDOWS / f"v{new:06d}.parquet"
        mapped = self.path / OUTCOMES / f"v{new:06d}.parquet"
        try:
            if kept.height:
                _link_windows(kept, self.path / f"v{number:06d}", version)
            version.mkdir(exist_ok=True)  # a version of no rows is an empty folder
            written = _write_windows(rows, windows, version, job=self.job, run_id=run_id)
            table = _new_manifest(kept, windows, rows, request_hash, run_id, written)
            manifest.parent.mkdir(exist_ok=True)
            with open(manifest, "wb") as handle:
                table.write_parquet(handle)
                handle.flush()
                os.fsync(handle.fileno())
            if outcomes is not None:
                mapped.parent.mkdir(exist_ok=True)
                with open(mapped, "wb") as handle:
                    outcomes.write_parquet(handle)
                    handle.flush()
                    os.fsync(handle.fileno())
                _sync_folder(mapped.parent)
            _sync_tree(version)
            _sync_folder(manifest.parent)
            _before_swap(version)
            self._check_held()
            link = self.path / f".{CURRENT}.{secrets.token_hex(8)}"
            os.symlink(version.name, link)
            try:
                os.replace(link, self.path / CURRENT)
            except BaseException:
                link.unlink(missing_ok=True)
                raise
        except BaseException:
            if _link_target(self.path / CURRENT) != version.name:  # not swapped: it goes
                _remove_version(self.path, new)
            raise
        _sync_folder(self.path)
        if self._write_meta:  # after the swap: a run killed before it leaves the old owner
            self._save_meta()
        self.full_refresh = self._write_meta = False
        versions = _versions(self.path)
        for old in versions[:-KEEP]:
            _remove_version(self.path, old)
        return new

    def _checked(self, rows: pl.DataFrame, windows: pl.DataFrame,
                 run_id: str) -> tuple[pl.DataFrame, pl.DataFrame]:
        """What every replace checks first: the lock, the run_id, the windows and the rows."""
        self._check_held()
        if not isinstance(run_id, str) or not _RUN_ID.fullmatch(run_id):
            raise InputError(f"run_id must be letters, digits, '.', '_' or '-' (a file name), "
                             f"got {run_id!r}")
        windows = _windows_frame(windows, "windows", end=True)
        return _check_rows(rows, windows), windows

    def _check_held(self) -> None:
        if self._token is None:
            raise InputError("replace runs inside `with history.lock():`, one writer at a time")
        if _read_lock(self.path / LOCK)[1].get("token") != self._token:
            raise InputError(f"the lock of history {self.path} was taken over by "
                             f"{_holder(_read_lock(self.path / LOCK)[1])}: this run stops "
                             "without changing it")

    def _save_meta(self) -> None:
        with atomic_output(self.path / META) as part:
            part.write_text(json.dumps({"schema_version": SCHEMA_VERSION, "job": self.job,
                                        "created_at": _now().isoformat()}, indent=2) + "\n")


class DeltaHistory(History):
    """A metrics history kept as a Delta table (``delta://LOCATION``, see "A Delta history" in
    the module docstring): :class:`History`'s interface and lock, one Delta commit per run.

    >>> import tempfile
    >>> history = DeltaHistory.open(Path(tempfile.mkdtemp()) / "history", job="nightly")
    >>> history.windows().height, read(f"delta://{history.path}").height
    (0, 0)
    """

    @classmethod
    def open(cls, path: str | os.PathLike[str], job: str, *,
             full_refresh: bool = False) -> DeltaHistory:
        """The Delta history at ``path`` (``delta://LOCATION`` or LOCATION, a local folder; made
        if missing) for ``job``.

        Raises ``InputError`` without deltalake (the ``delta`` extra), for a folder with other
        files and no ``_delta_log/``, a Delta table none of whose commits is a history's, and a
        table whose log cannot be read; and, unless ``full_refresh`` (the first :meth:`replace`
        starts it over, in one commit), for a history of another job or a newer layout, or one
        that another writer changed since its last run.
        """
        _check_job(job)
        _deltalake()
        root = _delta_location(path) or Path(os.fspath(path))
        if root.exists() and not root.is_dir():
            raise InputError(f"history {root} is a file, not a folder")
        history = cls(root, job, full_refresh)
        if not root.exists() or not [p for p in os.listdir(root) if not p.startswith(".")]:
            # an empty log says "Delta" to open() and read() until the first commit
            (root / DELTA_LOG).mkdir(parents=True, exist_ok=True)
            return history
        if not (root / DELTA_LOG).is_dir():
            raise InputError(f"{root} has files but no {DELTA_LOG}/ folder: it is no Delta "
                             "table. A Delta history is made in an empty or new folder")
        state = _delta_state(root)
        if not full_refresh:
            state.check(root, job)
        return history

    def windows(self) -> pl.DataFrame:
        """The windows the table's latest version keeps, as :meth:`History.windows` (none with
        ``full_refresh`` where the table cannot be kept)."""
        state = _delta_state(self.path)
        if self.full_refresh and state.problem:
            return _manifest_frame(UTC_TIME)
        state.check(self.path)
        if state.meta is None:
            return _manifest_frame(UTC_TIME)
        return _delta_manifest(state.meta, self.path)

    def outcome_map(self) -> pl.DataFrame | None:
        """The map of outcome files to windows of the table's latest run, as
        :meth:`History.outcome_map` gives it."""
        if self.full_refresh:
            return None
        try:
            state = _delta_state(self.path)
            text = None if state.meta is None or state.problem else state.meta.get("outcomes")
            if not isinstance(text, str):
                return None
            return pl.read_ipc_stream(io.BytesIO(zlib.decompress(base64.b64decode(
                text, validate=True))))
        except (InputError, TypeError, ValueError, OSError, zlib.error,
                pl.exceptions.PolarsError):
            return None

    def replace(self, rows: pl.DataFrame, windows: pl.DataFrame, *, run_id: str,
                request_hash: str, outcomes: pl.DataFrame | None = None) -> int:
        """As :meth:`History.replace`, in one Delta commit: an overwrite whose predicate is the
        ``windows`` (a replaceWhere: their rows go, the ``rows`` come) and whose commit metadata
        is the new manifest; with no row kept, the whole table is overwritten. Returns the
        version committed (-1: no table yet).

        Raises ``InputError`` as :meth:`History.replace` does, and where another writer
        committed since this run read the table; nothing is changed then.
        """
        rows, windows = self._checked(rows, windows, run_id)
        deltalake = _deltalake()
        state = _delta_state(self.path)
        if not self.full_refresh:  # under the lock: what open() saw may have changed since
            state.check(self.path, self.job, now=" now")
        start = windows.schema[START]
        stored = _manifest_frame(start)
        if not self.full_refresh and state.meta is not None:
            stored = _delta_manifest(state.meta, self.path)
            if not stored.height:
                stored = _manifest_frame(start)
        if not windows.height and not self.full_refresh:  # nothing to replace
            return -1 if state.table is None else state.table.version()
        kept = stored.join(windows.select(GRANULARITY, START), on=[GRANULARITY, START],
                           how="anti")
        if kept.height:
            _same_start(windows, "windows", kept)
        written = _now()
        data = _with_added(rows, windows, job=self.job, run_id=run_id, written=written)
        options: dict[str, Any] = {"mode": "overwrite", "partition_by": [GRANULARITY]}
        if kept.filter(pl.col("rows") > 0).height:  # some rows stay: replace those of windows
            assert state.meta is not None and state.table is not None
            before = _delta_schema(state.meta, self.path)
            _same_delta_types(rows, before, self.path)
            schema = {**before, **{n: t for n, t in data.schema.items()
                                   if t != pl.Null or n not in before}}
            options.update(predicate=_replace_where(windows), schema_mode="merge")
        else:  # no row stays: the table is overwritten whole, its columns too
            schema = dict(data.schema)
            if state.table is not None:
                options.update(schema_mode="overwrite")
            else:
                options.update(name="mleval_history", description=DELTA_DESCRIPTION)
        manifest = _new_manifest(kept, windows, rows, request_hash, run_id, written)
        meta = {"schema_version": SCHEMA_VERSION, "job": self.job, "run_id": run_id,
                "schema": _encode_schema(schema), "windows": _encode_manifest(manifest)}
        if outcomes is not None:
            meta["outcomes"] = _encode_frame(outcomes)
        # no retry: a commit on another version than the one read would carry a wrong manifest
        options["commit_properties"] = deltalake.CommitProperties(
            custom_metadata={DELTA_KEY: meta}, max_commit_retries=0)
        self._check_held()
        target = str(self.path) if state.table is None else state.table
        try:
            deltalake.write_deltalake(target, _delta_frame(data), **options)
        except deltalake.exceptions.CommitFailedError as error:
            raise InputError(f"history {self.path}: another writer committed to the Delta "
                             f"table since this run read it ({_first_line(error)}); nothing "
                             "was changed: one writer at a time") from None
        except deltalake.exceptions.SchemaMismatchError as error:
            raise InputError(f"rows do not fit the columns of the Delta history {self.path}: "
                             f"{_first_line(error)}; nothing was changed (full_refresh=True "
                             "starts the history over)") from None
        self.full_refresh = False
        return int(deltalake.DeltaTable(str(self.path)).version())


def read(path: str | os.PathLike[str]) -> pl.DataFrame:
    """The rows of the history at ``path``'s current version, by granularity and
    window_start, each window's rows in the order its run wrote them; optional columns a
    window's run did not write are null. Raises ``InputError`` for a folder that is no history.
    A Delta history (``delta://LOCATION``, or a folder holding ``_delta_log/``) is read at its
    latest version, with the same columns and types.
    """
    location = _delta_location(path)
    if location is not None:
        return _read_delta(location)
    root = Path(path)
    _read_meta(root)
    for attempt in range(3):
        number, windows = _current(root)
        if number is None:
            break
        version = root / f"v{number:06d}"  # resolved once: one version, whatever swaps meanwhile
        try:
            frames = [pl.read_parquet(file, hive_partitioning=False)
                      for granularity, start in windows.filter(pl.col("rows") > 0)
                      .select(GRANULARITY, START).iter_rows()
                      for file in _window_files(version, window_folder(granularity, start))]
        except FileNotFoundError as error:
            if attempt == 2:
                raise InputError(f"history {root}: {error.filename} is gone (a damaged "
                                 "history, or one written twice while this read)") from error
            continue  # two runs swapped while this read: the version read is gone, read anew
        if frames:
            return pl.concat(frames, how="diagonal_relaxed")
        break
    return _no_rows(windows.schema[START])


def _no_rows(start: pl.DataType) -> pl.DataFrame:
    """The rows of a history that has none: the window's columns and those it adds."""
    return _manifest_frame(start).select(GRANULARITY, START, END, *(
        pl.lit(None, dtype=UTC_TIME if name == "computed_at" else pl.String).alias(name)
        for name in ADDED))


# -- the folder's state ------------------------------------------------------------------------

def _read_meta(root: Path, hint: str = "") -> dict[str, Any]:
    file = root / META
    if not root.is_dir():
        raise InputError(f"no history at {root}: no such folder")
    if not file.exists():
        raise InputError(f"{root} is not a metrics history (no {META}){hint}")
    try:
        meta = json.loads(file.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise InputError(f"cannot read {file}: {error}; nothing was changed (full_refresh=True "
                         "starts the history over)") from error
    return _checked_meta(meta, root, file)


def _checked_meta(meta: Any, root: Path, source: object) -> dict[str, Any]:
    """``meta``, the description of the history at ``root`` read from ``source``; an
    ``InputError`` if it is none, or of a newer layout."""
    version = meta.get("schema_version") if isinstance(meta, dict) else None
    if not isinstance(version, int) or version < 1 or not isinstance(meta.get("job"), str):
        raise InputError(f"cannot read {source}: not a history's description (schema_version, "
                         "job); nothing was changed (full_refresh=True starts the history over)")
    if version > SCHEMA_VERSION:
        raise InputError(f"history {root} has schema_version {version}, newer than this "
                         f"mleval_sql's {SCHEMA_VERSION}: upgrade mleval_sql to write it")
    return meta


def _check_owner(root: Path, meta: dict[str, Any], job: str, *, now: str = "") -> None:
    """An ``InputError`` if the history at ``root`` (described by ``meta``) is not ``job``'s."""
    if meta["job"] != job:
        raise InputError(f"history {root} belongs to the job {meta['job']!r}{now}, not {job!r}: "
                         "name another folder, or start it over with full_refresh=True")


def _current_number(root: Path) -> int | None:
    """The number of the version ``current`` names, or None without one."""
    link = root / CURRENT
    if not os.path.lexists(link):
        return None
    target = os.readlink(link) if link.is_symlink() else ""
    found = _VERSION.fullmatch(target)
    if not found or not (root / target).is_dir():
        raise InputError(f"{link} does not name a version folder ({target or 'not a link'}); "
                         "nothing was changed (full_refresh=True starts the history over)")
    return int(found.group(1))


def _current(root: Path) -> tuple[int | None, pl.DataFrame]:
    """The current version's number and windows; (None, no windows) for a new history."""
    number = _current_number(root)
    if number is None:
        return None, _manifest_frame(UTC_TIME)
    file = root / WINDOWS / f"v{number:06d}.parquet"
    try:
        table = pl.read_parquet(file, hive_partitioning=False)
    except (OSError, pl.exceptions.PolarsError) as error:
        raise InputError(f"cannot read {file}, the windows of history {root}: "
                         f"{' '.join(str(error).split())[:200]}; nothing was changed "
                         "(full_refresh=True starts the history over)") from error
    expected = _manifest_frame(table.schema.get(START, pl.Null)).schema
    if table.schema != expected or not table.schema[START].is_temporal():
        raise InputError(f"cannot read {file}, the windows of history {root}: its columns are "
                         f"{dict(table.schema)}, not {dict(expected)}; nothing was changed "
                         "(full_refresh=True starts the history over)")
    return number, table.sort(GRANULARITY, START)


def _manifest_frame(start: pl.DataType) -> pl.DataFrame:
    return pl.DataFrame(schema={GRANULARITY: pl.String, START: start, END: start,
                                "fingerprint": pl.String, "request_hash": pl.String,
                                "run_id": pl.String, "computed_at": UTC_TIME, "rows": pl.Int64})


def _versions(root: Path) -> list[int]:
    """The numbers of the version folders and window tables in ``root``, whole or not."""
    found = {int(m.group(1)) for p in os.listdir(root) if (m := _VERSION.fullmatch(p))}
    for tables in (WINDOWS, OUTCOMES):
        if (root / tables).is_dir():
            found |= {int(m.group(1)) for p in os.listdir(root / tables)
                      if (m := re.fullmatch(r"v(\d{6})\.parquet", p))}
    return sorted(found)


def _clean(root: Path, current: int | None) -> None:
    """Delete what killed runs left: versions after the current one, temporary links."""
    for number in _versions(root):
        if current is None or number > current:
            _remove_version(root, number)
    for name in os.listdir(root):
        if name.startswith((f".{CURRENT}.", f".{META}.")):
            os.unlink(root / name)


def _remove_version(root: Path, number: int) -> None:
    # the folder first: a window table without its folder is a leftover the next run deletes
    shutil.rmtree(root / f"v{number:06d}", ignore_errors=True)
    (root / WINDOWS / f"v{number:06d}.parquet").unlink(missing_ok=True)
    (root / OUTCOMES / f"v{number:06d}.parquet").unlink(missing_ok=True)


def _lexists_not_link(path: Path) -> bool:
    return os.path.lexists(path) and not path.is_symlink()


# -- writing a version -----------------------------------------------------------------------

def _windows_frame(frame: pl.DataFrame, name: str, *, end: bool) -> pl.DataFrame:
    """``frame``'s windows, checked: the key columns, each window once, a fingerprint each."""
    needed = [GRANULARITY, START, *([END] if end else []), "fingerprint"]
    missing = [c for c in needed if c not in frame.columns]
    if missing:
        raise InputError(f"{name} lacks the column{'s' if len(missing) > 1 else ''} "
                         f"{', '.join(missing)}: a window is {', '.join(needed)}")
    if frame.schema[GRANULARITY] != pl.String or frame.schema["fingerprint"] != pl.String:
        raise InputError(f"{name}: granularity and fingerprint must be text, got "
                         f"{frame.schema[GRANULARITY]} and {frame.schema['fingerprint']}")
    for column in (START, END) if END in frame.columns else (START,):
        if not frame.schema[column].is_temporal() or frame.schema[column] == pl.Time:
            raise InputError(f"{name}: {column} must be a date or a timestamp, got "
                             f"{frame.schema[column]}")
    if END in frame.columns and frame.schema[END] != frame.schema[START]:
        raise InputError(f"{name}: window_end is {frame.schema[END]}, but window_start "
                         f"{frame.schema[START]}: give them one type")
    nulls = [c for c in needed if frame[c].null_count()]
    if nulls:
        raise InputError(f"{name}: {nulls[0]} is null in {frame[nulls[0]].null_count()} rows")
    twice = frame.filter(frame.select(GRANULARITY, START).is_duplicated())
    if twice.height:
        raise InputError(f"{name} names the window ({twice[GRANULARITY][0]}, "
                         f"{twice[START][0]}) more than once")
    return frame


def _same_start(frame: pl.DataFrame, name: str, stored: pl.DataFrame) -> None:
    if frame.schema[START] != stored.schema[START]:
        raise InputError(f"{name}: window_start is {frame.schema[START]}, but the history's is "
                         f"{stored.schema[START]}: one type in one table (a new time zone or "
                         "time column starts the history over: full_refresh=True)")


def _check_rows(rows: pl.DataFrame, windows: pl.DataFrame) -> pl.DataFrame:
    missing = [c for c in (GRANULARITY, START) if c not in rows.columns]
    if missing:
        raise InputError(f"rows lack the column {missing[0]}: each row names its window")
    ours = [c for c in ADDED if c in rows.columns]
    if ours:
        raise InputError(f"rows have the column {ours[0]!r}, which the history adds")
    if not rows.height:  # no rows, whatever their types: nothing to write
        return windows.select(GRANULARITY, START).clear()
    if rows.schema[START] != windows.schema[START]:
        raise InputError(f"rows: window_start is {rows.schema[START]}, but {windows.schema[START]}"
                         " in windows")
    if rows.schema[GRANULARITY] != pl.String:
        raise InputError(f"rows: granularity must be text, got {rows.schema[GRANULARITY]}")
    outside = rows.join(windows, on=[GRANULARITY, START], how="anti")
    if outside.height:
        raise InputError(f"rows of the window ({outside[GRANULARITY][0]}, {outside[START][0]})"
                         f", which is not in windows ({outside.height} rows outside them)")
    return rows


def _same_types(rows: pl.DataFrame, kept: pl.DataFrame, version: Path) -> None:
    """An ``InputError`` if a column of ``rows`` has another type in the kept windows' files
    (one file per run: a run writes one schema)."""
    for run, granularity, start in (kept.filter(pl.col("rows") > 0)
                                    .unique("run_id", keep="first", maintain_order=True)
                                    .select("run_id", GRANULARITY, START).iter_rows()):
        file = version / window_folder(granularity, start) / f"part-{run}.parquet"
        try:
            schema = pl.read_parquet_schema(file)
        except (OSError, pl.exceptions.PolarsError) as error:
            raise InputError(f"cannot read {file} of the history: {error}; nothing was "
                             "changed (full_refresh=True starts the history over)") from error
        _same_types_as(rows, dict(schema), f"the history's rows of run {run}")


def _link_windows(kept: pl.DataFrame, old: Path, new: Path) -> None:
    """Hard links in ``new`` to the files of the ``kept`` windows in ``old``: no copies."""
    for granularity, start in kept.filter(pl.col("rows") > 0).select(GRANULARITY,
                                                                     START).iter_rows():
        folder = window_folder(granularity, start)
        (new / folder).mkdir(parents=True)
        try:
            files = _window_files(old, folder)
        except FileNotFoundError as error:
            raise InputError(f"history version {old} lacks the files of the window {folder} "
                             "it lists; nothing was changed (full_refresh=True starts it "
                             "over)") from error
        for file in files:
            os.link(file, new / folder / file.name)


def _write_windows(rows: pl.DataFrame, windows: pl.DataFrame, version: Path, *, job: str,
                   run_id: str) -> datetime:
    """Write each window's rows to its folder in ``version``; returns the time written."""
    written = _now()
    rows = _with_added(rows, windows, job=job, run_id=run_id, written=written)
    # parts by polars' keys, not Python's: 02:00 CEST and 02:00 CET, the hours of a night when
    # clocks go back, are equal as Python datetimes of one zone (fold is not compared)
    for part in rows.partition_by(GRANULARITY, START, maintain_order=True):
        folder = version / window_folder(part[GRANULARITY][0], part[START][0])
        folder.mkdir(parents=True)  # fails, rather than mixing, if two windows met in one
        with open(folder / f"part-{run_id}.parquet", "wb") as handle:
            part.write_parquet(handle)
            handle.flush()
            os.fsync(handle.fileno())  # on disk before the swap makes it visible
    return written


def _with_added(rows: pl.DataFrame, windows: pl.DataFrame, *, job: str, run_id: str,
                written: datetime) -> pl.DataFrame:
    """``rows`` with the columns the history adds (:data:`ADDED`)."""
    return rows.with_columns(run_id=pl.lit(run_id), computed_at=pl.lit(written, dtype=UTC_TIME),
                             job=pl.lit(job)).join(
        windows.select(GRANULARITY, START, "fingerprint"), on=[GRANULARITY, START],
        how="left", maintain_order="left")


def _new_manifest(kept: pl.DataFrame, windows: pl.DataFrame, rows: pl.DataFrame,
                  request_hash: str, run_id: str, written: datetime) -> pl.DataFrame:
    counts = rows.group_by(GRANULARITY, START).agg(rows=pl.len().cast(pl.Int64))
    new = (windows.join(counts, on=[GRANULARITY, START], how="left")
           .select(GRANULARITY, START, END, "fingerprint", request_hash=pl.lit(request_hash),
                   run_id=pl.lit(run_id), computed_at=pl.lit(written, dtype=UTC_TIME),
                   rows=pl.col("rows").fill_null(0)))
    schema = _manifest_frame(windows.schema[START]).schema
    return pl.concat([kept.cast(schema), new.cast(schema)]).sort(GRANULARITY, START)


def _window_files(version: Path, folder: str) -> list[Path]:
    """The data files of a window of ``rows`` > 0; ``FileNotFoundError`` if there are none (a
    version deleted while it was read)."""
    names = sorted(f for f in os.listdir(version / folder) if f.endswith(".parquet"))
    if not names:
        raise FileNotFoundError(errno.ENOENT, "no data files", str(version / folder))
    return [version / folder / name for name in names]


def _link_target(link: Path) -> str | None:
    try:
        return os.readlink(link)
    except OSError:
        return None


def _sync_tree(folder: Path) -> None:
    """fsync every folder of ``folder``: the links and files made there survive a crash."""
    for inner, _, _ in os.walk(folder, topdown=False):
        _sync_folder(Path(inner))


def _sync_folder(folder: Path) -> None:
    if os.name != "posix":  # no fsync of a folder there
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    except OSError as error:  # some filesystems refuse it for folders
        if error.errno not in (errno.EINVAL, errno.ENOTSUP):
            raise
    finally:
        os.close(fd)


# -- a Delta history --------------------------------------------------------------------------

@dataclass
class _DeltaState:
    """A Delta history's table at its latest version (None: no commit yet), the
    :data:`DELTA_KEY` metadata of its latest run, and why it cannot be kept ('' where it can;
    ``full_refresh`` starts it over)."""

    table: Any
    meta: dict[str, Any] | None
    problem: str = ""

    def check(self, root: Path, job: str | None = None, *, now: str = "") -> None:
        if self.problem:
            raise InputError(self.problem)
        if job is not None and self.meta is not None:
            _check_owner(root, self.meta, job, now=now)


def _deltalake() -> Any:
    """deltalake, imported where a Delta history is used (it is an extra)."""
    try:
        import deltalake
    except ImportError:
        raise InputError("a Delta history needs deltalake: pip install 'mleval_sql[delta]'"
                         ) from None
    return deltalake


def _delta_location(path: str | os.PathLike[str]) -> Path | None:
    """The folder of the Delta history ``path`` names (``delta://LOCATION``, or a folder that
    holds ``_delta_log/``); None for a folder history."""
    text = os.fspath(path)
    if text[:8].lower() == "delta://":
        location = text[8:]
        if not location or "://" in location:
            raise InputError(f"a Delta history is delta://FOLDER, a local folder (not object "
                             f"storage), got {text!r}")
        return Path(location)
    return Path(text) if (Path(text) / DELTA_LOG).is_dir() else None


def _delta_state(root: Path) -> _DeltaState:
    """The state of the Delta history at ``root``; ``InputError`` for a table whose log cannot
    be read or none of whose commits is a history's run."""
    deltalake = _deltalake()
    try:
        table = deltalake.DeltaTable(str(root))
    except deltalake.exceptions.TableNotFoundError:  # a missing or empty log: no commit yet
        return _DeltaState(None, None)
    except (deltalake.exceptions.DeltaError, OSError) as error:
        raise InputError(f"cannot read the Delta history {root}: {_first_line(error)}; nothing "
                         "was changed") from None
    foreign = None
    for number in range(table.version(), -1, -1):
        info = _commit_info(root, number)
        meta = info.get(DELTA_KEY)
        if meta is not None:
            break
        if foreign is None and info.get("operation") not in _QUIET:
            foreign = (number, info.get("operation"))
    else:
        raise InputError(f"{root} is a Delta table but not a metrics history: none of its "
                         f"commits has {DELTA_KEY} metadata. Name another folder")
    try:
        meta = _checked_meta(meta, root, f"the {DELTA_KEY} metadata of commit {number} of {root}")
    except InputError as error:  # as a folder history's description
        return _DeltaState(table, None, str(error))
    if foreign is not None:
        return _DeltaState(table, None, f"the Delta history {root} was changed by another "
                           f"writer in version {foreign[0]} ({foreign[1]}), after the run of "
                           f"version {number}: its windows no longer describe its rows; nothing "
                           "was changed (full_refresh=True starts the history over)")
    return _DeltaState(table, meta)


def _commit_info(root: Path, number: int) -> dict[str, Any]:
    """The ``commitInfo`` of version ``number`` of the table at ``root``, read from its log
    file (``DeltaTable.history`` reads the newest commits, whatever the version loaded)."""
    file = root / DELTA_LOG / f"{number:020d}.json"
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
        actions = [json.loads(line) for line in lines if line.strip()]
    except FileNotFoundError:
        raise InputError(f"cannot read the Delta history {root}: {file} is gone (a log cleaned "
                         "up before the history's last run); nothing was changed") from None
    except (OSError, UnicodeDecodeError, ValueError) as error:
        raise InputError(f"cannot read {file}: {error}; nothing was changed") from error
    found = [a["commitInfo"] for a in actions if isinstance(a, dict) and "commitInfo" in a]
    return found[0] if found and isinstance(found[0], dict) else {}


def _delta_manifest(meta: dict[str, Any], root: Path) -> pl.DataFrame:
    """The windows a run's metadata lists, typed as :meth:`History.windows` gives them."""
    start = _delta_schema(meta, root).get(START)
    try:
        if start is None or not start.is_temporal():
            raise ValueError(f"window_start is {start}")
        expected = _manifest_frame(start).schema
        columns = meta["windows"]
        frame = pl.DataFrame([pl.Series(name, columns[name], dtype=pl.String if
                                        dtype.is_temporal() else dtype, strict=True)
                              for name, dtype in expected.items()])
        frame = frame.with_columns(_parse_times(pl.col(START), start),
                                   _parse_times(pl.col(END), start),
                                   _parse_times(pl.col("computed_at"), UTC_TIME))
    except (KeyError, TypeError, ValueError, pl.exceptions.PolarsError) as error:
        raise InputError(f"cannot read the windows of the Delta history {root} ({DELTA_KEY} of "
                         f"its latest run): {' '.join(str(error).split())[:200]}; nothing was "
                         "changed (full_refresh=True starts the history over)") from error
    return frame.sort(GRANULARITY, START)


def _encode_manifest(manifest: pl.DataFrame) -> dict[str, list[Any]]:
    """The windows as JSON: a list per column, times as ISO 8601 text (a timestamp with a time
    zone as wall-clock time there with its UTC offset)."""
    times = [c for c in (START, END, "computed_at") if c in manifest.columns]
    return manifest.with_columns(pl.col(times).dt.to_string("iso")).to_dict(as_series=False)


def _parse_times(text: pl.Expr, dtype: pl.DataType) -> pl.Expr:
    """The values of :func:`_encode_manifest`'s text, of ``dtype``."""
    if dtype == pl.Date:
        return text.str.to_date("%Y-%m-%d")
    unit, zone = getattr(dtype, "time_unit", None) or "us", getattr(dtype, "time_zone", None)
    if zone is None:
        return text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", time_unit=unit)
    return text.str.to_datetime("%Y-%m-%d %H:%M:%S%.f%:z", time_unit=unit,
                                time_zone="UTC").dt.convert_time_zone(zone)


def _encode_schema(schema: dict[str, pl.DataType]) -> str:
    """The rows' column types, which Delta has not all of (unsigned integers, time zones,
    units, categories, null columns): an Arrow IPC stream of no rows, zlib, base64."""
    return _encode_frame(pl.DataFrame(schema=schema))


def _encode_frame(frame: pl.DataFrame) -> str:
    """``frame`` as text: an Arrow IPC stream, zlib, base64."""
    buffer = io.BytesIO()
    frame.write_ipc_stream(buffer)
    return base64.b64encode(zlib.compress(buffer.getvalue(), 9)).decode("ascii")


def _delta_schema(meta: dict[str, Any], root: Path) -> dict[str, pl.DataType]:
    try:
        data = zlib.decompress(base64.b64decode(meta["schema"], validate=True))
        return dict(pl.read_ipc_stream(io.BytesIO(data)).schema)
    except (KeyError, TypeError, ValueError, OSError, zlib.error,
            pl.exceptions.PolarsError) as error:
        raise InputError(f"cannot read the column types of the Delta history {root} "
                         f"({DELTA_KEY}.schema of its latest run): "
                         f"{' '.join(str(error).split())[:200]}; nothing was changed "
                         "(full_refresh=True starts the history over)") from error


def _same_delta_types(rows: pl.DataFrame, before: dict[str, pl.DataType], root: Path) -> None:
    """An ``InputError`` if a column of ``rows`` has another type in the Delta history."""
    _same_types_as(rows, before, f"the Delta history {root}")


def _same_types_as(rows: pl.DataFrame, before: Mapping[str, pl.DataType], where: str) -> None:
    """An ``InputError`` if a column of ``rows`` has another type in ``before`` (the columns
    of the history's rows ``where`` says); an all-null column takes any type."""
    for name, dtype in rows.schema.items():
        theirs = before.get(name)
        if theirs is not None and pl.Null not in (dtype, theirs) and dtype != theirs:
            raise InputError(f"rows: column {name!r} is {dtype}, but {theirs} in {where}: "
                             "readers take the table by column name, one type each; cast "
                             "it, or start the history over with full_refresh=True")


def _delta_frame(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` in types Delta has (the types it had are kept in the commit's metadata, and
    restored by :func:`read`): no null columns, no unsigned integers, no categories, timestamps
    in microseconds."""
    wider = {pl.UInt8: pl.Int16, pl.UInt16: pl.Int32, pl.UInt32: pl.Int64, pl.UInt64: pl.Int64}
    columns = []
    for name, dtype in frame.schema.items():
        if dtype == pl.Null:
            continue
        if dtype in wider:
            columns.append(pl.col(name).cast(wider[dtype]))
        elif dtype == pl.Categorical or isinstance(dtype, pl.Enum):
            columns.append(pl.col(name).cast(pl.String))
        elif isinstance(dtype, pl.Datetime) and dtype.time_unit != "us":
            columns.append(pl.col(name).dt.cast_time_unit("us"))
        else:
            columns.append(pl.col(name))
    return frame.select(columns)


def _replace_where(windows: pl.DataFrame) -> str:
    """The predicate of the ``windows``' rows in the Delta table, as DataFusion (delta-rs)
    reads it: built by sqlglot, which renders and quotes every literal. A timestamp is compared
    as microseconds since 1970 cast to the column's Arrow type (the kernel compares no
    timestamps of two units or zones)."""
    from sqlglot import exp

    dtype = windows.schema[START]
    zone = getattr(dtype, "time_zone", None)
    arrow = f'Timestamp(Microsecond, {"Some(" + json.dumps("UTC") + ")" if zone else "None"})'
    parts = []
    for (granularity,), group in windows.group_by(GRANULARITY, maintain_order=True):
        if dtype == pl.Date:
            starts = [exp.cast(exp.Literal.string(text), exp.DataType.build("DATE"))
                      for text in group[START].dt.to_string("%Y-%m-%d")]
        else:
            starts = [exp.Anonymous(this="arrow_cast", expressions=[
                exp.Literal.number(micros), exp.Literal.string(arrow)])
                for micros in group[START].dt.cast_time_unit("us").to_physical()]
        parts.append(exp.and_(
            exp.column(GRANULARITY, quoted=True).eq(exp.Literal.string(str(granularity))),
            exp.column(START, quoted=True).isin(*starts)))
    return exp.or_(*parts).sql(dialect="postgres")


def _read_delta(root: Path) -> pl.DataFrame:
    """The rows of the Delta history at ``root`` (see :func:`read`)."""
    if not root.is_dir():
        raise InputError(f"no history at {root}: no such folder")
    state = _delta_state(root)
    state.check(root)
    if state.table is None or state.meta is None:
        return _no_rows(UTC_TIME)
    schema = _delta_schema(state.meta, root)
    scan = pl.scan_delta(state.table, version=state.table.version())
    there = scan.collect_schema()
    # each column of the type its run wrote it in (a window's zone, unsigned integers...), those
    # the history adds last, as in a folder history's files
    names = [*(n for n in schema if n not in ADDED), *(n for n in ADDED if n in schema)]
    rows = scan.select(*(pl.col(n).cast(schema[n]) if n in there
                         else pl.lit(None, dtype=schema[n]).alias(n) for n in names),
                       *(n for n in there if n not in schema)).collect()
    if not rows.height:
        return _no_rows(schema[START])
    return rows.sort(GRANULARITY, START, maintain_order=True)


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


# -- the lock --------------------------------------------------------------------------------

def _read_lock(lock: Path) -> tuple[bytes | None, dict[str, Any]]:
    """The lock file's bytes (None: there is none) and what they say ({} while it is being
    written)."""
    try:
        seen = lock.read_bytes()
    except FileNotFoundError:
        return None, {}
    try:
        holder = json.loads(seen)
    except ValueError:
        return seen, {}
    return seen, holder if isinstance(holder, dict) else {}


def _stale(lock: Path, holder: dict[str, Any], stale_after: float) -> str:
    """Why the lock of ``holder`` is stale, or ''."""
    pid, host = holder.get("pid"), holder.get("host")
    if host == socket.gethostname() and isinstance(pid, int) and pid > 0 and not _alive(pid):
        return f"process {pid} is not running"
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return ""
    return f"the lock is {age / 3600:.1f} h old" if age > stale_after else ""


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process
        return True
    return True


def _take_over(lock: Path, seen: bytes) -> bool:
    """Remove the lock whose bytes were ``seen``, unless another run has made a new one since;
    of two runs taking over one lock, one does."""
    grabbed = lock.with_name(f".{lock.name}.{secrets.token_hex(8)}")
    try:
        os.rename(lock, grabbed)  # one rename of a file succeeds: the run doing it decides
    except FileNotFoundError:
        return False
    if grabbed.read_bytes() != seen:  # a new lock made meanwhile: put it back
        with suppress(FileExistsError):  # a third run's lock: the lock put back is lost
            os.link(grabbed, lock)
        grabbed.unlink()
        return False
    grabbed.unlink()
    return True


def _holder(holder: dict[str, Any]) -> str:
    if not holder:  # a lock file being written, or left empty
        return "a run that has not said which yet"
    return (f"pid {holder.get('pid')} on {holder.get('host')}, since "
            f"{holder.get('started_at')}")


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _check_job(job: str) -> None:
    if not isinstance(job, str) or not job.strip():
        raise InputError(f"a history's job must be a non-empty name, got {job!r}")
