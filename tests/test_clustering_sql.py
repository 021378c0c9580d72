"""The twelve clustering metrics where the data is, held to scikit-learn directly
(tests/oracle_clustering.py) within 1e-9: ``engine="sql"`` on PostgreSQL and on a SparkSession,
``engine="spark"``, and the statements ``me.sql`` prints, pasted into psql, DuckDB and
``spark.sql``. One small weighted table with hostile names: segments of several classes and
clusters, one cluster, one class, one sample, and weights all 0 (metrics NULL); a null segment."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import dialects
from mleval_sql.registry import METRICS
from tests.oracle_clustering import expected, text
from tests.servers import Postgres
from tests.test_portable import load
from tests.test_statement import duckdb_rows, psql_rows, spark_rows

CLUSTERING = [name for name, m in METRICS.items() if "clustering" in m.families]
#: Hostile names, as identifiers and as segment values.
COLUMNS = {"sample": 'id"; --', "truth": "Class", "cluster": "select", "weight": "wéight"}
BY = ["re'gion"]
#: Not the defaults: each changes some metric's value.
PARAMS = {"average_method": "geometric", "beta": 2.0}


def _table() -> pl.DataFrame:
    """Canonical columns (the oracle's), text classes and integer clusters, whole weights."""
    rng = np.random.default_rng(31)
    parts = []
    for region, n, classes, clusters in (("nörth'; --", 120, 4, 5), ('so"uth', 90, 3, 3),
                                         ("one_cluster", 20, 3, 1), ("one_class", 20, 1, 4),
                                         ("single", 1, 1, 1), ("zero", 8, 2, 2),
                                         (None, 30, 2, 3)):
        truth = rng.integers(0, classes, n)
        # clusters that mostly follow the classes, so that the scores are not all near 0
        cluster = np.where(rng.random(n) < 0.7, truth % clusters, rng.integers(0, clusters, n))
        weight = np.zeros(n) if region == "zero" else rng.integers(0, 4, n).astype(float)
        weight[0] = max(weight[0], 1.0) if region != "zero" else 0.0
        if region == "zero":  # and a segment of a dominant class and cluster (below)
            parts.append(_dominant())
        parts.append(pl.DataFrame({
            "sample": [f"s{len(parts)}_{i}" for i in range(n)],
            "truth": [f"c{t}" for t in truth], "cluster": cluster.astype(np.int64),
            "weight": weight, "region": pl.Series([region] * n, dtype=pl.String)}))
    return pl.concat(parts)


def _dominant() -> pl.DataFrame:
    """A class and a cluster of all but 150 of 100,300 (weighted) samples: the expected mutual
    information's terms reach exp(-830), below a double's range, where PostgreSQL's exp raises
    instead of giving 0."""
    return pl.DataFrame({"sample": ["big", "k1", "k2"], "truth": ["c0", "c0", "c1"],
                         "cluster": [0, 1, 0], "weight": [100_000.0, 150.0, 150.0],
                         "region": ["dominant"] * 3})


@pytest.fixture(scope="module")
def frame() -> pl.DataFrame:
    return _table()


@pytest.fixture(scope="module")
def want(frame: pl.DataFrame) -> dict:
    """scikit-learn's rows by (segment, metric, truth, cluster)."""
    out: dict = {}
    for metric in CLUSTERING:
        out.update(expected(frame, metric, ["region"], PARAMS))
    return out


def user_table(frame: pl.DataFrame) -> pl.DataFrame:
    """The table as a user has it: hostile column names."""
    return frame.rename({**{c: COLUMNS[c] for c in ("sample", "truth", "cluster", "weight")},
                         "region": BY[0]})


def assert_equal(got: pl.DataFrame, want: dict) -> None:
    """Every row of ``want`` (and no other) in ``got``, values within 1e-9."""
    rows = {}
    for row in got.iter_rows(named=True):
        rows[(row[BY[0]], row["metric"], text(row["truth"]), text(row["cluster"]))] = \
            row["value"]
    assert rows.keys() == want.keys(), (sorted(rows.keys() - want.keys(), key=str)[:5],
                                        sorted(want.keys() - rows.keys(), key=str)[:5])
    for key, value in want.items():
        if value is None:
            assert rows[key] is None or math.isnan(rows[key]), (key, rows[key])
        else:
            assert rows[key] is not None and math.isclose(rows[key], value, rel_tol=1e-9,
                                                          abs_tol=1e-12), (key, rows[key], value)


def statement(dialect: str) -> str:
    return me.sql(CLUSTERING, task="clustering", dialect=dialect, table="clusters", by=BY,
                  columns=COLUMNS, **PARAMS)


def test_lgamma_is_portable_and_close() -> None:
    """The dialects without lgamma get Stirling's series: within 1e-13 of ln Γ."""
    import duckdb
    import sqlglot

    con = duckdb.connect()
    for x in (1, 2, 7, 15, 16, 17, 40, 1000, 123456):
        tree = dialects.portable(sqlglot.parse_one(f"SELECT lgamma({x})", read="duckdb"),
                                 "postgres")
        assert "LGAMMA" not in tree.sql("postgres").upper()
        got = con.execute(tree.sql("duckdb")).fetchall()[0][0]
        assert math.isclose(got, math.lgamma(x), rel_tol=1e-15, abs_tol=1e-13), x


def test_postgres_engine_and_pasted_statements(postgres: Postgres, pg_connection: Any,
                                               frame: pl.DataFrame, want: dict) -> None:
    table = user_table(frame)
    load("postgres", pg_connection, "clusters", table)
    got = me.evaluate("clusters", CLUSTERING, engine="sql", connection=pg_connection, by=BY,
                      columns=COLUMNS, **PARAMS)
    assert_equal(got, want)
    local = me.evaluate(table, CLUSTERING, by=BY, columns=COLUMNS, **PARAMS)
    assert got.columns == local.columns
    for dialect, rows in (("postgres", lambda s: psql_rows(postgres, s)),
                          ("duckdb", lambda s: duckdb_rows(table, "clusters", s))):
        pasted = rows(statement(dialect))
        assert pasted.columns == local.columns, dialect
        assert_equal(pasted, want)


def test_spark_engines_and_pasted_script(spark: Any, frame: pl.DataFrame, want: dict) -> None:
    table = user_table(frame)
    load("spark", spark, "clusters", table)
    got = me.evaluate(spark.table("clusters"), CLUSTERING, engine="spark", by=BY,
                      columns=COLUMNS, **PARAMS)
    assert_equal(got, want)
    got = me.evaluate("clusters", CLUSTERING, engine="sql", connection=spark, by=BY,
                      columns=COLUMNS, **PARAMS)
    assert_equal(got, want)
    assert_equal(spark_rows(spark, statement("spark")), want)
