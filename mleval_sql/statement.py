"""One statement a person can paste into a BI tool, psql or ``spark.sql``: the steps of the
metrics asked for, chained as CTEs over the user's own table and columns, parameters as
literals with their defaults filled in, giving the rows ``evaluate`` gives for the same request.

>>> print(sql("f1", task="binary", table="preds", dialect="postgres").splitlines()[0])
-- mleval_sql: f1 (binary) from preds; threshold 0.5, beta 1.0, zero_division NULL.
"""

from __future__ import annotations

import functools
import logging
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import polars as pl
import sqlglot
from sqlglot import exp

from mleval_sql import clustering, dialects, labels, queries, slicing, windows
from mleval_sql.engines.sql import canonical, clustering_canonical
from mleval_sql.params import PARAMS
from mleval_sql.registry import AVERAGING, FUSED, METRICS, STEPS, SWEEP, SWEPT, scoped
from mleval_sql.request import OPERATING_THRESHOLD, SWEEP_METRICS, Plan, Request
from mleval_sql.schema import Columns, InputError, Task, check_columns

LOG = logging.getLogger("mleval_sql")

#: Which summary column of queries/validate_summary.sql says what problem (--checks), with the
#: column holding an example sample where there is one.
PROBLEMS: tuple[tuple[str, str, str | None], ...] = (
    ("null sample ids", "null_sample", None),
    ("null labels", "null_label", None),
    ("null scores", "null_score", None),
    ("NaN or infinite scores", "nan_score", None),
    ("null truth values", "null_truth", None),
    ("null, negative or non-finite weights", "bad_weight", None),
    ("duplicate (sample, label) rows", "dup_rows", "example_dup"),
    ("samples whose weight differs between rows", "uneven_weight", "example_weight"),
)


@scoped
def sql(metrics: str | Sequence[str] | None = None, *, task: Task | None = None,
        dialect: str | None = None, table: str = "predictions", by: str | Sequence[str] = (),
        columns: Mapping[str, str | None] | None = None, average: str | Sequence[str] | None = None,
        view: str | None = None, checks: bool = False, curve: str | None = None,
        drift: bool = False, pretty: bool = True, **params: Any) -> str:
    """A self-contained statement computing ``metrics`` over ``table`` in ``dialect``.

    ``metrics``, ``task``, ``by``, ``columns``, ``average`` and the parameters (``threshold=``,
    ``thresholds=``, ``bins=``, ``beta=``, ``k=``, ``zero_division=``, ``max_fpr=``,
    ``min_recall=``, ``min_precision=``, ``n_bins=``, ``drop_intermediate=``) mean what they
    mean for ``evaluate``, and the rows come in the same order. ``dialect``: any of sqlglot's
    (default: the connection's, else duckdb).

    The table's columns: with ``connection=`` (the database holding ``table``: a DuckDB,
    ADBC or DB-API connection, or a SparkSession) or ``schema_from=`` (a parquet or CSV file
    with the same columns), the statement reads them as ``evaluate`` would: a weight column
    where the table has one named as ``columns`` says (default ``weight``), no label column
    where it has none (a binary task), the truth's own type; ``schema_from``'s rows, a sample
    of the table's, also give the task where none is named or settled by the metrics, found
    as ``evaluate`` finds it. Without either it cannot look:
    the task is the one named, else the one the metrics share, else binary where no label
    column is read (``columns={"label": None}``; a binary statement reads a label column only
    where ``columns`` names one); a weight column is read only where ``columns`` names one
    (``no_weight=True`` or ``columns={"weight": None}`` says none: otherwise the statement's
    header and a warning say that its rows weigh 1 each); ``truth`` may be boolean or 0/1.

    ``checks``: one row per problem found in the input instead (``segment columns, problem,
    count, example``). ``curve``: "roc", "pr", "sweep" or "reliability", the rows of
    ``me.curve``. ``view``: a ``CREATE OR REPLACE VIEW`` of that name. For a dialect whose
    planner copies each CTE into its readers (Spark, Databricks:
    :attr:`dialects.Dialect.inlines_ctes`) the statement is a script (:func:`script`;
    :func:`statements` splits it) unless ``single=True`` or ``view``. Clustering metrics read
    one row per sample (``columns``: sample, truth,
    cluster, weight); asked with ``contingency``, the pair matrix's 0 / 1 cells and the
    classes and clusters share the truth and cluster columns, as text unless the table's
    column is known to hold integers.

    ``over=``: the weakest slices instead (:func:`mleval_sql.slicing.statement`): SliceLine's
    search by one row-wise error (``metrics``, default ``error_rate``) with ``max_level``,
    ``min_support``, ``top`` and ``alpha`` as for ``me.slices``.

    ``drift``: the drift of ``compared`` columns against ``reference`` (a table's name, or
    ``{column: value}`` selecting the table's own reference rows) instead, the statistics of
    ``me.drift`` (``statistics``, ``bins``, ``edges``, ``epsilon``, ``threshold``) and its
    columns but the p-values (a special function's tail, which SQL has not: ``me.drift``
    gives them).
    """
    if params.get("over"):
        if params.get("window") is not None:
            raise InputError("window= and over=: the slices statement has no windows; "
                             "me.slices(..., window=) finds slices within each window")
        if checks or curve or view or average is not None:
            raise InputError("over= asks for the slices statement, which takes no checks, "
                             "curve, view or average")
        return _slices_statement(metrics, dialect=dialect or "duckdb", table=table,
                                 pretty=pretty, task=task, by=by, columns=columns, **params)
    if drift:
        if checks or curve or metrics is not None or average is not None:
            raise InputError("drift= asks for the drift statement, which takes no metrics, "
                             "checks, curve or average")
        return _drift_statement(dialect=dialect, table=table, view=view, pretty=pretty,
                                task=task, by=by, columns=columns, **params)
    if checks and curve:
        raise InputError("checks and curve: a statement gives the checks or a curve, not both")
    action = "check" if checks else "curve" if curve else "evaluate"
    request = Request.statement(action, metrics=metrics, task=task, by=by, columns=columns,
                                average=average, kind=curve, **params)
    known = _table_columns(request, table, dialect)
    dialect = _dialect(dialect, known)
    source = exp.to_table(table, dialect=dialect)
    for part in source.parts:
        part.set("quoted", True)
    if known is not None and clustering.is_clustering(
            known.schema, request.column_map, request.by, request.settled_task(),
            mapped=set(request.columns)):
        request = replace(request, task="clustering")
    if request.schema_from is not None and request.settled_task() is None:
        # a sample of the table's rows: its task is the table's, found as evaluate finds it
        from mleval_sql.api import check
        request = replace(request, task=check(request.schema_from, by=list(request.by),
                                              columns=dict(request.columns)))
    task = request.statement_task()
    if task == "clustering":
        if checks or curve:
            raise InputError("a clustering statement gives metrics only: the input checks and "
                             "curves are for the classification tasks")
        cols, weight, cell_types = _clustering_columns(request, known)
        truth_type = None
    else:
        cols, weight, truth_type = _read_columns(request, known, task)
    segments = list(request.by)
    if request.unlabelled == "skip":  # the rows whose truth is known
        source = exp.Subquery(this=labels.Known(cols.truth).sql(source),
                              alias=exp.TableAlias(this=exp.to_identifier("labelled")))
    if request.window is not None:  # the window's columns made from the table's rows first
        kind = "naive" if known is None else request.window.kind(known.schema)
        source = exp.Subquery(this=request.window.sql(source, kind, end=True),
                              alias=exp.TableAlias(this=exp.to_identifier("windowed")))
        segments = [*windows.COLUMNS, windows.END, *segments]
    # the granularities in the order given, as evaluate lays them out (not as text sorts)
    ranks = {} if request.window is None else {windows.GRANULARITY: request.window.every}
    builder = _Builder(dialect, segments, truth_type, ranks)
    if task == "clustering":
        body = builder.clustering(source, cols, weight, request.plan(task), cell_types)
        what = ", ".join(request.metric_names(task))
    elif checks:
        body, what = builder.checks(source, cols, weight, task), "input checks"
    elif curve:
        body, what = builder.curve(source, cols, weight, request, task), f"{curve} curve"
    else:
        assert task is not None
        plan = request.plan(task)
        body = builder.metrics(source, cols, weight, plan)
        what = ", ".join(request.metric_names(task))
    text, written = _rendered(body, dialect, request, view=view, pretty=pretty, what=what)
    shown = ", ".join(f"{k} {_shown(v)}" for k, v in builder.shown.items())
    header = (f"-- mleval_sql: {what} ({task or 'any task'}) from {table}"
              f"{'; ' + shown if shown else ''}.\n")
    header += f"-- {_weights_said(request, known, weight)}\n"
    if task == "binary" and known is None and "label" not in request.columns:
        header += f"-- {_label_said(cols)}\n"
    if request.window is not None:
        header += f"-- {_window_said(request.window, known, dialect)}\n"
    if request.unlabelled == "skip":
        header += (f"-- Rows whose {cols.truth} is null (not known yet) are left out; evaluate "
                   "also gives each row its segment's label_coverage.\n")
    return header + _script_said(written, dialect) + text


def _rendered(body: exp.Select, dialect: str, request: Request, *, view: str | None,
              pretty: bool, what: str) -> tuple[str, list[str]]:
    """``body`` as the text to paste: one statement, a script where ``dialect`` plans a CTE
    anew wherever it is read (:func:`script`), or a ``CREATE OR REPLACE VIEW view``; and the
    tables a script writes."""
    scripted = dialects.dialect_entry(dialect).inlines_ctes and not request.single and not view
    if scripted:
        return script(body, dialect, pretty=pretty, what=what)
    if dialects.dialect_entry(dialect).not_materialized:
        body = queries.projections_inline(body)
    tree: exp.Expression = body
    if view:  # replaced where it exists, so that a redeploy installs over it (a table of the
        # name is the database's error: nothing is dropped)
        name = exp.to_table(view, dialect=dialect)
        for part in name.parts:
            part.set("quoted", True)
        tree = exp.Create(this=name, kind="VIEW", replace=True, expression=body)
    return dialects.render(tree, dialect, pretty=pretty, what=what) + ";", []


def _script_said(written: Sequence[str], dialect: str) -> str:
    """The header's line on a script's tables (none for one statement)."""
    if not written:
        return ""
    return (f"-- A script of {len(written) * 2 + 1} statements, to run in order (spark.sql "
            "one at a time, a %sql cell, spark-sql -f); the last gives the rows. "
            f"{dialect} plans a CTE anew wherever it is read, so the relations read "
            f"more than once are written first as tables of the current database "
            f"({', '.join(written)}; each replaced if it exists: drop them afterwards, "
            "and where the catalog forgets tables when the session ends, delete their "
            "folders too). single=True (--single): one statement instead, which "
            f"{dialect} plans in minutes, or runs out of memory, beyond a metric or two.\n")


def _drift_statement(*, dialect: str | None, table: str, view: str | None, pretty: bool,
                     **given: Any) -> str:
    """The drift statement of :func:`sql` (``drift=True``)."""
    from mleval_sql.drift import compared_columns, rows_query, statistics_of

    request = Request.statement("drift", **given)
    known = _table_columns(request, table, dialect)
    dialect = _dialect(dialect, known)
    cols = request.column_map

    def quoted(name: str) -> exp.Table:
        found = exp.to_table(name, dialect=dialect)
        for part in found.parts:
            part.set("quoted", True)
        return found

    def weight(seen: _Known | None) -> str | None:
        if seen is None or "weight" in request.columns:
            return request.columns.get("weight")
        return cols.weight if cols.weight in seen.schema else None

    def labelled(seen: _Known | None) -> bool:
        return cols.label is not None and (seen is None or cols.label in seen.schema)

    by = list(request.by)
    source: exp.Expression = quoted(table)
    window_columns: list[str] = []
    if request.window is not None:  # the window's columns made from the table's rows first
        kind = "naive" if known is None else request.window.kind(known.schema)
        source = exp.Subquery(this=request.window.sql(source, kind, end=True),
                              alias=exp.TableAlias(this=exp.to_identifier("windowed")))
        window_columns = [*windows.COLUMNS, windows.END]
    reference = request.reference
    if reference == "previous":
        raise InputError("reference='previous': a statement compares with a table or the "
                         "table's own rows ({column: value}); me.drift and mleval drift "
                         "compare each window with the one before it")
    if isinstance(reference, windows.Period):  # the table's rows in the period, whole
        kind = "naive" if known is None else reference.kind(known.schema)

        def rows(inside: bool, alias: str) -> exp.Subquery:
            query = windows.PeriodRows(reference, kind, inside=inside).sql(quoted(table))
            return exp.Subquery(this=query, alias=exp.TableAlias(this=exp.to_identifier(alias)))

        if request.window is None:  # the rows outside it are compared with it
            source = rows(False, "outside")
        selected, segments, shared = {}, [*window_columns, *by], list(by)
        other, seen = rows(True, "in_period"), known
    elif isinstance(reference, Mapping):  # the table's own rows, window by window
        selected = dict(reference)
        segments = [*window_columns, *(c for c in selected if c not in by), *by]
        shared = [*window_columns, *(c for c in by if c not in selected)]
        other, seen = source, known
    elif isinstance(reference, str):
        selected, segments = {}, [*window_columns, *by]
        seen = _table_columns(request, reference, dialect) if known is not None else None
        shared = [c for c in by if seen is None or c in seen.schema]
        other = quoted(reference)
    else:
        raise InputError("reference: a statement compares with a table (its name) or the "
                         "table's own rows ({column: value})")
    compared = compared_columns(request, {"input": None if known is None else
                                                known.schema, "reference": None if seen is None
                                                else seen.schema})
    statistics = statistics_of(request, compared)
    ranks = {} if request.window is None else {windows.GRANULARITY: request.window.every}
    builder = _Builder(dialect, segments, None, ranks)
    rows = rows_query(request, compared, (source, other), by=segments, shared=shared,
                            selected=selected, labelled=(labelled(known), labelled(seen)),
                            weights=(weight(known), weight(seen)), keys=builder.keys)
    body = builder.drift(rows, compared, statistics, request)
    what = f"drift of {', '.join(c.name for c in compared)}"
    text, written = _rendered(body, dialect, request, view=view, pretty=pretty, what=what)
    against = (", ".join(f"{k} = {_shown(v)}" for k, v in selected.items()) if selected
               else reference.said() if isinstance(reference, windows.Period) else reference)
    header = (f"-- mleval_sql: {what} from {table} against {against}; "
              f"{', '.join(dict.fromkeys(s for c in compared for s in statistics[c.name]))}"
              f"{'' if request.params['bins'] is None else '; bins ' + str(request.params['bins'])}"
              f".\n-- The statistics of me.drift, without its p-values (me.drift gives them: "
              f"they are the tails of distributions SQL has no function for).\n")
    header += f"-- {_weights_said(request, known, weight(known))}\n"
    if request.window is not None:
        header += f"-- {_window_said(request.window, known, dialect)}\n"
    return header + _script_said(written, dialect) + text


def _dialect(dialect: str | None, known: _Known | None) -> str:
    """The dialect asked, else the database's the table's columns came from, else DuckDB's;
    an ``InputError`` for one sqlglot does not know."""
    if dialect is None:
        dialect = known.dialect if known is not None and known.dialect else "duckdb"
    try:
        sqlglot.Dialect.get_or_raise(dialect)
    except ValueError as error:
        raise InputError(str(error)) from error
    return dialect


@dataclass(frozen=True)
class _Known:
    """What a statement knows of its table: its columns, and the dialect of the database it
    was read from (None: a file's)."""

    schema: pl.Schema
    dialect: str | None


def _table_columns(request: Request, table: str, dialect: str | None) -> _Known | None:
    """The columns of ``table``: from the connection given, else from ``schema_from``, else
    unknown (None)."""
    if request.schema_from is not None:
        from mleval_sql.sources import as_source
        return _Known(as_source(request.schema_from).schema(), None)
    connection = request.connection
    if connection is None:
        return None
    duckdb = sys.modules.get("duckdb")
    if duckdb is not None and isinstance(connection, duckdb.DuckDBPyConnection):
        # its registered frames too, which a cursor (another connection) does not see
        name = exp.to_table(table, dialect="duckdb")
        for part in name.parts:
            part.set("quoted", True)
        try:
            frame = connection.sql(exp.select("*").from_(name).limit(0).sql("duckdb")).pl()
        except Exception as error:
            raise InputError(f"cannot read the columns of {table!r}: {error}") from error
        return _Known(frame.schema, "duckdb")
    from mleval_sql.engines.sql import database_table
    found = database_table(table, connection, dialect)
    try:
        return _Known(found.schema(), found.database.dialect)
    except InputError:
        raise
    except Exception as error:
        found.database.rollback()
        raise InputError(f"cannot read the columns of {table!r}: "
                         f"{' '.join(str(error).split())}") from error


def _read_columns(request: Request, known: _Known | None, task: Task | None
                  ) -> tuple[Columns, str | None, pl.DataType | None]:
    """The columns the statement reads, its weight column and the truth's type: evaluate's
    choices where the table's columns are known."""
    cols = Columns.from_mapping(request.columns)
    if known is None:
        if task == "binary" and "label" not in request.columns:
            cols = Columns.from_mapping({**request.columns, "label": None})
        return cols, request.columns.get("weight"), None
    cols = cols.for_schema(known.schema)
    weight = check_columns(known.schema, cols, request.by)
    return cols, weight, known.schema[cols.truth]


def _clustering_columns(request: Request, known: _Known | None
                        ) -> tuple[Columns, str | None, dict[str, pl.DataType | None]]:
    """The columns a clustering statement reads, its weight column, and the types of the
    truth and cluster columns (None: unknown): evaluate's choices where the table's columns
    are known."""
    cols = Columns.from_mapping(request.columns)
    if known is None:
        return cols, request.columns.get("weight"), {"truth": None, "cluster": None}
    weight = clustering.check_columns(known.schema, cols, request.by)
    return cols, weight, {"truth": known.schema[cols.truth],
                          "cluster": known.schema[cols.cluster]}


def _weights_said(request: Request, known: _Known | None, weight: str | None) -> str:
    """The header's line on weights; a statement that may leave out a weight column evaluate
    would read also warns."""
    if weight is not None:
        return f"Weights: column {weight}."
    if known is not None or "weight" in request.columns:
        return "Weights: none, every row weighs 1."
    line = ("Weights: none read, every row weighs 1; evaluate reads a column named weight "
            "where the table has one: columns={'weight': 'weight'} (--column weight=weight) "
            "to read it, no_weight=True (--no-weight) to say there is none.")
    LOG.warning("the statement reads no weight column (every row weighs 1), where evaluate "
                "reads one named weight if the table has it: --column weight=weight to read "
                "it, --no-weight to say there is none (or --schema-from FILE)")
    return line


def _label_said(cols: Columns) -> str:
    """The header's line of a binary statement that does not know the table's columns: it
    reads no label column, where evaluate reads one named label if the table has it; it also
    warns."""
    LOG.warning("the binary statement reads no label column (every row is of one label, "
                "named %r), where evaluate reads one named label if the table has it: "
                "--column label=label to read it (or --schema-from FILE)", cols.single_label)
    return (f"Labels: none read, every row is of one label named {cols.single_label!r}; "
            "evaluate reads a column named label where the table has one: columns={'label': "
            "'label'} (--column label=label) to read it.")


#: The prefix of the tables a script writes.
WRITTEN = "mleval_"
#: The most tables a relation read more than once may read, all its copies together, and
#: still be inlined in a script (one that reads the user's table is written whatever its size).
_INLINED_LEAVES = 8


def script(tree: exp.Select, dialect: str, *, pretty: bool = True,
           what: str = "") -> tuple[str, list[str]]:
    """``tree`` (a query with CTEs) as a script for a dialect whose planner copies a CTE, or a
    view, into each reader: a CTE read more than once is written first as a table of its own
    (``mleval_<name>``, replaced if it exists), which later statements read as a table, where
    it reads the user's table (a pass over the rows, not to be repeated) or its copies would
    read more than :data:`_INLINED_LEAVES` tables; then the query. A CTE that only projects a
    table's rows is repeated, the others inlined. Gives the script and the names of the tables
    it writes.

    Tables, not cached views: Spark analyses a view, cached or not, as the whole plan it was
    made of, so views that read views twice grow a plan of 2^depth leaves (a chain of 8 ran
    a local session's 1 GB heap out of memory), where a table is one leaf. Measured again on
    Spark 4 (pyspark 4.3, local[2], 2026-11-28): a chain of ``CACHE TABLE c_d AS SELECT ...
    FROM c_(d-1) a JOIN c_(d-1) b`` (or ``CREATE TEMPORARY VIEW`` + ``CACHE TABLE``) doubles
    its time per level from depth 5 (depth 8: 40 s a statement; 9 with
    spark.sql.maxPlanStringLength capped: 43 s; deeper runs the heap out of memory building
    the plan's text), and test_sql_oracle's multiclass script with its eight tables as cached
    temporary views took 235 s against 56 s as tables (36 s analysing the last statement).
    ``CACHE TABLE ... AS`` refuses a name that exists, and Spark has no ``DROP TEMPORARY
    VIEW``."""
    ctes, final = queries.hoisted_ctes(tree)
    bodies = dict(ctes)
    order = {name: i for i, (name, _) in enumerate(ctes)}
    written: list[str] = []
    leaves: dict[str, int] = {}  # the tables a CTE's plan reads, CTEs read once inlined
    scans: dict[str, bool] = {}  # whether its plan reads the user's table
    projections: set[str] = set()  # repeated in each reader, never written
    for i, (name, body) in enumerate(ctes):
        read = queries.cte_reads(body, order, before=i)
        inlined = [r for r in read if r in leaves and r not in written]
        leaves[name] = len(read) - len(inlined) + sum(leaves[r] for r in inlined)
        scans[name] = any(r not in leaves or scans[r] for r in read if r not in written)
        readers = sum(queries.cte_reads(other, order, before=j).count(name)
                      for j, other in enumerate([*bodies.values(), final]) if j > i)
        if queries.is_projection(body, order, before=i, projections=projections):
            projections.add(name)
        elif readers > 1 and (scans[name] or leaves[name] * readers > _INLINED_LEAVES):
            written.append(name)
    names = {name: WRITTEN + name for name in written}
    statements: list[exp.Expression] = []
    for name in written:
        table = exp.Table(this=exp.to_identifier(names[name]))
        statements.append(exp.Drop(tables=[table], kind="TABLE", exists=True))
        statements.append(exp.Create(this=table.copy(), kind="TABLE",
                                     expression=_with_needed(bodies[name], ctes, order[name],
                                                             written, names)))
    statements.append(_with_needed(final, ctes, len(ctes), written, names))
    text = "\n".join(dialects.render(s, dialect, pretty=pretty, what=what) + ";"
                     for s in statements)
    return text, [exp.to_identifier(names[n]).sql(dialect) for n in written]


def statements(text: str, dialect: str) -> list[str]:
    """The statements of a script (:func:`script`), each as text without its ``;``, for
    ``spark.sql`` one at a time: split at the semicolons outside quotes and comments."""
    from sqlglot.tokens import TokenType

    tokens = sqlglot.Dialect.get_or_raise(dialect).tokenize(text)
    ends = [t.end for t in tokens if t.token_type == TokenType.SEMICOLON]
    starts = [0, *(end + 1 for end in ends)]
    parts = [text[a:b] for a, b in zip(starts, [*ends, len(text)], strict=True)]
    return [p.strip() for p in parts if p.strip() and not _only_comments(p, dialect)]


def _only_comments(text: str, dialect: str) -> bool:
    return not sqlglot.Dialect.get_or_raise(dialect).tokenize(text)


def _with_needed(query: exp.Expression, ctes: list[tuple[str, exp.Expression]], before: int,
                 written: list[str], names: dict[str, str]) -> exp.Expression:
    """``query`` (the CTE at position ``before``, or the final query) reading the written
    tables under their names, with the other CTEs it reads (at any depth) as its WITH, in
    their order."""
    order = {name: i for i, (name, _) in enumerate(ctes)}
    needed: set[str] = set()
    todo = [(query, before)]
    while todo:
        tree, position = todo.pop()
        for name in queries.cte_reads(tree, order, before=position):
            if name in order and name not in written and name not in needed:
                needed.add(name)
                todo.append((ctes[order[name]][1], order[name]))
    visible = {name: names[name] for name in written if order[name] < before}
    out = _renamed_before(query.copy(), visible, order, before)
    for name, body in ctes:
        if name in needed:
            out = out.with_(exp.to_identifier(name),
                            as_=_renamed_before(body.copy(), visible, order, order[name]))
    return out


def _renamed_before(tree: exp.Expression, names: dict[str, str], order: Mapping[str, int],
                    before: int) -> exp.Expression:
    """``tree`` (at position ``before``) reading the relations ``names`` maps under their new
    names, those defined before it only."""
    return _rename(tree, {k: v for k, v in names.items() if order[k] < before})


def _slices_statement(metrics: str | Sequence[str] | None, *, dialect: str, table: str,
                      pretty: bool, **given: Any) -> str:
    """The slices statement of :func:`sql` (``over=``), by one row-wise error."""
    names = [metrics] if isinstance(metrics, str) else list(metrics or ["error_rate"])
    if len(names) != 1:
        raise InputError(f"the slices statement ranks slices by one row-wise error, not "
                         f"{len(names)} metrics: {', '.join(names)}")
    request = Request.statement("slices", **given)
    return slicing.statement(request, names[0], table=table, dialect=dialect, pretty=pretty)


def _window_said(window: windows.Window, known: _Known | None, dialect: str) -> str:
    """The header's line on the windows: how the time column is read (and, where the
    dialect truncates instants in its session's zone, that the session's zone must be UTC)."""
    kind = "naive" if known is None else window.kind(known.schema)
    read = {"date": "a date", "aware": f"an instant, in {window.time_zone}",
            "naive": f"wall-clock time in {window.time_zone}"}[kind]
    line = (f"Windows: {', '.join(window.every)} of {window.column} ({read}: "
            "window_start and window_end are wall-clock times there); rows with a null "
            f"{window.column} are in no window.")
    if known is None:
        line += (" A column with a time zone is converted only where the statement knows "
                 "the table's columns (--schema-from FILE, or a connection).")
    if kind == "aware" and dialect in SESSION_ZONED:
        line += (f" {dialect} truncates a timestamp in its session's time zone: run this "
                 "with the session's time zone UTC (spark.sql.session.timeZone).")
    return line


#: Dialects whose date_trunc of a timestamp reads the session's time zone: the statement's
#: conversion to the window's zone holds where that zone is UTC.
SESSION_ZONED = ("spark", "spark2", "databricks")


def _shown(value: object) -> str:
    return "NULL" if value is None else str(value)


class _Builder:
    """CTEs of the steps, renamed so that several families live in one statement."""

    def __init__(self, dialect: str, by: list[str], truth_type: pl.DataType | None,
                 ranks: Mapping[str, Sequence[str]] | None = None) -> None:
        self.dialect, self.by, self.truth_type = dialect, by, truth_type
        self.ranks = dict(ranks or {})  # segment columns ordered by their values' rank
        self.one_label = False  # no label column: every row has one label (_source)
        self.keys = dialects.segment_keys(by)
        self.ctes: dict[str, exp.Expression] = {}
        self.shown: dict[str, object] = {}

    # -- pieces -----------------------------------------------------------------------------

    def _source(self, table: exp.Table, cols: Columns, weight: str | None, by: list[str], *,
                truth: str) -> None:
        select = canonical(table, cols, weight, by, truth=truth, truth_type=self.truth_type)
        self.one_label = cols.label is None
        if truth == "number" and self.truth_type is None:  # a boolean's text: 'true', 'false'
            text = exp.cast(exp.column(exp.to_identifier(cols.truth, quoted=True)), "varchar")
            number = exp.Case(this=text, ifs=[
                exp.If(this=exp.Literal.string("true"), true=exp.Literal.number("1.0")),
                exp.If(this=exp.Literal.string("false"), true=exp.Literal.number("0.0"))],
                default=exp.cast(text.copy(), "double"))
            select.expressions[3].set("this", number)
        self.ctes["predictions"] = select

    def _chain(self, steps: Sequence[str], params: dict[str, object], final_name: str) -> \
            tuple[str, list[str]]:
        """CTEs for ``steps`` (statistics shared by name); the name of the last one and the
        segment keys of its rows."""
        relations: dict[str, tuple[str, list[str]]] = {"predictions": ("predictions",
                                                                       self.keys)}
        for name in steps:
            step = STEPS[name]
            reads = relations[step.reads[0]][1]
            renamed = {r: relations[r][0] for r in step.reads}
            if step.gives is None and step.averaged:  # per-label rows, then label_averages
                self._cte(name, f"{final_name}_per_label", renamed, reads, params)
                self._cte(AVERAGING.name, final_name,
                          {AVERAGING.reads[0]: f"{final_name}_per_label"}, reads, params)
            else:
                self._cte(name, final_name if step.gives is None else name, renamed, reads,
                          params)
            for p in step.params:
                if p in PARAMS and p != "thresholds":
                    self.shown.setdefault(p, params[p])
            if step.gives is not None:
                relations[step.gives] = (name, dialects.grown_keys(name, reads))
        return final_name, reads  # a final step keeps the keys of what it reads

    def _cte(self, step: str, cte: str, relations: dict[str, str], keys: list[str],
             params: dict[str, object]) -> None:
        """The CTE ``cte``: ``step`` reading ``relations`` (its names -> CTEs), segment keys
        ``keys``; made once (statistics are shared by name)."""
        if cte not in self.ctes:
            tree = dialects.bind(_parsed(_load(step)), params)  # bind copies the tree
            if self.one_label:
                tree = dialects.one_label_windows(tree)
            tree = dialects.expand_segment(tree, keys)
            tree = _rename(tree, relations)
            self.ctes[cte] = _own_ctes_prefixed(tree, cte)

    def _with(self, body: exp.Select) -> exp.Select:
        for name, tree in self.ctes.items():
            body = body.with_(exp.to_identifier(name), as_=tree, copy=False)
        return dialects.portable(body, self.dialect)  # which copies the whole once

    def _segments_out(self, table: str | None = None) -> list[exp.Expression]:
        if not self.by:
            return []
        return [exp.alias_(exp.column(k, table), exp.to_identifier(c, quoted=True))
                for k, c in zip(self.keys, self.by, strict=True)]

    def _order(self, select: exp.Select, *columns: str | exp.Expression,
               descending: Sequence[str] = (), keyed: bool = False) -> exp.Select:
        """``select`` ordered by the segments, then ``columns``; a segment of ``ranks`` by
        its value's rank there, read from the segment column (``keyed``: from its key, the
        input's column, where an expression may not read the output's name: PostgreSQL)."""
        keys: list[exp.Expression] = []
        for i, c in enumerate(self.by):
            key = exp.column(exp.to_identifier(c, quoted=True))
            if c in self.ranks:
                key = _rank(exp.column(self.keys[i]) if keyed else key, self.ranks[c])
            keys.append(key)
        keys += [exp.column(c) if isinstance(c, str) else c for c in columns]
        return select.order_by(*(exp.Ordered(this=k, desc=isinstance(k, exp.Column)
                                             and k.name in descending,
                                             nulls_first=True) for k in keys))

    # -- the three kinds of statement -------------------------------------------------------

    def metrics(self, table: exp.Table, cols: Columns, weight: str | None,
                plan: Plan) -> exp.Select:
        request, task = plan.request, plan.task
        params = {**request.engine_params(plan), "unit_weights": weight is None}
        # graded relevance (ndcg, dcg asked alone): the truth as the number it is
        self._source(table, cols, weight, self.by,
                     truth="number" if task == "regression" or request.graded else "bool")
        parts = []
        optional = self._optional(plan, params)
        # families whose labels are values first: a NULL label then takes their type (in
        # PostgreSQL a NULL that a CTE gives is text, which no UNION matches with a number)
        order = sorted(plan.keep, key=lambda f: _null_column(
            _rows_of(plan.final(plan.families[f])), "label"))
        for family_name in order:
            family, wanted = plan.families[family_name], plan.keep[family_name]
            cte, keys = self._chain(_chain_of(plan, family), params, f"{family_name}_rows")
            parts.append(self._family_rows(plan, family, wanted, cte, keys, params, optional))
        body = parts[0]
        for part in parts[1:]:
            body = exp.union(body, part, distinct=False)
        out = exp.select("*").from_(exp.Subquery(this=body, alias=exp.TableAlias(
            this=exp.to_identifier("metric_rows"))))
        averages = list(dict.fromkeys([*request.averages(task), "none"]))
        out = self._order(out, _rank(exp.column("metric"), request.metric_names(task)),
                          _rank(exp.func("coalesce", exp.column("average"),
                                         exp.Literal.string("none")), averages),
                          "label", *optional, descending=["threshold"])
        if plan.sweep:
            self.shown["thresholds"] = params["thresholds"]
        return self._with(out)

    def clustering(self, table: exp.Table, cols: Columns, weight: str | None, plan: Plan,
                   cell_types: Mapping[str, pl.DataType | None]) -> exp.Select:
        """The clustering metrics (and contingency cells) asked, from the contingency chain
        over the user's table, with the columns and order of ``evaluate``'s rows."""
        request = plan.request
        params = {**request.engine_params(plan), "unit_weights": weight is None}
        self.ctes["predictions"] = clustering_canonical(table, cols, weight, self.by)
        wanted_all = {m for keep in plan.keep.values() for m in keep}
        optional = [p for p in _METRIC_PARAMS if params[p] is not None
                    and any(p in METRICS[m].params for m in wanted_all)]
        # the pair matrix's cells (0 / 1) and the contingency's (the user's values) in one
        # column: a UNION matches them only as text, unless the column holds integers
        both = len(plan.keep) > 1
        as_text = {c: both and not (t is not None and t.is_integer())
                   for c, t in cell_types.items()}
        # the cells' columns only where a metric has cells, as evaluate's rows
        celled = wanted_all & {"pair_confusion_matrix", "contingency"}
        cell_columns = clustering.CELL_COLUMNS if celled else ()
        parts = []
        for family_name, wanted in plan.keep.items():
            family = plan.families[family_name]
            cte, keys = self._chain(_chain_of(plan, family), params, f"{family_name}_rows")
            cells = [exp.alias_(exp.cast(exp.column(c), "varchar") if as_text[c]
                                else exp.column(c), c) for c in cell_columns]
            extra = []
            for p in optional:
                having = [m for m in wanted if p in METRICS[m].params]
                typed = exp.cast(exp.null(), "varchar" if isinstance(params[p], str)
                                 else "double")
                extra.append(exp.alias_(exp.Case(ifs=[exp.If(
                    this=exp.In(this=exp.column("metric"),
                                expressions=[exp.Literal.string(m) for m in having]),
                    true=dialects.literal(params[p]))], default=typed) if having else typed, p))
            segments = [exp.alias_(exp.column(k), exp.to_identifier(c, quoted=True))
                        for k, c in zip(keys[:len(self.keys)], self.by, strict=True)] \
                if self.by else []
            parts.append(exp.select(
                *segments, "metric", "average", "label", *cells, *extra, "value",
            ).from_(cte).where(exp.In(this=exp.column("metric"), expressions=[
                exp.Literal.string(m) for m in wanted])))
        body = parts[0]
        for part in parts[1:]:
            body = exp.union(body, part, distinct=False)
        out = exp.select("*").from_(exp.Subquery(this=body, alias=exp.TableAlias(
            this=exp.to_identifier("metric_rows"))))
        out = self._order(out, _rank(exp.column("metric"), request.metric_names("clustering")),
                          *cell_columns)
        return self._with(out)

    def _optional(self, plan: Plan, params: dict[str, object]) -> list[str]:
        used = {p for f in plan.families.values() for p in _params_of(f, plan.task)}
        wanted = {m for keep in plan.keep.values() for m in keep}
        out = []
        if "confusion_matrix" in wanted:
            out.append("predicted")
        if "threshold" in used or "thresholds" in used:
            out.append("threshold")
        out += [p for p in _METRIC_PARAMS if params[p] is not None
                and any(p in METRICS[m].params for m in wanted)]
        if params["bins"] is not None and "bins" in used:
            out.append("bins")
        if any(None in averages for averages in plan.keep.get("operating", {}).values()):
            out.append(OPERATING_THRESHOLD)  # the points that per-label rows reach
        return out

    def _family_rows(self, plan: Plan, family: Any, wanted: dict[str, set[str | None]],
                     cte: str, keys: list[str], params: dict[str, object],
                     optional: list[str]) -> exp.Select:
        used = _params_of(family, plan.task)
        final = sqlglot.parse_one(_load(_rows_of(plan.final(family))), read="duckdb")
        has = {p.alias_or_name for p in final.selects}
        row = exp.column
        def typed_null(name: str) -> exp.Expression:
            return exp.cast(exp.null(), "bigint" if name in ("k", "n_bins", "bins")
                            else "double")
        values: dict[str, exp.Expression] = {
            "predicted": row("predicted") if "predicted" in has else exp.null(),
            "threshold": (row(keys[-1]) if family in SWEPT
                          else dialects.literal(params["threshold"])
                          if "threshold" in used else typed_null("threshold")),
            OPERATING_THRESHOLD: (row(OPERATING_THRESHOLD) if OPERATING_THRESHOLD in has
                                  else typed_null(OPERATING_THRESHOLD)),
            "bins": exp.cast(dialects.literal(params["bins"]) if "bins" in used
                             else exp.null(), "bigint"),
        }
        for p in _METRIC_PARAMS:
            having = [m for m in wanted if p in METRICS[m].params]
            values[p] = exp.Case(ifs=[exp.If(
                this=exp.In(this=row("metric"),
                            expressions=[exp.Literal.string(m) for m in having]),
                true=dialects.literal(params[p]))], default=typed_null(p)) if having \
                else typed_null(p)
        label = exp.null() if _null_column(_rows_of(plan.final(family)), "label") \
            else row("label")
        picks = []
        for metric, averages in wanted.items():
            # a set: sorted, so the statement's text is the same in every process
            for a in sorted(averages, key=lambda a: (a is not None, a or "")):
                same = exp.Is(this=row("average"), expression=exp.null()) if a is None else \
                    exp.EQ(this=row("average"), expression=exp.Literal.string(a))
                picks.append(exp.and_(exp.EQ(this=row("metric"),
                                             expression=exp.Literal.string(metric)), same))
        segment_keys = keys[:len(self.keys)]
        segments = [exp.alias_(exp.column(k), exp.to_identifier(c, quoted=True))
                    for k, c in zip(segment_keys, self.by, strict=True)] if self.by else []
        return exp.select(
            *segments, "metric", "average", exp.alias_(label, "label"),
            *(exp.alias_(values[c], c) for c in optional), "value",
        ).from_(cte).where(exp.or_(*picks))

    def checks(self, table: exp.Table, cols: Columns, weight: str | None,
               task: Task) -> exp.Select:
        self._source(table, cols, weight, self.by, truth="number")
        self._chain(["validate_summary"], {}, "summary")
        text = exp.DataType.build("varchar")
        problems = list(PROBLEMS)
        truth = ("nan_truth", "NaN or infinite truth values") if task == "regression" else \
            ("bad_truth", "truth values outside {0, 1}")
        problems.insert(5, (truth[1], truth[0], None))
        selects = []
        for what, count, example in problems:
            selects.append(self._problem(what, exp.column(count), example,
                                         exp.GT(this=exp.column(count),
                                                expression=exp.Literal.number(0)), text))
        short = exp.LT(this=exp.column("min_rows"), expression=exp.column("n_labels"))
        selects.append(self._problem("samples lacking rows for some labels of their segment",
                                     exp.null(), "example_short", short, text))
        if task == "binary":
            selects.append(self._problem("samples with several rows (binary needs one)",
                                         exp.null(), None, exp.GT(
                                             this=exp.column("max_rows"),
                                             expression=exp.Literal.number(1)), text))
        if task == "multiclass":
            odd = exp.or_(exp.NEQ(this=exp.column("min_true"), expression=exp.Literal.number(1)),
                          exp.NEQ(this=exp.column("max_true"), expression=exp.Literal.number(1)))
            selects.append(self._problem("samples without exactly one true label", exp.null(),
                                         "example_not_one_true", odd, text))
        body = selects[0]
        for s in selects[1:]:
            body = exp.union(body, s, distinct=False)
        empty = exp.select(*(exp.alias_(exp.null(), exp.to_identifier(c, quoted=True))
                             for c in self.by),
                           exp.alias_(exp.Literal.string("the input has no rows"), "problem"),
                           exp.alias_(exp.cast(exp.null(), "bigint"), "count"),
                           exp.alias_(exp.cast(exp.null(), text), "example")).where(
            exp.Not(this=exp.Exists(this=exp.select("1").from_("predictions"))))
        body = exp.union(body, empty, distinct=False)
        out = exp.select("*").from_(exp.Subquery(this=body, alias=exp.TableAlias(
            this=exp.to_identifier("problems"))))
        return self._with(self._order(out, "problem"))

    def _problem(self, what: str, count: exp.Expression, example: str | None,
                 condition: exp.Expression, text: exp.DataType) -> exp.Select:
        return exp.select(
            *self._segments_out(),
            exp.alias_(exp.Literal.string(what), "problem"),
            exp.alias_(exp.cast(count, "bigint"), "count"),
            exp.alias_(exp.cast(exp.column(example) if example else exp.null(), text),
                       "example"),
        ).from_("summary").where(condition)

    def curve(self, table: exp.Table, cols: Columns, weight: str | None, request: Request,
              task: Task | None) -> exp.Select:
        if request.kind == "thresholds":
            raise InputError("curve thresholds: no statement is written for it yet; "
                             "me.curve(kind='thresholds') and mleval curve --kind thresholds "
                             "give it")
        plan = request.plan(task or "multilabel")  # every classification task's curve steps
        params = {**request.engine_params(plan), "unit_weights": weight is None}
        self._source(table, cols, weight, self.by, truth="bool")
        if plan.sweep:
            cte, keys = self._chain(SWEEP.steps(plan.task), params, "sweep_rows")
            self.shown["thresholds"] = params["thresholds"]
            return self._with(self._sweep(cte, keys))
        cte, keys = self._chain(plan.curve, params, "curve_rows")
        final = sqlglot.parse_one(_load(plan.curve[-1]), read="duckdb")
        rest = [p.alias_or_name for p in final.selects if p.alias_or_name != "segment"]
        out = exp.select(*self._segments_out(), *rest).from_(cte)
        order = [c for c in ("label", "threshold", "bin") if c in rest]
        # thresholds descending, but a DET curve's ascending, as scikit-learn's det_curve
        falling = [] if request.kind == "det" else ["threshold"]
        return self._with(self._order(out, *order, descending=falling, keyed=True))

    def drift(self, rows: exp.Expression, compared: Sequence[Any],
              statistics: Mapping[str, Sequence[str]], request: Request) -> exp.Select:
        """The drift steps over ``rows`` (drift_rows, the segment spread over the keys), and
        one row per segment, compared column, label and statistic, as ``me.drift`` lays them
        out (its p-values aside)."""
        from mleval_sql.drift import STATISTICS

        keys = self.keys
        params: dict[str, object] = {"bins": request.params["bins"] or 10,
                                     "epsilon": request.epsilon}
        self.ctes["drift_rows"] = rows
        self._cte("drift_sizes", "drift_sizes", {"drift_rows": "drift_rows"}, keys, params)
        bins = []
        if any(c.numeric for c in compared):
            self._cte("drift_points", "drift_points", {"drift_rows": "drift_rows"}, keys, params)
            self._cte("drift_histogram", "drift_histogram", {
                "drift_points": "drift_points", "drift_sizes": "drift_sizes"}, keys, params)
            bins.append("drift_histogram")
        if not all(c.numeric for c in compared):
            self._cte("drift_categories", "drift_categories", {"drift_rows": "drift_rows"},
                      keys, params)
            bins.append("drift_categories")
        union: exp.Query = exp.select("*").from_(bins[0])
        for name in bins[1:]:
            union = exp.union(union, exp.select("*").from_(name), distinct=False)
        self.ctes["drift_bins"] = union
        self._cte("drift_ecdf", "drift_ecdf", {"drift_bins": "drift_bins"}, keys, params)
        self._cte("drift_binned", "drift_binned", {"drift_bins": "drift_bins",
                                                   "drift_sizes": "drift_sizes"}, keys, params)
        group = [*keys, "compared", "label"]

        def side(column: str, current: bool) -> exp.Expression:
            flag = exp.column("current") if current else exp.not_(exp.column("current"))
            return exp.Sum(this=exp.Case(ifs=[exp.If(this=flag, true=exp.column(column))]))

        sizes = [*keys, "compared", "label"]
        for name, current in (("reference", False), ("current", True)):
            sizes += [
                exp.alias_(exp.cast(exp.func("coalesce", side("rows", current),
                                             exp.Literal.number(0)), "bigint"), f"{name}_rows"),
                exp.alias_(exp.func("coalesce", side("weight", current),
                                    exp.cast(exp.Literal.number(0), "double")),
                           f"{name}_weight"),
                exp.alias_(exp.Div(this=side("null_weight", current), expression=exp.func(
                    "nullif", exp.Add(this=side("weight", current),
                                      expression=side("null_weight", current)),
                    exp.Literal.number(0))), f"{name}_null_share")]
        self.ctes["drift_groups"] = exp.select(*sizes).from_("drift_sizes").group_by(*group)

        def joined(alias: str) -> exp.Expression:
            return exp.and_(*(exp.NullSafeEQ(this=exp.column(k, "g"),
                                             expression=exp.column(k, alias)) for k in group))

        parts = []
        names = [c.name for c in compared]
        order = list(request.statistics or STATISTICS)
        for statistic in order:
            which = [c for c in names if statistic in statistics[c]]
            if not which:
                continue
            table = "e" if statistic in ("ks", "wasserstein") else "b"
            select = exp.select(
                *self._segments_out("g"), exp.column("compared", "g"), exp.column("label", "g"),
                exp.alias_(exp.Literal.string(statistic), "statistic"),
                exp.alias_(exp.column(statistic, table), "value"),
                *(exp.column(f"{side}_{what}", "g") for what in ("rows", "weight")
                  for side in ("reference", "current")),
                *(exp.column(f"{side}_null_share", "g") for side in ("reference", "current")),
                exp.alias_(exp.cast(exp.Null() if table == "e" else exp.column("bins", "b"),
                                    "bigint"), "bins"),
                exp.alias_(dialects.literal(request.epsilon) if statistic == "psi"
                           else exp.cast(exp.Null(), "double"), "epsilon"),
            ).from_("drift_groups AS g")
            select = select.join(f"{'drift_ecdf' if table == 'e' else 'drift_binned'} AS {table}",
                                 on=joined(table), join_type="left")
            parts.append(select.where(exp.column("compared", "g").isin(
                *(exp.Literal.string(c) for c in which))))
        body: exp.Query = parts[0]
        for part in parts[1:]:
            body = exp.union(body, part, distinct=False)
        out = exp.select("*").from_(exp.Subquery(this=body, alias=exp.TableAlias(
            this=exp.to_identifier("drift_rows_out"))))
        out = self._order(out, _rank(exp.column("compared"), names), "label",
                          _rank(exp.column("statistic"), order))
        return self._with(out)

    def _sweep(self, cte: str, keys: list[str]) -> exp.Select:
        def metric(name: str) -> exp.Expression:
            return exp.Max(this=exp.Case(ifs=[exp.If(
                this=exp.EQ(this=exp.column("metric"), expression=exp.Literal.string(name)),
                true=exp.column("value"))]))
        wide = exp.select(
            *(exp.column(k) for k in keys), "label",
            *(exp.alias_(metric(m), m) for m in SWEEP_METRICS),
        ).from_(cte).where(exp.and_(
            exp.Is(this=exp.column("average"), expression=exp.null()),
            exp.In(this=exp.column("metric"),
                   expressions=[exp.Literal.string(m) for m in SWEEP_METRICS]),
        )).group_by(
            *(exp.column(k) for k in keys), "label")
        fp, tn = exp.column("fp"), exp.column("tn")
        total = exp.paren(exp.Add(this=fp.copy(), expression=tn.copy()))
        out = exp.select(
            *self._segments_out(), "label", exp.alias_(exp.column(keys[-1]), "threshold"),
            "tp", "fp", "fn", "tn", exp.alias_(exp.column("recall"), "tpr"),
            exp.alias_(exp.Case(ifs=[exp.If(this=exp.NEQ(this=total, expression=exp.Literal
                                                         .number(0)),
                                            true=exp.Div(this=fp.copy(),
                                                         expression=total.copy()))]), "fpr"),
            "precision", "recall",
        ).from_(exp.Subquery(this=wide, alias=exp.TableAlias(this=exp.to_identifier("wide"))))
        return self._order(out, "label", exp.column("threshold"), descending=["threshold"],
                           keyed=True)


def _own_ctes_prefixed(tree: exp.Expression, prefix: str) -> exp.Expression:
    """The step's own CTEs named ``<prefix>__<name>``: Spark refuses one name twice in a
    statement, even in different nested WITH clauses."""
    own = tree.args.get("with_")
    if not own:
        return tree
    names = {c.alias: f"{prefix}__{c.alias}" for c in own.expressions}
    tree = _rename(tree, names)
    for c in tree.args["with_"].expressions:
        c.set("alias", exp.TableAlias(this=exp.to_identifier(names[c.alias])))
    return tree


#: The parameters shown on the rows of the metrics that name them (the others: threshold and
#: bins, on every row of the families that read them).
_METRIC_PARAMS = tuple(name for name, p in PARAMS.items() if p.column == "metric")


def _params_of(family: Any, task: Task) -> set[str]:
    return {p for s in family.steps(task) for p in STEPS[s].params}


def _chain_of(plan: Plan, family: Any) -> tuple[str, ...]:
    """The steps that give ``family``'s rows in ``plan``: its own, or those that read them off
    another family's statistics (``registry.FUSED``)."""
    if plan.final(family) == family.final:
        return family.steps(plan.task)
    return (*family.stats[plan.task], *FUSED[family.final])


def _rows_of(final: str) -> str:
    """The step whose rows are a final step's result: label_averages for an averaged one."""
    return AVERAGING.name if STEPS[final].averaged else final


def _null_column(step: str, name: str) -> bool:
    """Whether every row ``step`` gives has a NULL literal as column ``name``."""
    def branches(node: exp.Expression) -> list[exp.Select]:
        if isinstance(node, exp.Union):
            return branches(node.this) + branches(node.expression)
        return branches(node.this) if isinstance(node, exp.Subquery) else [node]
    selects = branches(sqlglot.parse_one(_load(step), read="duckdb"))
    names = [p.alias_or_name for p in selects[0].expressions]
    if name not in names:
        return False
    at = names.index(name)
    return all(isinstance(s.expressions[at].unalias(), exp.Null) for s in selects)


def _load(step: str) -> str:
    from mleval_sql import queries
    return queries.load(step)


@functools.lru_cache(maxsize=256)
def _parsed(text: str) -> exp.Expression:
    """A step's query parsed, once per text (a statement reads a step per CTE, and the dbt
    package writes hundreds of statements): never changed in place, callers copy it."""
    return sqlglot.parse_one(text, read="duckdb")


def _rename(tree: exp.Expression, names: dict[str, str]) -> exp.Expression:
    """References to the relations in ``names`` pointed at their CTEs, keeping the old name
    as the alias so that qualified columns still resolve."""
    def put(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Table) and not node.args.get("db") and node.name in names \
                and names[node.name] != node.name:
            renamed = node.copy()  # keeps what hangs on the table (an UNPIVOT)
            renamed.set("this", exp.to_identifier(names[node.name]))
            if not node.alias:
                renamed.set("alias", exp.TableAlias(this=exp.to_identifier(node.name)))
            return renamed
        return node
    return tree.transform(put)


def _rank(value: exp.Expression, order: Sequence[str]) -> exp.Expression:
    """The position of ``value`` in ``order`` (later: after them), to order rows as asked."""
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=value.copy(),
                                            expression=exp.Literal.string(v)),
                                true=exp.Literal.number(i)) for i, v in enumerate(order)],
                    default=exp.Literal.number(len(order)))
