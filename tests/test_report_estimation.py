"""Estimated metrics in report jobs: [estimation] reaches every evaluation the job asks for,
the estimates read every row while the realised values read the rows of known truth (null
truth with ``unlabelled = "skip"``, or outcomes kept apart in [labels]), the page draws each
estimate beside the value it estimates, and a rule on an estimate fires on a drop of the
scores' confidence and on nothing else. A [history] recomputes its windows when the
reference changes."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.reporting import Job, JobError

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
START = dt.date(2026, 10, 1)
DAYS = 5
SAMPLES = 1000  # per day, scored by both models
ESTIMATED = ["estimated_f1", "estimated_roc_auc", "estimated_precision"]
#: The share of each day's samples whose truth is known: the last two days' truth arrives late.
KNOWN = (1.0, 1.0, 1.0, 0.0, 0.4)


def _scored(rng: np.random.Generator, n: int, *, confidence: float = 1.0) -> pl.DataFrame:
    """``n`` samples whose truth is drawn with probability ``p``, scored by models a and b
    (logits of ``p`` with noise, b's scaled; ``confidence`` < 1 shrinks b's towards 0)."""
    p = rng.beta(2, 2, n)
    truth = rng.random(n) < p
    region = rng.choice(["eu", "us"], n)
    logit = np.log(p / (1 - p))
    scores = {"a": logit + rng.normal(0, 0.5, n),
              "b": confidence * 1.5 * (logit + rng.normal(0, 0.8, n))}
    return pl.concat([pl.DataFrame({"sample": np.arange(n), "model": model,
                                    "score": score.round(4), "truth": truth,
                                    "region": region}) for model, score in scores.items()])


def write_lake(folder: Path, *, drop: bool, samples: int = SAMPLES) -> Path:
    """A lake of DAYS days (``date=`` folders, a file per model and day) whose truth is known
    for KNOWN of each day's samples (null for the others); with ``drop``, model b is less
    confident on the last day."""
    rng = np.random.default_rng(7)
    for day in range(DAYS):
        rows = _scored(rng, samples, confidence=0.35 if drop and day == DAYS - 1 else 1.0)
        known = pl.Series(np.tile(rng.random(samples) < KNOWN[day], 2))
        rows = rows.with_columns(sample=pl.col("sample") + day * samples,
                                 truth=pl.when(known).then(pl.col("truth")))
        for model, part in rows.partition_by("model", as_dict=True).items():
            out = folder / "lake" / f"date={START + dt.timedelta(days=day)}" / \
                f"model={model[0]}" / "part-0.parquet"
            out.parent.mkdir(parents=True, exist_ok=True)
            part.drop("model").write_parquet(out)
    reference = _scored(np.random.default_rng(99), 1500)  # last month's labelled rows
    reference.write_parquet(folder / "reference.parquet")
    return folder / "lake"


JOB = """
title = "Before the truth"
task = "binary"
engine = "polars"
metrics = ["f1", "roc_auc", "estimated_roc_auc", "estimated_f1", "estimated_precision"]
segments = ["region"]
threshold = 0.0
ci = 0.95
resamples = 40
unlabelled = "skip"

[[sources]]
path = "lake"
model_column = "model"

[curves]
kinds = ["roc"]

[window]
column = "date"
every = ["1d"]

[estimation]
reference = "reference.parquet"
calibration = "isotonic"

[baseline]
previous = true

[[alerts.rules]]
metric = "estimated_f1"
drop = 0.05

[[alerts.rules]]
metric = "estimated_f1"
drop = 0.05
significant = true
"""


def _run(folder: Path, *, drop: bool, text: str = JOB) -> me.reporting.Outcome:
    write_lake(folder, drop=drop)
    (folder / "job.toml").write_text(text, encoding="utf-8")
    return me.report(folder / "job.toml", folder / "out", progress=False)


@pytest.fixture(scope="module")
def dropped(tmp_path_factory: pytest.TempPathFactory) -> me.reporting.Outcome:
    return _run(tmp_path_factory.mktemp("dropped"), drop=True)


def _lake(outcome: me.reporting.Outcome) -> pl.DataFrame:
    return pl.read_parquet(outcome.output.parent / "lake", hive_partitioning=True)


def _overall(outcome: me.reporting.Outcome) -> pl.DataFrame:
    rows = pl.read_parquet(outcome.output / "windows.parquet")
    return rows.filter(pl.col("segmentation") == "overall").select(
        "model", "window_start", "metric", "value", "ci_low", "ci_high", "samples", "weight",
        "label_coverage").sort("model", "window_start", "metric")


# -- what each metric reads --------------------------------------------------------------

def test_estimates_read_every_row_and_realised_values_the_labelled_ones(dropped):
    """Every window's estimates are me.evaluate's with the job's reference and calibration on
    every row, truth or not (the truth dropped: the same); the realised values are those of
    the rows of known truth, and a day without any has none."""
    lake = _lake(dropped)
    got = _overall(dropped)
    reference = dropped.output.parent / "reference.parquet"
    options: dict[str, Any] = {"by": "model", "window": "date:1d", "threshold": 0.0,
                               "engine": "polars", "ci": 0.95, "task": "binary"}
    estimates = me.evaluate(lake.drop("truth"), ESTIMATED, reference=reference,
                            calibration="isotonic", **options)
    realised = me.evaluate(lake.drop_nulls("truth"), ["f1", "roc_auc"], resamples=40,
                           **options)
    want = pl.concat([estimates, realised], how="diagonal_relaxed").select(
        pl.col("model").cast(pl.String), "window_start", "metric", "value", "ci_low",
        "ci_high").sort("model", "window_start", "metric")
    assert got.select(want.columns).height == want.height
    for ours, theirs in zip(got.iter_rows(named=True), want.iter_rows(named=True),
                            strict=True):
        for key in ("model", "window_start", "metric"):
            assert ours[key] == theirs[key]
        for key in ("value", "ci_low", "ci_high"):
            assert ours[key] == pytest.approx(theirs[key], rel=1e-9, abs=1e-12), ours
    unlabelled = got.filter(pl.col("window_start") == START + dt.timedelta(days=3))
    assert sorted(set(unlabelled["metric"])) == sorted(ESTIMATED)


def test_a_segment_counts_every_row_and_its_coverage_the_labelled_share(dropped):
    """A segment's samples and weight are all its rows (those the estimates read), its
    label_coverage the share of known truth, 0 on a day whose truth is all unknown; the
    summary says the estimation's options."""
    lake = _lake(dropped)
    got = _overall(dropped).unique(["model", "window_start"]).sort("model", "window_start")
    assert got["samples"].to_list() == [SAMPLES] * DAYS * 2
    known = lake.group_by("model", "date").agg(pl.col("truth").is_not_null().mean()).sort(
        "model", "date")["truth"].to_list()
    assert got["label_coverage"].to_list() == pytest.approx(known)
    assert got["label_coverage"].to_list()[3] == 0.0
    summary = json.loads((dropped.output / "summary.json").read_text())
    assert summary["estimation"] == {
        "reference": str(dropped.output.parent / "reference.parquet"),
        "calibration": "isotonic"}


def test_outcomes_kept_apart_reach_the_realised_values_only(tmp_path):
    """[labels]: predictions without truth and outcomes that arrived for some samples. The
    estimates are those of every prediction; the realised values those of the predictions
    whose outcome arrived."""
    write_lake(tmp_path, drop=False)
    lake = pl.read_parquet(tmp_path / "lake", hive_partitioning=True).filter(
        pl.col("model") == "a", pl.col("date") == START)
    preds = tmp_path / "preds.parquet"
    lake.drop("truth", "model", "date").write_parquet(preds)
    arrived = lake.filter(pl.col("sample") % 3 == 0).select("sample", "truth")
    arrived.write_parquet(tmp_path / "outcomes.parquet")
    job = {"sources": [{"path": str(preds), "model": "a"}], "task": "binary", "engine": "polars",
           "metrics": ["f1", "estimated_f1"], "threshold": 0.0, "unlabelled": "skip",
           "labels": {"path": str(tmp_path / "outcomes.parquet")},
           "estimation": {"reference": str(tmp_path / "reference.parquet")},
           "curves": {"kinds": []}}
    out = me.report(job, tmp_path / "out", progress=False)
    rows = pl.read_parquet(out.output / "metrics.parquet")
    value = dict(rows.select("metric", "value").iter_rows())
    want = me.evaluate(lake.drop("truth"), "estimated_f1", threshold=0.0, task="binary",
                       reference=tmp_path / "reference.parquet")
    assert value["estimated_f1"] == pytest.approx(want["value"].item(), rel=1e-9)
    labelled = lake.join(arrived.select("sample"), on="sample")
    assert value["f1"] == pytest.approx(
        me.evaluate(labelled, "f1", threshold=0.0)["value"].item(), rel=1e-9)
    sizes = pl.read_parquet(out.output / "wide.parquet")
    assert sizes["samples"].to_list() == [SAMPLES]
    assert rows["label_coverage"].to_list() == [pytest.approx(arrived.height / SAMPLES)] * 2


def test_a_job_of_estimates_alone_reads_no_truth(tmp_path):
    """Predictions without a truth column: estimated metrics alone, no curve (they are drawn
    from the truth), the task binary."""
    write_lake(tmp_path, drop=False)
    lake = pl.read_parquet(tmp_path / "lake", hive_partitioning=True).filter(
        pl.col("date") == START)
    lake.drop("truth", "date").write_parquet(tmp_path / "preds.parquet")
    (tmp_path / "job.toml").write_text(
        'metrics = ["estimated_f1", "estimated_roc_auc"]\nthreshold = 0.0\nengine = "polars"\n'
        '[[sources]]\npath = "preds.parquet"\nmodel_column = "model"\n'
        '[estimation]\nreference = "reference.parquet"\n', encoding="utf-8")
    out = me.report(tmp_path / "job.toml", tmp_path / "out", progress=False)
    assert out.summary["task"] == "binary" and out.summary["curves"]["files"] == []
    rows = pl.read_parquet(out.output / "metrics.parquet").filter(
        pl.col("segmentation") == "overall")
    want = me.evaluate(lake.drop("truth"), ["estimated_f1", "estimated_roc_auc"], by="model",
                       reference=tmp_path / "reference.parquet", threshold=0.0,
                       task="binary")
    assert rows.sort("model", "metric")["value"].to_list() == pytest.approx(
        want.sort("model", "metric")["value"].to_list(), rel=1e-9)


# -- alerts ----------------------------------------------------------------------------------

def test_a_rule_on_an_estimate_fires_on_a_drop_of_confidence(dropped):
    """Model b less confident on the last day: its estimated F1 drops against the day before
    (whose truth is all unknown: the realised values could not tell) in every segment, the
    plain and the significant rule alike; model a's does not."""
    alerts = pl.DataFrame(dropped.alerts)
    assert set(alerts["model"]) == {"b"}
    assert set(alerts["metric"]) == {"estimated_f1"}
    fired = set(alerts.select("rule_key", "segment").iter_rows())
    assert fired == {(f"alerts.rules[{i}]", s) for i in (0, 1)
                     for s in ("overall", "region=eu", "region=us")}
    assert (alerts["delta"] < -0.05).all()
    significant = alerts.filter(pl.col("rule_key") == "alerts.rules[1]")
    assert (significant["q_value"] <= 0.05).all()
    # the realised values of the last day are too few to judge: only the estimates were
    sizes = pl.read_parquet(dropped.output / "wide.parquet")
    assert not sizes["judged"].any()


def test_a_rule_on_an_estimate_is_quiet_without_a_drop(tmp_path):
    outcome = _run(tmp_path, drop=False)
    assert outcome.alerts == []
    assert outcome.summary["tests"] == 6  # the significant rule tested every model x segment


def test_an_estimate_against_a_baseline_model_is_tested_from_its_intervals(tmp_path):
    """With a baseline model, the significant rules' paired tests are of the realised metrics
    (compare reads the truth); an estimate is tested from its intervals, and no row of it has
    a paired p-value."""
    text = JOB.replace("[baseline]\nprevious = true", '[baseline]\nmodel = "a"').replace(
        'metric = "estimated_f1"\ndrop = 0.05\nsignificant', 'metric = "f1"\ndrop = 0.05\n'
        'significant').replace('[window]\ncolumn = "date"\nevery = ["1d"]\n', "").replace(
        'path = "lake"', f'path = "lake/date={START + dt.timedelta(days=DAYS - 1)}"')
    outcome = _run(tmp_path, drop=True, text=text)
    rows = pl.read_parquet(outcome.output / "metrics.parquet")
    estimated = rows.filter(pl.col("metric").str.starts_with("estimated_"))
    assert estimated["paired_p"].null_count() == estimated.height
    assert rows.filter(pl.col("metric") == "f1", pl.col("model") == "b")["paired_p"]\
        .null_count() == 0
    assert {a["metric"] for a in outcome.alerts} <= {"estimated_f1", "f1"}
    assert any(a["metric"] == "estimated_f1" and a["model"] == "b" for a in outcome.alerts)


# -- the page --------------------------------------------------------------------------------

def _section(page: str, name: str) -> str:
    start = page.index(f'<section id="{name}">')
    return page[start:page.index("</section>", start)]


def test_the_page_draws_each_estimate_beside_the_value_it_estimates(dropped):
    page = (dropped.output / "report.html").read_text()
    overview = _section(page, "overview")
    heads = [h.split(">", 1)[1] for h in overview.split("</th>")[:-1]]
    assert [h.rsplit(">", 1)[-1] for h in heads][4:] == [
        "f1", "estimated_f1", "roc_auc", "estimated_roc_auc", "estimated_precision"]
    assert overview.count(' class="est">estimated_') == 3
    assert "estimated columns (right after the value each estimates, in italics)" in overview
    assert 'class="tag">few labels<' in overview  # the last day's truth: 40% known
    trends = _section(page, "trends")
    assert "f1 (dashed: estimated_f1), 1d" in trends
    assert "roc_auc (dashed: estimated_roc_auc), 1d" in trends
    assert "estimated_precision, 1d" in trends  # asked alone: drawn as any metric
    assert ">estimated_f1, 1d<" not in trends
    for model in (0, 1):
        assert f'id="trends-estimate-{model}"' in trends
        assert f'id="trends-estimate-{model}-band"' in trends
    segments = _section(page, "by-segment")
    assert 'id="by-segment-estimate-0"' in segments and "diamonds: estimated_f1" in segments
    assert "estimated metrics</dt><dd>the scores mapped to probabilities" in page


def test_the_page_renders_in_chromium(dropped, tmp_path):
    if not CHROMIUM.exists():
        pytest.fail("this test needs Debian's chromium: run `bash .ci/system-packages`")
    from playwright.sync_api import sync_playwright

    page_file = dropped.output / "report.html"
    requests: list[str] = []
    errors: list[str] = []
    with sync_playwright() as p:
        browser = p.chromium.launch_persistent_context(
            Path(tempfile.mkdtemp(dir=tmp_path)), executable_path=str(CHROMIUM), headless=True,
            chromium_sandbox=False, args=["--no-sandbox", "--disable-gpu",
                                          "--disable-background-networking", "--no-first-run"],
            viewport={"width": 1280, "height": 1800})
        try:
            page = browser.new_page()
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.goto(page_file.as_uri(), wait_until="load")
            drawn = page.evaluate("""() => ['trends-estimate-1', 'by-segment-estimate-1'].map(
                id => { const r = document.getElementById(id).getBoundingClientRect();
                        return [r.width, r.height]; })""")
            shot = tmp_path / "report.png"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    assert requests == [page_file.as_uri()] and errors == []
    assert all(w > 20 and h > 5 for w, h in drawn), drawn
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    shutil.copy(shot, tmp_path / "kept.png")


# -- the job file and the history ----------------------------------------------------------

BASE = {"sources": [{"path": str(ROOT / "fixtures" / "lake"), "model_column": "model"}],
        "metrics": ["f1", "estimated_f1"]}


@pytest.mark.parametrize(("change", "message"), [
    ({"estimation": {"reference": "nowhere.parquet"}},
     "estimation.reference: no such file or folder: "),
    ({"estimation": {"calibration": "platt"}},
     "estimation.calibration: expected one of ['isotonic', 'histogram', 'none'], got 'platt'"),
    ({"estimation": {"refrence": "x"}},
     "estimation.refrence: unknown key in [estimation]; did you mean 'reference'?"),
    ({"estimation": {"reference": 3}}, "estimation.reference: expected a string, got 3"),
    ({"estimation": {"calibration": "histogram"}},
     "estimation: calibration='histogram' is learnt on labelled rows: name them"),
    ({"metrics": ["f1"], "estimation": {"calibration": "none"}},
     "estimation: serves the estimated metrics (estimated_accuracy, "),
    ({"calibration": "isotonic"}, "calibration: unknown key in the job's top level"),
    ({"estimation": {"reference": "fixtures/lake"},
      "slices": {"metric": "estimated_f1", "over": ["region"]}},
     "slices.metric: estimated_f1 is sliced with the scores read as probabilities"),
])
def test_bad_estimation_keys_are_named(change, message):
    with pytest.raises(JobError) as error:
        Job.from_dict({**BASE, **change}, base=ROOT)
    assert message in str(error.value), str(error.value)


def test_a_bad_estimation_key_is_one_line(tmp_path, capsys):
    (tmp_path / "job.toml").write_text(
        f'metrics = ["estimated_f1"]\n[[sources]]\npath = "{ROOT / "fixtures" / "lake"}"\n'
        '[estimation]\nreference = "gone.parquet"\n', encoding="utf-8")
    assert main(["report", str(tmp_path / "job.toml"), "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "estimation.reference: no such file or folder" in err


def test_the_reference_is_relative_to_the_job_file_and_passed_on(tmp_path):
    folder = tmp_path / "jobs"
    folder.mkdir()
    (folder / "job.toml").write_text(
        f'metrics = ["f1", "estimated_f1"]\n[[sources]]\npath = "{ROOT / "fixtures" / "lake"}"'
        '\n[estimation]\nreference = "../ref"\ncalibration = "histogram"\n', encoding="utf-8")
    (tmp_path / "ref").mkdir()
    job = Job.load(folder / "job.toml")
    assert job.estimation is not None and job.estimation.reference == str(tmp_path / "ref")
    source = job.sources[0]
    request = job.request("evaluate", source, [], metrics=["f1", "estimated_f1"])
    assert request.reference == str(tmp_path / "ref") and request.calibration == "histogram"
    # only where an evaluation asks an estimate: a sweep, a comparison, drift take none
    assert job.request("evaluate", source, [], metrics=["f1"]).reference is None
    assert job.request("compare", source, [], metrics=["f1"], model="model",
                       baseline="a").reference is None


def test_a_history_recomputes_every_window_when_the_reference_changes(tmp_path):
    write_lake(tmp_path, drop=False, samples=200)
    text = (JOB.replace("ci = 0.95\nresamples = 40\n", "")
            .split("[baseline]")[0] + '[history]\npath = "history"\n')
    (tmp_path / "job.toml").write_text(text, encoding="utf-8")

    def night(name: str) -> set[str]:
        out = me.report(tmp_path / "job.toml", tmp_path / name, progress=False)
        return {w["reason"] for w in out.summary["night"]["computed"]}

    assert night("n1") == {"new"}
    assert night("n2") == set()
    reference = pl.read_parquet(tmp_path / "reference.parquet")
    reference.sample(fraction=0.7, seed=1).write_parquet(tmp_path / "reference.parquet")
    assert night("n3") == {"request"}
    (tmp_path / "job.toml").write_text(text.replace('"isotonic"', '"histogram"'),
                                       encoding="utf-8")
    assert night("n4") == {"request"}
