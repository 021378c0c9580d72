"""Which files an input names, listed once, and whether they agree with each other.

:func:`snapshot` turns the paths a user gives into a fixed, sorted list of files that every stage
and every segment of an evaluation then reads, on either engine, so a file added or removed
during a run changes nothing. The rules, those of Spark, Hive and pyarrow's datasets:

- a path that exists is taken literally (a folder named ``run*`` or ``brack[1]`` is that folder);
  only a path that does not exist is a glob;
- a folder is read recursively, its files with a data suffix (``.parquet``);
- files and folders whose names start with ``_`` or ``.`` below the path given are not data
  (``_temporary/`` of a running Spark job, ``_SUCCESS``, ``.part`` files being written).

Listing goes through a small filesystem interface (:class:`Filesystem`: the method names of
fsspec's, so an fsspec filesystem of an object store can stand in for :class:`LocalFiles`).

>>> import tempfile
>>> from pathlib import Path
>>> root = Path(tempfile.mkdtemp())
>>> for name in ("model=a/part-0.parquet", "_temporary/0/part-0.parquet", "model=a/.x.parquet"):
...     (root / name).parent.mkdir(parents=True, exist_ok=True)
...     (root / name).touch()
>>> [Path(f).relative_to(root).as_posix() for f in snapshot([root])]
['model=a/part-0.parquet']
"""

from __future__ import annotations

import glob
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import PurePosixPath
from typing import Any, Protocol

import polars as pl

from mleval_sql.schema import InputError

GLOB_CHARS = "*?["


class Filesystem(Protocol):
    """What listing needs of a filesystem (a subset of ``fsspec.AbstractFileSystem``)."""

    def exists(self, path: str) -> bool: ...

    def isdir(self, path: str) -> bool: ...

    def find(self, path: str) -> Iterable[str]:
        """Every file below the folder ``path``, recursively."""
        ...

    def glob(self, pattern: str) -> Iterable[str]:
        """The paths matching ``pattern`` (``**`` spans folders)."""
        ...


class LocalFiles:
    """The local filesystem, as a :class:`Filesystem`."""

    def exists(self, path: str) -> bool:
        return os.path.lexists(path)

    def isdir(self, path: str) -> bool:
        return os.path.isdir(path)

    def find(self, path: str) -> list[str]:
        found = []
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = [s for s in subfolders if not not_data(s)]  # skip their insides
            found += [os.path.join(folder, n) for n in names]
        return found

    def glob(self, pattern: str) -> list[str]:
        return glob.glob(pattern, recursive=True)


def snapshot(paths: Sequence[str | os.PathLike[str]], filesystem: Filesystem | None = None,
             *, suffixes: tuple[str, ...] = (".parquet",),
             kinds: str | None = None) -> tuple[str, ...]:
    """The data files that ``paths`` name (see the module docstring), sorted, each once.

    ``suffixes``: the files of a folder that are data (a file or glob given is taken as it is).
    Raises ``InputError`` for a path that names nothing, or a folder or glob without data files
    (``kinds`` names the files looked for, by default from ``suffixes``).
    """
    fs = filesystem or LocalFiles()
    kinds = kinds or " or ".join(s.lstrip(".") for s in suffixes)
    files: dict[str, None] = {}
    for given in paths:
        path = text = os.fspath(given)  # messages name the path as given
        if filesystem is None and not _remote(path):
            # lake/model=a/.. is lake: a key=value folder left in the path would read as a
            # column of every file below it
            path = os.path.normpath(path)
        if fs.exists(path):
            found = _in_folder(fs, path, suffixes) if fs.isdir(path) else [path]
            if not found:
                raise InputError(f"no {kinds} files match {text} (names starting with _ or . "
                                 "are not data)")
        elif any(ch in path for ch in GLOB_CHARS):
            found = _globbed(fs, path, suffixes)
            if not found:
                raise InputError(f"no {kinds} files match {text} (names starting with _ or . "
                                 "are not data)")
        else:
            raise InputError(f"no such file or folder: {text}")
        files.update(dict.fromkeys(sorted(found)))
    return tuple(files)


def _in_folder(fs: Filesystem, folder: str, suffixes: tuple[str, ...]) -> list[str]:
    return [f for f in fs.find(folder) if f.lower().endswith(suffixes)
            and not hidden(f, below=folder)]


def _globbed(fs: Filesystem, pattern: str, suffixes: tuple[str, ...]) -> list[str]:
    """The files ``pattern`` matches, and the data files of the folders it matches; names
    starting with ``_`` or ``.`` below its literal part (the folders before the first wildcard)
    are skipped."""
    parts = PurePosixPath(pattern.replace(os.sep, "/")).parts
    literal = list(_prefix(parts))
    root = str(PurePosixPath(*literal)) if literal else "."
    found = []
    for match in fs.glob(pattern):
        if hidden(match, below=root):
            continue
        found += _in_folder(fs, match, suffixes) if fs.isdir(match) else [match]
    return found


def _prefix(parts: tuple[str, ...]) -> Iterable[str]:
    for part in parts[:-1]:
        if any(ch in part for ch in GLOB_CHARS):
            return
        yield part


def glob_escape(path: str) -> str:
    """``path`` as a glob pattern that matches only itself (``glob.escape``, which DuckDB's
    globbing understands too).

    >>> glob_escape("runs/run*/part[1].parquet")
    'runs/run[*]/part[[]1].parquet'
    """
    return glob.escape(path)


def hidden(path: str, *, below: str) -> bool:
    """Whether a name in ``path`` below the folder ``below`` starts with ``_`` or ``.``.

    >>> hidden("lake/_temporary/part-0.parquet", below="lake")
    True
    >>> hidden("_lake/a.parquet", below="_lake")  # the folder given is not below itself
    False
    """
    relative = os.path.relpath(path, below) if not _remote(path) else path[len(below):]
    return any(not_data(part) for part in PurePosixPath(relative.replace(os.sep, "/")).parts
               if part not in (".", ".."))


def not_data(name: str) -> bool:
    """Whether a file or folder name below the path given is not data (Spark's
    ``_temporary/``, ``_SUCCESS``, dot-files), as Spark, Hive and pyarrow skip them."""
    return name.startswith(("_", "."))


def _remote(path: str) -> bool:
    return "://" in path


def parquet_schema(file: str) -> pl.Schema:
    """The schema in ``file``'s footer (as polars reads it), or an ``InputError`` naming the
    file."""
    try:
        with open(file, "rb") as handle:  # a file, not a path polars would glob
            return pl.read_parquet_schema(handle)
    except (OSError, pl.exceptions.PolarsError) as error:
        raise InputError(f"cannot read {file}: {_reason(error)}") from error


def check_agreement(files: Sequence[str], columns: Iterable[str]) -> None:
    """Every file in ``files`` has each of ``columns`` with one type, or none has it.

    Columns of hive folders (``key=value`` in the paths) are not in the files and are skipped.
    Raises ``InputError`` naming a file that cannot be read (its footer), or the first file that
    differs from the first file and the column.
    """
    if not files:
        return
    names = [c for c in dict.fromkeys(columns) if not any(
        part.startswith(f"{c}=") for part in PurePosixPath(files[0].replace(os.sep, "/")).parts)]
    first = parquet_schema(files[0])
    for file in files[1:]:
        schema = parquet_schema(file)
        for name in names:
            mine, theirs = first.get(name), schema.get(name)
            if mine == theirs:
                continue
            if mine is None or theirs is None:
                having, lacking = (files[0], file) if theirs is None else (file, files[0])
                raise InputError(f"column {name!r} is in {having} but not in {lacking}: every "
                                 "file of an input needs the same columns")
            raise InputError(f"column {name!r} is {mine} in {files[0]} but {theirs} in {file}: "
                             "every file of an input needs the same column types")


def find_unreadable(files: Sequence[str], columns: Iterable[str]) -> InputError | None:
    """An ``InputError`` naming the first of ``files`` whose ``columns`` cannot be read in full
    (a corrupt page), or None: what an engine's read error is traced back to. Reads every file."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    for file in files:
        try:
            reader = pq.ParquetFile(file)
            wanted = [c for c in columns if c in reader.schema_arrow.names]
            for _ in reader.iter_batches(columns=wanted):
                pass
        except (OSError, pa.ArrowException) as error:
            return InputError(f"cannot read {file}: {_reason(error)}")
    return None


def _reason(error: BaseException) -> str:
    text = " ".join(str(error).split())
    if any(sign in text for sign in ("magic bytes", "must end with PAR1", "header and footer")):
        return "not a parquet file, or truncated (no parquet footer)"
    return text or type(error).__name__


def toml() -> Any:
    """``tomllib``, or on Python 3.10 its backport ``tomli`` (in the report extra): what reads
    a job file and a metrics.toml."""
    if sys.version_info >= (3, 11):
        import tomllib

        return tomllib
    try:  # pragma: no cover - Python 3.10
        import tomli
    except ImportError as error:  # pragma: no cover
        raise InputError("reading a TOML file (a job, a metrics.toml) on Python 3.10 needs "
                         "tomli: pip install 'mleval_sql[report]'") from error
    return tomli  # pragma: no cover
