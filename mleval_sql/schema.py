"""The canonical long-format table, the column mapping onto it, and the checks of an input.

One row per (sample, label) pair::

    sample  label  score  truth  [weight]  [segment columns...]

>>> Columns.from_mapping({"score": "prob"}).score
'prob'
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Literal

import polars as pl

from mleval_sql.errors import InputError
from mleval_sql.params import RESULT_COLUMNS

Task = Literal["binary", "multiclass", "multilabel", "regression", "clustering"]
TASKS: tuple[Task, ...] = ("binary", "multiclass", "multilabel", "regression", "clustering")


@dataclass(frozen=True)
class Columns:
    """Where each canonical column is found in the user's table.

    ``weight`` is optional, and so is ``label``: without a label column (``label=None``, or the
    default ``label`` absent from the input) every row is the one label of a binary task, named
    after the score column (:attr:`single_label`).
    """

    sample: str = "sample"
    label: str | None = "label"
    score: str = "score"
    truth: str = "truth"
    weight: str | None = "weight"
    cluster: str = "cluster"  # clustering: the assigned cluster (truth is the reference class)

    @classmethod
    def from_mapping(cls, mapping: Mapping[str, str | None] | None) -> Columns:
        """Build from ``{"canonical": "user column"}``; unknown keys are an error."""
        mapping = dict(mapping or {})
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise InputError(
                f"unknown column role {unknown[0]!r} in columns=; roles are {sorted(known)}"
            )
        for role, name in mapping.items():
            if name is None and role not in ("weight", "label"):
                raise InputError(f"column role {role!r} needs a column name")
            if name is not None and not isinstance(name, str):
                raise InputError(f"columns[{role!r}] must be a column name, got {name!r}")
        return cls(**mapping)

    def required(self) -> dict[str, str]:
        """Canonical role -> user column, for the roles the input must have."""
        label = {} if self.label is None else {"label": self.label}
        return {"sample": self.sample, **label, "score": self.score, "truth": self.truth}

    @property
    def single_label(self) -> str:
        """The label's name when the input has no label column: the score column's name, which
        says where the numbers come from (``score``, or ``prob`` for ``columns={"score":
        "prob"}``)."""
        return self.score

    def for_schema(self, schema: pl.Schema) -> Columns:
        """This mapping with the default label column dropped when the input has none (a
        binary log ``sample, score, truth``); a label column named in the mapping must exist.

        >>> Columns().for_schema(pl.Schema({"sample": pl.Int64, "score": pl.Float64})).label
        """
        if self.label == "label" and "label" not in schema.names():
            return replace(self, label=None)
        return self


def _kind(dtype: pl.DataType) -> str:
    if dtype == pl.Boolean:
        return "bool"
    if dtype.is_numeric():
        return "number"
    return "other"


def check_columns(schema: pl.Schema, columns: Columns, by: Sequence[str]) -> str | None:
    """Check names and types before any scan; return the weight column to use, if any."""
    check_present(schema, columns.required())
    if _kind(schema[columns.score]) != "number":
        raise InputError(f"column {columns.score!r} (score) must be numeric, "
                         f"not {schema[columns.score]}")
    if _kind(schema[columns.truth]) == "other":
        raise InputError(f"column {columns.truth!r} (truth) must be boolean or numbers, "
                         f"not {schema[columns.truth]}")
    return check_weight_and_segments(schema, columns, by, columns.required().values())


def check_present(schema: pl.Schema, roles: Mapping[str, str], task: str = "") -> None:
    """Every role's column (``{"score": "prob"}``) is in the input (``task``: said in the
    error, e.g. " for task 'clustering'")."""
    present = set(schema.names())
    for role, name in roles.items():
        if name not in present:
            hint = "" if role == name else f" (mapped from {role!r})"
            raise InputError(f"missing column {name!r}{hint}{task}; the input has "
                             f"{sorted(present)}")


def check_weight_and_segments(schema: pl.Schema, columns: Columns, by: Sequence[str],
                              roles: Iterable[str], reserved: Sequence[str] = RESULT_COLUMNS,
                              ) -> str | None:
    """The weight column to use, if any, once it and the segment columns ``by`` are checked: a
    segment column exists, is none of the ``roles`` columns, and is not named like a column of
    the results (``reserved``), where it would collide."""
    present = set(schema.names())
    weight = columns.weight if columns.weight in present else None
    if columns.weight not in (None, "weight") and weight is None:
        raise InputError(f"missing weight column {columns.weight!r}; "
                         f"the input has {sorted(present)}")
    if weight is not None and _kind(schema[weight]) != "number":
        raise InputError(f"column {weight!r} (weight) must be numeric, not {schema[weight]}")
    used = {*roles, weight} - {None}
    for name in by:
        if name not in present:
            raise InputError(f"segment column {name!r} is not in the input; "
                             f"it has {sorted(present)}")
        if name in used:
            raise InputError(f"segment column {name!r} is also a column the metrics read")
        if name in reserved:
            raise InputError(f"segment column {name!r} clashes with the result column of the "
                             f"same name; rename it in the input (e.g. a view or "
                             f"pl.col({name!r}).alias({name + '_'!r})) and segment by that")
    if len(set(by)) != len(by):
        raise InputError(f"segment columns repeat: {list(by)}")
    return weight


def check_summary(summary: pl.DataFrame, columns: Columns, weight: str | None,
                  task: Task | None, *, expected: bool = False,
                  graded: str | None = None) -> Task:
    """Raise the first problem the validation summary shows; return the task (inferred if None).

    Regression is never inferred (a stray 2 in a 0/1 column is an error, not a new task): the
    caller passes it, or asks for regression metrics only. ``expected``: the truth column
    holds each row's probability (estimated metrics), and the task is the one given.
    ``graded``: only metrics of graded relevance are asked (this one is named in errors): the
    truth may be any finite number >= 0.
    """
    total = summary.select(pl.col(c).sum() for c in (
        "n_rows", "null_sample", "null_label", "null_score", "nan_score", "null_truth",
        "bad_truth", "nan_truth", "bad_weight", "dup_rows", "uneven_weight")).row(0, named=True)
    if not total["n_rows"]:
        raise InputError("the input has no rows")
    truth_check = (("nan_truth", columns.truth, "NaN or infinite")
                   if task == "regression" or graded
                   else ("bad_truth", columns.truth, "outside {0, 1}"))
    for key, col, what in [
        ("null_sample", columns.sample, "null"), ("null_label", columns.label, "null"),
        ("null_score", columns.score, "null"), ("nan_score", columns.score, "NaN or infinite"),
        *([] if expected else [("null_truth", columns.truth, "null"), truth_check]),
    ]:
        if total[key]:
            count = (f"{total[key]} value(s) {what}" if what.startswith("outside")
                     else f"{total[key]} {what} value(s)")
            later = ("; a truth not known yet: unlabelled='skip' (--unlabelled skip) leaves "
                     "such rows out" if key == "null_truth" else "")
            raise InputError(f"column {col!r} has {count} in "
                             f"{total['n_rows']} rows{_culprit(summary, key, columns)}{later}")
    negative = summary["example_negative_truth_sample"].drop_nulls() \
        if graded and "example_negative_truth_sample" in summary.columns else None
    if negative is not None and negative.len():
        raise InputError(f"{graded} reads column {columns.truth!r} as graded relevance, which "
                         f"must be >= 0, but it has {summary['min_bad_truth'].min():g}"
                         f"{_culprit(summary, 'negative_truth', columns)}")
    if total["bad_weight"]:
        raise InputError(f"column {weight!r} has {total['bad_weight']} null, negative or "
                         "non-finite weight(s)")

    def example(key: str) -> object:
        # the smallest offending sample over all segments: the same on either engine
        return summary.select(pl.col(key).min()).item()

    if total["dup_rows"] and columns.label is None:
        raise InputError(
            f"{total['dup_rows']} duplicate {columns.sample!r} row(s), e.g. sample "
            f"{example('example_dup')!r}: without a label column every sample has one row (a "
            "binary task); name the label column (columns={'label': ...}, --column label=NAME), "
            "or the columns of several models or datasets in by= (--by)")
    if total["dup_rows"]:
        raise InputError(
            f"{total['dup_rows']} duplicate ({columns.sample}, {columns.label}) row(s), e.g. "
            f"sample {example('example_dup')!r}; if the input holds several models or datasets, "
            "name their columns in by= (--by on the command line)")
    if summary.filter(pl.col("min_rows") < pl.col("n_labels")).height:
        raise InputError(
            f"sample {example('example_short')!r} lacks rows for some labels: every sample of a "
            "segment needs a row for each label the segment has")
    if total["uneven_weight"]:
        raise InputError(f"sample {example('example_weight')!r} has different weights on its "
                         f"rows; {weight!r} must be constant within a sample")
    if expected:
        assert task is not None
        return task
    if graded and task is None and total["bad_truth"] and summary["max_rows"].max() > 1:
        return "multilabel"  # relevance grades, not one true class per sample
    return _task(summary, columns, task)


def _culprit(summary: pl.DataFrame, key: str, columns: Columns) -> str:
    """Where a bad score or truth is: its values' range and the smallest (sample, label) row
    with one, e.g. ``": 2.0 to 7.0, e.g. 7.0 at sample 's003', label 'a'"``."""
    example = f"example_{key}_sample"
    if example not in summary.columns:
        return ""
    fields = [c for c in summary.columns if c.startswith(f"example_{key}_")]
    rows = summary.select(fields).filter(pl.col(example).is_not_null())
    if rows.is_empty():
        return ""
    row = {name.removeprefix(f"example_{key}_"): value
           for name, value in rows.sort(fields).row(0, named=True).items()}
    where = f"sample {row['sample']!r}" + (
        "" if columns.label is None else f", label {row['label']!r}")
    if key == "bad_truth":
        low, high = summary["min_bad_truth"].min(), summary["max_bad_truth"].max()
        span = f"{low:g}" if low == high else f"{low:g} to {high:g}"
        return f": {span}, e.g. {row['value']:g} at {where}"
    if key in ("nan_score", "negative_truth"):
        return f", e.g. {row['value']} at {where}"
    return f", e.g. at {where}"


def check_probabilities(summary: pl.DataFrame, columns: Columns, metrics: list[str]) -> None:
    """Metrics that read scores as probabilities need every score in [0, 1]."""
    low, high = summary["min_score"].min(), summary["max_score"].max()
    if metrics and (low < 0 or high > 1):
        raise InputError(f"{metrics[0]} reads scores as probabilities, but column "
                         f"{columns.score!r} has values from {low} to {high}, outside [0, 1]")


def _task(summary: pl.DataFrame, columns: Columns, task: Task | None) -> Task:
    if task is not None and task not in TASKS:
        raise InputError(f"unknown task {task!r}; tasks are {list(TASKS)}")
    one_row = summary["max_rows"].max() == 1
    min_true, max_true = summary["min_true"].min(), summary["max_true"].max()
    exactly_one = min_true == 1 and max_true == 1
    if task is None:
        if one_row:
            return "binary"
        if exactly_one:
            warnings.warn("task inferred as 'multiclass' (every sample has exactly one true "
                          "label); set the task to 'multilabel' to score labels independently",
                          stacklevel=3)
            return "multiclass"
        return "multilabel"
    if task == "regression":
        return task
    if columns.label is None and task != "binary":
        raise InputError(f"task {task!r} needs a label column; without one every row is the "
                         "one label of a binary task (name it with columns={'label': ...}, "
                         "--column label=NAME)")
    if task == "binary" and not one_row:
        raise InputError(f"task 'binary' needs one row per sample, but some sample has "
                         f"{summary['max_rows'].max()} rows (several labels): use "
                         "task='multilabel' or 'multiclass'")
    if task == "multiclass" and not exactly_one:
        sample = summary.select(pl.col("example_not_one_true").min()).item()
        raise InputError(f"task 'multiclass' needs exactly one true label per sample in "
                         f"{columns.truth!r}, but samples have {min_true} to {max_true}, "
                         f"e.g. sample {sample!r}")
    return task


def enums_as_strings(frame: pl.LazyFrame) -> pl.LazyFrame:
    """``frame`` with Enum columns as plain strings.

    DuckDB reads Arrow dictionaries as VARCHAR, so labels and segments must compare and sort by
    their text on the polars side too. A Categorical does (polars >= 1.32 sorts it by its text),
    and the polars engine groups by its codes rather than hashing text; an Enum sorts by its
    category order (argmax ties and the result order would differ between the engines).
    """
    coded = [name for name, dtype in frame.collect_schema().items()
             if isinstance(dtype, pl.Enum)]
    return frame.with_columns(pl.col(coded).cast(pl.String)) if coded else frame
