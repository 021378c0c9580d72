"""Binary prediction logs without a label column (``sample, score, truth, segments...``): one
label, named after the score column, and the numbers of the same table with a label column."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.engines import local_engines
from mleval_sql.params import DEFAULTS
from mleval_sql.registry import METRICS
from tests.data import make_predictions
from tests.helpers import WITH_SPARK, assert_same_rows
from tests.oracle import expected

PARAMS = {k: v for k, v in DEFAULTS.items() if k not in ("kind", "drop_intermediate")}
BINARY = [m for m, metric in METRICS.items() if "binary" in metric.families]


@pytest.fixture(scope="module")
def log() -> pl.DataFrame:
    """A binary log ``sample, prob, truth, weight, region, model``: no label column."""
    return make_predictions("binary", seed=21).drop("label").rename({"score": "prob"})


def test_every_binary_metric_matches_scikit_learn(engine, log):
    got = me.evaluate(log, BINARY, by="region", engine=engine, columns={"score": "prob"},
                      average=["none", "macro"])
    labelled = log.rename({"prob": "score"}).with_columns(label=pl.lit("prob"))
    averages = {m: ("none", "macro") if METRICS[m].averages("binary") else ("none",)
                for m in BINARY}
    want = pl.concat([expected(labelled, "binary", m, averages[m], ["region"], PARAMS)
                      for m in BINARY], how="vertical_relaxed")
    assert set(got["label"].drop_nulls()) == {"prob"}  # the label is named after the scores
    assert_same_rows(got, want, ["region"])


@pytest.mark.parametrize("kind", ["roc", "pr", "sweep"])
def test_curves_equal_those_of_the_labelled_table(engine, log, kind):
    options = {"thresholds": [0.2, 0.5]} if kind == "sweep" else {}
    got = me.curve(log, kind, by="model", engine=engine, columns={"score": "prob"}, **options)
    want = me.curve(log.with_columns(label=pl.lit("prob")), kind, by="model", engine=engine,
                    columns={"score": "prob"}, **options)
    assert got.height > 0
    assert got.equals(want)


@WITH_SPARK
def test_an_unused_label_column_is_ignored_when_mapped_away(engine, log):
    """``columns={"label": None}``: one label even though a ``label`` column exists."""
    noisy = log.with_columns(label=pl.lit("ignored"))
    got = me.evaluate(noisy, ["f1"], engine=engine, columns={"score": "prob", "label": None})
    assert got["label"].to_list() == ["prob"]
    assert me.check(noisy, engine=engine, columns={"score": "prob", "label": None}) == "binary"


@WITH_SPARK
def test_several_rows_per_sample_need_a_label_column(engine):
    multilabel = make_predictions("multilabel", seed=2).drop("label")
    with pytest.raises(me.InputError, match=r"duplicate 'sample' row.*without a label column"):
        me.check(multilabel, engine=engine, by="region")


def test_only_a_binary_task_has_no_label_column(engine, log):
    with pytest.raises(me.InputError, match="task 'multilabel' needs a label column"):
        me.evaluate(log, ["f1"], task="multilabel", engine=engine, columns={"score": "prob"})


def test_a_named_label_column_must_exist(log):
    with pytest.raises(me.InputError, match="missing column 'cls'"):
        me.evaluate(log, ["f1"], columns={"score": "prob", "label": "cls"})


@pytest.mark.parametrize("engine_name", local_engines())
def test_command_line(tmp_path, capsys, log, engine_name):
    path = tmp_path / "log.parquet"
    log.with_columns(label=pl.lit("x")).write_parquet(path)
    common = ["--engine", engine_name, "--column", "score=prob", "--column", "label="]
    assert main(["check", str(path), *common]) == 0
    assert capsys.readouterr().out == "ok: binary\n"
    assert main(["evaluate", str(path), *common, "--metric", "roc_auc,f1", "--by", "region",
                 "--format", "csv"]) == 0
    got = pl.read_csv(capsys.readouterr().out.encode())
    want = me.evaluate(log, ["roc_auc", "f1"], by="region", engine=engine_name,
                       columns={"score": "prob"})
    assert got["label"].unique().to_list() == ["prob"]
    assert_same_rows(got, want, ["region"])
    assert main(["curve", str(path), *common, "--kind", "pr", "--format", "csv"]) == 0
    assert pl.read_csv(capsys.readouterr().out.encode()).height > 1


@pytest.mark.parametrize("engine_name", local_engines())
def test_report_job_on_a_csv_log_without_labels(tmp_path, engine_name):
    """The report job reads a binary CSV log without a label column like evaluate does."""
    pytest.importorskip("jinja2")
    root = Path(__file__).resolve().parent.parent
    clicks = root / "fixtures" / "clicks.csv"
    columns = {"sample": "id", "score": "prob", "truth": "clicked"}
    job = {"title": "clicks", "engine": engine_name, "segments": ["country"],
           "metrics": ["roc_auc", "f1"], "columns": columns,
           "sources": [{"path": str(clicks), "model": "clicks"}],
           "curves": {"kinds": ["roc", "sweep"], "bins": 4}}
    me.report(job, tmp_path / "out")
    got = pl.read_parquet(tmp_path / "out" / "metrics.parquet").filter(
        pl.col("segmentation") == "country")
    want = me.evaluate(str(clicks), ["roc_auc", "f1"], by="country", columns=columns,
                       engine=engine_name)
    assert set(got["label"]) == {"prob"}
    assert_same_rows(got.select(want.columns), want, ["country"], rel=1e-12)
