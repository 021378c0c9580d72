"""``evaluate``: check the input, plan the statistics once, run them on an engine, tidy the rows.

>>> import polars as pl
>>> data = pl.DataFrame({"sample": [1, 2, 3, 4], "label": "spam",
...                      "score": [0.9, 0.4, 0.6, 0.2], "truth": [1, 1, 0, 0]})
>>> evaluate(data, metrics=["precision", "recall"])["value"].to_list()
[0.5, 0.5]
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import polars as pl

from mleval_sql.engines import EngineName, make_engine
from mleval_sql.registry import AVERAGES, METRICS, STEPS, Family, default_averages
from mleval_sql.schema import Columns, InputError, Task, check_columns, check_summary
from mleval_sql.sources import as_source

DEFAULT_METRICS = ("accuracy", "precision", "recall", "f1")


@dataclass
class _Plan:
    """Which rows of which family a request keeps: metric -> averages (None: no average)."""

    task: Task
    keep: dict[str, dict[str, set[str | None]]] = field(default_factory=dict)
    families: dict[str, Family] = field(default_factory=dict)

    def add(self, family: Family, metric: str, average: str | None) -> None:
        self.families[family.name] = family
        self.keep.setdefault(family.name, {}).setdefault(metric, set()).add(average)

    def steps(self) -> list[str]:
        ordered: dict[str, None] = {}
        for family in self.families.values():
            ordered.update(dict.fromkeys(family.steps(self.task)))
        return list(ordered)


def evaluate(
    source: Any,
    metrics: str | Sequence[str] = DEFAULT_METRICS,
    *,
    by: str | Sequence[str] = (),
    task: Task | None = None,
    engine: EngineName = "duckdb",
    threshold: float = 0.5,
    average: str | Sequence[str] | None = None,
    beta: float = 1.0,
    k: int = 2,
    zero_division: float | None = None,
    columns: Mapping[str, str | None] | None = None,
    memory_limit: str | None = None,
    connection: Any = None,
) -> pl.DataFrame:
    """Metrics of the predictions in ``source``, one tidy row per value.

    ``source``: parquet path(s), glob or hive folder; Arrow, polars, pandas or DuckDB data with
    columns ``sample, label, score, truth[, weight]`` (other names through ``columns=``).
    ``by``: segment columns. ``average``: "none" (per label), "micro", "macro", "weighted",
    "samples", "macro_std", or a list; default per label for binary, macro otherwise.
    ``zero_division``: the value of 0/0 (0, 1, or None for null).

    Returns ``*by, metric, average, label, [predicted, threshold, beta, k,] value``, sorted.
    """
    metric_names = _names(metrics)
    by = [by] if isinstance(by, str) else list(by)
    params = _params(threshold=threshold, beta=beta, k=k, zero_division=zero_division)
    cols = Columns.from_mapping(columns)
    src = as_source(source)
    weight = check_columns(src.schema(), cols, by)
    options: dict[str, Any] = {"memory_limit": memory_limit}
    if engine == "duckdb":
        options["connection"] = connection
    runner = make_engine(engine, src, cols, weight, by, **options)
    try:
        task = check_summary(runner.summary(), cols, weight, task)
        plan = _plan(metric_names, task, _averages(average, task))
        results = runner.results(plan.steps(), params)
    finally:
        runner.close()
    return _tidy(plan, results, params, by)


def _names(metrics: str | Sequence[str]) -> list[str]:
    names = [metrics] if isinstance(metrics, str) else list(metrics)
    if not names:
        raise InputError("no metrics asked for")
    for name in names:
        if name not in METRICS:
            stem = str(name).removesuffix("_score")  # scikit-learn's function names
            close = [stem] if stem in METRICS else difflib.get_close_matches(stem, METRICS, n=1,
                                                                             cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputError(f"unknown metric {name!r}{hint} (`mleval metrics` lists them)")
    return list(dict.fromkeys(names))


def _averages(average: str | Sequence[str] | None, task: Task) -> tuple[str, ...]:
    if average is None:
        return default_averages(task)
    chosen = (average,) if isinstance(average, str) else tuple(average)
    for a in chosen:
        if a not in AVERAGES:
            raise InputError(f"unknown average {a!r}; averages are {list(AVERAGES)}")
    return chosen


def _params(*, threshold: float, beta: float, k: int,
            zero_division: float | None) -> dict[str, object]:
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)) \
            or not math.isfinite(threshold):
        raise InputError(f"threshold must be a finite number, got {threshold!r}")
    if isinstance(beta, bool) or not isinstance(beta, (int, float)) \
            or not (beta > 0 and math.isfinite(beta)):
        raise InputError(f"beta must be a positive finite number, got {beta!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise InputError(f"k must be a whole number >= 1, got {k!r}")
    if zero_division is not None and (isinstance(zero_division, float)
                                      and math.isnan(zero_division)):
        zero_division = None
    if zero_division not in (None, 0, 1):
        raise InputError(f"zero_division must be 0, 1 or None, got {zero_division!r}")
    params = {"threshold": float(threshold), "beta": float(beta), "k": k,
              "zero_division": None if zero_division is None else float(zero_division)}
    return params


def _plan(metrics: list[str], task: Task, averages: tuple[str, ...]) -> _Plan:
    plan = _Plan(task)
    for name in metrics:
        metric = METRICS[name]
        supported = metric.averages(task)
        if not supported:
            plan.add(metric.family(task), name, None)
            continue
        for average in averages:
            if average not in supported:
                raise InputError(f"metric {name!r} has no average {average!r} for task "
                                 f"{task!r}; its averages are {list(supported)}")
            plan.add(metric.family(task, average), name, None if average == "none" else average)
    return plan


def _tidy(plan: _Plan, results: dict[str, pl.DataFrame], params: dict[str, object],
          by: list[str]) -> pl.DataFrame:
    frames = []
    for family_name, wanted in plan.keep.items():
        family = plan.families[family_name]
        rows = results[family.final]
        keys = pl.DataFrame(
            [(m, a) for m, avgs in wanted.items() for a in avgs],
            schema={"metric": pl.String, "average": pl.String}, orient="row")
        rows = rows.with_columns(pl.col("average").cast(pl.String)).join(
            keys, on=["metric", "average"], nulls_equal=True)
        thresholded = any("threshold" in STEPS[s].params for s in family.steps(plan.task))
        frames.append(rows.with_columns(
            threshold=pl.lit(params["threshold"] if thresholded else None, dtype=pl.Float64),
            beta=pl.when(pl.col("metric") == "fbeta").then(pl.lit(params["beta"])),
            k=pl.when(pl.col("metric") == "top_k_accuracy").then(pl.lit(params["k"])),
        ))
    out = pl.concat(frames, how="diagonal_relaxed")
    out = out.unnest("segment") if by else out.drop("segment")
    optional = [c for c in ("predicted", "threshold", "beta", "k")
                if c in out.columns and out[c].null_count() < out.height]
    order = [*by, "metric", "average", "label", *optional, "value"]
    return out.select(order).sort([*by, "metric", "average", "label", *optional],
                                  nulls_last=False, maintain_order=True)
