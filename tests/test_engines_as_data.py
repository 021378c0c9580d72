"""What the engines and dialects can do is data: the engine table says which tasks each engine
runs and which takes a memory budget (one message for every refusal), a connection kind names
the class that runs SQL on it, and a dialect is one entry naming its rewrites."""

from __future__ import annotations

from typing import Any

import duckdb
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import dialects
from mleval_sql.engines import DATABASES, ENGINES, EngineEntry, make_engine
from mleval_sql.engines.duckdb import DuckDBEngine
from mleval_sql.engines.sql import Database, plain_numbers
from mleval_sql.schema import Columns
from tests.data import make_predictions
from tests.helpers import assert_same_rows


@pytest.mark.parametrize("engine", ["sql", "spark"])
def test_an_engine_refuses_what_its_entry_does_not_list(engine: str) -> None:
    """Refused by the table, before the engine is built (no database, no session)."""
    with pytest.raises(me.InputError, match=rf"^engine '{engine}' does not take memory_limit= "
                                            r".*; engines that do: duckdb, polars$"):
        make_engine(engine, None, Columns(), None, [], memory_limit="1GB")  # type: ignore[arg-type]


def test_a_new_engines_tasks_are_one_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(ENGINES, "toy", EngineEntry("toy", DuckDBEngine, tasks=("binary",)))
    with pytest.raises(me.InputError, match=r"^engine 'toy' does not run task 'clustering'; "
                                            r"engines that do: duckdb, polars, sql, spark$"):
        make_engine("toy", None, Columns(), None, [], clustering=True)  # type: ignore[arg-type]
    ENGINES["polars"].check_task("clustering")
    with pytest.raises(me.InputError, match=r"engines that do: duckdb, polars, sql, spark$"):
        ENGINES["toy"].check_task("regression")


@pytest.fixture
def con() -> Any:
    con = duckdb.connect()
    frame = make_predictions("multilabel", 5, n_samples=30)
    con.from_arrow(frame.to_arrow()).create("preds")
    yield con
    con.close()


def test_the_front_door_gives_the_tables_refusals(con: Any) -> None:
    with pytest.raises(me.InputError, match=r"^engine 'sql' does not take memory_limit="):
        me.evaluate("preds", ["f1"], engine="sql", connection=con, memory_limit="1GB")


class DuckDBDatabase(Database):
    """DuckDB as a database of engine="sql", on the connection itself (a cursor of DuckDB is a
    connection of its own, without the temporary views of the other)."""

    def execute(self, sql: str) -> None:
        self.connection.execute(sql)

    def fetch(self, sql: str) -> pl.DataFrame:
        return plain_numbers(self.connection.sql(sql).pl())


def test_a_connection_kind_is_one_entry(con: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """engine="sql" on a DuckDB connection through a Database class named in DATABASES: the
    steps as the files have them, through the engines' common loop, equal to engine="duckdb"."""
    kind = type(con).__module__.split(".")[0]  # the connection's top-level module: _duckdb
    monkeypatch.setitem(DATABASES, kind, f"{__name__}:DuckDBDatabase")
    options: dict[str, Any] = {"by": "region", "average": ["none", "macro"]}
    got = me.evaluate("preds", ["f1", "roc_auc", "log_loss"], engine="sql", connection=con,
                      **options)
    want = me.evaluate(con.table("preds").pl(), ["f1", "roc_auc", "log_loss"], **options)
    assert_same_rows(got, want, ["region"])
    assert not [r for r in con.sql("SELECT table_name FROM duckdb_tables() UNION ALL "
                                   "SELECT view_name FROM duckdb_views() WHERE NOT internal")
                .fetchall() if r[0].startswith("mleval_")]  # every relation of the run dropped


def test_a_dialect_is_one_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    """Presto without an entry gets the portable rewrites (arg_min as array_agg); given Trino's
    entry under its name, it is written as Trino is."""
    params: dict[str, object] = {}
    portable = dialects.step_sql("argmax_matrix", "presto", params)
    assert "ARRAY_AGG" in portable and "MIN_BY" not in portable
    assert dialects.dialect_entry("presto").rewrites == dialects.PORTABLE
    trino = dialects.DIALECTS["trino"]
    monkeypatch.setitem(dialects.DIALECTS, "presto", dialects.Dialect(
        "presto", trino.rewrites, min_by_key=trino.min_by_key))
    written = dialects.step_sql("argmax_matrix", "presto", params)
    assert "MIN_BY" in written
    assert written == dialects.step_sql("argmax_matrix", "trino", params)


def test_a_dialect_names_only_known_rewrites() -> None:
    with pytest.raises(ValueError, match="unknown rewrites \\['unpivott'\\]"):
        dialects.Dialect("x", frozenset({"unpivot", "unpivott"}))
    assert dialects.RUN == ("duckdb", "postgres", "spark")
    assert dialects.RENDERED == ("trino", "bigquery", "snowflake")
