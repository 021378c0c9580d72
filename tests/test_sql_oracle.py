"""The statements ``me.sql`` prints, pasted into ``psql`` and ``spark.sql``, held to
scikit-learn directly (tests/oracle.py): every metric of each task, on the generated data
(ties, zero weights, a one-class and a one-sample segment, a null segment, an integer segment
column) with integer, text and boolean labels and non-default parameters. Spark runs on a
session with Spark's defaults (code generation and adaptive execution on), the script form
statement by statement."""

from __future__ import annotations

import os
from typing import Any

import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.params import DEFAULTS
from tests.data import make_predictions
from tests.helpers import assert_same_rows
from tests.oracle import expected
from tests.servers import Postgres
from tests.test_portable import _groups, load
from tests.test_statement import psql_rows, spark_rows

BY = ["region", "model"]
#: Not the defaults: each changes some metric's value.
PARAMS: dict[str, Any] = {"threshold": 0.3, "beta": 2.0, "k": 2, "max_fpr": 0.8,
                          "zero_division": 0.0}
ORACLE_PARAMS = {**{k: v for k, v in DEFAULTS.items() if k not in ("kind", "drop_intermediate")},
                 **PARAMS}
CASES = [("binary", "text"), ("binary", "int"), ("multiclass", "text"), ("multiclass", "int"),
         ("multilabel", "text"), ("multilabel", "int"), ("multilabel", "bool"),
         ("regression", "int")]
#: Every task's script in Spark takes minutes on a 2-core machine; CI pastes the multiclass
#: one (the largest, and the one that ran a default session out of memory as one statement),
#: MLEVAL_SPARK_EVERY_TASK=1 every task's.
SPARK_TASKS = ("binary", "multiclass", "multilabel", "regression") \
    if os.environ.get("MLEVAL_SPARK_EVERY_TASK") else ("multiclass",)


def dataset(task: str, labels: str) -> pl.DataFrame:
    """The generated predictions with ``labels`` of that type, segment "single" null and the
    model column as integers."""
    frame = make_predictions(task, seed=21, n_samples=40, int_ids=labels == "int")  # type: ignore[arg-type]
    if labels == "bool":  # two labels: True and False
        first, second = sorted(frame["label"].unique())[:2]
        frame = frame.filter(pl.col("label").is_in([first, second])) \
            .with_columns(pl.col("label") == first)
    return frame.with_columns(
        region=pl.when(pl.col("region") != "single").then(pl.col("region")),
        model=pl.col("model").str.slice(1).cast(pl.Int32))


def oracle_rows(frame: pl.DataFrame, task: str, metrics: list[str],
                got: pl.DataFrame) -> pl.DataFrame:
    """scikit-learn's rows of ``metrics`` for the averages the statement gave."""
    if frame.schema["label"] == pl.Boolean:  # the oracle's columns are named after labels
        frame = frame.with_columns(pl.col("label").cast(pl.String))  # false < true, as bools
    parts = []
    for metric in metrics:
        rows = got.filter(pl.col("metric") == metric)
        averages = tuple(sorted({a or "none" for a in rows["average"].to_list()}))
        parts.append(expected(frame, task, metric, averages, BY, ORACLE_PARAMS))
    return pl.concat(parts, how="diagonal_relaxed")


def check(frame: pl.DataFrame, task: str, run: Any, dialect: str, table: str) -> None:
    params = {k: v for k, v in PARAMS.items() if task != "regression"}
    for averages, metrics in _groups(task).items():
        statement = me.sql(metrics, task=task, dialect=dialect, table=table, by=BY,
                           columns={"weight": "weight", "label": "label"},
                           average=list(averages) or None, **params)
        got = run(statement)
        assert got.height > 0, (dialect, metrics)
        want = oracle_rows(frame, task, metrics, got)
        assert_same_rows(got, want, BY)


@pytest.mark.parametrize(("task", "labels"), CASES)
def test_psql_equals_scikit_learn(postgres: Postgres, pg_connection: Any, task: str,
                                  labels: str) -> None:
    frame = dataset(task, labels)
    load("postgres", pg_connection, f"oracle_{task}_{labels}", frame)

    def run(statement: str) -> pl.DataFrame:
        rows = psql_rows(postgres, statement)
        if labels == "bool":  # psql writes a boolean as t or f
            rows = rows.with_columns(pl.col("label").replace({"t": "true", "f": "false"}))
        return rows
    check(frame, task, run, "postgres", f"oracle_{task}_{labels}")


@pytest.mark.parametrize("task", SPARK_TASKS)
def test_spark_sql_equals_scikit_learn(spark_defaults: Any, task: str) -> None:
    frame = dataset(task, "int")
    load("spark", spark_defaults, f"oracle_{task}", frame)
    check(frame, task, lambda s: spark_rows(spark_defaults, s), "spark", f"oracle_{task}")
