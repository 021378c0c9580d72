"""A report job over time: [window] tables of the latest window and every window's trend,
[history] nights that compute only the windows whose inputs or request changed, and what a
history refuses. Each night's history is held to a full refresh of the same lake."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.history import read as read_history
from mleval_sql.reporting.job import Job, JobError
from tests.helpers import assert_frames_close

START = dt.date(2026, 10, 1)  # a Thursday: the first ISO week is partial
SAMPLES = 30  # per model and day


def write_day(lake: Path, day: int, *, seed: int = 0) -> None:
    """One day of predictions of models a and b on the same samples (3 labels), as date=...
    hive folders."""
    rng = np.random.default_rng(1000 * seed + day)
    date = START + dt.timedelta(days=day)
    n = SAMPLES
    truth = rng.random(3 * n) < 0.4  # the day's samples, which both models score
    region = np.repeat(rng.choice(["eu", "us"], n), 3)
    for model, skill in (("a", 1.0), ("b", 1.5 - 0.1 * day)):
        noise = rng.normal(0, 1.0, 3 * n)
        frame = pl.DataFrame({
            "sample": np.repeat(np.arange(day * n, (day + 1) * n), 3),
            "label": np.tile(["cat", "dog", "bird"], n),
            "score": (1 / (1 + np.exp(-(skill * (2 * truth - 1) + noise)))).round(2),
            "truth": truth,
            "region": region,
        })
        folder = lake / f"model={model}" / f"date={date}"
        folder.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(folder / "part-0.parquet")


def job(lake: Path, history: Path | None, **more: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "title": "nightly", "task": "multilabel", "engine": "duckdb", "threads": 1,
        "metrics": ["roc_auc", "f1"], "average": ["macro"], "segments": ["region"],
        "sources": [{"path": str(lake), "model_column": "model"}],
        "curves": {"kinds": ["roc"]},
        "window": {"column": "date", "every": ["1d", "1w"]}, **more}
    if history is not None:
        data["history"] = {"path": str(history)}
    return data


def night(tmp: Path, data: dict[str, Any], name: str, **options: Any) -> dict[str, Any]:
    out = tmp / name
    me.report(data, out, progress=False, **options)
    return json.loads((out / "summary.json").read_text())


def computed(summary: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(w["granularity"], w["window_start"], w["reason"])
            for w in summary["night"]["computed"]}


def values(history: Path) -> pl.DataFrame:
    """A history's values, without what tells runs apart, in one order."""
    rows = read_history(history).drop("run_id", "computed_at", "job")
    return rows.sort(pl.all(), nulls_last=False)


@pytest.fixture
def lake(tmp_path: Path) -> Path:
    lake = tmp_path / "lake"
    for day in range(9):  # 2026-10-01 .. 2026-10-09: two ISO weeks, the second partial
        write_day(lake, day)
    return lake


def test_nights_compute_what_changed_and_equal_a_full_refresh(lake: Path, tmp_path: Path) -> None:
    history = tmp_path / "history"
    data = job(lake, history)
    first = night(tmp_path, data, "n1")
    assert {g for g, _, _ in computed(first)} == {"1d", "1w"}
    assert len(computed(first)) == 9 + 2 and first["night"]["kept"] == 0
    assert first["night"]["files_read"] == 18

    def full(name: str) -> pl.DataFrame:  # the same lake, every window anew
        other = tmp_path / f"full-{name}"
        night(tmp_path, job(lake, other), f"f-{name}")
        return values(other)

    write_day(lake, 9)  # a new day, in the second week
    second = night(tmp_path, data, "n2")
    assert computed(second) == {("1d", "2026-10-10", "new"), ("1w", "2026-10-05", "fingerprint")}
    assert second["night"]["kept"] == 10  # the 9 days before and the first week
    # the new day's files and its week's (5 + 1 days of two models)
    assert second["night"]["files_read"] == 12
    assert second["night"]["rows_read"] == 12 * SAMPLES * 3
    assert values(history).equals(full("2"))  # one thread: the same bits

    write_day(lake, 2, seed=7)  # a day rewritten (late labels): it and its week again
    third = night(tmp_path, data, "n3")
    assert computed(third) == {("1d", "2026-10-03", "fingerprint"),
                               ("1w", "2026-09-28", "fingerprint")}
    assert values(history).equals(full("3"))

    for model in ("a", "b"):  # a day deleted: its window is emptied, its week recomputed
        os.remove(lake / f"model={model}" / "date=2026-10-10" / "part-0.parquet")
    fourth = night(tmp_path, data, "n4")
    assert computed(fourth) == {("1d", "2026-10-10", "deleted"),
                                ("1w", "2026-10-05", "fingerprint")}
    assert values(history).equals(full("4"))

    changed = {**data, "threshold": 0.3}  # another request: every window
    fifth = night(tmp_path, changed, "n5")
    assert {r for _, _, r in computed(fifth)} == {"request"} and len(computed(fifth)) == 11

    quiet = night(tmp_path, changed, "n6")  # nothing changed: nothing read
    assert computed(quiet) == set() and quiet["night"]["files_read"] == 0
    assert (tmp_path / "n6" / "report.html").is_file()


def test_the_page_is_the_latest_window_and_equals_evaluate(lake: Path, tmp_path: Path) -> None:
    summary = night(tmp_path, job(lake, None, baseline={"previous": True}), "out")
    assert summary["window"]["windows"] == 9 + 2
    metrics = pl.read_parquet(tmp_path / "out" / "metrics.parquet")
    assert "window_start" not in metrics.columns  # the latest 1d window: 2026-10-09
    latest = me.evaluate(lake, ["roc_auc", "f1"], by="model", average="macro",
                         window="date:1d").filter(pl.col("window_start") == dt.date(2026, 10, 9))
    before = me.evaluate(lake, ["roc_auc", "f1"], by="model", average="macro",
                         window="date:1d").filter(pl.col("window_start") == dt.date(2026, 10, 8))
    overall = metrics.filter(pl.col("segmentation") == "overall", pl.col("average") == "macro")
    for row in latest.iter_rows(named=True):
        got = overall.filter(model=row["model"], metric=row["metric"])
        assert got["value"].item() == pytest.approx(row["value"], rel=1e-12)
        prior = before.filter(model=row["model"], metric=row["metric"])["value"].item()
        assert got["baseline"].item() == pytest.approx(prior, rel=1e-12)
    windows = pl.read_parquet(tmp_path / "out" / "windows.parquet")
    assert windows.select("granularity", "window_start").n_unique() == 11
    page = (tmp_path / "out" / "report.html").read_text()
    assert 'id="trends"' in page and "the 1d window [2026-10-09, 2026-10-10)" in page


@pytest.mark.parametrize("period", ["2026-10-05", "2026-W41", "2026-10-05/2026-10-07"])
def test_a_baseline_window_is_the_first_window_in_its_period(lake: Path, tmp_path: Path,
                                                             period: str) -> None:
    night(tmp_path, job(lake, None, baseline={"window": period}), "out")
    metrics = pl.read_parquet(tmp_path / "out" / "metrics.parquet")
    daily = me.evaluate(lake, ["roc_auc", "f1"], by="model", average="macro", window="date:1d")
    want = daily.filter(pl.col("window_start") == dt.date(2026, 10, 5))
    overall = metrics.filter(pl.col("segmentation") == "overall", pl.col("average") == "macro")
    assert overall.height == want.height == 4
    for row in want.iter_rows(named=True):
        got = overall.filter(model=row["model"], metric=row["metric"])["baseline"].item()
        assert got == pytest.approx(row["value"], rel=1e-12)


@pytest.mark.parametrize(("period", "message"), [
    ("2026-13", "baseline.window: "), ("2026-11", "no 1d window starts in 2026-11 "
                                                  r"\(from 2026-11-01 to 2026-12-01\)")])
def test_a_baseline_window_outside_the_job_is_refused(lake: Path, tmp_path: Path, period: str,
                                                      message: str) -> None:
    with pytest.raises(JobError, match=message):
        night(tmp_path, job(lake, None, baseline={"window": period}), "out")


def test_a_history_refuses_another_job_and_a_full_refresh_takes_it(lake: Path,
                                                                    tmp_path: Path) -> None:
    history = tmp_path / "history"
    night(tmp_path, job(lake, history), "a")
    other = {**job(lake, history), "title": "another"}
    with pytest.raises(me.InputError, match="belongs to the job 'nightly'"):
        night(tmp_path, other, "b")
    assert read_history(history)["job"].unique().to_list() == ["nightly"]
    taken = night(tmp_path, other, "c", full_refresh=True)
    assert {r for _, _, r in computed(taken)} == {"full_refresh"}
    assert read_history(history)["job"].unique().to_list() == ["another"]


@pytest.mark.parametrize(("change", "message"), [
    ({"history": {"path": "h"}, "window": None}, "history: keeps the rows of each time window"),
    ({"window": {"column": "date", "every": "1m"}}, "unknown granularity '1m'"),
    ({"window": {"column": "date", "every": ["1d"], "zone": "UTC"}}, "did you mean 'time_zone'"),
    ({"baseline": {"previous": True}, "window": None}, "previous and window compare"),
    ({"baseline": {"previous": True, "window": "2026-10"}}, "not both"),
])
def test_bad_time_keys_are_refused(lake: Path, change: dict[str, Any], message: str) -> None:
    data = {**job(lake, None), **change}
    data = {k: v for k, v in data.items() if v is not None}
    with pytest.raises(JobError, match=message):
        Job.from_dict(data)


def test_a_missing_window_column_names_it(lake: Path, tmp_path: Path) -> None:
    data = job(lake, tmp_path / "h", window={"column": "ts", "every": "1d"})
    with pytest.raises(me.InputError, match="window column 'ts' is not in the input"):
        night(tmp_path, data, "out")


def test_late_outcomes_recompute_their_windows(lake: Path, tmp_path: Path) -> None:
    """Predictions without truth and outcomes that arrive later: a night recomputes the
    windows of the samples whose outcomes arrived, and says each window's label coverage."""
    preds = tmp_path / "preds"
    outcomes = tmp_path / "outcomes"
    outcomes.mkdir()
    every = pl.read_parquet(lake / "model=a", hive_partitioning=True)  # one model's samples
    for path in (lake / "model=a").rglob("*.parquet"):  # the predictions without their truth
        out = preds / path.relative_to(lake)
        out.parent.mkdir(parents=True, exist_ok=True)
        pl.read_parquet(path).drop("truth").write_parquet(out)
    early = every.filter(pl.col("date") <= dt.date(2026, 10, 5))
    early.select("sample", "label", "truth").write_parquet(outcomes / "part-0.parquet")
    data = job(preds, tmp_path / "history", unlabelled="skip",
               labels={"path": str(outcomes)}, alerts={"min_label_coverage": 0.5})
    first = night(tmp_path, data, "n1")
    assert len(computed(first)) == 11
    kept = read_history(tmp_path / "history")
    coverage = kept.filter(pl.col("segmentation") == "overall", pl.col("granularity") == "1d")
    # the days without outcomes have no values (every row unlabelled) until they arrive
    assert coverage.group_by("window_start").agg(pl.col("label_coverage").first()).sort(
        "window_start")["label_coverage"].to_list() == [1.0] * 5
    week = kept.filter(pl.col("segmentation") == "overall", pl.col("granularity") == "1w",
                       pl.col("window_start") == dt.date(2026, 10, 5))
    assert week["label_coverage"].unique().to_list() == [pytest.approx(1 / 5)]

    late = every.filter(pl.col("date").is_between(dt.date(2026, 10, 6), dt.date(2026, 10, 8)))
    late.select("sample", "label", "truth").write_parquet(outcomes / "part-1.parquet")
    second = night(tmp_path, data, "n2")
    assert computed(second) == {("1d", f"2026-10-0{d}", "fingerprint") for d in (6, 7, 8)} | {
        ("1w", "2026-10-05", "fingerprint")}
    values = read_history(tmp_path / "history").filter(
        pl.col("granularity") == "1d", pl.col("window_start") == dt.date(2026, 10, 7),
        pl.col("segmentation") == "overall", pl.col("metric") == "roc_auc",
        pl.col("average") == "macro")
    direct = me.evaluate(lake / "model=a", "roc_auc", average="macro", window="date:1d")
    want = direct.filter(pl.col("window_start") == dt.date(2026, 10, 7))
    assert values["value"].to_list() == pytest.approx(want["value"].to_list(), rel=1e-12)
    assert values["label_coverage"].to_list() == [1.0]
    with pytest.raises(me.InputError, match="one outcome per sample and label"):
        early.head(1).select("sample", "label", "truth").write_parquet(
            outcomes / "part-2.parquet")
        night(tmp_path, data, "n3")


def test_paired_tests_of_a_windowed_job_are_the_latest_windows(lake: Path,
                                                               tmp_path: Path) -> None:
    data = job(lake, None, baseline={"model": "a"}, ci=0.95, resamples=50, alerts={
        "rules": [{"metric": "f1", "drop": 0.01, "significant": True}]})
    night(tmp_path, data, "out")
    metrics = pl.read_parquet(tmp_path / "out" / "metrics.parquet")
    keys = ["model", "segment", "metric", "average", "label", "predicted"]
    assert not metrics.select(*(k for k in keys if k in metrics.columns)).is_duplicated().any()
    direct = me.compare(lake, "f1", model="model", baseline="a", average="macro",
                        window="date:1d", resamples=50).filter(
        pl.col("window_start") == dt.date(2026, 10, 9))
    row = metrics.filter(segment="overall", metric="f1", average="macro", model="b")
    assert row["paired_p"].item() == pytest.approx(direct["p_value"].item(), rel=1e-12)


def test_a_table_without_files_recomputes_every_window(lake: Path, tmp_path: Path) -> None:
    table = tmp_path / "delta"
    pl.read_parquet(lake, hive_partitioning=True).write_delta(table)
    data = {**job(lake, tmp_path / "history"), "sources": [
        {"path": str(table), "model_column": "model"}]}
    for name in ("n1", "n2"):  # a Delta table's files do not say their windows
        summary = night(tmp_path, data, name)
        assert {r for _, _, r in computed(summary)} == {"inputs_unknown"}
        assert len(computed(summary)) == 11 and summary["night"]["kept"] == 0
    kept = read_history(tmp_path / "history")
    assert kept.select("granularity", "window_start").n_unique() == 11



@pytest.mark.parametrize("reference", ["previous", {"period": "2026-10-01/2026-10-04"}])
def test_a_nights_drift_reads_its_reference(lake: Path, tmp_path: Path,
                                            reference: Any) -> None:
    """A night computes the drift of the windows it computes against their reference (the
    window before, or a fixed period) although the metrics read only those windows' files:
    equal to the drift of the whole lake for the same windows."""
    drift = {"reference": reference, "statistics": ["ks", "psi"]}
    data = job(lake, tmp_path / "history", drift=drift)
    night(tmp_path, data, "first")
    write_day(lake, 9)
    summary = night(tmp_path, data, "second")
    assert computed(summary) == {("1d", "2026-10-10", "new"), ("1w", "2026-10-05", "fingerprint")}
    me.report(job(lake, None, drift=drift), tmp_path / "whole", progress=False)
    tonight = pl.read_parquet(tmp_path / "second" / "drift.parquet")
    whole = pl.read_parquet(tmp_path / "whole" / "drift.parquet")
    keys = ["granularity", "window_start"]
    assert sorted(tonight.select(keys).unique().rows()) == [
        ("1d", dt.date(2026, 10, 10)), ("1w", dt.date(2026, 10, 5))]
    assert tonight["value"].is_not_null().all()
    expected = whole.join(tonight.select(keys).unique(), on=keys).select(tonight.columns)
    order = [c for c in tonight.columns if tonight.schema[c] != pl.Float64]
    assert_frames_close(tonight.sort(order, nulls_last=True),
                        expected.sort(order, nulls_last=True))
