"""The lake benchmark at 200k rows, as a correctness check only (never timed here): every
engine's numbers equal scikit-learn's on the benchmark's own data and steps."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("lake_benchmark", ROOT / "benchmarks" / "lake.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def lake(bench, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bench.make_lake(tmp_path_factory.mktemp("bench") / "lake", samples=20_000)


@pytest.fixture(scope="module")
def oracle(bench, lake: Path) -> dict:
    return bench.run_step("sklearn", lake, None)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["exact-default", "exact-duckdb", "exact-polars", "binned-duckdb",
                                  "binned-polars", "sweep-duckdb", "sweep-polars"])
def test_benchmark_steps_equal_scikit_learn(bench, lake: Path, oracle: dict, step: str):
    numbers = bench.run_step(step, lake, "1GB")
    shared = set(numbers) & set(oracle)
    # exact: AUC, AP and P/R/F1 of 80 groups, plus 24 macro values; sweeps: the 0.5 rows
    assert len(shared) >= (424 if step.startswith("exact") else 264)
    assert bench.agreement(numbers, oracle) < 1e-9
    engine = "duckdb" if step.endswith("duckdb") else "polars"
    assert bench.STAGES["request"] > bench.STAGES[f"checks ({engine})"] > 0
    assert (f"checks ({engine}) > reading" in bench.STAGES) == (engine == "polars")


def test_the_stage_profile_shows_the_checks_besides_reading(bench):
    rows = [{"step": "exact-polars", "stages": {
        "checks (polars) > reading": 0.1, "checks (polars)": 0.3,
        "metrics, by batch > statistics": 0.5, "metrics, by batch": 0.6, "request": 1.0}},
        {"step": "sklearn", "stages": {}}]
    text = bench.stage_profile(rows)
    assert ("- exact-polars: 1.00 s in process; checks (polars) 0.30 s (30%) [reading 0.10 s]; "
            "metrics, by batch 0.60 s (60%) [statistics 0.50 s]; "
            "checks besides reading 0.20 s (20%)") in text
    assert "sklearn" not in text


@pytest.fixture(scope="module")
def cluster_lake(bench, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bench.make_cluster_lake(tmp_path_factory.mktemp("bench") / "clusters", samples=20_000)


@pytest.mark.slow
@pytest.mark.parametrize("step", ["cluster-duckdb", "cluster-polars"])
def test_clustering_steps_equal_scikit_learn(bench, cluster_lake: Path, step: str):
    oracle = bench.run_step("cluster-sklearn", cluster_lake, None)
    numbers = bench.run_step(step, cluster_lake, "1GB")
    assert len(set(numbers) & set(oracle)) == 8 * len(bench.CLUSTER_METRICS)
    assert bench.agreement(numbers, oracle) < 1e-12


@pytest.fixture(scope="module")
def weighted_lake(bench, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return bench.make_lake(tmp_path_factory.mktemp("bench") / "weighted", samples=5_000,
                           weighted=True)


@pytest.mark.slow
def test_weighted_steps_equal_scikit_learn_with_sample_weight(bench, weighted_lake: Path):
    """The weighted lake's steps (F1, AP and ROC AUC of fractional weights) against
    scikit-learn's numbers with the same ``sample_weight``."""
    oracle = bench.run_step("wsklearn", weighted_lake, None)
    for step in ("wpair-duckdb", "wpair-polars"):
        numbers = bench.run_step(step, weighted_lake, None)
        assert len(set(numbers) & set(oracle)) == 80 * 3 + 8  # F1, AP, AUC; F1 macro
        assert bench.agreement(numbers, oracle) < 1e-9, step
