"""Outputs written whole or not at all: each goes to a temporary file beside its target and is
renamed into place only once it is complete, so an interrupted or failed run leaves the previous
file where it was, and two runs writing one target leave one of the two whole.

>>> import tempfile
>>> target = Path(tempfile.mkdtemp()) / "metrics.csv"
>>> with atomic_output(target) as part:
...     _ = part.write_text("metric,value\\nf1,0.5\\n")
>>> target.read_text()
'metric,value\\nf1,0.5\\n'

:func:`check_output` runs before any work: an output that cannot be written, or that would
overwrite or join an input, is refused while nothing has been computed yet.
"""

from __future__ import annotations

import fnmatch
import glob
import os
import secrets
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from mleval_sql.schema import InputError


class OutputError(InputError):
    """An output that cannot or must not be written."""


def check_output(target: str | os.PathLike[str], *,
                 inputs: Sequence[str | os.PathLike[str]] = ()) -> Path:
    """``target`` if it can take an output, else an ``OutputError``: its folder must exist and be
    writable, and it may not be one of ``inputs`` (files, folders or globs) or lie inside an
    input folder, where the next run would read it as data.

    >>> check_output("/no/such/folder/metrics.csv")
    Traceback (most recent call last):
    mleval_sql.outputs.OutputError: the folder of /no/such/folder/metrics.csv does not exist
    """
    path = Path(target)
    folder = path.parent
    if not folder.is_dir():
        raise OutputError(f"the folder of {path} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write to the folder of {path}: permission denied")
    if path.is_dir():
        raise OutputError(f"{path} is a folder; name a file to write")
    _outside(path, inputs)
    return path


def check_folder(target: str | os.PathLike[str], *,
                 inputs: Sequence[str | os.PathLike[str]] = ()) -> Path:
    """``target`` if it can take a folder of outputs (made if missing), else an
    ``OutputError``: not a file, and neither one of ``inputs`` nor inside one.

    >>> check_folder("fixtures/x", inputs=["fixtures"])  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mleval_sql.outputs.OutputError: the output fixtures/x is inside the input fixtures: ...
    """
    path = Path(target)
    if path.exists() and not path.is_dir():
        raise OutputError(f"{path} is a file, not a folder")
    _outside(path, inputs)
    return path


def _outside(path: Path, inputs: Sequence[str | os.PathLike[str]]) -> None:
    """An ``OutputError`` if ``path`` is one of ``inputs`` (files, folders or globs; object
    storage is not looked at) or lies inside an input folder."""
    where = path.resolve()
    for given in inputs:
        text = os.fspath(given)
        if "://" in text:
            continue
        named = [text] if os.path.lexists(text) else glob.glob(text, recursive=True)
        if not os.path.lexists(text) and fnmatch.fnmatch(str(where), os.path.abspath(text)):
            named.append(str(where))
        for item in named:
            found = Path(item).resolve()
            if found == where or found in where.parents:
                raise OutputError(f"the output {path} is {'inside ' if found != where else ''}"
                                  f"the input {item}: write it elsewhere")


@contextmanager
def atomic_output(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path in ``target``'s folder to write to; renamed to ``target`` on success,
    removed on any exception (KeyboardInterrupt included)."""
    target = Path(target)
    # a dot name: lake readers skip it, as they skip any hidden file. The name is chosen before
    # the file is made, so that a signal arriving just after it is made still finds it to remove
    part = target.parent / f".{target.name}.{secrets.token_hex(8)}.part"
    made = False
    try:
        os.close(os.open(part, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))  # umask applies
        made = True
        yield part
        os.replace(part, target)
    except BaseException as error:
        if made or not isinstance(error, FileExistsError):  # never another run's file
            part.unlink(missing_ok=True)
        raise
