"""The two engines: polars lazy plans and DuckDB SQL, behind one small interface.

An engine is built on a source, the column mapping and the segment columns; ``summary()`` gives
the validation summary and ``results(steps, params)`` the metric rows of each final step.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol

import polars as pl

from mleval_sql.schema import Columns, InputError
from mleval_sql.sources import Source

#: The rows a request keeps of each final step: its metrics and averages ("none": per label or
#: per segment). The engines drop the others before they are materialised, so that a million
#: segments cost a million of the rows asked for, not of every row a step can give.
Keep = Mapping[str, tuple[Sequence[str], Sequence[str]]]

EngineName = Literal["duckdb", "polars", "sql", "spark"]
#: The engines the tests' ``engine`` fixture runs every test body on (``sql`` needs a database
#: connection and is tested on PostgreSQL and Spark by tests/test_portable.py).
ENGINES: tuple[EngineName, ...] = ("duckdb", "polars")

_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(b|bytes|[kmgt]i?b|%)\s*", re.IGNORECASE)
_UNITS = {"b": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def memory_bytes(limit: str | int) -> int:
    """A memory limit (``"1GB"``, ``"512 MiB"``, ``"50%"`` of the machine's memory, or a whole
    number of bytes) in bytes; anything else is an ``InputError``.

    >>> memory_bytes("1.5GB"), memory_bytes("2 KiB"), memory_bytes(4096)
    (1500000000, 2048, 4096)
    """
    match = _SIZE.fullmatch(limit) if isinstance(limit, str) else None
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit
    if match is None or float(match[1]) <= 0:
        raise InputError(f"memory_limit must be a positive size with a unit, such as 500MB, "
                         f"1.5GiB or 50% (of the machine's memory), got {limit!r}")
    unit = match[2].lower()
    if unit == "%":
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return int(total * min(float(match[1]), 100) / 100)
    return int(float(match[1]) * _UNITS[unit])


class Engine(Protocol):
    name: str

    def summary(self) -> pl.DataFrame: ...

    def results(self, steps: Sequence[str], params: dict[str, object], *,
                numeric_truth: bool = False,
                keep: Keep | None = None) -> dict[str, pl.DataFrame]: ...

    def close(self) -> None: ...


def make_engine(name: str, source: Source, columns: Columns, weight: str | None,
                by: Sequence[str], **options: Any) -> Engine:
    """The engine called ``name`` over ``source``."""
    if name == "duckdb":
        from mleval_sql.engines.duckdb import DuckDBEngine
        return DuckDBEngine(source, columns, weight, by, **options)
    if name == "polars":
        options.pop("connection", None)
        from mleval_sql.engines.polars.engine import PolarsEngine
        return PolarsEngine(source, columns, weight, by, **options)
    if name == "sql":
        options.pop("connection", None)
        from mleval_sql.engines.sql import SQLEngine
        return SQLEngine(source, columns, weight, by, **options)  # type: ignore[arg-type]
    if name == "spark":
        options.pop("connection", None)
        from mleval_sql.engines.spark import SparkEngine
        return SparkEngine(source, columns, weight, by, **options)  # type: ignore[arg-type]
    raise InputError(f"unknown engine {name!r}; engines are {[*ENGINES, 'sql', 'spark']}")
