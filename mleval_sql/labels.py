"""Truth that arrives late: predictions whose truth is not known yet, and outcomes kept apart
from the predictions.

- ``unlabelled="skip"`` lets the truth be null: those rows are left out of every metric (a
  :class:`~mleval_sql.sources.Derived` input of the rows whose truth is known), and each result
  row says its segment's ``label_coverage``, the share of its rows' weight whose truth is known
  (:func:`coverage`). Without it a null truth is the error it always is.
- ``labels=``: a second source of outcomes, ``sample[, label], truth`` (named as the
  predictions' columns are), joined to the predictions by sample, and by label where the
  outcomes have a label column (:class:`Outcomes`); a prediction without an outcome has a null
  truth, so unlabelled, and the predictions' own truth column, if any, is replaced.

>>> import polars as pl
>>> rows = pl.DataFrame({"sample": [1, 2, 3], "score": [0.9, 0.2, 0.7],
...                      "truth": [True, None, False]})
>>> coverage(rows.lazy(), "truth", None, []).row(0)
(0.6666666666666666,)
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import polars as pl

from mleval_sql.errors import InputError
from mleval_sql.sources import Parquet, Source, underlying
from mleval_sql.windows import GRANULARITY, LOCAL_START, START, Window

if TYPE_CHECKING:  # SQL is written only where a request reads it: sqlglot loads then
    from sqlglot import exp

#: What a null truth gets: an error, or the row is left out (``unlabelled="skip"``).
UNLABELLED = ("error", "skip")
COVERAGE = "label_coverage"


@dataclass(frozen=True)
class Known:
    """The rows whose ``truth`` is known: a derivation of an input."""

    truth: str

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        return frame.filter(pl.col(self.truth).is_not_null())

    def sql(self, table: exp.Expression) -> exp.Query:
        from sqlglot import exp

        truth = exp.column(exp.to_identifier(self.truth, quoted=True))
        return exp.select(exp.Star()).from_(table.copy()).where(
            exp.Not(this=exp.Is(this=truth, expression=exp.Null())))


@dataclass(frozen=True)
class Outcomes:
    """The predictions with the truth of ``outcomes`` (a source of ``keys`` and ``truth``),
    joined by ``keys``: a derivation of an input, read by polars (DuckDB reads its result)."""

    outcomes: Source
    keys: tuple[str, ...]
    truth: str

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        theirs = self.outcomes.polars().select(*self.keys, self.truth)
        own = frame.collect_schema().names()
        dropped = frame.drop(self.truth) if self.truth in own else frame
        return dropped.join(theirs, on=list(self.keys), how="left", nulls_equal=False)

    sql = None  # the join is polars': DuckDB reads the joined rows


def outcomes(predictions: pl.Schema, labels: Source, sample: str, label: str | None,
             truth: str) -> Outcomes:
    """The join of ``labels`` to predictions with ``predictions``' columns, checked: the
    outcomes have the sample and truth columns (and the label column where the predictions
    have one and the outcomes too), and one outcome per key (an ``InputError`` names a key
    given twice)."""
    schema = labels.schema()
    missing = [c for c in (sample, truth) if c not in schema]
    if missing:
        raise InputError(f"labels: the outcomes have no column {missing[0]!r} (they join to "
                         f"the predictions by {sample!r} and give {truth!r}); they have "
                         f"{sorted(schema.names())}")
    keys = (sample, label) if label is not None and label in schema and label in predictions \
        else (sample,)
    twice = (labels.polars().group_by(*keys).len().filter(pl.col("len") > 1).head(1)
             .collect())
    if twice.height:
        key = ", ".join(f"{k}={twice[k][0]!r}" for k in keys)
        raise InputError(f"labels: {int(twice['len'][0])} outcomes for {key}: one outcome per "
                         f"{' and '.join(keys)}")
    return Outcomes(labels, keys, truth)


def coverage(frame: pl.LazyFrame, truth: str, weight: str | None,
             by: Sequence[str]) -> pl.DataFrame:
    """Per segment of ``by``: ``label_coverage``, the share of the rows' weight whose
    ``truth`` is known (null where the segment weighs nothing)."""
    labelled = pl.col(truth).is_not_null()
    if weight is None:
        share = labelled.sum() / pl.len()
    else:
        weights = pl.col(weight).cast(pl.Float64)
        share = weights.filter(labelled).sum() / weights.sum()
    aggregated = (frame.group_by(list(by)).agg(share.alias(COVERAGE)) if by
                  else frame.select(share.alias(COVERAGE)))
    return aggregated.with_columns(
        pl.when(pl.col(COVERAGE).is_finite()).then(pl.col(COVERAGE))).collect()


def outcome_inputs(predictions: Source, labels: Source, window: Window,
                   sample: str) -> pl.DataFrame | None:
    """The outcome files each window's predictions read (by their samples): ``granularity,
    local_start, inputs`` (each file's path, size and modification time, one text per file),
    the part of a window's fingerprint that changes when its late outcomes arrive. None: the
    outcomes are not local parquet files."""
    files = underlying(labels)
    if not isinstance(files, Parquet) or any("://" in f for f in files.files):
        return None
    kind = window.kind(predictions.schema())
    made = window.polars(predictions.polars().select(sample, window.column), kind)
    keyed = made.select(sample, GRANULARITY, START).unique()
    found = (pl.scan_parquet(list(files.files), include_file_paths="_file",
                             hive_partitioning=False).select(sample, "_file").unique()
             .join(keyed, on=sample).select("_file", GRANULARITY, START).unique().collect())
    stats = pl.DataFrame([(f, os.stat(f).st_size, os.stat(f).st_mtime_ns) for f in files.files],
                         schema=["_file", "size", "mtime"], orient="row")
    return found.join(stats, on="_file").sort("_file").group_by(
        GRANULARITY, START, maintain_order=True).agg(
        pl.concat_str("_file", "size", "mtime", separator="\t").alias("inputs")).rename(
        {START: LOCAL_START})
