"""With no engine named, a request runs on the fastest engine that fits its input and options
(:func:`mleval_sql.engines.choose_engine`); an engine named always wins. The generic test bodies
name every engine (conftest's ``engine`` fixture), so these tests are about the choice only."""

from __future__ import annotations

import io
import logging
import re
import sqlite3
import warnings
from pathlib import Path

import duckdb
import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import mleval_sql as me
from mleval_sql.cli import build_parser
from mleval_sql.engines import ENGINES, choose_engine
from tests.data import make_predictions
from tests.helpers import assert_frames_close

LAKE = Path(__file__).parent.parent / "fixtures" / "lake"


class SparkDataFrame:
    """Stands for a Spark DataFrame: only its type's package is read."""


SparkDataFrame.__module__ = "pyspark.sql.dataframe"


@pytest.fixture(scope="module")
def frame() -> pl.DataFrame:
    return make_predictions("binary", seed=4, n_samples=40)


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory, frame: pl.DataFrame) -> Path:
    folder = tmp_path_factory.mktemp("choice")
    frame.write_parquet(folder / "part-0.parquet")
    frame.write_csv(folder / "preds.csv")
    return folder


def test_files_lakes_and_frames_go_to_the_fastest_engine(files: Path, frame: pl.DataFrame) -> None:
    fastest = min((e.rank, e.name) for e in ENGINES.values() if e.rank is not None)[1]
    assert fastest == "polars"  # the lake benchmark's (docs/performance.md)
    inputs = [str(files / "part-0.parquet"), str(files / "*.parquet"), files, LAKE,
              [str(files / "part-0.parquet")], str(files / "preds.csv"), frame, frame.lazy(),
              frame.to_arrow(), frame.to_pandas()]
    for given in inputs:
        assert choose_engine(given) == ("polars", "the fastest for this input"), given


def test_an_engines_own_input_goes_to_it(files: Path, frame: pl.DataFrame) -> None:
    con = duckdb.connect()
    relation = con.from_arrow(frame.to_arrow())
    assert choose_engine(relation)[0] == "duckdb"
    assert choose_engine(str(files / "part-0.parquet"), connection=con)[0] == "duckdb"
    assert choose_engine(SparkDataFrame()) == ("spark", "the engine of a SparkDataFrame")
    assert choose_engine("preds", connection=sqlite3.connect(":memory:"))[0] == "sql"


@pytest.mark.parametrize("options", [{"threads": 1}, {"reproducible": True},
                                     {"threads": 1, "memory_limit": "1GB"}])
def test_what_only_duckdb_gives_goes_to_duckdb(files: Path, options: dict) -> None:
    name, why = choose_engine(files, **options)
    assert name == "duckdb" and all(option in why for option in options)


def test_a_memory_limit_keeps_the_fastest_engine(files: Path) -> None:
    assert choose_engine(files, memory_limit="1GB") == ("polars", "the fastest for this input")


def test_the_engine_used_is_logged_and_a_named_one_wins(frame: pl.DataFrame, files: Path,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    def used(source: object, **options: object) -> str:
        caplog.clear()
        with caplog.at_level(logging.DEBUG, logger="mleval_sql"):
            me.evaluate(source, "roc_auc", **options)
        [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("engine")]
        return line

    relation = duckdb.connect().from_arrow(frame.to_arrow())
    assert used(files) == "engine polars (the fastest for this input)"
    assert used(frame) == "engine polars (the fastest for this input)"
    assert used(relation) == "engine duckdb (the engine of a DuckDBPyRelation)"
    assert used(files, engine="duckdb") == "engine duckdb (named)"
    assert used(relation, engine="polars") == "engine polars (named)"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no segment larger than the budget: nothing to say
        assert used(files, memory_limit="1GB") == "engine polars (the fastest for this input)"
        assert used(files, memory_limit="1GB", engine="duckdb") == "engine duckdb (named)"


@pytest.mark.parametrize("by", [["region"], []])
def test_a_segment_larger_than_the_budget_is_named_in_a_warning(frame: pl.DataFrame, by: list,
                                                                monkeypatch) -> None:
    """polars reads a batch of segments into memory where it fits the budget; a segment that
    does not is streamed, and a warning names the largest (the input, without segments)."""
    free = me.evaluate(frame, ["roc_auc", "f1"], by=by, engine="polars")
    counts = frame.group_by(by).len() if by else frame.select(len=pl.len())
    largest = counts.sort("len", descending=True).row(0, named=True)
    # a budget that holds every segment but the largest
    second = counts["len"].sort(descending=True)[1] if by else largest["len"] - 1
    monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", 10**9 // second)
    what = f"segment region={largest['region']!r} has" if by else "the input has"
    with pytest.warns(UserWarning, match=rf"^{what} {largest['len']:,} rows, more than "
                      rf"memory_limit holds in memory \(about {second:,} rows\): polars "
                      "streams it, with a peak the limit does not bound"):
        bounded = me.evaluate(frame, ["roc_auc", "f1"], by=by, engine="polars",
                              memory_limit="1GB")
    assert_frames_close(bounded, free)


def test_a_budget_the_fastest_engine_would_pass_goes_to_one_that_keeps_it(
        frame: pl.DataFrame, monkeypatch, caplog: pytest.LogCaptureFixture) -> None:
    """With no engine named, a segment larger than polars holds in memory under the budget
    sends the request to DuckDB (which keeps to it), with the reason in the log; no warning."""
    free = me.evaluate(frame, ["roc_auc", "f1"], by="region")
    counts = frame.group_by("region").len().sort("len", descending=True)
    largest, second = counts.row(0, named=True), counts["len"][1]
    monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", 10**9 // second)
    with warnings.catch_warnings(), caplog.at_level(logging.DEBUG, logger="mleval_sql"):
        warnings.simplefilter("error")
        bounded = me.evaluate(frame, ["roc_auc", "f1"], by="region", memory_limit="1GB")
    [line] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("engine")]
    assert line == (f"engine duckdb (the fastest that keeps to memory_limit='1GB': segment "
                    f"region={largest['region']!r} has {largest['len']:,} rows, more than "
                    f"memory_limit holds in memory (about {second:,} rows))")
    assert_frames_close(bounded, free)


def test_the_same_values_whichever_engine_is_chosen(frame: pl.DataFrame) -> None:
    chosen = me.evaluate(frame, ["roc_auc", "average_precision", "f1"])
    for name in ("polars", "duckdb"):
        named = me.evaluate(frame, ["roc_auc", "average_precision", "f1"], engine=name)
        assert named.drop("value").equals(chosen.drop("value"))
        assert (named["value"] - chosen["value"]).abs().max() < 1e-12


def test_the_progress_line_names_the_engine(monkeypatch: pytest.MonkeyPatch,
                                            frame: pl.DataFrame) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    shown = Terminal()
    monkeypatch.setattr("sys.stderr", shown)
    me.evaluate(pa.table(frame.to_arrow()), "roc_auc")
    me.evaluate(pd.DataFrame(frame.to_pandas()), "roc_auc", threads=1)
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", shown.getvalue())
    assert "mleval: checks (polars)" in text and "mleval: checks (duckdb)" in text


def test_the_command_line_chooses_unless_told() -> None:
    parser = build_parser()
    assert parser.parse_args(["evaluate", "x.parquet"]).engine is None
    assert parser.parse_args(["evaluate", "x.parquet", "--engine", "duckdb"]).engine == "duckdb"
    evaluate = next(a for a in parser._subparsers._group_actions[0].choices["evaluate"]._actions
                    if a.dest == "engine")
    assert "default: the fastest that fits" in evaluate.help
