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
