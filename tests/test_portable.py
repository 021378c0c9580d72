"""The SQL of ``queries/`` run for real outside DuckDB: every metric of every task, the curves,
sweeps and input checks, on PostgreSQL and Spark SQL through ``engine="sql"``, equal to
``me.evaluate`` on DuckDB within 1e-9, on data with ties, weights, several segments and
identifiers and segment values built to break quoting."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import mleval_sql as me
from mleval_sql import dialects
from mleval_sql.params import DEFAULTS, SWITCHES
from mleval_sql.registry import ESTIMATED, LABEL_AVERAGES, METRICS, STEPS
from tests.data import make_predictions
from tests.helpers import assert_same_rows

#: Hostile names: quotes, ``;``, ``--``, unicode and keywords, as identifiers and as values.
COLUMNS = {"sample": 'id"; DROP TABLE x; --', "label": "select", "score": "prob'ability",
           "truth": "Truth", "weight": "wéight"}
BY = ["re'gion", "order"]
VALUES = {"north": "nörth'; --", "south": 'so"uth', "one_class": "select", "single": None}
TASKS = ("binary", "multiclass", "multilabel", "regression")


def hostile(task: str, seed: int = 7) -> pl.DataFrame:
    """The test predictions with renamed columns and awkward segment values (one null)."""
    frame = make_predictions(task, seed, n_samples=40)  # type: ignore[arg-type]
    return frame.with_columns(
        pl.col("region").replace_strict(VALUES, return_dtype=pl.String),
    ).rename({"region": BY[0], "model": BY[1], **COLUMNS})


def load(kind: str, con: Any, name: str, frame: pl.DataFrame) -> None:
    """``frame`` as table ``name`` of the database behind ``con``."""
    if kind == "spark":
        con.createDataFrame(frame.to_arrow()).createOrReplaceTempView(name)
        return
    with con.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {name}")
        cursor.adbc_ingest(name, frame.to_arrow(), mode="create")


@pytest.fixture(params=["postgres", "spark"])
def database(request: pytest.FixtureRequest) -> tuple[str, Any]:
    con = request.getfixturevalue("pg_connection" if request.param == "postgres" else "spark")
    return request.param, con


def _groups(task: str) -> dict[tuple[str, ...], list[str]]:
    """The task's metrics grouped by the averages they take, every label average in one
    request (one request per group); the estimated metrics, which no statement gives
    (test_estimation), left out."""
    groups: dict[tuple[str, ...], list[str]] = defaultdict(list)
    for name, metric in METRICS.items():
        if task in metric.families and ESTIMATED not in metric.families.values():
            averages = metric.averages(task)
            groups[LABEL_AVERAGES if set(LABEL_AVERAGES) <= set(averages)
                   else averages].append(name)
            if "samples" in averages and len(averages) > 1:
                groups[("samples",)].append(name)
    return groups


@pytest.mark.parametrize("task", TASKS)
def test_every_metric_equals_duckdb(database: tuple[str, Any], task: str) -> None:
    kind, con = database
    frame = hostile(task)
    load(kind, con, f"preds_{task}", frame)
    options: dict[str, Any] = {"by": BY, "task": task, "columns": COLUMNS}
    for averages, metrics in _groups(task).items():
        average = list(averages) if averages else None
        got = me.evaluate(f"preds_{task}", metrics, engine="sql", connection=con,
                          average=average, **options)
        want = me.evaluate(frame, metrics, average=average, **options)
        assert_same_rows(got, want, BY)
        assert got.columns == want.columns


def test_curves_sweeps_and_checks(database: tuple[str, Any]) -> None:
    kind, con = database
    frame = hostile("multilabel")
    load(kind, con, "curves_input", frame)
    options: dict[str, Any] = {"by": BY, "columns": COLUMNS, "task": "multilabel"}
    for curve, extra in (("roc", {}), ("pr", {"drop_intermediate": True}), ("reliability", {}),
                         ("sweep", {"thresholds": [0.0, 0.3, 0.5, 1.0]})):
        got = me.curve("curves_input", curve, engine="sql", connection=con,  # type: ignore[arg-type]
                       **options, **extra)
        want = me.curve(frame, curve, **options, **extra)  # type: ignore[arg-type]
        assert_frame_equal(got, want, check_dtypes=False, rel_tol=1e-9, abs_tol=1e-12)
    swept = {"thresholds": None, "bins": 4, "average": ["none", "macro", "micro"]}
    got = me.evaluate("curves_input", ["f1", "precision", "specificity"], engine="sql",
                      connection=con, **options, **swept)
    want = me.evaluate(frame, ["f1", "precision", "specificity"], **options, **swept)
    assert_same_rows(got.with_columns(pl.col("threshold").cast(pl.String)),
                     want.with_columns(pl.col("threshold").cast(pl.String)), [*BY, "threshold"])
    sample = COLUMNS["sample"]
    load(kind, con, "duplicated", pl.concat([frame, frame.filter(pl.col(sample) == "s005")]))
    with pytest.raises(me.InputError, match=r"duplicate .* e\.g\. sample 's005'"):
        me.check("duplicated", engine="sql", connection=con, by=BY, columns=COLUMNS)
    load(kind, con, "bad_scores", frame.with_columns(
        pl.when(pl.col(sample) == "s007").then(None).otherwise(pl.col(COLUMNS["score"]))
        .alias(COLUMNS["score"])))
    with pytest.raises(me.InputError, match="null value"):
        me.evaluate("bad_scores", "f1", engine="sql", connection=con, by=BY, columns=COLUMNS)


def test_every_step_renders_for_every_dialect() -> None:
    """Each step either renders and parses back in every dialect, or fails naming why."""
    params = {**DEFAULTS, **{p.name: p.default for p in SWITCHES.values()},
              "thresholds": [0.25, 0.5], "drop_intermediate": True, "replicates": [0, 1],
              "epsilon": 1e-4}
    failed = []
    for dialect in (*dialects.RUN, *dialects.RENDERED):
        for step in STEPS:
            for keys in (["segment"], ["segment_0", "segment_1"]):
                try:
                    text = dialects.step_sql(step, dialect, params, keys)
                except me.InputError as error:
                    assert dialect in dialects.RENDERED, error
                    failed.append((dialect, step))
                    continue
                import sqlglot
                sqlglot.parse_one(text, read=dialect)
    assert set(failed) <= {(d, "validate_summary") for d in ("bigquery", "snowflake")}


def test_dbapi_connection_and_table_checks(postgres, pg_connection) -> None:
    """A DB-API connection (psycopg) works as ADBC does; bad input gets the same errors."""
    import psycopg

    frame = hostile("multilabel")
    load("postgres", pg_connection, "dbapi_input", frame)
    options: dict[str, Any] = {"by": BY, "columns": COLUMNS, "average": ["none", "macro"]}
    with psycopg.connect(host=postgres.socket_dir, port=postgres.port, user=postgres.user,
                         dbname="postgres", autocommit=True) as con:
        got = me.evaluate("dbapi_input", ["f1", "roc_auc"], engine="sql", connection=con,
                          **options)
        assert me.check("dbapi_input", engine="sql", connection=con, by=BY,
                        columns=COLUMNS) == "multilabel"
        left = con.execute("SELECT count(*) FROM pg_class WHERE relname LIKE 'mleval\\_%' "
                           "AND relnamespace = pg_my_temp_schema()")
        assert left.fetchone() == (0,)  # every temporary relation of this session dropped
    assert_same_rows(got, me.evaluate(frame, ["f1", "roc_auc"], **options), BY)
    load("postgres", pg_connection, "dbapi_broken",
         frame.with_columns(pl.col(COLUMNS["truth"]).cast(pl.Int64) * 2))
    with pytest.raises(me.InputError, match="outside"):
        me.evaluate("dbapi_broken", "f1", engine="sql", connection=pg_connection, by=BY,
                    columns=COLUMNS)
    with pytest.raises(me.InputError, match="needs connection="):
        me.evaluate("dbapi_input", "f1", engine="sql")
