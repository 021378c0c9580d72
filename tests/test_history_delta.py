"""The metrics history as a Delta table (``delta://LOCATION``): the folder history's tests that
matter, on Delta. A first write and its reading, a run that replaces some windows in one
commit, stale windows, the tables it refuses, a run that fails before its commit, times and
types that round-trip, and two nights of a report job, equal to a folder history's."""

from __future__ import annotations

import dataclasses
import importlib
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import deltalake
import polars as pl
import pyarrow as pa
import pytest
from polars.testing import assert_frame_equal

from mleval_sql.errors import InputError
from mleval_sql.history import DeltaHistory, History, read
from mleval_sql.reporting.job import Job
from tests.test_history import DAYS, kept, rows_of, windows_of, write
from tests.test_report_over_time import (  # noqa: F401  (lake: its fixture)
    computed,
    job,
    lake,
    night,
    values,
    write_day,
)

# the module (mleval_sql.history is me.history, the function)
store = importlib.import_module("mleval_sql.history")
# the folder history's rows and windows less what differs by run: when they were computed
LESS_TIME = pl.exclude("computed_at")


def delta(path: Path) -> str:
    return f"delta://{path}"


def commits(path: Path) -> list[dict]:
    """The commitInfo of each version of the table, oldest first."""
    return [next(json.loads(line)["commitInfo"] for line in file.read_text().splitlines()
                 if "commitInfo" in json.loads(line))
            for file in sorted((path / "_delta_log").glob("*.json"))]


def twin(tmp_path: Path, runs: list[tuple[pl.DataFrame, float, str]]) -> Path:
    """A folder history given the same ``runs`` (windows, value, run_id)."""
    folder = tmp_path / "folder"
    history = History.open(folder, "nightly")
    for windows, value, run_id in runs:
        write(history, windows, value, run_id)
    return folder


# -- writing and reading ---------------------------------------------------------------------

def test_a_first_write_reads_back_as_the_folder_history_does(tmp_path):
    path = tmp_path / "history"
    history = History.open(delta(path), "nightly")
    assert type(history) is DeltaHistory and history.path == path
    assert history.windows().height == 0 and read(path).height == 0
    assert read(path).columns == read(History.open(tmp_path / "new", "nightly").path).columns
    windows = windows_of(DAYS)
    assert write(history, windows, 0.5, "night-1") == 0

    info = commits(path)
    assert len(info) == 1 and info[0]["mleval_history"]["job"] == "nightly"
    assert info[0]["mleval_history"]["schema_version"] == 1
    assert info[0]["mleval_history"]["windows"]["window_start"] == [d.isoformat() for d in DAYS]
    assert deltalake.DeltaTable(str(path)).metadata().partition_columns == ["granularity"]

    folder = twin(tmp_path, [(windows, 0.5, "night-1")])
    table = read(path)
    assert table.schema == read(folder).schema
    assert_frame_equal(table.select(LESS_TIME), read(folder).select(LESS_TIME))
    assert_frame_equal(read(delta(path)), table)
    assert_frame_equal(history.windows().select(LESS_TIME),
                       History.open(folder, "nightly").windows().select(LESS_TIME))
    assert type(History.open(path, "nightly")) is DeltaHistory  # its _delta_log/ says so


def test_a_second_run_replaces_two_windows_in_one_commit_and_keeps_the_others(tmp_path):
    path = tmp_path / "history"
    history = History.open(delta(path), "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    before = read(path)
    changed = windows_of(DAYS[1:3], fingerprint="f2")
    assert write(history, changed, 0.9, "night-2") == 1
    assert len(commits(path)) == 2  # one commit: the rows and the windows at once

    table = read(path)
    assert table.height == before.height
    assert not table.select("granularity", "window_start", "metric").is_duplicated().any()
    runs = dict(table.group_by("window_start").agg(pl.col("run_id").unique()).rows())
    assert runs == {DAYS[0]: ["night-1"], DAYS[1]: ["night-2"], DAYS[2]: ["night-2"],
                    DAYS[3]: ["night-1"]}
    unchanged = pl.col("window_start").is_in([DAYS[0], DAYS[3]])
    assert_frame_equal(table.filter(unchanged), before.filter(unchanged))  # value for value
    assert table.filter(~unchanged)["value"].to_list() == [0.9, 0.9, 0.91, 0.91]
    assert history.windows()["fingerprint"].to_list() == ["f1", "f2", "f2", "f1"]
    assert history.windows()["run_id"].to_list() == ["night-1", "night-2", "night-2", "night-1"]
    # the version before is whole, for time travel
    assert kept(pl.read_delta(str(path), version=0)) == kept(before)

    folder = twin(tmp_path, [(windows_of(DAYS), 0.5, "night-1"), (changed, 0.9, "night-2")])
    assert_frame_equal(table.select(LESS_TIME), read(folder).select(LESS_TIME))

    emptied = windows_of(DAYS[:1], fingerprint="f3")  # a window given no rows keeps none
    write(history, emptied, 0.0, "night-3", rows=rows_of(emptied, 0).clear())
    assert DAYS[0] not in read(path)["window_start"].to_list()
    assert history.windows()["rows"].to_list() == [0, 2, 2, 2]


def test_runs_with_other_optional_columns_and_types_read_as_the_folder_history(tmp_path):
    path = tmp_path / "history"
    history = History.open(delta(path), "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    changed = windows_of(DAYS[:1], fingerprint="f2")
    # types Delta has not: unsigned, categories, a null column, nanoseconds
    typed = rows_of(changed, 0.8).with_columns(
        ci_low=pl.col("value") - 0.1, samples=pl.lit(30, dtype=pl.UInt32),
        model=pl.lit("a", dtype=pl.Categorical), note=pl.lit(None),
        seen=pl.lit(datetime(2024, 3, 1, 12), dtype=pl.Datetime("ns")))
    write(history, changed, 0.8, "night-2", rows=typed)
    table = read(path)
    assert table["ci_low"].null_count() == 6
    assert table.filter(pl.col("run_id") == "night-2")["ci_low"].to_list() == pytest.approx(
        [0.7, 0.7])
    folder = History.open(tmp_path / "folder", "nightly")
    write(folder, windows_of(DAYS), 0.5, "night-1")
    write(folder, changed, 0.8, "night-2", rows=typed)
    assert table.schema == read(folder.path).schema
    assert_frame_equal(table.select(LESS_TIME), read(folder.path).select(LESS_TIME))

    wrong = rows_of(changed, 0.5).with_columns(pl.col("value").cast(pl.Float32))
    with pytest.raises(InputError, match="column 'value' is Float32, but Float64 in the Delta"):
        write(history, changed, 0.5, "night-3", rows=wrong)
    assert len(commits(path)) == 2


def test_stale_windows_are_new_or_from_other_inputs_or_another_request(tmp_path):
    path = tmp_path / "history"
    history = History.open(delta(path), "nightly")
    write(history, windows_of(DAYS[:3]), 0.5, "night-1")
    candidates = pl.concat([windows_of(DAYS[:1]), windows_of(DAYS[1:2], fingerprint="f2"),
                            windows_of(DAYS[2:])])
    stale = history.stale(candidates, request_hash="r1")
    assert stale.select("window_start", "reason").rows() == [(DAYS[1], "fingerprint"),
                                                             (DAYS[3], "new")]
    assert history.stale(candidates, request_hash="r2")["reason"].to_list() == [
        "request", "fingerprint", "request", "new"]
    longer = windows_of(DAYS[:1], step=timedelta(days=2))
    assert history.stale(longer, request_hash="r1")["reason"].to_list() == ["window_end"]
    refresh = History.open(delta(path), "nightly", full_refresh=True)
    assert refresh.stale(candidates, request_hash="r1")["reason"].to_list() == \
        ["full_refresh"] * 4
    with pytest.raises(InputError, match=r"window_start is Datetime.*but the history's is Date"):
        history.stale(windows_of([datetime(2024, 3, 1)], dtype=pl.Datetime("us", "UTC")), "r1")


def test_dates_and_timestamps_with_a_time_zone_round_trip(tmp_path):
    zone = "Europe/Paris"
    # hours around the night clocks went back: 02:00 CEST and 02:00 CET are two windows
    utc = [datetime(2024, 10, 26, 23, tzinfo=timezone.utc) + timedelta(hours=h)
           for h in range(4)]
    aware = pl.Datetime("us", zone)
    hours = windows_of(utc, granularity="1h", step=timedelta(hours=1), dtype=aware)
    assert hours["window_start"].dt.hour().to_list() == [1, 2, 2, 3]
    path = tmp_path / "hours"
    history = History.open(delta(path), "nightly")
    write(history, hours, 0.5, "night-1")
    table = read(path)
    assert table.schema["window_start"] == aware and table.schema["window_end"] == aware
    assert_frame_equal(table.select("window_start", "window_end").unique(maintain_order=True),
                       hours.select("window_start", "window_end"))
    assert history.windows()["window_start"].dt.epoch("us").to_list() == \
        hours["window_start"].dt.epoch("us").to_list()
    assert history.stale(hours, "r1").height == 0
    # one of the two 02:00 hours replaced: the predicate tells the instants apart
    write(history, hours[2:3].with_columns(fingerprint=pl.lit("f2")), 0.9, "night-2")
    assert read(path).group_by("window_start", maintain_order=True).agg(
        pl.col("run_id").first())["run_id"].to_list() == ["night-1", "night-1", "night-2",
                                                          "night-1"]

    for name, starts, dtype in [("days", DAYS[:3], pl.Date),
                                ("naive", [datetime(2024, 3, d, 6) for d in (1, 2, 3)],
                                 pl.Datetime("ms"))]:
        windows = windows_of(starts, dtype=dtype)
        other = History.open(delta(tmp_path / name), "nightly")
        write(other, windows, 0.5, "night-1")
        write(other, windows[1:2].with_columns(fingerprint=pl.lit("f2")), 0.9, "night-2")
        table = read(tmp_path / name)
        assert table.schema["window_start"] == dtype
        assert table["window_start"].unique().sort().to_list() == starts
        assert table.group_by("window_start", maintain_order=True).agg(
            pl.col("run_id").first())["run_id"].to_list() == ["night-1", "night-2", "night-1"]


# -- what it refuses ---------------------------------------------------------------------------

def test_another_jobs_table_is_refused_unless_started_over(tmp_path):
    path = tmp_path / "history"
    nightly = History.open(delta(path), "nightly")
    write(nightly, windows_of(DAYS), 0.5, "night-1")
    with pytest.raises(InputError, match="belongs to the job 'nightly', not 'weekly'"):
        History.open(delta(path), "weekly")
    weekly = History.open(delta(path), "weekly", full_refresh=True)
    write(weekly, windows_of(DAYS[:1], granularity="1w", step=timedelta(weeks=1)), 0.3, "w-1")
    table = read(path)
    assert (table["granularity"].to_list(), set(table["job"])) == (["1w", "1w"], {"weekly"})
    assert commits(path)[-1]["mleval_history"]["job"] == "weekly"
    assert History.open(delta(path), "weekly").windows().height == 1
    with pytest.raises(InputError, match="belongs to the job 'weekly' now, not 'nightly'"):
        write(nightly, windows_of(DAYS), 0.5, "night-2")  # opened before the weekly run
    assert len(commits(path)) == 2


def test_a_newer_schema_version_is_refused(tmp_path):
    path = tmp_path / "history"
    write(History.open(delta(path), "nightly"), windows_of(DAYS), 0.5, "night-1")
    meta = {**commits(path)[0]["mleval_history"], "schema_version": 2}
    deltalake.write_deltalake(str(path), pa.table({"granularity": pa.array([], pa.string())}),
                              mode="append", schema_mode="merge",
                              commit_properties=deltalake.CommitProperties(
                                  custom_metadata={"mleval_history": meta}))
    with pytest.raises(InputError, match="schema_version 2, newer than this mleval_sql's 1"):
        History.open(delta(path), "nightly")
    with pytest.raises(InputError, match="schema_version 2"):
        read(path)
    write(History.open(delta(path), "nightly", full_refresh=True), windows_of(DAYS[:1]), 0.5,
          "n-2")
    assert commits(path)[-1]["mleval_history"]["schema_version"] == 1
    assert set(read(path)["run_id"]) == {"n-2"}


def test_a_delta_table_or_folder_that_is_no_history_is_refused(tmp_path):
    table = tmp_path / "table"
    pl.DataFrame({"a": [1, 2]}).write_delta(table)
    for full_refresh in (False, True):  # its rows are someone else's: never overwritten
        with pytest.raises(InputError, match="is a Delta table but not a metrics history"):
            History.open(table, "nightly", full_refresh=full_refresh)
    with pytest.raises(InputError, match="not a metrics history"):
        read(delta(table))
    assert deltalake.DeltaTable(str(table)).version() == 0

    reports = tmp_path / "reports"
    reports.mkdir()
    (reports / "summary.csv").write_text("a\n1\n")
    with pytest.raises(InputError, match="has files but no _delta_log/ folder"):
        History.open(delta(reports), "nightly")
    with pytest.raises(InputError, match="a local folder"):
        History.open("delta://s3://bucket/history", "nightly")


def test_another_writers_rows_are_refused_but_not_its_compaction(tmp_path):
    path = tmp_path / "history"
    history = History.open(delta(path), "nightly")
    write(history, windows_of(DAYS[:2]), 0.5, "night-1")
    write(history, windows_of(DAYS[2:]), 0.9, "night-2")  # new windows: a file of their own
    before = read(path)
    deltalake.DeltaTable(str(path)).optimize.compact()  # one file of the two: no row changed
    assert commits(path)[-1]["operation"] == "OPTIMIZE"
    assert_frame_equal(read(path), before)
    assert History.open(delta(path), "nightly").stale(windows_of(DAYS), "r1").height == 0

    deltalake.write_deltalake(str(path), read(path).head(2), mode="append")
    with pytest.raises(InputError, match=r"changed by another writer in version 3 \(WRITE\)"):
        History.open(delta(path), "nightly")
    with pytest.raises(InputError, match="changed by another writer"):
        read(path)
    write(History.open(delta(path), "nightly", full_refresh=True), windows_of(DAYS), 0.4, "n-3")
    assert read(path).height == 8 and set(read(path)["run_id"]) == {"n-3"}


# -- failures and writers ----------------------------------------------------------------------

def test_a_run_that_fails_before_its_commit_leaves_the_version_before_whole(tmp_path,
                                                                            monkeypatch):
    path = tmp_path / "history"
    history = History.open(delta(path), "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    before, windows = read(path), history.windows()
    real = deltalake.write_deltalake

    def broken(table, data, **options):  # a data file written, then the stream breaks
        frame = pl.DataFrame(data)
        frame.write_parquet(path / "granularity=1d" / "part-00000-half-written.parquet")

        def batches():
            yield from pa.table(frame).to_batches(max_chunksize=1)
            raise OSError("disk full")

        real(table, pa.RecordBatchReader.from_batches(pa.table(frame).schema, batches()),
             **options)

    monkeypatch.setattr(deltalake, "write_deltalake", broken)
    with pytest.raises(deltalake.exceptions.DeltaError, match="disk full"):
        write(history, windows_of(DAYS[1:3], fingerprint="f2"), 0.9, "night-2")
    assert deltalake.DeltaTable(str(path)).version() == 0
    assert_frame_equal(read(path), before)
    assert_frame_equal(history.windows(), windows)
    assert not (path / "_mleval_history.lock").exists()

    monkeypatch.setattr(deltalake, "write_deltalake", real)
    write(history, windows_of(DAYS[:1], fingerprint="f3"), 0.7, "night-3")
    assert set(read(path)["run_id"]) == {"night-1", "night-3"}  # the half-written file: no row


def test_a_commit_is_made_on_the_version_read_or_not_at_all(tmp_path, monkeypatch):
    path = tmp_path / "history"
    history = History.open(delta(path), "nightly")
    write(history, windows_of(DAYS), 0.5, "night-1")
    before = read(path)
    convert = store._delta_frame

    def meanwhile(frame):  # another writer commits between this run's reading and its commit
        other = before.head(2).with_columns(granularity=pl.lit("1y"))
        deltalake.write_deltalake(str(path), other, mode="append")
        return convert(frame)

    # rows of another partition: delta-rs would retry this run's commit on top of them, with
    # windows that do not list them
    monkeypatch.setattr(store, "_delta_frame", meanwhile)
    with pytest.raises(InputError, match="another writer committed to the Delta table since "
                                         "this run read it"):
        write(history, windows_of(DAYS[:1], fingerprint="f2"), 0.9, "night-2")
    assert len(commits(path)) == 2 and "mleval_history" not in commits(path)[-1]
    assert_frame_equal(pl.read_delta(str(path), version=0), pl.read_delta(str(path), version=1)
                       .filter(pl.col("granularity") == "1d"))
    with pytest.raises(InputError, match="changed by another writer in version 1"):
        read(path)


def test_one_writer_at_a_time_by_the_folder_historys_lock(tmp_path):
    path = tmp_path / "history"
    first, second = History.open(delta(path), "nightly"), History.open(delta(path), "nightly")
    windows = windows_of(DAYS)
    with pytest.raises(InputError, match=r"inside `with history.lock"):
        first.replace(rows_of(windows, 0.5), windows, run_id="night-1", request_hash="r1")
    with first.lock():
        assert (path / "_mleval_history.lock").is_file()
        with pytest.raises(InputError, match="one writer at a time"), second.lock():
            pass
    with pytest.raises(InputError, match="run_id must be"):
        write(first, windows, 0.5, "../night-1")
    assert read(path).height == 0 and not list((path / "_delta_log").iterdir())


def test_without_deltalake_the_error_names_the_extra(tmp_path, monkeypatch):
    path = tmp_path / "history"
    write(History.open(delta(path), "nightly"), windows_of(DAYS[:1]), 0.5, "night-1")
    monkeypatch.setitem(sys.modules, "deltalake", None)  # import deltalake fails
    for call in (lambda: History.open(delta(tmp_path / "new"), "nightly"), lambda: read(path)):
        with pytest.raises(InputError, match=r"pip install 'mleval_sql\[delta\]'"):
            call()
    assert not (tmp_path / "new").exists()
    assert History.open(tmp_path / "folder", "nightly").path == tmp_path / "folder"


# -- a report job --------------------------------------------------------------------------------

def test_two_nights_of_a_job_with_a_delta_history_equal_a_folder_historys(
        lake, tmp_path):  # noqa: F811
    location, folder = tmp_path / "delta-history", tmp_path / "folder-history"
    data = job(lake, folder)
    # the history as [history] path = "delta://..." should give it (see the test below)
    with_delta = dataclasses.replace(Job.from_dict(data), history=delta(location))
    first = night(tmp_path, with_delta, "d1")
    assert len(computed(first)) == 9 + 2 and first["night"]["history"] == str(location)

    write_day(lake, 9)  # a new day, in the second week
    second = night(tmp_path, with_delta, "d2")
    assert computed(second) == {("1d", "2026-10-10", "new"), ("1w", "2026-10-05", "fingerprint")}
    assert second["night"]["kept"] == 10
    assert len(commits(location)) == 2
    night(tmp_path, data, "f")  # a folder history of the same lake (nights equal one night)
    assert values(location).equals(values(folder))
    assert read(location).schema == read(folder).schema


def test_a_jobs_history_path_can_name_a_delta_table(lake, tmp_path):  # noqa: F811
    data = {**job(lake, None), "history": {"path": delta(tmp_path / "h")}}
    assert store._delta_location(Job.from_dict(data, base=tmp_path).history) == tmp_path / "h"
