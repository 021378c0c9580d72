"""Progress on a terminal: which stage runs (checks, statistics, metrics), for how long, and how
far it is where the work is countable (segments), drawn by ``rich`` on stderr; nothing at all
when stderr is not a terminal.

>>> with stage("checks", total=2) as checks:  # silent here: doctest's stderr is no terminal
...     checks.advance()
"""

from __future__ import annotations

import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
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


@contextmanager
def stage(what: str, total: int | None = None) -> Iterator[Stage]:
    """A line saying ``mleval: <what>`` with elapsed time (and ``done/total``) while the block
    runs, cleared when it ends."""
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
