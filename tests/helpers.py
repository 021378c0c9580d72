"""Comparing result frames: same rows (keys), values equal to a relative tolerance, nulls null."""

from __future__ import annotations

import math

import polars as pl

KEYS = ("metric", "average", "label", "predicted")


def assert_same_rows(got: pl.DataFrame, want: pl.DataFrame, by: list[str],
                     rel: float = 1e-9, abs_: float = 1e-12) -> None:
    keys = [*by, *KEYS]
    got, want = (_keyed(f, keys) for f in (got, want))
    joined = got.join(want, on=keys, how="full", nulls_equal=True, suffix="_want",
                      coalesce=True)
    missing = joined.filter(pl.col("present").is_null())
    extra = joined.filter(pl.col("present_want").is_null())
    assert missing.is_empty(), f"rows missing from the result:\n{missing}"
    assert extra.is_empty(), f"unexpected rows in the result:\n{extra}"
    for row in joined.iter_rows(named=True):
        a, b = row["value"], row["value_want"]
        ok = (a is None and b is None) or (
            a is not None and b is not None and math.isclose(a, b, rel_tol=rel, abs_tol=abs_))
        assert ok, f"{ {k: row[k] for k in keys} }: got {a}, want {b}"


def _keyed(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    for col in ("predicted",):
        if col not in frame.columns:
            frame = frame.with_columns(pl.lit(None).alias(col))
    casts = {k: pl.String for k in keys}
    value = pl.col("value").cast(pl.Float64)
    return frame.select(*[pl.col(k).cast(casts[k]) for k in keys],
                        value=pl.when(value.is_nan()).then(None).otherwise(value),
                        present=pl.lit(True))
