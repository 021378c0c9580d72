"""A new engine is one class and one entry of ``ENGINES``: a toy third engine (DuckDB through a
connection of its own, handed to the engine as a user's would be) runs the suite's generic test
bodies, written once for every engine, with nothing else changed."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import duckdb
import pytest

from mleval_sql.cli import build_parser
from mleval_sql.engines import ENGINES, EngineEntry
from mleval_sql.engines.duckdb import DuckDBEngine
from tests import test_bad_input, test_clustering, test_curves, test_metrics

TOY = "toy"


class ToyEngine(DuckDBEngine):
    """DuckDB on a connection opened for it, as a user's connection is used (no settings of
    its own, relations prefixed and dropped afterwards)."""

    name = TOY

    def __init__(self, *args: Any, memory_limit: str | int | None = None,
                 clustering: bool = False) -> None:
        self.own = duckdb.connect(config={"threads": 1})
        super().__init__(*args, connection=self.own, clustering=clustering)

    def close(self) -> None:
        super().close()
        self.own.close()


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    monkeypatch.setitem(ENGINES, TOY, EngineEntry(TOY, ToyEngine))
    yield TOY


def test_the_command_line_offers_every_engine_of_the_table(toy: str) -> None:
    assert build_parser().parse_args(["evaluate", "x.parquet", "--engine", toy]).engine == toy


@pytest.mark.parametrize(("metric", "case"), [
    p for p in test_metrics._metric_cases()
    if p.values[0] in ("f1", "roc_auc", "log_loss", "top_k_accuracy", "coverage_error", "r2",
                       "mcc")])
def test_metrics_match_scikit_learn_on_a_new_engine(toy: str, metric: str, case: Any) -> None:
    test_metrics.test_metric_matches_scikit_learn(toy, metric, case)


@pytest.mark.parametrize("case", test_bad_input.CASES, ids=lambda c: c.name)
def test_bad_input_is_named_on_a_new_engine(toy: str, case: Any) -> None:
    if case.kwargs.get("engine") is None:
        test_bad_input.test_bad_input_is_named_in_one_line(case, toy)


def test_undefined_values_are_null_on_a_new_engine(toy: str) -> None:
    test_bad_input.test_undefined_metric_in_one_segment_is_null(toy)


def test_curves_match_scikit_learn_on_a_new_engine(toy: str) -> None:
    test_curves.test_roc_curve_matches_scikit_learn(toy, "multilabel", 3, ["region"], True)
    test_curves.test_pr_curve_matches_scikit_learn(toy, "binary", 4, [], False)


def test_clustering_on_a_new_engine(toy: str) -> None:
    frames = {"iris": test_clustering._iris()}
    test_clustering.test_every_clustering_metric_equals_scikit_learn(toy, frames,
                                                                     test_clustering.CASES[2])
