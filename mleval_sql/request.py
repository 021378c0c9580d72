"""One request, checked once: what every door (the API, each CLI command, ``mleval sql``, a
report job's TOML) turns its user's words into, and what the engines and the statement builder
read.

A :class:`Request` holds the action (``evaluate``, ``curve`` or ``check``), the metrics in the
order asked, the task if named, the averages, every parameter checked with its default, the
curve options, the source options (segments, columns, engine, memory...) and the result layout.
:data:`OPTIONS` declares each option once: its name (the API keyword and the job's key), its
flag, the actions that take it and how a value given at any door is checked. Once the task is
known, :meth:`Request.plan` gives the steps to run, the rows to keep and the engines'
parameters, and :func:`tidy` lays the rows out.

>>> request = Request.build("evaluate", metrics=["roc_auc", "f1"], by="model", average="macro")
>>> request.metrics, request.by, request.average
(('roc_auc', 'f1'), ('model',), ('macro',))
>>> request.plan("multilabel").steps()
['ranking_metrics', 'threshold_counts', 'decision_metrics']
"""

from __future__ import annotations

import difflib
import itertools
import math
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

import polars as pl

from mleval_sql.clustering import CELL_COLUMNS
from mleval_sql.engines import ENGINES, memory_bytes
from mleval_sql.params import CURVE_PARAMS, MIN_POINTS, PARAM_COLUMNS, PARAMS, checked
from mleval_sql.registry import (
    AVERAGES,
    CURVES,
    DECISIONS,
    DECLARED,
    DECLARED_SWEEP,
    ESTIMATED,
    FUSED,
    GRADED,
    METRICS,
    RANKING,
    SAMPLES,
    SHARED_FILE,
    SHARED_METRICS,
    STEPS,
    SWEEP,
    SWEPT,
    THRESHOLDS,
    Family,
    default_averages,
    metrics_of,
)
from mleval_sql.schema import TASKS, Columns, InputError, Task
from mleval_sql.sources import beside
from mleval_sql.windows import Period, Window

Action = Literal["evaluate", "curve", "check", "compare", "slices", "drift"]
ACTIONS: tuple[Action, ...] = ("evaluate", "curve", "check", "compare", "slices", "drift")
CurveKind = Literal["roc", "pr", "sweep", "reliability", "det", "thresholds"]
#: The curves an evaluation can draw from its own pass (``curves=``): a sweep is decision
#: metrics at other thresholds, a request of its own.
DRAWN = ("roc", "pr", "reliability")
#: The metrics a request computes when none are named, per task.
DEFAULT_METRICS: dict[Task, tuple[str, ...]] = {
    **dict.fromkeys(("binary", "multiclass", "multilabel"),
                    ("accuracy", "precision", "recall", "f1")),
    "regression": ("mse", "rmse", "mae", "r2"),
    "clustering": ("adjusted_rand", "adjusted_mutual_info", "homogeneity", "completeness",
                   "v_measure"),
}
#: The decision metrics a sweep curve tabulates.
SWEEP_METRICS = ("tp", "fp", "fn", "tn", "precision", "recall")
#: The level of a comparison's intervals when ``ci`` is not given.
COMPARE_LEVEL = 0.95
#: The step of DeLong's variance of a label's ROC AUC (intervals), and of each row's placement
#: value (a paired comparison's).
DELONG, PLACEMENTS = "delong", "placements"
#: The estimated metrics, and the step of how far their realised values may lie (intervals).
ESTIMATED_METRICS, ESTIMATED_VARIANCE = metrics_of(ESTIMATED), "estimated_variance"
#: The metrics that read the truth as graded relevance (a number >= 0) where only they are
#: asked (with others, the truth is 0 / 1 as theirs).
GRADED_METRICS = metrics_of(GRADED)
#: The counts a curve of kind "thresholds" gives before the metrics asked, in
#: scikit-learn's confusion_matrix_at_thresholds order.
THRESHOLD_COUNTS = ("tn", "fp", "fn", "tp")
#: How the estimated metrics read scores as probabilities (mleval_sql/estimation.py).
CALIBRATIONS = ("isotonic", "histogram", "none")
#: The result column of an operating point's own threshold (``threshold`` is the one given).
OPERATING_THRESHOLD = "operating_threshold"


@dataclass(frozen=True)
class Option:
    """One option of a request, the same at every door.

    ``name``: the API keyword and the job file's key. ``actions``: the requests that take it;
    ``statement``: whether ``mleval sql`` does (options about running, such as the engine, do
    not); ``commands``: the actions whose command has its flag, where not all of them (a
    connection, or what only a program uses, has none). ``arity``: how the command line
    takes it: one ``value``, a ``list`` (the flag repeated, or comma-separated), ``pairs``
    (``KEY=VALUE``, repeated) or a ``switch``.
    ``only_statement``: taken by a statement to paste alone (``me.sql``, ``mleval sql``), not
    by a request that runs.
    """

    name: str
    help: str
    actions: tuple[Action, ...] = ACTIONS
    statement: bool = True
    arity: Literal["value", "list", "pairs", "switch"] = "value"
    metavar: str | None = None
    choices: Collection[str] = ()
    default: Any = None
    only_statement: bool = False
    commands: tuple[Action, ...] | None = None  # the commands with its flag (None: actions)

    @property
    def command_actions(self) -> tuple[Action, ...]:
        """The actions whose command (``mleval evaluate``...) takes it as a flag."""
        return self.actions if self.commands is None else self.commands

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


_EVALUATE: tuple[Action, ...] = ("evaluate", "compare", "slices")
_COMPARE: tuple[Action, ...] = ("compare",)
_SLICES: tuple[Action, ...] = ("slices",)
_STATEMENT: tuple[Action, ...] = ("evaluate", "curve", "check")
_DRIFT: tuple[Action, ...] = ("drift",)
#: The requests that read predictions and truth as the metrics do (drift compares columns).
_METRICS: tuple[Action, ...] = ("evaluate", "curve", "check", "compare", "slices")
#: Drift's statistics, in the order a result lists them (where none are named: each kind's
#: defaults in their order).
DRIFT_STATISTICS = ("ks", "wasserstein", "chi2", "psi", "jensen_shannon", "total_variation",
                    "l_infinity")
#: Every option that is not a metric parameter (those are :data:`mleval_sql.params.PARAMS`,
#: taken by ``evaluate`` and ``compare`` and, for the sweep and bins, ``curve``).
OPTIONS: dict[str, Option] = {o.name: o for o in (
    Option("metrics", "metric names (default: accuracy, precision, recall, f1; regression: "
           "mse, rmse, mae, r2; clustering: adjusted_rand, adjusted_mutual_info, homogeneity, "
           "completeness, v_measure; a curve of kind thresholds: decision metrics at every "
           "distinct score besides tn, fp, fn, tp)", (*_EVALUATE, "curve"), arity="list",
           metavar="NAME"),
    Option("define", "metrics you declare for the request, NAME=EXPR: an expression over tp, "
           "fp, fn, tn, support, n, threshold and beta (e.g. cost=(5*fn+fp)/n), or a TOML "
           "inline table of a metrics.toml's keys, e.g. cost={expr = \"(5*fn+fp)/n\", "
           "higher_is_better = false, tasks = [\"binary\"], doc = \"...\"}; declared for "
           "the process, as me.define (after MLEVAL_METRICS's file and a lake's metrics.toml, "
           "which it overrides)", _EVALUATE, arity="pairs", metavar="NAME=EXPR"),
    Option("by", "segment columns (slices: found within each segment)", arity="list",
           metavar="COL", default=()),
    Option("window", "time windows, a segmentation before by: a date or timestamp column "
           "and granularities (1h, 1d, 1w = ISO weeks from Monday, 1mo, 1q, 1y), calendar-"
           "aligned in a time zone (default UTC; a timestamp without one is read as "
           "wall-clock time there), e.g. ts:1d or ts:1d,1w@Europe/Paris; the result gains "
           "granularity, window_start and window_end ([start, end))",
           metavar="COL:EVERY[@TZ]"),
    Option("unlabelled", "skip: rows whose truth is null (not known yet) are left out of "
           "every metric, and each result row says label_coverage, the share of its "
           "segment's weight whose truth is known (default: error, a null truth is bad input)",
           _METRICS, choices=("error", "skip"), default="error"),
    Option("labels", "a second source of outcomes (sample[, label], truth, named as the "
           "predictions' columns), joined to the predictions by sample (and label where it "
           "has one): a prediction without an outcome is unlabelled", _METRICS,
           statement=False, metavar="PATH"),
    Option("task", "default: settled by the metrics, else inferred from the data",
           choices=TASKS),
    Option("average", "averages over labels (default: none for binary and regression, macro "
           "otherwise)", _EVALUATE, arity="list", choices=AVERAGES),
    Option("columns", "where a role (sample, label, score, truth, weight; clustering: sample, "
           "truth, cluster, weight) is found, e.g. score=prob or cluster=pred; weight= "
           "ignores a weight column, label= reads no label column (a binary task)",
           arity="pairs", metavar="ROLE=NAME"),
    Option("kind", CURVE_PARAMS["kind"].help, ("curve",), choices=CURVE_PARAMS["kind"].choices),
    Option("drop_intermediate", CURVE_PARAMS["drop_intermediate"].help, ("curve",),
           arity="switch"),
    Option("max_points", CURVE_PARAMS["max_points"].help, ("curve", "evaluate"), metavar="N",
           commands=("curve",)),
    Option("curves", "evaluate: also the tables that draw these curves (roc, pr: one table "
           "of the points of both; reliability), from the same pass as the metrics (a report "
           "job's charts); Outcome.curves", ("evaluate",), statement=False, arity="list",
           choices=DRAWN, default=(), commands=()),
    Option("wide", "one row per segment and label, one column per metric (and average) instead "
           "of one row per value", ("evaluate",), statement=False, arity="switch",
           default=False),
    Option("model", "the column naming the models compared (scored on the same samples)",
           _COMPARE, statement=False, metavar="COL"),
    Option("baseline", "the model every other model is compared with", _COMPARE,
           statement=False, metavar="NAME"),
    Option("against", "rest: each segment against the data outside it (instead of models)",
           _COMPARE, statement=False, choices=("rest",)),
    Option("over", "the columns slices are made of (a slice: up to max_level predicates "
           "column = value)", _SLICES, arity="list", metavar="COL"),
    Option("max_level", "the most predicates a slice has", _SLICES, metavar="N", default=2),
    Option("min_support", "the fewest samples a slice has", _SLICES, metavar="N", default=10),
    Option("top", "how many slices (more where the last ones tie)", _SLICES, metavar="N",
           default=10),
    Option("alpha", "SliceLine's weight of a slice's error against its size, in (0, 1]",
           _SLICES, metavar="A", default=0.6),
    Option("quantiles", "numeric slice columns cut into this many quantile bins", _SLICES,
           statement=False, metavar="N"),
    Option("fdr", "with ci=: the false discovery rate of the slices' tests against the rest "
           "(only the slices significant at it are given)", _SLICES, statement=False,
           metavar="Q", default=0.05),
    Option("reference", "what drift compares with: a path (each segment against the "
           "reference's rows of the same segment where it has the segment's columns, all of "
           "them where not), or COL=VALUE (the input's rows where it holds, against each other "
           "value's rows, segment by segment and window by window), or previous (with "
           "windows: each window against the one before), or period=[COLUMN:]PERIOD[@ZONE] "
           "(the input's rows in a period of its time column, the window's by default, e.g. "
           "period=2026-10, period=ts:2026-10-01/2026-10-15: each segment, and each window, "
           "against the period's rows of the segment; without windows the rows outside the "
           "period); a statement's: a table, COL=VALUE or period=PERIOD. "
           "evaluate: labelled rows (a path or a frame) that the estimated_* metrics' "
           "calibration map is learnt on", ("drift", "evaluate"),
           metavar="PATH|COL=VALUE|previous|period=PERIOD", commands=("drift", "evaluate")),
    Option("calibration", "how the estimated_* metrics read scores as probabilities: "
           "isotonic (default with a reference) or histogram (n_bins bins of equal reference "
           "weight), a map per label learnt on the reference's rows; none (default without "
           "one): the scores are calibrated probabilities", ("evaluate",), statement=False,
           choices=CALIBRATIONS),
    Option("compared", "the columns drift compares: score (per label), decision (score >= "
           "threshold, per label), truth (per label), or a column with one value per sample "
           "(numeric, else categorical)", _DRIFT, arity="list", metavar="COL",
           default=("score",)),
    Option("statistics", "ks, wasserstein (numeric columns), chi2, psi, jensen_shannon, "
           "total_variation, l_infinity (default: ks, wasserstein, psi for numeric "
           "columns; chi2, psi, jensen_shannon for categorical ones)", _DRIFT, arity="list",
           choices=DRIFT_STATISTICS),
    Option("edges", "a numeric column's bin edges, increasing (bins (-inf, e1], (e1, e2], "
           "..., (ek, inf)) instead of the reference's quantile bins", _DRIFT, arity="list",
           metavar="X"),
    Option("epsilon", "the share an empty bin counts as in PSI", _DRIFT, metavar="E",
           default=1e-4),
    Option("engine", "the engine that runs the request (default: the fastest that fits the "
           "input and options: polars for files, lakes and frames; duckdb with threads, for "
           "a DuckDB relation or connection, or for a segment larger than memory_limit holds "
           "in polars' memory)", statement=False,
           choices=ENGINES),  # the live table: an engine added to it is a choice
    Option("memory_limit", "the memory the engine may use, e.g. 1GB; larger inputs are "
           "evaluated a batch of segments at a time", statement=False, metavar="SIZE"),
    Option("threads", "DuckDB's threads (default: one per core); 1 sums in one order, so "
           "reruns give the same bits", statement=False, metavar="N"),
    Option("reproducible", "the same bits on every run with any number of threads (duckdb: "
           "with every weight 1 the steps run on every thread, fractions summed as exact "
           "decimals; with weights a step that sums in its rows' order runs on one thread)",
           statement=False, arity="switch", default=False,
           commands=()),
    Option("storage_options", "for object storage, beyond the cloud's environment variables, "
           "e.g. aws_endpoint_url=http://127.0.0.1:9000", statement=False, arity="pairs",
           metavar="KEY=VALUE"),
    Option("as_of", "a Delta table's version or an Iceberg snapshot id (or an ISO timestamp: "
           "the version then); default: the current one", statement=False, metavar="N"),
    Option("connection", "a DuckDB connection, or a database's for engine='sql' (for a "
           "statement: the database of the table it reads, which says the table's columns)",
           commands=()),
    Option("no_weight", "read no weight column: every row weighs 1 (as --column weight=)",
           (*_STATEMENT, "drift"), arity="switch", default=False, only_statement=True),
    Option("single", "one statement even where the dialect's planner copies each CTE into "
           "its readers (Spark, Databricks): for a BI tool that takes one; Spark then plans "
           "it in minutes, or runs out of memory, beyond a metric or two (default there: a "
           "script that writes the shared statistics as tables first)", (*_STATEMENT, "drift"),
           arity="switch", default=False, only_statement=True),
    Option("schema_from", "a parquet or CSV file with the table's columns (a sample of it): "
           "the statement then reads them as evaluate would (a weight column where the table "
           "has one, no label column where it has none, the truth's type; its rows give the "
           "task where none is named)", (*_STATEMENT, "drift"),
           metavar="FILE", only_statement=True),
)}


@dataclass(frozen=True)
class Request:
    """What to compute and how, checked (see :meth:`build`)."""

    action: Action
    metrics: tuple[str, ...] | None = None  # None: the task's defaults
    define: Mapping[str, Any] = field(default_factory=dict)  # declared: mleval_sql/declared.py
    task: Task | None = None
    average: tuple[str, ...] | None = None  # None: the task's default
    params: Mapping[str, Any] = field(default_factory=checked)
    kind: CurveKind | None = None
    drop_intermediate: bool | None = None
    max_points: int | None = None
    curves: tuple[str, ...] = ()
    by: tuple[str, ...] = ()
    window: Window | None = None
    unlabelled: Literal["error", "skip"] = "error"
    labels: Any = None  # a source of outcomes
    columns: Mapping[str, str | None] = field(default_factory=dict)
    engine: str | None = None  # None: engines.choose_engine's for the input
    memory_limit: str | int | None = None
    threads: int | None = None
    reproducible: bool = False
    storage_options: Mapping[str, str] | None = None
    as_of: int | str | datetime | None = None
    connection: Any = None
    single: bool = False
    schema_from: str | None = None
    wide: bool = False
    model: str | None = None
    baseline: Any = None
    against: Literal["rest"] | None = None
    over: tuple[str, ...] = ()
    max_level: int = 2
    min_support: int | float = 10
    top: int = 10
    alpha: float = 0.6
    quantiles: int | None = None
    fdr: float = 0.05
    reference: Any = None  # drift's: a source, {column: value} of the input's rows, "previous",
    # or a Period of the input's time column (resolved: its column and time zone filled in)
    compared: tuple[str, ...] = ("score",)
    statistics: tuple[str, ...] | None = None  # None: by each compared column's kind
    edges: tuple[float, ...] | None = None
    epsilon: float = 1e-4
    calibration: str | None = None  # None: isotonic with a reference, none without

    @classmethod
    def build(cls, action: Action, *, _statement: bool = False, _source: Any = None,
              **given: Any) -> Request:
        """The request of ``action`` with the options ``given`` (names of :data:`OPTIONS` and
        :data:`~mleval_sql.params.PARAMS`); an option at its default is not given. Raises
        ``InputError`` naming the first option that is unknown, bad, or in conflict with
        another. ``_source``: the input, whose folder may hold the lake's ``metrics.toml``
        (:func:`declare_for`).

        >>> Request.build("curve", kind="roc", beta=2.0)
        Traceback (most recent call last):
        mleval_sql.errors.InputError: beta does not apply to a roc curve (only to thresholds)
        """
        if action not in ACTIONS:
            raise InputError(f"unknown action {action!r}; actions are {list(ACTIONS)}")
        given = {k: v for k, v in given.items() if not _is_default(k, v)}
        for name in given:
            _check_taken(action, name, given.get("kind"))
            if name in OPTIONS and OPTIONS[name].only_statement and not _statement:
                raise InputError(f"{name} applies to a statement to paste (me.sql, mleval sql), "
                                 f"not to {action}")
        if given.pop("no_weight", False):  # the same as columns={"weight": None}
            columns = dict(given.get("columns") or {})
            if columns.get("weight") is not None:
                raise InputError(f"no_weight and columns={{'weight': {columns['weight']!r}}}: "
                                 "give one or the other")
            given["columns"] = {**columns, "weight": None}
        values: dict[str, Any] = {"action": action}
        if action in _EVALUATE:  # before the metrics are checked: they may name them
            declare_for(_source, given.get("define"))
            if "define" in given:
                values["define"] = dict(given.pop("define"))
        for name, value in given.items():
            if name in OPTIONS:
                values[name] = _CHECKS.get(name, _as_is)(value)
        values["params"] = checked(**{k: v for k, v in given.items() if k in PARAMS})
        if action == "compare":
            _check_comparison(values)
        if "max_points" in values and action == "evaluate" and not set(
                values.get("curves", ())) & {"roc", "pr"}:
            raise InputError("max_points thins roc and pr curves: it goes with curves=['roc', "
                             "'pr'] (or a curve request: --kind roc --max-points N)")
        if action == "drift" and values.get("reference") is None:
            raise InputError("drift: name the reference (reference=, --reference): a path, a "
                             "frame, {column: value} selecting the input's reference rows, "
                             "previous, or {'period': ...}")
        if action == "drift" and isinstance(values.get("reference"), Period):
            # its column and time zone: the window's where it names none (one per request)
            values["reference"] = values["reference"].resolved(values.get("window"))
        if action in ("evaluate", "compare", "slices"):
            _check_estimation(action, values)
        if action == "slices" and not values.get("over"):
            raise InputError("slices: name the columns slices are made of (over=, --over)")
        if values["params"]["ci"] is None and given.keys() & {"resamples", "seed"}:
            raise InputError("resamples= and seed= are the bootstrap's: they go with ci= "
                             "(--ci 0.95)")
        if action == "curve":
            kind = values.setdefault("kind", CURVE_PARAMS["kind"].default)
            if kind == "sweep" and values["params"]["thresholds"] is None:
                raise InputError("a sweep needs thresholds= or bins= (--thresholds, --bins)")
            if "metrics" in values and kind != "thresholds":
                raise InputError(f"metrics= names the decision metrics of a curve of kind "
                                 f"'thresholds', not of a {kind} curve")
        request = cls(**values)
        if request.task is not None:
            request.plan(request.task)  # metrics and averages the task lacks: before any scan
        return request

    @classmethod
    def statement(cls, action: Action, **given: Any) -> Request:
        """:meth:`build` for a statement to paste, which takes no option about running (the
        engine, memory, the source's storage...)."""
        for name, value in given.items():
            if name in OPTIONS and not OPTIONS[name].statement and not _is_default(name, value):
                raise InputError(f"{name} does not apply to a statement (it is about running "
                                 "one: evaluate takes it)")
            if name in _INTERVALS and not _is_default(name, value):
                raise InputError(f"{name}: a statement gives no intervals; evaluate does "
                                 "(engine='sql' runs its steps in your database)")
        if given.get("connection") is not None and given.get("schema_from") is not None:
            raise InputError("connection= and schema_from=: the table's columns come from one "
                             "of them")
        request = cls.build(action, _statement=True, **given)
        estimated = [m for m in request.metrics or () if m in ESTIMATED_METRICS]
        if estimated:
            raise InputError(f"{estimated[0]}: a statement reads the table's truth, and an "
                             "estimated metric reads each row's probability instead; evaluate "
                             "gives it (engine polars or duckdb)")
        return request

    # -- the task ---------------------------------------------------------------------------

    def settled_task(self) -> Task | None:
        """The task before any data is read: the one named, else the one task every metric
        asked has (never guessed from values: regression and clustering come only so), else
        None (the data says, or for a statement :meth:`statement_task`)."""
        if self.task is not None:
            return self.task
        if not self.metrics:
            return None
        common = set.intersection(*(set(METRICS[m].families) for m in self.metrics))
        return next(iter(common)) if len(common) == 1 else None  # type: ignore[return-value]

    @property
    def graded(self) -> bool:
        """Whether only metrics of graded relevance (ndcg, dcg) are asked: the truth is then
        a number >= 0, not 0 / 1."""
        return bool(self.metrics) and set(self.metrics) <= set(GRADED_METRICS)

    def statement_task(self) -> Task | None:
        """The task of a statement, which cannot look at the data: :meth:`settled_task`, else
        binary when no label column is read; metrics need a task, checks and curves do not."""
        task = self.settled_task()
        if task is None and "label" in self.columns and self.columns["label"] is None:
            task = "binary"
        if task is None and self.action == "evaluate":
            tasks = sorted({t for m in self.metric_names(None) for t in METRICS[m].families})
            raise InputError(f"task: a statement cannot look at the data to infer it; name it "
                             f"(task=, --task), one of {tasks}")
        return task

    def metric_names(self, task: Task | None) -> tuple[str, ...]:
        """The metrics asked, or the task's defaults."""
        if self.metrics is not None:
            return self.metrics
        return DEFAULT_METRICS.get(task or "binary", DEFAULT_METRICS["binary"])

    def averages(self, task: Task) -> tuple[str, ...]:
        return self.average if self.average is not None else default_averages(task)

    # -- what the engines run ---------------------------------------------------------------

    def plan(self, task: Task) -> Plan:
        """The families, steps and rows of this request for ``task``; an ``InputError`` names
        a metric the task lacks or an average the metric lacks."""
        if self.action == "curve":
            return self._curve_plan(task)
        if task == "clustering" and self.params["ci"] is not None:
            raise InputError("ci= gives no intervals for clustering metrics yet (their "
                             "bootstrap reads one row per sample with a cluster)")
        sweep = self.params["thresholds"] is not None
        listed = sweep and self.params["bins"] is None  # bins also put ranking on their grid
        plan = Plan(task, self)
        averages = self.averages(task)
        for name in self.metric_names(task):
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
        if listed and not plan.sweep:
            raise InputError(f"{', '.join(self.metric_names(task))} cannot be swept over "
                             f"thresholds for task {task!r}; sweeps cover the label-wise "
                             "decision metrics of binary and multilabel tasks")
        if self.curves:
            if task in ("regression", "clustering"):
                raise InputError(f"curves are for classification tasks, not {task}")
            plan.drawn = tuple(dict.fromkeys(s for k in self.curves for s in CURVES[k]))
        return plan

    def _curve_plan(self, task: Task) -> Plan:
        if task in ("regression", "clustering"):
            raise InputError(f"curves are for classification tasks, not {task}")
        if self.kind == "sweep":  # the decision metrics at the sweep's thresholds
            return replace(self, action="evaluate", metrics=SWEEP_METRICS, average=("none",),
                           kind=None).plan(task)
        if self.kind == "thresholds":  # ... at every distinct score, off the curve's pass
            return self._thresholds_plan(task)
        return Plan(task, self, curve=CURVES[self.kind or "roc"])

    def _thresholds_plan(self, task: Task) -> Plan:
        """The counts and the decision metrics asked at every distinct score: the curve's
        sorted pass (ranked_points), each point one segment of decision_metrics."""
        names = tuple(dict.fromkeys((*THRESHOLD_COUNTS, *(self.metrics or ()))))
        plan = Plan(task, replace(self, metrics=names, average=("none",)))
        for name in names:
            metric = METRICS[name]
            if metric.families.get(task) is not DECISIONS or not metric.per_label:
                decisions = [m for m, d in METRICS.items() if d.families.get(task) is DECISIONS
                             and d.per_label]
                raise InputError(f"a curve of kind 'thresholds' gives the decision metrics of "
                                 f"each label, {decisions}, not {name!r} (task {task!r})")
            plan.add(THRESHOLDS, name, None)
        return plan

    def engine_params(self, plan: Plan) -> dict[str, object]:
        """Every step parameter: the checked values and the switches (``params.SWITCHES``)
        the request sets from what was asked."""
        names = self.metric_names(plan.task)
        kind = self.kind or "roc"
        drop = (kind == "roc") if self.drop_intermediate is None else self.drop_intermediate
        drawn = [k for k in ("roc", "pr") if k in self.curves]
        if drawn:  # an evaluation's curves, to draw: one table of the points of each kind
            kind, drop = "both" if len(drawn) == 2 else drawn[0], True
        return {**self.params,
                "micro": "micro" in self.averages(plan.task),
                "adjusted": "adjusted_mutual_info" in names,
                "class_counts": "average_precision" in names or self.params["max_fpr"]
                is not None,
                "label_totals": "break_even" in names or self.params["max_fpr"] is not None,
                "kind": kind,
                "drop_intermediate": drop,
                "max_points": self.max_points or None}

    @property
    def column_map(self) -> Columns:
        return Columns.from_mapping(self.columns)

    def source_options(self) -> dict[str, Any]:
        """The options that say how to read and run: for an engine and a source."""
        return {"engine": self.engine, "memory_limit": self.memory_limit,
                "threads": self.threads, "reproducible": self.reproducible,
                "connection": self.connection,
                "storage_options": self.storage_options, "as_of": self.as_of}


def declare_for(source: Any, define: Mapping[str, Any] | None = None) -> None:
    """Declare the metrics a request over ``source`` may name: the team's (the file
    ``MLEVAL_METRICS`` names), the lake's (``metrics.toml`` in a folder ``source`` names), then
    ``define`` (:func:`mleval_sql.declared.declare`), each over the one before. Where there is
    none, sqlglot is not even imported (an evaluation needs none).

    >>> declare_for("fixtures/lake", {"cost": "(5 * fn + fp) / n"})
    >>> METRICS["cost"].summary
    'declared: (5 * fn + fp) / n'
    >>> import mleval_sql as me; me.undefine("cost")
    """
    if define is None and not os.environ.get(SHARED_METRICS) and not beside(source,
                                                                           SHARED_FILE):
        return
    from mleval_sql import declared

    declared.shared(source)
    if define is not None:
        declared.declare(define)


def _check_taken(action: Action, name: str, kind: str | None) -> None:
    """``name`` is an option of ``action`` (and of a curve of ``kind``), else an error."""
    actions = actions_of(name)
    if not actions:
        known = sorted(n for n in {*OPTIONS, *PARAMS} if action in actions_of(n))
        close = difflib.get_close_matches(name, known, n=1)
        hint = f"; did you mean {close[0]!r}?" if close else f"; {action} takes {known}"
        raise InputError(f"unknown parameter {name!r}{hint}")
    if action not in actions:
        raise InputError(f"{name} does not apply to {action} (it is an option of "
                         f"{' / '.join(actions)})")
    if action == "curve" and name in {*_CURVE_PARAMS, "drop_intermediate", "max_points"}:
        kinds = _CURVE_PARAMS.get(name, ("roc", "pr"))
        if (kind or CURVE_PARAMS["kind"].default) not in kinds:
            raise InputError(f"{name} does not apply to a {kind or 'roc'} curve (only to "
                             f"{' / '.join(kinds)})")


def _check_comparison(values: dict[str, Any]) -> None:
    """A comparison is of models (``model`` and ``baseline``) or of each segment against the
    rest (``against="rest"`` with segments), with an interval (default level 0.95)."""
    models = "model" in values or "baseline" in values
    if values.get("against") is not None and models:
        raise InputError("compare: give model= and baseline= (models), or against='rest' "
                         "(segments), not both")
    if values.get("against") is None and ("model" not in values or "baseline" not in values):
        raise InputError("compare: give model= (the column naming the models) and baseline= "
                         "(the model to compare with), or against='rest'")
    if values.get("against") is not None and not values.get("by"):
        raise InputError("compare against='rest' compares segments: name them with by=")
    if "model" in values and values["model"] in values.get("by", ()):
        raise InputError(f"model column {values['model']!r} is also a segment column (by=)")
    if values["params"]["ci"] is None:
        values["params"] = {**values["params"], "ci": COMPARE_LEVEL}


def actions_of(name: str) -> tuple[Action, ...]:
    """The actions that take the option or parameter ``name`` (none: no such option)."""
    if name in OPTIONS:
        return OPTIONS[name].actions
    if name in PARAMS:
        drift = _DRIFT if name in ("threshold", "bins") else ()
        return (*_EVALUATE, "curve", *drift) if name in _CURVE_PARAMS else (*_EVALUATE, *drift)
    return ()


#: The parameters of intervals (the bootstrap's replicates run a chunk at a time).
_INTERVALS = ("ci", "resamples", "seed")
#: The parameters a curve takes, and the kinds of curve that take each.
_CURVE_PARAMS: dict[str, tuple[str, ...]] = {
    "thresholds": ("sweep",), "bins": ("roc", "pr", "sweep", "det", "thresholds"),
    "n_bins": ("reliability",), "beta": ("thresholds",), "zero_division": ("thresholds",),
    "drop_intermediate": ("roc", "pr", "det")}


def _as_is(value: Any) -> Any:
    return value


def _is_default(name: str, value: Any) -> bool:
    """Whether ``value`` is ``name``'s default, which is not an option given (a curve's
    ``n_bins=10`` is not a reliability option given to a roc curve)."""
    default = PARAMS[name].default if name in PARAMS else OPTIONS[name].default \
        if name in OPTIONS else None
    if isinstance(value, bool) or isinstance(default, bool):
        return value is default
    return value is default or (default is not None and type(value) in (int, float, tuple)
                                and value == default)


def _names(value: str | Sequence[str]) -> tuple[str, ...]:
    """Metric names, each known (a close name is suggested), in the order given, once each."""
    names = [value] if isinstance(value, str) else list(value)
    if not names:
        raise InputError("no metrics asked for")
    for name in names:
        if name not in METRICS:
            stem = str(name).removesuffix("_score")  # scikit-learn's function names
            close = [stem] if stem in METRICS else difflib.get_close_matches(
                stem, METRICS, n=1, cutoff=0.5)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputError(f"unknown metric {name!r}{hint} (`mleval metrics` lists them)")
    return tuple(dict.fromkeys(names))


def _texts(option: str) -> Any:
    def check(value: str | Sequence[str]) -> tuple[str, ...]:
        values = [value] if isinstance(value, str) else value
        if not isinstance(values, Sequence) or not all(
                isinstance(v, str) and v for v in values):
            raise InputError(f"{option} must be a name or a list of names, got {value!r}")
        if len(set(values)) < len(values):
            raise InputError(f"{option}: a name repeats in {list(values)}")
        return tuple(values)
    return check


def _column(option: str) -> Any:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not value:
            raise InputError(f"{option} must be a column name, got {value!r}")
        return value
    return check


def _choice(option: str, choices: Collection[Any]) -> Any:
    def check(value: Any) -> Any:
        if value not in choices:
            raise InputError(f"unknown {option} {value!r}; {option}s are {list(choices)}")
        return value
    return check


def _averages(value: str | Sequence[str]) -> tuple[str, ...]:
    chosen = (value,) if isinstance(value, str) else tuple(value)
    for a in chosen:
        _choice("average", AVERAGES)(a)
    return tuple(dict.fromkeys(chosen))


def _columns(value: Mapping[str, str | None]) -> dict[str, str | None]:
    if not isinstance(value, Mapping):
        raise InputError(f"columns: where each role is found, e.g. {{'score': 'prob'}}, got "
                         f"{value!r} (drift's columns to compare are compared=)")
    Columns.from_mapping(value)  # checks the roles and names
    return dict(value)


def _memory(value: str | int) -> str | int:
    memory_bytes(value)  # checked in our words before any work
    return value


def _whole(option: str, low: int) -> Any:
    def check(value: Any) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise InputError(f"{option} must be a whole number >= {low}, got {value!r}")
        return value
    return check


def _support(value: Any) -> int | float:
    """A count of samples, or a share of them in (0, 1)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or (
            isinstance(value, float) and value >= 1):
        raise InputError(f"min_support must be a whole number of samples or a share in (0, 1), "
                         f"got {value!r}")
    return value


def _rate(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise InputError(f"fdr must be a rate in (0, 1), got {value!r}")
    return float(value)


def _alpha(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        raise InputError(f"alpha must be a number in (0, 1], got {value!r}")
    return float(value)


def _storage(value: Mapping[str, Any]) -> dict[str, str]:
    if not isinstance(value, Mapping):
        raise InputError(f"storage_options must be a mapping of keys to values, got {value!r}")
    return {str(k): str(v) for k, v in value.items()}


def _bool(option: str) -> Any:
    def check(value: Any) -> bool:
        if not isinstance(value, bool):
            raise InputError(f"{option} must be true or false, got {value!r}")
        return value
    return check


def _points(value: Any) -> int:
    """0 (every point), or at least :data:`~mleval_sql.params.MIN_POINTS`."""
    if isinstance(value, bool) or not isinstance(value, int) or not (
            value == 0 or value >= MIN_POINTS):
        raise InputError(f"max_points must be 0 (every point) or a whole number >= "
                         f"{MIN_POINTS}, got {value!r}")
    return value


def _curves(value: str | Sequence[str]) -> tuple[str, ...]:
    kinds = (value,) if isinstance(value, str) else tuple(value)
    for kind in kinds:
        if kind not in DRAWN:
            raise InputError(f"curves: an evaluation draws {list(DRAWN)} (a sweep is a request "
                             f"of its own: kind='sweep'), got {kind!r}")
    return tuple(dict.fromkeys(kinds))


def _check_estimation(action: Action, values: Mapping[str, Any]) -> None:
    """The estimated metrics are an evaluation's at one threshold; its reference and
    calibration go with the estimated metrics they serve."""
    estimated = [m for m in values.get("metrics") or () if m in ESTIMATED_METRICS]
    if estimated and action != "evaluate":
        raise InputError(f"{estimated[0]}: estimated metrics are evaluate's (they read each "
                         f"row's probability, not its truth); {action} takes the realised ones")
    if estimated and values["params"]["thresholds"] is not None:
        raise InputError(f"{estimated[0]}: estimated metrics are at one threshold (threshold=); "
                         "a sweep over thresholds= or bins= takes the realised ones")
    for name in ("reference", "calibration"):
        if values.get(name) is not None and not estimated:
            raise InputError(f"evaluate: {name}= serves the estimated metrics "
                             f"({', '.join(ESTIMATED_METRICS)}); none is asked")
    if isinstance(values.get("reference"), (Mapping, Period)):
        raise InputError("evaluate: the reference the calibration map is learnt on is a "
                         "source of labelled rows (a path or a frame), not {column: value} "
                         "or a period")
    if values.get("calibration") in ("isotonic", "histogram") \
            and values.get("reference") is None:
        raise InputError(f"calibration={values['calibration']!r} is learnt on labelled rows: "
                         "name them (reference=, --reference)")


def _reference(value: Any) -> Any:
    """A source, ``{column: value}`` (``COL=VALUE`` on the command line: a text), or a
    :class:`~mleval_sql.windows.Period` (``{"period": ...}``, ``period=PERIOD``: the key
    ``period`` names a period, never a column)."""
    if isinstance(value, Mapping):
        if not value:
            raise InputError("reference: {column: value} names at least one column")
        if "period" in value:
            return Period.parse(value)
        return dict(value)
    if isinstance(value, str) and "=" in value and not any(
            value.startswith(p) for p in ("/", ".", "s3:", "gs:", "az:", "delta:", "iceberg:")):
        column, _, given = value.partition("=")
        if column.strip() == "period":
            return Period.parse(given)
        return {column: given}
    return value


def _statistics(value: str | Sequence[str]) -> tuple[str, ...]:
    names = tuple(dict.fromkeys([value] if isinstance(value, str) else list(value)))
    if not names:
        raise InputError("statistics: name at least one")
    for name in names:
        if name not in DRIFT_STATISTICS:
            close = difflib.get_close_matches(name, DRIFT_STATISTICS, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise InputError(f"unknown statistic {name!r}{hint} (statistics: "
                             f"{', '.join(DRIFT_STATISTICS)})")
    return names


def _edges(value: str | Sequence[Any]) -> tuple[float, ...]:
    texts = value.split(",") if isinstance(value, str) else value
    try:
        edges = tuple(float(e) for e in texts)
    except (TypeError, ValueError):
        raise InputError(f"edges: numbers, increasing; got {value!r}") from None
    if not edges or any(not math.isfinite(e) for e in edges) or any(
            b <= a for a, b in itertools.pairwise(edges)):
        raise InputError(f"edges: finite numbers, each larger than the one before (no "
                         f"duplicates); got {list(edges)}")
    return edges


def _epsilon(value: Any) -> float:
    try:
        epsilon = float(value)
    except (TypeError, ValueError):
        raise InputError(f"epsilon: a number in (0, 1); got {value!r}") from None
    if not 0 < epsilon < 1:
        raise InputError(f"epsilon: a number in (0, 1); got {value!r}")
    return epsilon


_CHECKS: dict[str, Any] = {
    "metrics": _names, "by": _texts("by"), "window": Window.parse,
    "unlabelled": _choice("unlabelled", ("error", "skip")), "task": _choice("task", TASKS),
    "average": _averages, "columns": _columns, "kind": _choice("kind", CURVE_PARAMS["kind"]
                                                                .choices),
    "drop_intermediate": _bool("drop_intermediate"), "wide": _bool("wide"),
    "engine": _choice("engine", ENGINES), "memory_limit": _memory,
    "threads": _whole("threads", 1), "storage_options": _storage, "model": _column("model"),
    "reproducible": _bool("reproducible"),
    "against": _choice("against", ("rest",)), "over": _texts("over"),
    "max_level": _whole("max_level", 1), "min_support": _support, "top": _whole("top", 1),
    "alpha": _alpha, "quantiles": _whole("quantiles", 2), "single": _bool("single"),
    "schema_from": _column("schema_from"), "no_weight": _bool("no_weight"), "fdr": _rate,
    "max_points": _points, "curves": _curves, "reference": _reference,
    "compared": _texts("compared"), "statistics": _statistics, "edges": _edges,
    "epsilon": _epsilon,
}


def _sweep_family(family: Family, metric: str, task: Task, sweep: bool) -> Family:
    """With a threshold sweep, decision metrics (built-in or declared) come from the sweep's
    counts."""
    swept = {DECISIONS.name: SWEEP, DECLARED.name: DECLARED_SWEEP}
    if not sweep or family not in (DECISIONS, SAMPLES, DECLARED):
        return family
    if family is SAMPLES or task not in swept[family.name].stats:
        raise InputError(f"{metric} cannot be swept over thresholds for task {task!r}; sweeps "
                         "cover the label-wise decision metrics of binary and multilabel tasks")
    return swept[family.name]


@dataclass
class Plan:
    """What a request runs for a task: each family's metrics and averages (None: no average)
    kept from its final step; ``curve``: the steps of a curve instead."""

    task: Task
    request: Request
    curve: tuple[str, ...] = ()
    keep: dict[str, dict[str, set[str | None]]] = field(default_factory=dict)
    families: dict[str, Family] = field(default_factory=dict)
    drawn: tuple[str, ...] = ()  # an evaluation's curves (``curves=``): their steps

    def add(self, family: Family, metric: str, average: str | None) -> None:
        self.families[family.name] = family
        self.keep.setdefault(family.name, {}).setdefault(metric, set()).add(average)

    def rows(self) -> dict[str, tuple[list[str], list[str]]]:
        """The metrics and averages each final step is asked for (the engines' ``keep``)."""
        kept: dict[str, tuple[set[str], set[str]]] = {}
        for name, wanted in self.keep.items():
            metrics, averages = kept.setdefault(self.final(self.families[name]),
                                                (set(), set()))
            metrics.update(wanted)
            averages.update("none" if a is None else a for a in set().union(*wanted.values()))
        return {step: (sorted(m), sorted(a)) for step, (m, a) in kept.items()}

    def final(self, family: Family) -> str:
        """The step whose rows are ``family``'s: its final step, or the one that reads them off
        another family's statistics in this plan (``registry.FUSED``)."""
        instead = FUSED.get(family.final)
        return instead[-1] if instead is not None and instead[-1] in self.steps() \
            else family.final

    def steps(self) -> list[str]:
        if self.curve:
            return list(self.curve)
        ordered: dict[str, None] = {}
        for family in self.families.values():
            ordered.update(dict.fromkeys(family.steps(self.task)))
        if self.delong():  # DeLong's variance from the curve the AUC is read off
            paired = self.request.model is not None  # a comparison of models: each placement
            ordered.update(dict.fromkeys((*CURVES["roc"][:-1], "block_placements",
                                          DELONG, *([PLACEMENTS] if paired else []))))
        if self.request.params["ci"] is not None and ESTIMATED.name in self.families:
            ordered.update(dict.fromkeys((*ESTIMATED.steps(self.task)[:-1], ESTIMATED_VARIANCE)))
        ordered.update(dict.fromkeys(self.drawn))  # read off the same statistics
        fused: dict[str, None] = {}
        for step in ordered:  # a statistic another step's pass also gives is read off that
            instead = FUSED.get(step, (step,))
            fused.update(dict.fromkeys(instead if instead[0] in ordered else (step,)))
        return list(fused)

    def delong(self) -> bool:
        """Whether intervals are asked and a label's ROC AUC of the whole curve is among the
        rows: those get DeLong's interval."""
        return (self.request.params["ci"] is not None and self.request.params["max_fpr"] is None
                and None in self.keep.get(RANKING.name, {}).get("roc_auc", set()))

    def resampled(self) -> Plan | None:
        """The plan of the rows the bootstrap gives intervals to: every row but DeLong's
        (None: no row left)."""
        plan = Plan(self.task, self.request)
        for name, wanted in self.keep.items():
            for metric, averages in wanted.items():
                for average in averages:
                    if not (self.delong() and metric == "roc_auc" and average is None) \
                            and name != ESTIMATED.name:  # theirs: estimated_variance
                        plan.add(self.families[name], metric, average)
        return plan if plan.keep else None

    @property
    def sweep(self) -> bool:
        return any(f.name in self.families for f in SWEPT)

    def probabilities(self) -> list[str]:
        """The metrics asked that read scores as probabilities or weights as counts (a
        reliability curve reads scores as probabilities)."""
        if self.curve:
            return ["a reliability table"] if self.request.kind == "reliability" else []
        calibrated = (self.request.calibration or ("isotonic" if self.request.reference
                                                   is not None else "none")) != "none"
        return [m for m in self.request.metric_names(self.task)
                if (METRICS[m].probabilities or METRICS[m].whole_weights)
                and not (calibrated and m in ESTIMATED_METRICS)]

    def shown(self, family: Family) -> list[str]:
        """The parameters shown as result columns on this family's rows (``Param.column``)."""
        used = {p for s in family.steps(self.task) for p in STEPS[s].params}
        wanted = self.keep.get(family.name, {})
        return [name for name in PARAM_COLUMNS
                if (name in used if PARAMS[name].column == "step"
                    else any(name in METRICS[m].params for m in wanted))]


# -- the result layout ------------------------------------------------------------------------

def tidy(plan: Plan, results: Mapping[str, pl.DataFrame], by: Sequence[str], *,
         replicated: bool = False) -> pl.DataFrame:
    """The rows of each family's final step that the request keeps, with a column per
    parameter shown, the user's segment columns, in the order asked: segments, then the
    metrics as asked, their averages as asked, labels, then the other keys."""
    params = plan.request.engine_params(plan)
    frames = []
    for family_name, wanted in plan.keep.items():
        family = plan.families[family_name]
        rows = results[plan.final(family)]
        if family in SWEPT:  # each (segment, threshold) was one segment
            rows = rows.with_columns(threshold=pl.col("segment").struct.field("threshold"),
                                     segment=pl.col("segment").struct.field("segment"))
        if replicated:  # and each (segment, replicate)
            rows = rows.with_columns(replicate=pl.col("segment").struct.field("replicate"),
                                     segment=pl.col("segment").struct.field("segment"))
        keys = pl.DataFrame(
            [(m, a) for m, avgs in wanted.items() for a in avgs],
            schema={"metric": pl.String, "average": pl.String}, orient="row")
        rows = rows.with_columns(pl.col("average").cast(pl.String)).join(
            keys, on=["metric", "average"], nulls_equal=True)
        frames.append(rows.with_columns(_param_columns(plan, family, wanted, params,
                                                       skip=rows.columns)))
    out = unpack_segment(pl.concat(frames, how="diagonal_relaxed"), by)
    optional = [c for c in ("predicted", *CELL_COLUMNS, *PARAM_COLUMNS, OPERATING_THRESHOLD)
                if c in out.columns and out[c].null_count() < out.height]
    order = [*by, "metric", "average", "label", *optional, "value",
             *(["replicate"] if replicated else [])]
    names = plan.request.metric_names(plan.task)
    averages = plan.request.averages(plan.task)
    rank = pl.col("metric").replace_strict({m: i for i, m in enumerate(names)},
                                           return_dtype=pl.Int32)
    average_rank = pl.col("average").fill_null("none").replace_strict(
        {a: i for i, a in enumerate(dict.fromkeys([*averages, "none"]))}, default=len(averages),
        return_dtype=pl.Int32)
    descending = [c == "threshold" for c in optional]
    return out.select(order).sort(
        [*by, rank, average_rank, "label", *optional],
        descending=[False] * (len(by) + 3) + descending, nulls_last=False, maintain_order=True)


def _param_columns(plan: Plan, family: Family, metrics: Iterable[str],
                   params: Mapping[str, object], *, skip: Sequence[str]) -> list[pl.Expr]:
    """A column per parameter shown in the results (a sweep's rows have their own
    ``threshold``: ``skip``): set on the rows of the metrics that name it, or on every row of a
    family whose steps read it (``Param.column``), null elsewhere."""
    shown = plan.shown(family)
    columns = []
    for name in PARAM_COLUMNS:
        if name in skip:
            continue
        param = PARAMS[name]
        value = pl.lit(params[name], dtype=param.dtype)
        if param.column == "step":
            columns.append((value if name in shown else pl.lit(None, param.dtype)).alias(name))
        else:
            owners = [m for m in metrics if name in METRICS[m].params]
            columns.append(pl.when(pl.col("metric").is_in(owners)).then(value).alias(name))
    return columns


def wide_column(rows: pl.DataFrame, *, short: bool = False) -> pl.Expr:
    """The column of a wide table that each of the tidy ``rows`` fills: its metric for a value
    per label or per segment (``f1``), metric and average for an average (``f1_macro``);
    ``short``: the metric alone where ``rows`` have it with one average only (a report's
    table of segments, which holds no per-label values).

    >>> rows = pl.DataFrame({"metric": ["f1", "f1", "auc"], "average": [None, "macro", "macro"]})
    >>> rows.select(wide_column(rows), short=wide_column(rows, short=True)).rows()
    [('f1', 'f1'), ('f1_macro', 'f1_macro'), ('auc_macro', 'auc')]
    """
    averaged = pl.col("average").is_not_null()
    if short:
        pairs = rows.select("metric", "average").unique().group_by("metric").len()
        averaged = averaged & pl.col("metric").is_in(
            pairs.filter(pl.col("len") > 1)["metric"].implode())
    return pl.when(averaged).then(pl.concat_str("metric", pl.lit("_"), "average")).otherwise(
        pl.col("metric")).alias("column")


def widen(rows: pl.DataFrame, by: Sequence[str], *, sweep: bool = False) -> pl.DataFrame:
    """The tidy rows of an evaluation as a table for reading: one row per segment and label
    (and threshold in a sweep, predicted class for a confusion matrix), one column per metric
    (per-label and whole-segment values: ``f1``) or metric and average (``f1_macro``), in the
    order of the rows. An operating point's threshold gets a column of its own
    (``max_f1_threshold``); parameters (beta, k...) are those of the request and are left out.
    Columns nobody fills are dropped.

    >>> rows = pl.DataFrame({"metric": ["f1", "f1"], "average": [None, "macro"],
    ...                      "label": ["a", None], "threshold": [0.5, 0.5], "value": [0.4, 0.4]})
    >>> widen(rows, []).columns
    ['label', 'f1', 'f1_macro']
    """
    keys = [*by, "label", *(["threshold"] if sweep else []),
            *(["predicted"] if "predicted" in rows.columns else [])]
    name = wide_column(rows)
    values = rows.select(*keys, column=name, value=pl.col("value"))
    if OPERATING_THRESHOLD in rows.columns:  # where an operating point is reached
        reached = rows.filter(pl.col(OPERATING_THRESHOLD).is_not_null())
        values = pl.concat([values, reached.select(
            *keys, column=pl.concat_str(name, pl.lit("_threshold")),
            value=OPERATING_THRESHOLD)])
    out = values.pivot(on="column", index=keys, values="value", maintain_order=True)
    filled = [c for c in out.columns if c in by or out[c].null_count() < out.height]
    reached = [c for c in filled if c.endswith("_threshold") and c not in keys]
    ordered = [x for c in filled if c not in reached
               for x in (c, *(r for r in reached if r == f"{c}_threshold"))]
    out = out.select(ordered)
    keyed = [k for k in keys if k in out.columns]
    return out.sort(keyed, descending=[k == "threshold" for k in keyed], nulls_last=False,
                    maintain_order=True)


def unpack_segment(frame: pl.DataFrame, by: Sequence[str]) -> pl.DataFrame:
    """The engines' ``segment`` key back as the user's segment columns. A float segment that
    holds both 0.0 and -0.0 is one segment, given as 0.0 (DuckDB keeps whichever came first)."""
    if not by:
        return frame.drop("segment")
    frame = frame.rename({"segment": by[0]}) if len(by) == 1 else frame.unnest("segment")
    floats = [c for c in by if frame.schema[c].is_float()]
    return frame.with_columns(pl.when(pl.col(c) == 0).then(0.0).otherwise(pl.col(c))
                              .cast(frame.schema[c]).alias(c) for c in floats)


def curve_table(plan: Plan, results: Mapping[str, pl.DataFrame],
                by: Sequence[str], *, step: str | None = None) -> pl.DataFrame:
    """A curve request's rows: one per (segment, label) and point, thresholds descending (the
    origin first), as every curve table; a sweep's from its decision metrics. ``step``: the
    rows of that final step instead (an evaluation's curves)."""
    if step is not None:
        out = unpack_segment(results[step], by)
    elif plan.request.kind == "thresholds":  # tn, fp, fn, tp and the metrics asked
        rows = tidy(plan, results, by)
        wide = rows.pivot(on="metric", index=[*by, "label", "threshold"], values="value")
        # a label's points are its own scores: the averaging grid's rows of another label's
        # score (every count null) are no point of it
        out = wide.filter(pl.col("tp").is_not_null()).select(
            *by, "label", "threshold", *plan.request.metric_names(plan.task))
    elif plan.sweep:
        rows = tidy(plan, results, by)
        wide = rows.pivot(on="metric", index=[*by, "label", "threshold"], values="value")
        fp, tn = pl.col("fp"), pl.col("tn")
        out = wide.select(
            *by, "label", "threshold", "tp", "fp", "fn", "tn",
            tpr=pl.col("recall"),
            fpr=fp / pl.when(fp + tn != 0).then(fp + tn),
            precision="precision", recall="recall",
        )
    else:
        out = unpack_segment(results[plan.curve[-1]], by)
    keys = [c for c in ("label", "threshold", "bin") if c in out.columns]
    # thresholds descending, but a DET curve's ascending, as scikit-learn's det_curve
    rising = step is None and plan.request.kind == "det"
    return out.sort([*by, *keys], descending=[False] * len(by) + [c == "threshold"
                                                                 and not rising
                                                                 for c in keys],
                    nulls_last=False, maintain_order=True)



