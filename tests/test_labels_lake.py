"""Outcomes kept apart in files: DuckDB's SQL join equals polars' join; a lake of predictions is
joined once, a group of files at a time, into files whose rows equal the derivation's; what it
refuses; and a nightly job's map of outcome files to windows, kept in its history (folder and
Delta), that reads only new or changed files and recomputes the windows of an outcome file
changed or deleted, the history equal to a full refresh."""

from __future__ import annotations

import datetime as dt
import json
import tempfile
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import labels
from mleval_sql.engines.duckdb import read
from mleval_sql.history import DeltaHistory, History
from mleval_sql.history import read as read_history
from mleval_sql.sources import Derived, as_source
from tests.helpers import assert_frames_close
from tests.test_labels import METRICS, predictions

START = dt.date(2026, 10, 1)  # a Thursday: the first ISO week is Sep 28 - Oct 4
SAMPLES = 20  # a day


def sorted_rows(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.select(sorted(frame.columns)).sort(pl.all())


def write_lake(rows: pl.DataFrame, folder: Path) -> Path:
    """``rows`` without their truth, a hive folder per day."""
    for (day,), part in rows.drop("truth").partition_by("day", as_dict=True).items():
        out = folder / f"day={day}" / "part-0.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        part.drop("day").write_parquet(out)
    return folder


def write_outcomes(rows: pl.DataFrame, folder: Path, keys: list[str]) -> list[str]:
    """The known truth of ``rows``, a file per day."""
    known = rows.filter(pl.col("truth").is_not_null())
    paths = []
    for (day,), part in known.partition_by("day", as_dict=True).items():
        out = folder / f"outcomes-{day}.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        part.select(*keys, "truth").write_parquet(out)
        paths.append(str(out))
    return sorted(paths)


@pytest.mark.parametrize("keys", [["sample", "label"], ["sample"]])
@pytest.mark.parametrize("own_truth", [True, False])
def test_duckdb_sql_joins_as_polars(tmp_path: Path, keys: list[str], own_truth: bool) -> None:
    rows = predictions()
    if keys == ["sample"]:
        rows = rows.filter(pl.col("label") == "a").drop("label")
    mine = as_source(rows if own_truth else rows.drop("truth"))
    theirs = as_source(write_outcomes(rows, tmp_path / "outcomes", keys))
    join = labels.outcomes(mine.schema(), theirs, "sample", "label" if "label" in keys else None,
                           "truth")
    assert join.keys == tuple(keys) and join.replaces is own_truth and join.sql is not None
    derived = Derived(mine, join)
    by_polars = derived.polars().collect()
    by_duckdb = read(derived, duckdb.connect()).pl()
    assert by_duckdb.columns == by_polars.columns  # the truth last, in place of the rows' own
    assert_frames_close(sorted_rows(by_duckdb), sorted_rows(by_polars))
    # the truth of the rows whose outcome is known, null elsewhere
    assert by_polars["truth"].null_count() == rows["truth"].null_count()


def test_a_frame_of_outcomes_is_no_sql() -> None:
    rows = predictions()
    join = labels.outcomes(rows.schema, as_source(rows.select("sample", "label", "truth")),
                           "sample", "label", "truth")
    assert join.sql is None  # polars joins; DuckDB reads its rows


def test_a_lake_joined_once_equals_the_truth_in_its_rows(engine: str, tmp_path: Path) -> None:
    rows = predictions()
    lake = write_lake(rows, tmp_path / "lake")
    outcomes = write_outcomes(rows, tmp_path / "outcomes", ["sample", "label"])
    options: dict[str, Any] = {"by": "region", "average": "macro", "unlabelled": "skip",
                               "window": "day:1d", "engine": engine}
    got = me.evaluate(lake, METRICS, labels=outcomes, **options)
    want = me.evaluate(rows, METRICS, **options)
    assert_frames_close(got, want)
    # the same request on a frame of the predictions: the join as a derivation
    frame = pl.read_parquet(lake, hive_partitioning=True)
    assert_frames_close(me.evaluate(frame, METRICS, labels=outcomes, **options), want)


def written(rows: pl.DataFrame, tmp_path: Path, **options: Any) -> tuple[Any, Any]:
    lake = write_lake(rows, tmp_path / "lake")
    mine = as_source(lake)
    theirs = as_source(write_outcomes(rows, tmp_path / "outcomes", ["sample", "label"]))
    join = labels.outcomes(mine.schema(), theirs, "sample", "label", "truth")
    return Derived(mine, join), labels.joined(mine, join, **options)


def test_the_written_join_reads_as_the_derivation(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    derived, held = written(predictions(), tmp_path)
    assert held.folder is not None and Path(held.folder).parent == tmp_path
    got, want = held.source.polars().collect(), derived.polars().collect()
    assert dict(got.schema) == dict(want.schema)  # the truth before the hive columns
    assert_frames_close(sorted_rows(got), sorted_rows(want))
    # each prediction file's rows in its order, the files in theirs
    lake = as_source(tmp_path / "lake").polars().select("sample", "label").collect()
    assert got.select("sample", "label").equals(lake)
    held.close()
    assert not Path(held.folder).exists()


def test_a_group_larger_than_the_budget_is_joined_in_parts(tmp_path: Path) -> None:
    # every day's samples (sample % 3) overlap every other's: one group, larger than 70 rows
    derived, held = written(predictions(), tmp_path, memory_limit=15_000)
    assert held.source.files and len(held.source.files) > 3  # parts of the 3 days' files
    assert_frames_close(sorted_rows(held.source.polars().collect()),
                        sorted_rows(derived.polars().collect()))
    held.close()


def test_what_a_lake_of_outcomes_refuses(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    rows = predictions()
    lake = write_lake(rows, tmp_path / "lake")
    paths = write_outcomes(rows, tmp_path / "outcomes", ["sample", "label"])
    twice = tmp_path / "twice.parquet"
    rows.select("sample", "label", "truth").head(1).write_parquet(twice)
    for given in ([*paths, str(twice)], [str(twice), *paths]):
        with pytest.raises(me.InputError, match="2 outcomes for sample=0, label='a': one "
                                                "outcome per sample and label"):
            me.evaluate(lake, "roc_auc", labels=given, unlabelled="skip")
    assert not list(tmp_path.glob("mleval-outcomes-*"))  # the files written are removed
    with pytest.raises(me.InputError, match="the outcomes have no column 'truth'"):
        me.evaluate(lake, "roc_auc", labels=twice.parent / "lake", unlabelled="skip")
    pl.DataFrame({"label": ["a"], "truth": [True]}).write_parquet(tmp_path / "no-sample.parquet")
    with pytest.raises(me.InputError, match="the outcomes have no column 'sample'"):
        me.evaluate(lake, "roc_auc", labels=tmp_path / "no-sample.parquet", unlabelled="skip")


# -- a nightly job's map of outcome files -----------------------------------------------------

def day_rows(day: int, *, seed: int = 0) -> pl.DataFrame:
    rng = np.random.default_rng(100 * seed + day)
    sample = np.repeat(np.arange(day * SAMPLES, (day + 1) * SAMPLES), 2)
    return pl.DataFrame({"sample": sample, "label": np.tile(["cat", "dog"], SAMPLES),
                         "score": rng.integers(0, 10, 2 * SAMPLES) / 10,
                         "truth": rng.random(2 * SAMPLES) < 0.5,
                         "weight": np.repeat(rng.integers(1, 3, SAMPLES).astype(float), 2),
                         "region": np.repeat(rng.choice(["eu", "us"], SAMPLES), 2)})


def write_predictions(lake: Path, day: int) -> None:
    out = lake / f"date={START + dt.timedelta(days=day)}" / "part-0.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    day_rows(day).drop("truth").write_parquet(out)


def write_day_outcomes(folder: Path, day: int, *, seed: int = 0) -> Path:
    out = folder / f"day={START + dt.timedelta(days=day)}" / "part-0.parquet"
    out.parent.mkdir(parents=True, exist_ok=True)
    day_rows(day, seed=seed).select("sample", "label", "truth").write_parquet(out)
    return out


def job_of(lake: Path, outcomes: Path, history: str) -> dict[str, Any]:
    return {"title": "late", "task": "multilabel", "engine": "duckdb", "threads": 1,
            "metrics": ["roc_auc", "f1"], "average": ["macro"], "segments": ["region"],
            "unlabelled": "skip", "sources": [{"path": str(lake)}],
            "curves": {"kinds": []}, "window": {"column": "date", "every": ["1d", "1w"]},
            "history": {"path": history}, "labels": {"path": str(outcomes)}}


def computed(summary: dict[str, Any]) -> set[tuple[str, str]]:
    return {(w["granularity"], w["window_start"][:10]) for w in summary["night"]["computed"]}


@pytest.mark.parametrize("kind", ["folder", "delta"])
def test_outcome_files_changed_or_deleted_recompute_their_windows(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    lake, outcomes = tmp_path / "lake", tmp_path / "outcomes"
    for day in range(6):  # 2026-10-01 .. 06: the weeks of Sep 28 and Oct 5
        write_predictions(lake, day)
    for day in range(5):
        write_day_outcomes(outcomes, day)
    history = str(tmp_path / "history") if kind == "folder" else f"delta://{tmp_path}/history"
    read_files: list[str] = []  # the outcome files the map reads
    groups = labels._groups

    def spied(*args: Any, alone: bool) -> Any:
        found = groups(*args, alone=alone)
        if not alone:
            read_files.extend(Path(f).parent.name[4:] for g in found for f in g.outcomes)
        return found

    monkeypatch.setattr(labels, "_groups", spied)
    runs = iter(range(100))

    def night(**options: Any) -> dict[str, Any]:
        read_files.clear()
        out = tmp_path / f"out-{next(runs)}"
        me.report(job_of(lake, outcomes, history), out, progress=False, **options)
        return json.loads((out / "summary.json").read_text())

    def equals_a_full_refresh() -> None:
        full = history.replace("history", f"full-{next(runs)}")
        out = tmp_path / f"out-{next(runs)}"
        me.report(job_of(lake, outcomes, full), out, progress=False)
        drop = ("run_id", "computed_at", "job")
        mine, theirs = (read_history(h.removeprefix("delta://")).drop(*drop).sort(pl.all())
                        for h in (history, full))
        assert mine.equals(theirs)  # fingerprints too: one map, read or made anew

    first = night()
    assert len(computed(first)) == 8 and sorted(read_files) == [
        f"2026-10-0{d}" for d in range(1, 6)]
    assert not computed(night()) and not read_files  # nothing new: no outcome file read

    write_day_outcomes(outcomes, 1, seed=7)  # 2026-10-02's outcomes rewritten
    assert computed(night()) == {("1d", "2026-10-02"), ("1w", "2026-09-28")}
    assert read_files == ["2026-10-02"]  # the changed file alone
    equals_a_full_refresh()

    (outcomes / "day=2026-10-04" / "part-0.parquet").unlink()  # deleted
    assert computed(night()) == {("1d", "2026-10-04"), ("1w", "2026-09-28")}
    assert not read_files
    equals_a_full_refresh()
    gone = read_history(history.removeprefix("delta://")).filter(
        pl.col("granularity") == "1d", pl.col("window_start") == dt.date(2026, 10, 4))
    assert gone["value"].drop_nulls().is_empty()  # no outcome: no value

    write_predictions(lake, 6)  # a new day's predictions, and outcomes of a day before
    write_day_outcomes(outcomes, 5)
    assert computed(night()) == {("1d", "2026-10-06"), ("1d", "2026-10-07"), ("1w", "2026-10-05")}
    assert read_files == ["2026-10-06"]  # the new outcomes, against every prediction file
    equals_a_full_refresh()

    stored = (History.open(history, "late") if kind == "folder" else
              DeltaHistory.open(history, "late")).outcome_map()
    assert stored is not None
    mapped = stored.filter(pl.col("granularity").is_not_null())["outcome"]
    assert mapped.str.contains("day=2026-10-06").any()
    assert not mapped.str.contains("day=2026-10-04").any()
    assert computed(night(full_refresh=True)) and len(read_files) == 5  # every file again


def test_the_history_keeps_the_map(tmp_path: Path) -> None:
    windows = pl.DataFrame({"granularity": ["1d"], "window_start": [dt.date(2026, 10, 1)],
                            "window_end": [dt.date(2026, 10, 2)], "fingerprint": ["f"]})
    rows = windows.select("granularity", "window_start", "window_end", metric=pl.lit("f1"),
                          value=pl.lit(0.5))
    mapped = pl.DataFrame({"basis": ["b"], "outcome": ["o\t1\t2"], "prediction": ["p\t3\t4"],
                           "granularity": ["1d"], "local_start": ["2026-10-01"]})
    for history in (History.open(tmp_path / "folder", "j"),
                    DeltaHistory.open(tmp_path / "delta", "j")):
        assert history.outcome_map() is None
        for run in range(3):
            with history.lock():
                history.replace(rows, windows, run_id=f"r{run}", request_hash="h",
                                outcomes=mapped.with_columns(basis=pl.lit(f"b{run}")))
        assert history.outcome_map()["basis"].to_list() == ["b2"]  # type: ignore[index]
        with history.lock():  # a run that keeps none: none
            history.replace(rows, windows, run_id="r3", request_hash="h")
        assert history.outcome_map() is None
        assert type(history).open(history.path, "j", full_refresh=True).outcome_map() is None
    # the folder keeps a map per version it keeps
    assert sorted(p.name for p in (tmp_path / "folder" / "_outcomes").iterdir()) == [
        "v000003.parquet"]


def test_files_of_no_rows_and_nested_columns_join_as_the_derivation(tmp_path: Path) -> None:
    rows = predictions()
    lake = write_lake(rows, tmp_path / "lake")
    empty = lake / "day=2026-11-09" / "part-0.parquet"  # a day of no rows
    empty.parent.mkdir()
    rows.drop("truth", "day").head(0).write_parquet(empty)
    # a nested column before the sample: the sample's statistics are its own leaf's
    known = rows.filter(pl.col("truth").is_not_null())
    known.select(pl.struct("label", "score").alias("nested"), "sample", "label",
                 "truth").write_parquet(tmp_path / "outcomes.parquet")
    mine, theirs = as_source(lake), as_source(tmp_path / "outcomes.parquet")
    join = labels.outcomes(mine.schema(), theirs, "sample", "label", "truth")
    held = labels.joined(mine, join)
    assert_frames_close(sorted_rows(held.source.polars().collect()),
                        sorted_rows(Derived(mine, join).polars().collect()))
    held.close()
