"""Evaluation in batches of segments, which bounds memory by the batch: every metric lives within
a segment, so the segments' rows only need to be put back on one grid. A batch holds segments of
about a budget's worth of rows (:func:`batches`): a segment as large as the budget alone, a million
one-row segments together, so that the number of segments is never the unit of cost.

>>> parts = [{"f": pl.DataFrame({"segment": ["a"], "metric": ["f1"], "average": [None],
...                              "label": ["x"], "value": [0.5]})},
...          {"f": pl.DataFrame({"segment": ["b"], "metric": ["f1"], "average": [None],
...                              "label": ["y"], "value": [0.7]})}]
>>> merge_batches(parts)["f"].height  # a and b, each with labels x and y
4
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import TypeVar

import polars as pl

from mleval_sql.progress import counted

T = TypeVar("T")

#: The memory one input row is taken to cost while polars evaluates its batch in memory: it
#: sets a batch's rows (a budget of 1 GB takes 13.3M). Measured on two cores, the exact ranking
#: and decision metrics: one 12.5M-row segment alone peaked at 1125 MiB, 1.25M rows at 274 MiB
#: (74 bytes a row beyond the libraries' ~0.2 GiB); a run of batches at 85-90 bytes a row
#: (eight 12.5M-row batches, 100M rows under 1 GB: 1311 MiB at the peak, 0.37 GB above the
#: budget). DuckDB holds its own limit within each batch.
ROW_BYTES = 75
#: A batch of at most this many segments is selected by their values, a filter that reaches the
#: parquet reader (which then skips other hive partitions); a larger one by a semi-join.
FEW_SEGMENTS = 64


def batches(counts: pl.DataFrame, by: Sequence[str], budget: int) -> list[pl.DataFrame]:
    """The segments of ``counts`` (the segment columns ``by`` and their row count ``n``) in
    batches of at most ``budget / ROW_BYTES`` rows (:func:`packed`), as frames of ``by``.

    >>> counts = pl.DataFrame({"model": ["a", "b", "c"], "n": [400_000, 500_000, 5_000_000]})
    >>> [b["model"].to_list() for b in batches(counts, ["model"], 250_000_000)]
    [['a', 'b'], ['c']]
    """
    ordered = counts.sort(by, nulls_last=True)
    numbered = ordered.with_columns(batch=pl.Series(packed(ordered["n"], budget // ROW_BYTES)))
    return [part.select(by) for part in numbered.partition_by("batch", maintain_order=True)]


def packed(sizes: Iterable[int], rows: int) -> list[int]:
    """The batch of each segment of ``sizes`` rows, in order: a batch takes segments until the
    next would take it past ``rows`` rows (a larger segment is a batch of its own).

    >>> packed([3, 3, 5, 1, 1], 4)
    [0, 1, 2, 3, 3]
    """
    numbers, batch, filled = [], 0, 0
    for size in sizes:
        if filled and filled + size > rows:
            batch, filled = batch + 1, 0
        numbers.append(batch)
        filled += size
    return numbers


def with_progress(segments: Sequence[T], what: str) -> Iterator[T]:
    """``segments`` (batches of them) one by one, counted on a terminal
    (``mleval: checks, by batch 3/8``; nothing when stderr is not one)."""
    return counted(segments, f"{what}, by batch")


def merge_batches(parts: list[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    """Each step's rows from every batch's run, as one run over all segments would give."""
    return {name: _with_every_label(pl.concat([p[name] for p in parts], how="vertical_relaxed"))
            for name in parts[0]}


def _with_every_label(rows: pl.DataFrame) -> pl.DataFrame:
    """A label that one segment lacks but another has gets its metric rows with NULL values, as
    when all segments are evaluated at once. Curve tables (no ``metric`` column) and the cells
    of a confusion matrix (``predicted``) or contingency table (``truth``, ``cluster``) have no
    grid."""
    if "metric" not in rows.columns:
        return rows
    cells = pl.any_horizontal(pl.lit(False), *(pl.col(c).is_not_null() for c in (
        "predicted", "truth", "cluster") if c in rows.columns))
    keys = ["segment", "metric", "average", "label"]
    values = rows.filter(~cells)
    grid = values.select("segment").unique(maintain_order=True).join(
        values.select(keys[1:]).unique(maintain_order=True), how="cross")
    regridded = grid.join(values, on=keys, how="left", nulls_equal=True).select(rows.columns)
    return pl.concat([regridded, rows.filter(cells)])
