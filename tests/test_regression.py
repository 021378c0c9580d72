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
#: the regression steps' parameters, not at their defaults
PARAMS = {"pinball_alpha": 0.3, "power": 1.5}


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
    for step in ("regression_sums", "regression_quantiles"):
        from_sql = con.sql(queries.load(step), params={
            p: PARAMS[p] for p in queries.parameters(queries.load(step))}).pl().sort(
            "segment", "label")
        from_polars = (getattr(plans, step)(predictions.lazy(), **{
            p: PARAMS[p] for p in queries.parameters(queries.load(step))}).collect()
            .sort("segment", "label").select(from_sql.columns))
        assert from_sql.height > 0
        assert_frames_close(from_sql, from_polars)
    assert from_sql.columns == ["segment", "label", "median_error", "truth_median",
                                "truth_quantile", "median_loss", "quantile_loss"]


def test_regression_sums_of_an_integer_truth_column():
    predictions = pl.DataFrame({"sample": [1, 2, 3], "label": "y", "score": [1.5, 2.0, 2.0],
                                "truth": [1, 2, 4], "weight": [1.0, 1.0, 2.0], "segment": 0})
    con = duckdb.connect()
    con.register("predictions", predictions)
    from_sql = con.sql(queries.load("regression_sums"), params=PARAMS).pl()
    from_polars = plans.regression_sums(predictions.lazy(), **PARAMS).collect()
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


# -- scikit-learn 1.9's other regression metrics ------------------------------------------------

#: scikit-learn's docstring examples: (y_true, y_pred, metric, parameters, its printed value)
DOCSTRINGS = [
    ([3, -0.5, 2, 7], [2.5, 0.0, 2, 8], "explained_variance", {}, 0.957),
    ([3, 2, 7, 1], [4, 2, 7, 1], "max_error", {}, 1.0),
    ([3, -0.5, 2, 7], [2.5, 0.0, 2, 8], "median_absolute_error", {}, 0.5),
    ([3, 5, 2.5, 7], [2.5, 5, 4, 8], "mean_squared_log_error", {}, 0.039),
    ([3, 5, 2.5, 7], [2.5, 5, 4, 8], "root_mean_squared_log_error", {}, 0.199),
    ([1, 2, 3], [0, 2, 3], "mean_pinball_loss", {"pinball_alpha": 0.1}, 0.03),
    ([1, 2, 3], [1, 2, 4], "mean_pinball_loss", {"pinball_alpha": 0.1}, 0.3),
    ([1, 2, 3], [0, 2, 3], "mean_pinball_loss", {"pinball_alpha": 0.9}, 0.3),
    ([1, 2, 3], [1, 2, 4], "mean_pinball_loss", {"pinball_alpha": 0.9}, 0.03),
    ([2, 0, 1, 4], [0.5, 0.5, 2.0, 2.0], "mean_poisson_deviance", {}, 1.4260),
    ([2, 0.5, 1, 4], [0.5, 0.5, 2.0, 2.0], "mean_gamma_deviance", {}, 1.0568),
    ([2, 0, 1, 4], [0.5, 0.5, 2.0, 2.0], "mean_tweedie_deviance", {"power": 1}, 1.4260),
    ([3, -0.5, 2, 7], [2.5, 0.0, 2, 8], "d2_absolute_error", {}, 0.764),
    ([1, 2, 3], [1, 3, 3], "d2_pinball", {}, 0.5),
    ([1, 2, 3], [1, 3, 3], "d2_pinball", {"pinball_alpha": 0.9}, 0.666),
    ([1, 2, 3], [1, 3, 3], "d2_pinball", {"pinball_alpha": 0.1}, -1.999),
    ([1, 2, 3], [1, 2, 3], "d2_absolute_error", {}, 1.0),
    ([1, 2, 3], [2, 2, 2], "d2_absolute_error", {}, 0.0),
    ([0.5, 1, 2.5, 7], [1, 1, 5, 3.5], "d2_tweedie", {}, 0.285),
    ([0.5, 1, 2.5, 7], [1, 1, 5, 3.5], "d2_tweedie", {"power": 1}, 0.487),
    ([0.5, 1, 2.5, 7], [1, 1, 5, 3.5], "d2_tweedie", {"power": 2}, 0.630),
]


@pytest.mark.parametrize(("truth", "pred", "metric", "params", "value"), DOCSTRINGS,
                         ids=[f"{d[2]}-{i}" for i, d in enumerate(DOCSTRINGS)])
def test_scikit_learn_docstring_examples(engine, truth, pred, metric, params, value):
    data = long(np.array(truth, dtype=float), np.array(pred, dtype=float), labels=("y",))
    got = me.evaluate(data, metric, engine=engine, **params)["value"].item()
    digits = len(repr(value).split(".")[1])  # as printed there: 0.039... holds 0.039
    assert math.trunc(got * 10**digits) / 10**digits == pytest.approx(value) \
        or round(got, digits) == pytest.approx(value), got


def test_multioutput_docstring_examples(engine):
    truth = np.array([[0.5, 1], [1, 2], [7, 6]])
    pred = np.array([[0.5, 2], [1, 2.5], [8, 8]])
    got = me.evaluate(long(truth, pred), "mean_squared_log_error", engine=engine,
                      average=["none", "macro"])
    assert [round(v, 8) for v in values(got, "mean_squared_log_error").values()] == \
        [0.00462428, 0.08377444]
    assert math.trunc(values(got, "mean_squared_log_error", "macro")[None] * 1e3) == 44
    truth = np.array([[0.5, 1], [-1, 1], [7, -6]])
    pred = np.array([[0, 2], [-1, 2], [8, -5]])
    got = me.evaluate(long(truth, pred), ["median_absolute_error", "d2_absolute_error"],
                      engine=engine, average=["none", "macro"])
    assert list(values(got, "median_absolute_error").values()) == [0.5, 1.0]
    assert values(got, "median_absolute_error", "macro")[None] == 0.75
    d2 = skm.d2_absolute_error_score(truth, pred, multioutput="raw_values")
    assert [round(v, 8) for v in d2] == [0.8125, 0.57142857]  # the docstring's raw values
    assert all(close(a, b) for a, b in zip(values(got, "d2_absolute_error").values(), d2,
                                           strict=True))
    assert math.trunc(values(got, "d2_absolute_error", "macro")[None] * 1e3) == 691  # 0.691...
    got = me.evaluate(long(truth, pred), "explained_variance", engine=engine, average="macro")
    assert math.trunc(got["value"].item() * 1e3) == 983  # 0.983...


def test_weighted_median_is_scikit_learns_averaged_inverted_cdf(engine):
    # weights splitting evenly at a value: the mean of it and the next; ties; zero weights
    rng = np.random.default_rng(3)
    for _ in range(20):
        n = int(rng.integers(1, 12))
        truth = rng.integers(0, 5, size=n).astype(float)
        pred = rng.integers(0, 5, size=n).astype(float)
        weight = rng.choice([0.0, 0.5, 1.0, 2.0], size=n)
        weight[0] = 1.0
        got = me.evaluate(long(truth, pred, weight, labels=("y",)), "median_absolute_error",
                          engine=engine)["value"].item()
        assert got == skm.median_absolute_error(truth, pred, sample_weight=weight)
        unweighted = me.evaluate(long(truth, pred, labels=("y",)), "median_absolute_error",
                                 engine=engine)["value"].item()
        assert unweighted == skm.median_absolute_error(truth, pred)  # np.median


@pytest.mark.parametrize(("metric", "params", "truth", "pred", "message"), [
    ("mean_squared_log_error", {}, [-1.0, 2.0], [1.0, 2.0], "'truth' > -1 .* down to -1"),
    ("root_mean_squared_log_error", {}, [1.0, 2.0], [1.0, -3.0], "'score' > -1 .* down to -3"),
    ("mean_poisson_deviance", {}, [-0.5, 2.0], [1.0, 2.0],
     "'truth' >= 0 .* down to -0.5, e.g. -0.5 at sample 0, label 'y'"),
    ("mean_poisson_deviance", {}, [0.0, 2.0], [0.0, 2.0], "'score' > 0 .* down to 0"),
    ("mean_gamma_deviance", {}, [0.0, 2.0], [1.0, 2.0], "'truth' > 0 .* down to 0"),
    ("mean_tweedie_deviance", {"power": 3}, [0.0, 2.0], [1.0, 2.0],
     "with power=3 needs column 'truth' > 0"),
    ("d2_tweedie", {"power": -1}, [-5.0, 2.0], [0.0, 2.0],
     "with power=-1 needs column 'score' > 0"),
])
def test_values_outside_a_loss_domain_are_one_line_errors(engine, metric, params, truth, pred,
                                                            message):
    data = long(np.array(truth), np.array(pred), labels=("y",))
    with pytest.raises(InputError, match=f"^{metric}.*{message}") as error:
        me.evaluate(data, metric, engine=engine, **params)
    assert "\n" not in str(error.value)


def test_a_power_of_the_extreme_stable_kind_reads_negative_truths(engine):
    truth, pred = np.array([-1.0, 2.0, 0.5]), np.array([0.5, 1.5, 1.0])
    got = me.evaluate(long(truth, pred, labels=("y",)), "mean_tweedie_deviance", power=-1.0,
                      engine=engine)
    assert close(got["value"].item(), skm.mean_tweedie_deviance(truth, pred, power=-1.0))
    assert got["power"].item() == -1.0


@pytest.mark.parametrize(("name", "value"), [("power", 0.5), ("pinball_alpha", 0.0),
                                              ("pinball_alpha", 1.0)])
def test_parameters_outside_scikit_learns_domain_are_refused(name, value):
    data = long(np.array([1.0, 2.0]), np.array([1.0, 2.5]), labels=("y",))
    with pytest.raises(InputError, match=f"^{name} must"):
        me.evaluate(data, "mean_tweedie_deviance", **{name: value})


def test_a_constant_truth_leaves_the_d2_scores_undefined(engine):
    truth, pred = np.array([[2.0, 1.0], [2.0, 3.0]]), np.array([[1.5, 1.0], [2.5, 2.0]])
    names = ["explained_variance", "d2_absolute_error", "d2_pinball", "d2_tweedie"]
    got = me.evaluate(long(truth, pred), names, engine=engine, average=["none", "macro"])
    for name in names:
        assert values(got, name)["y1"] is None  # scikit-learn's force_finite: 0.0
        assert values(got, name, "macro")[None] == values(got, name)["y2"]


NEW = ["median_absolute_error", "mean_pinball_loss", "d2_absolute_error", "explained_variance",
       "mean_poisson_deviance", "d2_tweedie"]


def test_the_new_metrics_take_intervals_and_windows():
    """Intervals of the quantile and deviance metrics are the same on both engines (the same
    draws) and hold the value; a day's window equals the metrics of that day's rows alone."""
    frame = make_predictions("regression", 5, n_samples=60, complete=True)
    options = {"by": "region", "ci": 0.9, "resamples": 30, "seed": 1, "power": 1.5}
    got = [me.evaluate(frame, NEW, engine=e, **options) for e in ("polars", "duckdb")]
    assert_frames_close(got[0], got[1])
    bounded = got[0].filter(pl.col("ci_low").is_not_null())
    assert set(bounded["metric"]) == set(NEW)
    assert ((bounded["ci_low"] <= bounded["value"] + 1e-12)
            & (bounded["value"] <= bounded["ci_high"] + 1e-12)).all()
    days = frame.select("sample").unique(maintain_order=True).with_columns(
        day=pl.date(2026, 11, 1) + pl.duration(days=pl.int_range(pl.len()) % 3))
    dated = frame.join(days, on="sample")
    windows = me.evaluate(dated, NEW, window="day:1d", power=1.5)
    first = windows.filter(pl.col("window_start") == pl.date(2026, 11, 1)).drop(
        "granularity", "window_start", "window_end")
    alone = me.evaluate(dated.filter(pl.col("day") == pl.date(2026, 11, 1)).drop("day"), NEW,
                        power=1.5)
    assert_frames_close(first, alone)
