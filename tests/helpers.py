"""Comparing result frames: same rows (keys), values equal to a tolerance, null only where null.

Null and NaN are different values here: the engines promise null for an undefined value and
never NaN, so a NaN on either side where the other has null (or a number) fails.
"""

from __future__ import annotations

import math

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from mleval_sql.engines import local_engines

KEYS = ("metric", "average", "label", "predicted")
#: the suite's tolerances: every engine equals the oracle to float rounding (a few ulps of
#: differently ordered sums), so anything looser would hide a lost digit
REL, ABS = 1e-12, 1e-15


def close(a: float | None, b: float | None, rel: float = REL, abs_: float = ABS) -> bool:
    """Both null, both NaN, or numbers within ``rel`` / ``abs_``."""
    if a is None or b is None:
        return a is None and b is None
    if math.isnan(a) or math.isnan(b):
        return math.isnan(a) and math.isnan(b)
    return math.isclose(a, b, rel_tol=rel, abs_tol=abs_)


def assert_same_rows(got: pl.DataFrame, want: pl.DataFrame, by: list[str],
                     rel: float = REL, abs_: float = ABS) -> None:
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
        assert close(a, b, rel, abs_), f"{ {k: row[k] for k in keys} }: got {a}, want {b}"


def assert_frames_close(got: pl.DataFrame, want: pl.DataFrame, **kwargs: object) -> None:
    """polars' ``assert_frame_equal`` with the suite's tolerances (its own: abs 1e-8)."""
    kwargs.setdefault("check_dtypes", False)
    assert_frame_equal(got, want, rel_tol=REL, abs_tol=ABS, **kwargs)


def _keyed(frame: pl.DataFrame, keys: list[str]) -> pl.DataFrame:
    for col in ("predicted",):
        if col not in frame.columns:
            frame = frame.with_columns(pl.lit(None).alias(col))
    casts = {k: pl.String for k in keys}
    return frame.select(*[pl.col(k).cast(casts[k]) for k in keys],
                        value=pl.col("value").cast(pl.Float64), present=pl.lit(True))


def run_standalone(sql: str, frame: pl.DataFrame) -> pl.DataFrame:
    """A statement of ``me.sql(..., table="predictions")`` run on DuckDB over ``frame``."""
    import duckdb

    con = duckdb.connect()
    con.register("predictions", frame)
    return con.sql(sql).pl()


def statement_options(task: str, metric: str, segment: str) -> dict:
    """``me.sql`` options for a standalone statement giving every average ``metric`` has (the
    label column named: a binary statement reads one only where it is named)."""
    from mleval_sql.registry import METRICS

    averages = METRICS[metric].averages(task)
    return {"task": task, "table": "predictions", "by": segment,
            "columns": {"weight": "weight", "label": "label"}, "average": list(averages) or None}


def assert_standalone_equals_oracle(rows: pl.DataFrame, frame: pl.DataFrame, task: str,
                                    metric: str, segment: str, params: dict) -> None:
    """``metric``'s rows of a standalone query against the oracle's, for every average the
    query gives."""
    from tests.oracle import expected

    rows = rows.filter(pl.col("metric") == metric)
    averages = tuple(sorted({a or "none" for a in rows["average"].to_list()}))
    assert rows.height > 0
    want = expected(frame, task, metric, averages, [segment], params)
    assert_same_rows(rows, want, [segment])


#: The engines plus Spark, for the test bodies Spark runs too (``engine`` fixture, indirect):
#: the registry's oracle test, the bad-input catalogue, the curves and the checks. Each Spark
#: request costs about a second on local[2] (jobs, not data), so the other engine-parametrized
#: tests stay on the in-process engines.
WITH_SPARK = pytest.mark.parametrize("engine", [*local_engines(), "spark"], indirect=True)
