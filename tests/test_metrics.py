"""Every metric of the registry, on both engines, against scikit-learn (tests/oracle.py).

The metric list comes from the registry, so a new metric is tested as soon as it is named; one
test body covers all of them, on random data with ties, weights (zeros included), several
segments, a one-class segment, a one-sample segment and a label missing from a segment.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

import mleval_sql as me
from mleval_sql.registry import METRICS
from tests.data import make_predictions
from tests.helpers import assert_same_rows
from tests.oracle import ORACLES, expected


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
                                int_ids=self.int_ids, complete=not self.by)

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
]
DEFAULT_PARAMS = {"threshold": 0.5, "beta": 1.0, "k": 2, "zero_division": None}


def _metric_cases():
    for name, metric in METRICS.items():
        for case in CASES:
            if case.task in metric.families:
                yield pytest.param(name, case, id=f"{name}-{case}")


def test_every_metric_has_an_oracle():
    assert set(METRICS) <= set(ORACLES)


@pytest.mark.parametrize(("metric", "case"), list(_metric_cases()))
def test_metric_matches_scikit_learn(engine, metric, case):
    frame = case.frame()
    params = {**DEFAULT_PARAMS, **case.params}
    averages = METRICS[metric].averages(case.task)
    got = me.evaluate(frame, [metric], by=list(case.by), task=case.task, engine=engine,
                      average=averages or None, **params)
    want = expected(frame, case.task, metric, averages or ("none",), list(case.by), params)
    assert_same_rows(got, want, list(case.by))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_engines_agree_on_every_metric(case):
    frame = case.frame()
    names = [m for m, metric in METRICS.items() if case.task in metric.families]
    averages = sorted({a for m in names for a in METRICS[m].averages(case.task)})
    label_only = [m for m in names if set(averages) <= set(METRICS[m].averages(case.task))
                  or not METRICS[m].averages(case.task)]
    params = {**DEFAULT_PARAMS, **case.params}
    results = [me.evaluate(frame, label_only, by=list(case.by), task=case.task, engine=e,
                           average=averages, **params) for e in ("duckdb", "polars")]
    assert results[0].height > 0
    assert_same_rows(results[0], results[1], list(case.by), rel=1e-12)
