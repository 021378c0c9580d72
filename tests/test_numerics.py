"""Numbers at the edges: each case is the minimal table of a bug a differential fuzzer found
(both engines against scikit-learn and exact arithmetic), kept so that it stays fixed.
tests/test_properties.py generalises them (any weights scale, any table)."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from tests.data import make_predictions
from tests.helpers import assert_same_rows
from tests.oracle import expected
from tests.oracle_ranking import break_even
from tests.test_metrics import DEFAULT_PARAMS
from tests.test_properties import COUNTS, metric_groups


def _values(result: pl.DataFrame, metric: str) -> list[float | None]:
    return result.filter(pl.col("metric") == metric)["value"].to_list()


def test_multiclass_tn_is_a_sum_of_weights_not_a_difference(engine):
    # label c: the 1e17 sample is c's tp; the weight-1 sample (true a, predicted a) is its tn,
    # which total - tp - fp - fn cancelled to 0 (specificity null)
    frame = pl.DataFrame({
        "sample": [1, 1, 1, 2, 2, 2], "label": ["a", "b", "c"] * 2,
        "score": [0.1, 0.2, 0.7, 0.8, 0.1, 0.1],
        "truth": [False, False, True, True, False, False],
        "weight": [1e17] * 3 + [1.0] * 3})
    got = me.evaluate(frame, ["tp", "fp", "fn", "tn", "specificity"], task="multiclass",
                      average="none", engine=engine).filter(pl.col("label") == "c")
    assert dict(zip(got["metric"], got["value"], strict=True)) == {
        "tp": 1e17, "fp": 0.0, "fn": 0.0, "tn": 1.0, "specificity": 1.0}
    # and fp / fn are sums of their own cells too: a weight of 1 off the 1e17 diagonal
    frame = frame.with_columns(score=pl.when((pl.col("sample") == 2) & (pl.col("label") == "c"))
                               .then(0.9).otherwise(pl.col("score")))
    got = me.evaluate(frame, ["fp", "fn"], task="multiclass", average="none", engine=engine)
    cells = zip(got["metric"], got["label"], strict=True)
    assert dict(zip(cells, got["value"], strict=True)) == {
        ("fp", "a"): 0.0, ("fp", "b"): 0.0, ("fp", "c"): 1.0,
        ("fn", "a"): 1.0, ("fn", "b"): 0.0, ("fn", "c"): 0.0}


@pytest.mark.parametrize(("beta", "want"), [(1e-200, 0.0), (1e200, 0.0), (1e-160, 0.0)])
def test_fbeta_with_an_extreme_beta_is_a_number_never_nan(engine, beta, want):
    # tp = fp = 0, fn = 1: F-beta is 0 for every beta > 0 (undefined only when tp + fp + fn = 0)
    frame = pl.DataFrame({"sample": [1, 2], "label": ["x", "x"], "score": [0.1, 0.1],
                          "truth": [True, False]})
    got = me.evaluate(frame, "fbeta", beta=beta, task="multilabel", average=["none", "macro"],
                      engine=engine)
    assert _values(got, "fbeta") == [want, want]


@pytest.mark.parametrize(("beta", "metric"), [(1e-200, "precision"), (1e200, "recall"),
                                              (1e-7, "precision"), (3.0, None)])
def test_fbeta_tends_to_precision_and_recall(engine, beta, metric):
    # tp = 1, fp = 2, fn = 3 (weights): precision 1/3, recall 1/4
    frame = pl.DataFrame({"sample": [1, 2, 3], "label": ["x"] * 3, "score": [0.9, 0.9, 0.1],
                          "truth": [True, False, True], "weight": [1.0, 2.0, 3.0]})
    got = me.evaluate(frame, ["fbeta", "precision", "recall"], beta=beta, task="binary",
                      engine=engine)
    b2 = Fraction(beta) ** 2
    exact = float((1 + b2) * 1 / ((1 + b2) * 1 + b2 * 3 + 2))
    assert math.isclose(_values(got, "fbeta")[0], exact, rel_tol=1e-12, abs_tol=1e-15)
    if metric:
        assert math.isclose(_values(got, "fbeta")[0], _values(got, metric)[0],
                            rel_tol=1e-12, abs_tol=1e-15)


@pytest.mark.parametrize("scale", [1e300, 1e160, 1e-100, 1e-300])
def test_roc_auc_and_mcc_do_not_depend_on_the_scale_of_the_weights(engine, scale):
    ties = pl.DataFrame({"sample": [1, 2, 3, 4], "label": ["x"] * 4, "score": [0.5, 0, 0.5, 0],
                         "truth": [True, True, False, False], "weight": [scale] * 4})
    # 0.5 to the last bit or two: 1e-300 is no power of two, so the scaled weights carry
    # rounding of their own (NaN before: P x N under- or overflowed)
    (auc,) = _values(me.evaluate(ties, "roc_auc", engine=engine), "roc_auc")
    assert auc is not None and math.isclose(auc, 0.5, rel_tol=4e-16, abs_tol=0)
    perfect = ties.with_columns(score=pl.Series([0.9, 0.8, 0.2, 0.1]))
    assert _values(me.evaluate(perfect, "mcc", engine=engine), "mcc") == [1.0]


#: The metrics that read a weighted quantile of the errors or truths.
QUANTILE_METRICS = ("median_absolute_error", "d2_absolute_error", "d2_pinball")


@pytest.mark.parametrize("task", ["binary", "multilabel", "multiclass", "regression"])
@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_every_metric_at_weights_of_1e300_and_1e_300(engine, task, scale):
    """Every metric of the task at weights scaled by 1e±300 equals the one at unit scale (counts
    scale with the weights); the table is small enough that no sum of weights overflows. A
    weighted quantile is not scale-free where the weight splits evenly: scaled weights (1e300
    is no power of two) round the running weight off the half, and scikit-learn then takes
    one middle value, not the mean of two; those equal scikit-learn at 1e300 (at 1e-300 its
    tolerance of an even split, an absolute 2.2e-16, exceeds the totals: no reference)."""
    frame = make_predictions(task, 3, n_samples=12).filter(pl.col("weight") > 0)
    scaled = frame.with_columns(pl.col("weight") * scale)
    for averages, names in metric_groups(task):
        kwargs = dict(task=task, engine=engine, average=averages or None, by="region",
                      **DEFAULT_PARAMS)
        split = [n for n in names if n in QUANTILE_METRICS]
        names = [n for n in names if n not in QUANTILE_METRICS]
        if split and scale > 1:
            want = pl.concat([expected(scaled, task, n, averages or ("none",), ["region"],
                                       DEFAULT_PARAMS) for n in split], how="vertical_relaxed")
            assert_same_rows(me.evaluate(scaled, split, **kwargs), want, ["region"])
        if not names:
            continue
        want = me.evaluate(frame, names, **kwargs).with_columns(
            value=pl.when(pl.col("metric").is_in(COUNTS)).then(pl.col("value") * scale)
            .otherwise(pl.col("value")))
        assert_same_rows(me.evaluate(scaled, names, **kwargs), want, ["region"])


def test_r2_of_a_large_common_offset_is_exact_to_1e_10(engine):
    rng = np.random.default_rng(0)
    n = 50
    truth, score = 1e12 + rng.normal(0, 1, n), 1e12 + rng.normal(0, 1, n)
    weight = rng.choice([0.5, 1.0, 2.0], n)
    frame = pl.DataFrame({"sample": range(n), "label": ["y"] * n, "score": score,
                          "truth": truth, "weight": weight})
    t, s, w = ([Fraction(float(v)) for v in a] for a in (truth, score, weight))
    mean = sum(a * b for a, b in zip(w, t, strict=True)) / sum(w)
    sst = sum(a * (b - mean) ** 2 for a, b in zip(w, t, strict=True))
    sse = sum(a * (p - b) ** 2 for a, p, b in zip(w, s, t, strict=True))
    exact = 1 - sse / sst
    got = _values(me.evaluate(frame, "r2", task="regression", engine=engine), "r2")[0]
    assert abs(Fraction(got) - exact) <= Fraction(1, 10**10) * abs(exact)


def test_a_float_segment_of_0_and_minus_0_is_one_segment_given_as_0(engine):
    frame = pl.DataFrame({"sample": [1, 2, 3, 4], "label": ["x"] * 4,
                          "score": [0.1, 0.9, 0.6, 0.2], "truth": [True, False, True, False],
                          "seg": [-0.0, 0.0, -0.0, 0.0]})  # the first row: -0.0
    for table in (me.evaluate(frame, "accuracy", by="seg", engine=engine),
                  me.curve(frame, "roc", by="seg", engine=engine)):
        assert {math.copysign(1.0, v) for v in table["seg"]} == {1.0}
    assert me.evaluate(frame, "accuracy", by="seg", engine=engine)["value"].to_list() == [0.5]


def test_the_oracle_takes_more_than_100_labels(engine):
    # the first 120 labels are never true nor predicted (F1 null), the others are: the
    # oracle's frame must not take its value type from the first 100 rows (all null)
    labels = [f"l{j:03d}" for j in range(150)]
    frame = pl.DataFrame({"sample": np.repeat([1, 2], 150), "label": labels * 2,
                          "score": np.tile(np.arange(150) >= 120, 2) * 0.9,
                          "truth": np.tile((np.arange(150) >= 120) & (np.arange(150) % 2 == 0),
                                           2)})
    want = expected(frame, "multilabel", "f1", ("none",), [], DEFAULT_PARAMS)
    assert want.height == 150
    assert_same_rows(me.evaluate(frame, "f1", task="multilabel", average="none",
                                 engine=engine), want, [])


def test_the_break_even_oracle_does_not_underflow():
    y = np.array([True, False, True, False])
    s = np.array([0.9, 0.5, 0.5, 0.1])
    w = np.array([1.0, 1.0, 1.0, 2.0])
    assert break_even(y, s, w) == 0.75  # P = 2: the top sample and half of the tied block
    assert break_even(y, s, w * 1e-300) == 0.75
