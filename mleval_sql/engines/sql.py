"""Evaluate where the data is: the ``queries/`` steps rendered for the database's dialect and
run there, through the connection the user has (ADBC, preferred: Arrow results; a DB-API
connection such as psycopg's; or a SparkSession).

The input table becomes a temporary view of the canonical columns; each statistics step a
temporary table (Spark: a cached view), so every metric of a request reads the table once per
statistic; final steps come back as Arrow, then polars. Everything created is dropped at the end.

>>> import adbc_driver_postgresql.dbapi as pg  # doctest: +SKIP
>>> with pg.connect("postgresql://...") as con:  # doctest: +SKIP
...     me.evaluate("preds", ["roc_auc"], engine="sql", connection=con, by="model")
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
from sqlglot import exp

from mleval_sql import dialects
from mleval_sql.engines import Keep
from mleval_sql.registry import AVERAGING, RELATIONS, STEPS
from mleval_sql.schema import Columns, InputError


class Database:
    """One connection: its dialect, how it runs a statement, and how it gives rows back."""

    def __init__(self, connection: Any, dialect: str | None = None) -> None:
        if connection is None:
            raise InputError("engine='sql' needs connection= (an ADBC or DB-API connection, "
                             "or a SparkSession) and the table's name as the source")
        self.connection = connection
        module = type(connection).__module__.split(".")[0]
        self.spark = module == "pyspark"
        self.adbc = module.startswith("adbc_driver")
        self.dialect = dialect or self._dialect(module)
        self.checkpoints: dict[str, Any] = {}  # Spark: the checkpointed frames of TABLEs

    def _dialect(self, module: str) -> str:
        if self.spark:
            return "spark"
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
        if self.spark:
            self.connection.sql(sql)
            return
        cursor = self.connection.cursor()
        try:
            cursor.execute(sql)
        finally:
            cursor.close()

    def fetch(self, sql: str) -> pl.DataFrame:
        if self.spark:
            table = self.connection.sql(sql).toArrow()
        else:
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
        return _plain_numbers(pl.from_arrow(table))  # type: ignore[arg-type]

    def identifier(self, name: str) -> str:
        return exp.to_identifier(name, quoted=True).sql(self.dialect)

    def create(self, kind: str, name: str, sql: str) -> None:
        """A temporary view or table ``name`` (quoted) holding ``sql``."""
        quoted = self.identifier(name)
        if self.spark:
            self.connection.sql(f"DROP VIEW IF EXISTS {quoted}")
            if kind == "TABLE":  # computed now; later plans read it as a leaf, not its plan
                frame = self.connection.sql(sql).localCheckpoint(eager=True)
                frame.createOrReplaceTempView(name)
                self.checkpoints[name] = frame
            else:
                self.connection.sql(f"CREATE TEMPORARY VIEW {quoted} AS {sql}")
        else:
            self.execute(f"DROP {kind} IF EXISTS {quoted}")
            self.execute(f"CREATE TEMPORARY {kind} {quoted} AS {sql}")

    def drop(self, kind: str, name: str) -> None:
        quoted = self.identifier(name)
        if self.spark:
            frame = self.checkpoints.pop(name, None)
            if frame is not None:
                frame.unpersist()
            self.connection.sql(f"DROP VIEW IF EXISTS {quoted}")
        else:
            self.execute(f"DROP {kind} IF EXISTS {quoted}")

    def rollback(self) -> None:
        if not self.spark and hasattr(self.connection, "rollback"):
            with contextlib.suppress(Exception):
                self.connection.rollback()


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


def _plain_numbers(frame: pl.DataFrame) -> pl.DataFrame:
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
        # ADBC and Spark type an empty result; a DB-API cursor's rows are typed by their values
        sampled = 0 if self.database.adbc or self.database.spark else 1000
        query = exp.select("*").from_(self.table()).limit(sampled)
        return self.database.fetch(query.sql(self.database.dialect)).schema


def database_table(source: Any, connection: Any, dialect: str | None = None) -> DatabaseTable:
    """The source of ``engine='sql'``: a table name read through ``connection``."""
    if not isinstance(source, str):
        raise InputError("engine='sql' reads a table of the connection's database: give its "
                         f"name as the source, not a {type(source).__name__}")
    return DatabaseTable(Database(connection, dialect), source)


class SQLEngine:
    """Run the steps on the database behind ``source``, rendered for its dialect."""

    name = "sql"

    def __init__(self, source: DatabaseTable, columns: Columns, weight: str | None,
                 by: Sequence[str], *, memory_limit: str | int | None = None,
                 clustering: bool = False) -> None:
        self.db, self.source, self.by = source.database, source, list(by)
        self.dialect = self.db.dialect
        self.keys = dialects.segment_keys(self.by)
        self.prefix = f"mleval_{uuid.uuid4().hex[:8]}_"
        self.created: list[tuple[str, str]] = []
        self.types = source.schema()
        self.columns, self.weight = columns, weight
        self._create("VIEW", "predictions", self._canonical(truth="number"))

    def summary(self) -> pl.DataFrame:
        return self._unkey(self._fetch("validate_summary", {}, self.keys))

    def results(self, steps: Iterable[str], params: dict[str, object], *,
                numeric_truth: bool = False,
                keep: Keep | None = None) -> dict[str, pl.DataFrame]:
        """Run ``steps`` in the database; ``keep`` (the rows a request keeps) is left to the
        caller's tidying here: a database table holds few segments per request."""
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
            else:
                self._statistic(name, step.gives, params, reads)
                keys[step.gives] = dialects.grown_keys(name, reads)
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
        tree = dialects.step_tree(step, self.dialect, params, keys)
        names = {rel: self.prefix + rel for rel in RELATIONS}
        if self.db.spark:
            tree = self._ctes_apart(step, tree, names)
        return dialects.render(_renamed(tree, names), self.dialect, pretty=False, what=step)

    def _ctes_apart(self, step: str, tree: exp.Expression,
                    names: dict[str, str]) -> exp.Expression:
        """Spark plans every reference to a CTE (or a view) as a copy of its whole plan, so a
        chain of CTEs read several times each is planned as a tree exponential in its depth
        (minutes for ranking_metrics on 40 rows). Each CTE read more than once is therefore
        computed once into a checkpointed temporary view, which later plans read as a leaf;
        CTEs read once stay inline."""
        with_ = tree.args.get("with_")
        if not with_:
            return tree
        tree = tree.copy()
        ctes = list(tree.args["with_"].expressions)
        inline: list[exp.CTE] = []
        for i, cte in enumerate(ctes):
            later = [c.this for c in ctes[i + 1:]] + [tree]
            reads = sum(1 for t in later for table in t.find_all(exp.Table)
                        if table.name == cte.alias and not table.db)
            if reads <= 1:
                inline.append(cte)
                continue
            body = cte.this.copy()
            if inline:
                body.set("with_", exp.With(expressions=[c.copy() for c in inline]))
            self._create("TABLE", f"{step}__{cte.alias}", dialects.render(
                _renamed(body, names), self.dialect, pretty=False, what=step))
            names[cte.alias] = f"{self.prefix}{step}__{cte.alias}"
            cte.pop()
        if not inline:
            tree.set("with_", None)
        return tree

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
