"""Run the registry's steps as polars lazy plans, collected together at the end."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import polars as pl

from mleval_sql.engines import polars as plans
from mleval_sql.registry import STEPS
from mleval_sql.schema import Columns
from mleval_sql.sources import Source


class PolarsEngine:
    """Evaluate with polars; with a ``memory_limit`` the streaming engine bounds memory."""

    name = "polars"

    def __init__(self, source: Source, columns: Columns, weight: str | None, by: Sequence[str],
                 *, memory_limit: str | None = None) -> None:
        frame = source.polars()
        self.predictions = frame.select(
            sample=pl.col(columns.sample),
            label=pl.col(columns.label),
            score=pl.col(columns.score).cast(pl.Float64),
            truth=pl.col(columns.truth),
            weight=pl.col(weight).cast(pl.Float64) if weight else pl.lit(1.0),
            segment=pl.col(by[0]) if len(by) == 1 else pl.struct(*by) if by else pl.lit(0),
        )
        self.collect_engine = "streaming" if memory_limit else "auto"

    def summary(self) -> pl.DataFrame:
        """The validation summary (engines/polars/validate.py)."""
        return plans.validate_summary(self.predictions).collect(engine=self.collect_engine)

    def results(self, steps: Iterable[str], params: dict[str, object], *,
                numeric_truth: bool = False) -> dict[str, pl.DataFrame]:
        """Build every step's plan, then collect the final steps' rows in one go.

        ``truth`` is boolean unless ``numeric_truth`` (regression: the target).
        """
        truth = pl.col("truth") if numeric_truth else pl.col("truth").cast(pl.Boolean)
        relations = {"predictions": self.predictions.with_columns(truth)}
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

    def close(self) -> None:
        """Nothing to release: plans hold no resources."""
