"""The SQL files of ``queries/``: loading, their parameters, renaming the relations they read, and
which of their CTEs are re-read rather than written out.

A step's file is one DuckDB query. An expression that several steps share (a score's place on
the ``$bins`` grid, the F-beta score, the exact sum of fractional terms) is written once, as a
DuckDB macro of ``queries/macros/<file>.sql`` (``CREATE OR REPLACE TEMP MACRO name(args) AS
expression``), and a step that calls it names that file on a header line
(``-- Uses:   macros/grid.sql``). :func:`load` gives the step with every call of those macros
expanded by sqlglot: each call is parsed, the call's arguments (columns, ``$parameters``, any
expression) put in place of the macro's parameters on the tree (nested macros expanded in
turn, operands parenthesized), and the result rendered in the call's place; the rest of the
file, comments included, stays as written. What every engine, dialect and ``me.sql`` reads is
therefore one self-contained query, with no macro and no value formatted into it by hand; a
person running a file as it is in DuckDB runs the macro files its ``-- Uses:`` line names
first. Macros take values as arguments, never ``$parameters`` of their own, and read no column
but their arguments (:func:`macros` refuses one that does).

>>> "$threshold" in load("threshold_counts")
True
>>> parameters(load("threshold_counts"))
('threshold',)
>>> "on_grid" in source("ranked_points"), "on_grid" in load("ranked_points")
(True, False)
>>> sorted(macros("grid"))
['grid_index', 'on_grid']
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.tokens import TokenType

from mleval_sql.registry import DECLARED_FAMILIES

# Installed wheels carry queries/ inside the package; a source checkout has it beside the package.
_IN_PACKAGE = resources.files("mleval_sql") / "queries"
_IN_CHECKOUT = Path(__file__).resolve().parent.parent / "queries"


def folder() -> Path:
    """Where the SQL files are."""
    if _IN_PACKAGE.is_dir():
        return Path(str(_IN_PACKAGE))
    return _IN_CHECKOUT


@cache
def source(name: str) -> str:
    """The text of ``queries/<name>.sql`` as written: calling the macros of its ``-- Uses:``
    line."""
    return (folder() / f"{name}.sql").read_text(encoding="utf-8")


def load(name: str) -> str:
    """The query of ``queries/<name>.sql``, self-contained: the file's text, each call of a
    macro of the files its header names (:func:`uses`) replaced by the macro's expression
    (:func:`expand_macros`, rendered by sqlglot); the rest of the text, comments included,
    as written. The final steps of the declared families (``registry.DECLARED_FAMILIES``) get
    the metrics declared now (mleval_sql/declared.py), so they are not cached: me.define may
    change them between two runs."""
    if name in {f.final for f in DECLARED_FAMILIES}:
        from mleval_sql import declared  # it reads the registry, which this module serves

        return declared.statement(name, _load(name))
    return _load(name)


@cache
def _load(name: str) -> str:
    text = source(name)
    files = uses(text)
    if not files:
        return text
    defined: dict[str, Macro] = {}
    for file in files:
        defined.update(macros(file))
    tokens = sqlglot.Dialect.get_or_raise("duckdb").tokenize(text)
    parts, at, called = [], 0, set()
    for i, token in enumerate(tokens):
        if token.start < at or token.text.lower() not in defined or i + 1 == len(tokens) \
                or tokens[i + 1].token_type != TokenType.L_PAREN:
            continue
        depth = 0
        for close in tokens[i + 1:]:  # the call's closing parenthesis
            depth += {TokenType.L_PAREN: 1, TokenType.R_PAREN: -1}.get(close.token_type, 0)
            if depth == 0:
                break
        call = sqlglot.parse_one(text[token.start:close.end + 1], read="duckdb")
        parts += [text[at:token.start], expand_macros(call, defined).sql("duckdb")]
        at = close.end + 1
        called.add(token.text.lower())
    unused = [file for file in files if not called & set(macros(file))]
    if unused:
        raise ValueError(f"queries/{name}.sql uses macros/{unused[0]}.sql but calls none of "
                         "its macros")
    return "".join(parts) + text[at:]


def uses(sql: str) -> tuple[str, ...]:
    """The macro files (``queries/macros/<file>.sql``) that the header of ``sql`` names on its
    ``-- Uses:`` line.

    >>> uses("-- Uses:   macros/grid.sql, macros/fbeta.sql\\nSELECT 1")
    ('grid', 'fbeta')
    """
    header = []
    for line in sql.splitlines():
        if not line.startswith("--"):
            break
        header.append(line)
    named = [line.removeprefix("-- Uses:") for line in header if line.startswith("-- Uses:")]
    return tuple(re.findall(r"macros/(\w+)\.sql", " ".join(named)))


@dataclass(frozen=True)
class Macro:
    """A DuckDB scalar macro: its parameters and the expression they stand in."""

    params: tuple[str, ...]
    body: exp.Expression


@cache
def macros(file: str) -> dict[str, Macro]:
    """The macros of ``queries/macros/<file>.sql`` by name, each with the macros before it
    expanded in its body."""
    text = (folder() / "macros" / f"{file}.sql").read_text(encoding="utf-8")
    out: dict[str, Macro] = {}
    for statement in sqlglot.parse(text, read="duckdb"):
        if statement is None:
            continue
        signature = statement.this
        if not (isinstance(statement, exp.Create) and statement.args.get("kind") == "MACRO"
                and isinstance(signature, exp.UserDefinedFunction)):
            raise ValueError(f"queries/macros/{file}.sql: not a CREATE MACRO: "
                             f"{statement.sql('duckdb')[:60]}")
        name = signature.this.name.lower()
        params = tuple(p.name.lower() for p in signature.expressions)
        body = expand_macros(statement.expression, out)
        strays = {c.sql("duckdb") for c in body.find_all(exp.Column)
                  if c.table or c.name.lower() not in params}
        if strays or any(body.find_all(exp.Placeholder)):
            raise ValueError(f"queries/macros/{file}.sql: {name} reads "
                             f"{sorted(strays) or 'a $parameter'}, not only its arguments")
        out[name] = Macro(params, body)
    return out


#: What a macro's call or argument may stand as without parentheses, even as an operand.
_ATOMS = (exp.Column, exp.Literal, exp.Placeholder, exp.Null, exp.Boolean, exp.Paren, exp.Case,
          exp.Func)


def _bound(node: exp.Expression, parent: exp.Expression | None) -> exp.Expression:
    """``node`` put under ``parent``: parenthesized where it is an operand of an operator and
    not atomic."""
    operand = isinstance(parent, (exp.Binary, exp.Unary)) and not isinstance(parent, exp.Paren)
    return exp.Paren(this=node) if operand and not isinstance(node, _ATOMS) else node


def expand_macros(tree: exp.Expression, defined: Mapping[str, Macro]) -> exp.Expression:
    """``tree`` with each call of a macro of ``defined`` replaced by the macro's expression,
    its arguments in place of its parameters (parenthesized where an operator binds them).

    >>> twice = {"twice": Macro(("x",), sqlglot.parse_one("x * 2"))}
    >>> expand_macros(sqlglot.parse_one("SELECT twice(a + 1) AS b"), twice).sql()
    'SELECT (a + 1) * 2 AS b'
    """
    def put(node: exp.Expression) -> exp.Expression:
        macro = defined.get(node.name.lower()) if isinstance(node, exp.Anonymous) else None
        if macro is None:
            return node
        args = [expand_macros(a, defined) for a in node.expressions]
        if len(args) != len(macro.params):
            raise ValueError(f"{node.name} takes {len(macro.params)} arguments, got "
                             f"{len(args)}: {node.sql('duckdb')}")
        given = dict(zip(macro.params, args, strict=True))
        body = macro.body.copy()
        for column in list(body.find_all(exp.Column)):
            column.replace(_bound(given[column.name.lower()].copy(), column.parent))
        return _bound(body, node.parent)
    return tree.transform(put)


def parameters(sql: str) -> tuple[str, ...]:
    """The named parameters (``$name``) a query takes, in order of first use."""
    code = "\n".join(line.split("--", 1)[0] for line in sql.splitlines())
    return tuple(dict.fromkeys(re.findall(r"\$([A-Za-z_]\w*)", code)))


def rename_relations(sql: str, names: dict[str, str]) -> str:
    """``sql`` with the relations it reads renamed (quoted), for running beside a user's tables,
    and its projections read twice re-read (:func:`projections_inline`).

    The query is parsed and rendered once per (query, relations), with a placeholder
    identifier for each relation; each run puts its own quoted names in their place (parsing
    and rendering cost more than a small input's whole evaluation).

    >>> rename_relations("SELECT * FROM predictions", {"predictions": "run_1 p"})
    'SELECT * FROM "run_1 p" /* predictions */'
    """
    text = _with_placeholders(sql, tuple(sorted(names)))
    for old, new in names.items():
        text = text.replace(_placeholder(old), identifier(new))
    return text


def _placeholder(relation: str) -> str:
    return identifier(f"mleval placeholder {relation}")


@cache
def _with_placeholders(sql: str, relations: tuple[str, ...]) -> str:
    tree = projections_inline(sqlglot.parse_one(sql, read="duckdb"))
    return exp.replace_tables(tree, {r: _placeholder(r) for r in relations}).sql("duckdb")


def hoisted_ctes(tree: exp.Expression) -> tuple[list[tuple[str, exp.Expression]], exp.Expression]:
    """The CTEs of ``tree`` in order, each one's own CTEs hoisted before it, and the query
    without them."""
    ctes: list[tuple[str, exp.Expression]] = []

    def hoist(node: exp.Expression) -> exp.Expression:
        with_ = node.args.get("with_")
        if with_:
            for cte in with_.expressions:
                ctes.append((cte.alias, hoist(cte.this.copy())))
            node.set("with_", None)
        return node

    return ctes, hoist(tree.copy())


def projections_inline(tree: exp.Expression) -> exp.Expression:
    """``tree`` with its CTEs that only project rows (of a table or of such a CTE) marked NOT
    MATERIALIZED: read twice, they are re-read, where DuckDB and PostgreSQL would otherwise
    write their rows out first (1M rows: about 0.05 s in DuckDB)."""
    ctes, _ = hoisted_ctes(tree)
    order = {name: i for i, (name, _) in enumerate(ctes)}
    projections: set[str] = set()
    for i, (name, body) in enumerate(ctes):
        if is_projection(body, order, before=i, projections=projections):
            projections.add(name)
    tree = tree.copy()
    for cte in tree.find_all(exp.CTE):
        if cte.alias in projections:
            cte.set("materialized", False)
    return tree


def cte_reads(tree: exp.Expression, order: Mapping[str, int], *, before: int) -> list[str]:
    """The relations ``tree`` reads, once per mention: the CTEs defined before position
    ``before`` by name, any other as a table (a CTE sees only those before it: one that reads
    its own name reads the table of that name)."""
    return [t.name if order.get(t.name, before) < before else f"{t.name} (table)"
            for t in tree.find_all(exp.Table) if not t.args.get("db")]


def is_projection(body: exp.Expression, order: Mapping[str, int], *, before: int,
                  projections: Collection[str]) -> bool:
    """Whether ``body`` only projects rows of a table or of such a projection (no join,
    grouping, window or subquery): cheaper to repeat than to write."""
    return (isinstance(body, exp.Select) and not body.args.get("joins")
            and not body.args.get("group") and not body.args.get("distinct")
            and not any(body.find_all(exp.Window, exp.AggFunc, exp.Subquery))
            and all(r.endswith(" (table)") or r in projections
                    for r in cte_reads(body, order, before=before)))


def string(text: str) -> str:
    """``text`` as a DuckDB string literal.

    >>> string("it's")
    "'it''s'"
    """
    return exp.Literal.string(text).sql("duckdb")


def identifier(name: str) -> str:
    """``name`` quoted as a DuckDB identifier."""
    return exp.to_identifier(name, quoted=True).sql("duckdb")
