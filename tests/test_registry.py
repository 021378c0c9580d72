"""The registry is the one list of steps and metrics: each step exists as SQL and as a polars
plan with the same parameters, and every SQL file has a header saying what it reads and gives."""

from __future__ import annotations

import inspect

import pytest
import sqlglot

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.engines import make_engine
from mleval_sql.engines import polars as plans
from mleval_sql.params import checked
from mleval_sql.registry import (
    DECISIONS,
    ESTIMATED,
    FAMILIES,
    METRICS,
    SAMPLES,
    STEPS,
    SWEEP,
    SWEPT,
    THRESHOLDS,
    metrics_of,
)
from mleval_sql.schema import Columns
from mleval_sql.sources import as_source
from tests.data import make_predictions
from tests.helpers import assert_standalone_equals_oracle, run_standalone, statement_options
from tests.test_metrics import DEFAULT_PARAMS


@pytest.mark.parametrize("name", STEPS)
def test_step_exists_on_both_engines_with_the_same_parameters(name):
    step = STEPS[name]
    sql = queries.load(name)
    assert set(queries.parameters(sql)) == set(step.params)
    signature = inspect.signature(getattr(plans, name))
    # keep (the rows a request keeps): the SQL gets them by a filter around the step;
    # unit_weights (no weight column): how polars may sum, where the SQL does not need it
    keyword = {p.name for p in signature.parameters.values() if p.kind == p.KEYWORD_ONLY
               and p.name != "keep"
               and (p.name != "unit_weights" or p.name in step.params)}
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
        if metric.families[task] is ESTIMATED:  # reads probabilities, not the table's truth
            with pytest.raises(me.InputError, match="a statement reads the table's truth"):
                me.sql(name, **statement_options(task, name, "region"))
            continue
        frame = make_predictions(task, seed=53, n_samples=30)
        rows = run_standalone(me.sql(name, **statement_options(task, name, "region")), frame)
        assert_standalone_equals_oracle(rows, frame, task, name, "region", DEFAULT_PARAMS)


@pytest.mark.parametrize("dialect", ["spark", "bigquery", "snowflake"])
@pytest.mark.parametrize("name", ["f1", "roc_auc", "subset_accuracy", "coverage_error", "max_f1"])
def test_other_dialects_read_back_give_the_oracle_values(name, dialect):
    """A rendering for another dialect, read back into DuckDB's and run there: the oracle's
    values (only DuckDB runs here: this checks what sqlglot wrote, not those engines)."""
    rendered = me.sql(name, dialect=dialect, single=True,  # Spark's default: a script
                      **statement_options("multilabel", name, "region"))
    try:
        back = sqlglot.transpile(rendered, read=dialect, write="duckdb")[0]
    except sqlglot.errors.ParseError as error:  # sqlglot writes what it cannot read back
        pytest.skip(f"sqlglot cannot read its {dialect} rendering back: {error}")
    frame = make_predictions("multilabel", seed=54, n_samples=30)
    rows = run_standalone(back, frame)
    assert_standalone_equals_oracle(rows, frame, "multilabel", name, "region", DEFAULT_PARAMS)


def _family_cases():
    for family in FAMILIES:
        for task in family.stats:
            if task != "clustering":
                yield pytest.param(family, task, id=f"{family.name}-{task}")


@pytest.mark.parametrize(("family", "task"), list(_family_cases()))
def test_a_family_gives_exactly_the_metrics_the_registry_names(family, task, engine):
    """The metric names written in a family's SQL (UNPIVOT lists, literals) and polars plans
    are the registry's: a metric added, renamed or dropped in one place only fails here."""
    frame = make_predictions(task, seed=5, n_samples=12)
    by = ["region"]
    src = as_source(frame)
    runner = make_engine(engine, src, Columns(), "weight", by)
    try:
        runner.summary()
        params = {**checked(thresholds=[0.5] if family in SWEPT else None), "micro": True,
                  "adjusted": True, "class_counts": True, "label_totals": True, "kind": "roc",
                  "drop_intermediate": False}
        rows = runner.results(family.steps(task), params, numeric_truth=task == "regression")
    finally:
        runner.close()
    given = set(rows[family.final]["metric"].unique())
    own = DECISIONS if family in (SWEEP, THRESHOLDS) else family
    wanted = {m for m, metric in METRICS.items() if metric.families.get(task) is own
              or (family is SAMPLES and metric.samples_average)}
    assert wanted <= given, f"named in the registry, not given: {sorted(wanted - given)}"
    assert given <= set(METRICS), f"given, not in the registry: {sorted(given - set(METRICS))}"
    # and each under its own family (for some task): a name the registry files elsewhere fails
    own_names = set(metrics_of(own)) | ({m for m, metric in METRICS.items()
                                         if metric.samples_average} if family is SAMPLES else set())
    assert given <= own_names, f"given, not of {own.name}: {sorted(given - own_names)}"


def test_the_polars_package_exports_exactly_the_steps():
    assert set(plans.__all__) == set(STEPS)
