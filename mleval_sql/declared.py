"""Metrics you declare: one SQL expression over the decision counts at the threshold (or at
each threshold of a sweep) and the parameters, or over the regression sums, a registry entry
like a built-in one (DESIGN.md, section 3).

:func:`define` parses the expression once with sqlglot, checks every node of the tree against
the names and functions allowed here, and keeps the tree. The engines never see the user's
text: the polars step (``engines/polars/decisions.py``) compiles the tree to a polars
expression (:func:`to_polars`) and the SQL step (``queries/declared_metrics.sql``) gets it as a
sqlglot expression (:func:`to_sql`) that sqlglot renders into the statement (:func:`statement`).
A division by zero gives null (the ``reason`` names the denominator), as the built-ins do.

>>> with defining("cost", "(5 * fn + fp) / n * 1000", tasks=["binary"]):
...     METRICS["cost"].undefined
'a zero denominator (n = 0)'
>>> "cost" in METRICS
False
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from functools import reduce
from pathlib import Path
from typing import Any

import polars as pl
import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from mleval_sql.errors import InputError
from mleval_sql.files import toml
from mleval_sql.params import RESULT_COLUMNS
from mleval_sql.registry import DECLARED as FAMILY
from mleval_sql.registry import DECLARED_ARGMAX as ARGMAX_FAMILY
from mleval_sql.registry import DECLARED_METRICS as DECLARED
from mleval_sql.registry import DECLARED_REGRESSION as REGRESSION_FAMILY
from mleval_sql.registry import (
    LOWER_IS_BETTER,
    METRICS,
    SHARED_FILE,
    SHARED_METRICS,
    Metric,
    kept,
)
from mleval_sql.sources import beside

__all__ = ["Declared", "declare", "define", "defined", "defining", "kept", "load", "shared",
           "undefine"]

#: The statistics an expression reads, per (segment, label) and pooled for micro: weights
#: summed at the threshold, and the parameters of the request.
STATISTICS = {
    "tp": "true positives", "fp": "false positives", "fn": "false negatives",
    "tn": "true negatives", "support": "tp + fn", "n": "tp + fp + fn + tn",
}
PARAMETERS = ("threshold", "beta")
#: The regression sums per (segment, output), each weighted (error = prediction - truth), read
#: off regression_sums (queries/regression_sums.sql); ``n`` is the weight there too.
REGRESSION_STATISTICS = {
    "n": "the sum of weights", "error": "sum of weight * (prediction - truth)",
    "absolute_error": "sum of weight * |prediction - truth|",
    "squared_error": "sum of weight * (prediction - truth)^2",
    "percentage_error": "sum of weight * |prediction - truth| / max(|truth|, eps)",
    "truth": "sum of weight * truth", "truth_squared": "sum of weight * truth^2",
    "squared_deviation": "sum of weight * (truth - mean truth)^2 (R²'s total sum of squares)",
}
NAMES = tuple(dict.fromkeys((*STATISTICS, *PARAMETERS, *REGRESSION_STATISTICS)))
#: The tasks whose decision counts are taken at a threshold; multiclass decides by argmax (the
#: counts of each class one-vs-rest), so an expression that reads ``threshold`` skips it.
THRESHOLD_TASKS = ("binary", "multilabel")
DECISION_TASKS = (*THRESHOLD_TASKS, "multiclass")
TASKS = (*DECISION_TASKS, "regression")
#: The names each kind of task reads alone: a metric reads one kind's (``n`` is both's).
_ONLY = {"decisions": frozenset(NAMES) - frozenset(REGRESSION_STATISTICS),
         "regression": frozenset(REGRESSION_STATISTICS) - frozenset(STATISTICS)}
#: The functions allowed, by the name a user writes.
FUNCTIONS = {"ln": exp.Ln, "exp": exp.Exp, "sqrt": exp.Sqrt, "pow": exp.Pow, "power": exp.Pow,
             "least": exp.Least, "greatest": exp.Greatest, "abs": exp.Abs,
             "coalesce": exp.Coalesce, "nullif": exp.Nullif, "if": exp.If}
MAX_LENGTH, MAX_DEPTH = 4000, 64
#: Result columns a declared name may not take (beyond every built-in metric's name).
_TAKEN = frozenset({*RESULT_COLUMNS, "segment", "support", "ci_low", "ci_high", "ci_method",
                    "ci_resamples", "reason", "granularity", "window_start", "window_end",
                    "label_coverage", "truth", "cluster", "replicate"})
_ARITHMETIC = (exp.Add, exp.Sub, exp.Mul, exp.Div, exp.Pow)
_COMPARISONS = (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)
_NUMERIC_FUNCTIONS = (exp.Ln, exp.Exp, exp.Sqrt, exp.Abs, exp.Least, exp.Greatest,
                      exp.Coalesce, exp.Nullif)
#: Every node an expression may hold besides names and numbers.
_ALLOWED = (*_ARITHMETIC, *_COMPARISONS, *_NUMERIC_FUNCTIONS, exp.Neg, exp.Paren, exp.And,
            exp.Or, exp.Not, exp.Is, exp.Case, exp.If, exp.Boolean, exp.Null)


@dataclass(frozen=True)
class Declared:
    """A declared metric: its name, the expression as written and as a checked sqlglot tree."""

    name: str
    text: str
    tree: exp.Expression
    tasks: tuple[str, ...]
    higher_is_better: bool
    doc: str
    origin: str = ""  # the file it was read from ("": code, define=, --define, a job's [define])

    @property
    def names(self) -> frozenset[str]:
        """The statistics and parameters the expression reads."""
        return frozenset(c.name.lower() for c in self.tree.find_all(exp.Column))

    @property
    def regression(self) -> bool:
        """Whether it reads the regression sums (else the decision counts)."""
        return "regression" in self.tasks


def over(step: str) -> list[Declared]:
    """The declared metrics a step computes: ``declared_regression`` those over the regression
    sums, ``declared_argmax`` those that serve multiclass (its statistics have no threshold),
    ``declared_metrics`` and ``declared_sweep`` those over the decision counts."""
    if step == ARGMAX_FAMILY.final:
        return [m for m in DECLARED.values() if "multiclass" in m.tasks]
    return [m for m in DECLARED.values() if m.regression == (step == REGRESSION_FAMILY.final)]




def define(name: str, expression: str, *, tasks: Sequence[str] | None = None,
           higher_is_better: bool = True, doc: str = "") -> Declared:
    """Declare the metric ``name`` as ``expression`` over ``tp, fp, fn, tn, support, n`` (weights
    at the threshold) and the parameters ``threshold`` and ``beta``, or over the regression sums
    (:data:`REGRESSION_STATISTICS`), for the process: then ``me.evaluate(rows, [name])`` gives it
    with segments, windows and averages (micro: the expression over the labels' summed
    statistics). ``tasks``: by default those its names serve (binary, multilabel and
    multiclass, whose counts are each class's one-vs-rest from the argmax, or regression;
    ``threshold`` leaves multiclass out). Declaring a declared name again replaces it. Raises
    ``InputError`` naming the metric and the culprit, before any data is read.

    >>> m = define("net_benefit", "tp / n - fp / n * threshold / (1 - threshold)")
    >>> sorted(m.names)
    ['fp', 'n', 'threshold', 'tp']
    >>> undefine("net_benefit")
    """
    return _register(_declared(name, expression, tasks=tasks,
                               higher_is_better=higher_is_better, doc=doc))


def _declared(name: str, expression: str, *, tasks: Sequence[str] | None = None,
              higher_is_better: bool = True, doc: str = "") -> Declared:
    """The checked declaration, not yet in the registry (:func:`define` without its effect)."""
    if not isinstance(name, str) or not re.fullmatch(r"[a-z_][a-z0-9_]*", name):
        raise InputError(f"declared metric {name!r}: a name is lower-case letters, digits and _, "
                         "starting with a letter or _")
    if (name in METRICS and name not in DECLARED) or name in _TAKEN or name in NAMES:
        what = "a built-in metric" if name in METRICS else "a result column or statistic"
        raise InputError(f"declared metric {name!r}: the name is taken by {what}; choose "
                         "another")
    tree = parse(name, expression)
    names = {c.name.lower() for c in tree.find_all(exp.Column)}
    read = {kind: sorted(names & only) for kind, only in _ONLY.items()}
    if read["decisions"] and read["regression"]:
        raise InputError(f"declared metric {name!r}: reads a decision count or parameter "
                         f"({read['decisions'][0]}) and a regression sum "
                         f"({read['regression'][0]}); one expression reads one task's "
                         "statistics")
    served = (("regression",) if read["regression"]
              else THRESHOLD_TASKS if "threshold" in names else DECISION_TASKS)
    if tasks is None:
        tasks = served
    if isinstance(tasks, str):
        tasks = [tasks]
    wrong = [t for t in tasks if t not in served]
    if wrong or not tasks:
        task = wrong[0] if wrong else None
        if task in TASKS and read["regression"]:
            why = f"a regression sum ({read['regression'][0]}) in a {task} metric"
        elif task == "regression" and read["decisions"]:
            why = f"a decision count ({read['decisions'][0]}) in a regression metric"
        elif task == "multiclass" and "threshold" in names:
            why = "threshold in a multiclass metric (multiclass decides by argmax)"
        else:
            why = (f"a declared metric reads decision counts, for {list(DECISION_TASKS)}, "
                   "or regression sums, for ['regression']")
        raise InputError(f"declared metric {name!r}: task {task!r} is not served: {why}")
    return Declared(name, expression, tree, tuple(dict.fromkeys(tasks)), bool(higher_is_better),
                    doc)


def _register(metric: Declared) -> Declared:
    """Put ``metric`` in the registry (in place of a declaration of its name)."""
    name, expression, tree, doc = metric.name, metric.text, metric.tree, metric.doc
    DECLARED[name] = metric
    METRICS[name] = Metric(
        name, doc or f"declared: {expression}",
        {task: REGRESSION_FAMILY if metric.regression else ARGMAX_FAMILY
         if task == "multiclass" else FAMILY for task in metric.tasks},
        params=tuple(p for p in ("beta",) if p in metric.names),
        undefined=_undefined(tree))
    (LOWER_IS_BETTER.discard if metric.higher_is_better else LOWER_IS_BETTER.add)(name)
    return metric


def undefine(name: str) -> None:
    """Remove the declared metric ``name`` (an ``InputError`` where none is declared so)."""
    if name not in DECLARED:
        raise InputError(f"no declared metric {name!r}; declared: {sorted(DECLARED)}")
    del DECLARED[name], METRICS[name]
    LOWER_IS_BETTER.discard(name)


@contextmanager
def defining(name: str, expression: str, **options: object) -> Iterator[Declared]:
    """:func:`define` for a ``with`` block, undefined after it (tests, a one-off report)."""
    metric = define(name, expression, **options)  # type: ignore[arg-type]
    try:
        yield metric
    finally:
        if DECLARED.get(name) is metric:
            undefine(name)


def defined() -> dict[str, Declared]:
    """The declared metrics, by name, in the order declared."""
    return dict(DECLARED)


# -- where declarations are read ------------------------------------------------------------

#: The keys of a declared metric's table, with the types they take: a team's metrics.toml
#: (``[metrics.NAME]``), a job's ``[define.NAME]``, ``define={NAME: {...}}``, and the inline
#: table of ``--define 'NAME={expr = "...", higher_is_better = false}'``.
KEYS: dict[str, tuple[type, ...]] = {"expr": (str,), "higher_is_better": (bool,),
                                     "tasks": (list, str), "doc": (str,)}
#: The files read so far, by (path, modification time, size): their metrics, checked.
_READ: dict[tuple[str, int, int], tuple[Declared, ...]] = {}


def declare(entries: Mapping[str, Any], where: str = "define") -> tuple[Declared, ...]:
    """Declare each of ``entries`` for the process (``define=`` of a request, ``--define``, a
    job's ``[define]``): a name and its expression, or a table of :data:`KEYS`; a text that
    starts with ``{`` is a TOML inline table (the command line's). Every entry is checked
    before any is declared; an ``InputError`` starts with ``where``.

    >>> [m.name for m in declare({"cost": '{expr = "(5*fn + fp) / n", higher_is_better = false}'})]
    ['cost']
    >>> undefine("cost")
    """
    if not isinstance(entries, Mapping):
        raise InputError(f"{where}: expected metric names, each with an expression or a table "
                         f"with expr, got {entries!r}")
    metrics = [_entry(name, _inline(name, value, where) if isinstance(value, str)
                      and value.lstrip().startswith("{") else value, where)
               for name, value in entries.items()]
    return tuple(_register(m) for m in metrics)


def load(path: str | os.PathLike[str]) -> tuple[Declared, ...]:
    """Declare the metrics of a team's TOML file: ``[metrics.NAME]`` tables of :data:`KEYS`
    (``expr`` required), or ``NAME = "expression"`` under ``[metrics]``. A metric declared in
    code (``me.define``, ``define=``, ``--define``, a job's ``[define]``) keeps that
    declaration: the nearest one wins. An ``InputError`` names the file and the metric.

    >>> load("no/such/metrics.toml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mleval_sql.errors.InputError: cannot read the metrics file 'no/such/metrics.toml': ...
    """
    try:
        stat = os.stat(path)
    except OSError as error:
        raise InputError(f"cannot read the metrics file {os.fspath(path)!r}: "
                         f"{error.strerror or error}") from None
    key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
    if key not in _READ:  # a file is parsed again only once it changed
        _READ[key] = _read(Path(path))
    return tuple(_register(m) for m in _READ[key]
                 if m.name not in DECLARED or DECLARED[m.name].origin)


def shared(source: Any = None) -> tuple[Declared, ...]:
    """Declare the team's shared metrics: those of the file the environment variable
    ``MLEVAL_METRICS`` names, then of ``metrics.toml`` in each local folder ``source`` names
    (a lake's own, which wins over the team's).

    >>> shared("fixtures/lake")  # no MLEVAL_METRICS here, and no metrics.toml in the lake
    ()
    """
    named = os.environ.get(SHARED_METRICS)
    found: list[Declared] = []
    if named:
        try:
            found += load(named)
        except InputError as error:
            raise InputError(f"{SHARED_METRICS}: {error}") from None
    for path in beside(source, SHARED_FILE):
        found += load(path)
    return tuple(found)


def _read(path: Path) -> tuple[Declared, ...]:
    """The checked metrics of the TOML file ``path``, not yet declared."""

    tomllib = toml()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise InputError(f"cannot read the metrics file {os.fspath(path)!r}: "
                         f"{error.strerror or error}") from None
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"{path}: not valid TOML: {error}") from None
    unknown = [k for k in data if k != "metrics"]
    if unknown:
        raise InputError(f"{path}: unknown key {unknown[0]!r}; the file holds [metrics.NAME] "
                         "tables (expr, higher_is_better, tasks, doc)")
    tables = data.get("metrics", {})
    if not isinstance(tables, dict):
        raise InputError(f"{path}: metrics: expected [metrics.NAME] tables, got {tables!r}")
    return tuple(replace(_entry(name, value, str(path)), origin=os.fspath(path))
                 for name, value in tables.items())


def _inline(name: str, text: str, where: str) -> Any:
    """The TOML inline table ``text`` (``{expr = "...", higher_is_better = false}``)."""

    tomllib = toml()
    try:
        return tomllib.loads(f"value = {text}")["value"]
    except tomllib.TOMLDecodeError as error:
        raise InputError(f"{where}: declared metric {name!r}: not a TOML inline table "
                         f"({error}): {text}") from None


def _entry(name: str, value: Any, where: str) -> Declared:
    """The checked declaration of ``name`` from an expression or a table of :data:`KEYS`."""
    def refuse(why: str) -> InputError:
        return InputError(f"{where}: declared metric {name!r}: {why}")

    table = {"expr": value} if isinstance(value, str) else value
    if not isinstance(table, Mapping):
        raise refuse(f"expected an expression or a table with expr, got {value!r}")
    for key in table:
        if key not in KEYS:
            close = difflib.get_close_matches(str(key), KEYS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise refuse(f"unknown key {key!r}{hint} (keys: {', '.join(KEYS)})")
    if "expr" not in table:
        raise refuse("missing expr, the expression")
    for key, kinds in KEYS.items():
        given = table.get(key)
        if key in table and not isinstance(given, kinds):
            wanted = {"expr": "a text", "higher_is_better": "true or false",
                      "tasks": "a list of tasks", "doc": "a text"}[key]
            raise refuse(f"{key} must be {wanted}, got {given!r}")
    tasks = table.get("tasks")
    if tasks is not None and not isinstance(tasks, str) and not all(
            isinstance(t, str) for t in tasks):
        raise refuse(f"tasks must be a list of tasks, got {tasks!r}")
    try:
        return _declared(name, table["expr"], tasks=tasks,
                         higher_is_better=table.get("higher_is_better", True),
                         doc=table.get("doc", ""))
    except InputError as error:
        raise InputError(f"{where}: {error}") from None


# -- checking -------------------------------------------------------------------------------

def parse(name: str, text: str) -> exp.Expression:
    """``text`` as a checked sqlglot tree, or an ``InputError`` naming ``name`` and the culprit."""
    def refuse(why: str) -> InputError:
        return InputError(f"declared metric {name!r}: {why}")

    if not isinstance(text, str) or not text.strip():
        raise refuse(f"the expression must be a non-empty text, got {text!r}")
    if len(text) > MAX_LENGTH:
        raise refuse(f"the expression has {len(text)} characters, over {MAX_LENGTH}")
    try:
        tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(text)
    except sqlglot.errors.TokenError as error:
        raise refuse(f"cannot read the expression: {error}") from None
    depth = 0
    for token in tokens:
        if token.comments:  # a comment may hide text from a reader of the expression
            raise refuse("comments are not allowed in an expression")
        if token.token_type == TokenType.SEMICOLON:
            raise refuse("';' is not allowed: one expression, not statements")
        depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(token.token_type, 0)
        if depth > MAX_DEPTH:  # before the parser recurses into it
            raise refuse(f"the expression is nested deeper than {MAX_DEPTH}")
    try:
        tree = sqlglot.parse_one(text, read="duckdb")
    except (sqlglot.errors.ParseError, RecursionError) as error:
        first = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise refuse(f"cannot parse the expression: {first}") from None
    _check(tree, refuse)
    if _depth(tree) > MAX_DEPTH:
        raise refuse(f"the expression is nested deeper than {MAX_DEPTH}")
    if _kind(tree, refuse) != "a number":
        raise refuse(f"the expression gives {_kind(tree, refuse)}, not a number: "
                     f"{tree.sql('duckdb')}")
    return tree


def _check(tree: exp.Expression, refuse: Callable[[str], InputError]) -> None:
    """Every node is an allowed name, number, operator or function."""
    for node in tree.walk():
        culprit = node.sql("duckdb")[:80]
        if isinstance(node, _ALLOWED):
            if isinstance(node, exp.Is) and not isinstance(node.expression, exp.Null):
                raise refuse(f"IS compares with NULL only: {culprit}")
        elif isinstance(node, exp.Column):
            _check_name(node, refuse)
        elif isinstance(node, exp.Identifier) and isinstance(node.parent, exp.Column):
            continue  # its column's name, checked there
        elif isinstance(node, exp.Literal) and not node.is_string:
            continue
        elif isinstance(node, exp.Literal):
            raise refuse(f"a text is not allowed: {culprit}")
        elif isinstance(node, (exp.Select, exp.Subquery, exp.Query)):
            raise refuse(f"a subquery is not allowed: {culprit}")
        elif isinstance(node, exp.Window):
            raise refuse(f"a window function is not allowed: {culprit}")
        elif isinstance(node, exp.AggFunc):
            raise refuse(f"an aggregate is not allowed: {culprit} (the statistics are "
                         f"already sums: {', '.join(STATISTICS)})")
        elif isinstance(node, exp.Placeholder):
            raise refuse(f"a parameter placeholder is not allowed: {culprit} (write "
                         f"{' or '.join(PARAMETERS)} by name)")
        elif isinstance(node, exp.Anonymous):
            close = difflib.get_close_matches(node.name.lower(), FUNCTIONS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise refuse(f"unknown function {node.name!r}{hint} (functions: "
                         f"{', '.join(FUNCTIONS)})")
        elif isinstance(node, exp.Func):
            written = node.sql_name().lower()
            close = difflib.get_close_matches(written, FUNCTIONS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise refuse(f"function {written!r} is not allowed{hint} (functions: "
                         f"{', '.join(FUNCTIONS)}): {culprit}")
        else:
            raise refuse(f"{type(node).__name__.lower()} is not allowed: {culprit} (arithmetic, "
                         f"comparisons, CASE/IF and {', '.join(FUNCTIONS)} are)")


def _check_name(column: exp.Column, refuse: Callable[[str], InputError]) -> None:
    written = column.sql("duckdb")
    if column.table or column.args.get("db") or column.args.get("catalog"):
        raise refuse(f"a qualified column {written} is not allowed; the names are "
                     f"{', '.join(NAMES)}")
    quoted = column.this.quoted
    name = column.name if quoted else column.name.lower()
    if name not in NAMES:
        close = difflib.get_close_matches(name.lower(), NAMES, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise refuse(f"unknown name {written}{hint} (names: {', '.join(NAMES)})")


def _depth(tree: exp.Expression) -> int:
    """The deepest chain of operators and functions (parentheses and names' parts not
    counted), without recursion."""
    deepest, stack = 0, [(tree, 1)]
    while stack:
        node, depth = stack.pop()
        deepest = max(deepest, depth)
        own = 0 if isinstance(node, (exp.Paren, exp.Identifier)) else 1
        stack.extend((child, depth + own) for child in node.iter_expressions())
    return deepest


def _kind(node: exp.Expression, refuse: Callable[[str], InputError]) -> str:
    """"a number", "a condition" or "null"; operands of the wrong kind are refused."""
    def want(child: exp.Expression | None, kind: str) -> None:
        got = "null" if child is None else _kind(child, refuse)
        if got not in (kind, "null"):
            raise refuse(f"{child.sql('duckdb') if child else None} is {got}, where "
                         f"{kind} is wanted: {node.sql('duckdb')[:80]}")

    if isinstance(node, exp.Paren):
        return _kind(node.this, refuse)
    if isinstance(node, exp.Null):
        return "null"
    if isinstance(node, (exp.Column, exp.Literal)):
        return "a number"
    if isinstance(node, exp.Boolean):
        return "a condition"
    if isinstance(node, (exp.And, exp.Or)):
        want(node.this, "a condition")
        want(node.expression, "a condition")
        return "a condition"
    if isinstance(node, exp.Not):
        want(node.this, "a condition")
        return "a condition"
    if isinstance(node, exp.Is):
        want(node.this, "a number")
        return "a condition"
    if isinstance(node, _COMPARISONS):
        want(node.this, "a number")
        want(node.expression, "a number")
        return "a condition"
    if isinstance(node, exp.If):  # IF(condition, a, b)
        want(node.this, "a condition")
        want(node.args.get("true"), "a number")
        want(node.args.get("false"), "a number")
        return "a number"
    if isinstance(node, exp.Case):
        if node.this is not None:
            want(node.this, "a number")
        for branch in node.args.get("ifs") or ():
            want(branch.this, "a number" if node.this is not None else "a condition")
            want(branch.args.get("true"), "a number")
        want(node.args.get("default"), "a number")
        return "a number"
    for child in node.iter_expressions():  # arithmetic and the numeric functions
        want(child, "a number")
    return "a number"


def _undefined(tree: exp.Expression) -> str:
    """Why a value is null: the denominators that may be 0, the functions outside their
    domain (the ``reason`` of a null value, as ``Metric.undefined`` says for a built-in)."""
    parts = [f"{_bare(d.expression).sql('duckdb')} = 0" for d in tree.find_all(exp.Div)]
    parts += [f"{_bare(f.this).sql('duckdb')} <= 0 in ln" for f in tree.find_all(exp.Ln)]
    parts += [f"{_bare(f.this).sql('duckdb')} < 0 in sqrt" for f in tree.find_all(exp.Sqrt)]
    parts = list(dict.fromkeys(parts))
    if not parts:
        return "a statistic it reads is null"
    return f"a zero denominator ({', or '.join(parts)})" if all(
        p.endswith("= 0") for p in parts) else f"undefined where {', or '.join(parts)}"


def _bare(node: exp.Expression) -> exp.Expression:
    while isinstance(node, exp.Paren):
        node = node.this
    return node


# -- compiling ------------------------------------------------------------------------------

def to_sql(tree: exp.Expression) -> exp.Expression:
    """The checked ``tree`` as the SQL the engines run: a division by zero null
    (``NULLIF``) and in floating point in every dialect, ``ln`` and ``sqrt`` null outside their
    domain (DuckDB raises there), the result a double and never NaN.

    >>> to_sql(parse("m", "tp / n")).sql("duckdb")  # doctest: +ELLIPSIS
    'CASE WHEN ISNAN(CAST(CAST(tp AS DOUBLE) / NULLIF(n, 0) AS DOUBLE)) THEN NULL ELSE ... END'
    """
    def rewrite(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Column):  # as the statistics' columns are named
            return exp.column(node.name if node.this.quoted else node.name.lower())
        if isinstance(node, exp.Div):
            return exp.Div(this=exp.cast(node.this, "DOUBLE"),
                           expression=exp.Nullif(this=node.expression,
                                                 expression=exp.Literal.number(0)))
        if isinstance(node, (exp.Ln, exp.Sqrt)):
            inside = (exp.GT if isinstance(node, exp.Ln) else exp.GTE)(
                this=node.this.copy(), expression=exp.Literal.number(0))
            return node.__class__(this=exp.Case(ifs=[exp.If(this=inside, true=node.this)]))
        if isinstance(node, exp.Pow):
            return exp.Pow(this=exp.cast(node.this, "DOUBLE"), expression=node.expression)
        return node

    value = exp.cast(tree.copy().transform(rewrite), "DOUBLE")
    return exp.Case(ifs=[exp.If(this=exp.IsNan(this=value.copy()), true=exp.Null())],
                    default=value)


def to_polars(tree: exp.Expression) -> pl.Expr:
    """The checked ``tree`` as a polars expression over the columns of the statistics, with
    the SQL form's meaning (:func:`to_sql`).

    >>> frame = pl.DataFrame({"tp": [1.0, 1.0], "n": [4.0, 0.0]})
    >>> frame.select(to_polars(parse("m", "tp / n"))).to_series().to_list()
    [0.25, None]
    """
    value = _polars(tree).cast(pl.Float64)
    return pl.when(value.is_nan()).then(None).otherwise(value)


def polars_rows(statistics: pl.LazyFrame, step: str,
                names: Sequence[str] | None = None) -> pl.LazyFrame:
    """The rows of the polars ``step`` (declared_metrics, declared_sweep, declared_regression)
    from its ``statistics`` (segment, average, label, support and the names its metrics read):
    one per metric declared over them (:func:`over`; ``names``: these only) and row, as the
    SQL step gives; no metric: no rows, with their columns and types."""
    rows = [statistics.select("segment", metric=pl.lit(m.name), average="average",
                              label="label", value=to_polars(m.tree), support="support")
            for m in over(step) if names is None or m.name in names]
    if not rows:
        return statistics.filter(pl.lit(False)).select(
            "segment", metric=pl.lit(None, dtype=pl.String), average="average", label="label",
            value=pl.lit(None, dtype=pl.Float64), support="support")
    return pl.concat(rows)


def _polars(node: exp.Expression) -> pl.Expr:
    sub: Callable[[exp.Expression], pl.Expr] = _polars
    if isinstance(node, exp.Paren):
        return sub(node.this)
    if isinstance(node, exp.Column):
        return pl.col(node.name if node.this.quoted else node.name.lower())
    if isinstance(node, exp.Literal):
        return pl.lit(float(node.this), dtype=pl.Float64)
    if isinstance(node, exp.Boolean):
        return pl.lit(node.this, dtype=pl.Boolean)
    if isinstance(node, exp.Null):
        return pl.lit(None, dtype=pl.Float64)
    if isinstance(node, exp.Neg):
        return -sub(node.this)
    if isinstance(node, exp.Div):
        below = sub(node.expression)
        return sub(node.this).cast(pl.Float64) / pl.when(below != 0).then(below)
    binary = _BINARY.get(type(node))
    if binary is not None:
        return binary(sub(node.this), sub(node.expression))
    if isinstance(node, exp.Not):
        return ~sub(node.this)
    if isinstance(node, exp.Is):
        return sub(node.this).is_null()
    if isinstance(node, exp.Ln):
        inside = sub(node.this)
        return pl.when(inside > 0).then(inside).log()
    if isinstance(node, exp.Sqrt):
        inside = sub(node.this)
        return pl.when(inside >= 0).then(inside).sqrt()
    if isinstance(node, exp.Exp):
        return sub(node.this).cast(pl.Float64).exp()
    if isinstance(node, exp.Abs):
        return sub(node.this).abs()
    if isinstance(node, exp.Nullif):
        value = sub(node.this)
        return pl.when(value == sub(node.expression)).then(None).otherwise(value)
    if isinstance(node, (exp.Least, exp.Greatest, exp.Coalesce)):
        args = [sub(node.this), *(sub(a) for a in node.expressions)]
        return {exp.Least: pl.min_horizontal, exp.Greatest: pl.max_horizontal,
                exp.Coalesce: pl.coalesce}[type(node)](args)
    if isinstance(node, exp.If):
        return _cases([(node.this, node.args.get("true"))], node.args.get("false"))
    if isinstance(node, exp.Case):
        subject = node.this
        ifs = [(branch.this if subject is None else exp.EQ(this=subject, expression=branch.this),
                branch.args.get("true")) for branch in node.args.get("ifs") or ()]
        return _cases(ifs, node.args.get("default"))
    raise AssertionError(f"unchecked node {type(node).__name__}")  # parse() refused it


def _cases(ifs: list[tuple[exp.Expression, exp.Expression | None]],
           default: exp.Expression | None) -> pl.Expr:
    def value(node: exp.Expression | None) -> pl.Expr:
        return pl.lit(None, dtype=pl.Float64) if node is None else _polars(node).cast(pl.Float64)

    (first, then), *rest = ifs
    chain = pl.when(_polars(first)).then(value(then))
    for condition, then in rest:
        chain = chain.when(_polars(condition)).then(value(then))
    return chain.otherwise(value(default))


_BINARY: dict[type, Callable[[pl.Expr, pl.Expr], pl.Expr]] = {
    exp.Add: lambda a, b: a + b, exp.Sub: lambda a, b: a - b, exp.Mul: lambda a, b: a * b,
    exp.Pow: lambda a, b: a.cast(pl.Float64).pow(b),
    exp.EQ: lambda a, b: a == b, exp.NEQ: lambda a, b: a != b, exp.GT: lambda a, b: a > b,
    exp.GTE: lambda a, b: a >= b, exp.LT: lambda a, b: a < b, exp.LTE: lambda a, b: a <= b,
    exp.And: lambda a, b: a & b, exp.Or: lambda a, b: a | b,
}


# -- the SQL step ---------------------------------------------------------------------------

def statement(step: str, template: str, names: Sequence[str] | None = None) -> str:
    """``queries/<step>.sql`` (``template``: declared_metrics, declared_sweep or
    declared_regression) with its last SELECT, which gives no rows, replaced by one SELECT per
    metric declared over its statistics (:func:`over`; ``names``: these only) over its
    ``statistics`` CTE, each value the metric's :func:`to_sql` tree: the tree is sqlglot's
    to render, never the user's text. The header's comments stay as written.
    """
    chosen = [m for m in over(step) if names is None or m.name in names]
    if not chosen:
        return template
    header = []
    for line in template.splitlines():
        if not line.startswith("--"):
            break
        header.append(line)
    tree = sqlglot.parse_one(template, read="duckdb")
    selects = [exp.select(
        "segment", exp.alias_(exp.Literal.string(m.name), "metric"), "average", "label",
        exp.alias_(to_sql(m.tree), "value"), "support").from_("statistics") for m in chosen]
    union = reduce(lambda a, b: exp.union(a, b, distinct=False), selects)
    union.set("with_", tree.args["with_"].copy())
    return "\n".join([*header, "", union.sql("duckdb", pretty=True)])
