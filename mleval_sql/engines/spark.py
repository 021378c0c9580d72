"""Evaluate on Spark: the ``queries/`` steps in Spark's SQL dialect (engines/sql.py, with the
rewrites of dialects.py), statistics persisted once per request, and the exact curve's running
sums computed across partitions.

What differs for Spark is here and only here:

- **Inputs**: a Spark DataFrame, a table or view of the session's catalog, or parquet paths,
  globs and hive lakes (read by Spark); other inputs (polars, Arrow, pandas, CSV) are copied in
  through Arrow. The session is ``connection=``, else the active one, else a local one.
- **Statistics** are persisted DataFrames (memory, spilling to disk), each computed by one job
  that reads the source once; final steps read them, never the source.
- **Settings**: ANSI mode off (the files' ``x / 0`` is NULL); unless the user set them, two
  shuffle partitions per core on a local master instead of Spark's 200 (sized for a cluster)
  and Arrow batches of 500,000 rows (not 10,000) for the exact curve's pass; and on a local
  master where the user chose no worker interpreter, the Python workers run this one (its
  polars and pyarrow). The session's own values are put back when the request ends.
- **The exact curve** (``ranked_points``): the SQL file sorts each (segment, label) in one
  window, which on Spark puts a whole group in one task. Here each group is numbered (the
  checks' table of groups, kept for the request; joined to the rows by broadcast), the rows
  are range-partitioned by (group number, score descending), so that a huge group spans many
  partitions and a block of tied scores none, and each partition, sorted by score alone,
  goes through one Arrow pass (polars, in the Python workers) that sums its tie blocks and
  takes their running sums per group. The shuffle, the sort and the pass carry numbers only:
  Spark's comparisons of the group's text cost more than the rest of the step, and converting
  it to Arrow and back about 2 s per 10M rows. Each partition's sums are then shifted by the
  group's weight in earlier partitions, as Spark MLlib's ``BinaryClassificationMetrics`` does:
  one small table of per-(partition, group) sums gives both those offsets and the group's
  totals, and brings back the group's text. The file's own ``gridded`` and ``scored`` steps
  (binning) and its final SELECT run as SQL around that, so the curve has one definition.
- **Hints**: the steps' joins of a small table (labels, groups, per-group totals) to a large
  one are broadcast; Spark cannot size a checkpoint and would shuffle the large side.
- **A SparkSession given to engine="sql"** runs through :class:`SparkDatabase`: statements by
  ``spark.sql``, temporary tables as checkpointed views, and each CTE read more than once
  computed first.
- **Errors** (:data:`ERRORS`): what Spark raises while evaluating (with either engine) reaches
  the caller as ``InputError``, its cause in one line (:func:`spark_cause`).

>>> me.evaluate(spark.read.parquet("lake"), ["roc_auc"], by="model",
...             engine="spark")  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import sys
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from sqlglot import exp

from mleval_sql import dialects
from mleval_sql.engines import EngineErrors
from mleval_sql.engines.sql import Database, DatabaseTable, SQLEngine, plain_numbers
from mleval_sql.errors import InputError
from mleval_sql.lakes import Lake
from mleval_sql.schema import Columns
from mleval_sql.sources import Parquet, as_source

#: The ranked_points CTEs computed by a distributed sort instead of one window per group:
#: everything from the first (inclusive) up to ``_BLOCKS`` (inclusive) is replaced by it.
_SCORED, _FIRST_WINDOWED, _BLOCKS = "scored", "ranked", "ranked"
_ANSI = "spark.sql.ansi.enabled"
_SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
_ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
_HIVE_FOLDER = re.compile(r"[^=/]+=[^/]*")
#: Relations small by nature that the steps join to a large one: the labels (to the source's
#: rows) and the per-group totals (to the curve's points). Spark cannot size a checkpoint, so
#: without a hint it shuffles every row of the large side to join them.
_BROADCAST = ("label_bits", "totals")


def spark_cause(error: BaseException) -> str:
    """A Spark error in one line: the JVM exception's own (e.g. ``java.lang.OutOfMemoryError:
    Java heap space``) or Spark's message, without the stack trace or the SQL it quotes."""
    java = getattr(error, "java_exception", None)
    text = str(java.toString()) if java is not None else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__


#: What Spark raises when it cannot run a plan (its analysis and runtime errors, the JVM's
#: through Py4J), said to an API caller as an ``InputError``.
ERRORS = EngineErrors(("pyspark.errors:PySparkException", "py4j.protocol:Py4JError"),
                      cause=spark_cause, input_error="Spark could not run the request")


def session(connection: Any = None) -> Any:
    """The SparkSession to run on: ``connection`` if given, else the active one, else a local
    one (``local[*]``)."""
    from pyspark.sql import SparkSession

    if connection is not None:
        if not isinstance(connection, SparkSession) and \
                type(connection).__module__.split(".")[0] != "pyspark":
            raise InputError(f"engine='spark' takes a SparkSession as connection=, not a "
                             f"{type(connection).__name__}")
        return connection
    return SparkSession.getActiveSession() or \
        SparkSession.builder.master("local[*]").appName("mleval").getOrCreate()


class SparkDatabase(Database):
    """A SparkSession as a database (engine="sql"): statements run by ``spark.sql``; a TABLE is
    a checkpointed temporary view."""

    def __init__(self, connection: Any, dialect: str | None = None) -> None:
        super().__init__(connection, dialect)
        self.checkpoints: dict[str, Any] = {}  # the checkpointed frames of TABLEs

    def _dialect(self, module: str) -> str:
        return "spark"

    def execute(self, sql: str) -> None:
        self.connection.sql(sql)

    def fetch(self, sql: str) -> pl.DataFrame:
        return plain_numbers(pl.from_arrow(self.connection.sql(sql).toArrow()))  # type: ignore[arg-type]

    def schema(self, table: exp.Table) -> pl.Schema:
        """The columns of ``table``, from an empty result (Spark types it)."""
        return self.fetch(exp.select("*").from_(table).limit(0).sql(self.dialect)).schema

    def create(self, kind: str, name: str, sql: str) -> None:
        quoted = self.identifier(name)
        self.execute(f"DROP VIEW IF EXISTS {quoted}")
        if kind == "TABLE":  # computed now; later plans read it as a leaf, not its plan
            frame = self.connection.sql(sql).localCheckpoint(eager=True)
            frame.createOrReplaceTempView(name)
            self.checkpoints[name] = frame
        else:
            self.execute(f"CREATE TEMPORARY VIEW {quoted} AS {sql}")

    def drop(self, kind: str, name: str) -> None:
        frame = self.checkpoints.pop(name, None)
        if frame is not None:
            frame.unpersist()
        self.execute(f"DROP VIEW IF EXISTS {self.identifier(name)}")

    def rollback(self) -> None:
        """Nothing: Spark has no transactions."""

    def ctes_apart(self, tree: exp.Expression
                   ) -> tuple[list[tuple[str, exp.Expression]], exp.Expression]:
        """Spark plans every reference to a CTE (or a view) as a copy of its whole plan, so a
        chain of CTEs read several times each is planned as a tree exponential in its depth
        (minutes for ranking_metrics on 40 rows). Each CTE read more than once is therefore
        computed first (a checkpointed temporary view, which later plans read as a leaf),
        with the CTEs read once before it inline; CTEs read once stay inline."""
        if not tree.args.get("with_"):
            return [], tree
        tree = tree.copy()
        ctes = list(tree.args["with_"].expressions)
        inline: list[exp.CTE] = []
        first: list[tuple[str, exp.Expression]] = []
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
            first.append((cte.alias, body))
            cte.pop()
        if not inline:
            tree.set("with_", None)
        return first, tree


@dataclass(frozen=True)
class SparkTable(DatabaseTable):
    """The input as a Spark DataFrame; the engine shows it to its SQL as the view ``name``."""

    frame: Any = None

    def schema(self) -> pl.Schema:
        return plain_numbers(pl.from_arrow(self.frame.limit(0).toArrow())).schema


def spark_source(source: Any, connection: Any = None) -> SparkTable:
    """``source`` (see the module docstring) as a DataFrame of the session to run on."""
    spark = session(connection)
    if isinstance(source, (list, tuple)) and len(source) == 1 and isinstance(source[0], str):
        source = source[0]  # the command line's one input
    if type(source).__name__ == "DataFrame" and type(source).__module__.startswith("pyspark"):
        frame = source
    elif isinstance(source, str) and _in_catalog(spark, source):
        frame = spark.table(source)
    elif isinstance(source, str) and "://" in source:  # a store Spark is configured for
        frame = spark.read.parquet(source)
    else:
        src = as_source(source)
        if isinstance(src, Parquet):
            reader = spark.read
            base = _hive_base(src.files)
            if base is not None:
                reader = reader.option("basePath", base)
            frame = reader.parquet(*src.files)
        elif isinstance(src, Lake):
            raise InputError("engine='spark' reads parquet files, folders and URLs, tables "
                             "of the session's catalog and Spark DataFrames; read Delta or "
                             "Iceberg tables with Spark (spark.read.format(...)) and pass "
                             "the DataFrame")
        else:  # data in memory (or CSV, read by polars): copied in through Arrow
            frame = spark.createDataFrame(src.polars().collect().to_arrow())
    name = f"mleval_{uuid.uuid4().hex[:8]}_input"
    return SparkTable(SparkDatabase(spark), name, frame)


def _in_catalog(spark: Any, name: str) -> bool:
    if os.path.exists(name) or any(c in name for c in "/\\*?["):
        return False
    try:
        return bool(spark.catalog.tableExists(name))
    except Exception:  # not a name Spark can parse
        return False


def _hive_base(files: Sequence[str]) -> str | None:
    """The folder above the files and any ``key=value`` folders they lie in: Spark's
    ``basePath``, from which it reads those folders as columns (as the other engines do)."""
    if not files or any("://" in f for f in files):
        return None
    base = Path(os.path.commonpath([os.path.dirname(os.path.abspath(f)) for f in files]))
    while _HIVE_FOLDER.fullmatch(base.name):
        base = base.parent
    return str(base)


class SparkEngine(SQLEngine):
    """Evaluate with Spark (see the module docstring); Spark manages its memory
    (spark.executor.memory, spark.driver.memory)."""

    name = "spark"

    def __init__(self, source: SparkTable, columns: Columns, weight: str | None,
                 by: Sequence[str], *, memory_limit: str | int | None = None,
                 clustering: bool = False) -> None:
        self.spark, self.input_view = source.database.connection, source.name
        self.created: list[tuple[str, str]] = []
        self.aliases: dict[str, str] = {}
        self.runs = 0
        self.persisted: list[Any] = []
        self.groups: dict[tuple[str, ...], Any] = {}  # _group_ids, by relation and group
        # the settings the engine runs under; the user's are put back by close()
        self.restore: dict[str, str | None] = {}
        # the files' arithmetic is DuckDB's: x / 0 is NULL (inside CASE and aggregates too),
        # as it is in Spark without ANSI mode
        self._set(_ANSI, "false")
        if self.spark.sparkContext.master.startswith("local") and \
                self.spark.conf.get(_SHUFFLE_PARTITIONS, None) is None:  # not the user's
            # Spark's default of 200 partitions per exchange is sized for a cluster: on one
            # machine each exchange would write and read 200 tiny partitions per task
            self._set(_SHUFFLE_PARTITIONS,
                      str(2 * self.spark.sparkContext.defaultParallelism))
        if self.spark.conf.get(_ARROW_BATCH, None) is None:  # not the user's
            # the exact curve's Arrow pass has a cost per batch: on one core, 2.5M sorted rows
            # of distinct scores took 0.84 s in Spark's batches of 10,000 rows, 0.66 s in
            # batches of 500,000
            self._set(_ARROW_BATCH, "500000")
        source.frame.createOrReplaceTempView(self.input_view)
        try:
            super().__init__(source, columns, weight, by, memory_limit=memory_limit,
                             clustering=clustering)
        except BaseException:
            self.close()
            raise

    def _step_frame(self, step: str, params: dict[str, object], keys: Sequence[str]) -> Any:
        if step == "ranked_points":
            return self._ranked_points(params, keys)
        if step == "ranking_metrics":  # off the curve sorted across partitions, not a window
            self._persist("ranked_points", "curve_points", self._ranked_points(params, keys))
            return self._frame("curve_metrics", self._tree("curve_metrics", params, keys))
        return self._frame(step, self._tree(step, params, keys))

    def _final(self, step: str, params: dict[str, object], keys: Sequence[str]) -> pl.DataFrame:
        return self._collect(step, self._step_frame(step, params, keys))

    def _statistic(self, step: str, gives: str, params: dict[str, object],
                   keys: Sequence[str]) -> None:
        """Persisted once for the request (a local checkpoint)."""
        self._persist(step, gives, self._step_frame(step, params, keys))

    def _summary(self, rows: None) -> pl.DataFrame:
        tree = self._tree(self.summary_step, {}, self.keys)
        return self._collect(self.summary_step, self._frame(self.summary_step, tree))

    def close(self) -> None:
        try:
            super().close()
        finally:
            for frame in self.persisted:  # the checkpoints' blocks, now rather than at GC
                frame._jdf.queryExecution().analyzed().rdd().unpersist(False)
            self.persisted.clear()
            self.groups.clear()
            self.spark.catalog.dropTempView(self.input_view)
            for key, value in self.restore.items():
                if value is None:
                    self.spark.conf.unset(key)
                else:
                    self.spark.conf.set(key, value)
            self.restore.clear()

    def _set(self, key: str, value: str) -> None:
        """Set ``key`` for this request, remembering the session's value for close()."""
        self.restore.setdefault(key, self.spark.conf.get(key, None))
        self.spark.conf.set(key, value)

    # -- the exact curve ----------------------------------------------------------------------

    def _ranked_points(self, params: dict[str, object], keys: Sequence[str]) -> Any:
        """ranked_points.sql with its per-group window replaced by a range-partitioned sort
        and per-partition offsets (module docstring)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        tree = self._tree("ranked_points", params, keys)
        ctes = [c.alias for c in tree.args["with_"].expressions]
        cut = ctes.index(_FIRST_WINDOWED)
        scored_sql = _with_ctes(tree, ctes[:cut], exp.select("*").from_(_SCORED))

        group = [*keys, "label"]
        groups = self._group_ids(group)
        scored = self._frame("ranked_points", scored_sql).select(*group, "score", "pos", "neg")
        # each row's group as its number (a broadcast join to the table of groups): the
        # shuffle, the sort and the Arrow pass carry one integer, not the group's text
        numbered = (scored.join(F.broadcast(groups), _same(scored, groups, group))
                    .select(groups["gid"], scored["score"], scored["pos"], scored["neg"]))
        # sorted across partitions by (group, score descending): a group may span several,
        # a block of tied scores never does (range bounds are values of the sort key)
        ordered = (numbered.repartitionByRange("gid", F.col("score").desc())
                   .sortWithinPartitions(F.col("score").desc()))
        within_schema = T.StructType([
            T.StructField("gid", T.LongType()),
            *(T.StructField(c, T.DoubleType()) for c in
              ("score", "pos", "neg", "tp_within", "fp_within"))])
        with self._python_workers():
            # a map keeps its input's partitions: the partition number is taken after it
            within = (ordered.mapInArrow(_block_sums(), within_schema)
                      .withColumn("part", F.spark_partition_id()))
            within = self._persist("ranked_points (sorted blocks)", None, within)
        # per (partition, group), one small table (at most P + G rows) from one pass: the
        # group's weight in the partitions before each one, and the group's totals
        parts = within.groupBy("part", "gid").agg(
            F.sum("pos").alias("part_pos"), F.sum("neg").alias("part_neg"),
            F.min(F.when(F.col("pos") > 0, F.col("score"))).alias("part_lowest_pos"),
            F.min(F.when(F.col("neg") > 0, F.col("score"))).alias("part_lowest_neg"),
            F.max("score").alias("part_top"))
        whole = Window.partitionBy("gid")
        earlier = whole.orderBy("part").rowsBetween(Window.unboundedPreceding, -1)
        # under other names: within and offsets share a lineage, and Spark cannot tell the two
        # sides' columns apart by name; the group's text comes back here
        offsets = parts.select(
            F.col("part").alias("offset_part"), F.col("gid").alias("offset_gid"),
            F.coalesce(F.sum("part_pos").over(earlier), F.lit(0.0)).alias("tp_before"),
            F.coalesce(F.sum("part_neg").over(earlier), F.lit(0.0)).alias("fp_before"),
            F.sum("part_pos").over(whole).alias("p"), F.sum("part_neg").over(whole).alias("n"),
            F.min("part_lowest_pos").over(whole).alias("lowest_pos"),
            F.min("part_lowest_neg").over(whole).alias("lowest_neg"),
            F.max("part_top").over(whole).alias("top"))
        offsets = (offsets.join(F.broadcast(groups), offsets["offset_gid"] == groups["gid"])
                   .drop(groups["gid"]))
        same = (within["part"] == offsets["offset_part"]) & \
            (within["gid"] == offsets["offset_gid"])
        # the columns of the file's one window, per block: each row ends its block (no next
        # score), the group's top score has no previous one, and the group's totals
        ends = (within.join(F.broadcast(offsets), same)
                .select(*(offsets[c] for c in group), within["score"],
                        (within["tp_within"] + offsets["tp_before"]).alias("tp"),
                        (within["fp_within"] + offsets["fp_before"]).alias("fp"),
                        within["pos"].alias("block_pos"), within["neg"].alias("block_neg"),
                        F.when(within["score"] != offsets["top"], within["score"])
                        .alias("previous_score"),
                        F.lit(None).cast("double").alias("next_score"),
                        "p", "n", "lowest_pos", "lowest_neg"))
        # read once, by the file's final SELECT: a view, computed in that step's job
        ends.createOrReplaceTempView(self.prefix + _BLOCKS)
        if ("VIEW", self.prefix + _BLOCKS) not in self.created:
            self.created.append(("VIEW", self.prefix + _BLOCKS))
        rest = _with_ctes(tree, ctes[ctes.index(_BLOCKS) + 1:], tree)
        rest = rest.transform(lambda n: exp.alias_(exp.to_table(self.prefix + _BLOCKS), _BLOCKS,
                                                   table=True)
                              if isinstance(n, exp.Table) and n.name == _BLOCKS
                              and not n.alias else n)
        return self._frame("ranked_points", rest)

    def _group_ids(self, group: Sequence[str]) -> Any:
        """Each (segment, label) of the input with a number (``gid``), kept for the request: the
        checks' table of them numbered (validate_summary's ``segment_labels``; no pass over the
        source), else the predictions' distinct groups."""
        from pyspark.sql import functions as F

        checked = f"{self.prefix}validate_summary_segment_labels"
        if ("VIEW", checked) in self.created and set(group) <= set(
                self.spark.table(checked).columns):
            source = checked
        else:  # the predictions this run reads (a bootstrap's: their replicates)
            source = self._names()["predictions"]
        # a bootstrap's replicated predictions are made anew for each chunk of replicates
        key = (source, *group, str(self.runs) if source != checked else "")
        if key not in self.groups:
            # aliased: columns of their own, apart from the rows they are joined back to
            numbered = (self.spark.table(source).select(*(F.col(c).alias(c) for c in group))
                        .distinct().withColumn("gid", F.monotonically_increasing_id()))
            self.groups[key] = self._persist("group ids", None, numbered)
        return self.groups[key]

    @contextlib.contextmanager
    def _python_workers(self) -> Iterator[None]:
        """On a local master whose user chose no worker interpreter, the Python functions made
        here run in this interpreter (its polars and pyarrow), not the ``python3`` of PATH."""
        context = self.spark.sparkContext
        chosen = os.environ.get("PYSPARK_PYTHON") or \
            context.getConf().get("spark.pyspark.python", None)
        given = context.pythonExec
        if context.master.startswith("local") and not chosen:
            context.pythonExec = sys.executable
        try:
            yield
        finally:
            context.pythonExec = given

    # -- plumbing ---------------------------------------------------------------------------

    def _tree(self, step: str, params: dict[str, object], keys: Sequence[str]) -> exp.Select:
        """The step for Spark (dialects.py), reading this run's relations."""
        tree = dialects.step_tree(step, self.dialect, params, keys,
                                  one_label=self.columns.label is None)
        for select in tree.find_all(exp.Select):
            small = [join.this.alias_or_name for join in select.args.get("joins") or []
                     if isinstance(join.this, (exp.Table, exp.Subquery))
                     and (join.this.name or join.this.alias) in _BROADCAST]
            if small:
                select.set("hint", exp.Hint(expressions=[exp.Anonymous(
                    this="BROADCAST", expressions=[exp.to_identifier(n) for n in small])]))
        names = self._names()
        return exp.replace_tables(tree, names)

    def _frame(self, step: str, tree: exp.Select) -> Any:
        """``tree`` as a DataFrame, each CTE read more than once computed once first (Spark
        inlines CTEs: ranking_metrics alone planned 77 exchanges), in order, as a checkpoint
        the rest reads."""
        tree = tree.copy()
        with_ = tree.args.get("with_")
        for cte in list(with_.expressions) if with_ else []:
            uses = [t for t in tree.find_all(exp.Table) if t.name == cte.alias
                    and not isinstance(t.parent, exp.CTE)]
            if len(uses) < 2:
                continue
            view = f"{self.prefix}{step}_{cte.alias}"
            body = cte.this.copy()
            body.set("with_", with_.copy() if with_.expressions else None)
            body = _drop_unused_ctes(body)
            self._persist(step, view, self.spark.sql(dialects.render(
                body, self.dialect, pretty=False, what=step)), view=True)
            cte.pop()
            for use in uses:
                use.replace(exp.alias_(exp.to_table(view), use.alias or cte.alias, table=True))
            if not with_.expressions:
                tree.set("with_", None)
        return self.spark.sql(dialects.render(tree, self.dialect, pretty=False, what=step))

    def _collect(self, step: str, frame: Any) -> pl.DataFrame:
        """A final step's rows, as polars."""
        # every field nullable: a null struct of non-null fields (an example of a problem
        # that did not occur, whose label is a constant) cannot be converted to Arrow otherwise
        frame = frame.to(_nullable(frame.schema))
        return self._unkey(plain_numbers(pl.from_arrow(frame.toArrow())))

    def _persist(self, step: str, gives: str | None, frame: Any, *, view: bool = False) -> Any:
        """``frame`` computed once and kept (memory, then disk), as the view ``gives``: a local
        checkpoint, so that later plans read it as a table of their own (no lineage to
        re-plan, and no self-join of one lineage, which Spark 4.0 can mis-bind)."""
        from pyspark import StorageLevel

        frame = frame.localCheckpoint(eager=True, storageLevel=StorageLevel.MEMORY_AND_DISK)
        self.persisted.append(frame)
        if gives is not None:
            name = gives if view else self.prefix + gives
            frame.createOrReplaceTempView(name)
            if ("VIEW", name) not in self.created:
                self.created.append(("VIEW", name))
        return frame


def _block_sums() -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each partition of the range-partitioned rows goes through, its rows sorted
    by score (descending) alone: one row per block of tied scores of a group (``gid``), with
    its weight (pos, neg) and the running sums of its group within the partition at its end
    (tp_within, fp_within). Spark sorts one number; the few groups a partition holds are told
    apart here.

    Rows arrive in Arrow batches; the rows of a batch's last score may go on in the next one, so
    they are held back, and each group's running sums are carried over. Built here (a closure,
    sent to the workers by value) so that workers need polars and pyarrow, not this package."""

    def block_sums(batches: Iterator[Any]) -> Iterator[Any]:
        import polars as pl

        held: pl.DataFrame | None = None
        carried: pl.DataFrame | None = None  # per group: the running sums so far

        def sums(rows: pl.DataFrame) -> Any:
            nonlocal carried
            if rows.select(pl.col("score").diff().eq(0).any()).item():  # tied scores
                rows = (rows.group_by("gid", "score", maintain_order=True)
                        .agg(pl.col("pos").sum(), pl.col("neg").sum()))
            out = rows.with_columns(tp_within=pl.col("pos").cum_sum().over("gid"),
                                    fp_within=pl.col("neg").cum_sum().over("gid"))
            if carried is not None:
                out = (out.join(carried, on="gid", how="left", maintain_order="left")
                       .with_columns(pl.col("tp_within") + pl.col("tp_carried").fill_null(0.0),
                                     pl.col("fp_within") + pl.col("fp_carried").fill_null(0.0))
                       .drop("tp_carried", "fp_carried"))
            last = out.group_by("gid").agg(tp_carried=pl.col("tp_within").last(),
                                           fp_carried=pl.col("fp_within").last())
            carried = last if carried is None else \
                pl.concat([carried, last]).unique("gid", keep="last", maintain_order=True)
            return out.to_arrow().to_batches()

        for batch in batches:
            rows = pl.from_arrow(batch)
            if held is not None:
                rows = pl.concat([held, rows])
            if rows.height == 0:
                continue
            # the rows of the last score: the sorted rows' tail
            n_held = rows.select(pl.col("score").eq(rows["score"][-1]).sum()).item()
            held = rows.tail(n_held)
            if rows.height > n_held:
                yield from sums(rows.head(rows.height - n_held))
        if held is not None and held.height:
            yield from sums(held)

    return block_sums


def _same(left: Any, right: Any, columns: Sequence[str]) -> Any:
    """``left`` and ``right`` agree on ``columns`` (nulls equal, as a segment may be null)."""
    return functools.reduce(lambda a, b: a & b,
                            (left[c].eqNullSafe(right[c]) for c in columns))


def _nullable(kind: Any) -> Any:
    """A Spark type with every field, at every depth, nullable."""
    from pyspark.sql import types as T

    if isinstance(kind, T.StructType):
        return T.StructType([T.StructField(f.name, _nullable(f.dataType), True)
                             for f in kind.fields])
    if isinstance(kind, T.ArrayType):
        return T.ArrayType(_nullable(kind.elementType), True)
    return kind


def _drop_unused_ctes(tree: exp.Select) -> exp.Select:
    """``tree`` without the CTEs nothing in it reads (latest first: one may read another)."""
    with_ = tree.args.get("with_")
    for cte in reversed(list(with_.expressions) if with_ else []):
        if not any(t.name == cte.alias for t in tree.find_all(exp.Table)
                   if not isinstance(t.parent, exp.CTE)):
            cte.pop()
    if with_ is not None and not with_.expressions:
        tree.set("with_", None)
    return tree


def _with_ctes(tree: exp.Expression, names: Sequence[str], body: exp.Expression) -> exp.Select:
    """``body`` (its own WITH dropped) under the CTEs of ``tree`` called ``names``."""
    out = body.copy()
    out.set("with_", None)
    for cte in tree.args["with_"].expressions:
        if cte.alias in names:
            out = out.with_(cte.alias, as_=cte.this.copy())
    return out
