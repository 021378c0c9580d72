"""Progress shows on a terminal only: DuckDB's own bar, and a count of batches for polars under a
memory budget (which evaluates a batch of segments at a time)."""

from __future__ import annotations

import io

import pytest

import mleval_sql as me
from mleval_sql.engines.duckdb import DuckDBEngine
from mleval_sql.schema import Columns
from mleval_sql.sources import as_source
from tests.data import make_predictions


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.mark.parametrize("stderr", [Terminal, io.StringIO], ids=["terminal", "pipe"])
def test_polars_counts_segments_on_a_terminal_only(monkeypatch, stderr):
    data = make_predictions("multilabel", seed=3, n_samples=60)
    shown = stderr()
    monkeypatch.setattr("sys.stderr", shown)
    monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", 10**9)  # a segment a batch
    me.evaluate(data, ["f1"], by="region", task="multilabel", engine="polars",
                memory_limit="200MB")
    segments = data["region"].n_unique()
    if stderr is Terminal:
        text = shown.getvalue()
        assert f"checks, batch {segments}/{segments}" in text
        assert f"metrics, batch {segments}/{segments}" in text
        assert text.endswith("\r\033[K")  # the line is cleared when done
    else:
        assert shown.getvalue() == ""


@pytest.mark.parametrize(("stderr", "bar"), [(Terminal, True), (io.StringIO, False)],
                         ids=["terminal", "pipe"])
def test_duckdb_shows_its_bar_on_a_terminal_only(monkeypatch, stderr, bar):
    monkeypatch.setattr("sys.stderr", stderr())
    data = make_predictions("multilabel", seed=3, n_samples=20)
    engine = DuckDBEngine(as_source(data), Columns(), "weight", ["region"])
    try:
        setting = engine.con.execute("SELECT current_setting('enable_progress_bar')").fetchone()
        assert setting == (bar,)
    finally:
        engine.close()
