"""The polars plans of a request's steps built and collected together: what the polars engine
runs, and every engine's bootstrap of rows ranked once runs its final steps with."""

from __future__ import annotations

import inspect

import polars as pl

from mleval_sql.engines import Keep
from mleval_sql.engines import polars as plans
from mleval_sql.progress import stage
from mleval_sql.registry import AVERAGING, STEPS

#: Rows of whole segments evaluated together when the input is held (no budget): one sort of
#: tens of millions of rows costs more than its parts (30M rows, exact request: 9.8 s in one
#: batch, 8.5 s in batches of up to 6M rows, the segments of 3.75M rows).
HELD_BATCH_ROWS = 6_000_000


def planned(relations: dict[str, pl.LazyFrame], steps: list[str], params: dict[str, object],
            keep: Keep, *, given: dict[str, pl.LazyFrame] | None = None,
            shared: dict[str, pl.LazyFrame] | None = None,
            streaming: bool = False) -> dict[str, pl.DataFrame]:
    """Build every step's plan over ``relations`` (those in ``given`` as given), then
    collect the final steps' rows in one go (``streaming``: on the streaming engine); a
    ``whole`` step's table is kept in ``shared``. Every engine's bootstrap of rows ranked
    once runs its final steps here, over the statistics the kernel gives."""
    relations = dict(relations)
    finals: dict[str, pl.LazyFrame] = {}
    for name in steps:
        step = STEPS[name]
        build = getattr(plans, name)
        options = {p: params[p] for p in step.params}
        if name in keep and "keep" in inspect.signature(build).parameters:
            options["keep"] = keep[name]  # a plan that can skip the rows not asked for
        if "unit_weights" in inspect.signature(build).parameters:
            options["unit_weights"] = params["unit_weights"]
        plan = (given[name] if given and name in given
                else build(*(relations[r] for r in step.reads), **options))
        if step.averaged:  # its per-label rows: the grid of labels and the averages
            # cached: label_averages reads them three times (2M-row lake: 9.0 -> 6.0 s CPU)
            plan = getattr(plans, AVERAGING.name)(
                plan.cache(), **({"keep": keep[name]} if name in keep else {}))
        if step.gives is None:
            finals[name] = plan if name not in keep else plan.filter(
                pl.col("metric").is_in(keep[name][0]),
                pl.col("average").fill_null("none").is_in(keep[name][1]))
        elif step.whole:  # kept for the rest of the request
            relations[step.gives] = plan.collect().lazy()
            if shared is not None:
                shared[step.gives] = relations[step.gives]
        else:  # a statistics table feeds several plans: computed once, from one scan
            relations[step.gives] = plan.cache()
    with stage("statistics and metrics: one polars plan"):
        frames = pl.collect_all(list(finals.values()),
                                engine="streaming" if streaming else "auto")
    return dict(zip(finals, map(as_text, frames), strict=True))


def as_text(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with its Categorical columns (and struct fields) as text, as every engine gives
    them.

    >>> coded = pl.DataFrame({"label": ["a"]}, schema={"label": pl.Categorical})
    >>> as_text(coded.select(segment=pl.struct("label"), label="label")).schema
    Schema([('segment', Struct({'label': String})), ('label', String)])
    """
    return frame.cast({name: _text(dtype) for name, dtype in frame.schema.items()})


def _text(dtype: pl.DataType) -> pl.DataType:
    if isinstance(dtype, pl.Categorical):
        return pl.String()
    if isinstance(dtype, pl.Struct):
        return pl.Struct({f.name: _text(f.dtype) for f in dtype.fields})
    return dtype
