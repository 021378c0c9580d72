"""The engines, behind one small interface, and the table of them (:data:`ENGINES`).

An engine is built on a source, the column mapping and the segment columns; ``summary()`` gives
the validation summary and ``results(steps, params)`` the metric rows of each final step. Every
engine subclasses :class:`mleval_sql.engines.base.BaseEngine` (the segment loop, the canonical
columns) and is one entry of :data:`ENGINES`, which the API, the command line's ``--engine``
and the tests' ``engine`` fixture read.
"""

from __future__ import annotations

import importlib
import os
import re
import sys
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import polars as pl

from mleval_sql.errors import InputError
from mleval_sql.schema import TASKS, Columns
from mleval_sql.sources import Source

#: The rows a request keeps of each final step: its metrics and averages ("none": per label or
#: per segment). The engines drop the others before they are materialised, so that a million
#: segments cost a million of the rows asked for, not of every row a step can give.
Keep = Mapping[str, tuple[Sequence[str], Sequence[str]]]

_SIZE = re.compile(r"\s*(\d+(?:\.\d*)?|\.\d+)\s*(b|bytes|[kmgt]i?b|%)\s*", re.IGNORECASE)
_UNITS = {"b": 1, "bytes": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def memory_bytes(limit: str | int) -> int:
    """A memory limit (``"1GB"``, ``"512 MiB"``, ``"50%"`` of the machine's memory, or a whole
    number of bytes) in bytes; anything else is an ``InputError``.

    >>> memory_bytes("1.5GB"), memory_bytes("2 KiB"), memory_bytes(4096)
    (1500000000, 2048, 4096)
    """
    match = _SIZE.fullmatch(limit) if isinstance(limit, str) else None
    if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0:
        return limit
    if match is None or float(match[1]) <= 0:
        raise InputError(f"memory_limit must be a positive size with a unit, such as 500MB, "
                         f"1.5GiB or 50% (of the machine's memory), got {limit!r}")
    unit = match[2].lower()
    if unit == "%":
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        return int(total * min(float(match[1]), 100) / 100)
    return int(float(match[1]) * _UNITS[unit])


class Engine(Protocol):
    name: str

    def summary(self) -> pl.DataFrame: ...

    def results(self, steps: Sequence[str], params: dict[str, object], *,
                numeric_truth: bool = False,
                keep: Keep | None = None) -> dict[str, pl.DataFrame]: ...

    def replicate_chunks(self, steps: Sequence[str], params: dict[str, object], *,
                         rows: int, keep: Keep) -> list[list[int]]: ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class EngineErrors:
    """What an engine's library raises when it cannot read or run a request, and how that is
    said. ``types``: its error classes, as ``"module:Class"`` names, looked up only where that
    module is imported already (a library not imported has raised nothing, and looking does
    not import it); ``out_of_memory``: those among them that say a memory limit could not hold
    the request; ``cause``: the error in one line (default: its message on one line);
    ``input_error``: None where the error reaches an API caller as it was raised, else the
    words an ``InputError`` says it in (``"<input_error>: <cause>"``, the error its
    ``__cause__``). The command line prints the cause as its one error line either way."""

    types: tuple[str, ...]
    out_of_memory: tuple[str, ...] = ()
    cause: Callable[[BaseException], str] | None = None
    input_error: str | None = None

    def raised(self, error: BaseException) -> bool:
        """``error`` is one of this library's."""
        return isinstance(error, _loaded(self.types))

    def is_out_of_memory(self, error: BaseException) -> bool:
        """``error`` says the engine's memory limit cannot hold what the request needs."""
        return isinstance(error, _loaded(self.out_of_memory))

    def cause_of(self, error: BaseException) -> str:
        """``error`` in one line."""
        text = self.cause(error) if self.cause is not None else str(error)
        return " ".join(text.split()) or type(error).__name__


def _loaded(names: Sequence[str]) -> tuple[type[BaseException], ...]:
    """The classes ``names`` (``"module:Class"``) whose module is imported."""
    modules = {name: sys.modules.get(name.partition(":")[0]) for name in names}
    return tuple(getattr(module, name.partition(":")[2])
                 for name, module in modules.items() if module is not None)


@dataclass(frozen=True)
class EngineEntry:
    """An engine: its ``name``, the ``factory`` that builds it (``factory(source, columns,
    weight, by, memory_limit=..., clustering=..., **options)``; a ``"module:Class"`` string is
    imported when first used), and the ``options`` of ``evaluate`` it takes beyond
    ``memory_limit`` (others given are not passed on). ``reader``: how the engine reads what
    ``evaluate`` is given (``reader(source, connection)``, a ``"module:function"`` string);
    None: the frames, files and lakes of :func:`mleval_sql.sources.as_source`, and then the
    engine runs every generic test body. ``offered``: a choice of the command line's
    ``--engine``. ``tasks``: the tasks it evaluates. ``memory_budget``: it takes
    ``memory_limit`` (an engine without one leaves memory to the system it runs on).
    ``errors``: what its library raises (:class:`EngineErrors`, or a ``"module:name"`` string
    naming one, read once that module is imported: an engine whose module was never imported
    has raised nothing); None: the engine raises only what the others do (an error of another
    library escapes the command line as a traceback)."""

    name: str
    factory: Callable[..., Engine] | str
    options: tuple[str, ...] = ()
    reader: Callable[..., Any] | str | None = None
    offered: bool = True  # by the command line's --engine
    tasks: tuple[str, ...] = TASKS
    memory_budget: bool = True
    claims: Callable[[Any, Any], bool] | str | None = None
    rank: int | None = None
    errors: EngineErrors | str | None = None

    def check_task(self, task: str) -> None:
        """An ``InputError`` unless the engine evaluates ``task``."""
        if task not in self.tasks:
            able = [name for name, entry in ENGINES.items() if task in entry.tasks]
            raise InputError(f"engine {self.name!r} does not run task {task!r}; engines that "
                             f"do: {', '.join(able)}")

    def check_memory_limit(self, memory_limit: str | int | None) -> None:
        """An ``InputError`` if ``memory_limit`` is given to an engine without a budget."""
        if memory_limit is not None and not self.memory_budget:
            able = [name for name, entry in ENGINES.items() if entry.memory_budget]
            raise InputError(f"engine {self.name!r} does not take memory_limit= (the system it "
                             f"runs on manages its memory); engines that do: {', '.join(able)}")

    def make(self, *args: Any, memory_limit: str | int | None = None,
             clustering: bool = False, **options: Any) -> Engine:
        """The engine, once the table allows the task (``clustering``) and ``memory_limit``."""
        if clustering:
            self.check_task("clustering")
        self.check_memory_limit(memory_limit)
        for name, value in options.items():  # a connection may serve the source, not the engine
            if value is not None and name != "connection" and name not in self.options:
                able = [n for n, entry in ENGINES.items() if name in entry.options]
                raise InputError(f"engine {self.name!r} does not take {name}=; engines that "
                                 f"do: {', '.join(able)}")
        return imported(self.factory)(*args, memory_limit=memory_limit, clustering=clustering,
                                       **{k: v for k, v in options.items() if k in self.options})

    def read(self, source: Any, connection: Any) -> Any:
        """What the engine reads for ``source`` (only for an engine with a ``reader``)."""
        assert self.reader is not None
        return imported(self.reader)(source, connection)

    def library_errors(self) -> EngineErrors | None:
        """``errors``, once what names it is imported (None before, or without ``errors``)."""
        if not isinstance(self.errors, str):
            return self.errors
        module, _, name = self.errors.partition(":")
        loaded = sys.modules.get(module)
        return None if loaded is None else getattr(loaded, name)  # type: ignore[no-any-return]


def _package(thing: Any) -> str:
    """The top-level package of ``thing``'s type (``duckdb`` for ``_duckdb``)."""
    return type(thing).__module__.split(".")[0].lstrip("_")


def _duckdb_input(source: Any, connection: Any) -> bool:
    """A DuckDB relation, or a DuckDB connection to run on."""
    return _package(source) == "duckdb" or _package(connection) == "duckdb" \
        or type(source).__name__ == "DuckDBRelation"


def _spark_input(source: Any, connection: Any) -> bool:
    """A Spark DataFrame."""
    return _package(source) == "pyspark"


def _database_input(source: Any, connection: Any) -> bool:
    """A table's name with a database connection (not DuckDB's: :func:`_duckdb_input`)."""
    return isinstance(source, str) and connection is not None


def imported(thing: Callable[..., Any] | str) -> Callable[..., Any]:
    """``thing``, or what a ``"module:name"`` string names (its module imported now)."""
    if isinstance(thing, str):
        module, _, name = thing.partition(":")
        return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]
    return thing


#: Every engine, by name (:func:`choose_engine` picks one where none is named). ``sql`` runs
#: the steps in the database behind a connection (ADBC, DB-API or a SparkSession), on a table of
#: that database; ``spark`` reads a Spark DataFrame, a catalog table or parquet files with Spark
#: and runs there. Neither takes a memory budget.
ENGINES: dict[str, EngineEntry] = {e.name: e for e in (
    EngineEntry("duckdb", "mleval_sql.engines.duckdb:DuckDBEngine",
                ("connection", "threads", "reproducible"), claims=_duckdb_input, rank=1,
                errors=EngineErrors(("duckdb:Error",),
                                    out_of_memory=("duckdb:OutOfMemoryException",))),
    # the fastest on the lake benchmark (docs/performance.md), with a budget too
    EngineEntry("polars", "mleval_sql.engines.polars.engine:PolarsEngine", rank=0,
                errors=EngineErrors(("polars.exceptions:PolarsError",))),
    EngineEntry("sql", "mleval_sql.engines.sql:SQLEngine",
                reader="mleval_sql.engines.sql:database_table", offered=False,
                memory_budget=False,
                claims=_database_input),
    EngineEntry("spark", "mleval_sql.engines.spark:SparkEngine",
                reader="mleval_sql.engines.spark:spark_source",
                memory_budget=False,
                claims=_spark_input,
                errors="mleval_sql.engines.spark:ERRORS"),
)}


#: The class that runs SQL on a connection of another kind than ADBC and DB-API, by the top-level
#: module of the connection's type (``"module:Class"``, imported when first met); others:
#: :class:`mleval_sql.engines.sql.Database`.
DATABASES: dict[str, str] = {"pyspark": "mleval_sql.engines.spark:SparkDatabase"}


def engine_errors() -> tuple[type[BaseException], ...]:
    """What the engines' libraries raise when they cannot read or run a request: the error
    classes of every entry's ``errors``, of the libraries imported so far."""
    return tuple(cls for errors in _library_errors() for cls in _loaded(errors.types))


def errors_of(error: BaseException) -> EngineErrors | None:
    """The ``errors`` of the engine whose library raised ``error`` (None: no engine's)."""
    return next((errors for errors in _library_errors() if errors.raised(error)), None)


def _library_errors() -> list[EngineErrors]:
    return [errors for entry in ENGINES.values()
            if (errors := entry.library_errors()) is not None]


def local_engines() -> list[str]:
    """The engines that read frames, files and lakes themselves (no ``reader``): those the
    command line offers and every generic test body runs on."""
    return [name for name, entry in ENGINES.items() if entry.reader is None]


def choose_engine(source: Any, *, connection: Any = None,
                  memory_limit: str | int | None = None, threads: int | None = None,
                  reproducible: bool = False,
                  without: Collection[str] = ()) -> tuple[EngineName, str]:
    """The engine a request runs on when it names none, and why: the engine whose own the
    input is (a DuckDB relation or connection, a Spark DataFrame, a table of a database);
    else, among the engines that read frames, files and lakes and give what the request asks
    (``threads``, ``reproducible``, a ``memory_limit`` kept to), the fastest (``rank``), but
    those ``without`` (an engine found not to keep to the budget on this input).

    >>> choose_engine("lake/"), choose_engine("lake/", threads=1)[0]
    (('polars', 'the fastest for this input'), 'duckdb')
    >>> choose_engine("lake/", memory_limit="1GB", without=["polars"])[0]
    'duckdb'
    """
    for name, entry in ENGINES.items():
        if entry.claims is not None and imported(entry.claims)(source, connection):
            given = source if connection is None else connection
            return name, f"the engine of a {type(given).__name__}"
    asked = {name: value for name, value in (("memory_limit", memory_limit), ("threads", threads),
                                             ("reproducible", reproducible),
                                             ("connection", connection))
             if value not in (None, False)}
    local = [(entry.rank, name) for name, entry in ENGINES.items()
             if entry.reader is None and entry.rank is not None and name not in without]
    able = sorted((rank, name) for rank, name in local
                  if set(asked) - {"memory_limit"} <= set(ENGINES[name].options))
    fastest = min(local)[1]
    if not able or able[0][1] == fastest:
        return fastest, "the fastest for this input"
    needs = ", ".join(f"{k}={v!r}" for k, v in asked.items())
    return able[0][1], f"the fastest that takes {needs}"


#: An engine's name: a key of :data:`ENGINES`.
EngineName = str


def make_engine(name: str, source: Source, columns: Columns, weight: str | None,
                by: Sequence[str], **options: Any) -> Engine:
    """The engine called ``name`` over ``source`` (``options`` it does not take are dropped;
    a task or a ``memory_limit`` its entry refuses is an ``InputError``)."""
    if name not in ENGINES:
        raise InputError(f"unknown engine {name!r}; engines are {list(ENGINES)}")
    return ENGINES[name].make(source, columns, weight, by, **options)
