"""The parameter table is the one place a parameter is declared: the API's signatures, the
command line, the result columns, the registry and the documentation agree with it, and a segment
column named like any result column gets one clear error on every engine."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import get_args

import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import clustering, params
from mleval_sql.api import ComparisonOptions, CurveKind, SourceOptions
from mleval_sql.cli import build_parser, params_markdown
from mleval_sql.params import CURVE_PARAMS, PARAMS, RESULT_COLUMNS
from mleval_sql.registry import METRICS, STEPS
from mleval_sql.request import OPTIONS
from tests.data import make_predictions

#: Step parameters the engines get from the request itself, not from a user's value.
SWITCHES = {*params.SWITCHES, *CURVE_PARAMS}


def test_evaluate_takes_every_parameter_with_its_default() -> None:
    signature = inspect.signature(me.evaluate).parameters
    for name, param in PARAMS.items():
        assert signature[name].default == param.default, name
    for name in ("thresholds", "bins", "n_bins", "drop_intermediate"):
        declared = {**PARAMS, **CURVE_PARAMS}[name]
        assert inspect.signature(me.curve).parameters[name].default == declared.default


def test_compare_takes_every_parameter_typed_as_evaluate_takes_it() -> None:
    """``api.ComparisonOptions`` (the keywords of ``compare`` beyond its own and the source's)
    lists the parameters of the table, each with the type of ``evaluate``'s keyword."""
    types = {name: ref.__forward_arg__ for name, ref in ComparisonOptions.__annotations__.items()
             if name not in SourceOptions.__annotations__}
    assert set(types) == set(PARAMS)
    signature = inspect.signature(me.evaluate).parameters
    for name, annotation in types.items():
        assert annotation == signature[name].annotation, name


def test_curve_kinds_are_the_declared_ones() -> None:
    assert get_args(CurveKind) == CURVE_PARAMS["kind"].choices


def test_every_parameter_named_by_a_metric_or_step_is_declared() -> None:
    for metric in METRICS.values():
        assert set(metric.params) <= set(PARAMS), metric.name
    drift = {name for name, option in OPTIONS.items() if option.actions == ("drift",)}
    for step in STEPS.values():
        assert set(step.params) <= set(PARAMS) | SWITCHES | drift, step.name


def test_every_parameter_is_a_flag_of_evaluate_with_its_default() -> None:
    args = build_parser().parse_args(["evaluate", "x.parquet"])
    for name, param in PARAMS.items():
        assert getattr(args, name) == param.default, name
    text = build_parser()._subparsers._group_actions[0].choices["evaluate"].format_help()
    for param in PARAMS.values():
        assert param.flag in text


def test_the_documentation_lists_every_parameter() -> None:
    """The parameters page of the documentation is made from the table (docs/hooks.py)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "docs_hooks", Path(__file__).parents[1] / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    page = hooks.parameters_page()
    assert params_markdown() in page
    assert all(f"`{p.flag}`" in page for p in PARAMS.values())


def test_result_columns_cover_every_parameter_shown() -> None:
    shown = [name for name, p in PARAMS.items() if p.column]
    assert set(shown) <= set(RESULT_COLUMNS)
    assert {"max_fpr", "min_recall", "min_precision", "n_bins", "bins"} <= set(RESULT_COLUMNS)


#: The roles under other names, so that any result column's name is free for a segment.
ROLES = {"sample": "id", "label": "lab", "score": "prob", "truth": "y", "weight": "w"}


@pytest.mark.parametrize("name", RESULT_COLUMNS)
def test_a_segment_named_like_a_result_column_is_one_clear_error(name: str,
                                                                 engine: str) -> None:
    data = make_predictions("multilabel", n_samples=6, n_labels=2, seed=1).rename(ROLES)
    with pytest.raises(me.InputError, match=rf"^segment column '{name}' clashes with the "
                       "result column of the same name; rename it in the input"):
        me.evaluate(data.with_columns(pl.col("region").alias(name)), ["f1", "roc_auc"],
                    by=name, engine=engine, columns=ROLES, bins=4)


@pytest.mark.parametrize("name", clustering.CELL_COLUMNS)
def test_a_clustering_segment_named_like_a_cell_column_is_one_clear_error(
        name: str, engine: str) -> None:
    data = pl.DataFrame({"id": [1, 2, 3], "cls": [0, 1, 1], "pred": [1, 1, 0],
                         name: ["a", "a", "b"]})
    with pytest.raises(me.InputError, match=rf"^segment column '{name}' clashes"):
        me.evaluate(data, ["contingency"], by=name, engine=engine,
                    columns={"sample": "id", "truth": "cls", "cluster": "pred"})
