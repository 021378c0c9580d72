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
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import TypeVar

import duckdb
import polars as pl

from mleval_sql import queries
from mleval_sql.engines import Keep, memory_bytes, segments
from mleval_sql.engines.segments import batches, together, with_progress
from mleval_sql.progress import stage
from mleval_sql.registry import STEPS
from mleval_sql.schema import Columns, InputError
from mleval_sql.sources import DuckDBRelation, Source

T = TypeVar("T")


class DuckDBEngine:
    """Evaluate with DuckDB.

    ``memory_limit`` (e.g. ``"1GB"``) bounds DuckDB's memory; what does not fit spills to
    ``temp_directory`` (default: a fresh temporary folder, removed afterwards), on a connection
    of its own, and the segments are evaluated in batches of about the budget's rows
    (engines/segments.py; a parquet lake partitioned by the segment columns is then read a few
    partitions at a time); a user's ``connection`` keeps the memory settings the user gave it.
    A progress bar shows on a terminal. ``clustering``: the input is a clustering table
    (sample, truth, cluster, weight), checked by cluster_summary.
    """

    name = "duckdb"

    def __init__(self, source: Source, columns: Columns, weight: str | None, by: Sequence[str],
                 *, connection: duckdb.DuckDBPyConnection | None = None,
                 memory_limit: str | int | None = None, temp_directory: str | None = None,
                 clustering: bool = False) -> None:
        self.budget = None if memory_limit is None else memory_bytes(memory_limit)
        self.owned = connection is None
        self.con = connection or duckdb.connect()
        self.prefix = f"mleval_{uuid.uuid4().hex[:8]}_"
        self.created: list[tuple[str, str]] = []
        self.restore: dict[str, object] = {}
        self.spill: Path | None = None
        try:
            self._open(source, columns, weight, by, memory_limit, temp_directory, clustering)
        except BaseException:  # an error or a signal half-way: nothing is left behind
            self.close()
            raise

    def _open(self, source: Source, columns: Columns, weight: str | None, by: Sequence[str],
              memory_limit: str | int | None, temp_directory: str | None,
              clustering: bool) -> None:
        if memory_limit and not self.owned:
            # DuckDB reports the old limit rounded ("2.7 GiB"): it could not be put back exactly
            raise InputError("memory_limit= applies to a connection of mleval's own; on your "
                             "connection, SET memory_limit (and temp_directory) yourself")
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
        relation = source.duckdb(self.con)
        if isinstance(source, DuckDBRelation):
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
        self.relation, self.by = relation, list(by)
        self.batches: list[pl.DataFrame] = []
        self.summary_step = "cluster_summary" if clustering else "validate_summary"
        self._create("VIEW", "predictions", _canonical(self._name("input"), columns, weight, by,
                                                       truth_as_bool=False,
                                                       clustering=clustering))
        self._canonical_bool = _canonical(self._name("input"), columns, weight, by,
                                          truth_as_bool=True)

    def summary(self) -> pl.DataFrame:
        """The validation summary (queries/validate_summary.sql; clustering:
        queries/cluster_summary.sql), a batch of segments at a time under a memory budget."""
        if self.budget is not None and self.by:
            columns = ", ".join(queries.identifier(c) for c in self.by)
            counts = self.con.sql(f"SELECT {columns}, count(*) AS n FROM "
                                  f"{queries.identifier(self._name('input'))} "
                                  f"GROUP BY {columns}").pl()
            self.batches = batches(counts, self.by, self.budget)
        if len(self.batches) < 2:  # no budget, one batch, or an empty input
            return self._fetch(self.summary_step, {})
        return pl.concat(self._each_batch(lambda: self._fetch(self.summary_step, {}), "checks"),
                         how="vertical_relaxed")

    def results(self, steps: Iterable[str], params: dict[str, object], *,
                numeric_truth: bool = False, keep: Keep | None = None) -> dict[str, pl.DataFrame]:
        """Run ``steps`` in order: statistics become tables, final steps return metric rows
        (per segment under a memory budget).

        ``truth`` is boolean unless ``numeric_truth`` (regression: the target; clustering: the
        reference class).
        """
        if not numeric_truth:
            self._create("VIEW", "predictions", self._canonical_bool, replace=True)
        steps = list(steps)
        if len(self.batches) < 2:
            return self._results(steps, params, keep or {})
        return together(self._each_batch(lambda: self._results(steps, params, keep or {}),
                                         "metrics"))

    def _each_batch(self, run: Callable[[], T], what: str) -> list[T]:
        """``run()`` with the input restricted to each batch of segments in turn."""
        parts = []
        for keys in with_progress(self.batches, what):
            self._batch(keys).create_view(self._name("input"), replace=True)
            parts.append(run())
        self.relation.create_view(self._name("input"), replace=True)
        return parts

    def _batch(self, keys: pl.DataFrame) -> duckdb.DuckDBPyRelation:
        """The input rows of a batch of segments (``keys``: their segment columns' values): a
        few by a filter with the values bound as constants (a parquet scan then skips the other
        hive partitions), many by a semi-join with a table of them."""
        if keys.height <= segments.FEW_SEGMENTS:
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

    def _results(self, steps: list[str], params: dict[str, object],
                 keep: Keep) -> dict[str, pl.DataFrame]:
        out: dict[str, pl.DataFrame] = {}
        with stage("statistics") as line:
            for name in steps:
                step = STEPS[name]
                line.describe(f"{'metrics' if step.gives is None else 'statistics'}: {name}")
                if step.gives is None:
                    out[name] = self._fetch(name, params, keep.get(name))
                else:
                    sql = self._sql(name)
                    self._create("TABLE", step.gives, sql, params=self._bind(sql, params),
                                 replace=True)
        return out

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

    def _sql(self, step: str) -> str:
        names = {rel: self._name(rel) for rel in ("predictions", "input", *_STAT_TABLES)}
        return queries.rename_relations(queries.load(step), names)

    @staticmethod
    def _bind(sql: str, params: dict[str, object]) -> dict[str, object]:
        return {p: params[p] for p in queries.parameters(sql)}

    def _fetch(self, step: str, params: dict[str, object],
               keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.DataFrame:
        sql = self._sql(step)
        bound = self._bind(sql, params)
        if keep is not None:
            sql = (f"SELECT * FROM ({sql}) AS step_rows WHERE list_contains($mleval_metrics, "
                   "metric) AND list_contains($mleval_averages, coalesce(average, 'none'))")
            bound.update(mleval_metrics=list(keep[0]), mleval_averages=list(keep[1]))
        return self.con.sql(sql, params=bound).pl()

    def _create(self, kind: str, relation: str, sql: str, *,
                params: dict[str, object] | None = None, replace: bool = False) -> None:
        name = queries.identifier(self._name(relation))
        verb = "CREATE OR REPLACE" if replace else "CREATE"
        self.con.execute(f"{verb} TEMP {kind} {name} AS {sql}", params or {})
        if (kind, self._name(relation)) not in self.created:
            self.created.append((kind, self._name(relation)))


_STAT_TABLES = tuple(sorted({s.gives for s in STEPS.values() if s.gives}))


def _canonical(input_name: str, columns: Columns, weight: str | None, by: Sequence[str],
               *, truth_as_bool: bool, clustering: bool = False) -> str:
    """SELECT of the canonical columns from the user's table, every identifier quoted
    (clustering: sample, truth, cluster, weight, segment)."""
    q = queries.identifier
    truth = f"CAST({q(columns.truth)} AS BOOLEAN)" if truth_as_bool else q(columns.truth)
    # one segment column is the key itself; several are packed in a struct (grouping by a
    # struct costs about three times as much, so it is kept for when it is needed)
    segment = (q(by[0]) if len(by) == 1 else
               "struct_pack(" + ", ".join(f"{q(c)} := {q(c)}" for c in by) + ")" if by else "0")
    if clustering:
        return (f"SELECT {q(columns.sample)} AS sample, {q(columns.truth)} AS truth, "
                f"{q(columns.cluster)} AS cluster, "
                f"CAST({q(weight) if weight else 1} AS DOUBLE) AS weight, "
                f"{segment} AS segment FROM {q(input_name)}")
    # no label column: every row is the one label of a binary task, named after the scores
    label = (queries.string(columns.single_label) if columns.label is None
             else q(columns.label))
    return (f"SELECT {q(columns.sample)} AS sample, {label} AS label, "
            f"CAST({q(columns.score)} AS DOUBLE) AS score, {truth} AS truth, "
            f"CAST({q(weight) if weight else 1} AS DOUBLE) AS weight, "
            f"{segment} AS segment FROM {q(input_name)}")
