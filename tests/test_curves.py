"""ROC and precision-recall curves, binned ranking metrics, partial AUC, break-even and the
one-vs-one multiclass AUC, on both engines against scikit-learn (or a hand-worked reference).

The data (tests/data.py) has heavy ties (scores on a 0.1 grid), zero weights, several segments,
a one-class segment, a one-sample segment and a segment lacking a label.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import duckdb
import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.api import curve
from mleval_sql.engines import local_engines
from mleval_sql.engines import polars as plans
from tests.data import make_predictions
from tests.helpers import WITH_SPARK, assert_frames_close, assert_same_rows
from tests.oracle import expected
from tests.oracle_ranking import break_even
from tests.test_metrics import DEFAULT_PARAMS

CURVE_CASES = [  # task, seed, segment columns
    pytest.param("binary", 21, ["region"], id="binary"),
    pytest.param("multilabel", 22, ["region", "model"], id="multilabel"),
    pytest.param("multiclass", 23, ["region"], id="multiclass-ovr"),
]
# scikit-learn warns about one-class curves, which the data has on purpose
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def _groups(frame: pl.DataFrame, by: list[str]) -> Iterator[tuple[dict, np.ndarray, ...]]:
    """(keys, truth, score, weight) per (segment, label) of a long frame."""
    for key, part in frame.partition_by([*by, "label"], as_dict=True).items():
        weight = part["weight"].to_numpy() if "weight" in part.columns else np.ones(part.height)
        yield (dict(zip([*by, "label"], key, strict=True)), part["truth"].to_numpy().astype(bool),
               part["score"].to_numpy(), weight)


def _rows(table: pl.DataFrame, keys: dict) -> pl.DataFrame:
    """The curve rows of one (segment, label), thresholds descending (origin first)."""
    mask = pl.lit(True)
    for column, value in keys.items():
        mask &= pl.col(column) == value
    return table.filter(mask).sort("threshold", descending=True)


def _value(result: pl.DataFrame, keys: dict) -> float | None:
    """The one value of an evaluate() result at ``keys``."""
    mask = pl.lit(True)
    for column, value in keys.items():
        mask &= pl.col(column) == value
    return result.filter(mask)["value"].item()


def _close(got: list, want: np.ndarray, what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} points, want {len(want)}"
    for a, b in zip(got, want, strict=True):
        if b is None or (isinstance(b, float) and math.isnan(b)):
            assert a is None, f"{what}: got {a}, want null"
        else:
            assert a is not None and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-15), \
                f"{what}: got {a}, want {b}"


@WITH_SPARK
@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize(("task", "seed", "by"), CURVE_CASES)
def test_roc_curve_matches_scikit_learn(engine, task, seed, by, drop):
    frame = make_predictions(task, seed)
    table = curve(frame, "roc", by=by, task=task, engine=engine, drop_intermediate=drop)
    checked = 0
    for keys, y, s, w in _groups(frame, by):
        rows = _rows(table, keys)
        fpr, tpr, thresholds = skm.roc_curve(y, s, sample_weight=w, drop_intermediate=drop)
        _close(rows["threshold"].to_list(), thresholds, f"{keys} thresholds")
        _close(rows["fpr"].to_list(), fpr, f"{keys} fpr")
        _close(rows["tpr"].to_list(), tpr, f"{keys} tpr")
        assert rows["recall"].to_list() == rows["tpr"].to_list()
        if not drop:  # every distinct score: the counts too
            tns, fps, fns, tps, _ = skm.confusion_matrix_at_thresholds(y, s, sample_weight=w)
            for column, want in zip(("tn", "fp", "fn", "tp"), (tns, fps, fns, tps), strict=True):
                origin = {"tn": w[~y].sum(), "fn": w[y].sum()}.get(column, 0.0)
                _close(rows[column].to_list(), np.concatenate([[origin], want]), column)
        checked += 1
    assert checked == table.select([*by, "label"]).unique().height
    assert table.filter(pl.col("tpr").is_null()).height > 0  # the one-class segment


@WITH_SPARK
@pytest.mark.parametrize("drop", [False, True])
@pytest.mark.parametrize(("task", "seed", "by"), CURVE_CASES)
def test_pr_curve_matches_scikit_learn(engine, task, seed, by, drop):
    frame = make_predictions(task, seed)
    table = curve(frame, "pr", by=by, task=task, engine=engine, drop_intermediate=drop)
    for keys, y, s, w in _groups(frame, by):
        rows = _rows(table, keys)
        precision, recall, thresholds = skm.precision_recall_curve(
            y, s, sample_weight=w, drop_intermediate=drop)
        # scikit-learn: thresholds ascending, then the point (recall 0, precision 1) without one
        assert rows["threshold"][0] == math.inf
        _close(rows["threshold"].to_list()[1:], thresholds[::-1], f"{keys} thresholds")
        _close(rows["precision"].to_list(), precision[::-1], f"{keys} precision")
        if w[y].sum() > 0:
            _close(rows["recall"].to_list(), recall[::-1], f"{keys} recall")
        else:  # scikit-learn sets recall to 1 without positives; 0/0 is null here
            assert rows["recall"].null_count() == rows.height


@pytest.mark.parametrize("kind", ["roc", "pr"])
@pytest.mark.parametrize("drop", [False, True])
def test_curve_engines_agree(kind, drop):
    frame = make_predictions("multilabel", 24)
    tables = [curve(frame, kind, by=["region", "model"], engine=e, drop_intermediate=drop)
              for e in local_engines()]
    assert tables[0].height > 0
    assert_frames_close(tables[0], tables[1])


def test_roc_curve_drops_intermediate_points_by_default(engine):
    # points (tp, fp): (1, 0) (1, 1) (1, 2) (1, 3) (2, 3); the middle two are collinear
    frame = pl.DataFrame({"sample": range(5), "label": "a", "score": [0.9, 0.8, 0.7, 0.6, 0.5],
                          "truth": [True, False, False, False, True]})
    default, every = (curve(frame, "roc", engine=engine, drop_intermediate=d)
                      for d in (None, False))
    assert default["threshold"].to_list() == [math.inf, 0.9, 0.6, 0.5]
    assert every.height == 6
    assert curve(frame, "pr", engine=engine).height == 6  # pr keeps every point by default
    pr = curve(frame, "pr", engine=engine, drop_intermediate=True)
    assert pr["threshold"].to_list() == [math.inf, 0.9, 0.6, 0.5]


# -- binned mode ----------------------------------------------------------------------------------

def _continuous(seed: int) -> pl.DataFrame:
    """Multilabel predictions with scores off the 0.1 grid, so that binning changes them."""
    frame = make_predictions("multilabel", seed)
    noise = np.random.default_rng(seed).uniform(0.0, 0.0999, frame.height)
    return frame.with_columns(score=(pl.col("score") + pl.Series(noise)).clip(0.0, 0.9999))


def _binned(score: np.ndarray, bins: int) -> np.ndarray:
    return np.floor(score * bins) / bins  # scores here are never within rounding of a bin edge


@pytest.mark.parametrize("bins", [10, 7])
def test_binned_curve_has_exact_counts_at_the_grid(engine, bins):
    frame = _continuous(31)
    table = curve(frame, "roc", by=["region"], engine=engine, bins=bins,
                     drop_intermediate=False)
    grid = {k / bins for k in range(bins + 1)}
    for keys, y, s, w in _groups(frame, ["region"]):
        rows = _rows(table, keys).filter(pl.col("threshold") < math.inf)
        assert set(rows["threshold"]) <= grid
        assert rows.height == len({t for t, weight in zip(_binned(s, bins), w, strict=True)
                                   if weight > 0})
        for row in rows.iter_rows(named=True):
            predicted = s >= row["threshold"]
            assert row["tp"] == w[y & predicted].sum()
            assert row["fp"] == w[~y & predicted].sum()
            assert row["fn"] == w[y & ~predicted].sum()
            assert row["tn"] == w[~y & ~predicted].sum()


def _auc_bound(y: np.ndarray, s: np.ndarray, w: np.ndarray, bins: int) -> float:
    """sum over bins of pos_b * neg_b / (2 P N): the pairs a bin ties."""
    b = _binned(s, bins)
    tied = sum(w[y & (b == v)].sum() * w[~y & (b == v)].sum() for v in np.unique(b))
    return tied / (2 * w[y].sum() * w[~y].sum())


@pytest.mark.parametrize("bins", [10, 4])
def test_binned_auc_is_within_the_documented_bound(engine, bins):
    frame = _continuous(32)
    by = ["region"]
    exact, binned = (me.evaluate(frame, ["roc_auc"], by=by, engine=engine, average="none",
                                 bins=b).sort([*by, "label"]) for b in (None, bins))
    assert binned["bins"].to_list() == [bins] * binned.height
    checked = 0
    for keys, y, s, w in _groups(frame, by):
        if w[y].sum() == 0 or w[~y].sum() == 0:
            continue
        got, want = _value(binned, keys), _value(exact, keys)
        # the binned AUC is the exact AUC of the binned scores...
        assert math.isclose(got, skm.roc_auc_score(y, _binned(s, bins), sample_weight=w),
                            rel_tol=1e-12, abs_tol=1e-15)
        # ... within the bound of the exact one, a bound that is not trivially loose here
        bound = _auc_bound(y, s, w, bins)
        assert abs(got - want) <= bound + 1e-12
        assert got != want and bound < 0.5
        checked += 1
    assert checked >= 4


# -- AUC, partial AUC, break-even ------------------------------------------------------------------

@WITH_SPARK
def test_one_class_segment_gives_null_auc_not_an_error(engine):
    frame = make_predictions("binary", 26)
    got = me.evaluate(frame, ["roc_auc", "average_precision", "break_even"], by="region",
                      engine=engine)
    one_class = got.filter(pl.col("region") == "one_class")
    assert one_class.height == 3 and one_class["value"].null_count() == 3
    assert got.filter(pl.col("region") == "north")["value"].null_count() == 0


@pytest.mark.parametrize("max_fpr", [0.3, 0.05, 0.5, 1.0])
def test_partial_auc_matches_scikit_learn(engine, max_fpr):
    frame = make_predictions("multilabel", 27, complete=True)
    got = me.evaluate(frame, ["roc_auc"], engine=engine, average=["none", "micro"],
                      max_fpr=max_fpr)
    assert got["max_fpr"].to_list() == [max_fpr] * got.height
    for keys, y, s, w in _groups(frame, []):
        value = _value(got.filter(pl.col("average").is_null()), keys)
        assert math.isclose(value, skm.roc_auc_score(y, s, sample_weight=w, max_fpr=max_fpr),
                            rel_tol=1e-12, abs_tol=1e-15)
    wide = frame.pivot(on="label", index=["sample", "weight"], values=["score", "truth"])
    labels = sorted(frame["label"].unique())
    truth = wide.select(f"truth_{lab}" for lab in labels).to_numpy().astype(int)
    score = wide.select(f"score_{lab}" for lab in labels).to_numpy()
    micro = got.filter(pl.col("average") == "micro")["value"].item()
    assert math.isclose(micro, skm.roc_auc_score(truth, score, average="micro",
                                                 sample_weight=wide["weight"].to_numpy(),
                                                 max_fpr=max_fpr), rel_tol=1e-12, abs_tol=1e-15)


@pytest.mark.parametrize("scale", [1e300, 1e-300])
def test_no_metric_depends_on_the_scale_of_the_weights(engine, scale):
    # P * N of raw weights overflows at 1e300 (NaN) and underflows at 1e-300: rates do not
    frame = pl.DataFrame({"sample": range(4), "label": "a", "score": [0.5, 0.0, 0.5, 0.0],
                          "truth": [True, True, False, False]})
    metrics = ["roc_auc", "average_precision", "break_even", "max_f1", "precision_at_recall",
               "recall_at_precision", "precision", "recall", "f1"]
    unit = me.evaluate(frame.with_columns(weight=pl.lit(1.0)), metrics, engine=engine,
                       min_recall=0.5, min_precision=0.5)
    scaled = me.evaluate(frame.with_columns(weight=pl.lit(scale)), metrics, engine=engine,
                         min_recall=0.5, min_precision=0.5)
    assert _value(scaled, {"metric": "roc_auc"}) == pytest.approx(0.5, rel=1e-12)
    assert _value(scaled, {"metric": "average_precision"}) == pytest.approx(0.5, rel=1e-12)
    assert scaled.select(pl.exclude("value")).equals(unit.select(pl.exclude("value")))
    for got, want in zip(scaled["value"], unit["value"], strict=True):
        assert want is not None and got == pytest.approx(want, rel=1e-12)


def test_break_even_without_ties_is_the_r_precision(engine):
    rng = np.random.default_rng(5)
    n = 40
    truth = rng.random(n) < 0.3
    score = rng.permutation(n) / n  # distinct scores, unit weights
    frame = pl.DataFrame({"sample": range(n), "label": "a", "score": score, "truth": truth})
    r = int(truth.sum())
    r_precision = truth[np.argsort(-score)][:r].sum() / r
    got = me.evaluate(frame, ["break_even"], engine=engine)["value"].item()
    assert got == pytest.approx(r_precision, rel=1e-12)
    assert break_even(truth, score, np.ones(n)) == pytest.approx(r_precision, rel=1e-12)


@WITH_SPARK
def test_break_even_interpolates_inside_a_tied_block(engine):
    # P = 2; the top block (one positive) predicts 1, the tied block {pos, neg, neg} crosses P:
    # tp = 1 + 1 * (2 - 1) / 3 at predicted weight 2
    frame = pl.DataFrame({"sample": range(5), "label": "a",
                          "score": [0.9, 0.5, 0.5, 0.5, 0.1],
                          "truth": [True, True, False, False, False]})
    got = me.evaluate(frame, ["break_even"], engine=engine)["value"].item()
    assert got == pytest.approx((1 + 1 / 3) / 2, rel=1e-12)


def test_ranking_metrics_engines_agree():
    frame = make_predictions("multilabel", 28)
    metrics = ["roc_auc", "average_precision", "break_even"]
    averages = ["none", "micro", "macro", "weighted", "macro_std"]
    for max_fpr in (None, 0.4):
        results = [me.evaluate(frame, metrics, by=["region", "model"], engine=e,
                               average=averages, max_fpr=max_fpr) for e in local_engines()]
        assert results[0]["value"].null_count() < results[0].height
        assert_same_rows(results[0], results[1], ["region", "model"], rel=1e-12)


# -- many small segments: every edge of a label's run ---------------------------------------------


def _small_segments(weighted: bool) -> pl.DataFrame:
    """Multilabel rows (2 labels) in many small segments, so that a label's run of rows in the
    curve table starts and ends at every kind of edge: a one-sample segment, a one-class one,
    one whose scores all tie, zero weights first, inside a tied block and last, a segment of
    weight 0, a null segment, and random small ones with ties and weights (without the weight
    column unless ``weighted``: polars then counts in integers)."""
    rng = np.random.default_rng(31)
    segments: dict[str | None, list[tuple]] = {  # (score a, truth a, score b, truth b, weight)
        "one_sample": [(0.3, True, 0.7, False, 1.0)],
        "one_class": [(0.2, True, 0.4, False, 1.0), (0.6, True, 0.4, False, 2.0),
                      (0.6, True, 0.9, False, 0.5)],
        "all_tied": [(0.5, True, 0.5, False, 1.0), (0.5, False, 0.5, True, 2.0),
                     (0.5, True, 0.5, True, 0.0), (0.5, False, 0.5, False, 0.5)],
        "zero_edges": [(0.9, True, 0.1, False, 0.0), (0.8, True, 0.8, True, 1.0),
                       (0.8, False, 0.8, False, 0.0), (0.7, False, 0.3, True, 2.0),
                       (0.1, True, 0.9, False, 0.0)],
        "weightless": [(0.4, True, 0.4, False, 0.0), (0.2, False, 0.6, True, 0.0)],
    }
    for k in range(40):
        n = int(rng.integers(1, 7))
        segments[None if k == 0 else f"r{k:02d}"] = [
            (float(rng.integers(0, 5)) / 4, bool(rng.random() < 0.4),
             float(rng.integers(0, 5)) / 4, bool(rng.random() < 0.4),
             float(rng.choice([0.0, 0.5, 1.0, 3.0]))) for _ in range(n)]
    rows = []
    for region, samples in segments.items():
        for i, (score_a, truth_a, score_b, truth_b, weight) in enumerate(samples):
            sample = f"{region}-{i}"
            rows += [(sample, "a", score_a, truth_a, weight, region),
                     (sample, "b", score_b, truth_b, weight, region)]
    frame = pl.DataFrame(rows, orient="row",
                         schema=["sample", "label", "score", "truth", "weight", "region"])
    return frame if weighted else frame.drop("weight")


@pytest.mark.parametrize("weighted", [True, False])
def test_curve_table_of_many_small_segments(weighted):
    """The curve table keeps each (segment, label) apart however small: counts equal
    scikit-learn's at every distinct score, both engines agree row for row."""
    frame = _small_segments(weighted)
    tables = [curve(frame, "roc", by=["region"], task="multilabel", engine=e,
                    drop_intermediate=False).sort("region", "label", "threshold",
                                                  descending=[False, False, True])
              for e in local_engines()]
    assert_frames_close(tables[0], tables[1])
    checked = set()
    for (region, label), part in frame.partition_by("region", "label", as_dict=True).items():
        y, s = part["truth"].to_numpy(), part["score"].to_numpy()
        w = part["weight"].to_numpy() if weighted else np.ones(part.height)
        rows = tables[0].filter(pl.col("region").eq_missing(region), pl.col("label") == label)
        if w.sum() == 0:  # no weight: the origin alone
            assert rows["threshold"].to_list() == [math.inf]
            continue
        tns, fps, fns, tps, thresholds = skm.confusion_matrix_at_thresholds(
            y, s, sample_weight=w)
        _close(rows["threshold"].to_list(), np.concatenate([[math.inf], thresholds]),
               f"{region, label} thresholds")
        origins = {"tn": w[~y].sum(), "fn": w[y].sum(), "tp": 0.0, "fp": 0.0}
        for column, want in zip(("tn", "fp", "fn", "tp"), (tns, fps, fns, tps), strict=True):
            _close(rows[column].to_list(), np.concatenate([[origins[column]], want]),
                   f"{region, label} {column}")
        checked.add((region, label))
    assert len(checked) > 80 and (None, "a") in checked and ("zero_edges", "b") in checked
    assert weighted or len(checked) == 2 * 45


@pytest.mark.parametrize("weighted", [True, False])
def test_ranking_metrics_of_many_small_segments(engine, weighted):
    frame = _small_segments(weighted)
    metrics = ["roc_auc", "average_precision"]
    got = me.evaluate(frame, metrics, by=["region"], task="multilabel", engine=engine,
                      average=["none", "micro", "macro"])
    want = pl.concat([expected(frame, "multilabel", m, ("none", "micro", "macro"), ["region"],
                               {}) for m in metrics], how="diagonal_relaxed")
    assert got.filter(pl.col("region").is_null())["value"].null_count() < 6
    assert_same_rows(got, want, ["region"])


# -- one-vs-one multiclass AUC ---------------------------------------------------------------------

def _probabilities(seed: int, n_samples: int = 80, n_classes: int = 4) -> pl.DataFrame:
    """Unweighted multiclass probabilities that sum to 1 per sample, with ties, in two
    segments; segment "b" has no sample of class 3 (its pairs with class 3 are skipped)."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(1, 5, size=(n_samples, n_classes)).astype(float)
    proba = raw / raw.sum(axis=1, keepdims=True)
    segment = np.where(np.arange(n_samples) % 2 == 0, "a", "b")
    true = rng.integers(0, n_classes, size=n_samples)
    true[segment == "b"] = rng.integers(0, n_classes - 1, size=(segment == "b").sum())
    return pl.DataFrame([(i, j, float(proba[i, j]), bool(true[i] == j), str(segment[i]))
                         for i in range(n_samples) for j in range(n_classes)], orient="row",
                        schema=["sample", "label", "score", "truth", "segment"])


@pytest.mark.parametrize("average", ["macro", "weighted"])
def test_ovo_matches_scikit_learn_on_probabilities(engine, average):
    frame = _probabilities(41)
    got = me.evaluate(frame, ["roc_auc_ovo"], by="segment", task="multiclass", engine=engine,
                      average=average)
    for segment, part in frame.partition_by("segment", as_dict=True).items():
        wide = part.pivot(on="label", index="sample", values=["score", "truth"]).sort("sample")
        labels = sorted(part["label"].unique())
        score = wide.select(f"score_{lab}" for lab in labels).to_numpy()
        truth = wide.select(f"truth_{lab}" for lab in labels).to_numpy()
        y = np.asarray(labels)[truth.argmax(axis=1)]
        want = skm.roc_auc_score(y, score, multi_class="ovo", average=average, labels=labels)
        value = got.filter(pl.col("segment") == segment[0])["value"].item()
        assert math.isclose(value, want, rel_tol=1e-12, abs_tol=1e-15), (segment, value, want)


def test_ovo_engines_agree_and_pair_counts_sql_equals_polars():
    frame = make_predictions("multiclass", 42)
    results = [me.evaluate(frame, ["roc_auc_ovo"], by=["region", "model"], engine=e,
                           average=["macro", "weighted"]) for e in local_engines()]
    assert results[0]["value"].null_count() < results[0].height
    assert_same_rows(results[0], results[1], ["region", "model"], rel=1e-12)

    predictions = frame.select("sample", "label", "score", "truth", "weight",
                               segment=pl.struct("region", "model"))
    con = duckdb.connect()
    con.register("predictions", predictions)
    from_sql = con.sql(queries.load("pair_counts")).pl()
    from_polars = plans.pair_counts(predictions.lazy()).collect()
    keys = ["segment", "label", "truth_label", "score"]
    assert from_sql.height > 0
    assert_frames_close(from_sql.sort(keys), from_polars.select(from_sql.columns).sort(keys))


# -- tiny adversarial inputs -----------------------------------------------------------------------

@st.composite
def _tiny(draw: st.DrawFn, task: str) -> pl.DataFrame:
    """1-6 samples, 1-3 labels, scores on a coarse grid (ties), weights 0, 1 or 2."""
    n_samples, n_labels = draw(st.integers(1, 6)), draw(st.integers(1, 3))
    if task == "multiclass":
        n_labels = max(n_labels, 2)
    rows = []
    for i in range(n_samples):
        weight = draw(st.sampled_from([0.0, 1.0, 2.0])) if i else 1.0
        true = draw(st.integers(0, n_labels - 1))
        for j in range(n_labels):
            truth = j == true if task == "multiclass" else draw(st.booleans())
            rows.append((i, f"l{j}", draw(st.sampled_from([0.0, 0.5, 1.0])), truth, weight))
    return pl.DataFrame(rows, orient="row", schema=["sample", "label", "score", "truth", "weight"])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=_tiny("multilabel"), max_fpr=st.sampled_from([None, 0.5]))
def test_ranking_metrics_on_tiny_inputs(frame, max_fpr):
    params = {"max_fpr": max_fpr}
    averages = ("none", "micro", "macro", "weighted", "macro_std")
    metrics = ["roc_auc", "average_precision", "break_even"]  # one request: one family
    want = pl.concat([expected(frame, "multilabel", m, averages, [], params) for m in metrics],
                     how="diagonal_relaxed")
    for engine in local_engines():
        got = me.evaluate(frame, metrics, task="multilabel", engine=engine,
                          average=list(averages), max_fpr=max_fpr)
        assert_same_rows(got, want, [])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=_tiny("multiclass"))
def test_ovo_on_tiny_inputs(frame):
    want = expected(frame, "multiclass", "roc_auc_ovo", ("macro", "weighted"), [], {})
    for engine in local_engines():
        got = me.evaluate(frame, ["roc_auc_ovo"], task="multiclass", engine=engine,
                          average=["macro", "weighted"])
        assert_same_rows(got, want, [])


@WITH_SPARK
@pytest.mark.parametrize("bins", [10, 4])
def test_binned_ranking_metrics_equal_the_oracle_on_binned_scores(engine, bins):
    """Binned AUC, average precision and break-even, weighted, with every average, are the
    oracle's exact values on the scores moved down to the grid."""
    frame = _continuous(33)
    binned = frame.with_columns(score=pl.Series(_binned(frame["score"].to_numpy(), bins)))
    averages = ("none", "micro", "macro", "weighted", "macro_std")
    params = {**DEFAULT_PARAMS, "bins": bins}
    for metric in ("roc_auc", "average_precision", "break_even"):
        got = me.evaluate(frame, metric, by="region", engine=engine, average=list(averages),
                          task="multilabel", bins=bins)
        want = expected(binned, "multilabel", metric, averages, ["region"], params)
        assert_same_rows(got, want, ["region"])
