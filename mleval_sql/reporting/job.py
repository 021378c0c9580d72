"""A reporting job: what to read, how to slice it, what to compute and judge, read from TOML.

Every key is checked before any data is read; a bad one raises :class:`JobError` naming the key
and what was expected.

>>> job = Job.from_dict({"sources": [{"path": "fixtures/lake", "model_column": "model"}],
...                      "segments": ["region"], "metrics": ["roc_auc", "f1"]})
>>> [s.name for s in job.segmentations], job.metrics
(['overall', 'region'], ['roc_auc', 'f1'])
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from mleval_sql import windows
from mleval_sql.engines import ENGINES, local_engines
from mleval_sql.files import toml
from mleval_sql.params import CURVE_PARAMS, PARAMS, RESULT_COLUMNS
from mleval_sql.registry import AVERAGES, METRICS
from mleval_sql.request import (
    CALIBRATIONS,
    DRIFT_STATISTICS,
    ESTIMATED_METRICS,
    OPTIONS,
    Request,
    declare_for,
)
from mleval_sql.schema import InputError
from mleval_sql.windows import Window

CURVE_KINDS = CURVE_PARAMS["kind"].choices
#: The parameters of evaluate a job may set at its top level (a sweep's thresholds are the
#: [curves] table's ``bins``), with evaluate's defaults.
PARAMETERS: dict[str, Any] = {name: p.default for name, p in PARAMS.items()
                           if name not in ("thresholds", "bins")}
CONDITIONS = ("below", "above", "drop", "rise")
#: The column that names the model in every table; ``segmentation`` names the slicing.
MODEL, SEGMENTATION, SEGMENT = "model", "segmentation", "segment"
OVERALL = "overall"
#: The points a drawn ROC / PR curve keeps at most ([curves] max_points; 0: every point).
MAX_POINTS = 200
#: The keys of [slices], beside metric and over: the options of ``me.slices``.
SLICE_OPTIONS = ("max_level", "min_support", "top", "alpha", "quantiles", "fdr")
#: Every column name the report's own tables use: a segment (or slice) column named like one
#: is written with a trailing underscore (``segment_``), so that no table takes two columns of
#: one name and the report's own names never change.
REPORT_COLUMNS = frozenset({
    MODEL, SEGMENTATION, SEGMENT, *RESULT_COLUMNS, "operating_threshold", "baseline", "delta",
    "ci_low", "ci_high", "ci_method", "ci_resamples", "reason", "baseline_ci_low",
    "baseline_ci_high", "paired_p", "samples", "weight", "judged", "rows", "rule", "rule_key",
    "description", "p_value", "q_value", "label_coverage", "tp", "fp", "fn", "tn", "tpr",
    "fpr", "precision", "recall", "f1", "bin", "lower", "upper", "mean_score", "observed_rate",
    "level", "size",
    "rest_value", "score", "error", "max_error", "difference", *windows.COLUMNS, windows.END,
    *METRICS,
    *(f"{m}_{a}" for m in METRICS for a in AVERAGES)})


class JobError(InputError):
    """A job file that cannot be run: the message names the key and what was expected."""


@dataclass(frozen=True)
class Source:
    """Predictions of one model (``model``), or of several told apart by ``model_column``."""

    key: str  # where it is in the job, for messages: sources[0]
    paths: tuple[str, ...]
    model: str | None = None
    model_column: str | None = None
    columns: Mapping[str, str | None] = field(default_factory=dict)
    storage_options: Mapping[str, str] | None = None  # object storage beyond the environment
    as_of: int | str | None = None  # a Delta version or Iceberg snapshot


@dataclass(frozen=True)
class Segmentation:
    """One way to slice: the segment columns crossed; () is the whole data set."""

    columns: tuple[str, ...]

    @property
    def name(self) -> str:
        return " x ".join(self.columns) or OVERALL


@dataclass(frozen=True)
class Rule:
    """An alert: ``metric`` (``average``, ``label``) below/above a value, or a drop/rise by more
    than a value against the baseline."""

    key: str
    metric: str
    condition: str
    value: float
    average: str | None = None  # None: the first of the job's averages the metric has
    label: str | None = None
    significant: bool = False  # fires only where the test rejects "no change" (FDR controlled)
    drift: bool = False  # ``metric`` is a statistic of [drift]'s rows (of ``compared``)
    compared: str | None = None
    fairness: bool = False  # ``metric`` is a disparity of [fairness]'s rows

    def describe(self) -> str:
        what = (f"drift {self.metric}" + (f" of {self.compared}" if self.compared else "")
                if self.drift else self.metric) + (
            f" ({self.average})" if self.average else "") + (
            f" [{self.label}]" if self.label else "")
        if self.condition in ("drop", "rise"):
            text = f"{what} {self.condition}s by more than {self.value:g} against the baseline"
        else:
            text = f"{what} {self.condition} {self.value:g}"
        return text + (", significantly" if self.significant else "")


@dataclass(frozen=True)
class Baseline:
    """A previous run's output folder (``path``), and/or a model to compare every model with;
    with a window, the previous window (``previous``) or a window of the job's (``window``, a
    period's spelling: the first window of each granularity that starts in it, ``2026-10``
    the month's first day, its first week starting in October, the month)."""

    path: Path | None = None
    model: str | None = None
    previous: bool = False
    window: str | None = None


@dataclass(frozen=True)
class Slices:
    """The weakest slices of each model ([slices]): ``me.slices`` of each source by its
    model column, by ``metric`` over the columns ``over``, with ``options``."""

    metric: str
    over: tuple[str, ...]
    options: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Drift:
    """Drift against a reference ([drift]): ``me.drift`` of each source by its model column
    and each segmentation, with ``options`` (reference, compared, statistics, bins, edges,
    epsilon, threshold); the page shows ``statistic``."""

    options: Mapping[str, Any]
    statistic: str


@dataclass(frozen=True)
class FairnessSection:
    """Gaps between groups ([fairness]): ``me.fairness`` of each source by its model column
    (and ``by``, more control features) over the groups of the ``sensitive`` columns, with
    ``options`` (method, agg, min_support, max_groups, ci, resamples, seed); decisions at the
    job's threshold."""

    metrics: tuple[str, ...]
    sensitive: tuple[str, ...]
    by: tuple[str, ...] = ()
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def disparities(self) -> list[str]:
        """The named disparities asked (the rows alert rules judge)."""
        from mleval_sql.fairness import DISPARITIES

        return [m for m in self.metrics if m in DISPARITIES]


@dataclass(frozen=True)
class Estimation:
    """The estimated metrics' options ([estimation]): the labelled rows their calibration map
    is learnt on (``reference``, a path; None: the scores are read as calibrated
    probabilities) and the map (``calibration``; None: isotonic with a reference)."""

    reference: str | None = None
    calibration: str | None = None

    def options(self) -> dict[str, Any]:
        """As ``me.evaluate`` takes them."""
        return {k: v for k, v in (("reference", self.reference),
                                  ("calibration", self.calibration)) if v is not None}

    def said(self) -> dict[str, Any]:
        """What the estimates depend on besides the rows: the options, and each local
        reference file's path, size and modification time (a reference rewritten in place
        learns another map)."""
        files: list[list[Any]] = []
        if self.reference is not None and "://" not in self.reference:
            from mleval_sql.files import snapshot

            for path in snapshot([self.reference], suffixes=(".parquet", ".csv")):
                stat = os.stat(path)
                files.append([path, stat.st_size, stat.st_mtime_ns])
        return {**self.options(), "files": files}


@dataclass(frozen=True)
class Job:
    """A reporting job (see ``examples/report.toml`` for every key)."""

    sources: list[Source]
    metrics: list[str]
    segmentations: list[Segmentation]
    define: dict[str, Any] = field(default_factory=dict)  # [define.NAME]: metrics declared
    title: str = "Evaluation report"
    task: str | None = None
    engine: str = local_engines()[0]
    memory_limit: str | None = None
    threads: int | None = None  # None: every core (duckdb's sums are reproducible with any)
    average: list[str] = field(default_factory=list)
    options: dict[str, Any] = field(default_factory=lambda: dict(PARAMETERS))
    curves: list[str] = field(default_factory=lambda: list(CURVE_KINDS))
    max_points: int = MAX_POINTS
    sweep_bins: int = 20
    rank_by: str | None = None
    top: int = 3
    max_labels: int = 8
    baseline: Baseline | None = None
    rules: list[Rule] = field(default_factory=list)
    min_samples: int = 0
    min_weight: float = 0.0
    fdr: float = 0.05  # the false discovery rate of the significant rules' tests
    slices: Slices | None = None
    drift: Drift | None = None
    fairness: FairnessSection | None = None  # [fairness]: gaps between groups
    unlabelled: str = "error"  # "skip": rows of unknown truth left out, label_coverage said
    labels: str | None = None  # [labels] path: outcomes joined to the predictions by sample
    min_label_coverage: float = 0.9  # a segment whose truth is known for less: never alerts
    window: Window | None = None  # [window]: every table per time window
    history: Path | str | None = None  # [history] path (delta://...: a Delta table)
    estimation: Estimation | None = None  # [estimation]: what the estimated_* metrics read
    file: Path | None = None

    @property
    def reproducible(self) -> bool:
        """Whether reruns write the same bits with every thread (the engine can promise it)."""
        return "reproducible" in ENGINES[self.engine].options

    @property
    def segment_columns(self) -> list[str]:
        """The segment columns of every segmentation, as the sources name them."""
        return list(dict.fromkeys(c for s in self.segmentations for c in s.columns))

    @property
    def names(self) -> dict[str, str]:
        """Each segment and slice column of the sources -> its name in the report's tables:
        its own, or with a trailing underscore where the report uses that name itself."""
        columns = list(dict.fromkeys([*self.segment_columns,
                                      *(self.slices.over if self.slices else ())]))
        taken = set(columns)  # a renamed column takes no other column's name
        out = {}
        for column in columns:
            name = column
            while name in REPORT_COLUMNS or (name != column and name in taken):
                name += "_"
            taken.add(name)
            out[column] = name
        return out

    @property
    def segment_names(self) -> list[str]:
        """The segment columns as the report's tables name them."""
        return [self.names[c] for c in self.segment_columns]

    def request(self, action: str, source: Source, by: Sequence[str], **more: Any) -> Request:
        """The request of ``action`` on ``source`` by the columns ``by``: the job's options
        (evaluate's parameters only where they apply, [estimation]'s where an evaluation asks
        an estimated metric) and ``more``."""
        # the source's folder may hold the lake's metrics.toml: its definitions are this source's
        return Request.build(action, _source=list(source.paths),
                             **self.request_options(action, source, by, **more))

    def request_options(self, action: str, source: Source, by: Sequence[str],
                        **more: Any) -> dict[str, Any]:
        """The options of :meth:`request`, as keywords (``me.fairness`` takes evaluate's)."""
        taken = ENGINES[self.engine].options
        estimated = action == "evaluate" and self.estimation is not None and any(
            m in ESTIMATED_METRICS for m in more.get("metrics") or ())
        options = {"by": list(by), "columns": dict(source.columns), "task": self.task,
                   "engine": self.engine, "memory_limit": self.memory_limit,
                   "threads": self.threads if "threads" in taken else None,
                   "reproducible": self.reproducible, "storage_options": source.storage_options,
                   "as_of": source.as_of, "window": self.window,
                   "unlabelled": self.unlabelled, "labels": self.labels,
                   **({**self.options, "define": self.define or None}
                      if action in ("evaluate", "compare", "slices") else {}),
                   **(self.estimation.options() if estimated and self.estimation else {})}
        return {**options, **more}

    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> Job:
        """Read the TOML job file at ``path``; relative paths in it are relative to its folder."""
        path = Path(path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as error:
            raise JobError(f"cannot read the job file {os.fspath(path)!r}: "
                           f"{error.strerror or error}") from error
        tomllib = toml()
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as error:
            raise JobError(f"{path}: not valid TOML: {error}") from error
        return cls.from_dict(data, base=path.parent, file=path)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, base: str | os.PathLike[str] = ".",
                  file: Path | None = None) -> Job:
        """A job from the parsed TOML ``data``; relative paths are taken from ``base``."""
        where = f"{file}: " if file else ""
        try:
            return _parse(data, Path(base), file)
        except JobError as error:
            raise JobError(where + str(error)) from None


def _parse(data: Mapping[str, Any], base: Path, file: Path | None) -> Job:
    top = _Table(data, "")
    shared = top.get("columns", dict, default={})
    sources = [_source(s, f"sources[{i}]", base, shared)
               for i, s in enumerate(top.get("sources", list, required=True))]
    if not sources:
        raise JobError("sources: expected at least one [[sources]] table")
    models = [s.model for s in sources if s.model is not None]
    if len(set(models)) < len(models):
        raise JobError(f"sources: two sources name the same model {_dupe(models)!r}")
    # [define.NAME] (expr, higher_is_better, tasks, doc): declared before the metrics are
    # checked, over MLEVAL_METRICS's and the sources' metrics.toml (a name of those is replaced)
    define = top.get("define", dict, default={})
    try:
        declare_for([p for s in sources for p in s.paths], define or None)
    except InputError as error:
        raise JobError(str(error)) from None
    metrics = top.get("metrics", list, required=True)
    for i, name in enumerate(metrics):
        try:
            Request.build("evaluate", metrics=[_text(name, f"metrics[{i}]")])
        except JobError:
            raise
        except InputError as error:
            raise JobError(f"metrics[{i}]: {error}") from None
    metrics = list(dict.fromkeys(metrics))
    if not metrics:
        raise JobError("metrics: expected at least one metric name")
    segmentations = [Segmentation(())]
    for i, entry in enumerate(top.get("segments", list, default=[])):
        cols = [entry] if isinstance(entry, str) else entry
        if not isinstance(cols, list) or not cols:
            raise JobError(f"segments[{i}]: expected a column name or a list of column names "
                           f"(crossed), got {entry!r}")
        seg = Segmentation(tuple(_text(c, f"segments[{i}]") for c in cols))
        if len(set(seg.columns)) < len(seg.columns):
            raise JobError(f"segments[{i}]: a column is named twice in {list(seg.columns)}")
        if seg not in segmentations:
            segmentations.append(seg)
    task = top.get("task", str, default=None, choices=OPTIONS["task"].choices)
    engine = top.get("engine", str, default=local_engines()[0], choices=local_engines())
    average = top.get("average", (str, list), default=[])
    average = [average] if isinstance(average, str) else average
    given = {"task": task, "engine": engine,
             "unlabelled": top.get("unlabelled", str, default="error"),
             "memory_limit": top.get("memory_limit", str, default=None),
             "threads": top.get("threads", int, default=None), "average": average or None}
    for name in PARAMETERS:
        if name in data:
            value = top.get(name, (int, float, str))
            # TOML has no null: the text "null" stands for it where a parameter may be null
            given[name] = None if value == "null" and None in (
                PARAMS[name].default, *PARAMS[name].choices) else value
    for name, value in given.items():  # each checked as evaluate checks it, named by its key
        try:
            if name in PARAMS:
                PARAMS[name].check(value)
            else:
                Request.build("evaluate", metrics=metrics, **{name: value})
        except InputError as error:
            raise JobError(f"{name}: {error}") from None
    try:
        checked = Request.build("evaluate", metrics=metrics, **given)
    except InputError as error:
        raise JobError(str(error)) from None
    options = {name: checked.params[name] for name in PARAMETERS}
    curves = _Table(top.get("curves", dict, default={}), "curves")
    # curves are drawn from the truth: a job of estimated metrics alone draws none unless asked
    estimates_only = all(m in ESTIMATED_METRICS for m in metrics)
    kinds = curves.get("kinds", list, default=[] if estimates_only else list(CURVE_KINDS))
    for i, kind in enumerate(kinds):
        if kind not in CURVE_KINDS:
            raise JobError(f"curves.kinds[{i}]: expected one of {list(CURVE_KINDS)}, "
                           f"got {kind!r}")
    sweep_bins = curves.get("bins", int, default=20)
    max_points = curves.get("max_points", int, default=MAX_POINTS)
    try:
        Request.build("curve", max_points=max_points)
    except InputError as error:
        raise JobError(f"curves.max_points: {error}") from None
    curves.done()
    report = _Table(top.get("report", dict, default={}), "report")
    rank_by = report.get("rank_by", str, default=None)
    if rank_by is not None and rank_by not in metrics:
        raise JobError(f"report.rank_by: {rank_by!r} is not one of the job's metrics "
                       f"{metrics}")
    top_n = report.get("top", int, default=3)
    max_labels = report.get("max_labels", int, default=8)
    report.done()
    window = _window(top.get("window", dict)) if "window" in data else None
    outcomes = None
    if "labels" in data:
        table = _Table(top.get("labels", dict), "labels")
        text = table.get("path", str, required=True)
        table.done()
        outcomes = text if "://" in text or Path(text).is_absolute() else os.fspath(base / text)
        if "://" not in outcomes and not any(ch in outcomes for ch in "*?[") \
                and not Path(outcomes).exists():
            raise JobError(f"labels.path: no such file or folder: {outcomes}")
    estimation = _estimation(top.get("estimation", dict), base, metrics) \
        if "estimation" in data else None
    history = None
    if "history" in data:
        table = _Table(top.get("history", dict), "history")
        text = table.get("path", str, required=True)
        scheme, named, rest = text.partition("://")
        if named and scheme.lower() == "delta":  # a Delta table: the scheme says so
            history = f"delta://{rest if Path(rest).is_absolute() else base / rest}"
        else:
            history = Path(text) if Path(text).is_absolute() else base / text
        table.done()
        if window is None:
            raise JobError("history: keeps the rows of each time window; the job names none "
                           "([window] column = ..., every = ...)")
    baseline = None
    if "baseline" in data:
        table = _Table(top.get("baseline", dict), "baseline")
        previous = table.get("previous", bool, default=False)
        period = table.get("window", str, default=None)
        if period is not None:  # a period's spelling (2026-10, 2026-W41, 2026-10-05): checked
            try:
                windows.Period.parse(period)
            except InputError as error:
                raise JobError(f"baseline.window: {str(error).removeprefix('reference: ')}"
                               ) from None
        if (previous or period is not None) and window is None:
            raise JobError("baseline: previous and window compare time windows; the job "
                           "names none ([window] column = ..., every = ...)")
        if previous and period is not None:
            raise JobError("baseline: previous = true or window = ..., not both")
        path = table.get("path", str, default=None)
        folder = None
        if path is not None:
            folder = (base / path) if not Path(path).is_absolute() else Path(path)
            if not (folder / "metrics.parquet").is_file():
                raise JobError(f"baseline.path: {os.fspath(folder)!r} holds no metrics.parquet "
                               "(expected the output folder of an earlier run)")
        model = table.get("model", str, default=None)
        if folder is None and model is None and not previous and period is None:
            raise JobError("baseline: expected path (an earlier run's output folder), model "
                           "(one of the models), or both; with a window, previous = true or "
                           "window = a window's start")
        if folder is not None and (previous or period is not None):
            raise JobError("baseline: path (an earlier run) or a window of this job's "
                           "history, not both")
        table.done()
        baseline = Baseline(folder, model, previous, period)
    alerts = _Table(top.get("alerts", dict, default={}), "alerts")
    min_samples = alerts.get("min_samples", int, default=0)
    min_weight = float(alerts.get("min_weight", (int, float), default=0))
    min_coverage = float(alerts.get("min_label_coverage", (int, float), default=0.9))
    if not 0 <= min_coverage <= 1:
        raise JobError(f"alerts.min_label_coverage: expected a share in [0, 1], got "
                       f"{min_coverage!r}")
    fdr = float(alerts.get("fdr", (int, float), default=0.05))
    if not 0 < fdr < 1:
        raise JobError(f"alerts.fdr: expected a false discovery rate in (0, 1), got {fdr!r}")
    drift = _drift(top.get("drift", dict), base, options, window) if "drift" in data else None
    fairness = _fairness(top.get("fairness", dict), options, window) \
        if "fairness" in data else None
    rules = [_rule(r, f"alerts.rules[{i}]", metrics, baseline, options["ci"], drift, fairness)
             for i, r in enumerate(alerts.get("rules", list, default=[]))]
    alerts.done()
    slices = _slices(top.get("slices", dict), options) if "slices" in data else None
    if slices is not None and slices.metric in ESTIMATED_METRICS and estimation is not None \
            and estimation.reference is not None and estimation.calibration != "none":
        raise JobError(f"slices.metric: {slices.metric} is sliced with the scores read as "
                       "probabilities; [estimation]'s calibration map applies to the tables "
                       "only (slice a realised metric, or drop [estimation])")
    job = Job(sources=sources, metrics=metrics, segmentations=segmentations, define=define,
              title=top.get("title", str, default="Evaluation report"), task=checked.task,
              engine=engine, memory_limit=checked.memory_limit, threads=given["threads"],
              average=list(dict.fromkeys(average)), options=options, curves=kinds,
              max_points=max_points, sweep_bins=sweep_bins, rank_by=rank_by, top=top_n,
              max_labels=max_labels, baseline=baseline, rules=rules, min_samples=min_samples,
              min_weight=min_weight, fdr=fdr, slices=slices, drift=drift, fairness=fairness,
              window=window,
              unlabelled=given["unlabelled"], labels=outcomes, min_label_coverage=min_coverage,
              history=history, estimation=estimation, file=file)
    top.done()
    return job


def _slices(data: Any, options: Mapping[str, Any]) -> Slices:
    """[slices]: the metric (default error_rate), the columns slices are made of (over), and
    the options of ``me.slices``; the intervals are the job's (``ci``)."""
    from mleval_sql.slicing import ROW_ERRORS

    table = _Table(data, "slices")
    metric = table.get("metric", str, default="error_rate")
    if metric not in ROW_ERRORS and metric not in METRICS:
        hint = difflib.get_close_matches(metric, [*ROW_ERRORS, *METRICS], n=1)
        raise JobError(f"slices.metric: unknown metric {metric!r}"
                       + (f"; did you mean {hint[0]!r}?" if hint else "")
                       + f" (row-wise errors: {sorted(ROW_ERRORS)}, or any metric)")
    over = table.get("over", (str, list), required=True)
    over = [over] if isinstance(over, str) else over
    if not over:
        raise JobError("slices.over: expected the columns slices are made of, e.g. over = "
                       "[\"region\", \"device\"]")
    over = [_text(c, f"slices.over[{i}]") for i, c in enumerate(over)]
    given: dict[str, Any] = {}
    for name in SLICE_OPTIONS:
        default = OPTIONS[name].default
        value = table.get(name, (int, float), default=default)
        try:
            Request.build("slices", over=over, **{name: value})
        except InputError as error:
            raise JobError(f"slices.{name}: {error}") from None
        if value is not None:
            given[name] = value
    table.done()
    intervals = {k: options[k] for k in ("ci", "resamples", "seed")
                 if options.get("ci") is not None}
    return Slices(metric, tuple(over), {**given, **intervals})


def _drift(data: Any, base: Path, options: Mapping[str, Any], window: Window | None) -> Drift:
    """[drift]: the reference (a path, relative to the job's folder, a table of column =
    value selecting each source's reference rows, e.g. {model = "a"}, "previous", or a period
    of the time column, e.g. {period = "2026-10"}, the [window]'s column and time zone by
    default), the columns compared, the statistics and their settings, as ``me.drift`` takes
    them, and the statistic the page shows (default: psi, which every kind of column has);
    decisions at the job's threshold. The request is checked with the job's ``window``."""
    table = _Table(data, "drift")
    reference = table.get("reference", (str, dict), required=True)
    if isinstance(reference, str) and reference != "previous":  # previous: the window before
        reference = reference if "://" in reference or Path(reference).is_absolute() \
            else os.fspath(base / reference)
    given: dict[str, Any] = {"reference": reference}
    for name, kind in (("compared", (str, list)), ("statistics", (str, list)), ("bins", int),
                       ("edges", list), ("epsilon", (int, float))):
        value = table.get(name, kind, default=None)
        if value is not None:
            given[name] = value
    statistic = table.get("statistic", str, default=None)
    table.done()
    try:
        request = Request.build("drift", threshold=options.get("threshold", 0.5),
                                window=window, **given)
    except InputError as error:
        raise JobError(f"drift: {error}") from None
    shown = statistic or (request.statistics or ("psi",))[0]
    if request.statistics is not None and shown not in request.statistics:
        raise JobError(f"drift.statistic: {shown!r} is not among the statistics computed "
                       f"({', '.join(request.statistics)})")
    return Drift(given, shown)


def _fairness(data: Any, options: Mapping[str, Any],
              window: Window | None) -> FairnessSection:
    """[fairness]: the metrics (registry metrics, the rates, fairlearn's disparities), the
    sensitive columns, more control features than the model (by), and ``me.fairness``'s
    options; the intervals: the job's ``ci`` (and resamples, seed) unless [fairness] sets its
    own ``ci``. Each key is checked as ``me.fairness`` checks it, named by its key."""
    from mleval_sql.fairness import AGGS, DISPARITIES, MAX_GROUPS, METHODS, RATES

    table = _Table(data, "fairness")
    metrics = table.get("metrics", (str, list), required=True)
    metrics = [metrics] if isinstance(metrics, str) else metrics
    if not metrics:
        raise JobError("fairness.metrics: expected the metrics compared across groups, e.g. "
                       "[\"demographic_parity_ratio\", \"recall\"]")
    for i, name in enumerate(metrics):
        name = _text(name, f"fairness.metrics[{i}]")
        if name in DISPARITIES or name in RATES:
            continue
        try:
            Request.build("evaluate", metrics=[name])
        except InputError as error:
            raise JobError(f"fairness.metrics[{i}]: {error} (or a rate of {list(RATES)}, a "
                           f"disparity of {list(DISPARITIES)})") from None
    sensitive = table.get("sensitive", (str, list), required=True)
    sensitive = [sensitive] if isinstance(sensitive, str) else sensitive
    if not sensitive:
        raise JobError("fairness.sensitive: expected the columns whose values make the "
                       "groups, e.g. [\"sex\", \"age_band\"]")
    sensitive = [_text(c, f"fairness.sensitive[{i}]") for i, c in enumerate(sensitive)]
    by = table.get("by", (str, list), default=[])
    by = [_text(c, f"fairness.by[{i}]") for i, c in enumerate([by] if isinstance(by, str)
                                                               else by)]
    given: dict[str, Any] = {
        "method": table.get("method", str, default="between_groups", choices=METHODS),
        "agg": table.get("agg", str, default="worst_case", choices=AGGS),
        "min_support": table.get("min_support", (int, float), default=0),
        "max_groups": table.get("max_groups", int, default=MAX_GROUPS)}
    if given["min_support"] < 0:
        raise JobError(f"fairness.min_support: expected a number of samples >= 0, got "
                       f"{given['min_support']!r}")
    if given["max_groups"] < 1:
        raise JobError(f"fairness.max_groups: expected a whole number >= 1, got "
                       f"{given['max_groups']!r}")
    ci = table.get("ci", (int, float), default=options.get("ci"))
    table.done()
    if ci is not None:
        try:
            PARAMS["ci"].check(ci)
        except InputError as error:
            raise JobError(f"fairness.ci: {error}") from None
        given.update(ci=ci, resamples=options["resamples"], seed=options["seed"])
    if window is not None:
        raise JobError("fairness: not yet with a [window]; segment by a date column instead "
                       "(fairness.by)")
    for i, column in enumerate(sensitive):
        if column in by or sensitive.index(column) != i:
            raise JobError(f"fairness.sensitive[{i}]: {column!r} is named twice (in sensitive "
                           "or by)")
    return FairnessSection(tuple(metrics), tuple(sensitive), tuple(by), given)


def _estimation(data: Any, base: Path, metrics: list[str]) -> Estimation:
    """[estimation]: the labelled rows the estimated metrics' calibration map is learnt on
    (reference, a path relative to the job's folder) and the map (calibration), as
    ``me.evaluate`` takes them."""
    table = _Table(data, "estimation")
    reference = table.get("reference", str, default=None)
    calibration = table.get("calibration", str, default=None, choices=CALIBRATIONS)
    table.done()
    if not any(m in ESTIMATED_METRICS for m in metrics):
        raise JobError(f"estimation: serves the estimated metrics ({', '.join(ESTIMATED_METRICS)}"
                       f"); the job asks none (its metrics are {metrics})")
    if reference is not None:
        reference = _text(reference, "estimation.reference")
        if "://" not in reference and not Path(reference).is_absolute():
            reference = os.path.normpath(base / reference)
        if "://" not in reference and not any(ch in reference for ch in "*?[") \
                and not Path(reference).exists():
            raise JobError(f"estimation.reference: no such file or folder: {reference}")
    try:
        Request.build("evaluate", metrics=metrics, reference=reference, calibration=calibration)
    except InputError as error:
        raise JobError(f"estimation: {error}") from None
    return Estimation(reference, calibration)


def _window(data: Any) -> Window:
    """[window]: column, every (a granularity or a list) and time_zone, as ``window=``."""
    table = _Table(data, "window")
    given = {"column": table.get("column", str, required=True),
             "every": table.get("every", (str, list), required=True),
             "time_zone": table.get("time_zone", str, default="UTC")}
    table.done()
    try:
        return Window.parse(given)
    except InputError as error:
        raise JobError(str(error)) from None


def _source(data: Any, key: str, base: Path, shared: Mapping[str, str]) -> Source:
    if not isinstance(data, dict):
        raise JobError(f"{key}: expected a table ([[sources]]) with a path, got {data!r}")
    table = _Table(data, key)
    raw = table.get("path", (str, list), required=True)
    raw = [raw] if isinstance(raw, str) else raw
    if not raw:
        raise JobError(f"{key}.path: expected a path, a glob or a list of them")
    paths = []
    for i, p in enumerate(raw):
        text = _text(p, f"{key}.path[{i}]")
        if "://" not in text and not Path(text).is_absolute():
            text = os.path.normpath(base / text)
        if "://" not in text and not any(ch in text for ch in "*?[") and not Path(text).exists():
            raise JobError(f"{key}.path: no such file or folder: {text}")
        paths.append(text)
    model = table.get("model", str, default=None)
    model_column = table.get("model_column", str, default=None)
    if model is not None and model_column is not None:
        raise JobError(f"{key}: give model (the one model it holds) or model_column (the "
                       "column naming its models), not both")
    columns = table.get("columns", dict, default={})
    storage_options = table.get("storage_options", dict, default=None)
    as_of = table.get("as_of", (int, str), default=None)
    table.done()
    if model is None and model_column is None:
        model = Path(raw[0].rstrip("/")).stem or "model"
    mapping = {**shared, **columns}
    for role, name in mapping.items():
        if not isinstance(name, str):
            raise JobError(f"{key}.columns.{role}: expected a column name (\"\" for no "
                           f"weight), got {name!r}")
    return Source(key, tuple(paths), model, model_column,
                  {role: (name or None) for role, name in mapping.items()},
                  {k: str(v) for k, v in storage_options.items()} if storage_options else None,
                  as_of)


def _rule(data: Any, key: str, metrics: list[str], baseline: Baseline | None,
          ci: float | None, drift: Drift | None = None,
          fairness: FairnessSection | None = None) -> Rule:
    if not isinstance(data, dict):
        raise JobError(f"{key}: expected a table ([[alerts.rules]]), got {data!r}")
    if "drift" in data:
        return _drift_rule(data, key, drift)
    if fairness is not None and data.get("metric") in fairness.disparities \
            and data.get("metric") not in metrics:
        return _fairness_rule(data, key)
    table = _Table(data, key)
    metric = table.get("metric", str, required=True)
    if metric not in metrics:
        hint = difflib.get_close_matches(metric, metrics, n=1)
        raise JobError(f"{key}.metric: the job does not compute {metric!r}"
                       + (f"; did you mean {hint[0]!r}?" if hint else "")
                       + f" (its metrics are {metrics})")
    conditions = [c for c in CONDITIONS if c in data]
    if len(conditions) != 1:
        raise JobError(f"{key}: expected exactly one of {', '.join(CONDITIONS)} (e.g. below = "
                       f"0.8, drop = 0.02), got {conditions or 'none'}")
    condition = conditions[0]
    value = table.get(condition, (int, float))
    if condition in ("drop", "rise") and baseline is None:
        raise JobError(f"{key}.{condition}: compares with a baseline, but the job names none "
                       "([baseline] path = an earlier run's folder, or model = one of its "
                       "models)")
    average = table.get("average", str, default=None)
    if average is not None and average not in AVERAGES:
        raise JobError(f"{key}.average: expected one of {list(AVERAGES)}, got {average!r}")
    label = table.get("label", (str, int), default=None)
    significant = table.get("significant", bool, default=False)
    table.done()
    if significant and ci is None:
        raise JobError(f"{key}.significant: a test needs intervals; set ci = 0.95 (a level) at "
                       "the job's top level")
    return Rule(key, metric, condition, float(value), average,
                None if label is None else str(label), significant)


def _drift_rule(data: Mapping[str, Any], key: str, drift: Drift | None) -> Rule:
    """A rule on [drift]'s rows: ``drift`` names the statistic, ``compared`` and ``label``
    narrow it, ``above`` or ``below`` the value; ``significant``: where its test (ks, chi2)
    rejects "the same distribution", with the false discovery rate of every test controlled."""
    table = _Table(data, key)
    statistic = table.get("drift", str)
    if drift is None:
        raise JobError(f"{key}.drift: a rule on drift needs a [drift] section (reference = "
                       "...) in the job")
    asked = drift.options.get("statistics")
    computed = ([asked] if isinstance(asked, str) else list(asked)) if asked else None
    if computed is not None and statistic not in computed:
        raise JobError(f"{key}.drift: [drift] computes no {statistic!r} (its statistics: "
                       f"{', '.join(computed)})")
    if statistic not in DRIFT_STATISTICS:
        hint = difflib.get_close_matches(statistic, DRIFT_STATISTICS, n=1)
        raise JobError(f"{key}.drift: unknown statistic {statistic!r}"
                       + (f"; did you mean {hint[0]!r}?" if hint else ""))
    conditions = [c for c in ("below", "above") if c in data]
    if len(conditions) != 1:
        raise JobError(f"{key}: expected exactly one of below, above (e.g. above = 0.2), got "
                       f"{conditions or 'none'}")
    value = table.get(conditions[0], (int, float))
    compared = table.get("compared", str, default=None)
    label = table.get("label", (str, int), default=None)
    significant = table.get("significant", bool, default=False)
    table.done()
    if significant and statistic not in ("ks", "chi2"):
        raise JobError(f"{key}.significant: {statistic} has no test; ks and chi2 do")
    return Rule(key, statistic, conditions[0], float(value), None,
                None if label is None else str(label), significant, drift=True,
                compared=compared)


def _fairness_rule(data: Mapping[str, Any], key: str) -> Rule:
    """A rule on [fairness]'s rows: ``metric`` a disparity it computes (per model, and label
    where per label: ``label`` narrows it), ``above`` or ``below`` the value (e.g.
    demographic_parity_ratio below 0.8, the four-fifths rule)."""
    table = _Table(data, key)
    metric = table.get("metric", str)
    conditions = [c for c in ("below", "above") if c in data]
    if len(conditions) != 1:
        raise JobError(f"{key}: expected exactly one of below, above (e.g. below = 0.8), got "
                       f"{conditions or 'none'}")
    value = table.get(conditions[0], (int, float))
    label = table.get("label", (str, int), default=None)
    significant = table.get("significant", bool, default=False)
    table.done()
    if significant:
        raise JobError(f"{key}.significant: a rule on a disparity fires on its value; the "
                       "p-value of no gap is in fairness_summary.parquet (not yet a test of "
                       "the rule's bound)")
    return Rule(key, metric, conditions[0], float(value), None,
                None if label is None else str(label), fairness=True)


class _Table:
    """Typed access to one TOML table; ``done()`` rejects the keys nobody asked for."""

    def __init__(self, data: Any, key: str) -> None:
        if not isinstance(data, Mapping):
            raise JobError(f"{key or 'the job'}: expected a table, got {data!r}")
        self.data, self.key, self.seen = data, key, set()

    def get(self, name: str, kind: type | tuple[type, ...], *, default: Any = None,
            required: bool = False, choices: Sequence[Any] = ()) -> Any:
        self.seen.add(name)
        key = f"{self.key}.{name}" if self.key else name
        if name not in self.data:
            if required:
                raise JobError(f"{key}: missing; expected {_kind(kind)}")
            return default
        value = self.data[name]
        kinds = kind if isinstance(kind, tuple) else (kind,)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise JobError(f"{key}: expected {_kind(kind)}, got {value!r}")
        if choices and value not in choices:
            raise JobError(f"{key}: expected one of {list(choices)}, got {value!r}")
        return value

    def done(self) -> None:
        for name in self.data:
            if name not in self.seen:
                close = difflib.get_close_matches(name, self.seen, n=1)
                where = f"[{self.key}]" if self.key else "the job's top level"
                raise JobError(f"{self.key + '.' if self.key else ''}{name}: unknown key in "
                               f"{where}" + (f"; did you mean {close[0]!r}?" if close else
                                             f" (known: {', '.join(sorted(self.seen))})"))


def _kind(kind: type | tuple[type, ...]) -> str:
    names = {str: "a string", int: "a whole number", float: "a number", list: "a list",
             dict: "a table", bool: "true or false"}
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join(names.get(k, k.__name__) for k in kinds)


def _text(value: Any, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise JobError(f"{key}: expected a non-empty string, got {value!r}")
    return value


def _dupe(values: Sequence[str]) -> str:
    return next(v for v in values if values.count(v) > 1)
