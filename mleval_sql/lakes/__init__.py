"""Lakes where they live: parquet in object storage, Delta and Iceberg tables.

:func:`open_lake` fixes what is read once, when the input is opened (the file list of a lake, the
version of a table); then polars reads it with its own scan (native object-store reads, streaming)
and DuckDB scans an Arrow dataset of the same files, pushing projections and filters into it. No
reader needs the network for anything but the store itself.

>>> open_lake(["fixtures/lake"]) is None  # a plain local lake: sources.Parquet reads it
True
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

import polars as pl

from mleval_sql.lakes.base import AsOf, Lake
from mleval_sql.lakes.stores import (
    Location,
    StorageOptions,
    filesystem,
    is_remote,
    list_files,
    polars_options,
)
from mleval_sql.schema import InputError

__all__ = ["AsOf", "Lake", "StorageOptions", "arrow_type", "open_lake", "parquet_lake"]

if TYPE_CHECKING:  # pyarrow (pyarrow.dataset imports pandas: half a second) where it is used
    import pyarrow as pa
    import pyarrow.dataset as pads

def open_lake(paths: Sequence[str | os.PathLike[str]], *,
              storage_options: StorageOptions | None = None,
              as_of: AsOf | None = None) -> Lake | None:
    """A :class:`Lake` for object-store paths, a Delta or Iceberg table (detected from its folder,
    or named ``delta://LOCATION`` / ``iceberg://CATALOG/NAMESPACE.TABLE``); None for local
    parquet, which ``sources.Parquet`` reads."""
    texts = [os.fspath(p) for p in paths]
    named = [t for t in texts if t.lower().startswith(("delta://", "iceberg://"))]
    if named:
        if len(texts) > 1:
            raise InputError(f"a table is read alone, not with other inputs: {texts}")
        from mleval_sql.lakes import tables

        scheme, _, rest = named[0].partition("://")
        if scheme.lower() == "delta":
            return tables.delta(rest, storage_options, as_of)
        return tables.iceberg_catalog(rest, as_of)
    remote = [is_remote(t) for t in texts]
    if any(remote) and not all(remote):
        raise InputError(f"inputs mix object-store and local paths: {texts}")
    if len(texts) == 1:
        table = _detected_table(texts[0], storage_options, as_of)
        if table is not None:
            return table
    else:
        from mleval_sql.lakes.tables import kind_of

        for text in texts:
            kind = kind_of(text, storage_options)
            if kind:
                raise InputError(f"{text} is a {kind.capitalize()} table, which is read "
                                 "alone, not with other inputs")
    if as_of is not None:
        raise InputError("as_of (--as-of) applies to Delta and Iceberg tables; "
                         f"{', '.join(texts)} is a parquet lake")
    if not any(remote):
        if storage_options:
            raise InputError("storage_options apply to object-store paths (s3://, gs://, "
                             f"az://...), not to {', '.join(texts)}")
        return None
    return parquet_lake([Location.parse(t) for t in texts], storage_options)


def _detected_table(text: str, options: StorageOptions | None,
                    as_of: AsOf | None) -> Lake | None:
    """The Delta or Iceberg table whose folder ``text`` is, if it is one."""
    from mleval_sql.lakes import tables

    kind = tables.kind_of(text, options)
    if kind == "delta":
        return tables.delta(text, options, as_of)
    if kind == "iceberg":
        return tables.iceberg_folder(text, options, as_of)
    return None


def parquet_lake(locations: list[Location], options: StorageOptions | None) -> Lake:
    """Parquet files in object storage, listed once: every ``.parquet`` object below each
    location (a prefix, an object or a pattern), but names starting with ``_`` or ``.``; their
    ``key=value`` folders become columns."""
    first = locations[0]
    if any((loc.cloud, loc.root) != (first.cloud, first.root) for loc in locations):
        raise InputError("object-store inputs must share one bucket or container: "
                         f"{[loc.url for loc in locations]}")
    fs = filesystem(first, options)
    files = list(dict.fromkeys(f for loc in locations for f in list_files(loc, fs)))
    urls = [first.url_of(f) for f in files]
    name = ", ".join(loc.url for loc in locations)
    hive = sorted({part.split("=", 1)[0] for f in files for part in f.split("/")[1:-1]
                   if "=" in part})
    readable = polars_options(first, options)

    def scan() -> pl.LazyFrame:
        return pl.scan_parquet(urls, hive_partitioning=bool(hive), glob=False,
                               storage_options=readable)

    def dataset() -> pads.Dataset:
        import pyarrow as pa
        import pyarrow.dataset as pads

        # a partition column gets the type a file holding it has, else polars' type, so both
        # engines see the same table
        types = scan().collect_schema()
        stored = pads.dataset(files[0], filesystem=fs, format="parquet").schema
        partitioning = pads.partitioning(pa.schema([
            (k, stored.field(k).type if k in stored.names else arrow_type(types[k]))
            for k in hive]), flavor="hive") if hive else None
        return pads.dataset(files, filesystem=fs, format="parquet", partitioning=partitioning,
                            partition_base_dir=first.container)

    return Lake(name, scan, dataset)


def arrow_type(dtype: pl.DataType) -> pa.DataType:
    """The Arrow type of a polars dtype, with plain (not large or view) strings."""
    import pyarrow as pa

    kind = pl.Series([], dtype=dtype).to_arrow().type
    return pa.string() if pa.types.is_large_string(kind) or pa.types.is_string_view(kind) \
        else kind
