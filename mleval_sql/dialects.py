"""What the SQL of ``queries/`` needs to run outside DuckDB, kept as data in one place.

The files are written for DuckDB and run there as they are. For another dialect each step is
parsed by sqlglot, its parameters become literals, and the rewrites its entry of
:data:`DIALECTS` names (:data:`REWRITES`) turn the few DuckDB-only constructs into portable ones
before sqlglot writes the dialect; a dialect without an entry gets every rewrite of
:data:`PORTABLE`:

>>> text = step_sql("decision_metrics", "postgres", {"beta": 1.0, "zero_division": None})
>>> "UNPIVOT" in text, "AS unpivoted(metric)" in text, "$beta" in text.split("*/")[-1]
(False, True, False)

Several segment columns (DuckDB packs them in one struct) become one column each
(``segment_0, segment_1, ...``) wherever the step names ``segment``. A construct a dialect has
no form for makes rendering fail with an :class:`InputError` that names it.

Run for real in the tests: DuckDB, PostgreSQL, Spark SQL (:data:`RUN`). Only rendered and
parsed back by sqlglot: Trino, BigQuery, Snowflake (:data:`RENDERED`). A new dialect is one
:class:`Dialect` in :data:`DIALECTS`.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

import sqlglot
from sqlglot import exp

from mleval_sql import queries
from mleval_sql.schema import InputError

#: The name of the single segment key, as the files have it.
SEGMENT = "segment"

_INF = exp.cast(exp.Literal.string("inf"), "double")


@dataclass(frozen=True)
class Rewrite:
    """One DuckDB construct (``construct``, named in docs) and its portable form:
    ``rewrite(node, dialect)`` on each node of a step, ``dialect`` the entry of the dialect
    written (where a rewrite takes a parameter from it)."""

    construct: str
    rewrite: Callable[[exp.Expression, Dialect], exp.Expression]


@dataclass(frozen=True)
class Unsupported:
    """A construct a dialect has no faithful form for: ``found(tree)`` says a step has it."""

    construct: str  # named in the error
    found: Callable[[exp.Expression], bool]


def _unpivot(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``SELECT * FROM t UNPIVOT INCLUDE NULLS (value FOR metric IN (a, b))`` ->
    ``SELECT t.*, u.metric, CASE u.metric WHEN 'a' THEN t.a ... END AS value FROM t CROSS JOIN
    (VALUES ('a'), ('b')) AS u(metric)``: one pass over t, a join with a constant list
    (without INCLUDE NULLS, also ``WHERE`` the value ``IS NOT NULL``)."""
    if not isinstance(node, exp.Select):
        return node
    source = node.args.get("from_") and node.args["from_"].this
    pivots = source.args.get("pivots") if isinstance(source, exp.Table) else None
    if not pivots or not pivots[0].args.get("unpivot"):
        return node
    pivot = pivots[0]
    include_nulls = pivot.args.get("include_nulls")
    value = pivot.expressions[0].name
    field = pivot.args["fields"][0]
    name, columns = field.this.name, [c.name for c in field.expressions]
    table = source.alias_or_name
    source = source.copy()
    source.set("pivots", None)
    listed = exp.Values(
        expressions=[exp.Tuple(expressions=[exp.Literal.string(c)]) for c in columns],
        alias=exp.TableAlias(this=exp.to_identifier("unpivoted"),
                             columns=[exp.to_identifier(name)]))
    case = exp.Case(this=exp.column(name, "unpivoted"), ifs=[
        exp.If(this=exp.Literal.string(c), true=exp.column(c, table)) for c in columns])
    out = node.copy()

    def unpivoted(projection: exp.Expression) -> exp.Expression:
        """A projection reading the unpivoted columns by name (``metric``, ``value``)."""
        if isinstance(projection, exp.Column) and projection.name == value \
                and not projection.table:
            return exp.alias_(case.copy(), value)
        return projection.transform(
            lambda n: n if not isinstance(n, exp.Column) or n.table else
            case.copy() if n.name == value else
            exp.column(name, "unpivoted") if n.name == name else n)

    projections: list[exp.Expression] = []
    for p in out.expressions:
        if isinstance(p, exp.Star):
            projections += [exp.Column(this=exp.Star(), table=exp.to_identifier(table)),
                            exp.column(name, "unpivoted"), exp.alias_(case.copy(), value)]
        else:
            projections.append(unpivoted(p))
    out.set("expressions", projections)
    out.set("from_", exp.From(this=source))
    out.set("joins", [exp.Join(this=listed, kind="CROSS"), *(out.args.get("joins") or [])])
    if not include_nulls:  # UNPIVOT alone drops the NULL values
        out = out.where(exp.Not(this=exp.Is(this=case.copy(), expression=exp.null())))
    return out


def _any_value(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``any_value(x)`` -> ``min(x)``: the files take it of values equal within the group (a
    sample's weight, its one true label), where any value is the smallest."""
    if isinstance(node, exp.IgnoreNulls) and isinstance(node.this, exp.AnyValue):
        node = node.this
    if isinstance(node, exp.AnyValue):
        return exp.Min(this=node.this)
    return node


def _arg_min_max(node: exp.Expression) -> tuple[exp.Expression, list[exp.Expression],
                                                exp.Expression | None] | None:
    """``arg_min(x, (a, b))`` or ``arg_max``, filtered or not: the aggregate, its keys and the
    filter's condition."""
    filtered = isinstance(node, exp.Filter) and isinstance(node.this, (exp.ArgMin, exp.ArgMax))
    agg = node.this if filtered else node
    if not isinstance(agg, (exp.ArgMin, exp.ArgMax)):
        return None
    keys = agg.expression.expressions if isinstance(agg.expression, exp.Tuple) \
        else [agg.expression]
    return agg, list(keys), node.expression if filtered else None


def _min_by(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``arg_min(x, (a, b))`` (or ``arg_max``), filtered or not: the x of the smallest (largest)
    (a, b) in tuple order, as ``min_by(x, key)``, the key a struct or a row value
    (:attr:`Dialect.min_by_key`)."""
    found = _arg_min_max(node)
    if found is None:
        return node
    agg, keys, where = found
    key = exp.Struct(expressions=keys) if dialect.min_by_key == "struct" \
        else exp.Tuple(expressions=keys)
    out: exp.Expression = (exp.ArgMax if isinstance(agg, exp.ArgMax) else exp.ArgMin)(
        this=agg.this, expression=key)
    return exp.Filter(this=out, expression=where) if where else out


def _first_of_array_agg(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``arg_min(x, (a, b))`` (or ``arg_max``), filtered or not, as the first element of
    ``array_agg(x ORDER BY a, b)``."""
    found = _arg_min_max(node)
    if found is None:
        return node
    agg, keys, where = found
    largest = isinstance(agg, exp.ArgMax)
    ordered = exp.Order(this=agg.this, expressions=[
        exp.Ordered(this=k, desc=largest, nulls_first=not largest) for k in keys])  # no nulls
    collected: exp.Expression = exp.ArrayAgg(this=ordered)
    if where is not None:
        collected = exp.Filter(this=collected, expression=where)
    return exp.Bracket(this=exp.Paren(this=collected), expressions=[exp.Literal.number(0)],
                       offset=0, safe=True)


def _window_filter(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``agg(x) FILTER (WHERE c) OVER w`` -> ``agg(CASE WHEN c THEN x END) OVER w`` (exact for
    the null-skipping aggregates the files use; Spark has no FILTER on window functions)."""
    if isinstance(node, exp.Window) and isinstance(node.this, exp.Filter):
        agg = node.this.this.copy()
        condition = node.this.expression.this
        agg.set("this", exp.Case(ifs=[exp.If(this=condition, true=agg.this)]))
        out = node.copy()
        out.set("this", agg)
        return out
    return node


def _nan_equality(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``isnan(x)`` -> ``x = 'NaN'``, for dialects where NaN equals itself (PostgreSQL,
    Snowflake)."""
    if isinstance(node, exp.IsNan):
        return exp.EQ(this=node.this, expression=exp.cast(exp.Literal.string("NaN"), "double"))
    return node


def _isinf(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``isinf(x)`` -> ``abs(x) = inf``."""
    if isinstance(node, exp.IsInf):
        return exp.EQ(this=exp.Abs(this=node.this), expression=_INF.copy())
    return node


def _label_bits(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``bit_count(bit_or(1 << (t.bit % 64)))``, DuckDB's fast count of a sample's distinct
    labels (one bit per label), -> ``count(DISTINCT t.label)``; the bits of some labels only,
    ``bit_count(bit_or(CASE WHEN c THEN 1 << t.bit END))``, -> ``count(DISTINCT CASE WHEN c
    THEN t.label END)``."""
    if not (isinstance(node, exp.Anonymous) and node.name.lower() == "bit_count"
            and node.expressions and type(node.expressions[0]).__name__ == "BitwiseOrAgg"):
        return node
    bit = next(node.find_all(exp.Column))
    label = exp.column("label", bit.table)
    bits = node.expressions[0].this
    if isinstance(bits, exp.Case):
        label = exp.Case(ifs=[exp.If(this=when.this.copy(), true=label.copy())
                              for when in bits.args["ifs"]])
    return exp.Count(this=exp.Distinct(expressions=[label]))


def _signed_words(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``CAST(1 AS UBIGINT)``, the unit of the label bits, -> a signed BIGINT: Spark has no
    unsigned type, and its ``bit_count`` counts a negative word's 64 bits as they are."""
    if isinstance(node, exp.Cast) and node.to.this == exp.DataType.Type.UBIGINT:
        return exp.cast(node.this, "bigint")
    return node


def _listed_values(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``(SELECT unnest([v1, v2]) AS x) AS t`` -> ``(VALUES (v1), (v2)) AS t(x)``."""
    if not (isinstance(node, exp.Subquery) and isinstance(node.this, exp.Select)
            and not node.this.args.get("from_") and len(node.this.expressions) == 1):
        return node
    projection = node.this.expressions[0]
    listed = projection.this if isinstance(projection, exp.Alias) else None
    if not isinstance(listed, (exp.Explode, exp.Unnest)):
        return node
    array = listed.this if isinstance(listed, exp.Explode) else listed.expressions[0]
    while isinstance(array, exp.Cast):
        array = array.this
    if not isinstance(array, exp.Array):
        return node
    return exp.Values(
        expressions=[exp.Tuple(expressions=[v.copy()]) for v in array.expressions],
        alias=exp.TableAlias(this=exp.to_identifier(node.alias),
                             columns=[exp.to_identifier(projection.alias)]))


def _division(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``a / b`` -> ``a / NULLIF(b, 0)``: DuckDB divides doubles by zero to inf or NaN, which
    the files guard (``CASE WHEN p > 0 ...``); PostgreSQL and ANSI Spark raise instead, even
    in a branch the guard discards (aggregates are computed before the CASE)."""
    if isinstance(node, exp.Div) and not isinstance(node.expression, exp.Literal) \
            and not (isinstance(node.expression, exp.Nullif)):
        node.set("expression", exp.Nullif(this=node.expression.copy(),
                                          expression=exp.Literal.number(0)))
    return node


def _listed(node: exp.Expression | None) -> list[exp.Expression] | None:
    """The elements of a literal array (a bound ``$thresholds``), casts stripped."""
    while isinstance(node, exp.Cast):
        node = node.this
    return list(node.expressions) if isinstance(node, exp.Array) else None


def _double(value: exp.Expression) -> exp.Expression:
    return exp.cast(value.copy(), "double")


def _listed_index(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``[v1, v2, ...][i]`` (1-based) -> ``CASE i WHEN 1 THEN v1 WHEN 2 THEN v2 ... END``:
    no array, no index base, NULL out of range as in DuckDB."""
    values = _listed(node.this) if isinstance(node, exp.Bracket) else None
    if values is None or len(node.expressions) != 1:
        return node
    return exp.Case(this=node.expressions[0].copy(), ifs=[
        exp.If(this=exp.Literal.number(i), true=_double(v)) for i, v in enumerate(values, 1)])


def _listed_lambda(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``list_sum(list_transform([v1, v2, ...], lambda t: f(t)))`` -> ``f(v1) + f(v2) + ...``,
    the lambda unrolled over the listed values."""
    if not (isinstance(node, exp.Anonymous) and node.name.lower() == "list_sum"
            and len(node.expressions) == 1 and isinstance(node.expressions[0], exp.Transform)):
        return node
    transform = node.expressions[0]
    values, function = _listed(transform.this), transform.expression
    if values is None or not isinstance(function, exp.Lambda) or not values:
        return node
    name = function.expressions[0].name

    def applied(value: exp.Expression) -> exp.Expression:
        return function.this.transform(
            lambda n: _double(value) if isinstance(n, (exp.Identifier, exp.Column))
            and n.name == name and not isinstance(n.parent, exp.Column) else n)

    total = applied(values[0])
    for value in values[1:]:
        total = exp.Add(this=total, expression=applied(value))
    return exp.Paren(this=total)


def _subquery_alias(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """A subquery in FROM gets an alias (PostgreSQL before 16 requires one)."""
    if isinstance(node, exp.From) and isinstance(node.this, exp.Subquery) \
            and not node.this.alias:
        node.this.set("alias", exp.TableAlias(this=exp.to_identifier("unnamed")))
    return node


#: ln Γ by Stirling's series, used at x >= :data:`_STIRLING_FROM`: the coefficients of
#: 1/x, 1/x^3, ... 1/x^9 (B_2k / (2k (2k - 1))); the first term left out, 691 / (360360 x^11),
#: is below 1.2e-16 there.
_STIRLING = (1 / 12, -1 / 360, 1 / 1260, -1 / 1680, 1 / 1188)
_STIRLING_FROM = 16


def _stirling(x: exp.Expression) -> exp.Expression:
    """ln Γ(x) = (x - 1/2) ln x - x + ln(2π) / 2 + Σ c_k / x^(2k-1), for a double x >= 16."""
    def num(value: float) -> exp.Expression:
        return exp.cast(exp.Literal.number(repr(value)), "double")
    inverse_square = exp.Div(this=num(1.0), expression=exp.Paren(
        this=exp.Mul(this=x.copy(), expression=x.copy())))
    series: exp.Expression = num(_STIRLING[-1])
    for c in reversed(_STIRLING[:-1]):  # Horner's rule in 1/x^2
        series = exp.Add(this=num(c), expression=exp.Mul(this=inverse_square.copy(),
                                                         expression=exp.Paren(this=series)))
    main = exp.Sub(this=exp.Mul(this=exp.Paren(this=exp.Sub(this=x.copy(), expression=num(0.5))),
                                expression=exp.Ln(this=x.copy())), expression=x.copy())
    return exp.Paren(this=exp.Add(
        this=exp.Add(this=main, expression=num(0.5 * math.log(2 * math.pi))),
        expression=exp.Div(this=exp.Paren(this=series), expression=x.copy())))


def _lgamma(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``lgamma(x)`` (DuckDB's ln Γ; PostgreSQL before 18, Spark, Trino have none) -> Stirling's
    series (:func:`_stirling`) for x >= 16, and below ``S(x + 16) - ln(x (x + 1) ... (x + 15))``
    (Γ(x + 16) = Γ(x) x (x + 1) ... (x + 15)): within about 1e-14 of ln Γ for x > 0 (the
    files take it of whole numbers >= 1, whose product of 16 terms stays below 1e22)."""
    if not (isinstance(node, exp.Anonymous) and node.name.lower() == "lgamma"
            and len(node.expressions) == 1):
        return node
    x = exp.cast(node.expressions[0].copy(), "double")
    shifted = exp.Paren(this=exp.Add(this=x.copy(),
                                     expression=exp.Literal.number(_STIRLING_FROM)))
    product: exp.Expression = x.copy()
    for k in range(1, _STIRLING_FROM):
        product = exp.Mul(this=product, expression=exp.Paren(
            this=exp.Add(this=x.copy(), expression=exp.Literal.number(k))))
    small = exp.Sub(this=_stirling(shifted), expression=exp.Ln(this=product))
    return exp.Paren(this=exp.Case(ifs=[exp.If(
        this=exp.GTE(this=x.copy(), expression=exp.Literal.number(_STIRLING_FROM)),
        true=_stirling(x))], default=small))


#: ln of the smallest normal double: exp below it underflows.
_EXP_FLOOR = math.log(2.2250738585072014e-308)


def _exp_underflow(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``exp(x)`` -> ``exp(greatest(x, ln(smallest normal double)))``: PostgreSQL raises where
    exp underflows (the expected mutual information's far terms, e.g. exp(-830)), which
    DuckDB and Spark give as 0; the floor's 2.2e-308 instead is below rounding in any sum."""
    if isinstance(node, exp.Exp) and not isinstance(node.this, exp.Greatest):
        return exp.Exp(this=exp.Greatest(this=node.this.copy(), expressions=[
            exp.cast(exp.Literal.number(repr(_EXP_FLOOR)), "double")]))
    return node


def _series_rows(node: exp.Expression, dialect: Dialect) -> exp.Expression:
    """``unnest(generate_series(a, b))`` in a projection -> ``generate_series(a, b)``, which
    PostgreSQL returns as rows there itself (it unnests arrays only)."""
    if isinstance(node, exp.Explode) and isinstance(node.this, exp.GenerateSeries):
        return node.this.copy()
    return node


#: Every rewrite by name, applied in this order to each node of a step for the dialects that
#: name it.
REWRITES: dict[str, Rewrite] = {
    "unpivot": Rewrite("UNPIVOT", _unpivot),
    "any_value": Rewrite("any_value", _any_value),
    "min_by": Rewrite("arg_min / arg_max over a tuple", _min_by),
    "first_of_array_agg": Rewrite("arg_min / arg_max over a tuple", _first_of_array_agg),
    "window_filter": Rewrite("FILTER on a window function", _window_filter),
    "nan_equality": Rewrite("isnan", _nan_equality),
    "isinf": Rewrite("isinf", _isinf),
    "label_bits": Rewrite("bit_count(bit_or(...)) label bits", _label_bits),
    "signed_words": Rewrite("unsigned 64-bit words", _signed_words),
    "listed_values": Rewrite("unnest of a listed array", _listed_values),
    "subquery_alias": Rewrite("a subquery in FROM without an alias", _subquery_alias),
    "division": Rewrite("division by zero as inf / NaN", _division),
    "listed_index": Rewrite("an index into a listed array", _listed_index),
    "listed_lambda": Rewrite("a lambda over a listed array", _listed_lambda),
    # after division: its 1 / x^2 and 1 / x are never 0
    "lgamma": Rewrite("lgamma", _lgamma),
    "series_rows": Rewrite("unnest(generate_series(...))", _series_rows),
    "exp_underflow": Rewrite("exp underflowing to 0", _exp_underflow),
}

#: The rewrites that give standard SQL: those of a dialect without an entry in
#: :data:`DIALECTS`.
PORTABLE: frozenset[str] = frozenset(REWRITES) - {"min_by", "nan_equality", "series_rows",
                                                   "exp_underflow"}

#: An aggregate FILTER over array_agg (the portable arg_max with a filter).
FILTERED_ARRAY_AGG = Unsupported(
    "an aggregate FILTER over array_agg (arg_max with a filter)",
    lambda tree: any(isinstance(f.this, exp.ArrayAgg) for f in tree.find_all(exp.Filter)))


@dataclass(frozen=True)
class Dialect:
    """How the steps are written in one of sqlglot's dialects (``name``).

    ``rewrites``: the names of the :data:`REWRITES` it needs (applied in that table's order).
    ``as_written``: the files' own dialect, which runs them as they are (segment key and all).
    ``min_by_key``: the key of ``min_by`` (rewrite ``min_by``): a struct or a row value.
    ``quoted``: every identifier quoted (the canonical names are keywords somewhere, such as
    Snowflake's SAMPLE). ``unsupported``: constructs it has no form for (rendering raises).
    ``tested``: run for real by the tests (``"run"``), or rendered and parsed back only.
    ``inlines_ctes``: its planner copies a CTE into every place that reads it (Spark), so a
    statement is written as a script instead: each relation read more than once written first
    as a table (:func:`mleval_sql.statement.script`). ``not_materialized``: it takes ``AS NOT
    MATERIALIZED`` on a CTE, which a statement puts on the projections it reads more than
    once (the table re-read, not a copy of its rows written and read back).
    """

    name: str
    rewrites: frozenset[str] = PORTABLE
    as_written: bool = False
    min_by_key: Literal["struct", "row"] = "struct"
    quoted: bool = True
    unsupported: tuple[Unsupported, ...] = ()
    tested: Literal["run", "rendered"] | None = None
    inlines_ctes: bool = False
    not_materialized: bool = False

    def __post_init__(self) -> None:
        unknown = set(self.rewrites) - set(REWRITES)
        if unknown:
            raise ValueError(f"dialect {self.name!r} names unknown rewrites {sorted(unknown)}")


_WITH_MIN_BY = (PORTABLE - {"first_of_array_agg"}) | {"min_by"}

#: Every dialect with rewrites of its own (others: :data:`PORTABLE`, identifiers quoted).
DIALECTS: dict[str, Dialect] = {d.name: d for d in (
    Dialect("duckdb", frozenset(), as_written=True, quoted=False, tested="run",
            not_materialized=True),
    Dialect("postgres", PORTABLE | {"nan_equality", "series_rows", "exp_underflow"},
            quoted=False, tested="run", not_materialized=True),
    # bit_or and bit_count of its own: the label bits stay
    Dialect("spark", _WITH_MIN_BY - {"label_bits"}, quoted=False, tested="run",
            inlines_ctes=True),
    Dialect("trino", _WITH_MIN_BY, min_by_key="row", tested="rendered"),
    Dialect("bigquery", unsupported=(FILTERED_ARRAY_AGG,), tested="rendered"),
    Dialect("snowflake", PORTABLE | {"nan_equality"}, unsupported=(FILTERED_ARRAY_AGG,),
            tested="rendered"),
    Dialect("databricks", _WITH_MIN_BY, inlines_ctes=True),
)}

#: Dialects whose rendering the tests run on a real engine, and those only rendered and parsed.
RUN = tuple(name for name, d in DIALECTS.items() if d.tested == "run")
RENDERED = tuple(name for name, d in DIALECTS.items() if d.tested == "rendered")


def dialect_entry(name: str) -> Dialect:
    """The entry of dialect ``name``: its own in :data:`DIALECTS`, else every portable
    rewrite."""
    return DIALECTS.get(name) or Dialect(name)


def literal(value: object) -> exp.Expression:
    """A parameter's value as a typed SQL literal (floats as DOUBLE everywhere)."""
    if value is None:
        return exp.null()
    if isinstance(value, bool):
        return exp.Boolean(this=value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(f"{value!r} cannot be a parameter")
        return exp.cast(exp.Literal.number(repr(value)), "double")
    if isinstance(value, (list, tuple)):
        return exp.Array(expressions=[literal(v) for v in value])
    return exp.convert(value)


def bind(tree: exp.Expression, params: dict[str, object]) -> exp.Expression:
    """``tree`` with every ``$name`` replaced by the literal of ``params[name]``, and each
    UNION branch after the first whose WHERE is then FALSE left out (a switch off: the
    relations only it read are read once fewer, which keeps them inline in PostgreSQL and
    Spark)."""
    def put(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Placeholder) and node.name:
            if node.name not in params:
                raise InputError(f"no value for the parameter ${node.name}")
            return literal(params[node.name])
        return node

    def prune(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Union) and _never(node.expression):
            return node.this
        return node
    return tree.transform(put).transform(prune, copy=False)  # one copy: the caller's is kept


def _never(query: exp.Expression) -> bool:
    """Whether ``query`` is a SELECT whose WHERE is the literal FALSE."""
    where = query.args.get("where") if isinstance(query, exp.Select) else None
    return where is not None and isinstance(where.this, exp.Boolean) and not where.this.this


def portable(tree: exp.Expression, dialect: str) -> exp.Expression:
    """``tree`` with the rewrites ``dialect``'s entry names applied, in :data:`REWRITES`'
    order."""
    entry = dialect_entry(dialect)
    tree = tree.copy()  # once: each rewrite then works on this copy (a copy each cost 2x)
    for name, rewrite in REWRITES.items():
        if name in entry.rewrites:
            tree = tree.transform(lambda n, r=rewrite: r.rewrite(n, entry), copy=False)
    return tree


def expand_segment(tree: exp.Expression, keys: Sequence[str]) -> exp.Expression:
    """Each mention of the ``segment`` column as the columns ``keys`` (unchanged when
    ``keys == ["segment"]``): in projections, GROUP BY, PARTITION BY, and in comparisons
    (``a.segment IS NOT DISTINCT FROM b.segment`` compares every key).

    ``struct_pack(segment := segment, x := x) AS segment`` (a step that makes (segment, x) the
    new segment) gives ``keys`` plus ``segment_x``, and a later step's ``segment.x`` reads
    ``segment_x``."""
    keys = list(keys)
    plain = keys == [SEGMENT]

    def columns(column: exp.Column) -> list[exp.Column]:
        return [exp.column(k, column.table or None) for k in keys]

    def is_segment(node: exp.Expression) -> bool:
        return isinstance(node, exp.Column) and node.name == SEGMENT

    def projection(p: exp.Expression) -> list[exp.Expression]:
        if isinstance(p, exp.Alias) and isinstance(p.this, exp.Struct):
            fields = {f.alias_or_name: f for f in p.this.expressions}
            packed = fields.get(SEGMENT)
            if packed is None:
                return [p]
            def value(field: exp.Expression) -> exp.Expression:  # struct_pack(name := value)
                return (field.expression if isinstance(field, exp.PropertyEQ)
                        else field.unalias()).copy()
            return [*projection(value(packed)),
                    *(exp.alias_(value(f), f"segment_{name}")
                      for name, f in fields.items() if name != SEGMENT)]
        if plain:
            return [p]
        target = p.this if isinstance(p, exp.Alias) else p
        if is_segment(target) and (not isinstance(p, exp.Alias) or p.alias == SEGMENT):
            return [exp.alias_(c, k) if isinstance(p, exp.Alias) else c
                    for c, k in zip(columns(target), keys, strict=True)]
        return [p]

    def expand(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Select):
            node.set("expressions", [q for p in node.expressions for q in projection(p)])
        if plain:
            return node
        if isinstance(node, exp.Column) and node.table == SEGMENT:  # a field packed in it
            return exp.column(f"{SEGMENT}_{node.name}")
        if isinstance(node, exp.Group):
            node.set("expressions", [c for e in node.expressions
                                     for c in (columns(e) if is_segment(e) else [e])])
        if isinstance(node, exp.Window) and node.args.get("partition_by"):
            node.set("partition_by", [c for e in node.args["partition_by"]
                                      for c in (columns(e) if is_segment(e) else [e])])
        if isinstance(node, (exp.NullSafeEQ, exp.EQ)) and is_segment(node.this) \
                and is_segment(node.expression):
            pairs = zip(columns(node.this), columns(node.expression), strict=True)
            return exp.and_(*(type(node)(this=a, expression=b) for a, b in pairs))
        return node

    return tree.transform(expand, copy=True)


def segment_keys(by: Sequence[str]) -> list[str]:
    """The columns the segment key is spread over outside DuckDB: ``segment`` for none or one
    segment column, ``segment_0, segment_1, ...`` for several."""
    return [SEGMENT] if len(by) <= 1 else [f"segment_{i}" for i in range(len(by))]


def grown_keys(step: str, keys: Sequence[str]) -> list[str]:
    """The segment keys a step gives: its input's, plus one per extra field it packs in."""
    tree = sqlglot.parse_one(queries.load(step), read="duckdb")
    extra = [f"segment_{f.alias_or_name}" for s in tree.find_all(exp.Struct)
             for f in s.expressions if f.alias_or_name != SEGMENT]
    return [*keys, *extra]


def step_tree(step: str, dialect: str, params: dict[str, object],
              keys: Sequence[str] = (SEGMENT,), *, one_label: bool = False) -> exp.Expression:
    """``queries/<step>.sql`` for ``dialect``, parameters as literals, segment spread over
    ``keys``; ``one_label``: the input has no label column (:func:`one_label_windows`)."""
    tree = sqlglot.parse_one(queries.load(step), read="duckdb")
    tree = bind(tree, params)
    if one_label:
        tree = one_label_windows(tree)
    if dialect_entry(dialect).as_written:
        return tree
    return portable(expand_segment(tree, keys), dialect)


def one_label_windows(tree: exp.Expression) -> exp.Expression:
    """``tree`` with ``label`` left out of its windows' PARTITION BY, for an input without a
    label column, whose rows all have the one label named after the scores: a constant key
    costs DuckDB's window sort about as much as the rest of it (0.35 against 0.23 s for rank
    and a running count of 1M rows in 8 segments). Sound for the steps of queries/, whose
    windows partitioned by label read the rows of labels only (pooled rows have windows of
    their own)."""
    def drop(node: exp.Expression) -> exp.Expression:
        if isinstance(node, exp.Window) and node.args.get("partition_by"):
            kept = [e for e in node.args["partition_by"]
                    if not (isinstance(e, exp.Column) and e.name == "label")]
            if len(kept) < len(node.args["partition_by"]):
                node = node.copy()
                node.set("partition_by", kept or None)
        return node
    return tree.transform(drop)


def zero_label(tree: exp.Expression) -> exp.Expression:
    """``tree`` with ``label`` in the select list of a SELECT with windows written as the
    constant 0, for rows whose label is 0 on every row (the DuckDB engine's numbered rows): a
    column the windows pass on is carried through their sort, a constant is not (10M rows:
    ranking_metrics 1.82 -> 1.74 s).

    >>> tree = sqlglot.parse_one("SELECT label, rank() OVER (ORDER BY score) AS r FROM t "
    ...                          "UNION ALL SELECT label, 1 FROM t")
    >>> zero_label(tree).sql()
    'SELECT 0 AS label, RANK() OVER (ORDER BY score) AS r FROM t UNION ALL SELECT label, 1 FROM t'
    """
    def zero(node: exp.Expression) -> exp.Expression:
        if not (isinstance(node, exp.Select)
                and any(e.find(exp.Window) for e in node.expressions)):
            return node
        for projection in node.expressions:
            column = projection.this if isinstance(projection, exp.Alias) else projection
            if isinstance(column, exp.Column) and column.name == "label":
                projection.replace(exp.alias_(exp.Literal.number(0), projection.alias_or_name))
        return node
    return tree.transform(zero)


@functools.cache
def one_label_sql(sql: str, *, numbered: bool = False) -> str:
    """:func:`one_label_windows` of a DuckDB query's text (parameters kept as ``$name``); with
    ``numbered``, :func:`zero_label` too."""
    tree = one_label_windows(sqlglot.parse_one(sql, read="duckdb"))
    return (zero_label(tree) if numbered else tree).sql("duckdb")


def render(tree: exp.Expression, dialect: str, *, pretty: bool = True, what: str = "") -> str:
    """``tree`` written in ``dialect``; a construct it has no form for raises ``InputError``."""
    entry = dialect_entry(dialect)
    for unsupported in entry.unsupported:
        if unsupported.found(tree):
            raise InputError(f"{what or 'this query'} cannot be written in {dialect}: "
                             f"{unsupported.construct}")
    try:
        return tree.sql(dialect=dialect, pretty=pretty, identify=entry.quoted,
                        unsupported_level=sqlglot.ErrorLevel.RAISE)
    except sqlglot.errors.UnsupportedError as error:
        raise InputError(f"{what or 'this query'} cannot be written in {dialect}: "
                         f"{error}") from error
    except ValueError as error:  # an unknown dialect name
        raise InputError(str(error)) from error
    except Exception as error:  # sqlglot has no way to write some node in this dialect
        raise InputError(f"{what or 'this query'} cannot be written in {dialect}: "
                         f"sqlglot fails ({type(error).__name__}: {error})") from error


def step_sql(step: str, dialect: str, params: dict[str, object],
             keys: Sequence[str] = (SEGMENT,), *, pretty: bool = True) -> str:
    """:func:`step_tree` as text."""
    return render(step_tree(step, dialect, params, keys), dialect, pretty=pretty, what=step)
