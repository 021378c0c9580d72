"""``me.sql`` / ``mleval sql``: one statement, pasted as it is into DuckDB, ``psql`` and
``spark.sql``, gives the rows ``me.evaluate`` / ``me.curve`` give for the same request."""

from __future__ import annotations

import io
from typing import Any

import duckdb
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import cli
from mleval_sql.statement import statements
from tests.helpers import assert_same_rows
from tests.servers import Postgres
from tests.test_portable import BY, COLUMNS, TASKS, _groups, hostile, load


def psql_rows(postgres: Postgres, statement: str) -> pl.DataFrame:
    done = postgres.psql(statement)
    assert done.returncode == 0, done.stderr
    rows = pl.read_csv(io.StringIO(done.stdout), infer_schema_length=None)
    if rows.schema.get("threshold") == pl.String:  # psql writes inf as Infinity
        rows = rows.with_columns(pl.col("threshold").str.replace("Infinity", "inf")
                                 .cast(pl.Float64))
    return rows


def duckdb_rows(frame: pl.DataFrame, name: str, statement: str) -> pl.DataFrame:
    con = duckdb.connect()
    con.register(name, frame)
    return con.sql(statement).pl()


def spark_rows(spark: Any, script: str) -> pl.DataFrame:
    """The rows of a pasted script, run in ``spark.sql`` one statement at a time."""
    *before, last = statements(script, "spark")
    for statement in before:
        spark.sql(statement)
    return pl.from_arrow(spark.sql(last).toArrow())  # type: ignore[return-value]


@pytest.mark.parametrize("task", TASKS)
def test_statement_equals_evaluate_on_duckdb(task: str) -> None:
    frame = hostile(task)
    con = duckdb.connect()
    con.register("preds", frame)
    for averages, metrics in _groups(task).items():
        average = list(averages) if averages else None
        statement = me.sql(metrics, task=task, table="preds", by=BY, columns=COLUMNS,
                           average=average)
        want = me.evaluate(frame, metrics, task=task, by=BY, columns=COLUMNS, average=average)
        got = con.sql(statement).pl()
        assert got.columns == want.columns
        assert_same_rows(got, want, BY)


#: What is pasted into spark.sql here, with hostile names: one decision and one ranking metric
#: keep the script's shape (two families, shared statistics) at a few seconds a task; every
#: metric's script runs in test_sql_oracle (a minute and more a task).
SPARK_METRICS = {"binary": ["f1", "roc_auc"], "multiclass": ["f1", "roc_auc"],
                 "multilabel": ["f1", "roc_auc"], "regression": ["mse", "r2"]}


@pytest.mark.parametrize("task", TASKS)
def test_pasted_statement_runs_in_psql_and_spark(postgres: Postgres, pg_connection: Any,
                                                 spark: Any, task: str) -> None:
    """Every metric of the task in one statement (Spark: two metrics), default averages and a
    non-default threshold, pasted into psql and spark.sql as printed."""
    frame = hostile(task)
    load("postgres", pg_connection, f"paste_{task}", frame)
    load("spark", spark, f"paste_{task}", frame)
    options: dict[str, Any] = {"task": task, "by": BY, "columns": COLUMNS}
    params = {"threshold": 0.3} if task != "regression" else {}
    every = [m for ms in _groups(task).values() for m in ms]
    for dialect, run, metrics in (
            ("postgres", lambda s: psql_rows(postgres, s), every),
            ("spark", lambda s: spark_rows(spark, s), SPARK_METRICS[task])):
        want = me.evaluate(frame, metrics, **options, **params)
        statement = me.sql(metrics, dialect=dialect, table=f"paste_{task}", **options, **params)
        got = run(statement)
        assert got.columns == want.columns, dialect
        assert_same_rows(got, want, BY)


@pytest.mark.parametrize("kind", ["roc", "pr", "sweep", "reliability"])
def test_curve_statement_equals_curve(postgres: Postgres, pg_connection: Any, spark: Any,
                                      kind: str) -> None:
    frame = hostile("multilabel")
    load("postgres", pg_connection, "curve_input", frame)
    load("spark", spark, "curve_input", frame)
    options: dict[str, Any] = {"by": BY, "columns": COLUMNS, "task": "multilabel"}
    extra: dict[str, Any] = {"thresholds": [0.0, 0.3, 0.5, 1.0]} if kind == "sweep" else {}
    want = me.curve(frame, kind, **options, **extra)  # type: ignore[arg-type]
    for dialect, run in (("duckdb", lambda s: duckdb_rows(frame, "curve_input", s)),
                         ("postgres", lambda s: psql_rows(postgres, s)),
                         ("spark", lambda s: spark_rows(spark, s))):
        got = run(me.sql(curve=kind, dialect=dialect, table="curve_input", **options, **extra))
        assert got.columns == want.columns, dialect
        assert got.height == want.height, dialect
        keys = [*BY, "label", *(c for c in ("threshold", "bin") if c in want.columns)]
        joined = got.with_columns(pl.col(k).cast(pl.String) for k in keys).join(
            want.with_columns(pl.col(k).cast(pl.String) for k in keys), on=keys,
            nulls_equal=True, suffix="_want")
        assert joined.height == want.height, dialect
        for column in want.columns:
            if column in keys:
                continue
            a, b = joined[column].cast(pl.Float64), joined[f"{column}_want"].cast(pl.Float64)
            assert ((a - b).abs() <= 1e-9 * (1 + b.abs())).fill_null(
                a.is_null() & b.is_null()).all(), (dialect, column)


BROKEN = pl.DataFrame({
    "id": ["a", "a", "b", "c", "c", "d"],
    "cls": ["x", "x", "x", "x", "y", "x"],
    "p": [0.1, 0.2, None, 0.4, 0.5, 0.6],
    "y": [1, 0, 2, 0, 1, 1],
    "seg": ["n'; --", "n'; --", "n'; --", "s", "s", "s"],
})


def test_checks_statement_lists_every_problem(postgres: Postgres, pg_connection: Any,
                                              spark: Any) -> None:
    load("postgres", pg_connection, "broken", BROKEN)
    load("spark", spark, "broken", BROKEN)
    columns = {"sample": "id", "label": "cls", "score": "p", "truth": "y"}
    want = {("n'; --", "duplicate (sample, label) rows", "a"),
            ("n'; --", "null scores", None),
            ("n'; --", "truth values outside {0, 1}", None),
            ("s", "samples lacking rows for some labels of their segment", "d")}
    for dialect, run in (("duckdb", lambda s: duckdb_rows(BROKEN, "broken", s)),
                         ("postgres", lambda s: psql_rows(postgres, s)),
                         ("spark", lambda s: spark_rows(spark, s))):
        rows = run(me.sql(checks=True, dialect=dialect, table="broken", by="seg",
                          columns=columns))
        assert rows.columns == ["seg", "problem", "count", "example"], dialect
        assert {(r["seg"], r["problem"], r["example"]) for r in rows.iter_rows(named=True)} \
            == want, dialect


def test_checks_statement_of_clean_input_is_empty() -> None:
    frame = hostile("multilabel")
    con = duckdb.connect()
    con.register("preds", frame)
    assert con.sql(me.sql(checks=True, table="preds", by=BY, columns=COLUMNS)).pl().is_empty()


def test_view_for_a_bi_tool(postgres: Postgres, pg_connection: Any) -> None:
    frame = hostile("binary")
    load("postgres", pg_connection, "view_input", frame)
    statement = me.sql(["f1", "roc_auc"], task="binary", dialect="postgres", table="view_input",
                       by=BY, columns=COLUMNS, view="mleval metrics")
    # installed twice (a redeploy replaces it), then read as a BI tool reads a dataset
    got = psql_rows(postgres, statement + "\n" + statement + '\nSELECT * FROM (SELECT * FROM '
                    '"mleval metrics") AS t WHERE t.metric = \'f1\';')
    want = me.evaluate(frame, ["f1", "roc_auc"], task="binary", by=BY, columns=COLUMNS)
    assert_same_rows(got, want.filter(metric="f1"), BY)
    # a table of the name is the database's error, and the table stays
    taken = me.sql(["f1"], task="binary", dialect="postgres", table="view_input", by=BY,
                   columns=COLUMNS, view="view_input")
    done = postgres.psql(taken)
    assert done.returncode != 0 and '"view_input" is not a view' in done.stderr
    assert psql_rows(postgres, "SELECT count(*) AS n FROM view_input;")["n"][0] == frame.height


def test_cli_prints_the_statement(capsys: pytest.CaptureFixture) -> None:
    args = ["sql", "--metric", "f1,roc_auc", "--dialect", "postgres", "--table", "preds",
            "--by", "region,model", "--column", "score=prob", "--column", "weight=w",
            "--threshold", "0.3", "--task", "binary", "--view", "v"]
    assert cli.main(args) == 0
    out = capsys.readouterr().out
    assert out == me.sql(["f1", "roc_auc"], dialect="postgres", table="preds",
                         by=["region", "model"], columns={"score": "prob", "weight": "w"},
                         threshold=0.3, task="binary", view="v") + "\n"
    assert "CAST(0.3 AS DOUBLE PRECISION)" in out and '"prob"' in out


def test_statement_options_are_checked() -> None:
    with pytest.raises(me.InputError, match="unknown parameter 'treshold'"):
        me.sql("f1", treshold=0.3)
    with pytest.raises(me.InputError, match="threshold must be"):
        me.sql("f1", threshold="high")
    with pytest.raises(me.InputError, match="unknown metric"):
        me.sql("f2")


def test_truth_as_numbers_and_no_weight_column() -> None:
    """truth 0/1 instead of boolean, and no weight column named: every row weighs 1."""
    frame = hostile("multilabel").with_columns(pl.col(COLUMNS["truth"]).cast(pl.Int8))
    columns = {k: v for k, v in COLUMNS.items() if k != "weight"}
    statement = me.sql(["f1", "roc_auc", "subset_accuracy"], table="preds", by=BY,
                       columns=columns, average="macro")
    want = me.evaluate(frame.drop(COLUMNS["weight"]), ["f1", "roc_auc", "subset_accuracy"],
                       by=BY, columns={**columns, "weight": None}, task="multilabel",
                       average="macro")
    assert_same_rows(duckdb_rows(frame, "preds", statement), want, BY)
