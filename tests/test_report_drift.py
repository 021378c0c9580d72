"""[drift] in a report job: drift.parquet holds me.drift's rows of every segmentation, per
model, keyed as the report's tables are; the page shows a heat map of one statistic and the
most drifted rows; bad keys get one line naming them."""

from __future__ import annotations

import json
from pathlib import Path

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
