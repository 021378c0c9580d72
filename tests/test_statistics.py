"""The statistics tables, where the two engines meet: each statistics step's SQL, run as-is on a
DuckDB view named ``predictions``, equals the polars plan of the same name."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from mleval_sql import queries
from mleval_sql.engines import polars as plans
from mleval_sql.registry import STEPS
from tests.data import make_predictions
from tests.helpers import assert_frames_close

PARAMS = {"threshold": 0.5, "bins": None}
KEYS = {"confusion_counts": ["segment", "label"],
        "confusion_matrix": ["segment", "truth_label", "predicted_label"],
        "sample_counts": ["segment", "sample"], "true_ranks": ["segment", "sample"],
        "curve_points": ["segment", "label", "threshold"]}


def _predictions(task: str) -> pl.DataFrame:
    frame = make_predictions(task, seed=11)
    return frame.select("sample", "label", "score", "truth", "weight",
                        segment=pl.struct("region", "model"))


def _chains():
    yield pytest.param("binary", ["threshold_counts"], id="threshold_counts")
    yield pytest.param("multiclass", ["argmax_matrix", "matrix_counts"], id="matrix_counts")
    yield pytest.param("multiclass", ["argmax_matrix"], id="argmax_matrix")
    yield pytest.param("multiclass", ["true_ranks"], id="true_ranks")
    yield pytest.param("multilabel", ["sample_counts"], id="sample_counts")
    yield pytest.param("multilabel", ["ranked_points"], id="ranked_points")
    yield pytest.param("binary", ["ranked_points", "curve_counts"], id="curve_counts")


@pytest.mark.parametrize(("task", "chain"), list(_chains()))
def test_statistics_agree_between_engines(task, chain):
    predictions = _predictions(task)
    con = duckdb.connect()
    relations = {"predictions": predictions.lazy()}
    con.register("predictions", predictions)
    for name in chain:
        step = STEPS[name]
        sql = queries.load(name)
        con.execute(f"CREATE TABLE {step.gives} AS {sql}",
                    {p: PARAMS[p] for p in queries.parameters(sql)})
        relations[step.gives] = getattr(plans, name)(
            *(relations[r] for r in step.reads), **{p: PARAMS[p] for p in step.params})
    table = STEPS[chain[-1]].gives
    keys = KEYS[table]
    from_sql = con.sql(f"SELECT * FROM {table}").pl().sort(keys)
    from_polars = relations[table].collect().sort(keys)
    assert from_sql.height > 0
    assert_frames_close(from_sql, from_polars.select(from_sql.columns))


@pytest.mark.parametrize("threshold", [0.5, 0.45, 0.0, 2.0])
@pytest.mark.parametrize("task", ["binary", "multilabel"])
def test_counts_read_off_the_curve_equal_counts_of_their_own(task, threshold):
    # a request for ranking and decision metrics reads its confusion counts off the curve
    predictions = _predictions(task)
    con = duckdb.connect()
    con.register("predictions", predictions)
    con.execute(f"CREATE TABLE curve_points AS {queries.load('ranked_points')}", {"bins": None})
    at = {"threshold": threshold}
    fused = con.sql(queries.load("curve_counts"), params=at).pl().sort("segment", "label")
    own = con.sql(queries.load("threshold_counts"), params=at).pl().sort("segment", "label")
    assert fused.height == own.height > 0
    assert_frames_close(fused, own)
