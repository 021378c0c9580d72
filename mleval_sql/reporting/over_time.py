"""A job over time ([window]): every table of the job is per time window; the page and its
tables are of the latest window of the job's first granularity, the trend charts and the
history of every window.

The latest window is the last ``window_start`` of the first granularity that any row has; the
baseline of its alerts may be the window before it (``[baseline] previous = true``) or a
window named by its start (``[baseline] window = "2026-10"``: the first granularity's window
that starts then, as text of the start's date and time, ``2026-10`` or ``2026-10-05``).

>>> import datetime as dt
>>> rows = pl.DataFrame({"granularity": ["1d", "1d"], "value": [0.5, 0.7],
...                      "window_start": [dt.date(2026, 11, 1), dt.date(2026, 11, 2)],
...                      "window_end": [dt.date(2026, 11, 2), dt.date(2026, 11, 3)]})
>>> latest_window(rows, ("1d",))
('1d', datetime.date(2026, 11, 2))
>>> at(rows, ("1d", dt.date(2026, 11, 2)))["value"].to_list()
[0.7]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import polars as pl

from mleval_sql.reporting.job import Baseline, JobError
from mleval_sql.windows import COLUMNS, END, GRANULARITY, START

#: A window: its granularity and start.
WindowKey = tuple[str, Any]


def latest_window(rows: pl.DataFrame, every: Sequence[str]) -> WindowKey | None:
    """The last window of the first of ``every`` that ``rows`` have (None: no rows)."""
    for grain in every:
        starts = rows.filter(pl.col(GRANULARITY) == grain)[START]
        if starts.len():
            return grain, starts.max()
    return None


def at(rows: pl.DataFrame, window: WindowKey | None) -> pl.DataFrame:
    """The rows of ``window`` without the window's columns (none: no rows)."""
    if window is None:
        return rows.clear().drop(*COLUMNS, END)
    grain, start = window
    return rows.filter(pl.col(GRANULARITY) == grain, pl.col(START) == start).drop(*COLUMNS, END)


def reference_window(rows: pl.DataFrame, latest: WindowKey | None,
                     baseline: Baseline) -> WindowKey | None:
    """The window a baseline of this job's windows names: the one before ``latest`` (of its
    granularity), or the one whose start reads as ``baseline.window``; None where there is
    no earlier window (the first night)."""
    if latest is None:
        return None
    grain, start = latest
    starts = rows.filter(pl.col(GRANULARITY) == grain)[START].unique().sort()
    if baseline.previous:
        earlier = starts.filter(starts < start)
        return (grain, earlier.max()) if earlier.len() else None
    assert baseline.window is not None
    text = starts.cast(pl.String)
    named = starts.filter(text.str.starts_with(baseline.window))
    if not named.len():
        raise JobError(f"baseline.window: no {grain} window starts at {baseline.window!r}; "
                       f"the job's {grain} windows start at {text.head(5).to_list()}"
                       f"{' ...' if text.len() > 5 else ''}")
    return grain, named.min()
