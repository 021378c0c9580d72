"""The registry is the one list of steps and metrics: each step exists as SQL and as a polars
plan with the same parameters, and every SQL file has a header saying what it reads and gives."""

from __future__ import annotations

import inspect

import pytest
import sqlglot

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.engines import polars as plans
from mleval_sql.registry import FAMILIES, METRICS, STEPS
from tests.data import make_predictions
from tests.helpers import assert_standalone_equals_oracle, run_standalone, statement_options
from tests.test_metrics import DEFAULT_PARAMS


@pytest.mark.parametrize("name", STEPS)
def test_step_exists_on_both_engines_with_the_same_parameters(name):
    step = STEPS[name]
    sql = queries.load(name)
    assert set(queries.parameters(sql)) == set(step.params)
    signature = inspect.signature(getattr(plans, name))
    # keep (the rows a request keeps): the SQL gets them by a filter around the step
    keyword = {p.name for p in signature.parameters.values() if p.kind == p.KEYWORD_ONLY
               and p.name != "keep"}
    positional = [p.name for p in signature.parameters.values() if p.kind != p.KEYWORD_ONLY]
    assert keyword == set(step.params)
    assert positional == list(step.reads)


@pytest.mark.parametrize("name", STEPS)
def test_sql_file_says_what_it_reads_and_gives(name):
    header = queries.load(name).split("\n\n")[0]
    assert header.startswith(f"-- {name}:")
    assert "-- Reads:" in header and "-- Gives:" in header


def test_every_sql_file_is_a_registered_step():
    assert {p.stem for p in queries.folder().glob("*.sql")} == set(STEPS)


def test_family_chains_read_what_earlier_steps_give():
    for family in FAMILIES:
        for task in family.stats:
            available = {"predictions"}
            for name in family.steps(task):
                assert set(STEPS[name].reads) <= available, (family.name, task, name)
                available.add(STEPS[name].gives)


@pytest.mark.parametrize("name", METRICS)
def test_every_metric_has_a_summary_and_a_standalone_query(name):
    """The standalone query of every metric and task, run on DuckDB: the oracle's values."""
    metric = METRICS[name]
    assert metric.summary and metric.families
    for task in metric.families:
        if task == "clustering":  # its own table shape: test_clustering runs its standalone query
            continue
        frame = make_predictions(task, seed=53, n_samples=30)
        rows = run_standalone(me.sql(name, **statement_options(task, name, "region")), frame)
        assert_standalone_equals_oracle(rows, frame, task, name, "region", DEFAULT_PARAMS)


@pytest.mark.parametrize("dialect", ["spark", "bigquery", "snowflake"])
@pytest.mark.parametrize("name", ["f1", "roc_auc", "subset_accuracy", "coverage_error", "max_f1"])
def test_other_dialects_read_back_give_the_oracle_values(name, dialect):
    """A rendering for another dialect, read back into DuckDB's and run there: the oracle's
    values (only DuckDB runs here: this checks what sqlglot wrote, not those engines)."""
    rendered = me.sql(name, dialect=dialect, **statement_options("multilabel", name, "region"))
    try:
        back = sqlglot.transpile(rendered, read=dialect, write="duckdb")[0]
    except sqlglot.errors.ParseError as error:  # sqlglot writes what it cannot read back
        pytest.skip(f"sqlglot cannot read its {dialect} rendering back: {error}")
    frame = make_predictions("multilabel", seed=54, n_samples=30)
    rows = run_standalone(back, frame)
    assert_standalone_equals_oracle(rows, frame, "multilabel", name, "region", DEFAULT_PARAMS)
