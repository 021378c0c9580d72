"""Turn whatever holds the predictions into one input either engine can scan.

Parquet (a file, a glob, a list, or a hive-partitioned folder whose ``key=value`` folders become
columns; in object storage too), a Delta or Iceberg table, a pyarrow Table / RecordBatchReader /
Dataset, a polars DataFrame or LazyFrame, a pandas DataFrame, or a DuckDB relation.

>>> import polars as pl
>>> as_source(pl.DataFrame({"sample": [1]})).schema().names()
['sample']
"""

from __future__ import annotations

import glob
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads

from mleval_sql.lakes import AsOf, Lake, StorageOptions, open_lake
from mleval_sql.queries import identifier
from mleval_sql.schema import InputError


@dataclass(frozen=True)
class Parquet:
    """Parquet files: paths or globs; folders are read recursively with hive partitioning."""

    paths: tuple[str, ...]

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        return _plain(pl.scan_parquet(list(self.paths), hive_partitioning=True))

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
        # An anonymous relation, scanned through Arrow (a LazyFrame is re-run on each scan):
        # registering a name would leave it on the user's connection and shadow their own table.
        return con.from_arrow(self.frame)


@dataclass(frozen=True)
class ArrowDataset:
    """A pyarrow Dataset, scanned lazily by both engines."""

    dataset: pads.Dataset

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        return _plain(pl.scan_pyarrow_dataset(self.dataset))

    def duckdb(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        return con.from_arrow(self.dataset)


@dataclass(frozen=True)
class DuckDBRelation:
    """A DuckDB relation; the DuckDB engine runs on the connection it belongs to."""

    relation: duckdb.DuckDBPyRelation

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        # one DuckDB call at a time: a plan that reads its input twice reads it through a cache
        return _plain(self.relation.pl(lazy=True)).cache()

    def duckdb(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        coded = {name for name, dtype in zip(self.relation.columns, self.relation.types,
                                             strict=True) if str(dtype).startswith("ENUM")}
        if not coded:
            return self.relation
        return self.relation.project(", ".join(
            f"CAST({identifier(n)} AS VARCHAR) AS {identifier(n)}" if n in coded
            else identifier(n) for n in self.relation.columns))


Source = Parquet | InMemory | ArrowDataset | DuckDBRelation | Lake


def as_source(data: Any, *, storage_options: StorageOptions | None = None,
              as_of: AsOf | None = None) -> Source:
    """Wrap ``data`` (see the module docstring) as a :data:`Source`; object-store paths and
    Delta / Iceberg tables (``storage_options``, ``as_of``) are :mod:`mleval_sql.lakes`'."""
    if isinstance(data, Source.__args__):  # type: ignore[attr-defined]
        return data
    paths = [data] if isinstance(data, (str, os.PathLike)) else data \
        if isinstance(data, Sequence) and data and all(isinstance(p, (str, os.PathLike))
                                                       for p in data) else None
    lake = open_lake(paths, storage_options=storage_options, as_of=as_of) if paths else None
    if lake is not None:
        return lake
    if paths is None and (storage_options or as_of is not None):
        raise InputError("storage_options and as_of apply to paths (object storage, Delta "
                         f"and Iceberg tables), not to a {type(data).__name__}")
    if isinstance(data, (str, os.PathLike)):
        return Parquet((_parquet_path(data),))
    if isinstance(data, Sequence) and data and all(isinstance(p, (str, os.PathLike))
                                                   for p in data):
        return Parquet(tuple(_parquet_path(p) for p in data))
    if isinstance(data, pl.LazyFrame):
        return InMemory(_plain(data))
    if isinstance(data, pl.DataFrame):
        return InMemory(_plain(data.lazy()))
    if isinstance(data, pa.Table):
        return InMemory(_plain(pl.from_arrow(data).lazy()))  # type: ignore[union-attr]
    if isinstance(data, pa.RecordBatchReader):
        # a reader can be read once, and evaluation scans twice (checks, then metrics)
        return InMemory(_plain(pl.from_arrow(data.read_all()).lazy()))  # type: ignore[union-attr]
    if isinstance(data, pads.Dataset):
        return ArrowDataset(data)
    if isinstance(data, duckdb.DuckDBPyRelation):
        return DuckDBRelation(data)
    if type(data).__module__.split(".")[0] == "pandas":
        return InMemory(_plain(pl.from_pandas(data).lazy()))
    raise InputError(f"cannot read predictions from a {type(data).__name__}; give parquet "
                     "paths, an Arrow table or dataset, a polars, pandas or DuckDB table")


def _plain(frame: pl.LazyFrame) -> pl.LazyFrame:
    """``frame`` with Categorical and Enum columns as plain strings.

    DuckDB reads Arrow dictionaries as VARCHAR, so labels and segments must compare and sort by
    their text on the polars side too (an Enum sorts by its category order: argmax ties and the
    result order would differ between the engines).
    """
    coded = [name for name, dtype in frame.collect_schema().items()
             if isinstance(dtype, (pl.Categorical, pl.Enum))]
    return frame.with_columns(pl.col(coded).cast(pl.String)) if coded else frame


def _parquet_path(path: str | os.PathLike[str]) -> str:
    text = os.fspath(path)
    if "://" in text:  # object stores: the engines resolve these themselves
        return text
    if Path(text).is_dir():
        text = str(Path(text) / "**" / "*.parquet")
    if any(ch in text for ch in "*?["):
        if not glob.glob(text, recursive=True):
            raise InputError(f"no parquet files match {text}")
        return text
    if not Path(text).exists():
        raise InputError(f"no such file or folder: {text}")
    if Path(text).suffix.lower() in (".csv", ".tsv", ".json", ".jsonl", ".txt"):
        raise InputError(f"{text} is not parquet; read it into a DataFrame first (e.g. "
                         "polars.read_csv) or convert it with DataFrame.write_parquet")
    return text
