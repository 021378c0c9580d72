"""What every engine does the same way: the canonical columns, the loop over batches of segments
under a memory budget, the two entry points (``summary``, ``results``) and the bootstrap of rows
ranked once. An engine subclasses :class:`BaseEngine` and supplies only what differs: how it
counts the rows per segment, how it restricts its input to a batch of segments, how it runs the
summary and the steps, and (to rank a bootstrap's rows once) how it hands a batch's canonical
rows over as a polars frame.

>>> [c.name for c in canonical_columns(Columns(), "weight", clustering=False)]
['sample', 'label', 'score', 'truth', 'weight']
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

import polars as pl

from mleval_sql import uncertainty
from mleval_sql.engines import Keep, memory_bytes, segments
from mleval_sql.engines.segments import batches, merge_batches, with_progress
from mleval_sql.registry import STEPS
from mleval_sql.schema import Columns

T = TypeVar("T")


@dataclass(frozen=True)
class Canonical:
    """One canonical column: read from the user's ``column``, or the constant ``value``; cast
    to ``cast`` (``"double"``; ``"bool"``: a 0/1 truth as a boolean) when given."""

    name: str
    column: str | None = None
    value: object = None
    cast: Literal["double", "bool"] | None = None


def canonical_columns(columns: Columns, weight: str | None, *, clustering: bool,
                      truth_as_bool: bool = False) -> list[Canonical]:
    """The canonical columns (the segment key aside) and where each comes from: ``sample,
    label, score, truth, weight`` (clustering: ``sample, truth, cluster, weight``). Without a
    label column every row is the one label of a binary task, named after the scores; without a
    weight column every weight is 1."""
    weight_column = Canonical("weight", weight, None if weight else 1.0, "double")
    if clustering:
        return [Canonical("sample", columns.sample), Canonical("truth", columns.truth),
                Canonical("cluster", columns.cluster), weight_column]
    return [Canonical("sample", columns.sample),
            Canonical("label", columns.label, columns.single_label if columns.label is None
                      else None),
            Canonical("score", columns.score, cast="double"),
            Canonical("truth", columns.truth, cast="bool" if truth_as_bool else None),
            weight_column]


class BaseEngine:
    """The segment loop and entry points of an engine over ``by`` under ``memory_limit``.

    Under a budget with segment columns, :meth:`summary` splits the segments into batches of
    about the budget's rows (:func:`mleval_sql.engines.segments.batches`), and both entry
    points run on each batch in turn; every metric lives within a segment, so the batches'
    rows only need to be put back on one grid.
    """

    name: str
    #: Every weight is 1 (no weight column): the steps may count instead of summing weights.
    unit_weights: bool = False
    #: A bootstrap whose metrics the rows ranked once give (plans.bootstrap.serves) ranks each
    #: batch's rows once for every replicate, where the engine can hand them over in memory
    #: (:meth:`_ranks_in_memory`). False: every replicate through the steps over the replicated
    #: rows (queries/replicates.sql), the oracle the tests hold the ranked rows to.
    ranks_replicates: bool = True

    def __init__(self, by: Sequence[str], memory_limit: str | int | None) -> None:
        self.by = list(by)
        self.budget = None if memory_limit is None else memory_bytes(memory_limit)
        self.batches: list[pl.DataFrame] = []
        self.whole: set[str] = set()  # the statistics of the whole input computed so far

    # -- what each engine supplies ----------------------------------------------------------

    def _segment_counts(self) -> pl.DataFrame:
        """The input's rows per segment: the segment columns and ``n``."""
        raise NotImplementedError

    def _restricted(self, keys: pl.DataFrame | None, *, few: bool) -> AbstractContextManager[Any]:
        """The input of the segments in ``keys`` (their columns' values; None: all of it), as
        the engine's own handle while the context is open. ``few``: a filter on the values
        reaches a reader's partitions; otherwise a semi-join is cheaper."""
        raise NotImplementedError

    def _summary(self, rows: Any) -> pl.DataFrame:
        """The validation summary of ``rows`` (queries/validate_summary.sql; clustering:
        queries/cluster_summary.sql)."""
        raise NotImplementedError

    def _results(self, rows: Any, steps: list[str], params: dict[str, object], *,
                 numeric_truth: bool, keep: Keep) -> dict[str, pl.DataFrame]:
        """Every step run on ``rows``: the metric rows of each final step."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what the engine holds (nothing by default)."""

    def over_budget(self) -> str | None:
        """What of the input the engine cannot evaluate within its memory budget, in words
        (None: nothing; an engine that holds its own limit, as DuckDB does, says None)."""
        return None

    def _ranks_in_memory(self) -> bool:
        """Whether the engine can hand a bootstrap's rows to the kernel that ranks them once
        (:meth:`_frame`): the input is predictions (not a clustering table), and every batch
        of segments it reads fits its memory (no segment larger than the budget). False by
        default: an engine whose rows live elsewhere (a database, Spark) runs the replicated
        plans."""
        return False

    def _frame(self, rows: Any) -> pl.DataFrame:
        """The canonical rows of the engine's handle ``rows`` (a batch of segments, as
        :meth:`_restricted` gives it) as a polars frame in memory, truth boolean."""
        raise NotImplementedError

    def _sample_ids(self) -> pl.DataFrame:
        """The table of the ``sample_ids`` step (sample, id), by id, once it has run."""
        raise NotImplementedError

    def replicate_chunks(self, steps: Sequence[str], params: dict[str, object], *,
                         rows: int, keep: Keep) -> list[list[int]]:
        """The bootstrap's replicates (0 .. resamples - 1) in the runs :meth:`results` takes
        at once: every replicate where the rows are ranked once for all of them (they hold a
        few numbers per label and replicate, not the rows); else each run of ``steps`` reads
        the input's ``rows`` once per replicate, so as many as the budget holds
        (:data:`mleval_sql.uncertainty.CHUNK_ROWS` rows without one)."""
        if self._ranks_replicates(steps, self.switches(steps, params), keep,
                                  numeric_truth=False):
            return [list(range(int(params["resamples"])))]  # type: ignore[call-overload]
        budget = (self.budget // uncertainty.REPLICATED_ROW_BYTES if self.budget
                  else uncertainty.CHUNK_ROWS)
        return uncertainty.chunks(int(params["resamples"]), rows=rows,  # type: ignore[call-overload]
                                  budget_rows=budget)

    # -- the same on every engine -----------------------------------------------------------

    def summary(self) -> pl.DataFrame:
        """The validation summary, a batch of segments at a time under a memory budget."""
        if self.budget is not None and self.by:
            self.batches = batches(self._segment_counts(), self.by, self.budget)
        return self._each(self._summary, "checks",
                          lambda parts: pl.concat(parts, how="vertical_relaxed"))

    def results(self, steps: Iterable[str], params: dict[str, object], *,
                numeric_truth: bool = False, keep: Keep | None = None) -> dict[str, pl.DataFrame]:
        """Run ``steps`` in order; the metric rows of each final step (per batch of segments
        under a memory budget; a ``whole`` step once, on every segment's rows, for the rest of
        the request). ``truth`` is boolean unless ``numeric_truth`` (regression: the target;
        clustering: the reference class)."""
        steps, keep = list(steps), keep or {}
        params = self.switches(steps, params)
        ranked = self._ranks_replicates(steps, params, keep, numeric_truth=numeric_truth)
        steps = self._run_whole(steps, params, numeric_truth=numeric_truth)
        if ranked:
            return self._ranked_replicates(steps, params, keep)
        return self._run_batches(steps, params, numeric_truth=numeric_truth, keep=keep)

    def _run_batches(self, steps: list[str], params: dict[str, object], *,
                     numeric_truth: bool, keep: Keep) -> dict[str, pl.DataFrame]:
        """Every step on each batch of segments in turn, the batches' rows merged."""
        return self._each(lambda rows: self._results(rows, steps, params,
                                                     numeric_truth=numeric_truth, keep=keep),
                          "metrics", merge_batches)

    def switches(self, steps: Sequence[str], params: dict[str, object]) -> dict[str, object]:
        """``params`` with the switches the engine sets: ``unit_weights`` where every weight
        is 1, which a bootstrap's replicates are not (their draws weigh the rows)."""
        return {**params, "unit_weights": self.unit_weights and "replicates" not in steps}

    def _run_whole(self, steps: list[str], params: dict[str, object], *,
                   numeric_truth: bool) -> list[str]:
        """The statistics of the whole input among ``steps`` not computed yet, on every
        segment's rows at once and kept for the request; the other steps."""
        whole = [s for s in steps if STEPS[s].whole and s not in self.whole]
        if whole:
            with self._restricted(None, few=True) as rows:
                self._results(rows, whole, params, numeric_truth=numeric_truth, keep={})
            self.whole.update(whole)
        return [s for s in steps if not STEPS[s].whole]

    # -- the bootstrap of rows ranked once, on every engine that hands its rows over ----------
    #
    # A replicate changes the rows' weights (their draws), not their order: the rows sorted
    # once give every replicate's decision counts, ROC AUC and average precision as running
    # sums of its draws (engines/polars/bootstrap.py). An engine whose steps are SQL would
    # otherwise run every step over the rows once per replicate (queries/replicates.sql: a
    # scan, a join and a sort of the replicated rows each time; DuckDB at 1M rows, 200
    # replicates: 86 s against 1.2 s without the interval), so it hands each batch's rows, read
    # within its budget, to the same kernel: one sort for every replicate, and the same
    # intervals on every engine, bit for bit, whatever the rows' order.

    def _ranks_replicates(self, steps: Sequence[str], params: dict[str, object],
                          keep: Keep, *, numeric_truth: bool) -> bool:
        """Whether this run of ``steps`` is a bootstrap the rows ranked once serve: the kernel
        gives its metrics (plans.bootstrap.serves) and the engine its rows in memory."""
        from mleval_sql.engines.polars import bootstrap  # imports this module

        return (self.ranks_replicates and not numeric_truth
                and bootstrap.serves(steps, params, keep) and self._ranks_in_memory())

    def _ranked_replicates(self, steps: list[str], params: dict[str, object],
                           keep: Keep) -> dict[str, pl.DataFrame]:
        """The bootstrap's final rows from each batch's rows ranked once for every replicate:
        each replicate's decision counts, average precision and ROC AUC per label
        (plans.bootstrap.replicated: whole counts, or weights times draws) as the statistics
        the final steps read (plans.bootstrap.ranked_statistics), and those steps as polars
        plans over them (a few rows per label and replicate, whatever the engine)."""
        from mleval_sql.engines.polars import bootstrap
        from mleval_sql.engines.polars.collect import planned

        ids = self._sample_ids()
        starts = bootstrap.hash_starts(ids.height, int(params["seed"]))  # type: ignore[call-overload]
        replicates = list(params["replicates"])  # type: ignore[call-overload]

        def ranked(rows: pl.DataFrame) -> pl.DataFrame:
            return bootstrap.replicated(
                rows, ids, starts, replicates, threshold=float(params["threshold"]),  # type: ignore[arg-type]
                weighted=not self.unit_weights, ranking="ranking_metrics" in steps)

        given = bootstrap.ranked_statistics(self._each_ranked(ranked), keep)
        # every step that reads the rows is given: the steps left read statistics
        return planned({}, [s for s in steps if s != "replicates"], params, keep, given=given)

    def _each_ranked(self, run: Callable[[pl.DataFrame], T]) -> list[T]:
        """``run`` on each batch's canonical rows as a polars frame (:meth:`_frame`), read in
        turn: one batch in memory at a time."""
        return self._each(lambda rows: [run(self._frame(rows))], "ranking",
                          lambda parts: [t for part in parts for t in part],
                          keys=self._ranking_batches())

    def _ranking_batches(self) -> list[pl.DataFrame]:
        """The batches of whole segments :meth:`_each_ranked` reads: at most
        :data:`~mleval_sql.engines.polars.collect.HELD_BATCH_ROWS` rows (smaller sorts run
        faster, as polars batches the rows it holds) and, under a budget, as many as it holds
        while they are ranked (plans.bootstrap.RANKED_ROW_BYTES a row: more than the steps'
        :data:`~mleval_sql.engines.segments.ROW_BYTES`); a larger segment alone."""
        from mleval_sql.engines.polars.bootstrap import RANKED_ROW_BYTES
        from mleval_sql.engines.polars.collect import HELD_BATCH_ROWS

        if not self.by:
            return []
        rows = HELD_BATCH_ROWS if self.budget is None else max(
            1, min(HELD_BATCH_ROWS, self.budget // RANKED_ROW_BYTES))
        return segments.batches(self._segment_counts(), self.by, rows * segments.ROW_BYTES)

    def _each(self, run: Callable[[Any], T], what: str, combine: Callable[[list[T]], T], *,
              keys: list[pl.DataFrame] | None = None) -> T:
        """``run`` on the whole input, or on each batch of segments (``keys``; default the
        budget's) with the parts combined."""
        every = self.batches if keys is None else keys
        if len(every) < 2:  # no budget, one batch, or an empty input
            with self._restricted(None, few=True) as rows:
                return run(rows)
        parts = []
        for batch in with_progress(every, what):
            with self._restricted(batch, few=batch.height <= segments.FEW_SEGMENTS) as rows:
                parts.append(run(rows))
            del rows  # a batch's rows in memory are let go before the next is read
        return combine(parts)

