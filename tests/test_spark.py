"""What only the Spark engine has: its inputs (a Spark DataFrame, a catalog table, parquet read by
Spark, the command line), a real model's multilabel predictions equal to scikit-learn per
(segment, label), and the plan of a request: one scan of the source per family of statistics.

The metrics themselves run on Spark through the shared test bodies (``WITH_SPARK``: the
registry's oracle, the bad-input catalogue, curves, checks).
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from sklearn import metrics as skm
from sklearn.datasets import make_multilabel_classification
from sklearn.linear_model import LogisticRegression
from sklearn.multiclass import OneVsRestClassifier

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.engines.spark import SparkEngine
from tests.data import make_predictions
from tests.helpers import assert_frames_close, assert_same_rows


def _model_predictions(decimals: int | None) -> pl.DataFrame:
    """A logistic model's probabilities on held-out multilabel data, long, two segments;
    ``decimals`` rounds them (ties, as a model serving rounded scores gives)."""
    x, y = make_multilabel_classification(n_samples=400, n_features=12, n_classes=5,
                                          random_state=7)
    model = OneVsRestClassifier(LogisticRegression(max_iter=500)).fit(x[:200], y[:200])
    proba = model.predict_proba(x[200:])
    if decimals is not None:
        proba = proba.round(decimals)
    n, k = proba.shape
    return pl.DataFrame({
        "sample": np.repeat(np.arange(n), k),
        "label": np.tile([f"tag{j}" for j in range(k)], n),
        "score": proba.ravel(),
        "truth": y[200:].ravel().astype(bool),
        "site": np.repeat(np.where(x[200:, 0] > np.median(x[200:, 0]), "a", "b"), k),
    })


@pytest.mark.parametrize("decimals", [None, 2])
def test_a_real_models_multilabel_predictions_equal_scikit_learn(spark, decimals):
    frame = _model_predictions(decimals)
    table = spark.createDataFrame(frame.to_arrow())
    got = me.evaluate(table, ["roc_auc", "average_precision"], by="site", average="none",
                      engine="spark")
    checked = 0
    for (site, label), group in frame.group_by(["site", "label"]):
        y, s = group["truth"].to_numpy(), group["score"].to_numpy()
        for metric, oracle in (("roc_auc", skm.roc_auc_score),
                               ("average_precision", skm.average_precision_score)):
            value = got.filter(site=site, label=label, metric=metric)["value"].item()
            assert math.isclose(value, oracle(y, s), rel_tol=1e-12), (site, label, metric)
            checked += 1
    assert checked == 2 * 2 * 5


def test_inputs_a_table_a_parquet_lake_and_the_command_line(spark, tmp_path, capsys):
    frame = make_predictions("multilabel", 41)
    want = me.evaluate(frame, ["f1", "roc_auc"], by="region", engine="duckdb")
    before = _views(spark)
    lake = tmp_path / "lake"
    for (region,), part in frame.group_by(["region"]):
        (lake / f"region={region}").mkdir(parents=True)
        part.drop("region").write_parquet(lake / f"region={region}" / "part.parquet")
    spark.createDataFrame(frame.to_arrow()).createOrReplaceTempView("mleval_test_preds")
    try:
        for source in ("mleval_test_preds", str(lake), str(lake / "*" / "*.parquet")):
            got = me.evaluate(source, ["f1", "roc_auc"], by="region", engine="spark",
                              connection=spark)
            assert_same_rows(got, want, ["region"])
    finally:
        spark.catalog.dropTempView("mleval_test_preds")
    assert main(["evaluate", str(lake), "--metric", "roc_auc", "--by", "region",
                 "--engine", "spark", "--format", "csv"]) == 0
    printed = pl.read_csv(capsys.readouterr().out.encode())
    assert_same_rows(printed, want.filter(metric="roc_auc"), ["region"])
    assert _views(spark) == before  # nothing of the runs is left in the session's catalog


def _views(spark) -> set[str]:
    # SHOW VIEWS: catalog.listTables() fails on views that other tests name with hostile text
    return {r.viewName for r in spark.sql("SHOW VIEWS").collect()}


def test_one_scan_of_the_source_per_family_of_statistics(spark, tmp_path, monkeypatch):
    """The plans of one request (checks, then the curve, the decision counts and the
    probability sums), taken here from every frame the engine computes (persists or
    collects): each statistics step reads the parquet source once, the final steps read only
    what the steps kept. The exact curve's blocks are a view that ranked_points' final SELECT
    reads: their plan is part of that step's."""
    path = tmp_path / "preds.parquet"
    make_predictions("multilabel", 42).write_parquet(path)
    plans: dict[str, list[str]] = {}

    def planned(method):  # method(self, step, ..., frame): the plan of frame, by step
        def run(self: SparkEngine, step: str, *args, **kwargs):
            plans.setdefault(step, []).append(
                args[-1]._jdf.queryExecution().executedPlan().toString())
            return method(self, step, *args, **kwargs)
        return run

    for method in ("_persist", "_collect"):
        monkeypatch.setattr(SparkEngine, method, planned(getattr(SparkEngine, method)))
    me.evaluate(str(path), ["roc_auc", "f1", "log_loss"], by="region", engine="spark")
    scans = {step: sum(p.count("FileScan parquet") for p in steps)
             for step, steps in plans.items()}
    assert scans["ranked_points (sorted blocks)"] == 1  # the exact curve: one scan, sorted
    assert scans["probability_sums"] == 1
    # the ROC AUC alone reads no curve in the request's plan: the decisions count at the
    # threshold in one scan of their own (registry.FUSED fuses them onto a curve a metric reads)
    assert scans["threshold_counts"] == 1
    for step in ("ranked_points", "ranking_metrics", "decision_metrics",
                 "probability_metrics"):
        assert scans[step] == 0, step
    # the checks: the labels, the values, the rows with a bad value (the examples: a filtered
    # pass, cheaper on DuckDB and polars than a (sample, label) key built for every row in the
    # values' pass), the per-sample counts and the labels past the 64th (later_words: a join
    # with no rows when there are none), one pass each
    assert scans["validate_summary"] == 5
    assert sum(scans.values()) == 8


def test_a_binned_sweep_equals_duckdb(spark):
    """bins=N: each score placed on the grid by arithmetic, the counts running sums over the
    buckets (threshold_buckets, listed_points), as on DuckDB."""
    frame = make_predictions("multilabel", 3, n_samples=40)
    options = {"by": "region", "bins": 4, "average": ["none", "macro"]}
    want = me.evaluate(frame, ["f1", "precision", "tp"], **options)
    got = me.evaluate(frame, ["f1", "precision", "tp"], engine="spark", **options)
    assert_same_rows(got.with_columns(pl.col("threshold").cast(pl.String)),
                     want.with_columns(pl.col("threshold").cast(pl.String)),
                     ["region", "threshold"])


def test_settings_for_the_request_and_the_users_back_after(spark, monkeypatch):
    """On a local master without a shuffle partition count of the user's, a request runs with
    two partitions per core (not Spark's 200) and ANSI mode off; both settings are as they
    were once it is done, and a count the user set is left alone."""
    partitions, ansi = "spark.sql.shuffle.partitions", "spark.sql.ansi.enabled"
    seen: list[tuple[str, str]] = []
    close = SparkEngine.close

    def note_settings(self: SparkEngine) -> None:
        seen.append((self.spark.conf.get(partitions), self.spark.conf.get(ansi)))
        close(self)

    monkeypatch.setattr(SparkEngine, "close", note_settings)
    frame = make_predictions("binary", 5, n_samples=20)
    given = spark.conf.get(partitions)
    try:
        spark.conf.unset(partitions)
        spark.conf.set(ansi, "true")
        me.evaluate(frame, ["f1"], engine="spark")
        assert seen[-1] == (str(2 * spark.sparkContext.defaultParallelism), "false")
        assert spark.conf.get(partitions, None) is None
        assert spark.conf.get(ansi) == "true"
        spark.conf.set(partitions, "3")
        me.evaluate(frame, ["f1"], engine="spark")
        assert seen[-1][0] == "3"
        assert spark.conf.get(partitions) == "3"
    finally:
        spark.conf.set(partitions, given)
        spark.conf.unset(ansi)


def test_a_group_across_partitions_and_batches_equals_duckdb(spark):
    """One (segment, label) spread over several range partitions and, within each, over many
    Arrow batches of a few rows: the exact curve's tie blocks held back across batch ends, its
    running sums carried across batches and shifted across partitions (zero weights, tied
    scores and a null segment included)."""
    rng = np.random.default_rng(11)
    n = 600
    frame = pl.DataFrame({
        "sample": np.arange(n), "label": "x",
        "score": rng.integers(0, 40, n) / 40,  # 41 distinct scores: ties cross batch ends
        "truth": rng.random(n) < 0.4,
        "weight": np.where(rng.random(n) < 0.1, 0.0, rng.uniform(0.5, 3.0, n)),
        "site": rng.choice(["a", "b", None], n, p=[0.5, 0.3, 0.2]),
    })
    options = {"by": "site", "task": "binary"}
    batch, partitions = "spark.sql.execution.arrow.maxRecordsPerBatch", \
        "spark.sql.shuffle.partitions"
    given = {key: spark.conf.get(key, None) for key in (batch, partitions)}
    try:
        spark.conf.set(batch, "7")
        spark.conf.set(partitions, "5")
        got = me.evaluate(frame, ["roc_auc", "average_precision", "f1"], engine="spark",
                          **options)
        curve = me.curve(frame, "pr", engine="spark", **options)
    finally:
        for key, value in given.items():
            spark.conf.unset(key) if value is None else spark.conf.set(key, value)
    assert_same_rows(got, me.evaluate(frame, ["roc_auc", "average_precision", "f1"],
                                      **options), ["site"])
    want = me.curve(frame, "pr", **options)
    assert curve.height == want.height > 3 * 30
    keys = [c for c in want.columns if c in ("site", "label", "threshold")]
    assert_frames_close(curve.sort(keys, nulls_last=True), want.sort(keys, nulls_last=True))


def test_the_curve_without_the_checks_numbers_its_own_groups(spark):
    """The exact curve numbers its (segment, label) groups from the checks' table of them; an
    engine asked for the curve without the checks first (as a caller of the engine may) takes
    them from the rows, with the same curve (a null segment included)."""
    from mleval_sql.engines import ENGINES
    from mleval_sql.registry import CURVES
    from mleval_sql.schema import Columns

    frame = make_predictions("multilabel", 8, n_samples=60).with_columns(
        pl.when(pl.col("sample").hash(seed=1) % 4 == 0).then(None)
        .otherwise(pl.col("region")).alias("region"))
    params = {"bins": None, "kind": "pr", "drop_intermediate": False,
              "max_points": None}
    steps = CURVES["pr"]
    curves = []
    for checked in (True, False):
        entry = ENGINES["spark"]
        runner = entry.make(entry.read(frame, spark), Columns(), "weight", ["region"])
        try:
            if checked:
                runner.summary()
            curves.append(runner.results(steps, params)[steps[-1]])
            assert (f"{runner.prefix}validate_summary_segment_labels" in
                    {name for _, name in runner.created}) is checked
        finally:
            runner.close()
    assert curves[0].height > 60
    assert curves[0]["segment"].null_count() > 0  # one segment column: the engine calls it segment
    keys = ["segment", "label", "threshold"]
    assert_frames_close(curves[1].sort(keys, nulls_last=True),
                        curves[0].sort(keys, nulls_last=True))


def test_a_spark_error_is_an_input_error_in_one_line(spark, tmp_path):
    """What Spark raises while evaluating reaches the caller as InputError, its cause (the
    JVM's exception) in one line; the Spark error is its __cause__."""
    bad = tmp_path / "bad.parquet"
    bad.write_bytes(b"PAR1" + b"x" * 100 + b"PAR1")  # parquet's magic bytes, no footer
    with pytest.raises(me.InputError, match=r"Spark could not run the request: .*footer") as caught:
        me.evaluate(str(bad), "roc_auc", engine="spark", task="binary")
    assert "\n" not in str(caught.value) and caught.value.__cause__ is not None
