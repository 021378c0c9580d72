"""One request, every door: the same request sent through ``me.evaluate``, ``mleval evaluate``,
``mleval sql`` pasted into DuckDB and a report job gives the same rows; and each seam that gave
a silently wrong number or lost data when each door parsed its own options stays closed."""

from __future__ import annotations

import io
import shlex
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.plot import figure
from mleval_sql.request import Request
from tests.data import make_predictions
from tests.helpers import assert_same_rows

ROOT = Path(__file__).resolve().parent.parent
LAKE = ROOT / "fixtures" / "lake"


def _cli(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


#: (task, metrics, segments as the API takes them, as the CLI takes them, params, average)
REQUESTS = [
    pytest.param("binary", ["f1", "roc_auc", "precision"], "region", ["--by", "region"],
                 {"threshold": 0.3}, None, id="binary-one-segment"),
    pytest.param("multiclass", ["accuracy", "f1", "roc_auc"], ["region", "version"],
                 ["--by", "region,version"], {}, ["macro", "weighted"], id="multiclass-comma"),
    pytest.param("multilabel", ["f1", "average_precision", "max_f1", "subset_accuracy"],
                 ["region", "version"], ["--by", "region", "--by", "version"],
                 {"threshold": 0.6, "beta": 2.0}, ["none", "macro"], id="multilabel-repeated"),
    pytest.param("regression", ["mae", "r2"], ["version"], ["--by", "version"], {}, ["none"],
                 id="regression"),
]


def _flags(params: dict[str, Any], average: list[str] | None) -> list[str]:
    flags = [x for name, value in params.items() for x in (f"--{name}", str(value))]
    return flags + [x for a in average or [] for x in ("--average", a)]


@pytest.mark.parametrize(("task", "metrics", "by", "by_flags", "params", "average"), REQUESTS)
def test_every_door_gives_the_same_rows(task, metrics, by, by_flags, params, average, capsys,
                                        tmp_path):
    # "model" is the report's own column: the data's models are versions here
    frame = make_predictions(task, seed=7, complete=True).rename({"weight": "w",
                                                                 "model": "version"})
    path = tmp_path / "preds.parquet"
    frame.write_parquet(path)
    # a statement cannot look for columns: a binary one reads a label column when it is named
    columns = {"weight": "w", "label": "label"}
    segments = [by] if isinstance(by, str) else by
    want = me.evaluate(path, metrics, by=by, task=task, columns=columns, average=average,
                       **params)
    assert want.height > 0

    flags = ["--metric", ",".join(metrics), *by_flags, "--task", task, "--column", "weight=w",
             "--column", "label=label", *_flags(params, average)]
    code, out, err = _cli(capsys, "evaluate", path, *flags, "--format", "csv")
    assert code == 0, err
    cli = pl.read_csv(io.StringIO(out), schema_overrides=want.schema)
    assert cli.columns == want.columns
    assert_same_rows(cli, want, segments)
    assert cli.select(*segments, "metric", "average", "label").equals(
        want.select(*segments, "metric", "average", "label"))  # the same order

    code, statement, err = _cli(capsys, "sql", *flags, "--table", "preds")
    assert code == 0, err
    con = duckdb.connect()
    con.register("preds", frame)
    pasted = con.sql(statement).pl()
    assert pasted.columns == want.columns
    assert_same_rows(pasted, want, segments)
    assert pasted.select(*segments, "metric", "average", "label").equals(
        want.select(*segments, "metric", "average", "label"))

    job = {"sources": [{"path": str(path), "model": "m"}], "segments": [segments],
           "metrics": metrics, "task": task, "columns": columns,
           "curves": {"kinds": []}, **params, **({"average": average} if average else {})}
    report = me.report(job, tmp_path / "report", progress=False)
    rows = pl.read_parquet(report.output / "metrics.parquet").filter(
        pl.col("segmentation") == " x ".join(segments))
    asked = {(m, a) for m, a in want.select("metric", "average").iter_rows()}
    rows = rows.filter(pl.struct("metric", "average").map_elements(
        lambda r: (r["metric"], r["average"]) in asked, return_dtype=pl.Boolean))
    assert_same_rows(rows, want, segments)


# -- the seams, each a test that failed when every door parsed for itself ----------------------

def test_sql_keeps_every_segment_column(capsys):
    """``--by`` repeated kept only the last column: the statement pooled the models."""
    frame = make_predictions("binary", seed=3).drop("label")
    code, statement, _ = _cli(capsys, "sql", "--metric", "f1", "--task", "binary",
                              "--by", "model", "--by", "region", "--column", "weight=weight")
    assert code == 0
    con = duckdb.connect()
    con.register("predictions", frame)
    got = con.sql(statement).pl()
    want = me.evaluate(frame, "f1", by=["model", "region"], task="binary")
    assert got.height == want.height == frame.select("model", "region").n_unique()
    assert_same_rows(got, want, ["model", "region"])


def test_sql_speaks_the_language_of_evaluate(capsys, tmp_path):
    """--metric, --threshold, -o; a binary statement reads no label column; a curve takes no
    metric; every option has help."""
    frame = make_predictions("binary", seed=5).drop("label")
    target = tmp_path / "f1.sql"
    code, out, err = _cli(capsys, "sql", "--metric", "f1,precision", "--threshold", "0.3",
                          "--task", "binary", "--by", "region", "-o", target)
    assert (code, out) == (0, "")  # every row weighs 1, said in the header and on stderr
    assert "reads no weight column" in err and "Weights: none read" in target.read_text()
    # one label named after the score column: said too, unless the label column is named
    assert "reads no label column" in err and "Labels: none read" in target.read_text()
    named = me.sql("f1", task="binary", table="t", columns={"label": "label", "weight": None})
    assert "Labels:" not in named
    con = duckdb.connect()
    con.register("predictions", frame)
    got = con.sql(target.read_text()).pl()
    want = me.evaluate(frame, ["f1", "precision"], by="region", threshold=0.3,
                       columns={"weight": None})
    assert got.columns == want.columns
    assert_same_rows(got, want, ["region"])
    assert set(got["label"]) == {"score"}  # named after the scores, as evaluate names it

    code, _, err = _cli(capsys, "sql", "--curve", "roc", "--metric", "f1")
    assert code == 2 and "the decision metrics of a curve of kind 'thresholds'" in err
    code, _, err = _cli(capsys, "sql", "--metric", "f1")
    assert code == 2 and "--task" in err  # no data to infer the task from: named, not guessed
    with pytest.raises(SystemExit):
        main(["sql", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    for flag in ("--average", "--curve", "--metric", "--by", "--threshold", "--column", "-o"):
        at = text.index(f" {flag} ")
        assert text[at:at + 80].count(" ") > 3, flag  # a flag followed by its help


@pytest.mark.filterwarnings("ignore:task inferred", "ignore:f1 with average")
@pytest.mark.parametrize("task", ["binary", "multiclass", "multilabel"])
def test_a_statement_reads_a_sample_of_its_table_as_evaluate_reads_the_table(task, capsys,
                                                                            tmp_path):
    """--schema-from: the task found in the sample as evaluate finds it (none named), the
    weight column read where the sample has one, a binary table read without a label."""
    frame = make_predictions(task, seed=11, complete=True)
    if task == "binary":
        frame = frame.drop("label")
    sample = tmp_path / "sample.parquet"
    frame.write_parquet(sample)
    code, statement, err = _cli(capsys, "sql", "--metric", "f1", "--by", "region",
                                "--schema-from", sample)
    assert code == 0, err
    assert f"-- mleval_sql: f1 ({task}) from predictions" in statement
    assert "-- Weights: column weight." in statement
    con = duckdb.connect()
    con.register("predictions", frame)
    got = con.sql(statement).pl()
    want = me.evaluate(frame, "f1", by="region")
    assert got.columns == want.columns
    assert_same_rows(got, want, ["region"])


def test_a_subcommand_has_no_version_flag_of_its_own(capsys):
    """``--version`` was a Delta version on ``evaluate``; a table's version is ``--as-of``."""
    with pytest.raises(SystemExit) as done:
        main(["--version"])
    assert done.value.code == 0 and capsys.readouterr().out == f"mleval {me.__version__}\n"
    code, _, err = _cli(capsys, "evaluate", LAKE, "--version", "3")
    assert code == 2 and "--version" in err


def test_regression_without_metrics_gets_the_regression_defaults(capsys, tmp_path):
    frame = make_predictions("regression", seed=2, complete=True)
    path = tmp_path / "reg.parquet"
    frame.write_parquet(path)
    code, out, err = _cli(capsys, "evaluate", path, "--task", "regression", "--format", "csv")
    assert code == 0, err
    got = pl.read_csv(io.StringIO(out))
    assert list(dict.fromkeys(got["metric"])) == ["mse", "rmse", "mae", "r2"]
    assert_same_rows(got, me.evaluate(path, ["mse", "rmse", "mae", "r2"], task="regression"),
                     [])


def test_a_plot_never_pools_segments():
    """A PR table with a model column drawn without ``by=`` gives a line per model, each with
    the model's own average precision."""
    table = me.curve(LAKE, "pr", by="model", columns={"weight": None})
    legend = [t.get_text() for t in figure(table.filter(pl.col("label") == "cat"),
                                           "pr").axes[0].get_legend().get_texts()]
    ap = me.evaluate(LAKE, "average_precision", by="model", average="none",
                     columns={"weight": None}).filter(pl.col("label") == "cat")
    assert legend == [f"model=a (AP = {ap['value'][0]:.3f})",
                      f"model=b (AP = {ap['value'][1]:.3f})"]


def test_a_report_refuses_to_write_into_its_input(capsys, tmp_path):
    lake = tmp_path / "lake"
    make_predictions("multilabel", seed=1).write_parquet(lake / "part.parquet", mkdir=True)
    job = tmp_path / "job.toml"
    job.write_text('metrics = ["f1"]\n[[sources]]\npath = "lake"\nmodel = "a"\n')
    for output in (lake, lake / "report"):
        code, _, err = _cli(capsys, "report", job, "--output", output)
        assert code == 2 and "input" in err and "write it elsewhere" in err
    assert sorted(p.name for p in lake.iterdir()) == ["part.parquet"]


def test_a_report_on_duckdb_takes_a_memory_limit(tmp_path):
    job = {"sources": [{"path": str(LAKE), "model_column": "model"}], "segments": ["region"],
           "metrics": ["f1", "roc_auc"], "engine": "duckdb", "curves": {"kinds": ["roc"]}}
    bounded = me.report({**job, "memory_limit": "1GB"}, tmp_path / "bounded", progress=False)
    free = me.report(job, tmp_path / "free", progress=False)
    assert pl.read_parquet(bounded.output / "metrics.parquet").equals(
        pl.read_parquet(free.output / "metrics.parquet"))


def test_results_keep_the_order_asked_and_threshold_means_one_thing():
    got = me.evaluate(LAKE, ["roc_auc", "max_f1", "f1"], by="model",
                      average=["macro", "none"], threshold=0.4)
    assert list(dict.fromkeys(got["metric"])) == ["roc_auc", "max_f1", "f1"]
    first = got.filter(pl.col("model") == "a", pl.col("metric") == "f1")
    assert first["average"][0] == "macro" and first["average"][-1] is None
    # threshold: where decisions were made; an operating point's own is operating_threshold
    assert set(got.filter(metric="f1")["threshold"]) == {0.4}
    points = got.filter(pl.col("metric") == "max_f1", pl.col("average").is_null())
    assert points.height == 8 and points["threshold"].null_count() == points.height
    assert points["operating_threshold"].null_count() == 0


def test_sweeps_sort_their_thresholds_as_every_curve_does():
    swept = me.evaluate(LAKE, "recall", by="model", thresholds=[0.2, 0.8, 0.5],
                        average="none", columns={"weight": None})
    table = me.curve(LAKE, "sweep", by="model", thresholds=[0.2, 0.8, 0.5],
                     columns={"weight": None})
    for rows in (swept, table):
        first = rows.filter(pl.col("model") == "a", pl.col("label") == "cat")
        assert first["threshold"].to_list() == [0.8, 0.5, 0.2]


def test_threads_reach_duckdb_and_no_other_engine():
    from mleval_sql.engines.duckdb import DuckDBEngine
    from mleval_sql.schema import Columns
    from mleval_sql.sources import as_source

    con = duckdb.connect()
    con.execute("SET threads = 2")
    engine = DuckDBEngine(as_source(LAKE), Columns(), None, ["model"], connection=con,
                          threads=1)
    assert con.execute("SELECT current_setting('threads')").fetchone() == (1,)
    engine.close()
    assert con.execute("SELECT current_setting('threads')").fetchone() == (2,)  # put back
    assert me.evaluate(LAKE, "f1", by="model", threads=1).equals(
        me.evaluate(LAKE, "f1", by="model", engine="duckdb"))
    with pytest.raises(me.InputError, match="engine 'polars' does not take threads=; engines "
                       "that do: duckdb"):
        me.evaluate(LAKE, "f1", by="model", threads=1, engine="polars")


# -- the request itself -----------------------------------------------------------------------

@pytest.mark.parametrize(("action", "given", "flags", "message"), [
    ("evaluate", {"treshold": 0.3}, None, "unknown parameter 'treshold'; did you mean"),
    ("curve", {"beta": 2.0}, None, "beta does not apply to a roc curve"),
    ("curve", {"kind": "roc", "n_bins": 4}, "--kind roc --n-bins 4",
     "n_bins does not apply to a roc curve"),
    ("check", {"metrics": ["f1"]}, None, "metrics does not apply to check"),
    ("evaluate", {"by": ["a", "a"]}, "--by a,a", "by: a name repeats"),
    ("evaluate", {"average": "mean"}, "--average mean", "unknown average 'mean'"),
    ("evaluate", {"threads": 0}, "--threads 0", "threads must be a whole number >= 1"),
    ("evaluate", {"task": "regression", "metrics": ["f1"]}, "--task regression --metric f1",
     "metric 'f1' is not defined for task 'regression'"),
    ("curve", {"kind": "sweep"}, "--kind sweep", "a sweep needs thresholds= or bins="),
])
def test_one_error_names_the_option_at_every_door(action, given, flags, message, capsys,
                                                  tmp_path):
    """The API and the command line (where it has the flag: argparse refuses unknown ones)
    give the request's one error; a report job's key gives it too, led by the key."""
    with pytest.raises(me.InputError, match=message):
        Request.build(action, **given)
    if flags is not None:
        code, _, err = _cli(capsys, action, LAKE, *shlex.split(flags))
        assert code == 2 and err.count("\n") == 1 and message in err, err
    if action == "evaluate" and "by" not in given and "treshold" not in given:
        job = {"sources": [{"path": str(LAKE), "model_column": "model"}],
               "metrics": ["f1"], **given}
        with pytest.raises(me.InputError, match=message):
            me.report(job, tmp_path / "out", progress=False)


def test_a_window_and_late_truth_reach_every_door(capsys, tmp_path):
    """``window=`` and ``unlabelled="skip"``, one request through the API, ``mleval
    evaluate``, ``mleval sql`` pasted into DuckDB and a report job: the same rows (the job's
    every window, in windows.parquet)."""
    frame = make_predictions("multilabel", seed=5, complete=True).rename({"model": "version"})
    frame = frame.with_columns(
        day=pl.date(2026, 11, 1) + pl.duration(days=pl.col("sample").rank("dense") % 9),
        truth=pl.when(pl.col("sample").rank("dense") % 5 == 0).then(None)
        .otherwise(pl.col("truth")))
    path = tmp_path / "preds.parquet"
    frame.write_parquet(path)
    metrics, window = ["f1", "roc_auc"], "day:1d,1w"
    keys = ["granularity", "window_start", "version"]
    want = me.evaluate(path, metrics, by="version", task="multilabel", window=window,
                       unlabelled="skip", average="macro")
    assert want["label_coverage"].min() < 1.0
    flags = ["--metric", ",".join(metrics), "--by", "version", "--task", "multilabel",
             "--window", window, "--unlabelled", "skip", "--average", "macro"]
    code, out, err = _cli(capsys, "evaluate", path, *flags, "--format", "csv")
    assert code == 0, err
    cli = pl.read_csv(io.StringIO(out), schema_overrides=want.schema)
    assert cli.columns == want.columns
    assert_same_rows(cli, want, keys)
    code, statement, err = _cli(capsys, "sql", *flags, "--table", "preds",
                                "--schema-from", path)
    assert code == 0, err
    con = duckdb.connect()
    con.register("preds", frame)
    pasted = con.sql(statement).pl()
    assert pasted.columns == [c for c in want.columns if c != "label_coverage"]
    assert_same_rows(pasted, want, keys)
    job = {"sources": [{"path": str(path), "model": "m"}], "segments": ["version"],
           "metrics": metrics, "task": "multilabel", "average": ["macro"],
           "unlabelled": "skip", "window": {"column": "day", "every": ["1d", "1w"]},
           "curves": {"kinds": []}}
    report = me.report(job, tmp_path / "report", progress=False)
    rows = pl.read_parquet(report.output / "windows.parquet").filter(
        pl.col("segmentation") == "version", pl.col("metric").is_in(metrics),
        pl.col("average") == "macro")
    assert_same_rows(rows, want, keys)
    assert rows.select(*keys, "label_coverage").unique(keys).sort(keys).equals(
        want.select(*keys, "label_coverage").unique(keys).sort(keys))
