"""Declared metrics at every door (mleval_sql/declared.py): ``define=`` of the API, ``--define``
of each command, a job's ``[define.NAME]``, a team's ``metrics.toml`` (``MLEVAL_METRICS``, or
beside a lake): the same declaration gives the same rows through each, its refusals name the
file and the metric, and ``me.compare``, ``me.slices``, report rules and ``mleval metrics``
take a declared metric as a built-in one."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import duckdb
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.registry import LOWER_IS_BETTER
from tests.data import make_predictions
from tests.helpers import assert_same_rows

ROOT = Path(__file__).resolve().parent.parent
LAKE = ROOT / "fixtures" / "lake"
F1 = "2 * tp / (2 * tp + fp + fn)"
NET_BENEFIT = "tp / n - fp / n * threshold / (1 - threshold)"
COST = "(5 * fn + fp) / n"


@pytest.fixture(autouse=True)
def undeclared(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No declaration leaks from a test to the next, and no team file from the environment."""
    monkeypatch.delenv("MLEVAL_METRICS", raising=False)
    before = set(me.defined())
    yield
    for name in set(me.defined()) - before:
        me.undefine(name)


def _cli(capsys: pytest.CaptureFixture, *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("task", ["binary", "multilabel"])
def test_every_door_gives_the_same_declared_rows(task, capsys, tmp_path):
    """One declaration (net benefit, higher is better; a cost, lower) through ``me.evaluate``,
    ``mleval evaluate``, ``mleval sql`` pasted into DuckDB and a report job: the same rows.
    Each door declares on its own (nothing declared before it)."""
    frame = make_predictions(task, seed=7, complete=True).rename({"model": "version"})
    path = tmp_path / "preds.parquet"
    frame.write_parquet(path)
    metrics, average = ["net_benefit", "cost", "f1"], ["none", "macro", "micro"]
    define = {"net_benefit": NET_BENEFIT,
              "cost": {"expr": COST, "higher_is_better": False, "doc": "errors, fn weigh 5"}}
    options = {"by": "region", "task": task, "average": average, "threshold": 0.4}
    want = me.evaluate(path, metrics, define=define, **options)
    assert set(want["metric"]) == set(metrics) and want["value"].drop_nulls().len() > 0
    assert not me.defined()  # declared for that call

    flags = ["--metric", ",".join(metrics), "--by", "region", "--task", task,
             "--threshold", "0.4", "--column", "label=label",
             *(x for a in average for x in ("--average", a)),
             "--define", f"net_benefit={NET_BENEFIT}",
             "--define", f'cost={{expr = "{COST}", higher_is_better = false}}']
    code, out, err = _cli(capsys, "evaluate", path, *flags, "--format", "csv")
    assert code == 0, err
    cli = pl.read_csv(io.StringIO(out), schema_overrides=want.schema)
    assert cli.columns == want.columns
    assert_same_rows(cli, want, ["region"])
    assert not me.defined()

    code, statement, err = _cli(capsys, "sql", *flags, "--table", "preds", "--column",
                                "weight=weight")
    assert code == 0, err
    con = duckdb.connect()
    con.register("preds", frame)
    assert_same_rows(con.sql(statement).pl(), want, ["region"])

    job = {"sources": [{"path": str(path), "model": "m"}], "segments": ["region"],
           "metrics": metrics, "task": task, "average": average, "threshold": 0.4,
           "define": define, "curves": {"kinds": []}}
    report = me.report(job, tmp_path / "report", progress=False)
    rows = pl.read_parquet(report.output / "metrics.parquet").filter(
        pl.col("segmentation") == "region", pl.col("metric").is_in(metrics))
    assert_same_rows(rows, want, ["region"])


def test_a_report_judges_and_shows_a_declared_metric(tmp_path):
    """A rule on a declared metric fires as a built-in's does (a cost: lower is better, so
    ``above``), and the page's tables show it."""
    job = {"sources": [{"path": str(LAKE), "model_column": "model"}], "segments": ["region"],
           "metrics": ["cost", "f1"], "average": ["macro"], "curves": {"kinds": []},
           "define": {"cost": {"expr": COST, "higher_is_better": False}},
           "report": {"rank_by": "cost"}, "baseline": {"model": "a"},
           "slices": {"metric": "cost", "over": ["region", "date"], "min_support": 40},
           "alerts": {"rules": [{"metric": "cost", "above": 0.5},
                                {"metric": "cost", "rise": 0.01}]}}
    report = me.report(job, tmp_path / "out", progress=False)
    fired = pl.read_csv(report.output / "alerts.csv").filter(pl.col("metric") == "cost")
    want = me.evaluate(LAKE, ["cost"], by="model", average="macro", define={"cost": COST})
    above = want.filter(pl.col("value") > 0.5)["model"].to_list()
    assert above and set(above) <= set(fired["model"])
    wide = pl.read_parquet(report.output / "wide.parquet")
    assert "cost" in wide.columns
    page = (report.output / "report.html").read_text(encoding="utf-8")
    assert "cost" in page


def test_a_lake_and_the_team_declare_for_every_door(capsys, tmp_path, monkeypatch):
    """``metrics.toml`` beside a lake's files declares for every request over the lake (API,
    CLI, a job); ``MLEVAL_METRICS`` names the team's file; the nearest declaration wins: code
    (``define=``) over the lake's over the team's."""
    lake = tmp_path / "lake"
    lake.mkdir()
    make_predictions("binary", seed=3, complete=True).drop("model").write_parquet(
        lake / "part-0.parquet")
    (lake / "metrics.toml").write_text(
        f'[metrics.cost]\nexpr = "{COST}"\nhigher_is_better = false\ndoc = "lake cost"\n'
        f'[metrics.my_f1]\nexpr = "{F1}"\ntasks = ["binary"]\n', encoding="utf-8")
    team = tmp_path / "team.toml"
    team.write_text('[metrics]\ncost = "fn / n"\nlift = "tp / nullif(tp + fp, 0) / '
                    '(support / n)"\n', encoding="utf-8")
    monkeypatch.setenv("MLEVAL_METRICS", str(team))

    rows = me.evaluate(lake, ["cost", "my_f1", "f1", "lift"], by="region")
    wide = rows.pivot(on="metric", index=["region", "label"], values="value")
    assert wide["my_f1"].to_list() == pytest.approx(wide["f1"].to_list(), nan_ok=True)
    lakes = me.evaluate(lake, ["cost"], by="region", define={"cost": COST})  # the lake's...
    teams = me.evaluate(lake, ["cost"], by="region", define={"cost": "fn / n"})  # not the team's
    assert_same_rows(rows.filter(metric="cost"), lakes, ["region"])
    assert lakes["value"].to_list() != teams["value"].to_list()
    assert "cost" not in me.defined() and "cost" not in LOWER_IS_BETTER  # for the call only
    code, out, err = _cli(capsys, "evaluate", lake, "--metric", "cost,lift", "--by", "region",
                          "--format", "csv")
    assert code == 0, err
    assert_same_rows(pl.read_csv(io.StringIO(out), schema_overrides=rows.schema),
                     rows.filter(pl.col("metric").is_in(["cost", "lift"])), ["region"])
    code, out, err = _cli(capsys, "metrics")  # no lake here: the team's declarations
    assert code == 0, err
    assert "declared: fn / n (from" in out and "team.toml" in out and "lift" in out

    job = {"sources": [{"path": str(lake), "model": "m"}], "metrics": ["cost", "lift"],
           "curves": {"kinds": []}}
    report = me.report(job, tmp_path / "out", progress=False)
    got = pl.read_parquet(report.output / "metrics.parquet").filter(
        pl.col("segmentation") == "overall")
    assert_same_rows(got, me.evaluate(lake, ["cost", "lift"]), [])

    theirs = me.evaluate(lake, ["cost"], define={"cost": "fp / n"})["value"].to_list()
    assert "cost" not in me.defined()  # code's over the lake's, for that call
    again = me.evaluate(lake, ["cost"])["value"].to_list()
    assert again != theirs and again == me.evaluate(lake, ["cost"], define={"cost": COST})[
        "value"].to_list()


@pytest.mark.parametrize(("text", "message"), [
    ('[metrics.cost]\nexprs = "fn / n"\n', r"'cost': unknown key 'exprs'; did you mean 'expr'"),
    ('[metrics.cost]\ndoc = "no expression"\n', r"'cost': missing expr"),
    ("[metrics.cost]\nexpr = 5\n", r"'cost': expr must be a text, got 5"),
    ('[metrics.cost]\nexpr = "fn / n"\nhigher_is_better = "no"\n',
     r"'cost': higher_is_better must be true or false, got 'no'"),
    ('[metrics.cost]\nexpr = "fn / n"\ntasks = [1]\n', r"'cost': tasks must be a list"),
    ('[metrics.cost]\nexpr = "fn / n"\ntasks = ["regression"]\n',
     r"'cost': task 'regression' is not served"),
    ('[metrics.cost]\nexpr = "fn / suport"\n',
     r"'cost': unknown name suport; did you mean 'support'"),
    ('[metrics.f1]\nexpr = "fn / n"\n', r"'f1': the name is taken by a built-in metric"),
    ('[metric.cost]\nexpr = "fn / n"\n', r"unknown key 'metric'; the file holds \[metrics.NAME\]"),
    ('[metrics.cost\nexpr = "fn / n"\n', r"not valid TOML"),
])
def test_a_bad_metrics_file_is_refused_naming_the_file_and_metric(text, message, tmp_path,
                                                                  monkeypatch, capsys):
    """Beside a lake, named by MLEVAL_METRICS, on the command line: one line naming the file
    and the metric, before any data is read; nothing of the file is declared."""
    lake = tmp_path / "lake"
    lake.mkdir()
    make_predictions("binary", seed=3).write_parquet(lake / "part-0.parquet")
    (lake / "metrics.toml").write_text(text, encoding="utf-8")
    with pytest.raises(me.InputError, match=message) as caught:
        me.evaluate(lake, ["f1"])
    assert str(lake / "metrics.toml") in str(caught.value)
    assert "cost" not in me.defined()
    code, _, err = _cli(capsys, "evaluate", lake, "--metric", "f1")
    assert code == 2 and str(lake / "metrics.toml") in err
    monkeypatch.setenv("MLEVAL_METRICS", str(lake / "metrics.toml"))
    with pytest.raises(me.InputError, match="MLEVAL_METRICS: .*" + message):
        me.evaluate(make_predictions("binary", seed=3), ["f1"])


def test_the_other_refusals_name_their_door(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("MLEVAL_METRICS", str(tmp_path / "missing.toml"))
    with pytest.raises(me.InputError, match=r"MLEVAL_METRICS: cannot read the metrics file "
                                            r".*missing.toml"):
        me.evaluate(LAKE, ["f1"], by="model")
    monkeypatch.delenv("MLEVAL_METRICS")
    code, _, err = _cli(capsys, "evaluate", LAKE, "--metric", "cost", "--define",
                        'cost={expr = "fn / n", higher = false}')
    assert code == 2 and "define: declared metric 'cost': unknown key 'higher'" in err
    code, _, err = _cli(capsys, "evaluate", LAKE, "--metric", "cost", "--define",
                        "cost={expr = fn / n}")
    assert code == 2 and "declared metric 'cost': not a TOML inline table" in err
    with pytest.raises(me.InputError, match="define does not apply to curve"):
        me.curve(LAKE, define={"cost": COST})
    job = {"sources": [{"path": str(LAKE), "model_column": "model"}], "metrics": ["cost"],
           "define": {"cost": {"expr": COST, "tasks": ["regression"]}}}
    with pytest.raises(me.InputError, match="define: declared metric 'cost': task "
                                            "'regression' is not served"):
        me.report(job, tmp_path / "out", progress=False)
    job["define"] = {"cost": {"expression": COST}}
    with pytest.raises(me.InputError, match="define: declared metric 'cost': unknown key "
                                            "'expression'"):
        me.report(job, tmp_path / "out", progress=False)


def test_compare_and_slices_take_a_declared_metric():
    """A declared F1 compares and slices as f1 does: the same values, differences and
    p-values."""
    define = {"my_f1": F1}
    ours = me.compare(LAKE, ["my_f1"], model="model", baseline="a", average="macro",
                      by="region", resamples=50, define=define)
    theirs = me.compare(LAKE, ["f1"], model="model", baseline="a", average="macro",
                        by="region", resamples=50)
    assert ours.height == theirs.height > 0
    assert ours.drop("metric").equals(theirs.drop("metric"))
    ours = me.slices(LAKE, "my_f1", over=["region", "date"], by="model", min_support=40,
                     average="macro", define=define)
    theirs = me.slices(LAKE, "f1", over=["region", "date"], by="model", min_support=40,
                       average="macro")
    assert ours.height == theirs.height > 0
    assert ours.drop("metric", strict=False).equals(theirs.drop("metric", strict=False))


def test_the_listing_and_the_docs_show_a_declaration():
    from docs.hooks import family_page
    from mleval_sql.cli import metrics_text
    from mleval_sql.registry import DECLARED

    me.define("cost", COST, higher_is_better=False, doc="errors, a false negative weighs 5")
    listing = metrics_text()
    assert f"declared: {COST}" in listing and "errors, a false negative weighs 5" in listing
    page = family_page(DECLARED)
    assert f"| declared | `{COST}` |" in page and "| better | lower |" in page
