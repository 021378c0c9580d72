"""Threshold sweeps and operating points, on both engines.

A sweep (``thresholds=`` or ``bins=``) must give, at each threshold, exactly the rows of the
single-threshold path (``threshold=t``): ties at the threshold, thresholds above and below every
score, zero weights, segments, binary and multilabel. Operating points (max_f1,
precision_at_recall, recall_at_precision) must choose the oracle's threshold
(tests/oracle_operating.py), and seed 004's homework ROC points come out of ``curve("sweep")``.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from polars.testing import assert_frame_equal

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.engines import local_engines
from mleval_sql.engines import polars as plans
from mleval_sql.schema import InputError
from tests.data import make_predictions
from tests.helpers import WITH_SPARK, assert_frames_close, assert_same_rows
from tests.oracle import _segment, expected
from tests.oracle_operating import operating_point
from tests.test_metrics import DEFAULT_PARAMS

SEEDS = Path(__file__).resolve().parent.parent / "fixtures" / "seeds"
SWEPT = ["f1", "precision", "recall", "accuracy", "mcc", "specificity", "tp", "hamming_loss"]
AVERAGES = ["none", "micro", "macro"]
#: on the data's 0.1 grid: 0.0, 0.3, 0.5, 0.7 and 1.0 are tied scores; -0.5 lies below every
#: score, 1.2 above; 0.35 between two scores
THRESHOLDS = [-0.5, 0.0, 0.3, 0.35, 0.5, 0.7, 1.0, 1.2]
OPERATING = ["max_f1", "precision_at_recall", "recall_at_precision"]
#: The column of the threshold an operating point reaches (``threshold`` is the one given).
AT = "operating_threshold"

#: (task, seed, by, weighted, params)
CASES = [
    pytest.param("binary", 1, ["region"], True, {}, id="binary-weighted-region"),
    pytest.param("binary", 2, [], False, {"zero_division": 0}, id="binary-plain"),
    pytest.param("multilabel", 7, ["region"], True, {}, id="multilabel-weighted-region"),
    pytest.param("multilabel", 8, ["region", "model"], True, {"zero_division": 1},
                 id="multilabel-two-segments"),
    pytest.param("multilabel", 9, [], False, {}, id="multilabel-plain"),
]


def _frame(task: str, seed: int, by: list[str], weighted: bool) -> pl.DataFrame:
    return make_predictions(task, seed, weighted=weighted, int_ids=seed % 2 == 0,
                            complete=not by)


@pytest.mark.parametrize(("task", "seed", "by", "weighted", "params"), CASES)
def test_sweep_equals_each_single_threshold(engine, task, seed, by, weighted, params):
    frame = _frame(task, seed, by, weighted)
    scores = set(frame["score"].to_list())
    assert {0.0, 0.3, 0.5, 0.7, 1.0} <= scores and not {-0.5, 0.35, 1.2} & scores
    common = {"by": by, "task": task, "engine": engine, "average": AVERAGES, **params}
    swept = me.evaluate(frame, SWEPT, thresholds=THRESHOLDS, **common)
    assert sorted(set(swept["threshold"].to_list())) == THRESHOLDS
    for t in THRESHOLDS:
        single = me.evaluate(frame, SWEPT, threshold=t, **common)
        at_t = swept.filter(pl.col("threshold") == t)
        assert at_t.height == single.height
        assert_same_rows(at_t, single, by, rel=1e-12)


@pytest.mark.parametrize("bins", [10, 4, 7])
@pytest.mark.parametrize(("task", "seed", "by", "weighted", "params"), CASES[::2])
def test_bins_equal_the_listed_grid(engine, task, seed, by, weighted, params, bins):
    frame = _frame(task, seed, by, weighted)
    common = {"by": by, "task": task, "engine": engine, "average": AVERAGES, **params}
    binned = me.evaluate(frame, SWEPT, bins=bins, **common)
    listed = me.evaluate(frame, SWEPT, thresholds=[k / bins for k in range(bins + 1)], **common)
    assert binned["bins"].unique().to_list() == [bins]
    assert binned.height == listed.height
    assert_same_rows(binned, listed, [*by, "threshold"], rel=1e-12)


def test_sweep_of_one_threshold_equals_the_threshold_path_exactly(engine):
    frame = _frame("multilabel", 7, ["region"], True)
    common = {"by": ["region"], "task": "multilabel", "engine": engine, "average": "none"}
    swept = me.evaluate(frame, ["tp", "fp", "fn", "tn"], thresholds=[0.5], **common)
    single = me.evaluate(frame, ["tp", "fp", "fn", "tn"], threshold=0.5, **common)
    # weights are multiples of 0.5: sums are exact
    assert_frame_equal(swept, single, check_exact=True)


# -- the statistics tables: threshold_buckets, sweep_points ----------------------------------

def _predictions(task: str, seed: int) -> pl.DataFrame:
    frame = make_predictions(task, seed)
    return frame.select("sample", "label", "score", "weight",
                        truth=pl.col("truth").cast(pl.Boolean),
                        segment=pl.struct("region", "model"))


def _sql(step: str, relation: str, frame: pl.DataFrame, **params: object) -> pl.DataFrame:
    con = duckdb.connect()
    con.register(relation, frame)
    sql = queries.load(step)
    return con.sql(sql, params={p: params[p] for p in queries.parameters(sql)}).pl()


@pytest.mark.parametrize("bins", [None, 10, 3])
@pytest.mark.parametrize("task", ["binary", "multilabel"])
def test_sweep_tables_agree_between_engines_and_with_direct_counts(task, bins):
    predictions = _predictions(task, 3)
    thresholds = THRESHOLDS if bins is None else [k / bins for k in range(bins + 1)]
    keys = ["segment", "label", "threshold"]
    buckets = _sql("threshold_buckets", "predictions", predictions, thresholds=thresholds,
                   bins=bins)
    from_polars = plans.threshold_buckets(predictions.lazy(), thresholds=thresholds,
                                          bins=bins).collect()
    assert_frames_close(buckets.sort(keys), from_polars.sort(keys).select(buckets.columns))
    n_keys = predictions.select("segment", "label").n_unique()
    assert buckets.height <= n_keys * (len(thresholds) + 1)  # never a row per distinct score
    points = _sql("listed_points", "threshold_buckets", buckets, thresholds=thresholds)
    points_polars = plans.listed_points(buckets.lazy(), thresholds=thresholds).collect()
    assert points.height == n_keys * len(thresholds)
    assert_frames_close(points.sort(keys), points_polars.sort(keys).select(points.columns))
    score, weight, truth = pl.col("score"), pl.col("weight"), pl.col("truth")
    for t in thresholds:  # the same counts summed directly from the rows, threshold by threshold
        direct = predictions.group_by("segment", "label").agg(
            tp=weight.filter(truth & (score >= t)).sum(),
            fp=weight.filter(~truth & (score >= t)).sum(),
            fn=weight.filter(truth & (score < t)).sum(),
            tn=weight.filter(~truth & (score < t)).sum())
        got = points.filter(pl.col("threshold") == t).drop("threshold")
        assert_frames_close(got.sort("segment", "label"),
                           direct.sort("segment", "label").select(got.columns))


def _operators(node: dict) -> list[dict]:
    found = [node] if "children" in node else []
    for child in node.get("children", []) + node.get("operator", []):
        found += _operators(child)
    return found


@pytest.mark.parametrize("bins", [None, 100])
def test_a_sweep_scans_the_rows_once_into_buckets(bins):
    """No operator of the DuckDB plans handles more rows than the input (no table of distinct
    scores, no join of the rows with the thresholds), and the buckets are at most T + 1 per
    (segment, label). Rows counted by EXPLAIN ANALYZE, nothing timed."""
    n_rows, n_keys = 20_000, 4
    thresholds = [0.1, 0.3, 0.5] if bins is None else [k / bins for k in range(bins + 1)]
    predictions = pl.DataFrame({
        "segment": [k // 2 for k in range(n_keys) for _ in range(n_rows // n_keys)],
        "label": [f"l{k % 2}" for k in range(n_keys) for _ in range(n_rows // n_keys)],
        "score": [(i * 7919 % n_rows) / n_rows for i in range(n_rows)],  # all distinct
        "truth": [i % 3 == 0 for i in range(n_rows)], "weight": 1.0})
    con = duckdb.connect()
    con.register("predictions", predictions)
    plan = con.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + queries.load("threshold_buckets"),
                       {"thresholds": thresholds, "bins": bins})
    operators = _operators(json.loads(plan.fetchall()[0][1]))
    rows = [op.get("intermediate_rows", op.get("operator_cardinality")) for op in operators]
    assert len(operators) > 2 and all(r is not None for r in rows)
    assert max(rows) <= n_rows, sorted(rows)[-5:]
    aggregates = [r for op, r in zip(operators, rows, strict=True)
                  if "GROUP_BY" in op.get("type", op.get("operator_type", ""))]
    assert aggregates and max(aggregates) <= n_keys * (len(thresholds) + 1)


def test_sweeps_do_not_build_the_table_of_distinct_scores():
    from mleval_sql.registry import SWEEP
    for task in SWEEP.stats:
        assert "score_counts" not in SWEEP.steps(task)


# -- operating points --------------------------------------------------------------------------

OPERATING_CASES = [
    pytest.param("binary", 1, ["region"], {"min_recall": 0.5, "min_precision": 0.6},
                 id="binary"),
    pytest.param("multiclass", 4, ["region"], {"min_recall": 0.9, "min_precision": 0.3},
                 id="multiclass"),
    pytest.param("multilabel", 7, ["region", "model"], {"min_recall": 0.0, "min_precision": 0.0},
                 id="multilabel-any"),
    pytest.param("multilabel", 10, ["region"], {"min_recall": 1.0, "min_precision": 1.0},
                 id="multilabel-all"),
]


def _expected_points(frame: pl.DataFrame, by: list[str], params: dict) -> pl.DataFrame:
    """Per-label rows (threshold and value) from the oracle."""
    all_labels = sorted(frame["label"].unique().to_list())
    rows = []
    for key, part in frame.partition_by(by, as_dict=True).items():
        seg = _segment(part, all_labels, params)
        for metric in OPERATING:
            chosen = {label: operating_point(seg, j, metric) for j, label in enumerate(seg.labels)}
            rows += [(*key, metric, label, *chosen.get(label, (None, None)))
                     for label in all_labels]
    return pl.DataFrame(rows, orient="row", schema=[*by, "metric", "label", "threshold", "value"])


@pytest.mark.parametrize(("task", "seed", "by", "params"), OPERATING_CASES)
def test_operating_points_choose_the_oracles_threshold(engine, task, seed, by, params):
    frame = make_predictions(task, seed)
    got = me.evaluate(frame, OPERATING, by=by, task=task, engine=engine,
                      average=["none", "macro"], **params)
    macro = got.filter(pl.col("average") == "macro")
    assert macro.height > 0 and macro[AT].null_count() == macro.height
    per_label = got.filter(pl.col("average").is_null()).select(*by, "metric", "label",
                                                              pl.col(AT).alias("threshold"),
                                                              "value")
    want = _expected_points(frame, by, params)
    keys = [*by, "metric", "label"]
    joined = per_label.join(want, on=keys, how="full", nulls_equal=True, coalesce=True)
    assert joined.height == per_label.height == want.height
    assert joined["threshold"].null_count() < joined.height  # some points are chosen
    assert joined.filter(pl.col("threshold").ne_missing(pl.col("threshold_right"))).is_empty()
    assert joined.filter(
        ((pl.col("value") - pl.col("value_right")).abs() > 1e-12)
        | pl.col("value").is_null().ne(pl.col("value_right").is_null())).is_empty()


def _hand_frame() -> pl.DataFrame:
    # label "a": F1 ties at 2/3 between thresholds 0.9 (tp 1, fp 0, fn 1) and 0.6 (tp 2, fp 2,
    # fn 0); the zero-weight 0.95 makes no point. Label "b" has no positive weight.
    scores = {"a": [0.95, 0.9, 0.8, 0.7, 0.6], "b": [0.95, 0.9, 0.8, 0.7, 0.6]}
    truth = {"a": [True, True, False, False, True], "b": [True, False, False, False, False]}
    weight = [0.0, 1.0, 1.0, 1.0, 1.0]
    return pl.DataFrame([(i, lab, scores[lab][i], truth[lab][i], weight[i])
                         for lab in ("a", "b") for i in range(5)], orient="row",
                        schema=["sample", "label", "score", "truth", "weight"])


@pytest.mark.parametrize(("metric", "params", "threshold", "value"), [
    ("max_f1", {}, 0.9, 2 / 3),  # a tie: the highest threshold
    ("precision_at_recall", {"min_recall": 1.0}, 0.6, 0.5),
    ("precision_at_recall", {"min_recall": 0.5}, 0.9, 1.0),
    ("precision_at_recall", {"min_recall": 0.0}, 0.9, 1.0),
    ("recall_at_precision", {"min_precision": 0.5}, 0.6, 1.0),
    ("recall_at_precision", {"min_precision": 0.6}, 0.9, 0.5),
    ("recall_at_precision", {"min_precision": 1.0}, 0.9, 0.5),
])
def test_operating_points_by_hand(engine, metric, params, threshold, value):
    got = me.evaluate(_hand_frame(), [metric], task="multilabel", engine=engine,
                      average=["none", "macro"], **params)
    rows = {(r["average"], r["label"]): (r[AT], r["value"])
            for r in got.iter_rows(named=True)}
    assert rows[(None, "a")] == (threshold, pytest.approx(value, rel=1e-15))
    assert rows[(None, "b")] == (None, None)  # no positive weight
    assert rows[("macro", None)] == (None, pytest.approx(value, rel=1e-15))


def test_recall_at_an_unreachable_precision_is_null(engine):
    frame = _hand_frame().filter(pl.col("label") == "a").with_columns(
        truth=pl.col("score") < 0.85)  # the top score is false: precision never reaches 1
    got = me.evaluate(frame, ["recall_at_precision", "precision_at_recall"], task="binary",
                      engine=engine, min_precision=1.0, min_recall=1.0)
    values = dict(zip(got["metric"], zip(got[AT], got["value"], strict=True),
                      strict=True))
    assert values["recall_at_precision"] == (None, None)
    assert values["precision_at_recall"] == (0.6, 0.75)


# -- curves and errors -------------------------------------------------------------------------

def test_sweep_curve_reproduces_seed_004(engine):
    roc = json.loads((SEEDS / "expected.json").read_text(encoding="utf-8"))["roc_points"]
    table = me.curve(pl.read_csv(SEEDS / roc["fixture"]), kind="sweep", by="model",
                     task="binary", thresholds=roc["thresholds"], engine=engine)
    got = {(r["model"], r["threshold"]): (r["fpr"], r["tpr"])
           for r in table.iter_rows(named=True)}
    want = {(p["model"], float(p["threshold"])): (p["fpr"], p["tpr"]) for p in roc["points"]}
    assert got == want
    assert table.height == len(want)


def test_a_sweep_of_samples_metrics_is_refused(engine):
    frame = make_predictions("multilabel", 7)
    for metrics, average in ((["subset_accuracy"], None), (["f1"], "samples")):
        with pytest.raises(InputError, match="cannot be swept"):
            me.evaluate(frame, metrics, by="region", task="multilabel", engine=engine,
                        average=average, thresholds=[0.3, 0.5])


@pytest.mark.parametrize("metric", ["f1", "accuracy"])
def test_a_sweep_of_multiclass_metrics_is_refused(engine, metric):
    frame = make_predictions("multiclass", 4)
    with pytest.raises(InputError, match="cannot be swept"):
        me.evaluate(frame, [metric], by="region", task="multiclass", engine=engine,
                    thresholds=[0.3, 0.5])


# -- tiny adversarial inputs -------------------------------------------------------------------

@st.composite
def _tables(draw: st.DrawFn) -> pl.DataFrame:
    rows = []
    for i in range(draw(st.integers(1, 5))):
        weight = draw(st.sampled_from([0.0, 1.0, 2.0])) if i else 1.0
        rows += [(i, f"l{j}", draw(st.sampled_from([0.0, 0.5, 1.0])), draw(st.booleans()),
                  weight) for j in range(2)]
    return pl.DataFrame(rows, orient="row", schema=["sample", "label", "score", "truth", "weight"])


@pytest.mark.parametrize("engine_name", local_engines())
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=_tables())
def test_sweeps_of_tiny_tables(engine_name, frame):
    thresholds = [-1.0, 0.0, 0.5, 0.75, 1.0, 2.0]
    common = {"task": "multilabel", "engine": engine_name, "average": AVERAGES}
    swept = me.evaluate(frame, SWEPT, thresholds=thresholds, **common)
    for t in thresholds:
        single = me.evaluate(frame, SWEPT, threshold=t, **common)
        assert_same_rows(swept.filter(pl.col("threshold") == t), single, [], rel=1e-12)


@WITH_SPARK
@pytest.mark.parametrize(("task", "seed", "by", "weighted", "params"), CASES[::2])
def test_sweeps_of_every_decision_metric_equal_the_oracle(engine, task, seed, by, weighted,
                                                          params):
    """Every decision metric, fbeta (beta 2), jaccard and the counts included, weighted, with
    every average (macro_std too), at every threshold of a sweep: the oracle's values there."""
    frame = _frame(task, seed, by, weighted)
    names = ["tp", "fp", "fn", "tn", "support", "accuracy", "precision", "recall", "f1",
             "fbeta", "specificity", "jaccard", "mcc"]
    averages = ("none", "micro", "macro", "weighted", "macro_std")
    swept = me.evaluate(frame, names, thresholds=THRESHOLDS, by=by, task=task, engine=engine,
                        average=list(averages), beta=2.0, **params)
    for t in THRESHOLDS:
        oracle_params = {**DEFAULT_PARAMS, **params, "threshold": t, "beta": 2.0}
        want = pl.concat([expected(frame, task, m, averages, by, oracle_params) for m in names],
                         how="diagonal_relaxed")
        assert_same_rows(swept.filter(pl.col("threshold") == t), want, by)
