"""Outputs written whole or not at all: each goes to a temporary file beside its target and is
renamed into place only once it is complete, so an interrupted or failed run leaves the previous
file where it was, and two runs writing one target leave one of the two whole.

>>> import tempfile
>>> target = Path(tempfile.mkdtemp()) / "metrics.csv"
>>> with atomic_output(target) as part:
...     _ = part.write_text("metric,value\\nf1,0.5\\n")
>>> target.read_text()
'metric,value\\nf1,0.5\\n'
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def atomic_output(target: str | os.PathLike[str]) -> Iterator[Path]:
    """A temporary path in ``target``'s folder to write to; renamed to ``target`` on success,
    removed on any exception (KeyboardInterrupt included)."""
    target = Path(target)
    # a dot name: lake readers skip it, as they skip any hidden file
    fd, name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    os.close(fd)
    part = Path(name)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(part, 0o666 & ~umask)  # mkstemp's 0600 would make outputs private
        yield part
        os.replace(part, target)
    except BaseException:
        part.unlink(missing_ok=True)
        raise
