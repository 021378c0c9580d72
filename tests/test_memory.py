"""A memory budget changes nothing but memory: both engines give the same numbers with it, and a
user's DuckDB connection gets its settings back."""

from __future__ import annotations

import duckdb
import pytest

import mleval_sql as me
from tests.data import make_predictions
from tests.helpers import assert_same_rows

METRICS = ["roc_auc", "average_precision", "f1", "precision"]


@pytest.fixture(scope="module")
def frame():
    return make_predictions("multilabel", seed=21, n_samples=2_000)


def test_a_memory_budget_gives_the_same_numbers(engine, frame):
    free = me.evaluate(frame, METRICS, by="region", task="multilabel", engine=engine)
    bounded = me.evaluate(frame, METRICS, by="region", task="multilabel", engine=engine,
                          memory_limit="200MB")
    assert_same_rows(bounded, free, ["region"], rel=1e-12)


def test_a_users_connection_keeps_its_settings(frame):
    con = duckdb.connect()
    con.execute("SET memory_limit = '3GB'")
    settings = ("SELECT current_setting('memory_limit'), "
                "current_setting('preserve_insertion_order'), current_setting('temp_directory')")
    before = con.execute(settings).fetchall()
    con.register("mine", frame)
    me.evaluate(con.table("mine"), METRICS, by="region", task="multilabel", connection=con)
    with pytest.raises(me.InputError, match="SET memory_limit"):
        me.evaluate(con.table("mine"), METRICS, by="region", task="multilabel",
                    memory_limit="200MB", connection=con)
    assert con.execute(settings).fetchall() == before
