"""Reporting jobs: the example job's tables equal ``mleval_sql.evaluate``; baselines and alert
rules fire on one side of each rule and not on the other; bad jobs get one clear line; outputs
are atomic and deterministic; the page renders in a real headless browser without network."""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.engines.duckdb import DuckDBEngine
from mleval_sql.reporting import Job, JobError
from mleval_sql.reporting.run import Progress, run

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "report.toml"
LAKE = ROOT / "fixtures" / "lake"
SEEDS = ROOT / "fixtures" / "seeds"
CHROMIUM = Path("/usr/bin/chromium")
SEGMENTATIONS = {"overall": [], "region": ["region"], "date": ["date"],
                 "region x date": ["region", "date"]}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> me.reporting.Outcome:
    return me.report(EXAMPLE, tmp_path_factory.mktemp("report"), progress=False)


def _close(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-14)


def test_every_number_of_the_tables_is_evaluates(example):
    job = Job.load(EXAMPLE)
    tidy = pl.read_parquet(example.output / "metrics.parquet")
    assert tidy.columns[:5] == ["model", "segmentation", "segment", "region", "date"]
    checked = 0
    for name, by in SEGMENTATIONS.items():
        expected = me.evaluate(LAKE, [*job.metrics, "roc_auc", "average_precision"],
                               by=["model", *by], average=["none", "macro"], task="multilabel")
        got = tidy.filter(pl.col("segmentation") == name)
        keys = ["model", *by, "metric", "average", "label"]
        joined = expected.join(got.select(*keys, got_value="value"), on=keys, how="full",
                               nulls_equal=True)
        assert joined.height == expected.height == got.height, name
        for want, have in joined.select("value", "got_value").iter_rows():
            assert _close(want, have), (name, want, have)
            checked += 1
        others = [c for c in ("region", "date") if c not in by]
        assert all(got[c].null_count() == got.height for c in others)
    assert checked == tidy.height
    # the baseline is model a of the same run: b's delta is b - a on every row
    a = tidy.filter(pl.col("model") == "a")
    b = tidy.filter(pl.col("model") == "b")
    assert a["baseline"].null_count() == a.height
    assert all(_close(x, y) for x, y in zip(b["baseline"], a["value"], strict=True))
    assert all(_close(d, v - w) for d, v, w in zip(b["delta"], b["value"], a["value"],
                                                    strict=True))
    assert pl.read_csv(example.output / "metrics.csv").height == tidy.height


def test_wide_table_and_sizes(example):
    tidy = pl.read_parquet(example.output / "metrics.parquet")
    wide = pl.read_parquet(example.output / "wide.parquet")
    assert wide.height == 2 * (1 + 3 + 2 + 6)  # models x (overall + regions + dates + crossed)
    assert {"roc_auc", "f1", "subset_accuracy", "brier_score"} <= set(wide.columns)
    for row in wide.iter_rows(named=True):
        for metric in ("roc_auc", "f1", "brier_score", "subset_accuracy"):
            average = None if metric == "subset_accuracy" else "macro"
            (value,) = tidy.filter(
                (pl.col("model") == row["model"]) & (pl.col("segment") == row["segment"])
                & (pl.col("metric") == metric) & pl.col("label").is_null()
                & (pl.col("average").eq_missing(average)))["value"]
            assert _close(row[metric], value)
    data = pl.read_parquet(LAKE / "**" / "*.parquet", hive_partitioning=True)
    samples = data.group_by("model", "region").agg(pl.col("sample").n_unique(),
                                                   pl.col("weight").sum() / 4)
    for model, region, n, weight in samples.iter_rows():
        (row,) = wide.filter((pl.col("model") == model)
                             & (pl.col("segment") == f"region={region}")).to_dicts()
        assert (row["samples"], row["weight"]) == (n, weight)
    assert pl.read_csv(example.output / "wide.csv").height == wide.height


def test_the_wide_table_holds_the_metrics_asked_named_as_evaluate_names_them():
    """The PR curves' legends take average precision: the table of segments does not show it;
    a metric with two averages gets evaluate's wide names (f1_macro)."""
    from mleval_sql.reporting.run import wide_table

    result = _run(_job(metrics=["f1", "roc_auc"], average=["macro", "micro"],
                       curves={"kinds": ["pr"]}))
    assert "average_precision" in result.metrics["metric"].to_list()
    names = wide_table(result).columns
    assert "average_precision" not in names
    assert names[names.index("judged") + 1:] == ["f1_macro", "f1_micro", "roc_auc_macro",
                                                 "roc_auc_micro"]


def test_curve_tables_are_curves(example):
    points = pl.read_parquet(example.output / "curve_roc_pr.parquet")
    overall = points.filter(pl.col("segmentation") == "overall").drop(
        "segmentation", "segment", "region", "date")
    exact = me.curve(LAKE, "roc", by="model", drop_intermediate=False)
    assert overall.columns == exact.columns
    # each row a point of the exact curve, at most max_points a curve, every curve drawn
    # within the stated distance of the exact one (tests/test_report_curves.py: the bound)
    assert overall.join(exact, on=overall.columns, how="anti").is_empty()
    sizes = overall.group_by("model", "label").len()
    assert sizes.height == 8 and sizes["len"].max() <= Job.load(EXAMPLE).max_points
    assert set(points["segmentation"]) == set(SEGMENTATIONS)
    sweep = pl.read_parquet(example.output / "curve_sweep.parquet")
    assert sweep["threshold"].n_unique() == 21
    # the job sets ci; the sweep's points have no intervals, one row each
    assert "ci_low" not in sweep.columns
    assert not sweep.select("model", "segment", "average", "label", "threshold").is_duplicated(
        ).any()
    point = sweep.filter((pl.col("model") == "b") & (pl.col("segment") == "region=eu")
                         & (pl.col("label") == "cat") & (pl.col("threshold") == 0.5))
    value = me.evaluate(LAKE, "f1", by=["model", "region"], average="none",
                        thresholds=[0.5]).filter(
        (pl.col("model") == "b") & (pl.col("region") == "eu") & (pl.col("label") == "cat"))
    assert _close(point["f1"].item(), value["value"].item())
    reliability = pl.read_parquet(example.output / "curve_reliability.parquet")
    # me.curve sums on every thread in their order: the same to the last bit or two
    assert_frame_equal(reliability.filter(pl.col("segmentation") == "overall").drop(
        "segmentation", "segment", "region", "date"), me.curve(LAKE, "reliability", by="model"),
        check_exact=False, rel_tol=1e-12)


def test_every_point_on_request(tmp_path):
    """[curves] max_points = 0: every point where either curve bends (scikit-learn's
    drop_intermediate of roc_curve and of precision_recall_curve)."""
    result = _run(_job(curves={"kinds": ["roc", "pr"], "max_points": 0}, segments=[]))
    table = result.curves["roc"].drop("segmentation", "segment")
    assert result.curves["pr"] is result.curves["roc"]
    roc = me.curve(LAKE, "roc", by="model")
    pr = me.curve(LAKE, "pr", by="model", drop_intermediate=True)
    union = pl.concat([roc, pr]).unique(maintain_order=True).sort(
        "model", "label", "threshold", descending=[False, False, True])
    assert_frame_equal(table, union)
    thinned = _run(_job(curves={"kinds": ["roc", "pr"], "max_points": 16}, segments=[]))
    assert thinned.curves["roc"].group_by("model", "label").len()["len"].max() <= 16
    for row in result.metrics.filter(pl.col("metric").is_in(["roc_auc", "average_precision"])
                                     & pl.col("label").is_not_null()).iter_rows(named=True):
        got = thinned.metrics.filter(
            (pl.col("model") == row["model"]) & (pl.col("metric") == row["metric"])
            & (pl.col("label") == row["label"]) & pl.col("average").is_null())
        assert got["value"].item() == row["value"]  # the areas: every point, whatever is drawn


def test_summary_and_alerts(example):
    summary = json.loads((example.output / "summary.json").read_text())
    assert summary["task"] == "multilabel" and summary["models"] == ["a", "b"]
    assert summary["ok"] is False and summary["alerts"] == example.alerts
    fired = {(a["rule_key"], a["model"]) for a in summary["alerts"]}
    assert fired == {("alerts.rules[0]", "a")}  # model a's macro AUC is below 0.75
    wide = pl.read_parquet(example.output / "wide.parquet")
    low = wide.filter((pl.col("model") == "a") & (pl.col("roc_auc") < 0.75)
                      & (pl.col("samples") >= 30))
    assert sorted(a["segment"] for a in summary["alerts"]) == sorted(low["segment"])
    assert summary["inputs"][0]["samples"] == 600
    # the drop rule is significant: one paired test of model b per segment, none fired (b is
    # the better model everywhere)
    assert summary["tests"] == 12 and summary["fdr"] == 0.05
    assert [r["significant"] for r in summary["rules"]] == [False, True]
    assert summary["intervals"]["ci"] == 0.95 and summary["intervals"]["resamples"] == 200
    tidy = pl.read_parquet(example.output / "metrics.parquet")
    assert summary["intervals"]["methods"] == dict(
        sorted(tidy.group_by("ci_method").len().iter_rows()))
    assert all(a["p_value"] is None and a["q_value"] is None for a in summary["alerts"])


def test_the_guide_shows_the_example_job():
    import re

    from mleval_sql.reporting.job import toml

    readme = (ROOT / "docs" / "guides" / "reports.md").read_text(encoding="utf-8")
    assert "mleval report examples/report.toml --output report/" in readme
    assert "(../report.png)" in readme and (ROOT / "docs" / "report.png").is_file()
    assert all((ROOT / "docs" / name).is_file()
               for name in re.findall(r"\(\.\./([\w.-]+\.png)\)", readme))
    block, *parts = re.findall(r"```toml\n(.*?)```", readme, flags=re.S)
    shown = Job.from_dict(toml().loads(block), base=EXAMPLE.parent)
    for part in parts:  # the guide's other tables are keys the example job takes
        Job.from_dict({**toml().loads(block), **toml().loads(part)}, base=EXAMPLE.parent)
    example = Job.load(EXAMPLE)
    for key in ("metrics", "segmentations", "average", "curves", "max_points", "task",
                "baseline", "slices"):
        assert getattr(shown, key) == getattr(example, key), key
    assert [(s.paths, s.model_column) for s in shown.sources] == \
        [(s.paths, s.model_column) for s in example.sources]


# -- baselines and rules, on both sides of each --------------------------------------------

def _job(**changes: Any) -> dict[str, Any]:
    job: dict[str, Any] = {
        "sources": [{"path": str(LAKE), "model_column": "model"}],
        "segments": ["region"], "metrics": ["roc_auc", "f1"], "average": ["macro"],
        "curves": {"kinds": []}, "task": "multilabel",
    }
    job.update(changes)
    return job


def _run(job: dict[str, Any]):
    return run(Job.from_dict(job), Progress(1, show=False))


def _value(metrics: pl.DataFrame, model: str, segment: str, metric: str, column: str = "value",
           average: str = "macro") -> float:
    return metrics.filter((pl.col("model") == model) & (pl.col("segment") == segment)
                          & (pl.col("metric") == metric)
                          & (pl.col("average") == average))[column].item()


@pytest.fixture(scope="module")
def plain():
    return _run(_job())


def test_both_engines_give_the_same_tables(plain):
    polars = _run(_job(engine="polars"))
    keys = ["model", "segment", "metric", "average", "label"]
    joined = plain.metrics.join(polars.metrics.select(*keys, other="value"), on=keys,
                                how="full", nulls_equal=True)
    assert joined.height == plain.metrics.height == polars.metrics.height
    assert all(_close(a, b) for a, b in joined.select("value", "other").iter_rows())
    assert plain.sizes.equals(polars.sizes)


@pytest.mark.parametrize("condition", ["below", "above"])
def test_absolute_rules_fire_on_one_side_only(plain, condition):
    value = _value(plain.metrics, "b", "region=eu", "roc_auc")
    eps = 1e-9
    sign = 1 if condition == "below" else -1
    for limit, fires in ((value + sign * eps, True), (value - sign * eps, False)):
        rule = {"metric": "roc_auc", "average": "macro", condition: limit}
        alerts = _run(_job(alerts={"rules": [rule]})).alerts
        hit = alerts.filter((pl.col("model") == "b") & (pl.col("segment") == "region=eu"))
        assert hit.height == int(fires), (condition, limit, value)
        assert all((v < limit) if condition == "below" else (v > limit)
                   for v in alerts["value"])


def test_baseline_from_an_earlier_run_drop_and_rise(tmp_path, plain):
    earlier = tmp_path / "earlier"
    me.report(_job(), earlier, progress=False)
    # today: model b lost its predictions' edge on 'eu' (scores shuffled towards 0.5)
    data = pl.read_parquet(LAKE / "**" / "*.parquet", hive_partitioning=True)
    worse = data.with_columns(score=pl.when((pl.col("model") == "b") & (pl.col("region") == "eu"))
                              .then(0.5 + (pl.col("score") - 0.5) * 0.2 + 0.05 * (
                                  pl.col("sample").hash(7) % 7 / 7 - 0.5))
                              .otherwise(pl.col("score")))
    today = tmp_path / "today.parquet"
    worse.write_parquet(today)
    base = {"path": str(earlier)}
    result = _run(_job(sources=[{"path": str(today), "model_column": "model"}],
                       baseline=base))
    before = _value(plain.metrics, "b", "region=eu", "roc_auc")
    after = _value(result.metrics, "b", "region=eu", "roc_auc")
    delta = _value(result.metrics, "b", "region=eu", "roc_auc", "delta")
    assert _close(_value(result.metrics, "b", "region=eu", "roc_auc", "baseline"), before)
    assert _close(delta, after - before) and delta < -0.01
    for rule, fires in (({"drop": -delta - 1e-9}, True), ({"drop": -delta + 1e-9}, False),
                        ({"rise": 0.0}, False), ({"rise": -1.0}, True)):
        alerts = _run(_job(sources=[{"path": str(today), "model_column": "model"}],
                           baseline=base, alerts={"rules": [{"metric": "roc_auc",
                                                             **rule}]})).alerts
        hit = alerts.filter((pl.col("model") == "b") & (pl.col("segment") == "region=eu"))
        assert hit.height == int(fires), rule
        if fires and "drop" in rule:  # nothing else moved (the overall row holds 'eu' too)
            assert alerts.filter((pl.col("model") != "b") | ~pl.col("segment").is_in(
                ["region=eu", "overall"])).is_empty()
    # the other segments are unchanged: their delta is 0
    same = _value(result.metrics, "a", "region=us", "f1", "delta")
    assert same == 0.0


def test_baseline_model_of_the_run(plain):
    result = _run(_job(baseline={"model": "a"}))
    for segment in ("overall", "region=asia"):
        a = _value(result.metrics, "a", segment, "f1")
        b = _value(result.metrics, "b", segment, "f1")
        assert _close(_value(result.metrics, "b", segment, "f1", "delta"), b - a)
        assert _value(result.metrics, "a", segment, "f1", "delta") is None


def test_small_segments_are_shown_but_never_alert(plain):
    sizes = plain.sizes.filter((pl.col("model") == "a") & (pl.col("segment") == "region=us"))
    n, weight = sizes["samples"].item(), sizes["weight"].item()
    rule = {"metric": "f1", "above": -1.0}  # fires wherever judged
    for limits, judged in (({"min_samples": n}, True), ({"min_samples": n + 1}, False),
                           ({"min_weight": weight}, True), ({"min_weight": weight + 0.5}, False)):
        result = _run(_job(alerts={"rules": [rule], **limits}))
        hit = result.alerts.filter((pl.col("model") == "a") & (pl.col("segment") == "region=us"))
        assert hit.height == int(judged), limits
        shown = result.sizes.filter((pl.col("model") == "a")
                                    & (pl.col("segment") == "region=us"))
        assert shown["judged"].item() is judged


def test_per_label_rules(plain):
    value = plain.metrics.filter((pl.col("model") == "a") & (pl.col("segment") == "overall")
                                 & (pl.col("metric") == "f1") & (pl.col("label") == "dog"))
    v = value["value"].item()
    rule = {"metric": "f1", "average": "none", "label": "dog", "below": v + 1e-9}
    alerts = _run(_job(alerts={"rules": [rule]})).alerts
    assert ("a", "overall", "dog") in alerts.select("model", "segment", "label").rows()
    assert set(alerts["label"]) == {"dog"}


def _noisy_lake(folder: Path) -> Path:
    """The lake's model a, and a model b equal to it but on 'eu', where a's scores are mixed
    with noise (a real loss), and 'us', where they move by tiny noise (no real change)."""
    data = pl.read_parquet(LAKE / "**" / "*.parquet", hive_partitioning=True)
    a = data.filter(pl.col("model") == "a")
    noise = pl.col("sample").hash(11) % 1000 / 1000
    b = a.with_columns(model=pl.lit("b"), score=pl.when(pl.col("region") == "eu")
                       .then(0.4 * pl.col("score") + 0.6 * noise)
                       .when(pl.col("region") == "us")
                       .then((pl.col("score") + 0.01 * (noise - 0.5)).clip(0, 1))
                       .otherwise(pl.col("score")))
    path = folder / "noisy.parquet"
    pl.concat([a, b]).write_parquet(path)
    return path


def test_significant_rules_fire_on_real_changes_not_on_noise(tmp_path):
    rule = {"metric": "roc_auc", "average": "macro", "drop": 0.0005}
    job = _job(sources=[{"path": str(_noisy_lake(tmp_path)), "model_column": "model"}],
               ci=0.95, resamples=200, baseline={"model": "a"},
               alerts={"rules": [rule, {**rule, "significant": True}]})
    outcome = me.report(job, tmp_path / "out", progress=False)
    alerts = pl.read_csv(tmp_path / "out" / "alerts.csv")
    fired = {r: sorted(alerts.filter(pl.col("rule") == r)["segment"]) for r in (0, 1)}
    # the ordinary rule fires on every drop over its threshold, the tiny one on 'us' too
    assert fired[0] == ["overall", "region=eu", "region=us"]
    # the significant one where the models really differ ('eu', and the overall row holding it)
    assert fired[1] == ["overall", "region=eu"]
    assert set(alerts["model"]) == {"b"}
    ordinary, tested = alerts.filter(pl.col("rule") == 0), alerts.filter(pl.col("rule") == 1)
    assert ordinary["p_value"].null_count() == ordinary["q_value"].null_count() == 3
    assert (tested["q_value"] <= 0.05).all() and (tested["p_value"] <= tested["q_value"]).all()
    summary = outcome.summary
    assert summary["tests"] == 4 and summary["fdr"] == 0.05  # model b in 4 segments
    # DeLong's for 2 models x 4 segments x 4 labels' AUC, the bootstrap for their macro AUC,
    # per-label F1 and macro F1
    assert summary["intervals"] == {"ci": 0.95, "resamples": 200, "seed": 0,
                                    "methods": {"bootstrap": 48, "delong": 32}}
    # the page: intervals in the tables, error bars in the chart, the tests counted, p- and
    # q-values of the significant rule's alerts, its values marked in the overview
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert "4 tests, false discovery rate 0.05" in page
    assert "<th>p-value</th><th>q-value</th>" in page
    for i in (0, 1):  # a group of bars per model, and its caps
        assert f'<g id="by-segment-interval-{i}">' in page
        assert f'<g id="by-segment-interval-{i}-caps">' in page
    metrics = pl.read_parquet(tmp_path / "out" / "metrics.parquet")
    (low, high), = metrics.filter(
        (pl.col("model") == "b") & (pl.col("segment") == "region=eu")
        & (pl.col("metric") == "roc_auc") & (pl.col("average") == "macro")).select(
        "ci_low", "ci_high").rows()
    assert f'<span class="ci">[{low:.2f}, {high:.2f}]</span>' in page
    marks = page[page.index('<section id="overview">'):page.index("</section>",
                                                                 page.index('id="overview"'))]
    assert marks.count('<sup class="flag">*</sup>') == 2  # b's overall and eu values
    assert marks.count('class="flagged" title="alerts.rules[1]: ') == 2
    # the same inputs, the same files, intervals and tests included
    again = me.report(job, tmp_path / "again", progress=False)
    for path in again.files:
        if path.name in ("report.html", "summary.json"):
            assert _without_timings(path) == _without_timings(tmp_path / "out" / path.name)
        else:
            assert path.read_bytes() == (tmp_path / "out" / path.name).read_bytes(), path.name


# -- the command, errors, atomic and deterministic outputs ---------------------------------

def _write_job(folder: Path, text: str) -> Path:
    path = folder / "job.toml"
    path.write_text(text, encoding="utf-8")
    return path


SMALL = f"""
title = "small"
task = "multilabel"
segments = ["region"]
metrics = ["roc_auc", "f1"]
average = ["macro"]
[[sources]]
path = "{LAKE}"
model_column = "model"
[curves]
kinds = []
"""
WITH_ROC = SMALL.replace("kinds = []", 'kinds = ["roc"]')


@pytest.mark.parametrize(("old", "new", "message"), [
    ('["roc_auc", "f1"]', "['roc_aucc']",
     "metrics[0]: unknown metric 'roc_aucc'; did you mean 'roc_auc'?"),
    ("", "[[sources]]\npath = 'nowhere/lake'", "sources[1].path: no such file or folder"),
    ("", "[[alerts.rules]]\nmetric = 'mcc'\nbelow = 0.5",
     "alerts.rules[0].metric: the job does not compute 'mcc'"),
    ("", "[[alerts.rules]]\nmetric = 'f1'\ndrop = 0.5",
     "alerts.rules[0].drop: compares with a baseline, but the job names none"),
    ("", "[[alerts.rules]]\nmetric = 'f1'", "alerts.rules[0]: expected exactly one of below"),
    ("segments =", "segmnts =",
     "segmnts: unknown key in the job's top level; did you mean 'segments'?"),
    ("", "[baseline]\npath = 'nowhere'", "baseline.path: "),
    ("", "[report]\nrank_by = 'mcc'", "report.rank_by: 'mcc' is not one of the job's metrics"),
    ("", "[[alerts.rules]]\nmetric = 'f1'\naverage = 'weighted'\nbelow = 1",
     "alerts.rules[0].average: the job computes no 'weighted' average of f1"),
    ('task = "multilabel"', 'task = "multilabels"', "task: expected one of"),
    ("kinds = []", 'kinds = ["lift"]', "curves.kinds[0]: expected one of"),
    ("", "[[alerts.rules]]\nmetric = 'f1'\nbelow = 0.5\nsignificant = true",
     "alerts.rules[0].significant: a test needs intervals; set ci = 0.95"),
    ("kinds = []", "kinds = ['roc']\nmax_points = 5",
     "curves.max_points: max_points must be 0 (every point) or a whole number >= 8, got 5"),
    ("", "[slices]\nmetric = 'f1'", "slices.over: missing; expected a string or a list"),
    ("", "[slices]\nover = []", "slices.over: expected the columns slices are made of"),
    ("", "[slices]\nover = ['region']\nmetric = 'roc_aucc'",
     "slices.metric: unknown metric 'roc_aucc'; did you mean 'roc_auc'?"),
    ("", "[slices]\nover = ['region']\ntop = 0",
     "slices.top: top must be a whole number >= 1, got 0"),
    ("", "[slices]\nover = ['region']\nalpha = 2",
     "slices.alpha: alpha must be a number in (0, 1], got 2"),
    ("", "[slices]\nover = ['region']\ntopp = 3",
     "slices.topp: unknown key in [slices]; did you mean 'top'?"),
    ("", "[slices]\nover = ['regoin']", "slices.over: sources[0] has no column 'regoin'"),
    ("", "[slices]\nover = ['model']",
     "slices.over: 'model' is the model column of sources[0]: slices are found within each"),
])
def test_bad_jobs_get_one_line_naming_the_key(tmp_path, capsys, old, new, message):
    text = SMALL.replace(old, new) if old else SMALL + "\n" + new + "\n"
    job = _write_job(tmp_path, text)
    assert main(["report", str(job), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mleval: error: "), err
    assert message in err, err
    assert not (tmp_path / "out" / "report.html").exists()


def test_segment_column_missing(tmp_path, capsys):
    job = _write_job(tmp_path, SMALL.replace('["region"]', '["regoin"]'))
    assert main(["report", str(job), "-o", str(tmp_path / "out")]) == 2
    assert "segments: sources[0] has no column 'regoin'" in capsys.readouterr().err


def test_stages_show_on_a_terminal_only(tmp_path, capsys):
    job = _write_job(tmp_path, SMALL)
    me.report(job, tmp_path / "quiet")  # stderr is not a terminal under pytest
    assert capsys.readouterr().err == ""
    me.report(job, tmp_path / "loud", progress=True)
    lines = capsys.readouterr().err.splitlines()
    # one evaluation per segmentation gives its metrics, sizes and curves: one stage each
    assert lines[0] == "mleval report: [1/7] checking the sources"
    assert lines[1] == "mleval report: [2/7] sources[0]: overall"
    assert lines[2] == "mleval report: [3/7] sources[0]: region"
    assert lines[-1] == "mleval report: [7/7] done"


def test_fail_on_alert_sets_the_exit_status(tmp_path, capsys):
    rule = "[[alerts.rules]]\nmetric = 'roc_auc'\nbelow = 0.99\n"
    job = _write_job(tmp_path, SMALL + rule)
    out = tmp_path / "out"
    assert main(["report", str(job), "-o", str(out)]) == 0
    assert main(["report", str(job), "-o", str(out), "--fail-on-alert"]) == 1
    calm = _write_job(tmp_path, SMALL + rule.replace("0.99", "0.01"))
    assert main(["report", str(calm), "-o", str(out), "--fail-on-alert"]) == 0
    assert json.loads((out / "summary.json").read_text())["ok"] is True
    assert "0 alerts (ok)" in capsys.readouterr().err


def _without_timings(path: Path) -> str:
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".json":
        data = json.loads(text)
        data.pop("seconds")
        return json.dumps(data)
    start = text.index('<dl id="run-time">')
    return text[:start] + text[text.index("</dl>", start):]


def test_same_inputs_same_files(tmp_path):
    job = _write_job(tmp_path, WITH_ROC)
    one, two = tmp_path / "one", tmp_path / "two"
    me.report(job, one, progress=False)
    me.report(job, two, progress=False)
    names = sorted(p.name for p in one.iterdir())
    assert names == sorted(p.name for p in two.iterdir())
    assert "report.html" in names and "curve_roc.parquet" in names
    for name in names:
        if name in ("report.html", "summary.json"):
            assert _without_timings(one / name) == _without_timings(two / name), name
        else:
            assert (one / name).read_bytes() == (two / name).read_bytes(), name
    page = (one / "report.html").read_text()
    assert "<dc:date>" not in page and "Date" not in page
    # without ci: no interval in the tables, no error bar in the charts, no test
    assert 'class="ci"' not in page and "-interval-" not in page and "p-value" not in page
    summary = json.loads((one / "summary.json").read_text())
    assert summary["intervals"] is None and summary["tests"] == 0


def test_reruns_write_the_same_bits_on_every_thread(tmp_path):
    """Rows enough for DuckDB to split each step over threads (four times as many threads as
    this machine's cores shuffle the order further), and sums that depend on their order:
    average precision, the Brier score, calibration bins, macro averages. Without
    reproducible sums the files differed on most reruns."""
    rng = np.random.default_rng(5)
    n = 120_000
    truth = rng.random((n, 4)) < [0.1, 0.3, 0.5, 0.2]
    score = 1 / (1 + np.exp(-(rng.normal(size=(n, 4)) + truth)))
    frame = pl.DataFrame({"sample": np.repeat(np.arange(n), 4),
                          "label": np.tile(["w", "x", "y", "z"], n),
                          "score": score.ravel(), "truth": truth.ravel(),
                          "seg": np.repeat(rng.integers(0, 3, n), 4)})
    frame.write_parquet(tmp_path / "big.parquet", row_group_size=50_000)
    job = {"sources": [{"path": str(tmp_path / "big.parquet"), "model": "m"}],
           "segments": ["seg"], "task": "multilabel", "threads": 4 * (os.cpu_count() or 1),
           "metrics": ["roc_auc", "average_precision", "brier_score", "f1"],
           "average": ["macro", "weighted"], "curves": {"kinds": ["roc", "pr", "reliability"]}}
    outputs = [me.report(job, tmp_path / f"run{i}", progress=False) for i in range(3)]
    assert outputs[0].summary["reproducible"] is True
    for other in outputs[1:]:
        for path in other.files:
            if path.name in ("report.html", "summary.json"):
                assert _without_timings(path) == _without_timings(
                    outputs[0].output / path.name), path.name
            else:
                assert path.read_bytes() == (outputs[0].output / path.name).read_bytes(), \
                    path.name


@pytest.mark.parametrize("curves", [[], ["pr"]], ids=["ranks", "off the curve"])
def test_reproducible_ranking_metrics_keep_every_thread(curves, monkeypatch):
    """Every weight 1: the ranking metrics sum their fractional terms as exact decimals, so a
    reproducible run keeps every thread for them (ranking_metrics.sql, or curve_metrics.sql off
    the curve) and reruns still give the same bits. Plain double sums fail this (AP, the
    break-even point and the partial AUC differ in their last bits from run to run)."""
    rng = np.random.default_rng(11)
    n = 100_000
    truth = rng.random((n, 3)) < [0.05, 0.3, 0.6]
    score = np.round(1 / (1 + np.exp(-(rng.normal(size=(n, 3)) + truth))), 3)  # ties
    frame = pl.DataFrame({"sample": np.repeat(np.arange(n), 3),
                          "label": np.tile(["x", "y", "z"], n), "score": score.ravel(),
                          "truth": truth.ravel(), "seg": np.repeat(rng.integers(0, 2, n), 3)})
    one_thread: list[str] = []
    original = DuckDBEngine._ordered

    @contextmanager
    def ordered(self: DuckDBEngine, step: str) -> Iterator[bool]:
        with original(self, step) as sort:
            if not self._free(step):
                one_thread.append(step)
            yield sort

    monkeypatch.setattr(DuckDBEngine, "_ordered", ordered)
    runs = [me.evaluate(frame, metrics=["roc_auc", "average_precision", "break_even"],
                        average=["none", "macro", "micro"], by="seg", engine="duckdb",
                        reproducible=True, threads=4 * (os.cpu_count() or 1), curves=curves,
                        **({} if curves else {"max_fpr": 0.3}))
            for _ in range(4)]
    assert not {"ranking_metrics", "curve_metrics"} & set(one_thread)
    first = runs[0].sort("seg", "metric", "average", "label", nulls_last=True)
    assert first["value"].null_count() == 0
    for other in runs[1:]:
        other = other.sort("seg", "metric", "average", "label", nulls_last=True)
        assert other["value"].to_numpy().tobytes() == first["value"].to_numpy().tobytes()


def test_a_failed_run_leaves_the_last_good_report(tmp_path, monkeypatch):
    job = _write_job(tmp_path, SMALL)
    out = tmp_path / "out"
    me.report(job, out, progress=False)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("the chart broke")

    monkeypatch.setattr("mleval_sql.reporting.html.charts.segment_dots", broken)
    with pytest.raises(RuntimeError):
        me.report(job, out, progress=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no temporary left


def test_missing_extra_is_named(monkeypatch, tmp_path):
    import builtins

    real = builtins.__import__

    def no_jinja(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "jinja2":
            raise ImportError("No module named 'jinja2'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jinja)
    with pytest.raises(JobError, match=r"pip install 'mleval_sql\[report\]'"):
        me.report(_write_job(tmp_path, SMALL), tmp_path / "out", progress=False)


def test_multiclass_report_has_a_confusion_heat_map(tmp_path):
    data = pl.read_csv(SEEDS / "001_multiclass.csv")
    path = tmp_path / "mc.parquet"
    data.write_parquet(path)
    job = {"sources": [{"path": str(path), "model": "m"}], "metrics": ["accuracy", "f1"],
           "average": ["macro"], "task": "multiclass", "curves": {"kinds": ["roc", "sweep"]}}
    outcome = me.report(job, tmp_path / "out", progress=False)
    page = (tmp_path / "out" / "report.html").read_text()
    assert 'id="confusion"' in page and 'id="sweep"' not in page
    tidy = pl.read_parquet(tmp_path / "out" / "metrics.parquet")
    matrix = tidy.filter(pl.col("metric") == "confusion_matrix")
    expected = me.evaluate(data, "confusion_matrix", task="multiclass")
    assert matrix["value"].to_list() == expected["value"].to_list()
    accuracy = tidy.filter(pl.col("metric") == "accuracy")["value"].item()
    assert _close(accuracy, 7 / 13) and outcome.alerts == []


def test_clustering_report_has_its_metrics_and_no_curves(tmp_path):
    data = pl.DataFrame({"sample": range(12), "truth": [0, 0, 0, 1, 1, 1, 2, 2, 2, 2, 0, 1],
                         "cluster": ["a", "a", "b", "b", "b", "c", "c", "c", "c", "a", "a", "b"],
                         "region": ["n", "s"] * 6})
    path = tmp_path / "clusters.parquet"
    data.write_parquet(path)
    job = {"sources": [{"path": str(path), "model": "m"}], "task": "clustering",
           "metrics": ["adjusted_rand", "v_measure"], "segments": ["region"]}
    me.report(job, tmp_path / "out", progress=False)
    tidy = pl.read_parquet(tmp_path / "out" / "metrics.parquet")
    overall = tidy.filter(pl.col("segment") == "overall")
    for metric in ("adjusted_rand", "v_measure"):
        want = me.evaluate(data, metric, task="clustering")["value"].item()
        got = overall.filter(pl.col("metric") == metric)["value"].item()
        assert _close(got, want), metric
    assert not list((tmp_path / "out").glob("curve_*.parquet"))


# -- the page in a real browser ------------------------------------------------------------

def test_report_renders_offline_in_chromium(example, tmp_path):
    if not CHROMIUM.exists():
        pytest.fail("this test needs Debian's chromium: run `bash .ci/system-packages`")
    from playwright.sync_api import sync_playwright

    page_file = example.output / "report.html"
    requests: list[str] = []
    errors: list[str] = []
    profile = Path(tempfile.mkdtemp(dir=tmp_path))
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            profile, executable_path=str(CHROMIUM), headless=True, chromium_sandbox=False,
            args=["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--no-first-run"],
            viewport={"width": 1280, "height": 1800})
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri(), wait_until="load")
            charts = page.evaluate("""() => [...document.querySelectorAll('figure svg')].map(
                s => { const r = s.getBoundingClientRect();
                       return [r.width, r.height, s.querySelectorAll('path').length]; })""")
            tables = page.evaluate("""() => [...document.querySelectorAll('table')].map(
                t => [t.closest('section').id, t.rows.length, t.getBoundingClientRect().width])""")
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert requests == [page_file.as_uri()]  # the page itself, nothing else
    assert errors == []
    assert len(charts) == 6  # by segment, roc, pr, sweep, reliability, slices
    assert all(w > 300 and h > 200 and paths > 10 for w, h, paths in charts[:5]), charts
    found = pl.read_parquet(example.output / "slices.parquet").height
    w, h, paths = charts[5]  # a line per slice
    assert found >= 1 and w > 300 and h > 60 + 15 * found and paths > 4, charts[5]
    sections = {section: rows for section, rows, width in tables if width > 0}
    assert sections["overview"] == 1 + 24 and sections["alerts"] > 1
    assert sections["slices"] == 1 + found
    assert sections["weakest"] > 1 and sections["run"] >= 2
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 100_000
    shutil.copy(shot, tmp_path / "kept.png")


# -- segment columns of any name, the memory budget, slices ------------------------------------

def _renamed_lake(folder: Path) -> Path:
    """The demo lake with its columns named as the report's own: region as ``segment``, date
    as ``metric`` (a column of evaluate's results too), and a constant ``value``."""
    data = pl.read_parquet(LAKE / "**" / "*.parquet", hive_partitioning=True)
    path = folder / "renamed.parquet"
    data.rename({"region": "segment", "date": "metric"}).with_columns(
        value=pl.lit("v")).write_parquet(path)
    return path


def test_segment_columns_of_any_name(tmp_path):
    lake = _renamed_lake(tmp_path)
    result = _run(_job(sources=[{"path": str(lake), "model_column": "model"}],
                       segments=["segment", ["segment", "metric"], "value"],
                       curves={"kinds": ["roc", "pr"]}))
    # written with a trailing underscore: the report's own columns keep their names
    assert result.metrics.columns[:6] == ["model", "segmentation", "segment", "segment_",
                                          "metric_", "value_"]
    assert result.curves["roc"].columns[:6] == result.metrics.columns[:6]
    assert set(result.sizes["segment"]) >= {"overall", "segment=eu", "value=v",
                                            "segment=eu, metric=2026-11-01"}
    for by, named in ((["region"], ["segment_"]),
                      (["region", "date"], ["segment_", "metric_"])):
        want = me.evaluate(LAKE, ["roc_auc", "f1"], by=["model", *by], average="macro",
                           task="multilabel")
        got = result.metrics.filter((pl.col("segmentation") == " x ".join(
            {"region": "segment", "date": "metric"}[c] for c in by))
            & (pl.col("average") == "macro") & pl.col("metric").is_in(["roc_auc", "f1"]))
        got = got.select("model", *(pl.col(n).alias(c) for n, c in zip(named, by, strict=True)),
                         "metric", "average", "label", "value")
        keys = ["model", *by, "metric", "average", "label"]
        joined = want.join(got, on=keys, how="full", nulls_equal=True)
        assert joined.height == want.height == got.height
        assert all(_close(a, b) for a, b in joined.select("value", "value_right").iter_rows())


def test_a_job_runs_on_the_engine_it_names_with_a_budget_too(tmp_path):
    job = Job.from_dict(_job(engine="polars", memory_limit="500MB"))
    outcome = me.report(job, tmp_path / "out", progress=False)
    assert (job.engine, outcome.summary["engine"], outcome.summary["memory_limit"]) == (
        "polars", "polars", "500MB")


@pytest.mark.parametrize(("metric", "options"), [
    ("error_rate", {"top": 2, "alpha": 0.95}),
    ("roc_auc", {"top": 3, "min_support": 20}),
])
def test_slices_of_each_model_are_me_slices(tmp_path, metric, options):
    job = _job(average=["macro"], slices={"metric": metric, "over": ["region", "date"],
                                          **options})
    outcome = me.report(job, tmp_path / "out", progress=False)
    found = pl.read_parquet(tmp_path / "out" / "slices.parquet")
    want = me.slices(LAKE, metric, over=["region", "date"], by="model", task="multilabel",
                     average="macro", **options)
    assert found.height == want.height > 0
    assert_frame_equal(found, want, check_exact=False, rel_tol=1e-12)
    assert pl.read_csv(tmp_path / "out" / "slices.csv").height == found.height
    assert outcome.summary["slices"]["found"] == found.height
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    section = page[page.index('<section id="slices">'):]
    section = section[:section.index("</section>")]
    assert section.count("<tr><td") == found.height and "<svg" in section
    first = found.row(0, named=True)
    name = ", ".join(f"{c}={first[c]}" for c in ("region", "date") if first[c] is not None)
    assert f'<td class="text">{first["model"]}</td><td class="text">{name}</td>' in section


def test_a_rerun_leaves_no_table_of_an_earlier_run(tmp_path):
    out = tmp_path / "out"
    me.report(_job(curves={"kinds": ["roc"]}, segments=[],
                   slices={"metric": "error_rate", "over": ["region"], "top": 1}), out,
              progress=False)
    assert {"curve_roc.parquet", "slices.parquet", "slices.csv"} <= {
        p.name for p in out.iterdir()}
    (out / "notes.txt").write_text("kept", encoding="utf-8")
    outcome = me.report(_job(curves={"kinds": ["reliability"]}, segments=[]), out,
                        progress=False)
    names = {p.name for p in out.iterdir()}
    assert names == {p.name for p in outcome.files} | {"notes.txt"}
    assert "curve_reliability.parquet" in names and "slices.csv" not in names
