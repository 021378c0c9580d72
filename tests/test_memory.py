"""A memory budget changes nothing but memory: both engines give the same numbers with it (they
then evaluate a batch of segments at a time: a segment alone, or many selected by a semi-join),
and a user's DuckDB connection gets its settings back."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.registry import METRICS as REGISTRY
from tests.data import make_predictions
from tests.helpers import assert_frames_close, assert_same_rows

METRICS = ["roc_auc", "average_precision", "f1", "precision"]


#: The memory a row is taken to cost, so that a 200MB budget holds no row (every segment a
#: batch of its own, larger than the budget: polars streams it), 200 rows (batches of a few
#: segments, selected by a semi-join) or 4000 (batches by value, read into memory).
BATCHING = {"a segment a batch": (10**9, None), "batches by semi-join": (10**6, 0),
            "batches in memory": (50_000, None)}


@pytest.fixture(autouse=True, params=list(BATCHING))
def batching(request, monkeypatch):
    """Batches small enough for the test data to take several."""
    row_bytes, few = BATCHING[request.param]
    monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", row_bytes)
    if few is not None:
        monkeypatch.setattr("mleval_sql.engines.segments.FEW_SEGMENTS", few)


@pytest.fixture(scope="module")
def frame():
    return make_predictions("multilabel", seed=21, n_samples=2_000)


def test_a_memory_budget_gives_the_same_numbers(engine, frame):
    free = me.evaluate(frame, METRICS, by="region", task="multilabel", engine=engine)
    bounded = me.evaluate(frame, METRICS, by="region", task="multilabel", engine=engine,
                          memory_limit="200MB")
    assert_same_rows(bounded, free, ["region"], rel=1e-12)


@pytest.mark.parametrize("task", ["binary", "multilabel", "multiclass", "regression"])
def test_a_budget_changes_no_metric(engine, task):
    """Every metric of the task, per label and averaged, over segments of which one lacks a
    label and one holds a single sample; segments by two columns (a struct key)."""
    data = make_predictions(task, seed=5, n_samples=200)
    names = [m for m, metric in REGISTRY.items() if task in metric.families]
    options = dict(by=["region", "model"], task=task, engine=engine)
    free = me.evaluate(data, names, **options)
    bounded = me.evaluate(data, names, memory_limit="200MB", **options)
    assert_same_rows(bounded, free, ["region", "model"], rel=1e-12)
    if task == "binary":  # one label: none to lack
        return
    per_label = me.evaluate(data, ["roc_auc" if task != "regression" else "mse"], average="none",
                            memory_limit="200MB", **options)
    lacking = per_label.filter(region="south", label=per_label["label"].max())
    assert lacking.height and lacking["value"].is_null().all()


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


def test_a_budget_reads_a_lake_one_partition_at_a_time(engine, frame, tmp_path):
    """Segments are filtered on the source's own columns: awkward names, a null segment value
    and hive partition keys give the same numbers with a budget as without."""
    awkward = 'my "region"'
    data = frame.with_columns(pl.when(pl.col("region") == "north").then(None)
                              .otherwise(pl.col("region")).alias(awkward)).drop("region")
    data.write_parquet(tmp_path, partition_by=["model"])
    options = dict(by=["model", awkward], task="multilabel", engine=engine, average="none")
    free = me.evaluate(str(tmp_path), METRICS, **options)
    bounded = me.evaluate(str(tmp_path), METRICS, memory_limit="200MB", **options)
    assert free[awkward].null_count() > 0
    assert_same_rows(bounded, free, ["model", awkward], rel=1e-12)


@pytest.mark.parametrize("by", [["region"], ["region", "model"]])
@pytest.mark.parametrize("task", ["binary", "multilabel", "multiclass", "regression"])
def test_held_rows_evaluated_in_batches_change_no_metric(task, by, monkeypatch):
    """Without a budget polars holds the rows and evaluates batches of whole segments, slices
    of the rows ordered by segment (sorted first, as here, where a segment's rows are apart):
    every metric and curve equal to those of one batch, with a null segment, a segment by two
    columns, weighted and not."""
    data = (make_predictions(task, seed=8, n_samples=200)
            .with_columns(region=pl.when(pl.col("region") != "one_class")
                          .then(pl.col("region")))  # a segment of nulls
            .sample(fraction=1.0, shuffle=True, seed=3))
    names = [m for m, metric in REGISTRY.items() if task in metric.families]
    for weighted in (True, False):
        options = dict(by=by, task=task, engine="polars",
                       columns=None if weighted else {"weight": None})
        monkeypatch.setattr("mleval_sql.engines.polars.collect.HELD_BATCH_ROWS", 10**9)
        whole = me.evaluate(data, names, **options)
        curves = [] if task == "regression" else [me.curve(data, kind, by=by, engine="polars")
                                                  for kind in ("roc", "pr")]
        monkeypatch.setattr("mleval_sql.engines.polars.collect.HELD_BATCH_ROWS", 150)
        assert_same_rows(me.evaluate(data, names, **options), whole, by, rel=1e-12)
        for kind, curve in zip(("roc", "pr"), curves, strict=False):
            keys = [*by, "label", "threshold"]
            assert_frames_close(me.curve(data, kind, by=by, engine="polars").sort(keys),
                                curve.sort(keys))
