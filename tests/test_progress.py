"""Progress shows on a terminal only, drawn by rich on stderr: the stage that runs (checks,
statistics, metrics), batches of segments counted under a memory budget; nothing when stderr is a
pipe."""

from __future__ import annotations

import io
import re

import pytest

import mleval_sql as me
from mleval_sql.engines.duckdb import DuckDBEngine
from mleval_sql.schema import Columns
from mleval_sql.sources import as_source
from tests.data import make_predictions


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _plain(text: str) -> str:
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)


@pytest.mark.parametrize("budget", [None, "200MB"], ids=["whole", "by-batch"])
def test_a_terminal_shows_the_stages(monkeypatch, engine, budget):
    data = make_predictions("multilabel", seed=3, n_samples=60)
    shown = Terminal()
    monkeypatch.setattr("sys.stderr", shown)
    monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", 10**9)  # a segment a batch
    me.evaluate(data, ["f1", "roc_auc"], by="region", task="multilabel", engine=engine,
                memory_limit=budget)
    text = _plain(shown.getvalue())
    assert "mleval: checks" in text
    assert ("mleval: statistics" in text) if engine == "duckdb" else (
        "mleval: statistics and metrics" in text)
    if engine == "duckdb":  # ROC AUC from ranks: no curve, the decision counts a scan's
        assert "metrics: decision_metrics" in text and "statistics: threshold_counts" in text
    if budget:
        segments = data["region"].n_unique()
        assert "checks, by batch" in text and "metrics, by batch" in text
        assert f"{segments}/{segments}" in text
    assert re.search(r"\d:\d\d:\d\d", text)  # elapsed time


def test_a_pipe_shows_nothing(monkeypatch, engine):
    shown = io.StringIO()
    monkeypatch.setattr("sys.stderr", shown)
    me.evaluate(make_predictions("multilabel", seed=3, n_samples=30), ["f1"], by="region",
                task="multilabel", engine=engine, memory_limit="200MB")
    assert shown.getvalue() == ""


def test_duckdb_draws_no_bar_of_its_own(monkeypatch):
    monkeypatch.setattr("sys.stderr", Terminal())
    data = make_predictions("multilabel", seed=3, n_samples=20)
    engine = DuckDBEngine(as_source(data), Columns(), "weight", ["region"])
    try:
        setting = engine.con.execute("SELECT current_setting('enable_progress_bar')").fetchone()
        assert setting == (False,)
    finally:
        engine.close()


def test_stage_timings_name_each_stage_within_the_stages_around_it(engine):
    """progress.timings() keeps each stage's seconds by its path (polars reads its rows within
    the checks); the stages of a request in another thread are that thread's own."""
    import threading

    from mleval_sql.progress import timings

    data = make_predictions("multilabel", seed=3, n_samples=40)
    with timings() as seconds:
        me.evaluate(data, ["f1", "roc_auc"], by="region", task="multilabel", engine=engine)
    assert seconds[f"checks ({engine})"] > 0
    assert (f"checks ({engine}) > reading" in seconds) == (engine == "polars")
    assert seconds.get(f"checks ({engine}) > reading", 0) < seconds[f"checks ({engine})"]
    tasks = []
    with timings() as mine:
        other = threading.Thread(target=lambda: tasks.append(me.check(
            data, by="region", task="multilabel", engine=engine)))
        other.start()
        other.join()
    assert tasks == ["multilabel"] and mine == {}
