"""Evaluation one segment at a time, which bounds memory by the largest segment: every metric
lives within a segment, so the segments' rows only need to be put back on one grid.

>>> parts = [{"f": pl.DataFrame({"segment": ["a"], "metric": ["f1"], "average": [None],
...                              "label": ["x"], "value": [0.5]})},
...          {"f": pl.DataFrame({"segment": ["b"], "metric": ["f1"], "average": [None],
...                              "label": ["y"], "value": [0.7]})}]
>>> together(parts)["f"].height  # a and b, each with labels x and y
4
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from typing import TypeVar

import polars as pl

T = TypeVar("T")


def column_values(segment: object, by: Sequence[str]) -> list[object]:
    """The value of each segment column in an engine's ``segment`` key (the value itself for
    one column, a struct of them for several)."""
    return [segment] if len(by) == 1 else [segment[c] for c in by]  # type: ignore[index]


def with_progress(segments: Sequence[T], what: str) -> Iterator[T]:
    """``segments`` one by one, counted on one line of a terminal (nothing when stderr is not
    one), for an engine that shows no progress of its own."""
    if not sys.stderr.isatty():
        yield from segments
        return
    for done, segment in enumerate(segments):
        sys.stderr.write(f"\rmleval: {what}, segment {done + 1}/{len(segments)}")
        sys.stderr.flush()
        yield segment
    sys.stderr.write("\r\033[K")


def together(parts: list[dict[str, pl.DataFrame]]) -> dict[str, pl.DataFrame]:
    """Each step's rows from every segment's run, as one run over all segments would give."""
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
