"""A new engine is one class and one entry of ``ENGINES``: a toy third engine (DuckDB through a
connection of its own, handed to the engine as a user's would be) runs the suite's generic test
bodies, written once for every engine, with nothing else changed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.cli import build_parser, main
from mleval_sql.engines import ENGINES, EngineEntry, EngineErrors
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


class ToyStoreError(Exception):
    """The error of the toy engine's own library: neither DuckDB's nor polars'."""


class UnreachableToyEngine(ToyEngine):
    """The toy engine whose store cannot be reached: its library raises its own error."""

    def summary(self) -> Any:
        raise ToyStoreError("the toy store at toy://preds\ndid not answer")


def test_an_error_of_a_new_engines_library_is_one_line(monkeypatch: pytest.MonkeyPatch,
                                                        tmp_path: Path,
                                                        capsys: pytest.CaptureFixture) -> None:
    """What the new engine's library raises is said in the engine's entry: the command line
    exits 2 with its cause in one line, not a traceback; the API raises it as it is."""
    errors = EngineErrors((f"{__name__}:ToyStoreError",), cause=lambda e: f"toy store: {e}")
    monkeypatch.setitem(ENGINES, TOY, EngineEntry(TOY, UnreachableToyEngine, errors=errors))
    path = tmp_path / "preds.parquet"
    pl.DataFrame({"sample": [1, 2, 3, 4], "label": "spam", "score": [0.9, 0.4, 0.6, 0.2],
                  "truth": [1, 1, 0, 0]}).write_parquet(path)
    with pytest.raises(ToyStoreError):
        me.evaluate(str(path), "f1", engine=TOY)
    capsys.readouterr()
    assert main(["evaluate", str(path), "--metric", "f1", "--engine", TOY]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == ("mleval: error: toy store: the toy store at toy://preds did not "
                            "answer\n")


def test_an_engines_library_error_can_be_an_input_error(monkeypatch: pytest.MonkeyPatch) -> None:
    """An entry whose ``input_error`` is set (Spark's) gives API callers an InputError in one
    line, the library's error its ``__cause__``."""
    errors = EngineErrors((f"{__name__}:ToyStoreError",),
                          input_error="the toy store could not run the request")
    monkeypatch.setitem(ENGINES, TOY, EngineEntry(TOY, UnreachableToyEngine, errors=errors))
    data = pl.DataFrame({"sample": [1, 2], "label": "spam", "score": [0.9, 0.4],
                         "truth": [1, 0]})
    with pytest.raises(me.InputError) as caught:
        me.evaluate(data, "f1", engine=TOY)
    assert str(caught.value) == ("the toy store could not run the request: the toy store at "
                                 "toy://preds did not answer")
    assert isinstance(caught.value.__cause__, ToyStoreError)
