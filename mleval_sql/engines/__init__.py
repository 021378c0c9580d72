"""The two engines: polars lazy plans and DuckDB SQL, behind one small interface.

An engine is built on a source, the column mapping and the segment columns; ``summary()`` gives
the validation summary and ``results(steps, params)`` the metric rows of each final step.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal, Protocol

import polars as pl

from mleval_sql.schema import Columns, InputError
from mleval_sql.sources import Source

EngineName = Literal["duckdb", "polars"]
ENGINES: tuple[EngineName, ...] = ("duckdb", "polars")


class Engine(Protocol):
    name: str

    def summary(self) -> pl.DataFrame: ...

    def results(self, steps: Sequence[str], params: dict[str, object], *,
                numeric_truth: bool = False) -> dict[str, pl.DataFrame]: ...

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
    raise InputError(f"unknown engine {name!r}; engines are {list(ENGINES)}")
