"""Property tests: tables drawn by hypothesis, on both engines.

- Every engine equals the oracle (scikit-learn, or hand-worked references) on generated tables
  with ties, scores at the threshold, zero weights, one-class and one-sample segments, and a
  float segment column holding null, NaN, 0.0 and -0.0.
- Every metric is invariant under row permutation, order-keeping label renaming, duplicating
  every sample at half its weight, multiplying every weight by 2^k or 1e±100 (counts scale with
  it), and reading the table from several parquet files or a hive lake. One example applies a
  drawn set of these at once, so that hypothesis shrinks a failure to the transforms at fault.

Each example evaluates one drawn group of metrics (those sharing their averages), which keeps
the suite within a few minutes; the profiles (tests/conftest.py) set how many examples run.
"""

from __future__ import annotations

import math
import random
import tempfile
from pathlib import Path

import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st

import mleval_sql as me
from mleval_sql.domains import RESTRICTED
from mleval_sql.registry import METRICS
from tests.helpers import assert_same_rows
from tests.oracle import expected
from tests.test_metrics import DEFAULT_PARAMS

TASKS = ("binary", "multilabel", "multiclass", "regression")
SCORES = st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.5, 0.75, 0.9, 1.0])  # ties, 0.5 = threshold
TARGETS = st.sampled_from([-2.0, 0.0, 0.5, 1.0, 3.0])
WEIGHTS = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0])
SEGMENTS = st.sampled_from([0.0, -0.0, 1.0, None, math.nan])
#: metrics whose values are sums of weights: they scale with the weights
COUNTS = ("tp", "fp", "fn", "tn", "support", "confusion_matrix")


def metric_groups(task: str) -> list[tuple[tuple[str, ...], list[str]]]:
    """The task's metrics, grouped by the averages they share (one evaluate call each)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, metric in METRICS.items():
        # the tables hold negative and zero targets, which the deviances and log errors refuse
        if task in metric.families and name not in RESTRICTED:
            groups.setdefault(metric.averages(task), []).append(name)
    return sorted(groups.items())


@st.composite
def tables(draw: st.DrawFn, task: str) -> pl.DataFrame:
    """``sample, label, score, truth, weight, seg`` with 1-8 samples in up to 5 segments."""
    n_samples = draw(st.integers(1, 8))
    n_labels = {"binary": 1, "regression": draw(st.integers(1, 2))}.get(
        task, draw(st.integers(2, 4)))
    rows = []
    for i in range(n_samples):
        weight = draw(WEIGHTS) if i else 1.0  # at least one sample counts
        segment = draw(SEGMENTS)
        true = draw(st.integers(0, n_labels - 1))
        for j in range(n_labels):
            if task == "regression":
                truth: object = draw(TARGETS)
                score = draw(TARGETS)
            else:
                truth = j == true if task == "multiclass" else draw(st.booleans())
                score = draw(SCORES)
            rows.append((i, f"l{j}", score, truth, weight, segment))
    return pl.DataFrame(rows, orient="row",
                        schema=["sample", "label", "score", "truth", "weight", "seg"],
                        schema_overrides={"seg": pl.Float64})


def _evaluate(source: object, task: str, names: list[str], averages: tuple[str, ...],
              engine: str, **params: object) -> pl.DataFrame:
    return me.evaluate(source, names, task=task, engine=engine, average=averages or None,
                       by="seg", **{**DEFAULT_PARAMS, **params})


# -- engines against the oracle -------------------------------------------------------------------

@pytest.mark.parametrize("task", TASKS)
@given(data=st.data())
def test_engines_equal_the_oracle(engine, task, data):
    frame = data.draw(tables(task), label="table")
    averages, names = data.draw(st.sampled_from(metric_groups(task)), label="metrics")
    zero_division = data.draw(st.sampled_from([None, 0, 1]), label="zero_division")
    params = {**DEFAULT_PARAMS, "zero_division": zero_division}
    # the oracle sees one segment 0.0 where the table has 0.0 and -0.0 (both engines give 0.0)
    plain = frame.with_columns(seg=pl.when(pl.col("seg") == 0).then(0.0).otherwise("seg"))
    want = pl.concat([expected(plain, task, name, averages or ("none",), ["seg"], params)
                      for name in names], how="diagonal_relaxed")
    got = _evaluate(frame, task, names, averages, engine, zero_division=zero_division)
    assert_same_rows(got, want, ["seg"])


# -- invariances ----------------------------------------------------------------------------------

SCALES = st.one_of(st.integers(-60, 60).map(lambda k: 2.0**k), st.sampled_from([1e100, 1e-100]))
TRANSFORMS = ("permute", "rename", "duplicate", "scale", "parquet files", "hive lake")


def _transformed(frame: pl.DataFrame, transforms: set[str], scale: float, rng: random.Random,
                 folder: Path) -> object:
    """The table after ``transforms``: a frame, a list of parquet files or a lake folder."""
    if "permute" in transforms:
        order = list(range(frame.height))
        rng.shuffle(order)
        frame = frame[order]
    if "rename" in transforms:  # a prefix keeps the labels' order (argmax ties follow it)
        frame = frame.with_columns(label="renamed_" + pl.col("label"))
    if "duplicate" in transforms:
        half = frame.with_columns(pl.col("weight") / 2)
        frame = pl.concat([half, half.with_columns(pl.col("sample") + 1000)])
    if "scale" in transforms:
        frame = frame.with_columns(pl.col("weight") * scale)
    parts = frame.with_columns(part=pl.col("sample") % 3).partition_by("part", as_dict=True)
    if "hive lake" in transforms:
        for (part,), rows in parts.items():
            (folder / f"part={part}").mkdir()
            rows.drop("part").write_parquet(folder / f"part={part}" / "0.parquet")
        return folder
    if "parquet files" in transforms:
        paths = [folder / f"{part}.parquet" for (part,) in parts]
        for path, rows in zip(paths, parts.values(), strict=True):
            rows.drop("part").write_parquet(path)
        return paths
    return frame


@pytest.mark.parametrize("task", TASKS)
@given(data=st.data())
def test_every_metric_is_invariant(engine, task, data):
    frame = data.draw(tables(task), label="table")
    averages, names = data.draw(st.sampled_from(metric_groups(task)), label="metrics")
    transforms = data.draw(st.sets(st.sampled_from(TRANSFORMS), min_size=1), label="transforms")
    scale = data.draw(SCALES, label="scale") if "scale" in transforms else 1.0
    rng = data.draw(st.randoms(use_true_random=False), label="permutation")
    want = _evaluate(frame, task, names, averages, engine).with_columns(
        value=pl.when(pl.col("metric").is_in(COUNTS)).then(pl.col("value") * scale)
        .otherwise(pl.col("value")))
    with tempfile.TemporaryDirectory() as folder:
        source = _transformed(frame, transforms, scale, rng, Path(folder))
        got = _evaluate(source, task, names, averages, engine)
    if "rename" in transforms:
        got = got.with_columns(pl.col(c).cast(pl.String).str.strip_prefix("renamed_")
                               for c in ("label", "predicted") if c in got.columns)
    assert_same_rows(got, want, ["seg"])


# -- many labels ----------------------------------------------------------------------------------

def test_300_labels(engine):
    """A multilabel table of 300 labels (a frame's schema is often inferred from 100 rows)."""
    rng = random.Random(300)
    weights = [rng.choice([0.5, 1.0, 2.0]) for _ in range(6)]
    rows = [(i, f"l{j:03d}", rng.choice([0.0, 0.3, 0.5, 0.8]), rng.random() < 0.3, weights[i],
             "ab"[i % 2]) for i in range(6) for j in range(300)]
    frame = pl.DataFrame(rows, orient="row",
                         schema=["sample", "label", "score", "truth", "weight", "seg"])
    names = ["f1", "mcc", "roc_auc", "average_precision", "max_f1"]
    params = {**DEFAULT_PARAMS, "zero_division": None}
    for name in names:
        averages = ("none", "macro")
        want = expected(frame, "multilabel", name, averages, ["seg"], params)
        got = me.evaluate(frame, name, task="multilabel", engine=engine, average=list(averages),
                          by="seg", **params)
        assert_same_rows(got, want, ["seg"])


# -- clustering -----------------------------------------------------------------------------------

@st.composite
def clusterings(draw: st.DrawFn) -> pl.DataFrame:
    """Up to 8 samples in up to 3 classes and 4 clusters, weights 0-3 (at least one counts)."""
    n_samples = draw(st.integers(1, 8))
    rows = [(i, draw(st.integers(0, 2)), f"c{draw(st.integers(0, 3))}",
             float(draw(st.integers(0, 3))) if i else 1.0) for i in range(n_samples)]
    return pl.DataFrame(rows, orient="row", schema=["sample", "truth", "cluster", "weight"])


@given(frame=clusterings(), method=st.sampled_from(["arithmetic", "geometric", "min", "max"]))
def test_clustering_equals_the_oracle(engine, frame, method):
    from tests.oracle_clustering import ORACLES as CLUSTERING
    from tests.oracle_clustering import expected as clustering_expected
    from tests.test_clustering import assert_rows_equal, got_rows

    want = {k: v for name in CLUSTERING
            for k, v in clustering_expected(frame, name, [], {"average_method": method}).items()}
    got = me.evaluate(frame, sorted(CLUSTERING), engine=engine, average_method=method)
    assert_rows_equal(got_rows(got, []), want, rel=1e-12)
