"""Log loss, Brier score, expected calibration error and the reliability table, on both engines.

tests/test_metrics.py holds every metric to its oracle on the shared random data; here: the
cases that data cannot show (normalised multiclass probabilities, probabilities of exactly 0 and
1, bin edges), the reliability table against scikit-learn's calibration_curve, the statistics
tables of both engines, and bad scores.
"""

from __future__ import annotations

import math
import sys

import duckdb
import numpy as np
import polars as pl
import pytest
import sqlglot
from sklearn.calibration import calibration_curve
from sklearn.metrics import brier_score_loss, log_loss

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.api import curve
from mleval_sql.engines import polars as plans
from mleval_sql.registry import STEPS
from mleval_sql.statement import statements
from tests.data import make_predictions
from tests.helpers import (
    assert_frames_close,
    assert_same_rows,
    assert_standalone_equals_oracle,
    statement_options,
)
from tests.oracle_probability import expected_calibration_error
from tests.test_metrics import DEFAULT_PARAMS

CLASSES = ("ant", "bee", "cat", "dog")


def _long(score: np.ndarray, truth: np.ndarray, weight: np.ndarray | None = None,
          labels: tuple = CLASSES) -> pl.DataFrame:
    """samples x labels matrices -> long rows."""
    n, k = score.shape
    frame = pl.DataFrame({
        "sample": np.repeat(np.arange(n), k),
        "label": np.tile(np.asarray(labels[:k]), n),
        "score": score.ravel(),
        "truth": truth.ravel().astype(bool),
    })
    return frame if weight is None else frame.with_columns(weight=np.repeat(weight, k))


def _value(frame: pl.DataFrame, metric: str, **filters: object) -> float | None:
    rows = frame.filter(pl.col("metric") == metric)
    for column, value in filters.items():
        rows = rows.filter(pl.col(column).is_null() if value is None else pl.col(column) == value)
    assert rows.height == 1, rows
    return rows["value"].item()


def _multiclass_data(seed: int, n: int = 200, k: int = 4) -> tuple[np.ndarray, ...]:
    rng = np.random.default_rng(seed)
    score = rng.dirichlet(np.ones(k), size=n)  # rows sum to 1
    true = rng.integers(k, size=n)
    weight = rng.choice([0.0, 0.5, 1.0, 3.0], size=n)
    return score, np.eye(k, dtype=bool)[true], weight, np.asarray(CLASSES[:k])[true]


# -- log loss and Brier score ------------------------------------------------------------------

def test_multiclass_normalised_probabilities_equal_scikit_learn(engine):
    score, onehot, weight, y = _multiclass_data(seed=1)
    got = me.evaluate(_long(score, onehot, weight), ["log_loss", "brier_score"],
                      task="multiclass", engine=engine)
    assert got["average"].is_null().all() and got["label"].is_null().all()
    assert math.isclose(_value(got, "log_loss"),
                        log_loss(y, score, sample_weight=weight, labels=CLASSES),
                        rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(_value(got, "brier_score"),
                        brier_score_loss(y, score, sample_weight=weight, labels=CLASSES),
                        rel_tol=1e-12, abs_tol=1e-15)


def test_multiclass_rows_not_summing_to_one_score_the_true_class_as_given(engine):
    score = np.array([[0.2, 0.2, 0.2], [0.5, 0.9, 0.4], [0.1, 0.1, 0.6]])
    onehot = np.eye(3, dtype=bool)[[0, 1, 2]]
    weight = np.array([1.0, 2.0, 0.5])
    got = me.evaluate(_long(score, onehot, weight), ["log_loss", "brier_score"],
                      task="multiclass", engine=engine)
    log = -(1.0 * np.log(0.2) + 2.0 * np.log(0.9) + 0.5 * np.log(0.6)) / 3.5
    brier = (1.0 * (0.8**2 + 0.2**2 + 0.2**2) + 2.0 * (0.5**2 + 0.1**2 + 0.4**2)
             + 0.5 * (0.1**2 + 0.1**2 + 0.4**2)) / 3.5
    assert math.isclose(_value(got, "log_loss"), log, rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(_value(got, "brier_score"), brier, rel_tol=1e-12, abs_tol=1e-15)


def test_multiclass_brier_is_summed_over_classes_even_with_two(engine):
    # scikit-learn's scale_by_half="auto" would halve with 2 classes; ours never halves
    score = np.array([[0.7, 0.3], [0.4, 0.6]])
    onehot = np.eye(2, dtype=bool)[[0, 0]]
    got = me.evaluate(_long(score, onehot), "brier_score", task="multiclass", engine=engine)
    want = brier_score_loss(["ant", "ant"], score, labels=CLASSES[:2], scale_by_half=False)
    assert math.isclose(_value(got, "brier_score"), want, rel_tol=1e-12, abs_tol=1e-15)
    assert math.isclose(want, (0.09 * 2 + 0.36 * 2) / 2)


@pytest.mark.parametrize("task", ["binary", "multiclass"])
def test_certain_and_wrong_gives_the_clipped_finite_loss(engine, task):
    if task == "binary":  # a positive scored 0 and a negative scored 1
        frame = pl.DataFrame({"sample": [1, 2, 3], "label": "x", "score": [0.0, 1.0, 1.0],
                              "truth": [True, False, True]})
        want = log_loss([1, 0, 1], [0.0, 1.0, 1.0], labels=[0, 1])
    else:  # true class scored 0
        score = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
        frame = _long(score, np.eye(3, dtype=bool)[[0, 0]])
        want = log_loss(["ant", "ant"], score, labels=CLASSES[:3])
    got = _value(me.evaluate(frame, "log_loss", task=task, engine=engine, average="none"),
                 "log_loss")
    assert math.isfinite(got)
    assert math.isclose(got, want, rel_tol=1e-12, abs_tol=1e-15)
    eps = sys.float_info.epsilon
    wrong, right = -math.log(eps), -math.log(1 - eps)
    by_hand = (2 * wrong + right) / 3 if task == "binary" else (wrong + right) / 2
    assert math.isclose(got, by_hand, rel_tol=1e-12, abs_tol=1e-15)


def test_multilabel_per_label_micro_and_weighted(engine):
    rng = np.random.default_rng(5)
    score = rng.random((60, 3))
    truth = rng.random((60, 3)) < 0.3
    weight = rng.choice([0.0, 1.0, 2.0], size=60)
    got = me.evaluate(_long(score, truth, weight), ["log_loss", "brier_score"],
                      task="multilabel", engine=engine,
                      average=["none", "micro", "macro", "weighted", "macro_std"])
    for metric, fn in (("log_loss", log_loss), ("brier_score", brier_score_loss)):
        extra = {"labels": [False, True]} if metric == "log_loss" else {}
        per = [fn(truth[:, j], score[:, j], sample_weight=weight, **extra) for j in range(3)]
        support = [weight[truth[:, j]].sum() for j in range(3)]
        want = {
            "micro": fn(truth.ravel(), score.ravel(), sample_weight=np.repeat(weight, 3),
                        **extra),
            "macro": np.mean(per), "weighted": np.average(per, weights=support),
            "macro_std": np.std(per),
        }
        for j, label in enumerate(CLASSES[:3]):
            assert math.isclose(_value(got, metric, label=label, average=None), per[j],
                                rel_tol=1e-12, abs_tol=1e-15)
        for average, value in want.items():
            assert math.isclose(_value(got, metric, average=average), value,
                                rel_tol=1e-12, abs_tol=1e-15)


def test_a_label_with_zero_weight_is_null_and_skipped(engine):
    frame = pl.DataFrame({
        "sample": [1, 1, 2, 2], "label": ["a", "b", "a", "b"], "score": [0.2, 0.9, 0.6, 0.1],
        "truth": [False, True, True, False], "weight": [0.0, 0.0, 1.0, 1.0],
        "region": ["n", "n", "s", "s"]})
    metrics = ["log_loss", "brier_score", "calibration_error"]
    got = me.evaluate(frame, metrics, task="multilabel", engine=engine, by="region",
                      average=["none", "micro", "macro", "weighted", "macro_std"])
    north = got.filter(pl.col("region") == "n")
    assert north.height == 3 * 6 and north["value"].is_null().all()
    south = got.filter(pl.col("region") == "s")
    assert south["value"].is_not_null().all()
    assert math.isclose(_value(south, "brier_score", average="macro"), (0.16 + 0.01) / 2)


# -- calibration -------------------------------------------------------------------------------

def test_calibration_error_by_hand(engine):
    # 3 bins: [0, 1/3) holds 0.1 (true) and 0.2 (false, weight 3); [2/3, 1] holds 0.9, 1.0
    frame = pl.DataFrame({"sample": [1, 2, 3, 4], "label": "x",
                          "score": [0.1, 0.2, 0.9, 1.0], "truth": [True, False, True, False],
                          "weight": [1.0, 3.0, 2.0, 2.0]})
    got = me.evaluate(frame, "calibration_error", n_bins=3, engine=engine)
    low = 4 / 8 * abs(1 / 4 - (0.1 + 0.6) / 4)
    high = 4 / 8 * abs(2 / 4 - (1.8 + 2.0) / 4)
    assert math.isclose(_value(got, "calibration_error"), low + high, rel_tol=1e-12, abs_tol=1e-15)
    assert got["n_bins"].to_list() == [3]
    one = me.evaluate(frame, "calibration_error", n_bins=1, engine=engine)
    assert math.isclose(_value(one, "calibration_error"), abs(3 / 8 - 4.5 / 8),
                        rel_tol=1e-12, abs_tol=1e-15)


def test_calibration_error_multiclass_is_one_vs_rest(engine):
    score, onehot, weight, _ = _multiclass_data(seed=3, n=150)
    got = me.evaluate(_long(score, onehot, weight), "calibration_error", task="multiclass",
                      engine=engine, n_bins=7, average=["none", "micro"])
    for j, label in enumerate(CLASSES):
        want = expected_calibration_error(onehot[:, j], score[:, j], weight, 7)
        assert math.isclose(_value(got, "calibration_error", label=label), want,
                            rel_tol=1e-12, abs_tol=1e-15)
    pooled = expected_calibration_error(onehot.ravel(), score.ravel(), np.repeat(weight, 4), 7)
    assert math.isclose(_value(got, "calibration_error", average="micro"), pooled,
                        rel_tol=1e-12, abs_tol=1e-15)


def test_reliability_table_equals_calibration_curve(engine):
    rng = np.random.default_rng(9)
    score = rng.random((300, 3)) ** np.array([1.0, 2.0, 0.5])
    truth = rng.random((300, 3)) < score ** 1.5
    frame = _long(score, truth).with_columns(segment=pl.col("sample") % 2)
    table = curve(frame, "reliability", by="segment", n_bins=8, task="multilabel",
                  engine=engine)
    assert table.columns == ["segment", "label", "bin", "lower", "upper", "mean_score",
                             "observed_rate", "weight"]
    for (seg, label), part in table.group_by("segment", "label", maintain_order=True):
        rows = (np.arange(300) % 2) == seg
        j = CLASSES.index(label)
        prob_true, prob_pred = calibration_curve(truth[rows, j], score[rows, j], n_bins=8,
                                                 strategy="uniform")
        np.testing.assert_allclose(part["observed_rate"].to_numpy(), prob_true, rtol=1e-12)
        np.testing.assert_allclose(part["mean_score"].to_numpy(), prob_pred, rtol=1e-12)
        assert part["bin"].is_sorted()
        assert part["weight"].sum() == float(rows.sum())
        np.testing.assert_array_equal(part["lower"].to_numpy(), part["bin"].to_numpy() / 8)


def test_reliability_bin_edges(engine):
    # each score k/10 starts bin k; 1.0 closes the last bin; a score just below an edge stays
    # in the bin before (nextafter(0.9, 0) * 10 rounds up to 9.0); bounds are exact (0.6, not
    # 0.6000000000000001)
    scores = [i / 10 for i in range(11)] + [math.nextafter(0.7, 0.0), math.nextafter(0.9, 0.0)]
    frame = pl.DataFrame({"sample": range(len(scores)), "label": "x", "score": scores,
                          "truth": [i % 2 == 0 for i in range(len(scores))]})
    table = curve(frame, "reliability", n_bins=10, engine=engine)
    assert table["bin"].to_list() == list(range(10))
    assert table["lower"].to_list() == [b / 10 for b in range(10)]
    assert table["upper"].to_list() == [(b + 1) / 10 for b in range(10)]
    assert table["weight"].to_list() == [1.0] * 6 + [2.0, 1.0, 2.0, 2.0]
    assert table.filter(pl.col("bin") == 9)["mean_score"].item() == (0.9 + 1.0) / 2
    assert table.filter(pl.col("bin") == 6)["mean_score"].item() == \
        (0.6 + math.nextafter(0.7, 0.0)) / 2
    thirds = pl.DataFrame({"sample": [1, 2, 3], "label": "x", "truth": True,
                           "score": [math.nextafter(1 / 3, 0.0), 1 / 3, 2 / 3]})
    assert curve(thirds, "reliability", n_bins=3, engine=engine)["bin"].to_list() == [0, 1, 2]
    # 0.29 * 100 rounds down to 28.999999999999996, yet 0.29 starts bin 29
    hundredths = thirds.with_columns(score=pl.Series([0.28, math.nextafter(0.29, 0.0), 0.29]))
    table = curve(hundredths, "reliability", n_bins=100, engine=engine)
    assert table["bin"].to_list() == [28, 29]
    assert table["weight"].to_list() == [2.0, 1.0]
    assert table["lower"].to_list() == [0.28, 0.29]


def test_reliability_table_skips_bins_without_weight(engine):
    frame = pl.DataFrame({"sample": [1, 2, 3], "label": "x", "score": [0.05, 0.55, 0.59],
                          "truth": [True, False, True], "weight": [0.0, 1.0, 3.0]})
    table = curve(frame, "reliability", n_bins=10, engine=engine)
    assert table["bin"].to_list() == [5]
    assert table["observed_rate"].item() == 0.75
    assert math.isclose(table["mean_score"].item(), (0.55 + 3 * 0.59) / 4, rel_tol=1e-15)


# -- bad scores --------------------------------------------------------------------------------

@pytest.mark.parametrize("metric", ["log_loss", "brier_score", "calibration_error", None])
def test_scores_outside_zero_one_are_refused(engine, metric):
    frame = pl.DataFrame({"id": [1, 2, 3], "label": "x", "prob": [0.2, 1.5, 0.4],
                          "truth": [True, False, True]})
    with pytest.raises(me.InputError) as error:
        if metric is None:
            curve(frame, "reliability", engine=engine, columns={"sample": "id", "score": "prob"})
        else:
            me.evaluate(frame, metric, engine=engine, columns={"sample": "id", "score": "prob"})
    message = str(error.value)
    assert "\n" not in message and "'prob'" in message and "[0, 1]" in message


# -- the statistics tables and the standalone queries -----------------------------------------

@pytest.mark.parametrize(("task", "step", "keys"), [
    ("multilabel", "probability_sums", ["segment", "label"]),
    ("multiclass", "probability_sums", ["segment", "label"]),
    ("multilabel", "calibration_bins", ["segment", "label", "bin"]),
])
def test_statistics_agree_between_engines(task, step, keys):
    predictions = make_predictions(task, seed=13).select(
        "sample", "label", "score", "truth", "weight", segment=pl.struct("region", "model"))
    params = {"n_bins": 10}
    con = duckdb.connect()
    con.register("predictions", predictions)
    sql = queries.load(step)
    from_sql = con.sql(sql, params={p: params[p] for p in queries.parameters(sql)}).pl()
    from_polars = getattr(plans, step)(predictions.lazy(),
                                       **{p: params[p] for p in STEPS[step].params}).collect()
    assert from_sql.height > 0
    assert_frames_close(from_sql.sort(keys), from_polars.sort(keys).select(from_sql.columns))


@pytest.mark.parametrize(("metric", "task"), [("log_loss", "multilabel"),
                                              ("brier_score", "multiclass"),
                                              ("calibration_error", "multiclass")])
def test_standalone_query_gives_the_oracle_rows(metric, task):
    frame = make_predictions(task, seed=14)
    con = duckdb.connect()
    con.register("preds", frame)
    average = None if task == "multiclass" and metric != "calibration_error" \
        else ["none", "micro", "macro", "weighted", "macro_std"]
    statement = me.sql(metric, task=task, table="preds", by="region",
                       columns={"weight": "weight"}, average=average)
    got = con.sql(statement).pl()
    want = me.evaluate(frame, metric, task=task, by="region", average=average)
    assert got.height == want.height > 0
    assert_same_rows(got, want, ["region"], rel=1e-12)


@pytest.mark.parametrize("dialect", ["spark", "trino", "bigquery", "snowflake", "postgres"])
@pytest.mark.parametrize("metric", ["log_loss", "brier_score", "calibration_error"])
def test_queries_render_in_other_dialects(metric, dialect):
    """The rendering, read back from its dialect into DuckDB's and run there: the oracle's
    values (no other engine runs here, so this checks what sqlglot wrote, not the engine)."""
    rendered = me.sql(metric, dialect=dialect, **statement_options("multilabel", metric, "region"))
    *before, last = (sqlglot.transpile(s, read=dialect, write="duckdb")[0]
                     for s in statements(rendered, dialect))  # Spark: a script
    frame = make_predictions("multilabel", seed=15, n_samples=30)
    con = duckdb.connect()
    con.register("predictions", frame)
    for statement in before:
        con.execute(statement)
    rows = con.sql(last).pl()
    assert_standalone_equals_oracle(rows, frame, "multilabel", metric, "region", DEFAULT_PARAMS)
