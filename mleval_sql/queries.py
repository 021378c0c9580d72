"""The SQL files of ``queries/``: loading, their parameters, and renaming the relations they read.

>>> "$threshold" in load("threshold_counts")
True
>>> parameters(load("threshold_counts"))
('threshold',)
"""

from __future__ import annotations

import re
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
    """``sql`` with the relations it reads renamed (quoted), for running beside a user's tables.

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
    tree = sqlglot.parse_one(sql, read="duckdb")
    return exp.replace_tables(tree, {r: _placeholder(r) for r in relations}).sql("duckdb")


def string(text: str) -> str:
    """``text`` as a DuckDB string literal.

    >>> string("it's")
    "'it''s'"
    """
    return exp.Literal.string(text).sql("duckdb")


def identifier(name: str) -> str:
    """``name`` quoted as a DuckDB identifier."""
    return exp.to_identifier(name, quoted=True).sql("duckdb")
