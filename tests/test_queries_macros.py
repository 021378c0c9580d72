"""The macros of ``queries/macros/``: each step that calls one names its file (``-- Uses:``),
``queries.load`` expands every call, and a file run as written in DuckDB after the macro files
it names gives the rows its expanded text gives."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest
import sqlglot
from sqlglot import exp

from mleval_sql import queries
from mleval_sql.registry import STEPS
from tests.data import make_predictions
from tests.helpers import assert_frames_close

FILES = sorted(p.stem for p in (queries.folder() / "macros").glob("*.sql"))
MACROS = {name for file in FILES for name in queries.macros(file)}
#: The steps that call macros, with the task of their input and the steps that give what they
#: read.
CHAINS = {
    "decision_metrics": ("multilabel", ["threshold_counts"]),
    "sample_metrics": ("multilabel", ["sample_counts"]),
    "ranked_points": ("multilabel", []),
    "ranking_metrics": ("multilabel", []),
    "curve_metrics": ("multilabel", ["ranked_points"]),
    "placements": ("binary", ["ranked_points", "block_placements"]),
    "threshold_buckets": ("multilabel", []),
    "calibration_bins": ("multiclass", []),
    "regression_sums": ("regression", []),
    "regression_quantiles": ("regression", []),
}


def _calls(sql: str) -> set[str]:
    return {f.name.lower() for f in sqlglot.parse_one(sql, read="duckdb").find_all(
        exp.Anonymous)} & MACROS


def test_every_macro_file_is_used():
    assert FILES
    used = {file for step in STEPS for file in queries.uses(queries.source(step))}
    assert used == set(FILES)


@pytest.mark.parametrize("step", STEPS)
def test_loaded_steps_call_no_macro(step):
    named = {m for file in queries.uses(queries.source(step)) for m in queries.macros(file)}
    assert _calls(queries.source(step)) <= named  # every call's file is on the Uses line
    assert not _calls(queries.load(step))
    if named:
        assert step in CHAINS
        assert queries.load(step).splitlines()[0] == queries.source(step).splitlines()[0]


def test_expansion_keeps_operators_bound():
    defined = {"twice": queries.Macro(("x",), sqlglot.parse_one("x * 2")),
               "plus": queries.Macro(("a", "b"), sqlglot.parse_one("a + b"))}
    tree = sqlglot.parse_one("SELECT plus(twice(c - 1), $k) * 3", read="duckdb")
    assert queries.expand_macros(tree, defined).sql("duckdb") == "SELECT (((c - 1) * 2) + $k) * 3"
    with pytest.raises(ValueError, match="takes 2 arguments"):
        queries.expand_macros(sqlglot.parse_one("SELECT plus(1)"), defined)


def test_a_macro_reads_only_its_arguments(tmp_path, monkeypatch):
    (tmp_path / "macros").mkdir()
    (tmp_path / "macros" / "stray.sql").write_text(
        "CREATE OR REPLACE TEMP MACRO stray(x) AS x + y;")
    monkeypatch.setattr(queries, "folder", lambda: tmp_path)
    with pytest.raises(ValueError, match="stray reads"):
        queries.macros.__wrapped__("stray")


def _run(con: duckdb.DuckDBPyConnection, sql: str, params: dict[str, object]) -> pl.DataFrame:
    return con.sql(sql, params={p: params[p] for p in queries.parameters(sql)}).pl()


@pytest.mark.parametrize("bins", [None, 10])
@pytest.mark.parametrize("unit_weights", [True, False])
@pytest.mark.parametrize("step", CHAINS)
def test_files_run_as_written_after_their_macros(step, unit_weights, bins):
    task, chain = CHAINS[step]
    predictions = make_predictions(task, seed=5, weighted=not unit_weights).select(
        "sample", "label", "score", "truth", weight=pl.lit(1.0) if unit_weights else "weight",
        segment="region")
    params = {"threshold": 0.5, "beta": 2.0, "zero_division": None, "bins": bins,
              "thresholds": [k / 10 for k in range(11)] if bins else [0.2, 0.5, 0.9],
              "n_bins": 7, "max_fpr": 0.5, "micro": True, "unit_weights": unit_weights,
              "class_counts": True, "label_totals": True, "pinball_alpha": 0.3, "power": 1.5}
    con = duckdb.connect(config={"threads": 1})
    con.register("predictions", predictions)
    for name in chain:
        sql = queries.load(name)
        con.execute(f"CREATE TABLE {STEPS[name].gives} AS {sql}",
                    {p: params[p] for p in queries.parameters(sql)})
    expanded = _run(con, queries.load(step), params)
    for file in queries.uses(queries.source(step)):
        con.execute((queries.folder() / "macros" / f"{file}.sql").read_text())
    written = _run(con, queries.source(step), params)
    keys = [c for c in expanded.columns if expanded[c].dtype != pl.Float64]
    assert expanded.height > 0
    assert_frames_close(written.sort(keys, nulls_last=True), expanded.sort(keys, nulls_last=True))
