"""Run the registry's steps as polars lazy plans, collected together at the end."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import polars as pl

from mleval_sql.engines import polars as plans
from mleval_sql.engines.segments import column_values, together, with_progress
from mleval_sql.registry import STEPS
from mleval_sql.schema import Columns
from mleval_sql.sources import Source


class PolarsEngine:
    """Evaluate with polars.

    With a ``memory_limit`` the streaming engine runs the plans, one segment at a time: every
    metric lives within a segment, so only one segment's statistics are ever held (a parquet
    lake partitioned by the segment columns is then read one partition at a time).
    ``clustering``: the input is a clustering table (sample, truth, cluster, weight), checked by
    cluster_summary.
    """

    name = "polars"

    def __init__(self, source: Source, columns: Columns, weight: str | None, by: Sequence[str],
                 *, memory_limit: str | None = None, clustering: bool = False) -> None:
        self.source = source.polars()
        self.by = list(by)
        self.columns, self.weight, self.clustering = columns, weight, clustering
        self.check = plans.cluster_summary if clustering else plans.validate_summary
        self.predictions = self._canonical(self.source)
        self.collect_engine = "streaming" if memory_limit else "auto"
        self.by_segment = bool(memory_limit and by)
        self.segments: list[object] = []

    def summary(self) -> pl.DataFrame:
        """The validation summary (engines/polars/validate.py; clustering: cluster_summary), one
        segment at a time under a memory budget."""
        if self.by_segment:
            self.segments = self.predictions.select(pl.col("segment").unique()).collect(
                engine=self.collect_engine)["segment"].to_list()
        if not self.segments:  # no budget, or an empty input
            return self.check(self.predictions).collect(engine=self.collect_engine)
        return pl.concat([self.check(self._segment(value)).collect(
            engine=self.collect_engine) for value in with_progress(self.segments, "checks")],
            how="vertical_relaxed")

    def results(self, steps: Iterable[str], params: dict[str, object], *,
                numeric_truth: bool = False) -> dict[str, pl.DataFrame]:
        """Build every step's plan, then collect the final steps' rows in one go (per segment
        under a memory budget).

        ``truth`` is boolean unless ``numeric_truth`` (regression: the target; clustering: the
        reference class).
        """
        steps = list(steps)
        if not (self.by_segment and self.segments):
            return self._results(self.predictions, steps, params, numeric_truth)
        parts = [self._results(self._segment(value), steps, params, numeric_truth)
                 for value in with_progress(self.segments, "metrics")]
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
            label=pl.col(columns.label),
            score=pl.col(columns.score).cast(pl.Float64),
            truth=pl.col(columns.truth),
            weight=pl.col(weight).cast(pl.Float64) if weight else pl.lit(1.0),
            segment=segment,
        )

    def _segment(self, value: object) -> pl.LazyFrame:
        """The predictions of one segment, filtered on the source's own columns (so that the
        filter reaches the parquet reader, which skips other hive partitions)."""
        return self._canonical(self.source.filter(pl.all_horizontal(
            pl.col(c).eq_missing(pl.lit(v))
            for c, v in zip(self.by, column_values(value, self.by), strict=True))))

    def _results(self, predictions: pl.LazyFrame, steps: list[str], params: dict[str, object],
                 numeric_truth: bool) -> dict[str, pl.DataFrame]:
        truth = pl.col("truth") if numeric_truth else pl.col("truth").cast(pl.Boolean)
        relations = {"predictions": predictions.with_columns(truth)}
        finals: dict[str, pl.LazyFrame] = {}
        for name in steps:
            step = STEPS[name]
            plan = getattr(plans, name)(*(relations[r] for r in step.reads),
                                        **{p: params[p] for p in step.params})
            if step.gives is None:
                finals[name] = plan
            else:  # a statistics table feeds several plans: computed once, from one scan
                relations[step.gives] = plan.cache()
        frames = pl.collect_all(list(finals.values()), engine=self.collect_engine)
        return dict(zip(finals, frames, strict=True))

