"""The metrics history: a first write and its reading, runs that replace some windows and link
the rest, which windows are stale, readers during a replace, a run killed before its swap, one
writer at a time, and the folders it refuses."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import duckdb
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mleval_sql.errors import InputError
from mleval_sql.history import History, HistoryWarning, decode_start, encode_start, read

store = sys.modules["mleval_sql.history"]  # the module (mleval_sql.history is me.history, read)

ROOT = Path(__file__).resolve().parents[1]
DAYS = [date(2024, 3, d) for d in range(1, 5)]


def windows_of(starts: list, *, granularity: str = "1d", step: timedelta = timedelta(days=1),
               fingerprint: str = "f1", dtype: pl.DataType = pl.Date) -> pl.DataFrame:
    return pl.DataFrame({"granularity": [granularity] * len(starts),
                         "window_start": pl.Series(starts, dtype=dtype),
                         "window_end": pl.Series([s + step for s in starts], dtype=dtype),
                         "fingerprint": [fingerprint] * len(starts)})


def rows_of(windows: pl.DataFrame, value: float) -> pl.DataFrame:
    """Two metrics per window, each window's values distinct."""
    return (windows.select("granularity", "window_start", "window_end")
            .with_row_index("i").join(pl.DataFrame({"metric": ["roc_auc", "f1"]}), how="cross")
            .select("granularity", "window_start", "window_end", "metric",
                    value=value + pl.col("i").cast(pl.Float64) / 100))


def write(history: History, windows: pl.DataFrame, value: float, run_id: str,
          request_hash: str = "r1", rows: pl.DataFrame | None = None) -> int:
    with history.lock():
        return history.replace(rows_of(windows, value) if rows is None else rows, windows,
                               run_id=run_id, request_hash=request_hash)


def files(path: Path) -> dict[str, tuple]:
    """Every entry below ``path``: a link's target, a file's digest and mtime."""
    found = {}
    for folder, subfolders, names in os.walk(path):
        for name in subfolders + names:
            entry = Path(folder) / name
            key = entry.relative_to(path).as_posix()
            if entry.is_symlink():
                found[key] = ("link", os.readlink(entry))
            elif entry.is_file():
                found[key] = (hashlib.sha256(entry.read_bytes()).hexdigest(),
                              entry.stat().st_mtime_ns)
    return found


def by_duckdb(path: Path, hive: bool = True) -> list[tuple]:
    with duckdb.connect() as con:
        return sorted(con.sql(
            f"SELECT granularity, window_start, metric, value, run_id FROM read_parquet("
            f"'{path}/current/**/*.parquet', hive_partitioning={str(hive).lower()}, "
            "union_by_name=true)").fetchall())


def by_polars_glob(path: Path) -> list[tuple]:
    return sorted(pl.scan_parquet(path / "current/**/*.parquet", hive_partitioning=True)
                  .select("granularity", "window_start", "metric", "value", "run_id")
                  .collect().rows())


def kept(frame: pl.DataFrame) -> list[tuple]:
    return sorted(frame.select("granularity", "window_start", "metric", "value", "run_id")
                  .rows())


# -- writing and reading ---------------------------------------------------------------------

def test_a_first_write_reads_back_in_the_documented_layout(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    windows = windows_of(DAYS)
    rows = rows_of(windows, 0.5)
    assert write(history, windows, 0.5, "night-1") == 1

    meta = json.loads((path / "_mleval_history.json").read_text())
    assert (meta["schema_version"], meta["job"]) == (1, "nightly")
    assert os.readlink(path / "current") == "v000001"
    assert sorted(p.relative_to(path / "v000001").as_posix()
                  for p in (path / "v000001").rglob("*.parquet")) == [
        f"granularity=1d/window_start={d.isoformat()}/part-night-1.parquet" for d in DAYS]
    assert (path / "_windows" / "v000001.parquet").is_file()

    table = read(path)
    assert table.columns == [*rows.columns, "run_id", "computed_at", "job", "fingerprint"]
    assert_frame_equal(table.select(rows.columns), rows.sort("window_start", maintain_order=True))
    assert set(table["run_id"]) == {"night-1"} and set(table["job"]) == {"nightly"}
    assert table.schema["computed_at"] == pl.Datetime("us", "UTC")
    assert history.windows().select("window_start", "fingerprint", "request_hash", "rows").rows() \
        == [(d, "f1", "r1", 2) for d in DAYS]
    assert kept(table) == by_duckdb(path) == by_polars_glob(path)


def test_a_new_history_has_no_windows_and_no_rows(tmp_path):
    history = History.open(tmp_path / "new", "nightly")
    assert history.windows().height == 0
    assert history.windows().columns == ["granularity", "window_start", "window_end",
                                         "fingerprint", "request_hash", "run_id",
                                         "computed_at", "rows"]
    assert read(tmp_path / "new").height == 0
    assert "current" not in os.listdir(tmp_path / "new")


def test_a_second_run_replaces_two_windows_and_links_the_others(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    before = read(path)
    changed = windows_of(DAYS[1:3], fingerprint="f2")
    assert write(history, changed, 0.9, "night-2") == 2

    assert os.readlink(path / "current") == "v000002"
    for day in DAYS:
        old = path / "v000001" / store.window_folder("1d", day) / "part-night-1.parquet"
        new = path / "v000002" / store.window_folder("1d", day) / "part-night-1.parquet"
        if day in DAYS[1:3]:
            assert not new.exists()
        else:  # the same file, not a copy
            assert new.stat().st_ino == old.stat().st_ino
            assert new.read_bytes() == old.read_bytes()

    table = read(path)
    assert table.height == before.height
    assert not table.select("granularity", "window_start", "metric").is_duplicated().any()
    runs = dict(table.group_by("window_start").agg(pl.col("run_id").unique()).rows())
    assert runs == {DAYS[0]: ["night-1"], DAYS[1]: ["night-2"], DAYS[2]: ["night-2"],
                    DAYS[3]: ["night-1"]}
    unchanged = pl.col("window_start").is_in([DAYS[0], DAYS[3]])
    assert_frame_equal(table.filter(unchanged), before.filter(unchanged))
    assert kept(table) == by_duckdb(path) == by_polars_glob(path)
    assert history.windows()["fingerprint"].to_list() == ["f1", "f2", "f2", "f1"]

    # versions beyond the last two go once a third is current
    write(history, windows_of(DAYS[:1], fingerprint="f3"), 0.1, "night-3")
    assert sorted(p.name for p in path.glob("v*")) == ["v000002", "v000003"]
    assert sorted(p.name for p in (path / "_windows").iterdir()) == ["v000002.parquet",
                                                                    "v000003.parquet"]


def test_a_window_given_no_rows_keeps_none(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    emptied = windows_of(DAYS[:1], fingerprint="f2")
    write(history, emptied, 0.0, "night-2", rows=rows_of(emptied, 0).clear())
    assert DAYS[0] not in read(path)["window_start"].to_list()
    assert history.windows().filter(pl.col("window_start") == DAYS[0])["rows"].item() == 0
    write(history, windows_of(DAYS[3:]), 0.7, "night-3")  # keeps the empty window, no folder
    assert history.windows()["rows"].to_list() == [0, 2, 2, 2]
    assert read(path).height == 6


def test_runs_with_other_optional_columns_read_by_name(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    changed = windows_of(DAYS[:1], fingerprint="f2")
    with_ci = rows_of(changed, 0.8).with_columns(ci_low=pl.col("value") - 0.1)
    write(history, changed, 0.8, "night-2", rows=with_ci)
    table = read(path)
    assert table["ci_low"].null_count() == 6
    assert table.filter(pl.col("run_id") == "night-2")["ci_low"].to_list() == pytest.approx(
        [0.7, 0.7])
    with duckdb.connect() as con:
        assert con.sql(f"SELECT count(ci_low), count(*) FROM read_parquet("
                       f"'{path}/current/**/*.parquet', union_by_name=true)").fetchall() == [(2, 8)]


def test_a_column_of_another_type_is_refused_and_nothing_changes(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    before = files(path)
    changed = windows_of(DAYS[:1], fingerprint="f2")
    rows = rows_of(changed, 0.5).with_columns(pl.col("value").cast(pl.Float32))
    with pytest.raises(InputError, match="column 'value' is Float32, but Float64 in the "
                                         "history's rows of run night-1"):
        write(history, changed, 0.5, "night-2", rows=rows)
    assert files(path) == before


@pytest.mark.parametrize(("rows", "message"), [
    (lambda w: rows_of(windows_of(DAYS[3:]), 0.5), r"rows of the window \(1d, 2024-03-04\)"),
    (lambda w: rows_of(w, 0.5).with_columns(run_id=pl.lit("x")), "'run_id', which the history"),
    (lambda w: rows_of(w, 0.5).drop("granularity"), "rows lack the column granularity"),
])
def test_rows_outside_their_windows_are_refused(tmp_path, rows, message):
    history = History.open(tmp_path / "history", "nightly")
    windows = windows_of(DAYS[:2])
    with pytest.raises(InputError, match=message):
        write(history, windows, 0.5, "night-1", rows=rows(windows))
    assert sorted(os.listdir(tmp_path / "history")) == ["_mleval_history.json"]


def test_replace_runs_only_under_the_lock_and_with_a_file_name_for_run_id(tmp_path):
    history = History.open(tmp_path / "history", "nightly")
    windows = windows_of(DAYS)
    with pytest.raises(InputError, match=r"inside `with history.lock"):
        history.replace(rows_of(windows, 0.5), windows, run_id="night-1", request_hash="r1")
    with pytest.raises(InputError, match="run_id must be"):
        write(history, windows, 0.5, "../night-1")
    assert read(tmp_path / "history").height == 0


def test_stale_windows_are_new_or_from_other_inputs_or_another_request(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS[:3]), 0.5, "night-1")
    candidates = pl.concat([windows_of(DAYS[:1]), windows_of(DAYS[1:2], fingerprint="f2"),
                            windows_of(DAYS[2:])])
    stale = history.stale(candidates, request_hash="r1")
    assert stale.columns == [*candidates.columns, "reason"]
    assert stale.select("window_start", "reason").rows() == [(DAYS[1], "fingerprint"),
                                                             (DAYS[3], "new")]
    assert history.stale(candidates, request_hash="r2")["reason"].to_list() == [
        "request", "fingerprint", "request", "new"]
    longer = windows_of(DAYS[:1], step=timedelta(days=2))
    assert history.stale(longer, request_hash="r1")["reason"].to_list() == ["window_end"]
    refresh = History.open(path, "nightly", full_refresh=True)
    assert refresh.stale(candidates, request_hash="r1")["reason"].to_list() == \
        ["full_refresh"] * 4
    with pytest.raises(InputError, match=r"window_start is Datetime.*but the history's is Date"):
        history.stale(windows_of([datetime(2024, 3, 1)], dtype=pl.Datetime("us", "UTC")), "r1")


# -- readers and writers at once -----------------------------------------------------------------

def test_a_reader_during_a_replace_sees_the_old_version_whole(tmp_path, monkeypatch):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    old = kept(read(path))
    seen = {}

    def read_now(version: Path) -> None:  # every new file is written, current not switched
        assert list(version.rglob("part-night-2.parquet"))
        seen.update(ours=kept(read(path)), duckdb=by_duckdb(path),
                    duckdb_typed=by_duckdb(path, hive=False), polars=by_polars_glob(path),
                    windows=history.windows()["run_id"].to_list())

    monkeypatch.setattr(store, "_before_swap", read_now)
    write(history, windows_of(DAYS[1:3], fingerprint="f2"), 0.9, "night-2")
    assert seen == {"ours": old, "duckdb": old, "duckdb_typed": old, "polars": old,
                    "windows": ["night-1"] * 4}
    new = kept(read(path))
    assert new != old and {r[-1] for r in new} == {"night-1", "night-2"}
    assert by_duckdb(path) == by_polars_glob(path) == new


@pytest.mark.slow
def test_a_run_killed_before_its_swap_leaves_the_old_version_and_is_cleaned(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    before, tree = read(path), files(path)
    changed = windows_of(DAYS[1:3], fingerprint="f2")
    rows_of(changed, 0.9).write_parquet(tmp_path / "rows.parquet")
    changed.write_parquet(tmp_path / "windows.parquet")
    child = textwrap.dedent("""
        import os, signal, sys
        import polars as pl
        import mleval_sql.history
        history = sys.modules["mleval_sql.history"]  # the module, not me.history

        def kill(version):  # the new version's files are all written
            assert list(version.rglob("part-killed.parquet"))
            os.kill(os.getpid(), signal.SIGKILL)

        history._before_swap = kill
        path, rows, windows = sys.argv[1:]
        writer = history.History.open(path, "nightly")
        with writer.lock():
            writer.replace(pl.read_parquet(rows), pl.read_parquet(windows), run_id="killed",
                           request_hash="r1")
    """)
    done = subprocess.run([sys.executable, "-c", child, str(path), str(tmp_path / "rows.parquet"),
                           str(tmp_path / "windows.parquet")], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == -signal.SIGKILL, done.stderr
    assert list((path / "v000002").rglob("part-killed.parquet"))  # left half made
    assert_frame_equal(read(path), before)
    assert by_duckdb(path) == kept(before)
    assert {k: v for k, v in files(path).items() if k in tree} == tree

    with pytest.warns(HistoryWarning, match=r"process \d+ is not running"):
        write(history, windows_of(DAYS[3:], fingerprint="f2"), 0.7, "night-2")
    assert os.readlink(path / "current") == "v000002"
    assert not list(path.rglob("part-killed.parquet"))
    assert set(read(path)["run_id"]) == {"night-1", "night-2"}
    assert not [n for n in os.listdir(path) if n.startswith(".")]


def test_a_failed_run_removes_its_half_made_version(tmp_path, monkeypatch):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    tree = files(path)

    def fail(version: Path) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(store, "_before_swap", fail)
    with pytest.raises(KeyboardInterrupt):
        write(history, windows_of(DAYS[:1], fingerprint="f2"), 0.9, "night-2")
    assert files(path) == tree


def test_a_run_whose_lock_was_taken_over_does_not_swap(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    tree = files(path)
    windows = windows_of(DAYS[:1], fingerprint="f2")
    with pytest.warns(HistoryWarning, match="taken over by pid 1 on elsewhere"), \
            history.lock():
        lock = path / "_mleval_history.lock"
        lock.write_text(json.dumps({"pid": 1, "host": "elsewhere", "started_at": "now",
                                    "token": "theirs"}))
        with pytest.raises(InputError, match="taken over by pid 1 on elsewhere"):
            history.replace(rows_of(windows, 0.9), windows, run_id="night-2",
                            request_hash="r1")
    assert json.loads(lock.read_text())["token"] == "theirs"  # their lock, left to them
    assert {k: v for k, v in files(path).items() if k != lock.name} == tree


def test_one_writer_at_a_time(tmp_path):
    path = tmp_path / "history"
    first, second = History.open(path, "nightly"), History.open(path, "nightly")
    holder = f"pid {os.getpid()} on {socket.gethostname()}"
    with first.lock():
        with pytest.raises(InputError, match=f"being written by {holder}, since .*: one "
                                             "writer at a time"), second.lock():
            pass
        start = time.monotonic()
        with pytest.raises(InputError, match=r"waited 0.3 s"), second.lock(timeout=0.3):
            pass
        assert time.monotonic() - start >= 0.3

    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with first.lock():
            held.set()
            release.wait(10)

    thread = threading.Thread(target=hold)
    thread.start()
    assert held.wait(10)
    threading.Timer(0.3, release.set).start()
    start = time.monotonic()
    with second.lock(timeout=10):
        assert time.monotonic() - start >= 0.25  # waited for the first to end
        lock = json.loads((path / "_mleval_history.lock").read_text())
        assert lock["token"] == second._token
    thread.join()
    assert not (path / "_mleval_history.lock").exists()


def test_a_stale_lock_is_taken_over_with_a_warning(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    lock = path / "_mleval_history.lock"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    lock.write_text(json.dumps({"pid": gone.pid, "host": socket.gethostname(),
                                "started_at": "2024-03-01T00:00:00+00:00", "token": "old"}))
    with pytest.warns(HistoryWarning, match=f"from pid {gone.pid} on .*: process {gone.pid} "
                                            "is not running"), history.lock():
        assert json.loads(lock.read_text())["pid"] == os.getpid()
    assert not lock.exists()

    elsewhere = {"pid": 1, "host": "elsewhere", "started_at": "then", "token": "old"}
    lock.write_text(json.dumps(elsewhere))
    with pytest.raises(InputError, match="being written by pid 1 on elsewhere"), \
            history.lock():
        pass
    day_old = time.time() - 25 * 3600
    os.utime(lock, (day_old, day_old))
    with pytest.warns(HistoryWarning, match=r"the lock is 25.0 h old"), history.lock():
        assert json.loads(lock.read_text())["host"] == socket.gethostname()


# -- folders it refuses ------------------------------------------------------------------------

def test_another_jobs_history_is_refused_unless_started_over(tmp_path, monkeypatch):
    path = tmp_path / "history"
    nightly = History.open(path, "nightly")
    write(nightly, windows_of(DAYS), 0.5, "night-1")
    before = read(path)
    with pytest.raises(InputError, match="belongs to the job 'nightly', not 'weekly'"):
        History.open(path, "weekly")

    seen = []
    meta = path / "_mleval_history.json"
    monkeypatch.setattr(store, "_before_swap", lambda version: seen.append(
        (read(path), json.loads(meta.read_text())["job"])))
    weekly = History.open(path, "weekly", full_refresh=True)
    write(weekly, windows_of(DAYS[:1], granularity="1w", step=timedelta(weeks=1)), 0.3, "w-1")
    assert_frame_equal(seen[0][0], before)  # the old version whole until the swap
    assert seen[0][1] == "nightly"  # and its owner: a run killed there leaves it as it was
    table = read(path)
    assert (table["granularity"].to_list(), set(table["job"])) == (["1w", "1w"], {"weekly"})
    assert json.loads(meta.read_text())["job"] == "weekly"
    assert History.open(path, "weekly").windows().height == 1
    tree = files(path)
    with pytest.raises(InputError, match="belongs to the job 'weekly' now, not 'nightly'"):
        write(nightly, windows_of(DAYS), 0.5, "night-2")  # opened before the weekly run
    assert files(path) == tree


def test_a_full_refresh_keeps_no_window_it_was_not_given(tmp_path):
    path = tmp_path / "history"
    write(History.open(path, "nightly"), windows_of(DAYS), 0.5, "night-1")
    refresh = History.open(path, "nightly", full_refresh=True)
    write(refresh, windows_of(DAYS[:2]), 0.6, "night-2")
    assert read(path)["window_start"].unique().sort().to_list() == DAYS[:2]
    # the refresh is done: the next replace keeps the windows as usual
    write(refresh, windows_of(DAYS[2:3]), 0.7, "night-3")
    assert read(path)["window_start"].unique().sort().to_list() == DAYS[:3]


def test_a_newer_schema_version_is_refused(tmp_path):
    path = tmp_path / "history"
    write(History.open(path, "nightly"), windows_of(DAYS), 0.5, "night-1")
    meta = path / "_mleval_history.json"
    meta.write_text(json.dumps({"schema_version": 2, "job": "nightly", "created_at": "x"}))
    tree = files(path)
    with pytest.raises(InputError, match="schema_version 2, newer than this mleval_sql's 1"):
        History.open(path, "nightly")
    with pytest.raises(InputError, match="schema_version 2"):
        read(path)
    write(History.open(path, "nightly", full_refresh=True), windows_of(DAYS[:1]), 0.5, "n-2")
    assert tree != files(path)
    assert json.loads(meta.read_text())["schema_version"] == 1


def test_a_folder_that_is_no_history_is_refused(tmp_path):
    path = tmp_path / "reports"
    path.mkdir()
    (path / "summary.csv").write_text("a\n1\n")
    with pytest.raises(InputError, match=r"is not a metrics history \(no _mleval_history.json"):
        History.open(path, "nightly")
    with pytest.raises(InputError, match="not a metrics history"):
        read(path)
    assert os.listdir(path) == ["summary.csv"]
    with pytest.raises(InputError, match="is a file, not a folder"):
        History.open(path / "summary.csv", "nightly")
    write(History.open(path, "nightly", full_refresh=True), windows_of(DAYS), 0.5, "night-1")
    assert read(path).height == 8
    assert (path / "summary.csv").read_text() == "a\n1\n"  # never deletes what it did not make


@pytest.mark.parametrize("damage", ["windows", "json", "link"])
def test_a_damaged_history_is_refused_and_nothing_is_overwritten(tmp_path, damage):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    write(history, windows_of(DAYS[:1], fingerprint="f2"), 0.6, "night-2")
    if damage == "windows":
        (path / "_windows" / "v000002.parquet").write_bytes(b"PAR1 not really")
    elif damage == "json":
        (path / "_mleval_history.json").write_text('{"schema_version": 1, "job": ')
    else:
        os.remove(path / "current")
        os.symlink("elsewhere", path / "current")
    tree = files(path)
    message = {"windows": r"cannot read .*_windows/v000002.parquet, the windows of history",
               "json": r"cannot read .*_mleval_history.json",
               "link": r"current does not name a version folder \(elsewhere\)"}[damage]
    with pytest.raises(InputError, match=message):
        History.open(path, "nightly")
    with pytest.raises(InputError, match=message):
        read(path)
    with pytest.raises(InputError, match=message):  # a History opened before: no writing either
        write(history, windows_of(DAYS[:1], fingerprint="f3"), 0.7, "night-3")
    assert files(path) == tree

    write(History.open(path, "nightly", full_refresh=True), windows_of(DAYS[:2]), 0.8, "n-4")
    assert set(read(path)["run_id"]) == {"n-4"}
    assert History.open(path, "nightly").windows().height == 2


def test_a_version_missing_a_windows_files_is_refused(tmp_path):
    path = tmp_path / "history"
    history = History.open(path, "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    shutil.rmtree(path / "v000001" / store.window_folder("1d", DAYS[0]))
    tree = files(path)
    with pytest.raises(InputError, match="window_start=2024-03-01 is gone"):
        read(path)
    with pytest.raises(InputError, match=r"window_start=2024-03-01.*nothing was changed"):
        write(history, windows_of(DAYS[1:2], fingerprint="f2"), 0.7, "night-2")
    assert files(path) == tree


# -- times ---------------------------------------------------------------------------------------

def test_timestamps_with_a_time_zone_and_dates_round_trip(tmp_path):
    zone = "Europe/Paris"
    # hours around the night clocks went back: 02:00 CEST and 02:00 CET are two windows
    utc = [datetime(2024, 10, 26, 23, tzinfo=timezone.utc) + timedelta(hours=h)
           for h in range(4)]
    aware = pl.Datetime("us", zone)
    hours = windows_of(utc, granularity="1h", step=timedelta(hours=1), dtype=aware)
    assert hours["window_start"].dt.hour().to_list() == [1, 2, 2, 3]
    path = tmp_path / "hours"
    write(History.open(path, "nightly"), hours, 0.5, "night-1")
    table = read(path)
    assert table.schema["window_start"] == aware and table.schema["window_end"] == aware
    assert_frame_equal(table.select("window_start", "window_end").unique(maintain_order=True),
                       hours.select("window_start", "window_end"))
    folders = sorted(p.name for p in (path / "current" / "granularity=1h").iterdir())
    assert folders[1:3] == ["window_start=2024-10-27T02%3A00%3A00%2B01%3A00",
                            "window_start=2024-10-27T02%3A00%3A00%2B02%3A00"]
    # every reader sees the instants of the files, typed
    assert pl.scan_parquet(path / "current/**/*.parquet", hive_partitioning=True).collect()[
        "window_start"].unique().sort().to_list() == hours["window_start"].to_list()
    with duckdb.connect() as con:
        starts = con.sql(f"SELECT DISTINCT epoch_us(window_start) FROM read_parquet("
                         f"'{path}/current/**/*.parquet', hive_partitioning=false) ORDER BY 1")
        assert [s for (s,) in starts.fetchall()] == hours["window_start"].dt.epoch("us").to_list()
    # Python's datetimes of one zone compare wall-clock times: the instants are compared
    decoded = pl.Series([decode_start(encode_start(v), aware) for v in hours["window_start"]],
                        dtype=aware)
    assert decoded.dt.epoch("us").to_list() == hours["window_start"].dt.epoch("us").to_list()
    # a rerun finds nothing stale; one of the two 02:00 hours replaced keeps the other's file
    history = History.open(path, "nightly")
    assert history.stale(hours, "r1").height == 0
    cest = path / "v000001/granularity=1h" / folders[2] / "part-night-1.parquet"
    write(history, hours[2:3].with_columns(fingerprint=pl.lit("f2")), 0.9, "night-2")
    assert (path / "v000002/granularity=1h" / folders[2] / "part-night-1.parquet").stat().st_ino \
        == cest.stat().st_ino
    assert read(path).group_by("window_start", maintain_order=True).agg(
        pl.col("run_id").first())["run_id"].to_list() == ["night-1", "night-1", "night-2",
                                                          "night-1"]

    days = tmp_path / "days"
    write(History.open(days, "nightly"), windows_of(DAYS), 0.5, "night-1")
    assert read(days)["window_start"].unique().sort().to_list() == DAYS
    assert {v for (_, v, *_) in by_duckdb(days)} == set(DAYS)  # DuckDB's hive DATE too
    naive = pl.Datetime("us")
    for value, dtype in [(DAYS[0], pl.Date), (datetime(2024, 3, 1, 12, 30, 0, 5), naive)]:
        assert decode_start(encode_start(value), dtype) == value
