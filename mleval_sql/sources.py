"""Turn whatever holds the predictions into one input every engine can scan.

Parquet (a file, a glob, a list, or a hive-partitioned folder whose ``key=value`` folders become
columns; in object storage too), CSV (a ``.csv`` file, a glob or a list of them), a Delta or
Iceberg table, a pyarrow Table / RecordBatchReader / Dataset, a polars DataFrame or LazyFrame, a
pandas DataFrame, or a DuckDB relation. Local files are listed once into a fixed list of files by
:func:`mleval_sql.files.snapshot` (object storage by :mod:`mleval_sql.lakes`). A source says what
it holds and gives its polars LazyFrame (the schema every check reads); each other engine reads
the source types with a reader of its own (DuckDB: :func:`mleval_sql.engines.duckdb.read`).

>>> import polars as pl
>>> as_source(pl.DataFrame({"sample": [1]})).schema().names()
['sample']
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import polars as pl

from mleval_sql import files as listing
from mleval_sql.lakes import AsOf, Lake, StorageOptions, open_lake
from mleval_sql.schema import InputError, enums_as_strings

if TYPE_CHECKING:
    import duckdb
    import pyarrow.dataset as pads
    from sqlglot import exp


@dataclass(frozen=True)
class Parquet:
    """Parquet files, listed once (:func:`mleval_sql.files.snapshot`); ``key=value`` folders in
    their paths become columns (hive partitioning). Both engines read exactly ``files``."""

    files: tuple[str, ...]

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        # the files agree on the columns a request uses (check); others may come and go
        return enums_as_strings(pl.scan_parquet(
            list(self.files), hive_partitioning=True, glob=not self._local(),
            missing_columns="insert", extra_columns="ignore"))

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


#: Rows polars reads to infer a CSV file's column types (DuckDB then reads the same types).
CSV_INFER_ROWS = 100_000


@dataclass(frozen=True)
class Csv:
    """CSV files with a header, listed once like :class:`Parquet`'s, scanned lazily by the
    engine that runs (``polars.scan_csv``, DuckDB's ``read_csv``) with the column types polars
    infers."""

    files: tuple[str, ...]

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        return pl.scan_csv(list(self.files), infer_schema_length=CSV_INFER_ROWS, glob=False)



@dataclass(frozen=True)
class InMemory:
    """A polars LazyFrame over data already in memory (Arrow, polars, pandas)."""

    frame: pl.LazyFrame

    def schema(self) -> pl.Schema:
        return self.frame.collect_schema()

    def polars(self) -> pl.LazyFrame:
        return self.frame


@dataclass(frozen=True)
class ArrowDataset:
    """A pyarrow Dataset, scanned lazily by both engines."""

    dataset: pads.Dataset

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        return enums_as_strings(pl.scan_pyarrow_dataset(self.dataset))


@dataclass(frozen=True)
class DuckDBRelation:
    """A DuckDB relation; the DuckDB engine runs on the connection it belongs to."""

    relation: duckdb.DuckDBPyRelation

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        # one DuckDB call at a time: a plan that reads its input twice reads it through a cache
        return enums_as_strings(self.relation.pl(lazy=True)).cache()


class Derivation(Protocol):
    """Columns derived from an input's own (a window's), for polars and as SQL."""

    def polars(self, frame: pl.LazyFrame) -> pl.LazyFrame:
        """``frame`` with the derived columns."""
        ...

    #: A query of a table with the derived columns, in DuckDB's SQL (None: polars derives
    #: them, and DuckDB reads the result).
    sql: Callable[[exp.Expression], exp.Expression] | None


@dataclass(frozen=True)
class Derived:
    """An input with columns derived from its own: ``inner`` read as it is, then ``derive``d
    (DuckDB: its query over the relation of ``inner``)."""

    inner: Source
    derive: Derivation

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        return self.derive.polars(self.inner.polars())


Source = Parquet | Csv | InMemory | ArrowDataset | DuckDBRelation | Lake | Derived


def underlying(source: Source) -> Source:
    """The input a :class:`Derived` one derives from (any other: itself)."""
    return underlying(source.inner) if isinstance(source, Derived) else source


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
        return _files([data])
    if isinstance(data, Sequence) and data and all(isinstance(p, (str, os.PathLike))
                                                   for p in data):
        return _files(data)
    if isinstance(data, pl.LazyFrame):
        return InMemory(enums_as_strings(data))
    if isinstance(data, pl.DataFrame):
        return InMemory(enums_as_strings(data.lazy()))
    # pyarrow, pyarrow.dataset (which imports pandas: half a second a run) and duckdb are not
    # imported to look at what was given: their objects exist only once they are imported
    pa, pads, duckdb = map(sys.modules.get, ("pyarrow", "pyarrow.dataset", "duckdb"))
    if pa is not None and isinstance(data, pa.Table):
        return InMemory(enums_as_strings(pl.from_arrow(data).lazy()))  # type: ignore[union-attr]
    if pa is not None and isinstance(data, pa.RecordBatchReader):
        # a reader can be read once, and evaluation scans twice (checks, then metrics)
        return InMemory(enums_as_strings(pl.from_arrow(data.read_all()).lazy()))  # type: ignore[union-attr]
    if pads is not None and isinstance(data, pads.Dataset):
        return ArrowDataset(data)
    if duckdb is not None and isinstance(data, duckdb.DuckDBPyRelation):
        return DuckDBRelation(data)
    if type(data).__module__.split(".")[0] == "pandas":
        return InMemory(enums_as_strings(pl.from_pandas(data).lazy()))
    raise InputError(f"cannot read predictions from a {type(data).__name__}; give parquet "
                     "or CSV paths, an Arrow table or dataset, a polars, pandas or DuckDB table")


def beside(source: Any, name: str) -> list[Path]:
    """The files called ``name`` in each local folder ``source`` names (a path or a list of
    paths): a lake's own files, such as its ``metrics.toml``.

    >>> beside("fixtures/lake", "metrics.toml"), beside(["fixtures"], "README.md")
    ([], [PosixPath('fixtures/README.md')])
    """
    paths = [source] if isinstance(source, (str, os.PathLike)) else source \
        if isinstance(source, (list, tuple)) else ()
    found = [Path(p) / name for p in paths
             if isinstance(p, (str, os.PathLike)) and "://" not in os.fspath(p)]
    return list(dict.fromkeys(p for p in found if p.is_file()))


#: File types read from paths (a folder is read as a hive-partitioned parquet lake)
FILE_TYPES = {".parquet": "parquet", ".csv": "csv"}


def _files(paths: Sequence[str | os.PathLike[str]]) -> Parquet | Csv:
    """The parquet or CSV files ``paths`` name, as one snapshot (:func:`mleval_sql.files.snapshot`:
    an existing path is literal, a missing one a glob, a folder its parquet files); the kind
    comes from the files' extension, and one input is of one kind."""
    kinds: dict[str, None] = {}
    found: dict[str, None] = {}
    for path in paths:
        files = listing.snapshot([path], kinds="parquet or CSV")
        mine = {_kind(f) for f in files}
        if len(mine) > 1:
            raise InputError(f"{os.fspath(path)} matches both parquet and CSV files; an input "
                             "is one kind")
        kinds.update(dict.fromkeys(mine))
        found.update(dict.fromkeys(files))
    if len(kinds) > 1:
        raise InputError("an input is either parquet or CSV files, not both: "
                         f"{[os.fspath(p) for p in paths]}")
    return Csv(tuple(found)) if "csv" in kinds else Parquet(tuple(found))


def _kind(text: str) -> str:
    suffix = Path(text).suffix.lower()
    if suffix not in FILE_TYPES:
        accepted = ", ".join(FILE_TYPES)
        raise InputError(f"cannot read {text}: unknown file type {suffix or '(none)'!r}; "
                         f"inputs are {accepted} files, globs of them or a folder of parquet "
                         "files (other data: read it into a DataFrame first)")
    return FILE_TYPES[suffix]
