"""One standalone query per metric, for a BI tool or a cluster: the family's steps as CTEs.

The files of ``queries/`` are building blocks, each reading the relation the previous step
gives; ``sql()`` chains them into one query over a relation named ``predictions`` and renders
it for any dialect sqlglot writes (DuckDB's own text is kept as the files have it).

>>> print(sql("f1", task="multilabel").splitlines()[0])
-- f1 (multilabel): threshold_counts -> decision_metrics. Reads predictions(sample, label, ...
"""

from __future__ import annotations

import sqlglot
from sqlglot import exp

from mleval_sql import queries
from mleval_sql.registry import METRICS, STEPS
from mleval_sql.schema import TASKS, InputError, Task


def sql(metric: str, *, task: Task | None = None, average: str | None = None,
        dialect: str = "duckdb", pretty: bool = True) -> str:
    """The query computing ``metric`` for ``task`` from a relation named ``predictions``.

    It gives the family's tidy rows (``segment, metric, average, label, value``) for every
    metric of the family; filter on ``metric`` for one. Parameters stay named (``$threshold``).
    ``task`` defaults to multilabel, or to the metric's first task when it has no multilabel
    form (clustering metrics read ``predictions(sample, truth, cluster, weight, segment)``).
    """
    if metric not in METRICS:
        raise InputError(f"unknown metric {metric!r} (`mleval metrics` lists them)")
    if task is None:
        families = METRICS[metric].families
        task = "multilabel" if "multilabel" in families else next(iter(families))
    if task not in TASKS:
        raise InputError(f"unknown task {task!r}; tasks are {list(TASKS)}")
    steps = METRICS[metric].family(task, average).steps(task)
    tree = sqlglot.parse_one(queries.load(steps[-1]), read="duckdb")
    ctes = [exp.CTE(this=sqlglot.parse_one(queries.load(s), read="duckdb"),
                    alias=exp.TableAlias(this=exp.to_identifier(STEPS[s].gives)))
            for s in steps[:-1]]
    own = tree.args.get("with_")
    tree.set("with_", exp.With(expressions=[*ctes, *(own.expressions if own else [])]))
    params = sorted({p for s in steps for p in STEPS[s].params})
    columns = ("sample, truth, cluster, weight, segment" if task == "clustering"
               else "sample, label, score, truth, weight, segment")
    header = (f"-- {metric} ({task}): {' -> '.join(steps)}. Reads predictions({columns}); "
              f"parameters: "
              f"{', '.join('$' + p for p in params) or 'none'}.\n")
    try:
        body = tree.sql(dialect=dialect, pretty=pretty, unsupported_level=sqlglot.ErrorLevel.RAISE)
    except sqlglot.errors.UnsupportedError as error:
        raise InputError(f"{metric} cannot be written in {dialect}: {error}") from error
    except ValueError as error:  # an unknown dialect name
        raise InputError(str(error)) from error
    return header + body
