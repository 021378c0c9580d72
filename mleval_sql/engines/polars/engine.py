"""Run the registry's steps as polars lazy plans, collected together at the end."""

from __future__ import annotations

import inspect
import warnings
from collections.abc import Iterable, Sequence

import polars as pl

from mleval_sql.engines import Keep, memory_bytes, segments
from mleval_sql.engines import polars as plans
from mleval_sql.engines.segments import batches, together, with_progress
from mleval_sql.progress import stage
from mleval_sql.registry import STEPS
from mleval_sql.schema import Columns
from mleval_sql.sources import Source


class PolarsEngine:
    """Evaluate with polars.

    With a ``memory_limit`` the streaming engine runs the plans, in batches of segments of
    about the budget's rows (engines/segments.py): every metric lives within a segment, so only
    one batch's statistics are held (a parquet lake partitioned by the segment columns is then
    read a few partitions at a time). polars has no byte budget of its own: its peak is not
    bounded by the limit, and a warning says so. ``clustering``: the input is a clustering
    table (sample, truth, cluster, weight), checked by cluster_summary.
    """

    name = "polars"

    def __init__(self, source: Source, columns: Columns, weight: str | None, by: Sequence[str],
                 *, memory_limit: str | int | None = None, clustering: bool = False) -> None:
        self.budget = None if memory_limit is None else memory_bytes(memory_limit)
        if memory_limit is not None:
            warnings.warn(f"polars cannot hold to memory_limit={memory_limit!r}: it runs its "
                          "streaming engine on batches of segments, but does not bound its "
                          "memory to the limit (the duckdb engine does)", stacklevel=3)
        self.source = source.polars()
        self.by = list(by)
        self.columns, self.weight, self.clustering = columns, weight, clustering
        self.check = plans.cluster_summary if clustering else plans.validate_summary
        self.predictions = self._canonical(self.source)
        self.collect_engine = "streaming" if memory_limit else "auto"
        self.batches: list[pl.DataFrame] = []

    def summary(self) -> pl.DataFrame:
        """The validation summary (engines/polars/validate.py; clustering: cluster_summary), a
        batch of segments at a time under a memory budget."""
        if self.budget is not None and self.by:
            counts = self.source.group_by(self.by).agg(n=pl.len()).collect(
                engine=self.collect_engine)
            self.batches = batches(counts, self.by, self.budget)
        if len(self.batches) < 2:  # no budget, one batch, or an empty input
            return self.check(self.predictions).collect(engine=self.collect_engine)
        return pl.concat([self.check(self._batch(keys)).collect(
            engine=self.collect_engine) for keys in with_progress(self.batches, "checks")],
            how="vertical_relaxed")

    def results(self, steps: Iterable[str], params: dict[str, object], *,
                numeric_truth: bool = False, keep: Keep | None = None) -> dict[str, pl.DataFrame]:
        """Build every step's plan, then collect the final steps' rows in one go (per segment
        under a memory budget).

        ``truth`` is boolean unless ``numeric_truth`` (regression: the target; clustering: the
        reference class).
        """
        steps = list(steps)
        if len(self.batches) < 2:
            return self._results(self.predictions, steps, params, numeric_truth, keep or {})
        parts = [self._results(self._batch(keys), steps, params, numeric_truth, keep or {})
                 for keys in with_progress(self.batches, "metrics")]
        return together(parts)

    def close(self) -> None:
        """Nothing to release: plans hold no resources."""

    # -- plumbing ---------------------------------------------------------------------------

    def _canonical(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        columns, weight, by = self.columns, self.weight, self.by
        segment = pl.col(by[0]) if len(by) == 1 else pl.struct(*by) if by else pl.lit(0)
        if self.clustering:
            return frame.select(
                sample=pl.col(columns.sample), truth=pl.col(columns.truth),
                cluster=pl.col(columns.cluster),
                weight=pl.col(weight).cast(pl.Float64) if weight else pl.lit(1.0),
                segment=segment)
        return frame.select(
            sample=pl.col(columns.sample),
            label=(pl.lit(columns.single_label) if columns.label is None  # one binary label
                   else pl.col(columns.label)),
            score=pl.col(columns.score).cast(pl.Float64),
            truth=pl.col(columns.truth),
            weight=pl.col(weight).cast(pl.Float64) if weight else pl.lit(1.0),
            segment=segment,
        )

    def _batch(self, keys: pl.DataFrame) -> pl.LazyFrame:
        """The predictions of a batch of segments (``keys``: their segment columns' values):
        a few by a filter on the source's own columns (which reaches the parquet reader, so it
        skips other hive partitions), many by a semi-join."""
        if keys.height > segments.FEW_SEGMENTS:
            return self._canonical(self.source.join(keys.lazy(), on=self.by, how="semi",
                                                    nulls_equal=True))
        return self._canonical(self.source.filter(pl.any_horizontal(
            pl.all_horizontal(pl.col(c).eq_missing(pl.lit(v, dtype=keys.schema[c]))
                              for c, v in row.items()) for row in keys.iter_rows(named=True))))

    def _results(self, predictions: pl.LazyFrame, steps: list[str], params: dict[str, object],
                 numeric_truth: bool, keep: Keep) -> dict[str, pl.DataFrame]:
        truth = pl.col("truth") if numeric_truth else pl.col("truth").cast(pl.Boolean)
        relations = {"predictions": predictions.with_columns(truth)}
        finals: dict[str, pl.LazyFrame] = {}
        for name in steps:
            step = STEPS[name]
            build = getattr(plans, name)
            options = {p: params[p] for p in step.params}
            if name in keep and "keep" in inspect.signature(build).parameters:
                options["keep"] = keep[name]  # a plan that can skip the rows not asked for
            plan = build(*(relations[r] for r in step.reads), **options)
            if step.gives is None:
                finals[name] = plan if name not in keep else plan.filter(
                    pl.col("metric").is_in(keep[name][0]),
                    pl.col("average").fill_null("none").is_in(keep[name][1]))
            else:  # a statistics table feeds several plans: computed once, from one scan
                relations[step.gives] = plan.cache()
        with stage("statistics and metrics: one polars plan"):
            frames = pl.collect_all(list(finals.values()), engine=self.collect_engine)
        return dict(zip(finals, frames, strict=True))

