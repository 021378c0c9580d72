"""The clustering task's input: when a request is one, its columns and the checks of its rows.

A clustering table has one row per sample::

    sample  truth (the reference class)  cluster  [weight]  [segment columns...]

The task is never guessed from values: a request is clustering when ``task="clustering"``, when
every metric asked is a clustering metric, when the ``cluster`` role is mapped in ``columns=``,
or when the input has a column named ``cluster`` (not a segment column) and no ``score`` column.

>>> schema = pl.Schema({"id": pl.String, "cls": pl.Int64, "pred": pl.Int64})
>>> is_clustering(schema, Columns(sample="id", truth="cls", cluster="pred"), [], None,
...               mapped={"cluster"})
True
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

import polars as pl

from mleval_sql.params import RESULT_COLUMNS
from mleval_sql.schema import (
    Columns,
    InputError,
    Task,
    check_present,
    check_weight_and_segments,
)

#: Result columns of the clustering rows: the cell of the contingency table or pair matrix.
CELL_COLUMNS = ("truth", "cluster")
#: The metrics a clustering request computes when none are named.
DEFAULT_METRICS = ("adjusted_rand", "adjusted_mutual_info", "homogeneity", "completeness",
                   "v_measure")


def is_clustering(schema: pl.Schema, columns: Columns, by: Sequence[str], task: Task | None,
                  *, mapped: Collection[str]) -> bool:
    """Whether the request is clustering, from the task, the mapping and the column names
    (``mapped``: the roles the user mapped in ``columns=``)."""
    if task is not None:
        if task != "clustering" and "cluster" in mapped:
            raise InputError(f"columns['cluster'] is for task 'clustering', not {task!r}")
        return task == "clustering"
    if "cluster" in mapped:
        return True
    names = set(schema.names())
    return columns.cluster in names and columns.cluster not in by and columns.score not in names


def check_columns(schema: pl.Schema, columns: Columns, by: Sequence[str]) -> str | None:
    """Check names and types before any scan; return the weight column to use, if any."""
    roles = {"sample": columns.sample, "truth": columns.truth, "cluster": columns.cluster}
    check_present(schema, roles, " for task 'clustering'")
    for role in ("truth", "cluster"):
        dtype = schema[roles[role]]
        if dtype.is_float() or dtype.is_nested():
            raise InputError(f"column {roles[role]!r} ({role}) must hold integers or strings, "
                             f"not {dtype}")
    return check_weight_and_segments(schema, columns, by, roles.values(),
                                     reserved=(*RESULT_COLUMNS, *CELL_COLUMNS))


def check_summary(summary: pl.DataFrame, columns: Columns, weight: str | None) -> Task:
    """Raise the first problem the clustering summary shows; return ``"clustering"``."""
    total = summary.select(pl.col(c).sum() for c in (
        "n_rows", "null_sample", "null_truth", "null_cluster", "bad_weight",
        "dup_rows")).row(0, named=True)
    if not total["n_rows"]:
        raise InputError("the input has no rows")

    def example(key: str) -> object:
        # the smallest offending sample over all segments: the same on either engine
        return summary.select(pl.col(key).min()).item()

    if total["null_sample"]:
        raise InputError(f"column {columns.sample!r} has {total['null_sample']} null value(s) "
                         f"in {total['n_rows']} rows")
    for role, name in (("truth", columns.truth), ("cluster", columns.cluster)):
        if total[f"null_{role}"]:
            raise InputError(f"column {name!r} ({role}) has {total[f'null_{role}']} null "
                             f"value(s), e.g. sample {example(f'example_null_{role}')!r}")
    if total["bad_weight"]:
        raise InputError(f"column {weight!r} has {total['bad_weight']} null, negative or "
                         "non-finite weight(s)")
    if total["dup_rows"]:
        raise InputError(
            f"{total['dup_rows']} duplicate {columns.sample!r} row(s), e.g. sample "
            f"{example('example_dup')!r}: clustering takes one row per sample; if the input "
            "holds several models or datasets, name their columns in by=")
    return "clustering"


def check_whole_weights(summary: pl.DataFrame, weight: str | None, metrics: list[str]) -> None:
    """Metrics that read weights as counts (the expected mutual information's hypergeometric
    model) need every weight to be a whole number."""
    if metrics and summary["fractional_weight"].sum():
        sample = summary.select(pl.col("example_fractional").min()).item()
        raise InputError(f"{metrics[0]} reads weights as counts, but column {weight!r} has "
                         f"{summary['fractional_weight'].sum()} fractional weight(s), e.g. "
                         f"sample {sample!r}")
