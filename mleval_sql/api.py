"""``evaluate`` and ``curve``: check the input, plan the statistics once, run them on an engine,
tidy the rows.

>>> import polars as pl
>>> data = pl.DataFrame({"sample": [1, 2, 3, 4], "label": "spam",
...                      "score": [0.9, 0.4, 0.6, 0.2], "truth": [1, 1, 0, 0]})
>>> evaluate(data, metrics=["precision", "recall"])["value"].to_list()
[0.5, 0.5]
"""

from __future__ import annotations

import difflib
import logging
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import polars as pl

from mleval_sql import clustering
from mleval_sql.engines import ENGINES, Engine, EngineName, Keep, make_engine, memory_bytes
from mleval_sql.params import DEFAULTS, PARAM_COLUMNS, PARAMS, checked
from mleval_sql.progress import stage
from mleval_sql.registry import (
    AVERAGES,
    CURVES,
    DECISIONS,
    FUSED,
    METRICS,
    OPERATING,
    SAMPLES,
    STEPS,
    SWEEP,
    Family,
    default_averages,
)
from mleval_sql.schema import (
    Columns,
    InputError,
    Task,
    check_columns,
    check_probabilities,
    check_summary,
)
from mleval_sql.sources import Parquet, as_source

LOG = logging.getLogger("mleval_sql")
DEFAULT_METRICS = ("accuracy", "precision", "recall", "f1")
CurveKind = Literal["roc", "pr", "sweep", "reliability"]
SWEEP_METRICS = ("tp", "fp", "fn", "tn", "precision", "recall")
def engine_errors() -> tuple[type[BaseException], ...]:
    """What the engines raise when they cannot read or run something (DuckDB's errors where
    DuckDB is imported: a polars run does not import it)."""
    duckdb = sys.modules.get("duckdb")
    return (pl.exceptions.PolarsError, OSError, *([duckdb.Error] if duckdb else []))


@dataclass
class _Plan:
    """Which rows of which family a request keeps: metric -> averages (None: no average)."""

    task: Task
    keep: dict[str, dict[str, set[str | None]]] = field(default_factory=dict)
    families: dict[str, Family] = field(default_factory=dict)

    def add(self, family: Family, metric: str, average: str | None) -> None:
        self.families[family.name] = family
        self.keep.setdefault(family.name, {}).setdefault(metric, set()).add(average)

    def rows(self) -> Keep:
        """The metrics and averages each final step is asked for."""
        kept: dict[str, tuple[set[str], set[str]]] = {}
        for name, wanted in self.keep.items():
            metrics, averages = kept.setdefault(self.families[name].final, (set(), set()))
            metrics.update(wanted)
            averages.update("none" if a is None else a for a in set().union(*wanted.values()))
        return {step: (sorted(m), sorted(a)) for step, (m, a) in kept.items()}

    def steps(self) -> list[str]:
        ordered: dict[str, None] = {}
        for family in self.families.values():
            ordered.update(dict.fromkeys(family.steps(self.task)))
        fused: dict[str, None] = {}
        for step in ordered:  # a statistic another step's pass also gives is read off that
            instead = FUSED.get(step, (step,))
            fused.update(dict.fromkeys(instead if instead[0] in ordered else (step,)))
        return list(fused)


def evaluate(
    source: Any,
    metrics: str | Sequence[str] | None = None,
    *,
    by: str | Sequence[str] = (),
    task: Task | None = None,
    engine: EngineName = "duckdb",
    threshold: float = DEFAULTS["threshold"],
    thresholds: Sequence[float] | None = DEFAULTS["thresholds"],
    bins: int | None = DEFAULTS["bins"],
    average: str | Sequence[str] | None = None,
    beta: float = DEFAULTS["beta"],
    k: int = DEFAULTS["k"],
    zero_division: float | None = DEFAULTS["zero_division"],
    max_fpr: float | None = DEFAULTS["max_fpr"],
    min_recall: float = DEFAULTS["min_recall"],
    min_precision: float = DEFAULTS["min_precision"],
    n_bins: int = DEFAULTS["n_bins"],
    average_method: str = DEFAULTS["average_method"],
    columns: Mapping[str, str | None] | None = None,
    memory_limit: str | int | None = None,
    connection: Any = None,
    wide: bool = False,
    storage_options: Mapping[str, str] | None = None,
    as_of: int | str | datetime | None = None,
) -> pl.DataFrame:
    """Metrics of the predictions in ``source``, one tidy row per value.

    ``source``: parquet path(s), glob or hive folder, local or in object storage (``s3://``,
    ``gs://``, ``az://``; ``storage_options``: what the environment does not say), a Delta or
    Iceberg table (``as_of``: an earlier version or snapshot); Arrow, polars, pandas or DuckDB
    data with columns ``sample, label, score, truth[, weight]`` (other names: ``columns=``).
    ``by``: segment columns. ``average``: "none" (per label), "micro", "macro", "weighted",
    "samples", "macro_std", "variance_weighted" (r2), or a list; default per label for binary
    and regression, macro otherwise. ``zero_division``: the value of 0/0 (0, 1, or None: null).
    ``thresholds`` (a list) or ``bins`` (N: thresholds 0, 1/N, ..., 1) sweep the decision
    metrics; ``bins`` also puts ranking metrics on that grid (pairs in one bin count as ties).
    ``metrics`` default: accuracy, precision, recall, f1 (clustering: adjusted_rand,
    adjusted_mutual_info, homogeneity, completeness, v_measure). Clustering reads one row per
    sample, ``sample, truth, cluster[, weight]``; ``average_method`` ("arithmetic",
    "geometric", "min", "max") is the mean of the entropies that normalized and adjusted mutual
    information divide by.

    Returns ``*by, metric, average, label, [predicted, threshold, <parameters>,] value``, sorted.
    ``wide=True``: one row per segment (and label, sweep threshold, predicted class where they
    apply) and one column per metric (``f1``) or metric and average (``f1_macro``), see
    :func:`widen`.

    >>> result = evaluate("fixtures/lake", ["roc_auc", "f1"], by="model", average="macro")
    >>> result.select("model", "metric", pl.col("value").round(4)).rows()
    [('a', 'f1', 0.5648), ('a', 'roc_auc', 0.7327), ('b', 'f1', 0.7831), ('b', 'roc_auc', 0.8974)]
    """
    names = None if metrics is None else _names(metrics)
    by = [by] if isinstance(by, str) else list(by)
    params = _engine_params(threshold=threshold, thresholds=thresholds, bins=bins, beta=beta,
                            k=k, zero_division=zero_division, max_fpr=max_fpr,
                            min_recall=min_recall, min_precision=min_precision,
                            n_bins=n_bins, average_method=average_method)
    for only in ("regression", "clustering"):  # tasks never guessed from values
        if task is None and names and all(set(METRICS[m].families) == {only} for m in names):
            task = only
    with _prepared(source, by=by, task=task, engine=engine, columns=columns,
                   memory_limit=memory_limit, connection=connection,
                   storage_options=storage_options, as_of=as_of) as (runner, task, check_metrics):
        if names is None:
            names = list(clustering.DEFAULT_METRICS if task == "clustering"
                         else DEFAULT_METRICS)
        check_metrics([m for m in names
                       if METRICS[m].probabilities or METRICS[m].whole_weights])
        averages = _averages(average, task)
        plan = _plan(names, task, averages, sweep=params["thresholds"] is not None)
        params["micro"] = "micro" in averages  # a pooled curve costs a sort of its own
        params["adjusted"] = "adjusted_mutual_info" in names  # E[MI]: a sum over the margins
        if thresholds is not None and SWEEP.name not in plan.families:
            raise InputError(f"{', '.join(names)} cannot be swept over thresholds for task "
                             f"{task!r}; sweeps cover the label-wise decision metrics of binary "
                             "and multilabel tasks")
        results = runner.results(plan.steps(), params,
                                 numeric_truth=task in ("regression", "clustering"),
                                 keep=plan.rows())
    tidy = _tidy(plan, results, params, by)
    return widen(tidy, by, sweep=params["thresholds"] is not None) if wide else tidy


def check(
    source: Any,
    *,
    by: str | Sequence[str] = (),
    task: Task | None = None,
    engine: EngineName = "duckdb",
    columns: Mapping[str, str | None] | None = None,
    memory_limit: str | int | None = None,
    connection: Any = None,
    storage_options: Mapping[str, str] | None = None,
    as_of: int | str | datetime | None = None,
) -> Task:
    """Run only the input checks that every evaluation starts with; return the task.

    Raises ``InputError`` naming the first problem, as ``evaluate`` would: a pre-flight for a
    nightly job, at the cost of one pass that groups by sample.

    >>> check("fixtures/lake", by="model")
    'multilabel'
    """
    by = [by] if isinstance(by, str) else list(by)
    with _prepared(source, by=by, task=task, engine=engine, columns=columns,
                   memory_limit=memory_limit, connection=connection,
                   storage_options=storage_options, as_of=as_of) as (_, task, _):
        return task


def curve(
    source: Any,
    kind: CurveKind = "roc",
    *,
    by: str | Sequence[str] = (),
    task: Task | None = None,
    engine: EngineName = "duckdb",
    thresholds: Sequence[float] | None = DEFAULTS["thresholds"],
    bins: int | None = DEFAULTS["bins"],
    n_bins: int = DEFAULTS["n_bins"],
    drop_intermediate: bool | None = None,
    columns: Mapping[str, str | None] | None = None,
    memory_limit: str | int | None = None,
    connection: Any = None,
    storage_options: Mapping[str, str] | None = None,
    as_of: int | str | datetime | None = None,
) -> pl.DataFrame:
    """A curve per (segment, label) as a table.

    ``roc`` and ``pr``: one row per distinct score (tied scores are one threshold) plus the
    origin (threshold +inf), ``*by, label, threshold, tp, fp, fn, tn, tpr, fpr, precision,
    recall``; ``drop_intermediate`` drops the points scikit-learn drops (default: True for roc,
    False for pr, as scikit-learn). ``sweep``: the same columns at ``thresholds`` or at ``bins``
    + 1 evenly spaced thresholds. ``reliability``: ``*by, label, bin, lower, upper, mean_score,
    observed_rate, weight`` over ``n_bins`` equal-width bins (non-empty ones).

    >>> table = curve("fixtures/lake", "roc", by="model")
    >>> table.columns
    ['model', 'label', 'threshold', 'tp', 'fp', 'fn', 'tn', 'tpr', 'fpr', 'precision', 'recall']
    >>> table.filter(model="a", label="cat")["threshold"][0]  # the origin first
    inf
    """
    by = [by] if isinstance(by, str) else list(by)
    _check_curve_options(kind, n_bins=(n_bins != DEFAULTS["n_bins"], ("reliability",)),
                         bins=(bins is not None, ("roc", "pr", "sweep")),
                         drop_intermediate=(drop_intermediate is not None, ("roc", "pr")))
    if kind == "sweep":
        if thresholds is None and bins is None:
            raise InputError("a sweep needs thresholds= or bins=")
        rows = evaluate(source, SWEEP_METRICS, by=by, task=task, engine=engine,
                        thresholds=thresholds, bins=bins, average="none", columns=columns,
                        memory_limit=memory_limit, connection=connection,
                        storage_options=storage_options, as_of=as_of)
        return _sweep_table(rows, by)
    if kind not in CURVES:
        raise InputError(f"unknown curve kind {kind!r}; kinds are {[*CURVES, 'sweep']}")
    if thresholds is not None:
        raise InputError(f"thresholds= is for sweeps; a {kind} curve has every distinct score")
    params = _engine_params(bins=bins, n_bins=n_bins)
    params["kind"] = kind
    params["drop_intermediate"] = (kind == "roc") if drop_intermediate is None \
        else bool(drop_intermediate)
    with _prepared(source, by=by, task=task, engine=engine, columns=columns,
                   memory_limit=memory_limit, connection=connection,
                   storage_options=storage_options, as_of=as_of) as (runner, task, check_metrics):
        if task in ("regression", "clustering"):
            raise InputError(f"curves are for classification tasks, not {task}")
        if kind == "reliability":
            check_metrics(["a reliability table"])
        steps = CURVES[kind]
        table = runner.results(steps, params)[steps[-1]]
    out = _unpack_segment(table, by)
    keys = [c for c in ("label", "threshold", "bin") if c in out.columns]
    descending = [c == "threshold" for c in keys]
    return out.sort([*by, *keys], descending=[False] * len(by) + descending, nulls_last=False,
                    maintain_order=True)


def _check_curve_options(kind: str, **options: tuple[bool, tuple[str, ...]]) -> None:
    """An option given for a curve kind that does not use it is an error, not ignored."""
    for name, (given, kinds) in options.items():
        if given and kind not in kinds:
            raise InputError(f"{name} does not apply to a {kind} curve (only to "
                             f"{' / '.join(kinds)})")


@contextmanager
def _prepared(source: Any, *, by: list[str], task: Task | None, engine: EngineName,
              columns: Mapping[str, str | None] | None, memory_limit: str | int | None,
              connection: Any, storage_options: Mapping[str, str] | None = None,
              as_of: int | str | datetime | None = None,
              ) -> Iterator[tuple[Engine, Task, Any]]:
    """An engine over the checked input, the task, and the checks that depend on the metrics
    asked (scores as probabilities; clustering: weights as counts)."""
    if memory_limit is not None:
        memory_bytes(memory_limit)  # checked in our words before any work
    entry = ENGINES.get(engine)
    if entry is not None and entry.reader is not None:  # e.g. a table of a database
        src: Any = entry.read(source, connection)
    else:
        src = as_source(source, storage_options=storage_options, as_of=as_of)
    cols = Columns.from_mapping(columns)
    used = [*cols.required().values(), cols.weight, *by]
    if isinstance(src, Parquet):
        src.check(used)  # before the engines read one file's schema for all
    schema = src.schema()
    clusters = clustering.is_clustering(schema, cols, by, task, mapped=set(columns or ()))
    if clusters and isinstance(src, Parquet):
        src.check([cols.cluster])
        used.append(cols.cluster)
    if not clusters:
        cols = cols.for_schema(schema)
    weight = (clustering.check_columns if clusters else check_columns)(schema, cols, by)
    if weight is not None:
        LOG.info("counts are weighted by column %r (columns={'weight': None}, --column weight= "
                 "to ignore it)", weight)
    runner = make_engine(engine, src, cols, weight, by, memory_limit=memory_limit,
                         clustering=clusters, connection=connection)
    try:
        with stage("checks"):
            summary = runner.summary()
        if clusters:
            yield runner, clustering.check_summary(summary, cols, weight), (
                lambda metrics: clustering.check_whole_weights(summary, weight, metrics))
            return
        task = check_summary(summary, cols, weight, task)
        yield runner, task, lambda metrics: check_probabilities(summary, cols, metrics)
    except engine_errors() as error:
        # a corrupt page shows only when read, and the engines' errors may not name the file
        found = src.unreadable(used) if isinstance(src, Parquet) else None
        if found is not None:
            raise found from error
        raise
    finally:
        runner.close()


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


def _engine_params(**values: Any) -> dict[str, object]:
    """The checked parameters (:func:`mleval_sql.params.checked`) and the engines' switches."""
    return {**checked(**values),
            "micro": True,  # $micro of ranking_metrics; evaluate() sets it from its averages
            "adjusted": True}  # $adjusted of clustering_metrics; evaluate() sets it too


def _plan(metrics: list[str], task: Task, averages: tuple[str, ...], *, sweep: bool) -> _Plan:
    plan = _Plan(task)
    for name in metrics:
        metric = METRICS[name]
        supported = metric.averages(task)
        if not supported:
            plan.add(_sweep_family(metric.family(task), name, task, sweep), name, None)
            continue
        for average in averages:
            if average not in supported:
                raise InputError(f"metric {name!r} has no average {average!r} for task "
                                 f"{task!r}; its averages are {list(supported)}")
            family = _sweep_family(metric.family(task, average), name, task, sweep)
            plan.add(family, name, None if average == "none" else average)
    return plan


def _sweep_family(family: Family, metric: str, task: Task, sweep: bool) -> Family:
    """With a threshold sweep, decision metrics come from the sweep's counts."""
    if not sweep or family not in (DECISIONS, SAMPLES):
        return family
    if family is SAMPLES or task not in SWEEP.stats:
        raise InputError(f"{metric} cannot be swept over thresholds for task {task!r}; sweeps "
                         "cover the label-wise decision metrics of binary and multilabel tasks")
    return SWEEP


def _param_columns(family: Family, task: Task, metrics: Iterable[str],
                   params: dict[str, object], *, skip: Sequence[str]) -> list[pl.Expr]:
    """A column per parameter shown in the results (a sweep's rows have their own
    ``threshold``: ``skip``): set on the rows of the metrics that name it, or on every row of a
    family whose steps read it (``Param.column``), null elsewhere."""
    used = {p for s in family.steps(task) for p in STEPS[s].params}
    columns = []
    for name in PARAM_COLUMNS:
        param = PARAMS[name]
        value = pl.lit(params[name], dtype=param.dtype)
        if name in skip:
            continue
        if param.column == "step":
            columns.append((value if name in used else pl.lit(None, param.dtype)).alias(name))
        else:
            owners = [m for m in metrics if name in METRICS[m].params]
            columns.append(pl.when(pl.col("metric").is_in(owners)).then(value).alias(name))
    return columns


def _tidy(plan: _Plan, results: dict[str, pl.DataFrame], params: dict[str, object],
          by: list[str]) -> pl.DataFrame:
    frames = []
    for family_name, wanted in plan.keep.items():
        family = plan.families[family_name]
        rows = results[family.final]
        if family is SWEEP:  # each (segment, threshold) was one segment
            rows = rows.with_columns(threshold=pl.col("segment").struct.field("threshold"),
                                     segment=pl.col("segment").struct.field("segment"))
        keys = pl.DataFrame(
            [(m, a) for m, avgs in wanted.items() for a in avgs],
            schema={"metric": pl.String, "average": pl.String}, orient="row")
        rows = rows.with_columns(pl.col("average").cast(pl.String)).join(
            keys, on=["metric", "average"], nulls_equal=True)
        frames.append(rows.with_columns(_param_columns(family, plan.task, wanted, params,
                                                       skip=rows.columns)))
    out = pl.concat(frames, how="diagonal_relaxed")
    out = _unpack_segment(out, by)
    optional = [c for c in ("predicted", *clustering.CELL_COLUMNS, *PARAM_COLUMNS)
                if c in out.columns and out[c].null_count() < out.height]
    order = [*by, "metric", "average", "label", *optional, "value"]
    return out.select(order).sort([*by, "metric", "average", "label", *optional],
                                  nulls_last=False, maintain_order=True)


def widen(tidy: pl.DataFrame, by: Sequence[str], *, sweep: bool = False) -> pl.DataFrame:
    """The tidy rows of :func:`evaluate` as a table for reading: one row per segment and label
    (and threshold in a sweep, predicted class for a confusion matrix), one column per metric
    (per-label and whole-segment values: ``f1``) or metric and average (``f1_macro``). An
    operating point's threshold gets a column of its own (``max_f1_threshold``); parameters
    (beta, k...) are those of the request and are left out. Columns nobody fills are dropped.

    >>> rows = pl.DataFrame({"metric": ["f1", "f1"], "average": [None, "macro"],
    ...                      "label": ["a", None], "threshold": [0.5, 0.5], "value": [0.4, 0.4]})
    >>> widen(rows, []).columns
    ['label', 'f1', 'f1_macro']
    """
    keys = [*by, "label", *(["threshold"] if sweep else []),
            *(["predicted"] if "predicted" in tidy.columns else [])]
    name = pl.when(pl.col("average").is_null()).then(pl.col("metric")).otherwise(
        pl.concat_str("metric", pl.lit("_"), "average"))
    values = tidy.select(*keys, column=name, value=pl.col("value"))
    if not sweep and "threshold" in tidy.columns:  # where an operating point is reached
        reached = tidy.filter(pl.col("metric").is_in(
            [m for m, metric in METRICS.items() if OPERATING in metric.families.values()]))
        values = pl.concat([values, reached.select(
            *keys, column=pl.concat_str(name, pl.lit("_threshold")), value="threshold")])
    out = values.pivot(on="column", index=keys, values="value", maintain_order=True)
    filled = [c for c in out.columns if c in by or out[c].null_count() < out.height]
    reached = [c for c in filled if c.endswith("_threshold") and c not in keys]
    ordered = [x for c in filled if c not in reached
               for x in (c, *(r for r in reached if r == f"{c}_threshold"))]
    out = out.select(ordered)
    return out.sort([k for k in keys if k in out.columns], nulls_last=False,
                    maintain_order=True)


def _unpack_segment(frame: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """The engines' ``segment`` key back as the user's segment columns. A float segment that
    holds both 0.0 and -0.0 is one segment, given as 0.0 (DuckDB keeps whichever came first)."""
    if not by:
        return frame.drop("segment")
    frame = frame.rename({"segment": by[0]}) if len(by) == 1 else frame.unnest("segment")
    floats = [c for c in by if frame.schema[c].is_float()]
    return frame.with_columns(pl.when(pl.col(c) == 0).then(0.0).otherwise(pl.col(c))
                              .cast(frame.schema[c]).alias(c) for c in floats)


def _sweep_table(rows: pl.DataFrame, by: list[str]) -> pl.DataFrame:
    """Tidy sweep rows -> one row per (segment, label, threshold) with the curve's columns."""
    wide = rows.pivot(on="metric", index=[*by, "label", "threshold"], values="value")
    fp, tn = pl.col("fp"), pl.col("tn")
    return wide.select(
        *by, "label", "threshold", "tp", "fp", "fn", "tn",
        tpr=pl.col("recall"),
        fpr=fp / pl.when(fp + tn != 0).then(fp + tn),
        precision="precision", recall="recall",
    ).sort([*by, "label", "threshold"], descending=[False] * (len(by) + 1) + [True],
           nulls_last=False, maintain_order=True)
