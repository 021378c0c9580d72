"""Run the registry's steps as polars lazy plans, collected together at the end."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from itertools import accumulate, pairwise
from typing import TypeVar

import polars as pl

from mleval_sql.engines import Keep, segments
from mleval_sql.engines import polars as plans
from mleval_sql.engines.base import BaseEngine, Canonical, canonical_columns
from mleval_sql.engines.polars import collect
from mleval_sql.engines.polars.collect import as_text, planned
from mleval_sql.engines.segments import merge_batches, packed, with_progress
from mleval_sql.progress import stage
from mleval_sql.registry import STEPS
from mleval_sql.schema import Columns
from mleval_sql.sources import Source

T = TypeVar("T")



class PolarsEngine(BaseEngine):
    """Evaluate with polars, in memory.

    Without a budget the canonical rows are read once and held: the checks run on all of
    them, the metrics on batches of whole segments of about
    :data:`~mleval_sql.engines.polars.collect.HELD_BATCH_ROWS` rows
    (slices of the held rows), whose sorts run faster than one sort of tens of millions of
    rows. With a ``memory_limit``, an input the budget holds is held the same way; a larger
    one goes in batches of segments of about the budget's rows (engines/base.py,
    :data:`mleval_sql.engines.segments.ROW_BYTES` a row), each read into memory when its turn
    comes (once for the checks, once for the metrics) and evaluated there: every metric lives
    within a segment, so only one batch's rows and statistics are held (a parquet lake
    partitioned by the segment columns is then read a few partitions at a time). A segment
    larger than the budget alone runs on polars' streaming engine, whose peak the budget does
    not bound: a warning says so. ``clustering``: the input is a clustering table (sample,
    truth, cluster, weight), checked by cluster_summary.
    """

    name = "polars"

    def __init__(self, source: Source, columns: Columns, weight: str | None, by: Sequence[str],
                 *, memory_limit: str | int | None = None, clustering: bool = False) -> None:
        super().__init__(by, memory_limit)
        self.source = source.polars()
        self.text_keys = {name for name, dtype in self.source.collect_schema().items()
                          if dtype == pl.String}
        self.canonical = canonical_columns(columns, weight, clustering=clustering)
        self.unit_weights = weight is None  # every weight is 1: plans may count in integers
        self.summary_plan = plans.cluster_summary if clustering else plans.validate_summary
        self.held: pl.DataFrame | None = None  # the canonical rows, where they are held
        self.batches: list[pl.DataFrame] = []  # ... as batches of whole segments
        self.shared: dict[str, pl.LazyFrame] = {}  # the statistics of the whole input
        self.counts: pl.DataFrame | None = None  # under a budget: the rows of each segment

    def summary(self) -> pl.DataFrame:
        if self.budget is not None:
            large = self.over_budget()
            if large is not None:
                warnings.warn(f"{large}: polars streams it, with a peak the limit does not "
                              "bound (engine='duckdb' keeps to it)", stacklevel=2)
            if not self._fits(None):  # a batch of segments at a time; else held, read once
                return super().summary()
        with stage("reading"):
            held = self._canonical(self.source).collect()
        self.batches = in_batches(held, collect.HELD_BATCH_ROWS)
        # the rows in batch order: the batches' own memory (a sorted copy, where in_batches
        # had to sort), not the rows as read besides
        self.held = held if len(self.batches) == 1 else pl.concat(self.batches, rechunk=False)
        del held
        if self.summary_plan is not plans.validate_summary:
            return self._summary(self.held)
        # a batch of whole segments at a time: the checks' hash tables hold a batch's rows,
        # not every row (at 30M rows 1.1 GiB at the peak rather than 2.0)
        return pl.concat([self._summary(rows) for rows in self.batches])

    def _run_batches(self, steps: list[str], params: dict[str, object], *,
                     numeric_truth: bool, keep: Keep) -> dict[str, pl.DataFrame]:
        if self.held is None:
            return super()._run_batches(steps, params, numeric_truth=numeric_truth, keep=keep)
        parts = [self._results(rows, steps, params, numeric_truth=numeric_truth, keep=keep)
                 for rows in with_progress(self.batches, "metrics")]
        return parts[0] if len(parts) == 1 else merge_batches(parts)

    def close(self) -> None:
        self.held = None
        self.batches = []

    def _ranks_in_memory(self) -> bool:
        """Predictions held in memory, or read a batch of segments at a time under a budget
        that holds the largest segment (a larger one: the plans stream it)."""
        if self.summary_plan is not plans.validate_summary:
            return False
        return self.held is not None or (self.budget is not None and self.over_budget() is None)

    def _each_ranked(self, run: Callable[[pl.DataFrame], T]) -> list[T]:
        """The held rows' batches (slices of them), or each batch read in turn."""
        if self.held is not None:
            return [run(rows) for rows in self.batches]
        return super()._each_ranked(run)

    def _frame(self, rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
        # under a budget that holds the largest segment a batch is read into memory already
        return rows.collect(engine="streaming") if isinstance(rows, pl.LazyFrame) else rows

    def _sample_ids(self) -> pl.DataFrame:
        return self.shared["sample_ids"].collect()

    def _segment_counts(self) -> pl.DataFrame:
        if self.counts is None:
            self.counts = (self.source.group_by(self.by).agg(n=pl.len()) if self.by else
                           self.source.select(n=pl.len())).collect(engine="streaming")
        return self.counts

    def over_budget(self) -> str | None:
        """The segments larger than the budget holds in memory, in words (None: none, or no
        budget): polars would stream them, with a peak the limit does not bound."""
        if self.budget is None:
            return None
        rows = self.budget // segments.ROW_BYTES
        large = self._segment_counts().filter(pl.col("n") > rows).sort("n", descending=True)
        if not large.height:
            return None
        first = large.row(0, named=True)
        what = (f"segment {', '.join(f'{c}={first[c]!r}' for c in self.by)} has"
                if self.by else "the input has")
        more = f" (and {large.height - 1} more)" if large.height > 1 else ""
        return (f"{what} {first['n']:,} rows{more}, more than memory_limit holds in memory "
                f"(about {rows:,} rows)")

    @contextmanager
    def _restricted(self, keys: pl.DataFrame | None,
                    *, few: bool) -> Iterator[pl.LazyFrame | pl.DataFrame]:
        """The canonical rows of the segments in ``keys``: a few by a filter on the source's
        own columns (which reaches the parquet reader, so it skips other hive partitions), many
        by a semi-join; read into memory where they fit the budget (or are held already), else
        a plan for the streaming engine."""
        if self.held is not None and keys is None:
            yield self.held
            return
        rows = self._canonical(self.source)
        if keys is not None and few:
            rows = self._canonical(self.source.filter(pl.any_horizontal(
                pl.all_horizontal(pl.col(c).eq_missing(pl.lit(v, dtype=keys.schema[c]))
                                  for c, v in row.items())
                for row in keys.iter_rows(named=True))))
        elif keys is not None:
            rows = self._canonical(self.source.join(keys.lazy(), on=self.by, how="semi",
                                                    nulls_equal=True))
        if not self._fits(keys):
            yield rows
            return
        with stage("reading"):
            rows = rows.collect(engine="streaming")
        yield rows

    def _fits(self, keys: pl.DataFrame | None) -> bool:
        """The rows of the segments in ``keys`` (None: all of them) fit the budget, as the
        rows per segment tell (False without a budget)."""
        if self.budget is None:
            return False
        counts = self._segment_counts()
        if keys is not None:
            counts = counts.join(keys, on=self.by, nulls_equal=True)
        return int(counts["n"].sum()) * segments.ROW_BYTES <= self.budget

    def _summary(self, rows: pl.LazyFrame | pl.DataFrame) -> pl.DataFrame:
        if isinstance(rows, pl.LazyFrame):  # a segment larger than the budget
            return as_text(self.summary_plan(rows).collect(engine="streaming"))
        if self.summary_plan is not plans.validate_summary:
            return as_text(self.summary_plan(rows.lazy()).collect())
        # rows in memory: read in their own layout where they can be (validate.summary_of_rows)
        return as_text(plans.validate.summary_of_rows(
            rows, unit_weights=self.unit_weights).collect())

    def _canonical(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        """The canonical columns, text keys (label, segment columns) as Categorical: the plans
        group and join by them, and a Categorical hashes its code, not its text (it sorts by
        its text all the same; results give text back)."""
        keys = [pl.col(c).cast(pl.Categorical) if c in self.text_keys else pl.col(c)
                for c in self.by]
        segment = keys[0] if len(keys) == 1 else pl.struct(*keys) if keys else pl.lit(0)
        columns = [_expression(c).cast(pl.Categorical) if c.name == "label" and (
            c.column in self.text_keys or isinstance(c.value, str)) else _expression(c)
            for c in self.canonical]
        return frame.select(*columns, segment=segment)

    def _results(self, rows: pl.LazyFrame | pl.DataFrame, steps: list[str],
                 params: dict[str, object], *, numeric_truth: bool,
                 keep: Keep) -> dict[str, pl.DataFrame]:
        """Every step's plan over ``rows``, the final steps' rows collected in one go (the plan
        of a segment larger than the budget on the streaming engine, which need not hold it)."""
        truth = pl.col("truth") if numeric_truth else pl.col("truth").cast(pl.Boolean)
        relations = {**self.shared, "predictions": rows.lazy().with_columns(truth)}
        given = None
        if _fuses_delong(steps, params):
            # the curve's metrics and DeLong's variance from one pass by run number
            curve, variance = plans.ranking.ranked_delong(
                relations["predictions"], bins=params["bins"],  # type: ignore[arg-type]
                max_fpr=params["max_fpr"],  # type: ignore[arg-type]
                keep=keep.get("curve_metrics"))
            given = {"curve_metrics": curve, "delong": variance}
            steps = [s for s in steps if s not in ("ranked_points", "block_placements")]
        return planned(relations, steps, params, keep, given=given, shared=self.shared,
                       streaming=isinstance(rows, pl.LazyFrame))


def _fuses_delong(steps: Sequence[str], params: dict[str, object]) -> bool:
    """Whether DeLong's variance and the curve's metrics are all that read the curve, over
    whole counts and per label: :func:`plans.ranking.ranked_delong` gives both from one
    pass."""
    readers = {s for s in steps if {"curve_points", "block_placements"} & set(STEPS[s].reads)}
    return ("delong" in steps and bool(params["unit_weights"]) and not params["micro"]
            and readers <= {"curve_metrics", "block_placements", "delong"})


def _expression(column: Canonical) -> pl.Expr:
    expr = pl.lit(column.value) if column.column is None else pl.col(column.column)
    cast = {"double": pl.Float64, "bool": pl.Boolean}.get(column.cast or "")
    return (expr if cast is None else expr.cast(cast)).alias(column.name)


def in_batches(rows: pl.DataFrame, size: int) -> list[pl.DataFrame]:
    """``rows`` in batches of whole segments of at most ``size`` rows (a larger segment alone),
    as slices of them ordered by segment (sorted first only where a segment's rows are not
    together already, as they are when read from a lake partitioned by the segment).

    >>> rows = pl.DataFrame({"segment": ["a", "b", "a", "c"], "x": [1, 2, 3, 4]})
    >>> [part["segment"].to_list() for part in in_batches(rows, 2)]
    [['a', 'a'], ['b', 'c']]
    >>> [part.height for part in in_batches(rows, 1)]  # a segment larger than size: alone
    [2, 1, 1]
    """
    if rows.height <= size:
        return [rows]
    runs = rows["segment"].rle()  # one pass: the runs of one segment, in order
    if runs.struct.field("value").n_unique() < runs.len():  # a segment in several runs
        segment = pl.col("segment")
        order = segment.to_physical() if rows.schema["segment"] == pl.Categorical else segment
        rows = rows.sort(order, maintain_order=True, nulls_last=True)
        runs = rows["segment"].rle()
    lengths = runs.struct.field("len").to_list()
    starts = list(accumulate([0, *lengths[:-1]]))
    batch = packed(lengths, size)
    bounds = [start for start, this, last in zip(starts, batch, [-1, *batch], strict=False)
              if this != last]
    return [rows.slice(a, b - a) for a, b in pairwise([*bounds, rows.height])]
