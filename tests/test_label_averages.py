"""label_averages, the one step that puts every label in every segment and averages over labels
for the decision, ranking, probability and calibration families: its SQL, run as-is on DuckDB,
and its polars plan give the hand-worked rows."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

from mleval_sql import queries
from mleval_sql.engines import polars as plans
from tests.helpers import assert_same_rows

_NO = None
#: segment, metric, average, label, value, support: segment 0 has a label without a value,
#: segment 1 lacks label b, segment 2's labels have no support, segment 3's weights are 1e300
LABEL_VALUES = pl.DataFrame([
    (0, "f1", _NO, "a", 0.5, 1.0), (0, "f1", _NO, "b", _NO, 3.0),
    (0, "f1", "micro", _NO, 0.7, 4.0), (0, "hamming_loss", _NO, _NO, 0.1, _NO),
    (1, "f1", _NO, "a", 1.0, 2.0), (1, "f1", "micro", _NO, 0.9, 2.0),
    (1, "hamming_loss", _NO, _NO, 0.2, _NO),
    (2, "f1", _NO, "a", 0.2, 0.0), (2, "f1", _NO, "b", 0.4, 0.0),
    (3, "f1", _NO, "a", 1e300, 1e300), (3, "f1", _NO, "b", 3e300, 3e300),
], schema={"segment": pl.Int64, "metric": pl.String, "average": pl.String,
           "label": pl.String, "value": pl.Float64, "support": pl.Float64}, orient="row")

#: segment, metric, average, label, value: the rows given as they are (missing ones null), and
#: macro / weighted (by support; macro when no label with a value has any) / macro_std of f1
WANT = pl.DataFrame([
    (0, "f1", _NO, "a", 0.5), (0, "f1", _NO, "b", _NO), (0, "f1", "micro", _NO, 0.7),
    (0, "hamming_loss", _NO, _NO, 0.1),
    (0, "f1", "macro", _NO, 0.5), (0, "f1", "weighted", _NO, 0.5),
    (0, "f1", "macro_std", _NO, 0.0),
    (1, "f1", _NO, "a", 1.0), (1, "f1", _NO, "b", _NO), (1, "f1", "micro", _NO, 0.9),
    (1, "hamming_loss", _NO, _NO, 0.2),
    (1, "f1", "macro", _NO, 1.0), (1, "f1", "weighted", _NO, 1.0),
    (1, "f1", "macro_std", _NO, 0.0),
    (2, "f1", _NO, "a", 0.2), (2, "f1", _NO, "b", 0.4), (2, "f1", "micro", _NO, _NO),
    (2, "hamming_loss", _NO, _NO, _NO),
    (2, "f1", "macro", _NO, 0.3), (2, "f1", "weighted", _NO, 0.3),
    (2, "f1", "macro_std", _NO, 0.1),
    (3, "f1", _NO, "a", 1e300), (3, "f1", _NO, "b", 3e300), (3, "f1", "micro", _NO, _NO),
    (3, "hamming_loss", _NO, _NO, _NO),
    (3, "f1", "macro", _NO, 2e300), (3, "f1", "weighted", _NO, 2.5e300),
    (3, "f1", "macro_std", _NO, 1e300),
], schema={"segment": pl.Int64, "metric": pl.String, "average": pl.String,
           "label": pl.String, "value": pl.Float64}, orient="row")


def _sql(label_values: pl.DataFrame) -> pl.DataFrame:
    con = duckdb.connect()
    con.register("label_values", label_values)
    return con.sql(queries.load("label_averages")).pl()


def _polars(label_values: pl.DataFrame) -> pl.DataFrame:
    return plans.label_averages(label_values.lazy()).collect()


@pytest.mark.parametrize("run", [_sql, _polars], ids=["sql", "polars"])
def test_label_averages_gives_the_grid_and_the_averages(run):
    assert_same_rows(run(LABEL_VALUES), WANT, ["segment"])
