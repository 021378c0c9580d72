"""The dbt package ``dbt_mleval/`` generated from the statements of :mod:`mleval_sql.statement`:
``python -m mleval_sql.dbt [DIR]`` writes its ``macros/`` (a test regenerates and compares).

Each adapter gets one template per (task, family): the statement ``me.sql`` writes for every
metric and average of that family, over a relation ``mleval_input`` with canonical column
names and one segment column, with the parameters the macro takes as tokens it fills in. The
macro ``evaluate`` (macros/evaluate.sql, from :data:`EVALUATE`) writes ``mleval_input`` from
the user's relation and columns, picks the templates of the metrics asked, keeps their rows and
orders them as ``evaluate`` does. Nothing in the package's core imports this module.
"""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from pathlib import Path

from sqlglot import exp

from mleval_sql import statement
from mleval_sql.params import PARAMS
from mleval_sql.registry import METRICS, default_averages
from mleval_sql.request import OPERATING_THRESHOLD, Plan, Request
from mleval_sql.schema import Columns, InputError

#: dbt adapter -> sqlglot dialect; ``default`` (any other adapter): the portable form.
ADAPTERS = {"default": "postgres", "duckdb": "duckdb", "postgres": "postgres",
            "spark": "spark", "snowflake": "snowflake", "bigquery": "bigquery"}
#: The tasks the package covers, with whether their input has a label column.
TASKS = {"binary": False, "binary_labelled": True, "multiclass": True, "multilabel": True,
         "regression": True}
#: Families left out of this first slice (no truth in the statement, or one row per sample).
SKIPPED = {"estimated", "clustering", "contingency"}
#: The parameters the macro takes, each a sentinel value the statement is written with and
#: the token the macro replaces it with.
TOKENS = {"threshold": (0.123456789012345, "__MLEVAL_THRESHOLD__"),
          "beta": (1.23456789012345, "__MLEVAL_BETA__")}
#: The token that stands for the label of a binary input without a label column (the name of
#: its score column, as ``evaluate`` names it).
SCORE_NAME = ("mleval_score", "__MLEVAL_SCORE_NAME__")
SEGMENT = "mleval_segment"
COLUMNS = {"sample": "mleval_sample", "label": "mleval_label", "score": SCORE_NAME[0],
           "truth": "mleval_truth", "weight": "mleval_weight"}
#: The optional columns of evaluate's rows, in their order.
OPTIONAL = ("predicted", "threshold", *(n for n, p in PARAMS.items() if p.column == "metric"),
            "bins", OPERATING_THRESHOLD)


def _pairs(task: str) -> dict[str, dict[str, list[str]]]:
    """family -> metric -> the averages ("none": per label) that reach it for ``task``."""
    out: dict[str, dict[str, list[str]]] = {}
    for name, metric in METRICS.items():
        if task not in metric.families:
            continue
        supported = metric.averages(task)
        for average in supported or (None,):
            family = metric.family(task, average) if supported else metric.family(task)
            if family.name in SKIPPED:
                continue
            out.setdefault(family.name, {}).setdefault(name, []).append(average or "none")
    return out


def _template(dialect: str, task: str, labelled: bool,
              wanted: dict[str, list[str]]) -> tuple[str, list[str], bool]:
    """The statement of ``wanted`` (metric -> averages, one family) as a template; its optional
    columns; whether its label is a NULL literal."""
    columns = dict(COLUMNS) if labelled else {**COLUMNS, "label": None}
    params = {p: value for p, (value, _) in TOKENS.items()}
    averages = tuple(dict.fromkeys(a for avg in wanted.values() for a in avg))
    request = Request.statement("evaluate", metrics=list(wanted), task=task, by=[SEGMENT],
                                columns=columns, single=True, **params)
    request = replace(request, average=averages)
    plan = Plan(task, request)
    for name, avg in wanted.items():
        metric = METRICS[name]
        for a in avg:
            family = metric.family(task, a) if metric.averages(task) else metric.family(task)
            plan.add(family, name, None if a == "none" else a)
    cols = Columns.from_mapping(columns)
    builder = statement._Builder(dialect, [SEGMENT], None)
    body = builder.metrics(exp.to_table("mleval_input"), cols, COLUMNS["weight"], plan)
    body.set("order", None)  # the macro orders the rows of every family together
    family = plan.families[next(iter(plan.keep))]
    optional = builder._optional(plan, {**request.engine_params(plan), "unit_weights": False})
    null_label = statement._null_column(statement._rows_of(plan.final(family)), "label")
    text, _ = statement._rendered(body, dialect, request, view=None, pretty=True, what="")
    for value, token in TOKENS.values():
        if repr(value) not in text:
            continue
        text = text.replace(repr(value), token)
    text = text.replace(f"'{SCORE_NAME[0]}'", SCORE_NAME[1])
    return text.rstrip(";"), optional, null_label


def _optional(task: str, labelled: bool, metric: str, average: str) -> list[str]:
    """The optional columns ``evaluate`` gives for ``metric`` at ``average`` (a request's are
    the union of its metrics')."""
    columns = dict(COLUMNS) if labelled else {**COLUMNS, "label": None}
    request = Request.statement("evaluate", metrics=[metric], task=task, columns=columns,
                                average=None if not METRICS[metric].averages(task)
                                else [average])
    plan = request.plan(task)
    builder = statement._Builder("duckdb", [], None)
    return builder._optional(plan, {**request.engine_params(plan), "unit_weights": False})


def catalogue() -> dict[str, object]:
    """What the macro needs to know beside the templates: per task, each metric's averages
    with the family each reaches and the optional columns it gives, the default averages."""
    tasks: dict[str, object] = {}
    for key, labelled in TASKS.items():
        task = key.removesuffix("_labelled")
        metrics: dict[str, dict[str, str]] = {}
        optional: dict[str, dict[str, list[str]]] = {}
        for family, wanted in _pairs(task).items():
            for name, averages in wanted.items():
                for a in averages:
                    metrics.setdefault(name, {})[a] = family
                    optional.setdefault(name, {})[a] = _optional(task, labelled, name, a)
        tasks[key] = {"task": task, "labelled": labelled, "metrics": metrics,
                      "optional": optional,
                      "no_averages": [m for m in metrics if not METRICS[m].averages(task)],
                      "default_averages": list(default_averages(task))}
    averages = sorted({a for t in tasks.values() for m in t["metrics"].values() for a in m})
    return {"tasks": tasks, "optional": list(OPTIONAL), "averages": averages,
            "tokens": {p: token for p, (_, token) in TOKENS.items()},
            "score_name_token": SCORE_NAME[1]}


def templates(adapter: str) -> dict[str, dict[str, object]]:
    """``task/family`` -> its template (``sql``), optional columns and NULL label, for
    ``adapter``."""
    dialect = ADAPTERS[adapter]
    out: dict[str, dict[str, object]] = {}
    for key, labelled in TASKS.items():
        task = key.removesuffix("_labelled")
        for family, wanted in _pairs(task).items():
            try:
                sql, optional, null_label = _template(dialect, task, labelled, wanted)
            except (InputError, FileNotFoundError):  # a family not written: its metrics raise
                continue
            out[f"{key}/{family}"] = {"sql": sql, "optional": optional,
                                      "null_label": null_label}
    return out


def _jinja(value: object) -> str:
    """``value`` as a Jinja literal (JSON, with Jinja's none/true/false)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k)}: {_jinja(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_jinja(v) for v in value) + "]"
    return json.dumps(value)


HEADER = "{#- Generated by `python -m mleval_sql.dbt` from mleval_sql: do not edit. -#}\n"


def files() -> dict[str, str]:
    """Every generated file of the package, by its path under ``dbt_mleval/``."""
    out = {"macros/evaluate.sql": HEADER + EVALUATE,
           "macros/catalogue.sql": HEADER + "{% macro _catalogue() %}{{ return("
           + _jinja(catalogue()) + ") }}{% endmacro %}\n"}
    for adapter in ADAPTERS:
        if adapter == "default":  # the portable form: PostgreSQL's, which the tests run
            continue
        parts = [HEADER, f"{{% macro _templates_{adapter}() %}}\n{{% set t = {{}} %}}\n"]
        seen: dict[str, str] = {}  # a statement shared by several tasks is written once
        for key, entry in templates(adapter).items():
            sql = str(entry["sql"])
            if "{% endraw %}" in sql:
                raise ValueError(f"{key}: the statement holds a Jinja end of raw block")
            if sql not in seen:
                seen[sql] = f"sql_{len(seen)}"
                parts.append(f"{{% set {seen[sql]} %}}{{% raw %}}\n{sql}\n{{% endraw %}}"
                             "{% endset %}\n")
            parts.append(f"{{% do t.update({{{json.dumps(key)}: {{'sql': {seen[sql]}, "
                         f"'optional': {_jinja(entry['optional'])}, 'null_label': "
                         f"{_jinja(entry['null_label'])}}}}}) %}}\n")
        parts.append("{{ return(t) }}\n{% endmacro %}\n")
        out[f"macros/templates_{adapter}.sql"] = "".join(parts)
    return out


def write(root: Path) -> list[Path]:
    """The generated files written under ``root`` (``dbt_mleval/``); the paths written."""
    written = []
    for name, text in files().items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written


#: The package's entry macro and its assembly, written as they are (Jinja; the templates and the
#: catalogue they read are generated).
EVALUATE = (Path(__file__).with_name("dbt_evaluate.jinja")).read_text()


def main(argv: list[str] | None = None) -> int:
    """Write the package's generated files (default: dbt_mleval/ beside mleval_sql/)."""
    args = sys.argv[1:] if argv is None else argv
    root = Path(args[0]) if args else Path(__file__).resolve().parent.parent / "dbt_mleval"
    for path in write(root):
        print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
