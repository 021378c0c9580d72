"""zero_one_loss, the class likelihood ratios, hinge_loss, d2_log_loss and d2_brier (issue 49),
on both engines: scikit-learn's own docstring examples with their documented values, the
degenerate segments (one class, one sample, no weight) that its functions answer with NaN or
refuse, the score column read as a decision value by hinge_loss, and the statistics both
engines share. tests/test_metrics.py holds each to scikit-learn on the shared random data.
"""

from __future__ import annotations

import math
import warnings

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from sklearn import metrics as skm
from sklearn import svm

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.engines import polars as plans
from mleval_sql.registry import METRICS as REGISTRY
from tests.data import make_predictions
from tests.helpers import assert_frames_close, assert_same_rows
from tests.oracle import expected
from tests.test_metrics import DEFAULT_PARAMS
from tests.test_properties import _evaluate, tables

REL, ABS = 1e-12, 1e-15


def _long(score: np.ndarray, truth: np.ndarray, labels: list, weight: np.ndarray | None = None,
          segment: list | None = None) -> pl.DataFrame:
    """samples x labels matrices -> long rows (with a weight and a segment where given)."""
    n, k = score.shape
    frame = pl.DataFrame({"sample": np.repeat(np.arange(n), k), "label": np.tile(labels, n),
                          "score": score.ravel().astype(float),
                          "truth": truth.ravel().astype(bool)})
    if weight is not None:
        frame = frame.with_columns(weight=np.repeat(weight, k))
    if segment is not None:
        frame = frame.with_columns(seg=pl.Series(np.repeat(np.asarray(segment), k)))
    return frame


def _binary(y: list, score: list, weight: list | None = None,
            segment: list | None = None) -> pl.DataFrame:
    return _long(np.asarray(score, dtype=float)[:, None], np.asarray(y, dtype=bool)[:, None],
                 ["x"], None if weight is None else np.asarray(weight, dtype=float), segment)


def _value(frame: pl.DataFrame, metric: str, **filters: object) -> float | None:
    rows = frame.filter(pl.col("metric") == metric)
    for column, value in filters.items():
        rows = rows.filter(pl.col(column).is_null() if value is None else pl.col(column) == value)
    assert rows.height == 1, rows
    return rows["value"].item()


def _close(got: float | None, want: float) -> bool:
    return got is not None and math.isclose(got, want, rel_tol=REL, abs_tol=ABS)


# -- scikit-learn's docstring examples ------------------------------------------------------------

def test_zero_one_loss_docstring_examples(engine):
    # zero_one_loss([2, 2, 3, 4], [1, 2, 3, 4]) == 0.25: multiclass, the argmax one-hot
    labels = [1, 2, 3, 4]
    y_true, y_pred = [2, 2, 3, 4], [1, 2, 3, 4]
    score = np.asarray([[p == c for c in labels] for p in y_pred], dtype=float)
    truth = np.asarray([[t == c for c in labels] for t in y_true])
    got = me.evaluate(_long(score, truth, labels), "zero_one_loss", task="multiclass",
                      engine=engine)
    assert _value(got, "zero_one_loss") == 0.25 == skm.zero_one_loss(y_true, y_pred)
    # multilabel: zero_one_loss(np.array([[0, 1], [1, 1]]), np.ones((2, 2))) == 0.5
    truth = np.array([[0, 1], [1, 1]])
    got = me.evaluate(_long(np.ones((2, 2)), truth, ["a", "b"]), "zero_one_loss",
                      task="multilabel", engine=engine)
    assert _value(got, "zero_one_loss") == 0.5 == skm.zero_one_loss(truth, np.ones((2, 2)))


@pytest.mark.parametrize(("y_true", "y_pred", "positive", "documented"), [
    ([0, 1, 0, 1, 0], [1, 1, 0, 0, 0], 1, (1.5, 0.75)),
    # labels sorted: "non-cat" is the positive class, as scikit-learn takes the larger label
    (["non-cat", "cat", "non-cat", "cat", "non-cat"],
     ["cat", "cat", "non-cat", "non-cat", "non-cat"], "non-cat", (1.33, 0.66)),
    (["non-zebra", "zebra", "non-zebra", "zebra", "non-zebra"],
     ["zebra", "zebra", "non-zebra", "non-zebra", "non-zebra"], "zebra", (1.5, 0.75)),
])
def test_class_likelihood_ratios_docstring_examples(engine, y_true, y_pred, positive,
                                                    documented):
    frame = _binary([t == positive for t in y_true], [float(p == positive) for p in y_pred])
    got = me.evaluate(frame, ["positive_likelihood_ratio", "negative_likelihood_ratio"],
                      engine=engine)
    lr_pos, lr_neg = skm.class_likelihood_ratios(y_true, y_pred)
    assert _close(_value(got, "positive_likelihood_ratio"), lr_pos)
    assert _close(_value(got, "negative_likelihood_ratio"), lr_neg)
    # the docstring prints 2 digits (doctest's NUMBER): 4/3 as 1.33, 2/3 as 0.66
    assert [math.floor(v * 100) / 100 for v in (lr_pos, lr_neg)] == list(documented)


def test_hinge_loss_docstring_examples(engine):
    # binary: LinearSVC on [[0], [1]] / [-1, 1], decisions at -2, 3, 0.5: 0.30 (0.3030...)
    est = svm.LinearSVC(random_state=0).fit([[0], [1]], [-1, 1])
    decision = est.decision_function([[-2], [3], [0.5]])
    want = skm.hinge_loss([-1, 1, 1], decision)
    assert round(want, 2) == 0.30
    got = me.evaluate(_binary([False, True, True], list(decision)), "hinge_loss",
                      engine=engine)
    assert _close(_value(got, "hinge_loss"), want)
    # multiclass: LinearSVC on 0, 1, 2, 3, decisions at -1, 2, 3 for classes 0, 2, 3: 0.56
    labels = [0, 1, 2, 3]
    est = svm.LinearSVC(random_state=0).fit(np.array([[0], [1], [2], [3]]), labels)
    decision = est.decision_function([[-1], [2], [3]])
    y_true = [0, 2, 3]
    want = skm.hinge_loss(y_true, decision, labels=labels)
    assert round(want, 2) == 0.56
    truth = np.asarray([[t == c for c in labels] for t in y_true])
    got = me.evaluate(_long(decision, truth, labels), "hinge_loss", task="multiclass",
                      engine=engine)
    assert _close(_value(got, "hinge_loss"), want)


def test_d2_of_the_prevalence_is_0_and_of_the_truth_1(engine):
    """scikit-learn's documented values (the D² functions have no docstring examples): a model
    predicting each class's share of the weight scores 0.0, the best one 1.0."""
    y = np.array([True, False, True, True, False, False, True])
    weight = np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0, 1.5])
    prevalence = float(weight[y].sum() / weight.sum())
    got = me.evaluate(_binary(list(y), [prevalence] * len(y), list(weight)),
                      ["d2_log_loss", "d2_brier"], engine=engine)
    for metric in ("d2_log_loss", "d2_brier"):
        assert abs(_value(got, metric)) < 1e-12
    perfect = me.evaluate(_binary(list(y), list(y.astype(float)), list(weight)),
                          ["d2_log_loss", "d2_brier"], engine=engine)
    assert _value(perfect, "d2_brier") == 1.0
    want = skm.d2_log_loss_score(y, y.astype(float), sample_weight=weight)
    assert _close(_value(perfect, "d2_log_loss"), want) and want > 1 - 1e-12
    # multiclass: every row the classes' shares of the weight
    classes = np.array([0, 2, 1, 1, 0, 2, 2])
    onehot = np.eye(3, dtype=bool)[classes]
    shares = np.array([weight[classes == c].sum() for c in range(3)]) / weight.sum()
    frame = _long(np.tile(shares, (7, 1)), onehot, ["a", "b", "c"], weight)
    got = me.evaluate(frame, ["d2_log_loss", "d2_brier"], task="multiclass", engine=engine)
    for metric, fn in (("d2_log_loss", skm.d2_log_loss_score), ("d2_brier", skm.d2_brier_score)):
        want = fn(classes, np.tile(shares, (7, 1)), sample_weight=weight)
        assert abs(_value(got, metric)) < 1e-12 and abs(want) < 1e-12


# -- degenerate segments ---------------------------------------------------------------------------

METRICS = ["zero_one_loss", "positive_likelihood_ratio", "negative_likelihood_ratio",
           "hinge_loss", "d2_log_loss", "d2_brier"]


def test_degenerate_binary_segments(engine):
    """One class, one sample, no weight, and each ratio's zero denominator: null where
    scikit-learn gives NaN (or -inf, or a clipped log's huge number), its value elsewhere."""
    segments = {
        "fine": ([1, 0, 1, 0, 1], [0.9, 0.6, 0.2, 0.1, 0.7], [1.0, 2.0, 0.5, 1.0, 1.0]),
        "one_class": ([1, 1, 1], [0.9, 0.4, 0.6], [1.0, 2.0, 1.0]),
        "one_sample": ([0], [0.3], [2.0]),
        "no_weight": ([1, 0], [0.8, 0.3], [0.0, 0.0]),
        "no_fp": ([1, 0, 1], [0.9, 0.2, 0.3], [1.0, 1.0, 1.0]),  # LR+ undefined only
        "no_tn": ([1, 0, 0], [0.4, 0.6, 0.9], [1.0, 1.0, 1.0]),  # LR- undefined only
        # a negative of weight 0: scikit-learn sees two classes, the weight one (null here)
        "weightless_class": ([1, 0, 1], [0.9, 0.2, 0.3], [1.0, 0.0, 2.0]),
    }
    y, s, w, seg = ([], [], [], [])
    for name, (yy, ss, ww) in segments.items():
        y += yy
        s += ss
        w += ww
        seg += [name] * len(yy)
    got = me.evaluate(_binary(y, s, w, seg), METRICS, by="seg", engine=engine)
    nulls = {(r["seg"], r["metric"]) for r in got.iter_rows(named=True) if r["value"] is None}
    assert nulls == {
        *((name, m) for name in ("one_class", "one_sample", "weightless_class")
          for m in ("d2_log_loss", "d2_brier")),
        ("one_class", "positive_likelihood_ratio"),  # no negatives: fp = 0 ...
        ("one_class", "negative_likelihood_ratio"),  # ... and tn = 0
        ("one_sample", "positive_likelihood_ratio"), ("one_sample", "negative_likelihood_ratio"),
        *(("no_weight", m) for m in METRICS),
        ("no_fp", "positive_likelihood_ratio"), ("no_tn", "negative_likelihood_ratio"),
        ("weightless_class", "positive_likelihood_ratio"),
        ("weightless_class", "negative_likelihood_ratio"),
    }
    for name, (yy, ss, ww) in segments.items():
        t, p, weights = np.asarray(yy, bool), np.asarray(ss), np.asarray(ww)
        part = got.filter(pl.col("seg") == name)
        if weights.any():
            assert _close(_value(part, "zero_one_loss"),
                          skm.zero_one_loss(t, p >= 0.5, sample_weight=weights))
        if (name, "positive_likelihood_ratio") not in nulls:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # no_tn: LR- is undefined
                lr = skm.class_likelihood_ratios(t, p >= 0.5, labels=[False, True],
                                                 sample_weight=weights)
            assert _close(_value(part, "positive_likelihood_ratio"), lr[0])
        if name == "fine":
            for metric, fn in (("d2_log_loss", skm.d2_log_loss_score),
                               ("d2_brier", skm.d2_brier_score)):
                assert _close(_value(part, metric), fn(t, p, sample_weight=weights))
    # scikit-learn's NaN for one sample, and -inf for a constant truth
    with pytest.warns(skm._classification.UndefinedMetricWarning):
        assert math.isnan(skm.d2_brier_score([0], [0.3]))
    with np.errstate(divide="ignore"):
        assert skm.d2_brier_score([1, 1, 1], [0.9, 0.4, 0.6], pos_label=1) == -math.inf


def test_degenerate_multiclass_segments(engine):
    labels = ["a", "b", "c"]
    rng = np.random.default_rng(4)
    score = rng.dirichlet(np.ones(3), size=9)
    classes = np.array([0, 1, 2, 0, 2, 1, 0, 0, 0])
    weight = np.array([1.0, 2.0, 0.5, 1.0, 1.0, 3.0, 1.0, 2.0, 0.0])
    segment = ["fine"] * 6 + ["one_class"] * 2 + ["no_weight"]
    got = me.evaluate(_long(score, np.eye(3, dtype=bool)[classes], labels, weight, segment),
                      ["zero_one_loss", "hinge_loss", "d2_log_loss", "d2_brier"],
                      task="multiclass", by="seg", engine=engine)
    fine = got.filter(pl.col("seg") == "fine")
    y, p, w = np.asarray(labels)[classes[:6]], score[:6], weight[:6]
    assert _close(_value(fine, "zero_one_loss"),
                  skm.zero_one_loss(y, np.asarray(labels)[p.argmax(axis=1)], sample_weight=w))
    assert _close(_value(fine, "hinge_loss"), skm.hinge_loss(y, p, labels=labels,
                                                             sample_weight=w))
    assert _close(_value(fine, "d2_log_loss"), skm.d2_log_loss_score(y, p, sample_weight=w,
                                                                     labels=labels))
    assert _close(_value(fine, "d2_brier"), skm.d2_brier_score(y, p, sample_weight=w,
                                                               labels=labels))
    one = got.filter(pl.col("seg") == "one_class")
    assert _value(one, "d2_log_loss") is None and _value(one, "d2_brier") is None
    assert _value(one, "hinge_loss") is not None
    assert got.filter(pl.col("seg") == "no_weight")["value"].is_null().all()


# -- the score column as a decision value ---------------------------------------------------------

def test_hinge_loss_reads_any_real_score_and_d2_refuses_one_outside_zero_one(engine):
    decision = [-2.5, 0.0, 1.7, 3.0, -0.4]
    y = [False, False, True, True, True]
    weight = [1.0, 2.0, 0.5, 1.0, 3.0]
    got = me.evaluate(_binary(y, decision, weight), "hinge_loss", engine=engine)
    want = skm.hinge_loss(np.where(y, 1, -1), decision, sample_weight=weight)
    assert _close(_value(got, "hinge_loss"), want)
    with pytest.raises(me.InputError, match=r"\[0, 1\]"):
        me.evaluate(_binary(y, decision, weight), "d2_brier", engine=engine)


def test_binary_hinge_of_a_one_class_segment_reads_truth_as_plus_one(engine):
    # scikit-learn's LabelBinarizer would read all-positive y_true as -1 everywhere
    got = me.evaluate(_binary([True, True], [0.5, 2.0]), "hinge_loss", engine=engine)
    assert _value(got, "hinge_loss") == (0.5 + 0.0) / 2


def test_two_class_multiclass_hinge_is_crammer_singer(engine):
    score = np.array([[0.3, -0.2], [1.0, 2.5], [0.1, 0.1]])
    truth = np.eye(2, dtype=bool)[[0, 0, 1]]
    got = me.evaluate(_long(score, truth, ["a", "b"]), "hinge_loss", task="multiclass",
                      engine=engine)
    margins = np.array([0.5, -1.5, 0.0])
    assert _close(_value(got, "hinge_loss"), float(np.maximum(1 - margins, 0).mean()))


# -- the statistics both engines share ------------------------------------------------------------

@pytest.mark.parametrize(("task", "step", "keys"), [
    ("binary", "probability_sums", ["segment", "label"]),
    ("multiclass", "true_ranks", ["segment", "sample"]),
])
def test_statistics_agree_between_engines(task, step, keys):
    predictions = make_predictions(task, seed=31).select(
        "sample", "label", "score", "truth", "weight", segment=pl.struct("region", "model"))
    con = duckdb.connect()
    con.register("predictions", predictions)
    from_sql = con.sql(queries.load(step)).pl()
    from_polars = getattr(plans, step)(predictions.lazy()).collect()
    assert from_sql.height > 0 and {"hinge", "neg", "margin"} & set(from_sql.columns)
    assert_frames_close(from_sql.sort(keys), from_polars.sort(keys).select(from_sql.columns))


def test_statements_equal_evaluate():
    """``me.sql`` of every task's new metrics, pasted into DuckDB: evaluate's rows."""
    for task, names in (("binary", METRICS), ("multiclass", ["zero_one_loss", "hinge_loss",
                                                              "d2_log_loss", "d2_brier"]),
                        ("multilabel", ["zero_one_loss", "d2_log_loss", "d2_brier"])):
        frame = make_predictions(task, seed=32)
        con = duckdb.connect()
        con.register("preds", frame)
        average = ["none"] if task == "binary" else None
        statement = me.sql(names, task=task, table="preds", by="region", average=average,
                           columns={"weight": "weight", "label": "label"})
        got = con.sql(statement).pl()
        want = me.evaluate(frame, names, task=task, by="region", average=average)
        keys = ["region", "metric", "average", "label"]
        assert got.height == want.height > 0
        assert_frames_close(got.sort(keys).select(want.columns), want.sort(keys))


# -- drawn tables ----------------------------------------------------------------------------------

NEW = {"binary": METRICS, "multiclass": ["zero_one_loss", "hinge_loss", "d2_log_loss", "d2_brier"],
       "multilabel": ["zero_one_loss", "d2_log_loss", "d2_brier"]}


@pytest.mark.parametrize("task", list(NEW))
@given(data=st.data())
def test_drawn_tables_equal_the_oracle_and_keep_invariances(engine, task, data):
    """tests/test_properties.py's tables (ties, scores at the threshold, zero weights, one-class
    and one-sample segments, a float segment with null and NaN) with these metrics every time:
    the oracle's rows, and the same rows with every sample split in two of half its weight and
    every weight scaled."""
    frame = data.draw(tables(task), label="table")
    plain = frame.with_columns(seg=pl.when(pl.col("seg") == 0).then(0.0).otherwise("seg"))
    groups: dict[tuple[str, ...], list[str]] = {}
    for name in NEW[task]:
        groups.setdefault(REGISTRY[name].averages(task), []).append(name)
    for averages, names in groups.items():
        got = _evaluate(frame, task, names, averages, engine)
        want = pl.concat([expected(plain, task, name, averages or ("none",), ["seg"],
                                   DEFAULT_PARAMS) for name in names], how="diagonal_relaxed")
        assert_same_rows(got, want, ["seg"])
        # every sample twice at half its weight, then every weight times 8 (powers of two:
        # exact); scikit-learn's own D² would change with the count of a one-sample segment,
        # ours is null there
        half = frame.with_columns(pl.col("weight") / 2)
        split = pl.concat([half, half.with_columns(pl.col("sample") + 1000)])
        split = split.with_columns(pl.col("weight") * 8)
        assert_same_rows(_evaluate(split, task, names, averages, engine), got, ["seg"])
