"""Turn whatever holds the predictions into one input either engine can scan.

Parquet (a file, a glob, a list, or a hive-partitioned folder whose ``key=value`` folders become
columns; listed once into a fixed list of files by :func:`mleval_sql.files.snapshot`), a
pyarrow Table / RecordBatchReader / Dataset, a polars DataFrame or LazyFrame, a pandas DataFrame,
or a DuckDB relation.

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

from mleval_sql import files as listing
from mleval_sql.queries import identifier
from mleval_sql.schema import InputError


@dataclass(frozen=True)
class Parquet:
    """Parquet files, listed once (:func:`mleval_sql.files.snapshot`); ``key=value`` folders in
    their paths become columns (hive partitioning). Both engines read exactly ``files``."""

    files: tuple[str, ...]

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        # the files agree on the columns a request uses (check); others may come and go
        return _plain(pl.scan_parquet(list(self.files), hive_partitioning=True,
                                      glob=not self._local(), missing_columns="insert",
                                      extra_columns="ignore"))

    def duckdb(self, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
        # DuckDB globs every path it is given: wildcards in a local file's name are escaped
        files = [listing.glob_escape(f) for f in self.files] if self._local() else self.files
        return con.read_parquet(list(files), hive_partitioning=True,
                                union_by_name=len(self.files) > 1)

    def check(self, columns: Sequence[str | None]) -> None:
        """Every file readable, with each of ``columns`` of one type or absent from all
        (``InputError`` naming the file and column otherwise)."""
        if self._local():
            listing.check_agreement(self.files, [c for c in columns if c is not None])

    def unreadable(self, columns: Sequence[str | None]) -> InputError | None:
        """After an engine failed to read the files: the error naming the file it could not
        read, if one is (reads every file's ``columns``)."""
        if not self._local():
            return None
        return listing.find_unreadable(self.files, [c for c in columns if c is not None])

    def _local(self) -> bool:
        return not any("://" in f for f in self.files)


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


Source = Parquet | InMemory | ArrowDataset | DuckDBRelation


def as_source(data: Any) -> Source:
    """Wrap ``data`` (see the module docstring) as a :data:`Source`."""
    if isinstance(data, Source.__args__):  # type: ignore[attr-defined]
        return data
    if isinstance(data, (str, os.PathLike)):
        return _parquet([data])
    if isinstance(data, Sequence) and data and all(isinstance(p, (str, os.PathLike))
                                                   for p in data):
        return _parquet(data)
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


def _parquet(paths: Sequence[str | os.PathLike[str]]) -> Parquet:
    """The parquet files ``paths`` name, as one snapshot (object-store paths as given: the
    engines list them)."""
    remote = [os.fspath(p) for p in paths if "://" in os.fspath(p)]
    local = [p for p in paths if "://" not in os.fspath(p)]
    for path in local:
        if Path(path).suffix.lower() in (".csv", ".tsv", ".json", ".jsonl", ".txt") \
                and Path(path).is_file():
            raise InputError(f"{os.fspath(path)} is not parquet; read it into a DataFrame first "
                             "(e.g. polars.read_csv) or convert it with DataFrame.write_parquet")
    return Parquet((*(listing.snapshot(local) if local else ()), *remote))
