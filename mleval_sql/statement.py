"""One statement a person can paste into a BI tool, psql or ``spark.sql``: the steps of the
metrics asked for, chained as CTEs over the user's own table and columns, parameters as
literals with their defaults filled in, giving the rows ``evaluate`` gives for the same request.

>>> print(sql("f1", task="binary", table="preds", dialect="postgres").splitlines()[0])
-- mleval_sql: f1 (binary) from preds; threshold 0.5, beta 1.0, zero_division NULL.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import sqlglot
from sqlglot import exp

from mleval_sql import api, dialects
from mleval_sql.engines.sql import canonical
from mleval_sql.params import DEFAULTS, PARAMS, checked
from mleval_sql.registry import AVERAGING, CURVES, METRICS, STEPS, SWEEP
from mleval_sql.schema import TASKS, Columns, InputError, Task

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


def sql(metrics: str | Sequence[str] = api.DEFAULT_METRICS, *, task: Task | None = None,
        dialect: str = "duckdb", table: str = "predictions", by: str | Sequence[str] = (),
        columns: Mapping[str, str | None] | None = None, average: str | Sequence[str] | None = None,
        view: str | None = None, checks: bool = False, curve: str | None = None,
        pretty: bool = True, **params: Any) -> str:
    """A self-contained statement computing ``metrics`` over ``table`` in ``dialect``.

    ``by``, ``columns`` and the parameters (``threshold=``, ``thresholds=``, ``bins=``,
    ``beta=``, ``k=``, ``zero_division=``, ``max_fpr=``, ``min_recall=``, ``min_precision=``,
    ``n_bins=``, ``drop_intermediate=``) mean what they mean for ``evaluate``; a weight column
    is read only when ``columns`` names one; ``truth`` may be boolean or 0/1. ``checks``: one
    row per problem found in the input instead (``segment columns, problem, count, example``).
    ``curve``: "roc", "pr", "sweep" or "reliability", the rows of ``me.curve``. ``view``: a
    ``CREATE VIEW`` of that name. Clustering metrics (not yet portable): the family's query
    over ``predictions(sample, truth, cluster, weight, segment)`` with ``$parameters``.
    """
    unknown = sorted(set(params) - set(DEFAULTS))
    if unknown:
        raise InputError(f"unknown parameter {unknown[0]!r}; parameters are {sorted(DEFAULTS)}")
    if not curve and params.get("drop_intermediate") is not None:
        raise InputError("drop_intermediate is for roc and pr curves")
    params.pop("drop_intermediate", None) if not curve else None
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if task is None:  # multilabel, or the first metric's own task when it has no multilabel form
        families = METRICS[api._names(names)[0]].families
        task = "multilabel" if "multilabel" in families else next(iter(families))
    if task == "clustering":
        return _family_query(api._names(names)[0], task, average, dialect, pretty)
    by = [by] if isinstance(by, str) else list(by)
    cols = Columns.from_mapping(columns)
    weight = (columns or {}).get("weight")
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}; tasks are {list(TASKS)}")
    if not checks and not curve and task != "regression" and names and all(
            set(METRICS[m].families) == {"regression"} for m in api._names(names)):
        task = "regression"
    try:
        sqlglot.Dialect.get_or_raise(dialect)
    except ValueError as error:
        raise InputError(str(error)) from error
    source = exp.to_table(table, dialect=dialect)
    for part in source.parts:
        part.set("quoted", True)
    builder = _Builder(dialect, by)
    if checks:
        body, what = builder.checks(source, cols, weight, task), "input checks"
    elif curve:
        body, what = builder.curve(source, cols, weight, task, curve, params), f"{curve} curve"
    else:
        body, what = builder.metrics(source, cols, weight, task, api._names(names), average,
                                     params), ", ".join(names)
    text = dialects.render(body, dialect, pretty=pretty, what=what)
    if view:
        name = exp.to_table(view, dialect=dialect)
        for part in name.parts:
            part.set("quoted", True)
        text = f"CREATE VIEW {name.sql(dialect)} AS\n{text}"
    shown = ", ".join(f"{k} {_shown(v)}" for k, v in builder.shown.items())
    header = f"-- mleval_sql: {what} ({task}) from {table}{'; ' + shown if shown else ''}.\n"
    return header + text + ("" if dialect == "spark" else ";")


def _shown(value: object) -> str:
    return "NULL" if value is None else str(value)


class _Builder:
    """CTEs of the steps, renamed so that several families live in one statement."""

    def __init__(self, dialect: str, by: list[str]) -> None:
        self.dialect, self.by = dialect, by
        self.keys = dialects.segment_keys(by)
        self.ctes: dict[str, exp.Expression] = {}
        self.shown: dict[str, object] = {}

    # -- pieces -----------------------------------------------------------------------------

    def _source(self, table: exp.Table, cols: Columns, weight: str | None, by: list[str], *,
                truth: str) -> None:
        select = canonical(table, cols, weight, by, truth=truth)
        if truth == "number":  # unknown type: a boolean's text is 'true' / 'false'
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
                if p not in ("micro", "kind", "drop_intermediate", "thresholds"):
                    self.shown.setdefault(p, params[p])
            if step.gives is not None:
                relations[step.gives] = (name, dialects.grown_keys(name, reads))
        return final_name, reads  # a final step keeps the keys of what it reads

    def _cte(self, step: str, cte: str, relations: dict[str, str], keys: list[str],
             params: dict[str, object]) -> None:
        """The CTE ``cte``: ``step`` reading ``relations`` (its names -> CTEs), segment keys
        ``keys``; made once (statistics are shared by name)."""
        if cte not in self.ctes:
            tree = dialects.bind(sqlglot.parse_one(_load(step), read="duckdb"), params)
            tree = dialects.expand_segment(tree, keys)
            tree = _rename(tree, relations)
            self.ctes[cte] = _own_ctes_prefixed(tree, cte)

    def _with(self, body: exp.Select) -> exp.Select:
        for name, tree in self.ctes.items():
            body = body.with_(exp.to_identifier(name), as_=tree.copy())
        return dialects.portable(body, self.dialect)

    def _segments_out(self, table: str | None = None) -> list[exp.Expression]:
        if not self.by:
            return []
        return [exp.alias_(exp.column(k, table), exp.to_identifier(c, quoted=True))
                for k, c in zip(self.keys, self.by, strict=True)]

    def _order(self, select: exp.Select, *columns: str | exp.Expression,
               descending: Sequence[str] = ()) -> exp.Select:
        keys = [exp.column(exp.to_identifier(c, quoted=True)) for c in self.by]
        keys += [exp.column(c) if isinstance(c, str) else c for c in columns]
        return select.order_by(*(exp.Ordered(this=k, desc=k.name in descending,
                                             nulls_first=True) for k in keys))

    # -- the three kinds of statement -------------------------------------------------------

    def metrics(self, table: exp.Table, cols: Columns, weight: str | None, task: Task,
                names: list[str], average: str | Sequence[str] | None,
                given: dict[str, Any]) -> exp.Select:
        params: dict[str, Any] = checked(**given)
        averages = api._averages(average, task)
        plan = api._plan(names, task, averages, sweep=params["thresholds"] is not None)
        params["micro"] = "micro" in averages
        if params["thresholds"] is not None and SWEEP.name not in plan.families:
            raise InputError(f"{', '.join(names)} cannot be swept over thresholds for task "
                             f"{task!r}")
        self._source(table, cols, weight, self.by, truth="number" if task == "regression"
                     else "bool")
        parts = []
        optional = self._optional(plan, params)
        # families whose labels are values first: a NULL label then takes their type (in
        # PostgreSQL a NULL that a CTE gives is text, which no UNION matches with a number)
        order = sorted(plan.keep, key=lambda f: _null_column(_rows_of(plan.families[f].final),
                                                             "label"))
        for family_name in order:
            family, wanted = plan.families[family_name], plan.keep[family_name]
            cte, keys = self._chain(family.steps(task), params, f"{family_name}_rows")
            parts.append(self._family_rows(plan, family, wanted, cte, keys, params, optional))
        body = parts[0]
        for part in parts[1:]:
            body = exp.union(body, part, distinct=False)
        out = exp.select("*").from_(exp.Subquery(this=body, alias=exp.TableAlias(
            this=exp.to_identifier("metric_rows"))))
        out = self._order(out, "metric", "average", "label", *optional)
        if params["thresholds"] is not None:
            self.shown["thresholds"] = params["thresholds"]
        return self._with(out)

    def _optional(self, plan: api._Plan, params: dict[str, object]) -> list[str]:
        used = {p for f in plan.families.values() for p in _params_of(f, plan.task)}
        wanted = {m for keep in plan.keep.values() for m in keep}
        out = []
        if "confusion_matrix" in wanted:
            out.append("predicted")
        per_label_points = any(None in averages for averages in plan.keep.get("operating",
                                                                               {}).values())
        if "threshold" in used or "thresholds" in used or per_label_points:
            out.append("threshold")
        out += [p for p in _METRIC_PARAMS if params[p] is not None
                and any(p in METRICS[m].params for m in wanted)]
        if params["bins"] is not None and "bins" in used:
            out.append("bins")
        return out

    def _family_rows(self, plan: api._Plan, family: Any, wanted: dict[str, set[str | None]],
                     cte: str, keys: list[str], params: dict[str, object],
                     optional: list[str]) -> exp.Select:
        used = _params_of(family, plan.task)
        final = sqlglot.parse_one(_load(_rows_of(family.final)), read="duckdb")
        has = {p.alias_or_name for p in final.selects}
        row = exp.column
        def typed_null(name: str) -> exp.Expression:
            return exp.cast(exp.null(), "bigint" if name in ("k", "n_bins", "bins")
                            else "double")
        values: dict[str, exp.Expression] = {
            "predicted": row("predicted") if "predicted" in has else exp.null(),
            "threshold": (row(keys[-1]) if family is SWEEP else row("threshold")
                          if "threshold" in has else dialects.literal(params["threshold"])
                          if "threshold" in used else typed_null("threshold")),
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
        label = exp.null() if _null_column(_rows_of(family.final), "label") else row("label")
        picks = []
        for metric, averages in wanted.items():
            for a in averages:
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

    def curve(self, table: exp.Table, cols: Columns, weight: str | None, task: Task,
              kind: str, given: dict[str, Any]) -> exp.Select:
        if task == "regression":
            raise InputError("curves are for classification tasks, not regression")
        self._source(table, cols, weight, self.by, truth="bool")
        drop = given.pop("drop_intermediate", None)
        if kind == "sweep":
            if given.get("thresholds") is None and given.get("bins") is None:
                raise InputError("a sweep needs thresholds= or bins=")
            params: dict[str, Any] = checked(**given)
            params["micro"] = False
            cte, keys = self._chain(SWEEP.steps(task) if task in SWEEP.stats else (),
                                    params, "sweep_rows")
            self.shown["thresholds"] = params["thresholds"]
            return self._with(self._sweep(cte, keys))
        if kind not in CURVES:
            raise InputError(f"unknown curve kind {kind!r}; kinds are {[*CURVES, 'sweep']}")
        params: dict[str, Any] = checked(**given)
        params["kind"] = kind
        params["drop_intermediate"] = (kind == "roc") if drop is None else bool(drop)
        steps = CURVES[kind]
        cte, keys = self._chain(steps, params, "curve_rows")
        final = sqlglot.parse_one(_load(steps[-1]), read="duckdb")
        rest = [p.alias_or_name for p in final.selects if p.alias_or_name != "segment"]
        out = exp.select(*self._segments_out(), *rest).from_(cte)
        order = [c for c in ("label", "threshold", "bin") if c in rest]
        return self._with(self._order(out, *order, descending=["threshold"]))

    def _sweep(self, cte: str, keys: list[str]) -> exp.Select:
        def metric(name: str) -> exp.Expression:
            return exp.Max(this=exp.Case(ifs=[exp.If(
                this=exp.EQ(this=exp.column("metric"), expression=exp.Literal.string(name)),
                true=exp.column("value"))]))
        wide = exp.select(
            *(exp.column(k) for k in keys), "label",
            *(exp.alias_(metric(m), m) for m in api.SWEEP_METRICS),
        ).from_(cte).where(exp.and_(
            exp.Is(this=exp.column("average"), expression=exp.null()),
            exp.In(this=exp.column("metric"),
                   expressions=[exp.Literal.string(m) for m in api.SWEEP_METRICS]),
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
        return self._order(out, "label", exp.column("threshold"), descending=["threshold"])


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


def _family_query(metric: str, task: Task, average: Any, dialect: str, pretty: bool) -> str:
    """A metric's family steps as one query over ``predictions`` with ``$parameters``."""
    from mleval_sql import queries
    from mleval_sql.registry import STEPS as steps_of
    steps = METRICS[metric].family(task, average).steps(task)
    tree = sqlglot.parse_one(queries.load(steps[-1]), read="duckdb")
    ctes = [exp.CTE(this=sqlglot.parse_one(queries.load(s), read="duckdb"),
                    alias=exp.TableAlias(this=exp.to_identifier(steps_of[s].gives)))
            for s in steps[:-1]]
    own = tree.args.get("with_")
    tree.set("with_", exp.With(expressions=[*ctes, *(own.expressions if own else [])]))
    params = sorted({p for s in steps for p in steps_of[s].params})
    header = (f"-- {metric} ({task}): {' -> '.join(steps)}. Reads predictions(sample, truth, "
              f"cluster, weight, segment); parameters: "
              f"{', '.join('$' + p for p in params) or 'none'}.\n")
    return header + dialects.render(tree, dialect, pretty=pretty, what=metric)
