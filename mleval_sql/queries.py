"""The SQL files of ``queries/``: loading, their parameters, renaming the relations they read, and
which of their CTEs are re-read rather than written out.

>>> "$threshold" in load("threshold_counts")
True
>>> parameters(load("threshold_counts"))
('threshold',)
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping
from functools import cache
from importlib import resources
from pathlib import Path

import sqlglot
from sqlglot import exp

# Installed wheels carry queries/ inside the package; a source checkout has it beside the package.
_IN_PACKAGE = resources.files("mleval_sql") / "queries"
_IN_CHECKOUT = Path(__file__).resolve().parent.parent / "queries"


def folder() -> Path:
    """Where the SQL files are."""
    if _IN_PACKAGE.is_dir():
        return Path(str(_IN_PACKAGE))
    return _IN_CHECKOUT


@cache
def load(name: str) -> str:
    """The text of ``queries/<name>.sql``."""
    return (folder() / f"{name}.sql").read_text(encoding="utf-8")


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
