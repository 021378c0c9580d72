"""Property tests: tiny adversarial inputs drawn by hypothesis (all-tied scores, all-zero
weights, one sample, every label true or none) on both engines, against the same oracle."""

from __future__ import annotations

import polars as pl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mleval_sql as me
from mleval_sql.registry import METRICS
from tests.helpers import assert_same_rows
from tests.oracle import expected
from tests.test_metrics import DEFAULT_PARAMS

SCORES = st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0])
WEIGHTS = st.sampled_from([0.0, 1.0, 2.0])


@st.composite
def tables(draw: st.DrawFn, task: str) -> pl.DataFrame:
    n_samples = draw(st.integers(1, 6))
    n_labels = 1 if task == "binary" else draw(st.integers(3, 4))
    rows = []
    for i in range(n_samples):
        weight = draw(WEIGHTS) if i else 1.0  # at least one sample counts
        true = draw(st.integers(0, n_labels - 1))
        for j in range(n_labels):
            truth = j == true if task == "multiclass" else draw(st.booleans())
            rows.append((i, f"l{j}", draw(SCORES), truth, weight))
    return pl.DataFrame(rows, orient="row", schema=["sample", "label", "score", "truth", "weight"])


def _check(frame: pl.DataFrame, task: str, zero_division: float | None) -> None:
    """Every metric of the task; one evaluate call per set of averages the metrics share."""
    params = {**DEFAULT_PARAMS, "zero_division": zero_division}
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, metric in METRICS.items():
        if task in metric.families:
            groups.setdefault(metric.averages(task), []).append(name)
    for averages, names in groups.items():
        want = pl.concat([expected(frame, task, name, averages or ("none",), [], params)
                          for name in names], how="diagonal_relaxed")
        for engine in ("duckdb", "polars"):
            got = me.evaluate(frame, names, task=task, engine=engine,
                              average=averages or None, **params)
            assert_same_rows(got, want, [])


SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(frame=tables("binary"), zero_division=st.sampled_from([None, 0, 1]))
def test_binary_edge_cases(frame, zero_division):
    _check(frame, "binary", zero_division)


@SETTINGS
@given(frame=tables("multilabel"), zero_division=st.sampled_from([None, 0, 1]))
def test_multilabel_edge_cases(frame, zero_division):
    _check(frame, "multilabel", zero_division)


@SETTINGS
@given(frame=tables("multiclass"), zero_division=st.sampled_from([None, 0, 1]))
def test_multiclass_edge_cases(frame, zero_division):
    _check(frame, "multiclass", zero_division)


@st.composite
def clusterings(draw: st.DrawFn) -> pl.DataFrame:
    """Up to 8 samples in up to 3 classes and 4 clusters, weights 0-3 (at least one counts)."""
    n_samples = draw(st.integers(1, 8))
    rows = [(i, draw(st.integers(0, 2)), f"c{draw(st.integers(0, 3))}",
             float(draw(st.integers(0, 3))) if i else 1.0) for i in range(n_samples)]
    return pl.DataFrame(rows, orient="row", schema=["sample", "truth", "cluster", "weight"])


@SETTINGS
@given(frame=clusterings(), method=st.sampled_from(["arithmetic", "geometric", "min", "max"]))
def test_clustering_edge_cases(frame, method):
    from tests.oracle_clustering import ORACLES as CLUSTERING
    from tests.oracle_clustering import expected as clustering_expected
    from tests.test_clustering import assert_rows_equal, got_rows

    params = {"average_method": method}
    want = {k: v for name in CLUSTERING
            for k, v in clustering_expected(frame, name, [], params).items()}
    for engine in ("duckdb", "polars"):
        got = me.evaluate(frame, sorted(CLUSTERING), engine=engine, average_method=method)
        assert_rows_equal(got_rows(got, []), want, rel=1e-12)
