"""[drift] in a report job: drift.parquet holds me.drift's rows of every segmentation, per
model, keyed as the report's tables are; the page shows a heat map of one statistic and the
most drifted rows; bad keys get one line naming them."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import mleval_sql as me
from mleval_sql.cli import main
from tests.test_report import LAKE, SMALL, _write_job

DRIFT = SMALL + """
[drift]
reference = {model = "a"}
compared = ["score", "decision"]
statistics = ["ks", "psi"]
"""


@pytest.fixture(scope="module")
def drifted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("drift")
    assert main(["report", str(_write_job(folder, DRIFT)), "--output",
                 str(folder / "out")]) == 0
    return folder / "out"


def test_drift_table_is_drift_of_each_segmentation(drifted):
    rows = pl.read_parquet(drifted / "drift.parquet")
    assert rows["model"].unique().to_list() == ["b"]  # the reference model is not compared
    assert rows["segmentation"].unique(maintain_order=True).to_list() == ["overall", "region"]
    for segmentation, by in (("overall", ["model"]), ("region", ["model", "region"])):
        want = me.drift(LAKE, {"model": "a"}, ["score", "decision"], by=by,
                        statistics=["ks", "psi"], task="multilabel")
        got = rows.filter(pl.col("segmentation") == segmentation).select(want.columns)
        assert_frame_equal(got, want, rel_tol=1e-12, check_exact=False)
    assert rows.filter(pl.col("segmentation") == "region")["segment"].str.starts_with(
        "region=").all()
    summary = json.loads((drifted / "summary.json").read_text())
    assert summary["drift"]["statistic"] == "ks" and summary["drift"]["rows"] == rows.height


def test_the_page_shows_the_heat_map_and_the_most_drifted(drifted):
    page = (drifted / "report.html").read_text()
    section = page[page.index('<section id="drift">'):]
    section = section[:section.index("</section>")]
    assert "<svg" in section and 'href="#drift"' in page
    rows = pl.read_parquet(drifted / "drift.parquet").filter(pl.col("statistic") == "ks")
    worst = rows.sort("value", descending=True).row(0, named=True)
    assert f"{worst['value']:.4f}" in section and "p-value" in section


@pytest.mark.parametrize(("new", "message"), [
    ("[drift]\ncompared = ['score']", "drift.reference: missing"),
    ("[drift]\nreference = {model = 'a'}\nstatistics = ['ks']\nstatistic = 'psi'",
     "drift.statistic: 'psi' is not among the statistics computed (ks)"),
    ("[drift]\nreference = {model = 'a'}\nstatistics = ['kss']",
     "drift: unknown statistic 'kss'; did you mean 'ks'?"),
    ("[drift]\nreference = {model = 'a'}\ncompared = ['age']",
     "drift: the input has no column 'age'"),
    ("[drift]\nreference = {model = 'a'}\nbins = 3\nedgs = [1]",
     "drift.edgs: unknown key in [drift]; did you mean 'edges'?"),
])
def test_bad_drift_keys_get_one_line_naming_them(tmp_path, capsys, new, message):
    job = _write_job(tmp_path, SMALL + "\n" + new + "\n")
    assert main(["report", str(job), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


RULES = DRIFT + """
[[alerts.rules]]
drift = "psi"
compared = "score"
above = 0.3

[[alerts.rules]]
drift = "ks"
above = 0
significant = true
"""


def test_drift_rules_fire_where_the_statistic_crosses_and_the_test_rejects(tmp_path):
    from scipy import stats

    job = _write_job(tmp_path, RULES)
    assert main(["report", str(job), "--output", str(tmp_path / "out")]) in (0, 1)
    rows = pl.read_parquet(tmp_path / "out" / "drift.parquet")
    alerts = pl.read_csv(tmp_path / "out" / "alerts.csv")
    psi = rows.filter(pl.col("statistic") == "psi", pl.col("compared") == "score",
                      pl.col("value") > 0.3)
    fired = alerts.filter(pl.col("rule") == 0)
    assert 0 < fired.height == psi.height < rows.filter(pl.col("statistic") == "psi").height
    assert sorted(fired["value"].to_list()) == sorted(psi["value"].to_list())
    assert (fired["metric"] == "psi of score").all()
    # ks, significant: Benjamini-Hochberg over every ks p-value (the only tests), at fdr 0.05
    ks = rows.filter(pl.col("statistic") == "ks")
    q = stats.false_discovery_control(ks["p_value"].to_numpy())
    want = ks.filter(pl.Series(q <= 0.05))
    tested = alerts.filter(pl.col("rule") == 1)
    assert 0 < tested.height == want.height < ks.height
    assert sorted(tested["p_value"].to_list()) == sorted(want["p_value"].to_list())
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert len(summary["alerts"]) == alerts.height


@pytest.mark.parametrize(("rule", "message"), [
    ("drift = 'psi'\nabove = 0.2", "alerts.rules[0].drift: a rule on drift needs a [drift]"),
    ("drift = 'chi2'\nabove = 1", "alerts.rules[0].drift: [drift] computes no 'chi2'"),
    ("drift = 'psi'\nabove = 0.2\nsignificant = true",
     "alerts.rules[0].significant: psi has no test; ks and chi2 do"),
    ("drift = 'psi'\ndrop = 0.2", "alerts.rules[0]: expected exactly one of below, above"),
])
def test_bad_drift_rules_get_one_line_naming_them(tmp_path, capsys, rule, message):
    text = (SMALL if "needs a [drift]" in message else DRIFT) + f"\n[[alerts.rules]]\n{rule}\n"
    job = _write_job(tmp_path, text)
    assert main(["report", str(job), "--output", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and message in err, err


def test_a_job_with_windows_compares_each_window_with_the_one_before(tmp_path):
    text = DRIFT.replace('reference = {model = "a"}', 'reference = "previous"') + \
        '\n[window]\ncolumn = "date"\nevery = "1d"\n'
    assert main(["report", str(_write_job(tmp_path, text)), "--output",
                 str(tmp_path / "out")]) == 0
    rows = pl.read_parquet(tmp_path / "out" / "drift.parquet").filter(
        pl.col("segmentation") == "overall")
    want = me.drift(LAKE, "previous", ["score", "decision"], by="model", window="date:1d",
                    statistics=["ks", "psi"], task="multilabel")
    keys = ["window_start", "model", "compared", "label", "statistic"]  # the report: by model
    assert_frame_equal(rows.select(want.columns).sort(keys), want.sort(keys), rel_tol=1e-12,
                       check_exact=False)
    assert want.filter(pl.col("value").is_not_null()).height > 0
    # the chart of the most drifted scores: of the latest window, against the one before
    every = pl.read_parquet(tmp_path / "out" / "drift.parquet")
    latest = every.filter(pl.col("window_start") == every["window_start"].max(),
                          pl.col("statistic") == "ks", pl.col("compared") == "score")
    worst = latest.sort("value", descending=True).row(0, named=True)
    chart = _scores_section(tmp_path / "out")
    chart = chart[chart.index('id="drift-scores"'):]
    assert f"{worst['segment']}, label {worst['label']}" in chart
    assert f"reference ({worst['reference_rows']:,} rows)" in chart


def test_every_door_gives_the_same_drift(tmp_path, drifted):
    """One drift request through the API, `mleval drift` and a report job: the same rows."""
    want = me.drift(LAKE, {"model": "a"}, ["score", "decision"], by=["model", "region"],
                    statistics=["ks", "psi"], bins=5, task="multilabel")
    out = tmp_path / "drift.parquet"
    assert main(["drift", str(LAKE), "--reference", "model=a", "--compared", "score,decision",
                 "--by", "model,region", "--statistics", "ks,psi", "--bins", "5", "--task",
                 "multilabel", "--format", "parquet", "-o", str(out)]) == 0
    assert_frame_equal(pl.read_parquet(out), want, rel_tol=1e-12, check_exact=False)
    text = DRIFT.replace('statistics = ["ks", "psi"]', 'statistics = ["ks", "psi"]\nbins = 5')
    assert main(["report", str(_write_job(tmp_path, text)), "--output",
                 str(tmp_path / "out")]) == 0
    rows = pl.read_parquet(tmp_path / "out" / "drift.parquet").filter(
        pl.col("segmentation") == "region")
    assert_frame_equal(rows.select(want.columns), want, rel_tol=1e-12, check_exact=False)


# -- the chart of the most drifted scores -----------------------------------------------------

def _scores_section(out: Path) -> str:
    page = (out / "report.html").read_text()
    section = page[page.index('<section id="drift">'):]
    return section[:section.index("</section>")]


def test_the_page_draws_the_most_drifted_scores_against_the_reference(drifted):
    section = _scores_section(drifted)
    rows = pl.read_parquet(drifted / "drift.parquet").filter(
        pl.col("statistic") == "ks", pl.col("compared") == "score")
    worst = rows.sort("value", descending=True).row(0, named=True)
    assert 'id="drift-scores"' in section
    chart = section[section.index('id="drift-scores"'):]
    assert chart.count("<svg") == 1
    assert (f"Scores of model {worst['model']}, {worst['segment']}, label {worst['label']}, "
            f"against the reference: ks {worst['value']:.4f}") in chart
    assert f"reference ({worst['reference_rows']:,} rows)" in chart
    assert f"current ({worst['current_rows']:,} rows)" in chart


def test_the_binned_scores_are_each_sides_rows_of_the_segment():
    """score_bins: each side's weight per equal bin over both sides' range, as numpy bins the
    rows of the segment and label (the current model b in region eu, the reference model a).
    Seven bins over [0, 1]: no score of the lake (a short decimal) lies on an inner edge (a
    multiple of 1/7), where rounding could put it on either side."""
    from mleval_sql.drift import score_bins
    from mleval_sql.request import Request

    request = Request.build("drift", reference={"model": "a"}, by=["model", "region"],
                            task="multilabel")
    bins = score_bins(request, LAKE, {"model": "b", "region": "eu"}, "dog", bins=7)
    table = pl.scan_parquet(LAKE / "**" / "*.parquet", hive_partitioning=True).filter(
        pl.col("region") == "eu", pl.col("label") == "dog").collect()
    scores = table["score"].to_numpy()
    width = (scores.max() - scores.min()) / 7
    for current, model in ((False, "a"), (True, "b")):
        mine = table.filter(pl.col("model") == model)
        at = np.clip(np.floor((mine["score"].to_numpy() - scores.min()) / width), 0, 6)
        want = np.bincount(at.astype(int), mine["weight"].to_numpy(), minlength=7)
        got = np.zeros(7)
        side = bins.filter(pl.col("current") == current)
        got[side["bin"].to_numpy()] = side["weight"].to_numpy()
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(bins["low"].min(), scores.min())
    np.testing.assert_allclose(bins["high"].max(), scores.max())


def test_the_binned_scores_of_a_window_against_the_one_before():
    """With windows of a timestamp column, the row's window (an instant in the window's time
    zone) and the window before it as the reference: every score of each, once."""
    from mleval_sql.drift import score_bins
    from mleval_sql.request import Request

    rng = np.random.default_rng(7)
    hours = rng.integers(0, 72, 600)
    frame = pl.DataFrame({
        "sample": [f"s{i}" for i in range(600)],
        "at": [dt.datetime(2026, 3, 28, 20) + dt.timedelta(hours=int(h)) for h in hours],
        "score": rng.random(600) ** (1 + hours / 36), "truth": rng.random(600) < 0.3})
    window = "at:1d@Europe/Paris"
    rows = me.drift(frame, "previous", window=window, statistics="ks", task="binary")
    row = rows.filter(pl.col("value").is_not_null()).sort("value").row(-1, named=True)
    request = Request.build("drift", reference="previous", window=window, task="binary")
    bins = score_bins(request, frame, {"granularity": row["granularity"],
                                       "window_start": row["window_start"]}, row["label"])
    totals = dict(bins.group_by("current").agg(pl.col("weight").sum()).iter_rows())
    assert totals == {False: row["reference_weight"], True: row["current_weight"]}


def test_a_job_without_score_drift_draws_no_scores(tmp_path):
    text = DRIFT.replace('compared = ["score", "decision"]', 'compared = ["decision"]').replace(
        'statistics = ["ks", "psi"]', 'statistics = ["psi"]')
    assert main(["report", str(_write_job(tmp_path, text)), "--output",
                 str(tmp_path / "out")]) == 0
    section = _scores_section(tmp_path / "out")
    assert "<svg" in section and "drift-scores" not in section and "Scores of" not in section
