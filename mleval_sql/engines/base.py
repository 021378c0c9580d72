"""What every engine does the same way: the canonical columns, the loop over batches of segments
under a memory budget, and the two entry points (``summary``, ``results``). An engine subclasses
:class:`BaseEngine` and supplies only what differs: how it counts the rows per segment, how it
restricts its input to a batch of segments, and how it runs the summary and the steps.

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

    def replicate_chunks(self, steps: Sequence[str], params: dict[str, object], *,
                         rows: int, keep: Keep) -> list[list[int]]:
        """The bootstrap's replicates (0 .. resamples - 1) in the runs :meth:`results` takes
        at once: each run of ``steps`` reads the input's ``rows`` once per replicate, so as
        many as the budget holds (:data:`mleval_sql.uncertainty.CHUNK_ROWS` rows without
        one)."""
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
        steps = list(steps)
        params = self.switches(steps, params)
        steps = self._run_whole(steps, params, numeric_truth=numeric_truth)
        return self._each(lambda rows: self._results(rows, steps, params,
                                                     numeric_truth=numeric_truth,
                                                     keep=keep or {}),
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

    def _each(self, run: Callable[[Any], T], what: str, combine: Callable[[list[T]], T]) -> T:
        """``run`` on the whole input, or on each batch of segments with the parts combined."""
        if len(self.batches) < 2:  # no budget, one batch, or an empty input
            with self._restricted(None, few=True) as rows:
                return run(rows)
        parts = []
        for keys in with_progress(self.batches, what):
            with self._restricted(keys, few=keys.height <= segments.FEW_SEGMENTS) as rows:
                parts.append(run(rows))
            del rows  # a batch's rows in memory are let go before the next is read
        return combine(parts)

