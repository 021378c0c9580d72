"""Regression metrics (mse, rmse, mae, mape, r2) beyond the shared random cases of test_metrics:
worked values, R²'s undefined cases, a zero-weight segment, accuracy on large close targets, the
statistics table on both engines, and the errors a regression request can meet."""

from __future__ import annotations

import math
import re

import duckdb
import numpy as np
import polars as pl
import pytest
from sklearn import metrics as skm

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.engines import polars as plans
from mleval_sql.schema import InputError
from tests.data import make_predictions
from tests.helpers import assert_frames_close

METRICS = ["mse", "rmse", "mae", "mape", "r2"]


def long(truth: np.ndarray, pred: np.ndarray, weight: np.ndarray | None = None,
         labels: tuple[str, ...] = ("y1", "y2"), **segments: list) -> pl.DataFrame:
    """Long rows from (samples x outputs) matrices of truths and predictions."""
    truth, pred = np.atleast_2d(truth.T).T, np.atleast_2d(pred.T).T
    n, k = truth.shape
    data = {"sample": np.repeat(np.arange(n), k), "label": np.tile(labels[:k], n),
            "score": pred.ravel(), "truth": truth.ravel().astype(float)}
    if weight is not None:
        data["weight"] = np.repeat(weight.astype(float), k)
    for name, values in segments.items():
        data[name] = np.repeat(values, k)
    return pl.DataFrame(data)


def values(result: pl.DataFrame, metric: str, average: str | None = None) -> dict:
    """label -> value of ``metric``'s rows with ``average`` (None: per label)."""
    rows = result.filter(pl.col("metric") == metric)
    rows = rows.filter(pl.col("average").is_null() if average is None
                       else pl.col("average") == average)
    return dict(zip(rows["label"].to_list(), rows["value"].to_list(), strict=True))


def close(a: float | None, b: float | None, rel: float = 1e-12) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=rel, abs_tol=1e-15)


# -- worked values --------------------------------------------------------------------------------

def test_scikit_learn_documentation_example(engine):
    # r2_score / mean_squared_error docstrings: [3, -0.5, 2, 7] against [2.5, 0.0, 2, 8]
    data = long(np.array([3, -0.5, 2, 7]), np.array([2.5, 0.0, 2, 8]), labels=("y",))
    got = me.evaluate(data, METRICS, engine=engine)
    assert got.columns == ["metric", "average", "label", "value"]
    want = {"mse": 0.375, "rmse": math.sqrt(0.375), "mae": 0.5,
            "mape": (0.5 / 3 + 0.5 / 0.5 + 0 + 1 / 7) / 4, "r2": 0.9486081370449679}
    for metric, value in want.items():
        assert close(values(got, metric)["y"], value), metric


def test_weighted_two_outputs_and_every_average(engine):
    truth = np.array([[0.5, 1.0], [-1.0, 1.0], [7.0, -6.0], [2.0, 3.0]])
    pred = np.array([[0.0, 2.0], [-1.0, 2.0], [8.0, -5.0], [1.5, 2.5]])
    weight = np.array([1.0, 2.0, 0.5, 0.0])
    got = me.evaluate(long(truth, pred, weight), METRICS, engine=engine,
                      average=["none", "macro"])
    for metric, fn in [("mse", skm.mean_squared_error), ("rmse", skm.root_mean_squared_error),
                       ("mae", skm.mean_absolute_error),
                       ("mape", skm.mean_absolute_percentage_error), ("r2", skm.r2_score)]:
        raw = fn(truth, pred, sample_weight=weight, multioutput="raw_values")
        for label, value in zip(("y1", "y2"), raw, strict=True):
            assert close(values(got, metric)[label], value), (metric, label)
        mean = fn(truth, pred, sample_weight=weight, multioutput="uniform_average")
        assert close(values(got, metric, "macro")[None], mean), metric
    r2 = me.evaluate(long(truth, pred, weight), "r2", engine=engine, average="variance_weighted")
    assert close(r2["value"].item(), skm.r2_score(truth, pred, sample_weight=weight,
                                                  multioutput="variance_weighted"))


def test_rmse_macro_is_the_mean_of_per_output_rmse(engine):
    truth, pred = np.array([[0.0, 0.0], [0.0, 0.0]]), np.array([[1.0, 3.0], [1.0, 3.0]])
    got = me.evaluate(long(truth, pred), "rmse", average="macro", engine=engine)
    assert got["value"].item() == 2.0  # not sqrt((1 + 9) / 2)


def test_mape_of_a_zero_truth_divides_by_float64_eps(engine):
    truth, pred = np.array([0.0, 2.0]), np.array([0.5, 1.0])
    got = me.evaluate(long(truth, pred, labels=("y",)), "mape", engine=engine)
    want = skm.mean_absolute_percentage_error(truth, pred)
    assert want > 1e14 and close(got["value"].item(), want)


# -- undefined values -----------------------------------------------------------------------------

def test_r2_of_a_constant_truth_is_null_and_skipped_by_the_averages(engine):
    truth = np.array([[3.0, 1.0], [3.0, 2.0], [3.0, 4.0]])
    pred = np.array([[2.0, 1.5], [3.0, 2.0], [4.5, 3.0]])
    got = me.evaluate(long(truth, pred), METRICS, engine=engine,
                      average=["none", "macro"])
    assert values(got, "r2")["y1"] is None  # scikit-learn's force_finite=True says 0.0
    y2 = skm.r2_score(truth[:, 1], pred[:, 1])
    assert close(values(got, "r2")["y2"], y2)
    assert close(values(got, "r2", "macro")[None], y2)
    assert close(values(got, "mse")["y1"], skm.mean_squared_error(truth[:, 0], pred[:, 0]))
    weighted = me.evaluate(long(truth, pred), "r2", average="variance_weighted", engine=engine)
    assert close(weighted["value"].item(),
                 skm.r2_score(truth, pred, multioutput="variance_weighted"))


def test_r2_is_null_when_every_output_is_constant_even_with_perfect_predictions(engine):
    truth = np.array([[3.0, 1.0], [3.0, 1.0]])
    got = me.evaluate(long(truth, truth.copy()), "r2", engine=engine,
                      average=["none", "macro", "variance_weighted"])
    assert got["value"].to_list() == [None] * 4  # scikit-learn: 1.0 everywhere


def test_r2_of_a_constant_truth_whose_mean_rounds_off_is_null(engine):
    # 0.1 + 0.1 + 0.1 = 0.30000000000000004: the weighted mean is not 0.1 and numpy finds a
    # variance of ~1e-34, then an R² of about -1e31; the truth is constant, so R² is undefined
    truth, pred = np.full(3, 0.1), np.array([0.2, 0.0, 0.1])
    assert skm.r2_score(truth, pred, force_finite=False) < -1e20
    got = me.evaluate(long(truth, pred, labels=("y",)), "r2", engine=engine)
    assert got["value"].item() is None


def test_zero_weight_rows_do_not_make_a_truth_variable(engine):
    # (a weighted mean that rounds off, so only the constant-truth check makes the sst 0)
    truth, pred = np.array([0.1, 0.1, 0.1, 9.0]), np.array([1.0, 2.5, 0.0, 0.0])
    got = me.evaluate(long(truth, pred, np.array([1.0, 1.0, 1.0, 0.0]), labels=("y",)), "r2",
                      engine=engine)
    assert got["value"].item() is None


def test_a_segment_whose_weights_sum_to_zero_is_null(engine):
    truth = np.array([[1.0, 2.0], [3.0, 5.0], [0.0, 1.0], [2.0, 2.0]])
    pred = truth + 0.5
    data = long(truth, pred, np.array([1.0, 2.0, 0.0, 0.0]), region=["a", "a", "z", "z"])
    got = me.evaluate(data, METRICS, by="region", engine=engine,
                      average=["none", "macro"])
    zero = got.filter(pl.col("region") == "z")
    assert zero.height == len(METRICS) * 3 and zero["value"].null_count() == zero.height
    assert close(values(got.filter(pl.col("region") == "a"), "mae", "macro")[None], 0.5)


def test_a_label_a_segment_lacks_is_null_there(engine):
    data = make_predictions("regression", 11)
    got = me.evaluate(data, ["mse", "r2"], by="region", engine=engine, average="none")
    south = got.filter((pl.col("region") == "south") & (pl.col("label") == "lab1"))
    assert south.height == 2 and south["value"].null_count() == 2


# -- accuracy -------------------------------------------------------------------------------------

def test_r2_of_large_close_targets_keeps_its_digits(engine):
    rng = np.random.default_rng(0)
    truth = 1e6 + rng.normal(0.0, 1e-3, size=(200, 2))
    pred = truth + rng.normal(0.0, 5e-4, size=truth.shape)
    weight = rng.choice([0.5, 1.0, 2.5], size=200)
    w = weight[:, None]
    # the data is hard: the one-pass formula loses every digit of the total sum of squares
    naive_sst = (w * truth**2).sum(axis=0) - (w * truth).sum(axis=0) ** 2 / weight.sum()
    sst = (w * (truth - np.average(truth, axis=0, weights=weight)) ** 2).sum(axis=0)
    assert np.all(np.abs(naive_sst / sst - 1) > 1e-3)

    got = me.evaluate(long(truth, pred, weight), "r2", engine=engine,
                      average=["none", "macro", "variance_weighted"])
    raw = skm.r2_score(truth, pred, sample_weight=weight, multioutput="raw_values")
    assert 0.5 < raw.min() < raw.max() < 0.9
    for label, value in zip(("y1", "y2"), raw, strict=True):
        assert close(values(got, "r2")[label], value, rel=1e-9)
    for average in ("uniform_average", "variance_weighted"):
        want = skm.r2_score(truth, pred, sample_weight=weight, multioutput=average)
        ours = "macro" if average == "uniform_average" else average
        assert close(values(got, "r2", ours)[None], want, rel=1e-9)


# -- the statistics table, where the engines meet --------------------------------------------------

def test_regression_sums_agree_between_engines():
    frame = make_predictions("regression", seed=11)
    predictions = frame.select("sample", "label", "score", "truth", "weight",
                               segment=pl.struct("region", "model"))
    con = duckdb.connect()
    con.register("predictions", predictions)
    from_sql = con.sql(queries.load("regression_sums")).pl().sort("segment", "label")
    from_polars = (plans.regression_sums(predictions.lazy()).collect()
                   .sort("segment", "label").select(from_sql.columns))
    assert from_sql.columns == ["segment", "label", "weight", "mean_truth", "sse", "sae", "sape",
                                "sst", "se"]
    assert from_sql.height > 0
    assert_frames_close(from_sql, from_polars)


def test_regression_sums_of_an_integer_truth_column():
    predictions = pl.DataFrame({"sample": [1, 2, 3], "label": "y", "score": [1.5, 2.0, 2.0],
                                "truth": [1, 2, 4], "weight": [1.0, 1.0, 2.0], "segment": 0})
    con = duckdb.connect()
    con.register("predictions", predictions)
    from_sql = con.sql(queries.load("regression_sums")).pl()
    from_polars = plans.regression_sums(predictions.lazy()).collect()
    for table in (from_sql, from_polars):
        row = table.row(0, named=True)
        assert (row["weight"], row["mean_truth"], row["sse"], row["sst"]) == (4.0, 2.75, 8.25,
                                                                              6.75)


# -- choosing the task and the errors a request can meet ------------------------------------------

def test_regression_metrics_alone_pick_the_regression_task(engine):
    data = make_predictions("regression", 12, complete=True)  # truths outside {0, 1}
    got = me.evaluate(data, ["mse", "r2"], engine=engine)
    explicit = me.evaluate(data, ["mse", "r2"], task="regression", engine=engine)
    assert got.equals(explicit)
    assert got["average"].null_count() == got.height  # per output by default
    assert sorted(got["label"].unique().to_list()) == ["lab0", "lab1"]


@pytest.mark.parametrize(("column", "value"), [("truth", float("nan")), ("truth", float("inf")),
                                               ("score", float("nan")),
                                               ("score", float("-inf"))])
def test_a_non_finite_value_is_a_one_line_error(engine, column, value):
    data = make_predictions("regression", 11, complete=True)
    row = (pl.col("sample") == "s007") & (pl.col("label") == "lab0")
    data = data.with_columns(pl.when(row).then(value)
                             .otherwise(pl.col(column)).alias(column))
    with pytest.raises(InputError, match=f"column '{column}' has 1 NaN or infinite") as error:
        me.evaluate(data, METRICS, engine=engine)
    assert "\n" not in str(error.value)


def test_a_classification_metric_is_not_for_regression(engine):
    data = make_predictions("regression", 11, complete=True)
    with pytest.raises(InputError, match="'f1' is not defined for task 'regression'"):
        me.evaluate(data, ["f1"], task="regression", engine=engine)


def test_a_regression_metric_is_not_for_a_binary_task(engine):
    data = make_predictions("binary", 1)
    with pytest.raises(InputError, match="'mse' is not defined for task 'binary'"):
        me.evaluate(data, ["mse"], task="binary", engine=engine)


def test_variance_weighted_is_for_r2_only(engine):
    data = make_predictions("regression", 11, complete=True)
    with pytest.raises(InputError, match="'mse' has no average 'variance_weighted'"):
        me.evaluate(data, ["mse"], average="variance_weighted", engine=engine)
    with pytest.raises(InputError, match="'mape' has no average 'macro_std'"):
        me.evaluate(data, ["mape"], average="macro_std", engine=engine)


def test_targets_outside_0_1_are_not_taken_for_regression_by_a_classification_metric():
    # the truth of a classification task must lie in {0, 1}: 2.5 there is no new task
    data = make_predictions("regression", 11)
    with pytest.raises(InputError, match=re.escape("outside {0, 1}")):
        me.evaluate(data, ["f1"])
