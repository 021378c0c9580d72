"""The Poisson bootstrap's replicates as polars plans (mirror of queries/sample_ids.sql and
queries/replicates.sql): the same integer hash, so the same draws, on every engine."""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

__all__ = ["replicates", "sample_ids"]

_2_32 = 4294967296
#: Poisson(1)'s CDF at 0, 1, ..., 11: a draw is the number of them at or below u.
_POISSON_CDF = (0.36787944117144233, 0.7357588823428847, 0.9196986029286058, 0.9810118431238462,
                0.9963401531726563, 0.9994058151824183, 0.999916758850712, 0.9999897508033254,
                0.999998874797402, 0.9999998885745217, 0.9999999899522336, 0.9999999991683893)


def sample_ids(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """Every distinct sample and its rank among them (0, 1, ...)."""
    return (predictions.select("sample").unique().sort("sample")
            .with_row_index("id").select("sample", pl.col("id").cast(pl.Int64)))


def _mix(x: pl.Expr, rounds: int = 3) -> pl.Expr:
    """Mueller's 32-bit hash: x xor (x >> 16), times 73244475, modulo 2^32; the last round
    without the product."""
    for i in range(rounds):
        x = x ^ (x // 65536)
        if i < rounds - 1:
            x = x * 73244475 % _2_32
    return x


def replicates(predictions: pl.LazyFrame, sample_ids: pl.LazyFrame, *,
               replicates: Sequence[int], seed: int) -> pl.LazyFrame:
    """The predictions once per replicate, each weighed by its sample's Poisson(1) draw; the
    segment becomes ``{segment, replicate}``."""
    keys = pl.LazyFrame({"replicate": list(replicates)}, schema={"replicate": pl.Int64})
    crossed = predictions.join(sample_ids, on="sample").join(keys, how="cross")
    x = (pl.col("id") % _2_32 * 668265261 + pl.col("replicate") * 374761393
         + seed % _2_32 * 2654435) % _2_32
    u = (_mix(x) + 0.5) / float(_2_32)
    draw = pl.sum_horizontal(*(u >= c for c in _POISSON_CDF)).cast(pl.Float64)
    return crossed.select(
        "sample", "label", "score", "truth", pl.col("weight") * draw,
        segment=pl.struct(pl.col("segment"), pl.col("replicate")))
