"""Every metric of the registry, on both engines, against scikit-learn (tests/oracle.py).

The metric list comes from the registry, so a new metric is tested as soon as it is named; one
test body covers all of them, on random data with ties, weights (zeros included), several
segments, a one-class segment, a one-sample segment, a segment whose weights are all 0 and a
label missing from a segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

import mleval_sql as me
from mleval_sql.engines import local_engines
from mleval_sql.params import DEFAULTS
from mleval_sql.registry import METRICS
from tests.data import make_predictions
from tests.helpers import assert_same_rows
from tests.oracle import ORACLES, expected
from tests.oracle_clustering import ORACLES as CLUSTERING_ORACLES
from tests.oracle_families import *  # noqa: F403  (the other families register their oracles)


@dataclass(frozen=True)
class Case:
    task: str
    seed: int
    by: tuple[str, ...] = ("region",)
    weighted: bool = True
    int_ids: bool = False
    params: dict = field(default_factory=dict)

    def frame(self):
        return make_predictions(self.task, self.seed, weighted=self.weighted,
                                int_ids=self.int_ids, complete=not self.by,
                                weightless=bool(self.by))

    def __str__(self) -> str:
        return f"{self.task}-{self.seed}"


CASES = [
    Case("binary", 1, params={"zero_division": None}),
    Case("binary", 2, by=(), weighted=False, int_ids=True, params={"zero_division": 0}),
    Case("binary", 3, by=("region", "model"), params={"threshold": 0.3, "beta": 2.0,
                                                       "zero_division": 1}),
    Case("multiclass", 4, params={"k": 2}),
    Case("multiclass", 5, by=("region", "model"), int_ids=True,
         params={"k": 3, "zero_division": 0, "beta": 0.5}),
    Case("multiclass", 6, by=(), weighted=False, params={"zero_division": 1}),
    Case("multilabel", 7),
    Case("multilabel", 8, by=("region", "model"), int_ids=True,
         params={"threshold": 0.7, "zero_division": 0, "beta": 2.0}),
    Case("multilabel", 9, by=(), weighted=False, params={"zero_division": 1}),
    Case("multilabel", 10, params={"max_fpr": 0.3, "min_recall": 0.5, "min_precision": 0.6,
                                   "n_bins": 4, "k": 3}),
    Case("regression", 11, params={"pinball_alpha": 0.3, "power": 1.5}),
    Case("regression", 12, by=(), weighted=False),
]
#: evaluate()'s parameters at their defaults (curve-only ones left out)
DEFAULT_PARAMS = {k: v for k, v in DEFAULTS.items() if k not in ("kind", "drop_intermediate")}


def _metric_cases():
    for name, metric in METRICS.items():
        for case in CASES:
            if case.task in metric.families:
                yield pytest.param(name, case, id=f"{name}-{case}")


def test_every_metric_has_an_oracle():
    # clustering metrics read another table shape: tests/test_clustering.py and its oracle
    assert set(METRICS) <= set(ORACLES) | CLUSTERING_ORACLES


@pytest.mark.parametrize(("metric", "case"), list(_metric_cases()))
def test_metric_matches_scikit_learn(engine, metric, case):
    frame = case.frame()
    params = {**DEFAULT_PARAMS, **case.params}
    averages = METRICS[metric].averages(case.task)
    got = me.evaluate(frame, [metric], by=list(case.by), task=case.task, engine=engine,
                      average=averages or None, **params)
    want = expected(frame, case.task, metric, averages or ("none",), list(case.by), params)
    assert_same_rows(got, want, list(case.by))


def _by_averages(task: str, engine: str | None = None) -> dict[tuple[str, ...], list[str]]:
    """The task's metrics grouped by the averages they take: one request per group (Spark's
    without the estimated metrics, which run on the engines that read files and frames)."""
    groups: dict[tuple[str, ...], list[str]] = {}
    for name, metric in METRICS.items():
        if engine == "spark" and name.startswith("estimated_"):
            continue
        if task in metric.families:
            groups.setdefault(metric.averages(task), []).append(name)
    return groups


#: The cases Spark runs too: each task, segments by two columns, and every parameter given
#: (the others differ from these in ways its SQL does not: seeds, unweighted rows); a Spark
#: case costs half a minute.
SPARK_CASES = (3, 5, 6, 8, 10, 11)


@pytest.mark.parametrize(("engine", "case"), [
    (engine, case) for case in CASES
    for engine in (*local_engines(), *(["spark"] if case.seed in SPARK_CASES else []))],
    indirect=["engine"], ids=str)
def test_every_metric_in_one_request_matches_scikit_learn(engine, case):
    """The registry's every metric of the task, one request per set of averages (as a user
    asks for many at once), each metric's rows equal to the oracle's. Spark runs this body
    rather than the one above: a dozen requests instead of 150."""
    frame = case.frame()
    params = {**DEFAULT_PARAMS, **case.params}
    for averages, names in _by_averages(case.task, engine).items():
        got = me.evaluate(frame, names, by=list(case.by), task=case.task, engine=engine,
                          average=averages or None, **params)
        for name in names:
            want = expected(frame, case.task, name, averages or ("none",), list(case.by),
                            params)
            assert_same_rows(got.filter(metric=name), want, list(case.by))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_engines_agree_on_every_metric(case):
    """All metrics of the task in one request per set of averages, on both engines."""
    frame = case.frame()
    params = {**DEFAULT_PARAMS, **case.params}
    for averages, names in _by_averages(case.task).items():
        results = [me.evaluate(frame, names, by=list(case.by), task=case.task, engine=e,
                               average=averages or None, **params)
                   for e in local_engines()]
        assert results[0].height > 0
        assert_same_rows(results[0], results[1], list(case.by), rel=1e-12)
