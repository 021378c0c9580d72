"""Turn whatever holds the predictions into one input either engine can scan.

Parquet (a file, a glob, a list, or a hive-partitioned folder whose ``key=value`` folders become
columns), a pyarrow Table / RecordBatchReader / Dataset, a polars DataFrame or LazyFrame, a pandas
DataFrame, or a DuckDB relation.

>>> import polars as pl
>>> as_source(pl.DataFrame({"sample": [1]})).schema().names()
['sample']
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads

from mleval_sql.schema import InputError


@dataclass(frozen=True)
class Parquet:
    """Parquet files: paths or globs; folders are read recursively with hive partitioning."""

    paths: tuple[str, ...]

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        return pl.scan_parquet(list(self.paths), hive_partitioning=True)

    def duckdb(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        return con.read_parquet(list(self.paths), hive_partitioning=True)


@dataclass(frozen=True)
class InMemory:
    """A polars LazyFrame over data already in memory (Arrow, polars, pandas)."""

    frame: pl.LazyFrame

    def schema(self) -> pl.Schema:
        return self.frame.collect_schema()

    def polars(self) -> pl.LazyFrame:
        return self.frame

    def duckdb(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        con.register("mleval_input", self.frame)  # DuckDB scans polars frames through Arrow
        return con.table("mleval_input")


@dataclass(frozen=True)
class ArrowDataset:
    """A pyarrow Dataset, scanned lazily by both engines."""

    dataset: pads.Dataset

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        return pl.scan_pyarrow_dataset(self.dataset)

    def duckdb(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        return con.from_arrow(self.dataset)


@dataclass(frozen=True)
class DuckDBRelation:
    """A DuckDB relation; the DuckDB engine runs on the connection it belongs to."""

    relation: duckdb.DuckDBPyRelation

    def schema(self) -> pl.Schema:
        return self.relation.limit(0).pl().schema

    def polars(self) -> pl.LazyFrame:
        return self.relation.pl(lazy=True)

    def duckdb(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        return self.relation


Source = Parquet | InMemory | ArrowDataset | DuckDBRelation


def as_source(data: Any) -> Source:
    """Wrap ``data`` (see the module docstring) as a :data:`Source`."""
    if isinstance(data, Source.__args__):  # type: ignore[attr-defined]
        return data
    if isinstance(data, (str, os.PathLike)):
        return Parquet((_parquet_path(data),))
    if isinstance(data, Sequence) and data and all(isinstance(p, (str, os.PathLike))
                                                   for p in data):
        return Parquet(tuple(_parquet_path(p) for p in data))
    if isinstance(data, pl.LazyFrame):
        return InMemory(data)
    if isinstance(data, pl.DataFrame):
        return InMemory(data.lazy())
    if isinstance(data, pa.Table):
        return InMemory(pl.from_arrow(data).lazy())  # type: ignore[union-attr]
    if isinstance(data, pa.RecordBatchReader):
        # a reader can be read once, and evaluation scans twice (checks, then metrics)
        return InMemory(pl.from_arrow(data.read_all()).lazy())  # type: ignore[union-attr]
    if isinstance(data, pads.Dataset):
        return ArrowDataset(data)
    if isinstance(data, duckdb.DuckDBPyRelation):
        return DuckDBRelation(data)
    if type(data).__module__.split(".")[0] == "pandas":
        return InMemory(pl.from_pandas(data).lazy())
    raise InputError(f"cannot read predictions from a {type(data).__name__}; give parquet "
                     "paths, an Arrow table or dataset, a polars, pandas or DuckDB table")


def _parquet_path(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if any(ch in text for ch in "*?["):
        return text
    p = Path(text)
    if p.is_dir():
        return str(p / "**" / "*.parquet")
    if not p.exists():
        raise InputError(f"no such file or folder: {text}")
    return text
