"""Delta and Iceberg tables, read as the table they are at one version: only the data files
their log (Delta) or snapshot (Iceberg) lists, never the folder's other files.

polars reads them with ``scan_delta`` / ``scan_iceberg``; DuckDB scans an Arrow dataset of the
same files (Delta: deltalake's own dataset, partition columns included; Iceberg: the snapshot's
data files).

>>> kind_of("fixtures/lake", None) is None
True
"""

from __future__ import annotations

import re
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from mleval_sql.lakes.base import AsOf, Lake
from mleval_sql.lakes.stores import (
    Location,
    StorageOptions,
    arrow_options,
    filesystem,
    is_remote,
    local_dir,
    polars_options,
    store_error,
)
from mleval_sql.schema import InputError

if TYPE_CHECKING:  # imports pandas (half a second): only where a dataset is read
    import pyarrow.dataset as pads
    import pyarrow.fs as pafs

EXTRAS = {"deltalake": "delta", "pyiceberg": "iceberg"}
_METADATA = re.compile(r"^(?:v)?(\d+)(?:-[^/]*)?\.metadata\.json$")


def _need(module: str) -> Any:
    """Import ``module`` or say which extra of mleval_sql installs it."""
    try:
        return __import__(module)
    except ImportError:
        raise InputError(f"reading a {EXTRAS[module].capitalize()} table needs {module}: "
                         f"pip install 'mleval_sql[{EXTRAS[module]}]'") from None


def kind_of(text: str, options: StorageOptions | None) -> Literal["delta", "iceberg"] | None:
    """``delta`` for a folder holding ``_delta_log/``, ``iceberg`` for one whose ``metadata/``
    holds ``*.metadata.json`` files, else None."""
    if is_remote(text):
        import pyarrow.fs as pafs

        location = Location.parse(text)
        if not location.key or re.search(r"[*?\[]", location.key):
            return None
        fs = filesystem(location, options)
        try:
            if fs.get_file_info(f"{location.arrow_path}/_delta_log").type \
                    == pafs.FileType.Directory:
                return "delta"
            return "iceberg" if _metadata_files(fs, f"{location.arrow_path}/metadata") \
                else None
        except OSError as error:
            raise store_error(location.url, error) from None
    folder = local_dir(text)
    if folder is None:
        return None
    if (folder / "_delta_log").is_dir():
        return "delta"
    if (folder / "metadata").is_dir() and any((folder / "metadata").glob("*.metadata.json")):
        return "iceberg"
    return None


def _metadata_files(fs: pafs.FileSystem, folder: str) -> list[str]:
    import pyarrow.fs as pafs

    found = fs.get_file_info(pafs.FileSelector(folder, allow_not_found=True))
    return [i.path for i in found if _METADATA.match(i.base_name)]


# -- Delta -------------------------------------------------------------------------------------

def delta(location: str, options: StorageOptions | None, as_of: AsOf | None) -> Lake:
    """The Delta table at ``location`` (a folder or an object-store URL) at its current version,
    or at ``as_of`` (a version number, or a timestamp: the version then)."""
    deltalake = _need("deltalake")
    location = location.rstrip("/")
    readable = polars_options(Location.parse(location), options) if is_remote(location) \
        else _no_options(options, location)
    try:
        table = deltalake.DeltaTable(location, storage_options=readable)
        if as_of is not None:
            table.load_as_version(_delta_version(as_of))
    except (deltalake.exceptions.TableNotFoundError, FileNotFoundError):
        raise InputError(f"no Delta table at {location}") from None
    except deltalake.exceptions.DeltaError as error:
        raise InputError(f"cannot read the Delta table {location}"
                         f"{'' if as_of is None else f' at version {as_of}'}: "
                         f"{_first_line(error)}") from None
    except OSError as error:
        raise store_error(location, error) from None
    version = table.version()

    def scan() -> pl.LazyFrame:
        return pl.scan_delta(table, version=version, storage_options=readable)

    def dataset() -> pads.Dataset:
        try:
            return table.to_pyarrow_dataset()
        except deltalake.exceptions.DeltaProtocolError as error:
            raise InputError(f"the DuckDB engine cannot read the Delta table {location}: "
                             f"{_first_line(error)}; try engine='polars'") from None

    return Lake(f"{location} (Delta version {version})", scan, dataset)


def _delta_version(as_of: AsOf) -> int | str | datetime:
    if isinstance(as_of, str) and as_of.strip().isdigit():
        return int(as_of)
    if isinstance(as_of, str):
        return _timestamp(as_of)
    return as_of


# -- Iceberg -----------------------------------------------------------------------------------

def iceberg_folder(location: str, options: StorageOptions | None, as_of: AsOf | None) -> Lake:
    """The Iceberg table whose folder is ``location``, from its newest metadata file."""
    _need("pyiceberg")
    from pyiceberg.table import StaticTable

    location = location.rstrip("/")
    if is_remote(location):
        where = Location.parse(location)
        fs = filesystem(where, options)
        try:
            names = _metadata_files(fs, f"{where.arrow_path}/metadata")
        except OSError as error:
            raise store_error(location, error) from None
        newest = where.url_of(max(names, key=_metadata_number))
        properties = _iceberg_properties(where, options)
    else:
        _no_options(options, location)
        newest = str(max((Path(location) / "metadata").glob("*.metadata.json"),
                         key=lambda p: _metadata_number(p.name)).resolve())
        properties = {}
    try:
        table = StaticTable.from_metadata(newest, properties=properties)
    except OSError as error:
        raise store_error(newest, error) from None
    return _iceberg(table, location, options, as_of)


def iceberg_catalog(name: str, as_of: AsOf | None) -> Lake:
    """``CATALOG/NAMESPACE.TABLE`` from a pyiceberg catalog (configured as pyiceberg is: its
    ``.pyiceberg.yaml`` or ``PYICEBERG_CATALOG__<NAME>__...`` variables)."""
    _need("pyiceberg")
    from pyiceberg.catalog import load_catalog
    from pyiceberg.exceptions import NoSuchTableError

    catalog, sep, identifier = name.partition("/")
    if not sep or "." not in identifier:
        raise InputError(f"name an Iceberg table as iceberg://CATALOG/NAMESPACE.TABLE, "
                         f"got iceberg://{name}")
    try:
        table = load_catalog(catalog).load_table(identifier)
    except NoSuchTableError:
        raise InputError(f"no Iceberg table {identifier} in catalog {catalog!r}") from None
    except (ValueError, OSError) as error:
        raise InputError(f"cannot open the Iceberg catalog {catalog!r}: "
                         f"{_first_line(error)}") from None
    return _iceberg(table, f"iceberg://{name}", None, as_of)


def _iceberg(table: Any, name: str, options: StorageOptions | None,
             as_of: AsOf | None) -> Lake:
    snapshot = _iceberg_snapshot(table, name, as_of)
    snapshot_id = None if snapshot is None else snapshot.snapshot_id
    scan_of = table.scan(snapshot_id=snapshot_id)
    tasks = list(scan_of.plan_files())
    deletes = any(task.delete_files for task in tasks)
    files = [task.file.file_path for task in tasks]
    schema = scan_of.projection().as_arrow()
    readable = polars_options(Location.parse(files[0]), options) if files \
        and is_remote(files[0]) else None

    def scan() -> pl.LazyFrame:
        return pl.scan_iceberg(table, snapshot_id=snapshot_id, storage_options=readable)

    def dataset() -> pads.Dataset:
        if deletes:
            raise InputError(f"the DuckDB engine cannot read the Iceberg table {name}: it "
                             "has delete files (row-level deletes); try engine='polars'")
        fs, paths = _arrow_files(files, options)
        import pyarrow.dataset as pads  # imports pandas: only when read

        return pads.dataset(paths, schema=schema, filesystem=fs, format="parquet")

    label = "no snapshot" if snapshot_id is None else f"snapshot {snapshot_id}"
    return Lake(f"{name} (Iceberg {label})", scan, dataset)


def _iceberg_snapshot(table: Any, name: str, as_of: AsOf | None) -> Any:
    if as_of is None:
        return table.current_snapshot()
    if isinstance(as_of, str) and as_of.strip().isdigit():
        as_of = int(as_of)
    if isinstance(as_of, int):
        snapshot = table.snapshot_by_id(as_of)
        if snapshot is None:
            known = [s.snapshot_id for s in table.snapshots()]
            raise InputError(f"the Iceberg table {name} has no snapshot {as_of}; its "
                             f"snapshots are {known}")
        return snapshot
    when = _timestamp(as_of) if isinstance(as_of, str) else as_of
    snapshot = table.snapshot_as_of_timestamp(int(when.timestamp() * 1000))
    if snapshot is None:
        raise InputError(f"the Iceberg table {name} has no snapshot at or before {when}")
    return snapshot


def _arrow_files(files: list[str], options: StorageOptions | None,
                 ) -> tuple[pafs.FileSystem, list[str]]:
    """A pyarrow filesystem and the paths it takes for data files named by URL."""
    import pyarrow.fs as pafs

    if files and is_remote(files[0]):
        first = Location.parse(files[0])
        return filesystem(first, options), [Location.parse(f).arrow_path for f in files]
    return pafs.LocalFileSystem(), [f.removeprefix("file://") for f in files]


def _iceberg_properties(where: Location, options: StorageOptions | None) -> dict[str, str]:
    """pyiceberg's FileIO properties for an object store, from the storage options and the
    environment variables pyarrow does not read itself."""
    given = arrow_options(where.cloud, options)
    if where.cloud != "s3":
        return {}
    keys = {"access_key": "s3.access-key-id", "secret_key": "s3.secret-access-key",
            "session_token": "s3.session-token", "region": "s3.region"}
    properties = {keys[k]: str(v) for k, v in given.items() if k in keys}
    if "endpoint_override" in given:
        properties["s3.endpoint"] = f"{given.get('scheme', 'https')}://{given['endpoint_override']}"
    return properties


def _metadata_number(name: str) -> int:
    match = _METADATA.match(name.rsplit("/", 1)[-1])
    return int(match.group(1)) if match else -1


# -- shared ------------------------------------------------------------------------------------

def _no_options(options: StorageOptions | None, location: str) -> None:
    if options:
        raise InputError(f"storage_options apply to object-store paths, not to {location}")
    return None


def _timestamp(text: str) -> datetime:
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"as_of must be a version number or an ISO timestamp, got {text!r}"
                         ) from None
    return when if when.tzinfo else when.replace(tzinfo=timezone.utc)


def _first_line(error: BaseException) -> str:
    return next((line.strip() for line in str(error).splitlines() if line.strip()),
                type(error).__name__)

