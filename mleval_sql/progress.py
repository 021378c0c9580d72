"""Progress on a terminal: which stage runs (checks, statistics, metrics), for how long, and how
far it is where the work is countable (segments), drawn by ``rich`` on stderr; nothing at all
when stderr is not a terminal. Each stage's time goes to the log (at debug level) and to any
:func:`timings` open, as the lake benchmark reads them.

>>> with stage("checks", total=2) as checks:  # silent here: doctest's stderr is no terminal
...     checks.advance()
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:  # rich is imported when there is a terminal to draw on
    from rich.progress import Progress, TaskID

T = TypeVar("T")


class Stage:
    """One line of the display: ``advance()`` counts a unit of work, ``describe()`` renames it."""

    def __init__(self, progress: Progress | None = None, task: TaskID | None = None) -> None:
        self.progress, self.task = progress, task

    def advance(self) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.advance(self.task)
            self.progress.refresh()

    def describe(self, text: str) -> None:
        if self.progress is not None and self.task is not None:
            self.progress.update(self.task, description=text)
            self.progress.refresh()


def _display() -> Progress:
    """The display: spinner, stage, bar, ``3/8`` where the work is countable, elapsed time."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        Progress,
        ProgressColumn,
        SpinnerColumn,
        Task,
        TextColumn,
        TimeElapsedColumn,
    )
    from rich.text import Text

    class Count(ProgressColumn):
        def render(self, task: Task) -> Text:
            return Text("" if task.total is None else f"{task.completed:.0f}/{task.total:.0f}")

    return Progress(SpinnerColumn(), TextColumn("mleval: {task.description}"), BarColumn(),
                    Count(), TimeElapsedColumn(), console=Console(file=sys.stderr),
                    transient=True)


_active: Progress | None = None  # one display at a time: nested stages add lines to it
# per thread (and task): the open timings() blocks, and the stages running, outermost first
_timings: ContextVar[tuple[dict[str, float], ...]] = ContextVar("mleval_timings", default=())
_open: ContextVar[tuple[str, ...]] = ContextVar("mleval_stages", default=())
LOG = logging.getLogger("mleval_sql")


@contextmanager
def timings() -> Iterator[dict[str, float]]:
    """The seconds of each stage that ends while the block runs, by its words after those of
    the stages it runs within (a stage run more than once: the sum of its runs).

    >>> with timings() as seconds:
    ...     with stage("checks"):
    ...         with stage("reading"):
    ...             pass
    >>> list(seconds)
    ['checks > reading', 'checks']
    """
    seconds: dict[str, float] = {}
    token = _timings.set((*_timings.get(), seconds))
    try:
        yield seconds
    finally:
        _timings.reset(token)


@contextmanager
def stage(what: str, total: int | None = None) -> Iterator[Stage]:
    """A line saying ``mleval: <what>`` with elapsed time (and ``done/total``) while the block
    runs, cleared when it ends; its time then logged (debug) and kept by :func:`timings`."""
    token = _open.set((*_open.get(), what))
    path, start = " > ".join(_open.get()), time.perf_counter()
    try:
        with _shown(what, total) as line:
            yield line
    finally:
        seconds = time.perf_counter() - start
        _open.reset(token)
        LOG.debug("%s: %.3f s", path, seconds)
        for kept in _timings.get():
            kept[path] = kept.get(path, 0.0) + seconds


@contextmanager
def _shown(what: str, total: int | None) -> Iterator[Stage]:
    """:func:`stage`'s line on a terminal (nothing elsewhere)."""
    global _active
    if not sys.stderr.isatty():
        yield Stage()
        return
    if _active is not None:
        task = _active.add_task(what, total=total)
        _active.refresh()
        try:
            yield Stage(_active, task)
        finally:
            _active.remove_task(task)
        return
    progress = _display()
    with progress:
        _active = progress
        try:
            task = progress.add_task(what, total=total)
            progress.refresh()
            yield Stage(progress, task)
        finally:
            _active = None


def counted(items: Sequence[T], what: str) -> Iterator[T]:
    """``items`` one by one, counted on a line ``mleval: <what>``."""
    with stage(what, total=len(items)) as line:
        for item in items:
            yield item
            line.advance()
