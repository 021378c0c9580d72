"""Evaluate where the data is: the ``queries/`` steps rendered for the database's dialect and
run there, through the connection the user has (ADBC, preferred: Arrow results; a DB-API
connection such as psycopg's; or a connection of a kind in :data:`mleval_sql.engines.DATABASES`,
run by its own :class:`Database`, such as a SparkSession).

The input table becomes a temporary view of the canonical columns; each statistics step a
temporary table, so every metric of a request reads the table once per statistic; final steps
come back as Arrow, then polars. Everything created is dropped at the end.

>>> import adbc_driver_postgresql.dbapi as pg  # doctest: +SKIP
>>> with pg.connect("postgresql://...") as con:  # doctest: +SKIP
...     me.evaluate("preds", ["roc_auc"], engine="sql", connection=con, by="model")
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mleval_sql import dialects
from mleval_sql.engines import DATABASES, Keep, imported
from mleval_sql.engines.base import BaseEngine
from mleval_sql.errors import InputError
from mleval_sql.registry import AVERAGING, RELATIONS, STEPS
from mleval_sql.schema import Columns


class Database:
    """One connection (ADBC or DB-API): its dialect, how it runs a statement, and how it gives
    rows back."""

    def __init__(self, connection: Any, dialect: str | None = None) -> None:
        if connection is None:
            raise InputError("engine='sql' needs connection= (an ADBC or DB-API connection, "
                             "or a SparkSession) and the table's name as the source")
        self.connection = connection
        module = type(connection).__module__.split(".")[0]
        self.adbc = module.startswith("adbc_driver")
        self.dialect = dialect or self._dialect(module)

    def _dialect(self, module: str) -> str:
        if self.adbc:
            vendor = str(self.connection.adbc_get_info().get("vendor_name", "")).lower()
        else:
            vendor = module
        for known, dialect in (("postgres", "postgres"), ("psycopg", "postgres"),
                               ("duckdb", "duckdb"), ("trino", "trino"),
                               ("snowflake", "snowflake"), ("bigquery", "bigquery")):
            if known in vendor:
                return dialect
        raise InputError(f"cannot tell the SQL dialect of a {module} connection; pass "
                         "dialect= (e.g. 'postgres')")

    def execute(self, sql: str) -> None:
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql)
        finally:
            cursor.close()

    def fetch(self, sql: str) -> pl.DataFrame:
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql)
            if self.adbc:
                table = _numbers_as_text_parsed(cursor.fetch_arrow_table())
            else:
                names = [d[0] for d in cursor.description]
                table = pa.Table.from_pylist([dict(zip(names, r, strict=True))
                                              for r in cursor.fetchall()])
                if not table.num_columns:
                    table = pa.table({n: pa.array([], pa.null()) for n in names})
        finally:
            cursor.close()
        return plain_numbers(pl.from_arrow(table))  # type: ignore[arg-type]

    def schema(self, table: exp.Table) -> pl.Schema:
        """The columns of ``table``: ADBC types an empty result; a DB-API cursor's rows are
        typed by their values (the first 1000)."""
        sampled = 0 if self.adbc else 1000
        return self.fetch(exp.select("*").from_(table).limit(sampled).sql(self.dialect)).schema

    def identifier(self, name: str) -> str:
        return exp.to_identifier(name, quoted=True).sql(self.dialect)

    def create(self, kind: str, name: str, sql: str) -> None:
        """A temporary view or table ``name`` (quoted) holding ``sql``."""
        quoted = self.identifier(name)
        self.execute(f"DROP {kind} IF EXISTS {quoted}")
        self.execute(f"CREATE TEMPORARY {kind} {quoted} AS {sql}")

    def drop(self, kind: str, name: str) -> None:
        self.execute(f"DROP {kind} IF EXISTS {self.identifier(name)}")

    def rollback(self) -> None:
        if hasattr(self.connection, "rollback"):
            with contextlib.suppress(Exception):
                self.connection.rollback()

    def ctes_apart(self, tree: exp.Expression
                   ) -> tuple[list[tuple[str, exp.Expression]], exp.Expression]:
        """The CTEs of ``tree`` to compute first, in order, each as (name, query), and the rest
        of ``tree``; none here: the database plans a query's CTEs itself."""
        return [], tree


def connect(connection: Any, dialect: str | None = None) -> Database:
    """The :class:`Database` of ``connection``: its kind's in
    :data:`mleval_sql.engines.DATABASES`, else ADBC or DB-API."""
    kind = DATABASES.get(type(connection).__module__.split(".")[0])
    return (imported(kind) if kind else Database)(connection, dialect)  # type: ignore[no-any-return]


def _numbers_as_text_parsed(table: pa.Table) -> pa.Table:
    """ADBC gives PostgreSQL's ``numeric`` (sums of integers) as text in an opaque extension
    type: whole numbers as int64, others as float64."""
    for i, field in enumerate(table.schema):
        if isinstance(field.type, pa.BaseExtensionType) and pa.types.is_string(
                field.type.storage_type):
            text = pa.chunked_array([c.storage for c in table.column(i).chunks],
                                    field.type.storage_type)
            number = pc.cast(text, pa.float64())
            whole = pc.all(pc.equal(pc.floor(number), number)).as_py() is not False \
                and not pc.any(pc.match_substring(text, ".")).as_py()
            table = table.set_column(i, field.name,
                                     pc.cast(text, pa.int64()) if whole else number)
    return table


def plain_numbers(frame: pl.DataFrame) -> pl.DataFrame:
    """Decimals (PostgreSQL's sums of integers) as Int64 when whole, else Float64."""
    return frame.with_columns(
        pl.col(n).cast(pl.Int64 if getattr(t, "scale", 1) == 0 else pl.Float64)
        for n, t in frame.schema.items() if isinstance(t, pl.Decimal))


@dataclass(frozen=True)
class DatabaseTable:
    """A table (or view) reached through a connection: ``name`` is read as sqlglot reads a
    table name in the connection's dialect (``schema.table``; quote parts that need it)."""

    database: Database
    name: str

    def table(self) -> exp.Table:
        try:
            table = exp.to_table(self.name, dialect=self.database.dialect)
        except Exception as error:
            raise InputError(f"{self.name!r} is not a table name: {error}") from error
        for part in table.parts:
            part.set("quoted", True)
        return table

    def schema(self) -> pl.Schema:
        return self.database.schema(self.table())


def database_table(source: Any, connection: Any, dialect: str | None = None) -> DatabaseTable:
    """The source of ``engine='sql'``: a table name read through ``connection``."""
    if not isinstance(source, str):
        raise InputError("engine='sql' reads a table of the connection's database: give its "
                         f"name as the source, not a {type(source).__name__}")
    return DatabaseTable(connect(connection, dialect), source)


class SQLEngine(BaseEngine):
    """Run the steps on the database behind ``source``, rendered for its dialect; the database
    manages its memory (no batches of segments)."""

    name = "sql"

    def __init__(self, source: DatabaseTable, columns: Columns, weight: str | None,
                 by: Sequence[str], *, memory_limit: str | int | None = None,
                 clustering: bool = False) -> None:
        super().__init__(by, memory_limit)
        self.db, self.source = source.database, source
        self.dialect = self.db.dialect
        self.keys = dialects.segment_keys(self.by)
        self.prefix = f"mleval_{uuid.uuid4().hex[:8]}_"
        self.created: list[tuple[str, str]] = []
        self.aliases: dict[str, str] = {}  # a relation of this run read under another name
        self.runs = 0  # the runs of steps so far (a bootstrap: one per chunk of replicates)
        self.types = source.schema()
        self.columns, self.weight = columns, weight
        self.unit_weights = weight is None
        self.clustering = clustering
        self.summary_step = "cluster_summary" if clustering else "validate_summary"
        self._create("VIEW", "predictions", self._canonical(truth="number"))

    def _segment_counts(self) -> pl.DataFrame:
        raise NotImplementedError(f"engine {self.name!r} runs without a memory budget")

    @contextlib.contextmanager
    def _restricted(self, keys: pl.DataFrame | None, *, few: bool) -> Iterator[None]:
        """The whole table (the steps read the ``predictions`` view)."""
        if keys is not None:
            raise NotImplementedError(f"engine {self.name!r} runs without a memory budget")
        yield None

    def _summary(self, rows: None) -> pl.DataFrame:
        return self._unkey(self._fetch(self.summary_step, {}, self.keys))

    def _results(self, rows: None, steps: list[str], params: dict[str, object], *,
                 numeric_truth: bool, keep: Keep) -> dict[str, pl.DataFrame]:
        """Run ``steps`` in the database; ``keep`` (the rows a request keeps) is left to the
        caller's tidying here: a database table holds few segments per request."""
        self.runs += 1
        if not numeric_truth:
            self._create("VIEW", "predictions", self._canonical(truth="bool"))
        keys: dict[str, list[str]] = {"predictions": self.keys}
        out: dict[str, pl.DataFrame] = {}
        for name in steps:
            step = STEPS[name]
            reads = keys[step.reads[0]]
            if step.gives is None:
                if step.averaged:  # its per-label rows, then the grid of labels and averages
                    self._statistic(name, AVERAGING.reads[0], params, reads)
                out[name] = self._final(AVERAGING.name if step.averaged else name, params,
                                        reads)
            else:  # a step that gives a relation it reads (replicates) shadows it
                target = step.gives if step.gives not in step.reads else f"{step.gives}_{name}"
                self._statistic(name, target, params, reads)
                self.aliases[step.gives] = target
                keys[step.gives] = dialects.grown_keys(name, reads)
        self.aliases.clear()
        return out

    def _final(self, step: str, params: dict[str, object], keys: Sequence[str]) -> pl.DataFrame:
        """The rows of a final step."""
        return self._unkey(self._fetch(step, params, keys))

    def _statistic(self, step: str, gives: str, params: dict[str, object],
                   keys: Sequence[str]) -> None:
        """A statistics step's table ``gives``, made once for the request."""
        self._create("TABLE", gives, self._sql(step, params, keys))

    def close(self) -> None:
        try:
            for kind, name in reversed(self.created):
                self.db.drop(kind, name)
        except Exception:
            self.db.rollback()
            raise
        finally:
            self.created.clear()

    # -- plumbing ---------------------------------------------------------------------------

    def _sql(self, step: str, params: dict[str, object], keys: Sequence[str]) -> str:
        tree = dialects.step_tree(step, self.dialect, params, keys,
                                  one_label=self.columns.label is None)
        names = self._names()
        first, tree = self.db.ctes_apart(tree)
        for alias, body in first:
            self._create("TABLE", f"{step}__{alias}", dialects.render(
                _renamed(body, names), self.dialect, pretty=False, what=step))
            names[alias] = f"{self.prefix}{step}__{alias}"
        return dialects.render(_renamed(tree, names), self.dialect, pretty=False, what=step)

    def _names(self) -> dict[str, str]:
        """Every relation of the run by its name in the database (a shadowed one: its
        successor's)."""
        return {rel: self.prefix + self.aliases.get(rel, rel) for rel in RELATIONS}

    def _fetch(self, step: str, params: dict[str, object], keys: Sequence[str]) -> pl.DataFrame:
        try:
            return self.db.fetch(self._sql(step, params, keys))
        except InputError:
            raise
        except Exception:
            self.db.rollback()
            raise

    def _create(self, kind: str, relation: str, sql: str) -> None:
        try:
            self.db.create(kind, self.prefix + relation, sql)
        except Exception:
            self.db.rollback()
            raise
        if (kind, self.prefix + relation) not in self.created:
            self.created.append((kind, self.prefix + relation))

    def _canonical(self, *, truth: str) -> str:
        if self.clustering:
            return clustering_canonical(self.source.table(), self.columns, self.weight,
                                        self.by).sql(self.dialect)
        select = canonical(self.source.table(), self.columns, self.weight, self.by,
                           truth=truth, truth_type=self.types[self.columns.truth])
        return select.sql(self.dialect)

    def _unkey(self, frame: pl.DataFrame) -> pl.DataFrame:
        """The segment keys back as the engines' ``segment`` column (a struct of the segment
        columns for several; ``{segment, threshold}`` for a sweep's points)."""
        keys = [k for k in self.keys if k in frame.columns]
        if self.keys != [dialects.SEGMENT] and keys:
            frame = frame.with_columns(pl.struct(
                pl.col(k).alias(c) for k, c in zip(self.keys, self.by, strict=True)
            ).alias(dialects.SEGMENT)).drop(self.keys)
        extra = [c for c in frame.columns if c.startswith("segment_")]
        if extra:
            frame = frame.with_columns(pl.struct(
                pl.col(dialects.SEGMENT),
                *(pl.col(c).alias(c.removeprefix("segment_")) for c in extra),
            ).alias(dialects.SEGMENT)).drop(extra)
        if dialects.SEGMENT in frame.columns:  # first, as the steps give it
            frame = frame.select(dialects.SEGMENT, pl.exclude(dialects.SEGMENT))
        return frame


def _renamed(tree: exp.Expression, names: dict[str, str]) -> exp.Expression:
    """``tree`` reading the relations ``names`` maps under their new names, each aliased by
    its old name so that qualified columns (``label_bits.label``) still resolve."""
    def rename(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and not node.db and node.name in names:
            renamed = exp.to_table(names[node.name])
            renamed.set("alias", node.args.get("alias")
                        or exp.TableAlias(this=exp.to_identifier(node.name)))
            return renamed
        return node
    return tree.transform(rename)


def canonical(table: exp.Expression, columns: Columns, weight: str | None, by: Sequence[str],
              *, truth: str, truth_type: pl.DataType | None = None) -> exp.Select:
    """SELECT of the canonical columns from the user's table, every identifier quoted.

    ``truth``: "number" (the checks, regression: a double, 1.0 / 0.0 for a boolean) or "bool"
    (the classification steps). ``truth_type`` unknown (a statement to paste): a boolean or
    0/1 column both work, through ``CAST(truth AS INT)``.
    """
    def col(name: str) -> exp.Column:
        return exp.column(exp.to_identifier(name, quoted=True))

    given = col(columns.truth)
    boolean = truth_type == pl.Boolean
    if truth == "bool":
        flag = given if boolean else exp.EQ(
            this=exp.cast(given, "int" if truth_type is None else "double"),
            expression=exp.Literal.number(1))
        truth_value: exp.Expression = flag
    elif boolean:
        truth_value = exp.Case(ifs=[
            exp.If(this=given.copy(), true=exp.cast(exp.Literal.number(1), "double")),
            exp.If(this=exp.Not(this=given.copy()),
                   true=exp.cast(exp.Literal.number(0), "double"))])
    else:
        truth_value = exp.cast(given, "double")
    keys = dialects.segment_keys(by)
    segments = ([exp.alias_(exp.Literal.number(0), dialects.SEGMENT)] if not by else
                [exp.alias_(col(c), k) for c, k in zip(by, keys, strict=True)])
    return exp.select(
        exp.alias_(col(columns.sample), "sample"),
        # no label column: every row is the one label of a binary task, named after the scores
        exp.alias_(exp.Literal.string(columns.single_label) if columns.label is None
                   else col(columns.label), "label"),
        exp.alias_(exp.cast(col(columns.score), "double"), "score"),
        exp.alias_(truth_value, "truth"),
        exp.alias_(exp.cast(col(weight) if weight else exp.Literal.number(1), "double"),
                   "weight"),
        *segments,
    ).from_(table)


def clustering_canonical(table: exp.Expression, columns: Columns, weight: str | None,
                         by: Sequence[str]) -> exp.Select:
    """SELECT of a clustering table's canonical columns (``sample, truth, cluster, weight``
    and the segment keys) from the user's table, every identifier quoted: the class and the
    cluster keep their own types."""
    def col(name: str) -> exp.Column:
        return exp.column(exp.to_identifier(name, quoted=True))

    keys = dialects.segment_keys(by)
    segments = ([exp.alias_(exp.Literal.number(0), dialects.SEGMENT)] if not by else
                [exp.alias_(col(c), k) for c, k in zip(by, keys, strict=True)])
    return exp.select(
        exp.alias_(col(columns.sample), "sample"),
        exp.alias_(col(columns.truth), "truth"),
        exp.alias_(col(columns.cluster), "cluster"),
        exp.alias_(exp.cast(col(weight) if weight else exp.Literal.number(1), "double"),
                   "weight"),
        *segments,
    ).from_(table)
