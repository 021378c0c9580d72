"""Run the ``queries/`` SQL on a DuckDB connection, in process.

The input becomes a view of the canonical columns; each statistics step is materialised once as
a temporary table, so every metric of a request reads the data through one scan per statistic.
Relations get a per-run prefix so nothing clashes with the user's own tables.
"""

from __future__ import annotations

import functools
import operator
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import duckdb
import polars as pl
from sqlglot import exp

from mleval_sql import dialects, queries
from mleval_sql import files as listing
from mleval_sql.engines import Keep, memory_bytes
from mleval_sql.engines.base import BaseEngine, Canonical, canonical_columns
from mleval_sql.engines.polars import bootstrap
from mleval_sql.lakes import Lake
from mleval_sql.lakes.stores import store_error
from mleval_sql.progress import stage
from mleval_sql.registry import AVERAGING, RELATIONS, STEPS
from mleval_sql.schema import Columns, InputError
from mleval_sql.sources import (
    ArrowDataset,
    Csv,
    Derived,
    DuckDBRelation,
    InMemory,
    Parquet,
    Source,
    underlying,
)

T = TypeVar("T")

#: The steps whose values do not depend on the order of their rows where every weight is 1:
#: counts, sums of whole numbers (exact in any order), extremes, rows picked by their keys, and
#: the ranking metrics (their fractional terms summed as exact decimals). With ``reproducible``
#: they run on every thread; the others on one.
ORDER_FREE = frozenset({
    "validate_summary", "cluster_summary", "threshold_counts", "argmax_matrix", "matrix_counts",
    "ranked_points", "curve_counts", "curve_rates", "threshold_buckets", "listed_points",
    "sweep_counts", "contingency", "sample_ids", "ranking_metrics", "curve_metrics"})


#: Steps whose windows partition by (segment, label), each with the switch under which it also
#: pools a segment's labels (None: never); otherwise they sort one integer per (segment, label)
#: (:meth:`DuckDBEngine._numbered`).
NUMBERED: dict[str, str | None] = {"ranking_metrics": "micro", "ranked_points": None,
                                   "curve_rates": None, "regression_medians": None}

#: Steps that also run over a table whose groups are numbered already (a numbered step's
#: statistics, kept numbered where every step that reads them is of these), with the switch
#: under which they pool a segment's labels.
CODED_READERS: dict[str, str | None] = {**NUMBERED, "curve_metrics": "micro",
                                        "curve_counts": None, "block_placements": None}


#: The types of the groups' numbers, the narrowest first, with the largest number each holds.
CODES = (("USMALLINT", 2**16 - 1), ("UINTEGER", 2**32 - 1), ("UBIGINT", 2**64 - 1))


def _pools(step: str, params: dict[str, object]) -> bool:
    """Whether ``step`` (of :data:`CODED_READERS`) pools a segment's labels in this run."""
    switch = CODED_READERS.get(step)
    return bool(switch and params.get(switch))


class DuckDBEngine(BaseEngine):
    """Evaluate with DuckDB.

    ``memory_limit`` (e.g. ``"1GB"``) bounds DuckDB's memory; what does not fit spills to
    ``temp_directory`` (default: a fresh temporary folder, removed afterwards), on a connection
    of its own, and the segments are evaluated in batches of about the budget's rows
    (engines/base.py; a parquet lake partitioned by the segment columns is then read a few
    partitions at a time); a user's ``connection`` keeps the memory settings the user gave it.
    ``threads``: DuckDB's threads for the run. ``reproducible``: reruns give the same bits with
    any number of threads: a step whose values do not depend on the order of its rows (counts,
    sums of whole weights, extremes, exact decimal sums: :data:`ORDER_FREE`, where every weight
    is 1) runs on every thread, and a table of it that another kind of step reads is kept in
    one order (sorted); every other step sums in the order of its input, on one thread. A
    progress bar shows on a terminal. ``clustering``: the input is a clustering table (sample,
    truth, cluster, weight), checked by cluster_summary.

    A bootstrap whose metrics the rows ranked once give (decision counts, ROC AUC, average
    precision: engines/polars/bootstrap.py) does not run its steps over the replicated rows
    (queries/replicates.sql, the oracle and the path for every other metric): each run of the
    steps would scan, join and sort the rows once per replicate (at 1M rows, 200 replicates
    took 86 s against 1.2 s without the interval). DuckDB reads each batch of segments' canonical
    rows within its budget (:meth:`_frame`) and hands them to the kernel that sorts them once
    and sums every replicate's draws down them: the polars engine's intervals, bit for bit.
    """

    name = "duckdb"

    def __init__(self, source: Source, columns: Columns, weight: str | None, by: Sequence[str],
                 *, connection: duckdb.DuckDBPyConnection | None = None,
                 memory_limit: str | int | None = None, temp_directory: str | None = None,
                 threads: int | None = None, clustering: bool = False,
                 reproducible: bool = False) -> None:
        super().__init__(by, memory_limit)
        self.unit_weights = weight is None
        self.one_label = not clustering and columns.label is None
        self.reproducible = reproducible
        self.owned = connection is None
        self.con = connection or duckdb.connect()
        self.prefix = f"mleval_{uuid.uuid4().hex[:8]}_"
        self.created: list[tuple[str, str]] = []
        self.restore: dict[str, object] = {}
        self.aliases: dict[str, str] = {}  # a relation of this run read under another name
        self.coded: dict[str, str] = {}  # a relation kept numbered -> its groups' relation
        self.spill: Path | None = None
        self.counts: pl.DataFrame | None = None  # the input's rows per segment, once counted
        try:
            self._set("threads", threads)  # 1: sums in one order, the same bits every run
            self.threads = int(self.con.execute("SELECT current_setting('threads')")
                               .fetchone()[0])
            self._open(source, columns, weight, memory_limit, temp_directory, clustering)
        except BaseException:  # an error or a signal half-way: nothing is left behind
            self.close()
            raise

    def _open(self, source: Source, columns: Columns, weight: str | None,
              memory_limit: str | int | None, temp_directory: str | None,
              clustering: bool) -> None:
        if memory_limit and not self.owned:
            # DuckDB reports the old limit rounded ("2.7 GiB"): it could not be put back exactly
            raise InputError(YOUR_BUDGET)
        if memory_limit:
            if temp_directory is None:
                # named and held for close() before it exists, so that a signal arriving as
                # it is made cannot leave it behind
                self.spill = Path(tempfile.gettempdir()) / f"mleval-spill-{uuid.uuid4().hex}"
                self.spill.mkdir(mode=0o700)
                temp_directory = str(self.spill)
            self._set("memory_limit", f"{self.budget}B")
            # keeping the input's row order costs memory that large aggregations need
            self._set("preserve_insertion_order", False)
        if temp_directory is not None:
            self.con.execute("SET temp_directory = $value", {"value": temp_directory})
        # progress is drawn by mleval_sql.progress (stages, segments): DuckDB's own bar would
        # write over it
        self._set("enable_progress_bar", False)
        relation = read(source, self.con)
        if isinstance(underlying(source), DuckDBRelation):
            relation.create_view(self._name("input"), replace=True)
            if self._visible(self._name("input")):  # it lives on this connection: use it there
                self.created.append(("VIEW", self._name("input")))
            else:  # another connection's: copy it in once, streamed through Arrow
                relation.query("input", f"DROP VIEW {queries.identifier(self._name('input'))}")
                self.con.from_arrow(relation.to_arrow_reader()).create(self._name("input"))
                self.created.append(("TABLE", self._name("input")))
                relation = self.con.table(self._name("input"))
        else:
            relation.create_view(self._name("input"), replace=True)
            self.created.append(("VIEW", self._name("input")))
        self.relation = relation
        self.summary_step = "cluster_summary" if clustering else "validate_summary"
        self._create("VIEW", "predictions", self._canonical(canonical_columns(
            columns, weight, clustering=clustering)))
        self._canonical_bool = self._canonical(canonical_columns(
            columns, weight, clustering=clustering, truth_as_bool=True))

    def _segment_counts(self) -> pl.DataFrame:
        if self.counts is None:
            columns = ", ".join(queries.identifier(c) for c in self.by)
            rows = queries.identifier(self._name("input"))
            self.counts = self.con.sql(
                f"SELECT {columns}, count(*) AS n FROM {rows} GROUP BY {columns}" if self.by
                else f"SELECT count(*) AS n FROM {rows}").pl()
        return self.counts

    # -- the bootstrap of rows ranked once (engines/base.py) ---------------------------------

    def _ranks_in_memory(self) -> bool:
        """Predictions whose largest segment the kernel ranks within the budget (DuckDB's own
        memory_limit without one) at ``bootstrap.RANKED_ROW_BYTES`` a row, as the batches are made
        (engines/base.py): a larger one runs the replicated plans, which DuckDB spills."""
        if self.summary_step != "validate_summary":
            return False
        largest = self._segment_counts()["n"].max()
        rows = int(largest) if largest is not None else 0  # type: ignore[arg-type]
        return rows * bootstrap.RANKED_ROW_BYTES <= self._memory()

    def _memory(self) -> int:
        """The budget, else the connection's memory_limit (0 where it cannot be read)."""
        if self.budget is not None:
            return self.budget
        (limit,) = self.con.execute("SELECT current_setting('memory_limit')").fetchone()
        try:
            return memory_bytes(str(limit))
        except InputError:
            return 0

    def _each_ranked(self, run: Callable[[pl.DataFrame], T]) -> list[T]:
        # DuckDB's allocator keeps the memory its steps have freed (jemalloc's dirty pages:
        # about 0.6 GB after the point estimates of 10M weighted rows under a 1 GB budget),
        # where polars' allocator cannot take it; its background threads give it back to the
        # system while the kernel runs (there, 1.7 GiB at the peak without them, 1.2 with)
        if "allocator_background_threads" not in self.restore:
            self._set("allocator_background_threads", True)
        return super()._each_ranked(run)

    def _frame(self, rows: None) -> pl.DataFrame:
        """The canonical rows of the batch ``input`` holds now, through Arrow: DuckDB reads
        them within its memory_limit, and only this batch is in polars' memory."""
        with stage("reading"):
            return self.con.sql(self._canonical_bool).pl()

    def _sample_ids(self) -> pl.DataFrame:
        table = self.con.table(self._name("sample_ids"))
        return table.pl().sort("id")  # in the order of the ids, whatever the threads' order

    @contextmanager
    def _restricted(self, keys: pl.DataFrame | None, *, few: bool) -> Iterator[None]:
        """The ``input`` view (and so ``predictions``) over the rows of the segments in
        ``keys`` while the context is open: a few by a filter with the values bound as
        constants (a parquet scan then skips the other hive partitions), many by a semi-join
        with a table of them."""
        if keys is None:
            yield
            return
        self._batch(keys, few).create_view(self._name("input"), replace=True)
        try:
            yield
        finally:
            self.relation.create_view(self._name("input"), replace=True)

    def _summary(self, rows: None) -> pl.DataFrame:
        with self._ordered(self.summary_step):
            return self._fetch(self.summary_step, {})

    def _free(self, step: str) -> bool:
        """Whether ``step``'s values do not depend on the order of its rows (:data:`ORDER_FREE`,
        where every weight is 1)."""
        return self.unit_weights and step in ORDER_FREE

    @contextmanager
    def _ordered(self, step: str) -> Iterator[bool]:
        """With ``reproducible``: ``step`` on one thread, unless its values do not depend on
        the order of its rows (then True: a table it gives that a step of the other kind reads
        is to be kept sorted)."""
        if not self.reproducible or self._free(step):
            yield self.reproducible
            return
        with self._one_thread():
            yield False

    @contextmanager
    def _one_thread(self) -> Iterator[None]:
        self.con.execute("SET threads = 1")
        try:
            yield
        finally:
            self.con.execute(f"SET threads = {self.threads}")

    def _batch(self, keys: pl.DataFrame, few: bool) -> duckdb.DuckDBPyRelation:
        if few:
            return self.relation.filter(self._is_one_of(keys))
        table = self._name("batch")
        self.con.execute(f"DROP TABLE IF EXISTS {queries.identifier(table)}")
        self.con.from_arrow(keys.to_arrow()).create(table)
        if ("TABLE", table) not in self.created:
            self.created.append(("TABLE", table))
        same = " AND ".join(f"i.{queries.identifier(c)} IS NOT DISTINCT FROM "
                            f"b.{queries.identifier(c)}" for c in self.by)
        return self.relation.set_alias("i").join(self.con.table(table).set_alias("b"), same,
                                                 how="semi")

    def _results(self, rows: None, steps: list[str], params: dict[str, object], *,
                 numeric_truth: bool, keep: Keep) -> dict[str, pl.DataFrame]:
        """Statistics steps become tables, final steps return metric rows."""
        if not numeric_truth:
            self._create("VIEW", "predictions", self._canonical_bool, replace=True)
        out: dict[str, pl.DataFrame] = {}
        with stage("statistics") as line:
            for name in steps:
                step = STEPS[name]
                line.describe(f"{'metrics' if step.gives is None else 'statistics'}: {name}")
                with self._ordered(name) as sort:
                    if step.gives is None:
                        out[name] = self._final(name, params, keep.get(name), sort=sort)
                        continue
                    # only a table that a step summing in its rows' order reads need be sorted
                    sort = sort and any(step.gives in STEPS[later].reads
                                        and not self._free(later) for later in steps)
                    # a step that gives a relation it reads (replicates) shadows it
                    coded = self._keeps_codes(name, steps, params)
                    sql = self._step_sql(name, params, coded=coded)
                    target = step.gives if step.gives not in step.reads \
                        else f"{step.gives}_{name}"
                    self._table(target, sql, self._bind(sql, params), sort=sort)
                    self.aliases[step.gives] = target
                    if coded:
                        self.coded[step.gives] = self._groups(name)
        self.aliases.clear()
        self.coded.clear()
        self._drop_statistics()
        return out

    def _drop_statistics(self) -> None:
        """Drop the tables of this run's statistics (a whole step's are kept for the request):
        a later run makes its own, and held in memory they would take the budget of the runs
        after (a bootstrap's rows ranked in polars' memory: DeLong's curve tables of 10M
        weighted rows held 1.5 GB of DuckDB's as they ran)."""
        kept = {self._name(step.gives) for step in STEPS.values() if step.whole and step.gives}
        kept |= {self._name("input"), self._name("batch")}  # the rows, not statistics
        for kind, name in self.created:
            if kind == "TABLE" and name not in kept:
                self.con.execute(f"DROP TABLE IF EXISTS {queries.identifier(name)}")

    def close(self) -> None:
        """Drop what the run created and restore the settings it changed (a connection of our
        own is simply closed)."""
        if self.owned:
            self.con.close()
        else:
            for kind, name in reversed(self.created):
                self.con.execute(f"DROP {kind} IF EXISTS {queries.identifier(name)}")
            for setting, value in self.restore.items():
                self.con.execute(f"SET {setting} = $value", {"value": value})
        self.created.clear()
        self.restore.clear()
        if self.spill is not None:
            shutil.rmtree(self.spill, ignore_errors=True)
            self.spill = None

    # -- plumbing ---------------------------------------------------------------------------

    @staticmethod
    def _is_one_of(keys: pl.DataFrame) -> duckdb.Expression:
        """The rows of the segments in ``keys``, as a filter on the input's own columns with
        the values bound as constants."""
        def segment(row: dict[str, object]) -> duckdb.Expression:
            return functools.reduce(operator.and_, (
                duckdb.ColumnExpression(c).isnull() if v is None
                else duckdb.ColumnExpression(c) == duckdb.ConstantExpression(v)
                for c, v in row.items()))
        return functools.reduce(operator.or_, map(segment, keys.iter_rows(named=True)))

    def _canonical(self, columns: list[Canonical]) -> str:
        """SELECT of the canonical columns from the user's table, every identifier quoted."""
        q = queries.identifier
        by = self.by
        # one segment column is the key itself; several are packed in a struct (grouping by a
        # struct costs about three times as much, so it is kept for when it is needed)
        segment = (q(by[0]) if len(by) == 1 else
                   "struct_pack(" + ", ".join(f"{q(c)} := {q(c)}" for c in by) + ")" if by
                   else "0")
        selected = []
        for c in columns:
            source = q(c.column) if c.column is not None else (
                queries.string(c.value) if isinstance(c.value, str) else repr(c.value))
            cast = {"double": "DOUBLE", "bool": "BOOLEAN"}.get(c.cast or "")
            selected.append(f"{f'CAST({source} AS {cast})' if cast else source} AS {c.name}")
        return (f"SELECT {', '.join(selected)}, {segment} AS segment "
                f"FROM {q(self._name('input'))}")

    def _set(self, setting: str, value: object) -> None:
        if value is None:
            return
        self.restore[setting] = self.con.execute(
            "SELECT current_setting($name)", {"name": setting}).fetchone()[0]
        self.con.execute(f"SET {setting} = $value", {"value": value})

    def _visible(self, relation: str) -> bool:
        try:
            self.con.table(relation)
        except duckdb.CatalogException:
            return False
        return True

    def _name(self, relation: str) -> str:
        return self.prefix + relation

    def _sql(self, step: str, *, numbered: bool = False) -> str:
        names = {rel: self._name(self.aliases.get(rel, rel)) for rel in ("input", *RELATIONS)}
        sql = queries.load(step)
        if self.one_label or numbered:  # no window partitioned by a constant label
            sql = dialects.one_label_sql(sql, numbered=numbered)
        read = STEPS[step].reads[0]
        if numbered and read not in self.coded:
            names[read] = self._name("numbered")
        return queries.rename_relations(sql, names)

    def _runs_numbered(self, step: str, params: dict[str, object]) -> bool:
        """Whether ``step`` runs over numbered groups: it is of :data:`NUMBERED`, or reads a
        table kept numbered (:data:`CODED_READERS`), and pools no labels in this run."""
        if step not in CODED_READERS or _pools(step, params):
            return False
        return step in NUMBERED or STEPS[step].reads[0] in self.coded

    def _keeps_codes(self, step: str, steps: Sequence[str], params: dict[str, object]) -> bool:
        """Whether ``step``'s table is kept numbered: it runs numbered and every later step
        that reads its table does too (each then reads it as it is, with no join)."""
        gives = STEPS[step].gives
        later = [s for s in steps[steps.index(step) + 1:] if gives in STEPS[s].reads]
        return (self._runs_numbered(step, params) and bool(later)
                and all(STEPS[s].reads == (gives,) and s in CODED_READERS
                        and not _pools(s, params) for s in later))

    def _step_sql(self, step: str, params: dict[str, object], *, coded: bool = False) -> str:
        """``step``'s SQL: over numbered groups where it is of :data:`NUMBERED` (or reads a
        table kept numbered) and pools no labels in this run; ``coded``: its rows keep their
        groups' numbers."""
        if self._runs_numbered(step, params):
            return self._numbered(step, coded=coded)
        return self._sql(step)

    def _groups(self, step: str) -> str:
        """The table of the numbered groups ``step`` reads."""
        read = STEPS[step].reads[0]
        return self.coded.get(read) or f"groups {STEPS[step].gives or 'final'}"

    def _numbered(self, step: str, *, coded: bool = False) -> str:
        """``step`` (of :data:`NUMBERED`, or reading a table kept numbered) over the rows it
        reads with one integer per (segment, label) for segment and a constant label, its rows
        given their keys back (unless ``coded``): its windows sort and partition by that number
        alone (at 10M rows in 80 groups, ranking_metrics takes 2.8 s this way, 4.4 s by the
        keys' text; ranked_points 3.8 s, 4.5 s). The groups' table is one scan of two columns;
        the keys go back by a join of the result with it. A table kept numbered is read as it
        is, with its groups."""
        q = queries.identifier
        read = STEPS[step].reads[0]
        groups = q(self._name(self._groups(step)))
        if read not in self.coded:
            rows = q(self._name(self.aliases.get(read, read)))
            # numbered in the keys' order: a rerun numbers them alike
            self._create("TABLE", self._groups(step), "SELECT row_number() OVER (ORDER BY "
                         "segment, label) AS code, segment, label FROM (SELECT DISTINCT "
                         f"segment, label FROM {rows}) AS keys", replace=True)
            # in the narrowest type that holds them, as the windows sort by them (10M rows in
            # 80 groups: ranking_metrics 2.15 s by a BIGINT, 1.86 s an INTEGER, 1.74 s USMALLINT)
            (count,) = self.con.execute(f"SELECT count(*) FROM {groups}").fetchone()
            code = next(name for name, top in CODES if count <= top)
            self._create("VIEW", "numbered", f"SELECT r.* REPLACE (CAST(g.code AS {code}) AS "
                         f"segment, 0 AS label) FROM {rows} AS r JOIN {groups} AS g "
                         "ON r.segment IS NOT DISTINCT FROM g.segment "
                         "AND r.label IS NOT DISTINCT FROM g.label", replace=True)
        if coded:
            return self._sql(step, numbered=True)
        return ("SELECT r.* REPLACE (g.segment AS segment, g.label AS label) "
                f"FROM ({self._sql(step, numbered=True)}) AS r JOIN {groups} AS g "
                "ON r.segment = g.code")

    @staticmethod
    def _bind(sql: str, params: dict[str, object]) -> dict[str, object]:
        return {p: params[p] for p in queries.parameters(sql)}

    def _final(self, step: str, params: dict[str, object],
               keep: tuple[Sequence[str], Sequence[str]] | None, *,
               sort: bool = False) -> pl.DataFrame:
        """The rows of a final step; an averaged one's per-label rows (those of the metrics
        kept, and the kept averages it gives itself) become a table that label_averages reads.
        With ``sort`` (a reproducible run of a step on every thread) that table is sorted and
        averaged on one thread: the averages sum in its order."""
        if not STEPS[step].averaged:
            return self._fetch(step, params, keep)
        sql, bound = self._kept(step, params, keep, averaged_later=True)
        self._table(AVERAGING.reads[0], sql, bound, sort=sort)
        if not sort:
            return self._fetch(AVERAGING.name, params, keep)
        with self._one_thread():
            return self._fetch(AVERAGING.name, params, keep)

    def _table(self, relation: str, sql: str, params: dict[str, object], *,
               sort: bool) -> None:
        """``relation`` as a table of ``sql``'s rows; with ``sort``, in one order whatever the
        threads' (sorted, insertion order kept)."""
        if sort:
            sql = f"SELECT * FROM ({sql}) AS step_rows ORDER BY ALL"
            self.con.execute("SET preserve_insertion_order = true")
        try:
            self._create("TABLE", relation, sql, params=params, replace=True)
        finally:
            if sort and self.budget is not None:
                self.con.execute("SET preserve_insertion_order = false")

    def _kept(self, step: str, params: dict[str, object],
              keep: tuple[Sequence[str], Sequence[str]] | None, *,
              averaged_later: bool = False) -> tuple[str, dict[str, object]]:
        """The step's SQL and parameters, keeping only the rows asked for (``keep``); with
        ``averaged_later``, also every row without an average, whichever averages are asked
        (label_averages averages them)."""
        sql = self._step_sql(step, params)
        bound = self._bind(sql, params)
        if keep is not None:
            average = ("average IS NULL OR list_contains($mleval_averages, average)"
                       if averaged_later else
                       "list_contains($mleval_averages, coalesce(average, 'none'))")
            sql = (f"SELECT * FROM ({sql}) AS step_rows WHERE list_contains($mleval_metrics, "
                   f"metric) AND ({average})")
            bound.update(mleval_metrics=list(keep[0]), mleval_averages=list(keep[1]))
        return sql, bound

    def _fetch(self, step: str, params: dict[str, object],
               keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.DataFrame:
        sql, bound = self._kept(step, params, keep)
        return self.con.sql(sql, params=bound).pl()

    def _create(self, kind: str, relation: str, sql: str, *,
                params: dict[str, object] | None = None, replace: bool = False) -> None:
        name = queries.identifier(self._name(relation))
        verb = "CREATE OR REPLACE" if replace else "CREATE"
        self.con.execute(f"{verb} TEMP {kind} {name} AS {sql}", params or {})
        if (kind, self._name(relation)) not in self.created:
            self.created.append((kind, self._name(relation)))


#: memory_limit= on the user's connection: DuckDB reports the old limit rounded ("2.7 GiB"),
#: so it could not be put back exactly.
YOUR_BUDGET = ("memory_limit= applies to a connection of mleval's own; on your connection, "
               "SET memory_limit (and temp_directory) yourself")


@contextmanager
def session(connection: duckdb.DuckDBPyConnection | None, memory_limit: str | int | None,
            threads: int | None = None) -> Iterator[duckdb.DuckDBPyConnection]:
    """A connection to run on: ``connection`` as it is, or one of mleval's own whose memory
    ``memory_limit`` bounds (spilling to a private folder, removed with it), closed at the
    end (a room that is no engine, such as drift, runs its steps on it)."""
    if connection is not None:
        if memory_limit:
            raise InputError(YOUR_BUDGET)
        yield connection
        return
    con = duckdb.connect()
    spill = None
    try:
        con.execute("SET enable_progress_bar = false")
        if threads is not None:
            con.execute("SET threads = $value", {"value": threads})
        if memory_limit:
            spill = Path(tempfile.gettempdir()) / f"mleval-spill-{uuid.uuid4().hex}"
            spill.mkdir(mode=0o700)
            con.execute("SET memory_limit = $value", {"value": f"{memory_bytes(memory_limit)}B"})
            con.execute("SET temp_directory = $value", {"value": str(spill)})
            con.execute("SET preserve_insertion_order = false")
        yield con
    finally:
        con.close()
        if spill is not None:
            shutil.rmtree(spill, ignore_errors=True)


# -- readers: each source type as a DuckDB relation ------------------------------------------

@functools.singledispatch
def read(source: Source, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    """``source`` as a relation on ``con``, scanned lazily where the source is."""
    raise TypeError(f"DuckDB cannot read a {type(source).__name__}")


@read.register
def _(source: Parquet, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    # DuckDB globs every path it is given: wildcards in a local file's name are escaped
    local = not any("://" in f for f in source.files)
    files = [listing.glob_escape(f) for f in source.files] if local else source.files
    # can_have_nan: parquet's statistics leave NaN out of a float column's range, and DuckDB
    # would prune by them the row groups that a filter for NaN needs (the checks' examples)
    return con.sql("SELECT * FROM read_parquet($files, hive_partitioning = true, "
                   "union_by_name = $union, can_have_nan = true)",
                   params={"files": list(files), "union": len(source.files) > 1})


#: polars types -> DuckDB's, so that both engines read a CSV file's columns alike
_CSV_TYPES = {pl.Int64: "BIGINT", pl.Float64: "DOUBLE", pl.Boolean: "BOOLEAN",
              pl.String: "VARCHAR", pl.Date: "DATE", pl.Datetime: "TIMESTAMP", pl.Time: "TIME"}


@read.register
def _(source: Csv, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    types = {name: _CSV_TYPES.get(dtype.base_type(), "VARCHAR")
             for name, dtype in source.schema().items()}
    # DuckDB globs every path it is given: wildcards in a file's name are escaped
    return con.read_csv([listing.glob_escape(f) for f in source.files], header=True,
                        dtype=types)


@read.register
def _(source: InMemory, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    # An anonymous relation, scanned through Arrow (a LazyFrame is re-run on each scan):
    # registering a name would leave it on the user's connection and shadow their own table.
    return con.from_arrow(source.frame)


@read.register
def _(source: ArrowDataset, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    return con.from_arrow(source.dataset)


@read.register
def _(source: DuckDBRelation, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    relation = source.relation
    coded = {name for name, dtype in zip(relation.columns, relation.types, strict=True)
             if str(dtype).startswith("ENUM")}
    if not coded:
        return relation
    return relation.project(", ".join(
        f"CAST({queries.identifier(n)} AS VARCHAR) AS {queries.identifier(n)}" if n in coded
        else queries.identifier(n) for n in relation.columns))


@read.register
def _(source: Derived, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    if source.derive.sql is None:  # a derivation of polars' own: its rows, through Arrow
        return con.from_arrow(source.polars())
    # the derivation's query over the inner relation under a name of its own, still lazy
    name = f"mleval_{uuid.uuid4().hex[:8]}_underived"
    query = source.derive.sql(exp.to_table(name, quoted=True))
    return read(source.inner, con).query(name, query.sql("duckdb"))


@read.register
def _(source: Lake, con: duckdb.DuckDBPyConnection) -> duckdb.DuckDBPyRelation:
    try:
        return con.from_arrow(source.dataset())
    except OSError as error:
        raise store_error(source.name, error) from None
