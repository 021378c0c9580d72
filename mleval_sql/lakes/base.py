"""What every lake is: predictions fixed at one snapshot (:class:`Lake`), opened at a version
(:data:`AsOf`). ``lakes/__init__.py`` opens parquet lakes in object storage and ``tables.py``
Delta and Iceberg tables; both build a :class:`Lake`, which the engines read.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import polars as pl

from mleval_sql.lakes.stores import store_error
from mleval_sql.schema import enums_as_strings

if TYPE_CHECKING:  # pyarrow.dataset imports pandas (half a second): only where it is read
    import pyarrow.dataset as pads

#: The version a Delta or Iceberg table is read at: Delta's version number or Iceberg's
#: snapshot id, or a timestamp (a datetime, or ISO text): the version current then.
AsOf = int | str | datetime


@dataclass(frozen=True, eq=False)
class Lake:
    """Predictions fixed at one snapshot (a list of files, a table version), read by each
    engine's own reader: ``scan`` makes polars' plan, ``dataset`` the Arrow dataset DuckDB scans.
    """

    name: str
    scan: Callable[[], pl.LazyFrame]
    dataset: Callable[[], pads.Dataset]

    def schema(self) -> pl.Schema:
        return self.polars().collect_schema()

    def polars(self) -> pl.LazyFrame:
        try:
            return enums_as_strings(self.scan())
        except (OSError, pl.exceptions.ComputeError) as error:
            raise store_error(self.name, error) from None
