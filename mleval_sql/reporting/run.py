"""Run a reporting job: for each source and each segmentation of the job (the whole data set,
each segment column, each crossing), one evaluation gives the job's metrics, the sizes of its
segments and the tables that draw its ROC, PR and reliability curves, from one pass over the
source (the sorted curve table the ranking metrics read is the one the curves are thinned
from); a sweep is one more request, the weakest slices ([slices]) one per source. Then the
baseline and the alerts.

Each segmentation is a request by its own columns (and the source's model column); its rows are
put on one table whose ``segmentation`` names it and whose segment columns it does not use are
null. Segment columns keep their names in the tables, but for those the report uses itself
(``segment``, ``model``, ``metric``...), which get a trailing underscore (:attr:`Job.names`).

>>> result = run(Job.load("examples/report.toml"))  # doctest: +SKIP
>>> result.alerts.height  # doctest: +SKIP
"""

from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import polars as pl

from mleval_sql import uncertainty
from mleval_sql.api import Outcome
from mleval_sql.api import run as run_request
from mleval_sql.labels import COVERAGE
from mleval_sql.params import PARAMS, RESULT_COLUMNS
from mleval_sql.registry import LOWER_IS_BETTER, METRICS
from mleval_sql.reporting import over_time
from mleval_sql.reporting.job import (
    MODEL,
    OVERALL,
    SEGMENT,
    SEGMENTATION,
    Job,
    JobError,
    Rule,
    Segmentation,
    Source,
)
from mleval_sql.request import DRAWN, ESTIMATED_METRICS, wide_column
from mleval_sql.schema import InputError
from mleval_sql.sources import Parquet, as_source
from mleval_sql.windows import COLUMNS, END, GRANULARITY, START

#: Metrics that rank nothing: counts.
NEUTRAL = frozenset({"tp", "tn", "support", "confusion_matrix"})
SWEEP_METRICS = ("precision", "recall", "f1")
#: Tasks without ROC, PR, sweep or reliability curves: a job of one of these draws none.
NO_CURVES = ("regression", "clustering")
#: The tables of [fairness] (``me.fairness``'s), each written as fairness_<name>.parquet.
FAIRNESS_TABLES = ("groups", "summary", "disparities")
#: The options of a request without intervals, whatever the job's ci, resamples and seed.
NO_INTERVALS = {"ci": None, **{name: PARAMS[name].default for name in ("resamples", "seed")}}


@dataclass
class Result:
    """What a job computed: every table of the report, before anything is written."""

    job: Job
    task: str
    metrics: pl.DataFrame  # tidy: keys, metric, average, label, [...], value, baseline, delta
    sizes: pl.DataFrame  # model, segmentation, segment, <segment columns>, samples, weight, judged
    curves: dict[str, pl.DataFrame]  # by kind: roc and pr share one table of points
    alerts: pl.DataFrame
    inputs: list[dict[str, Any]]
    tests: int = 0  # how many tests the significant rules made (their FDR is controlled)
    timings: dict[str, float] = field(default_factory=dict)
    slices: pl.DataFrame | None = None  # the weakest slices of each model ([slices])
    drift: pl.DataFrame | None = None  # drift against the reference ([drift]), every window's
    #: with a [window]: every window's metric rows with their segment's samples and weight
    trend: pl.DataFrame | None = None
    #: with a [history]: the windows computed tonight and why, those kept, what was read
    night: dict[str, Any] | None = None
    #: the scores of the most drifted segment and label the page shows, on both sides
    drift_scores: DriftScores | None = None
    #: [fairness]: me.fairness's tables (groups, summary, disparities), every model's
    fairness: dict[str, pl.DataFrame] | None = None

    @property
    def keys(self) -> list[str]:
        return result_keys(self.job)

    def curve_files(self) -> dict[str, pl.DataFrame]:
        """The curve tables by file stem: ``curve_roc_pr`` (one table draws both), ..."""
        return {"curve_" + "_".join(kinds): table
                for kinds, table in shared_tables(self.curves).items()}


@dataclass(frozen=True)
class DriftScores:
    """The score distributions of the most drifted (segment, label) of the page: its drift
    row (of the statistic shown) and each side's weight in bins (``me.drift``'s
    :func:`~mleval_sql.drift.score_bins`)."""

    row: dict[str, Any]
    bins: pl.DataFrame


def shown_drift(drift: pl.DataFrame, job: Job) -> tuple[pl.DataFrame, over_time.WindowKey | None]:
    """The drift rows the page shows (with a window, the latest window's, without the window's
    columns) and that window."""
    window = job.window
    if window is None or GRANULARITY not in drift.columns:
        return drift, None
    latest = over_time.latest_window(drift, window.every)
    return over_time.at(drift, latest), latest


def most_drifted_score(rows: pl.DataFrame, statistic: str) -> dict[str, Any] | None:
    """The row of the page's drift rows (:func:`shown_drift`) whose scores drifted the most
    by ``statistic`` (the first of equal ones), None where no score row has a value."""
    scored = rows.filter(pl.col("statistic") == statistic, pl.col("compared") == "score",
                         pl.col("value").is_not_null())
    if scored.is_empty():
        return None
    return scored.sort("value", descending=True, maintain_order=True).row(0, named=True)


def result_keys(job: Job) -> list[str]:
    """The columns that name a segment in every table: model, segmentation, segment and the
    segment columns."""
    return [MODEL, SEGMENTATION, SEGMENT, *job.segment_names]


def _concat(parts: list[pl.DataFrame], job: Job, *columns: str) -> pl.DataFrame:
    """``parts`` as one table; none (no window computed tonight): no rows, with the keys and
    ``columns``."""
    if parts:
        return pl.concat(parts, how="diagonal_relaxed")
    schema = {MODEL: pl.String, SEGMENTATION: pl.String,
              **dict.fromkeys(job.segment_names, pl.String)}
    return pl.DataFrame(schema={**schema, **{c: pl.Float64 if c in ("value", "weight")
                                             else pl.Int64 if c == "samples" else pl.String
                                             for c in columns}})


def shared_tables(curves: dict[str, pl.DataFrame]) -> dict[tuple[str, ...], pl.DataFrame]:
    """``curves`` (kind -> table) as the kinds each table draws -> the table: an evaluation's
    ROC and PR curves are one table of points."""
    kinds: dict[int, tuple[str, ...]] = {}
    tables = {}
    for kind, table in curves.items():
        kinds[id(table)] = (*kinds.get(id(table), ()), kind)
        tables[id(table)] = table
    return {kinds[key]: tables[key] for key in kinds}


class Progress:
    """Stage messages on stderr, only when it is a terminal."""

    def __init__(self, total: int, *, show: bool | None = None) -> None:
        self.total, self.done = total, 0
        self.show = sys.stderr.isatty() if show is None else show
        self.started = time.perf_counter()
        self.timings: dict[str, float] = {}
        self._stage: tuple[str, float] | None = None

    def stage(self, name: str) -> None:
        now = time.perf_counter()
        if self._stage is not None:
            self.timings[self._stage[0]] = now - self._stage[1]
        self._stage = (name, now)
        self.done += 1
        if self.show:
            print(f"mleval report: [{self.done}/{self.total}] {name}", file=sys.stderr,
                  flush=True)

    def finish(self) -> dict[str, float]:
        self.stage("done")
        self.timings.pop("done", None)
        self.timings["total"] = time.perf_counter() - self.started
        return self.timings


def stages(job: Job) -> int:
    """How many stages :func:`run` names: the checks, each source's evaluations (one per
    segmentation), sweep, slices and drift, the baseline and alerts, and the most drifted
    scores."""
    per_source = len(job.segmentations) + ("sweep" in job.curves) + (job.slices is not None) \
        + (job.drift is not None) + (job.fairness is not None)
    return 2 + (job.drift is not None) + len(job.sources) * per_source


def run(job: Job, progress: Progress | None = None, *, full_refresh: bool = False) -> Result:
    """Compute every table of ``job``; nothing is written but a [history]'s windows
    (``full_refresh``: every window recomputed, the history started over)."""
    progress = progress or Progress(stages(job))
    progress.stage("checking the sources")
    prepared = [_Prepared(job, source) for source in job.sources]
    task = job.task or _task(prepared, job)
    if job.history is None:
        return _run(job, prepared, task, progress)
    with over_time.night(job, {p.source.key: p.files for p in prepared},
                         full_refresh=full_refresh) as tonight:
        if tonight.files_known:  # only the windows whose inputs or request changed
            assert job.window is not None
            tonight_job = replace(job, window=replace(job.window, only=tonight.windows))
            for p in prepared:
                p.restrict(tonight_job, tonight)
        return _run(job, [p for p in prepared if not p.empty], task, progress, tonight)


def _run(job: Job, prepared: list[_Prepared], task: str, progress: Progress,
         tonight: over_time.Night | None = None) -> Result:
    frames: list[pl.DataFrame] = []
    sizes: list[pl.DataFrame] = []
    curves: dict[tuple[str, ...], list[pl.DataFrame]] = {}
    found: list[pl.DataFrame] = []
    drifts: list[pl.DataFrame] = []
    drifted: list[_Prepared] = []  # the source of each table of drifts
    fair: list[dict[str, pl.DataFrame]] = []
    inputs = []
    for source in prepared:
        metrics, size, drawn = source.evaluate(_metrics(job, task), task, progress)
        frames.append(metrics)
        sizes.append(size)
        inputs.append(source.describe(size))
        for kinds, table in drawn.items():
            curves.setdefault(kinds, []).append(table)
        if "sweep" in job.curves:
            progress.stage(f"{source.source.key}: sweep curves")
            table = source.sweep(task)
            if table is not None:
                curves.setdefault(("sweep",), []).append(table)
        if job.slices is not None:
            progress.stage(f"{source.source.key}: slices")
            found.append(source.slices(task))
        if job.drift is not None:
            progress.stage(f"{source.source.key}: drift")
            drifts.append(source.drift())
            drifted.append(source)
        if job.fairness is not None:
            progress.stage(f"{source.source.key}: fairness")
            fair.append(source.fairness(task))
    fairness = {name: pl.concat([f[name] for f in fair], how="diagonal_relaxed")
                for name in FAIRNESS_TABLES} if fair else None
    progress.stage("baseline and alerts")
    order = {s.name: i for i, s in enumerate(job.segmentations)}
    size_table = _judged(_named(_concat(sizes, job, "samples", "weight"), job), job)
    size_table = _sorted(size_table, job, order)
    metrics = _sorted(_named(_concat(frames, job, "metric", "average", "label", "value"),
                              job), job, order)
    trend, reference, latest = None, None, None
    if job.window is not None:  # the page is of the latest window; the trends of them all
        if tonight is not None:  # tonight's windows replace theirs; the page reads them all
            tonight.keep(_with_sizes(metrics, size_table))
            metrics, size_table = over_time.unsized(tonight.read(), result_keys(job))
            metrics = _sorted(metrics, job, order)
            size_table = _sorted(_judged(size_table, job), job, order)
        trend = _with_sizes(metrics, size_table)
        latest = over_time.latest_window(metrics, job.window.every)
        if job.baseline is not None and (job.baseline.previous or job.baseline.window):
            reference = over_time.at(metrics, over_time.reference_window(
                metrics, latest, job.baseline))
        trend = _with_baseline(trend, job, reference) if job.baseline is None or \
            not job.baseline.previous else trend.with_columns(  # the line's own point before
                baseline=pl.lit(None, pl.Float64), delta=pl.lit(None, pl.Float64))
        metrics, size_table = over_time.at(metrics, latest), over_time.at(size_table, latest)
        curves = {kinds: [over_time.at(t, latest) for t in parts]
                  for kinds, parts in curves.items()}
        found = [over_time.at(t, latest) for t in found]
    metrics = _with_baseline(metrics, job, reference)
    paired = [p.paired(_metrics(job, task), task, metrics) for p in prepared
              if _tests_models(job)]
    if any(p is not None for p in paired):
        tested = _named(pl.concat([p for p in paired if p is not None], how="diagonal_relaxed"),
                        job)
        if job.window is not None:  # the page's window: the latest
            tested = over_time.at(tested, latest)
        keys = [MODEL, SEGMENTATION, SEGMENT, "metric", "average", "label"]
        metrics = metrics.join(tested.select(*keys, "paired_p").with_columns(
            pl.col(k).cast(metrics.schema[k]) for k in keys), on=keys, how="left",
            nulls_equal=True, maintain_order="left")
    drift = None
    if drifts:  # in the job's order of models and segmentations, each in drift's own order
        drift = _named(pl.concat(drifts, how="diagonal_relaxed"), job).sort(
            MODEL, pl.col(SEGMENTATION).replace_strict(order, return_dtype=pl.Int32),
            maintain_order=True)
    judged_drift = drift if drift is None or job.window is None else over_time.at(drift, latest)
    alerts, tests = _alerts(metrics, size_table, job, order, judged_drift,
                            None if fairness is None else fairness["disparities"])
    curve_tables = {}
    for kinds, parts in curves.items():  # roc and pr: one table
        table = _sorted(_named(pl.concat(parts, how="diagonal_relaxed"), job), job, order)
        curve_tables.update(dict.fromkeys(kinds, table))
    slices = pl.concat(found, how="diagonal_relaxed") if found else None
    scores = None
    if drift is not None:
        progress.stage("drift: the most drifted scores")
        scores = _drift_scores(job, drift, drifted, drifts)
    result = Result(job, task, metrics, size_table, curve_tables, alerts, inputs, tests=tests,
                    slices=slices, drift=drift, trend=trend,
                    night=None if tonight is None else tonight.summary(), drift_scores=scores,
                    fairness=fairness)
    result.timings = progress.timings
    return result


def _drift_scores(job: Job, drift: pl.DataFrame, sources: list[_Prepared],
                  tables: list[pl.DataFrame]) -> DriftScores | None:
    """The score distributions of the page's most drifted score row, read from the source
    whose drift table holds it (None: no score row has a value)."""
    assert job.drift is not None
    rows, window = shown_drift(drift, job)
    row = most_drifted_score(rows, job.drift.statistic)
    if row is None:
        return None
    keys = {MODEL: row[MODEL], SEGMENTATION: row[SEGMENTATION], SEGMENT: row[SEGMENT]}
    for source, table in zip(sources, tables, strict=True):
        if not _named(table, job).filter(
                *(pl.col(k) == v for k, v in keys.items())).is_empty():
            return DriftScores(row, source.drift_scores(row, window))
    return None


def _tests_models(job: Job) -> bool:
    """Whether a significant rule compares models with the baseline model: paired tests."""
    return job.baseline is not None and job.baseline.model is not None and any(
        r.significant and r.condition in ("drop", "rise") for r in job.rules)


def _metrics(job: Job, task: str) -> list[str]:
    """The job's metrics, plus the areas the curves' legends show and, for multiclass, the
    confusion matrix of the heat maps."""
    if task in NO_CURVES:
        return job.metrics
    extra = {"roc": "roc_auc", "pr": "average_precision"}
    more = [extra[k] for k in job.curves if k in extra]
    if task == "multiclass":
        more.append("confusion_matrix")
    return list(dict.fromkeys([*job.metrics, *more]))


class _Prepared:
    """One source, listed once (every request of the job reads the same snapshot), with the
    job's segment and model columns checked against its schema. A column that evaluate does
    not take as a segment column (``metric``, ``value``...: names of its results) is read
    under its name in the report's tables (a lazy rename of the source)."""

    def __init__(self, job: Job, source: Source) -> None:
        self.job, self.source = job, source
        try:
            src = as_source(list(source.paths), storage_options=source.storage_options,
                            as_of=source.as_of)
            present = src.schema().names()
        except InputError as error:
            raise JobError(f"{source.key}.path: {error}") from None
        for column in job.segment_columns:
            if column not in present:
                raise JobError(f"segments: {source.key} has no column {column!r}; its "
                               f"columns are {present}")
        for column in job.slices.over if job.slices else ():
            if column not in present:
                raise JobError(f"slices.over: {source.key} has no column {column!r}; its "
                               f"columns are {present}")
            if column == source.model_column:
                raise JobError(f"slices.over: {column!r} is the model column of "
                               f"{source.key}: slices are found within each model")
        fair = job.fairness
        for key, columns in (("sensitive", fair.sensitive), ("by", fair.by)) if fair else ():
            for column in columns:
                if column not in present or column == source.model_column:
                    raise JobError(f"fairness.{key}: {source.key} has no column {column!r}; "
                                   f"its columns are {present}" if column not in present else
                                   f"fairness.{key}: {column!r} is the model column of "
                                   f"{source.key}: the gaps are per model")
        if source.model_column is not None and source.model_column not in present:
            raise JobError(f"{source.key}.model_column: no column {source.model_column!r}; "
                           f"its columns are {present}")
        if MODEL in present and source.model_column != MODEL \
                and MODEL not in job.segment_columns:
            raise JobError(f"{source.key}: it has a column {MODEL!r} already; name it with "
                           f"model_column = {MODEL!r} (or segment by it)")
        # the columns read under another name: those evaluate refuses as segments
        renamed = {c: n for c, n in job.names.items() if c in RESULT_COLUMNS}
        model = source.model_column
        if model is not None and model in RESULT_COLUMNS:
            renamed[model] = next(f"{model}{'_' * i}" for i in range(1, len(present) + 2)
                                  if f"{model}{'_' * i}" not in {*present, *job.names.values()})
        self.files = src  # as listed: a nightly job's windows are told apart by its files
        self.renamed_as = renamed
        self.src = as_source(src.polars().rename(renamed)) if renamed else src
        self.renamed = bool(renamed)
        self.empty = False  # no row to read tonight (restrict)
        self.night: over_time.Night | None = None  # tonight's, where its files are known
        #: each column of the source -> as the requests read it, and as the tables name it
        self.read = {c: renamed.get(c, c) for c in [*job.names, *([model] if model else [])]}
        self.out = {self.read[c]: n for c, n in job.names.items() if self.read[c] != n}
        #: the model column as the requests read it (None: the source is one model)
        self.model = self.read[model] if model else None

    def restrict(self, job: Job, night: over_time.Night) -> None:
        """Read only the files of tonight's windows (``job``'s) of the source (all: where
        they are not known)."""
        self.job = job
        files = night.files[self.source.key]
        if files is None:
            return
        self.night = night
        self.empty = not files
        self.src = self._of(files) if files else self.src

    def _of(self, files: list[str]) -> Any:
        """The source's rows in ``files``, its columns named as the requests read them."""
        src = Parquet(tuple(files))
        return as_source(src.polars().rename(self.renamed_as)) if self.renamed_as else src

    def _drifted(self, request: Any) -> tuple[Any, Any]:
        """The request and source a drift of tonight's windows reads: with them the files of
        its reference where that is windows of the same input (the window before each, or a
        fixed period), which the metrics do not read."""
        reads = None if self.night is None else \
            self.night.with_reference(self.source.key, request.reference)
        if reads is None or request.window is None:
            return request, self.src
        files, windows = reads
        return replace(request, window=replace(request.window, only=windows)), self._of(files)

    def _by(self, segmentation: Segmentation) -> list[str]:
        """The columns a request of ``segmentation`` is by: the model column and its own."""
        return [*([self.model] if self.model else []),
                *(self.read[c] for c in segmentation.columns)]

    def _request(self, action: str, by: list[str], **more: Any) -> Any:
        where = {"storage_options": None, "as_of": None} if self.renamed else {}
        return self.job.request(action, self.source, by, **where, **more)

    def _run(self, action: str, segmentation: Segmentation, **more: Any) -> Outcome:
        request = self._request(action, self._by(segmentation), **more)
        with self._naming():
            return run_request(request, self.src)

    def _tables(self, action: str, **more: Any) -> pl.DataFrame:
        """The table of ``action`` of every segmentation, on one grid."""
        return self._grid([self._keyed(self._run(action, s, **more).table, s)
                           for s in self.job.segmentations])

    def _grid(self, frames: list[pl.DataFrame]) -> pl.DataFrame:
        """``frames`` as one table: model, segmentation, every segment column (null where a
        segmentation does not use it), then the rest."""
        out = pl.concat(frames, how="diagonal_relaxed")
        segments = [c for c in self.job.segment_names if c in out.columns]
        return out.select(MODEL, SEGMENTATION, *segments,
                          pl.exclude(MODEL, SEGMENTATION, *segments))

    def _keyed(self, table: pl.DataFrame | None, segmentation: Segmentation) -> pl.DataFrame:
        """``table`` with ``model`` (the model's name as text) and ``segmentation`` first, its
        segment columns named as the report's tables name them."""
        assert table is not None
        model = (pl.col(self.model).cast(pl.String) if self.model
                 else pl.lit(self.source.model, dtype=pl.String))
        rest = [c for c in table.columns if c != self.model]
        return table.select(model.alias(MODEL), pl.lit(segmentation.name).alias(SEGMENTATION),
                            *rest).rename({k: v for k, v in self.out.items()
                                           if k in table.columns and k != self.model})

    def task(self) -> str:
        """The source's task, as its truth says; a job of estimated metrics alone may have
        none to read: then binary, or multilabel with a label column (per label, the
        estimates are the same whatever the classes' task)."""
        job = self.job
        schema = self.src.schema()
        truth = self.source.columns.get("truth") or "truth"
        if job.labels is not None or truth in schema or not all(
                m in ESTIMATED_METRICS for m in job.metrics):
            return self._run("check", job.segmentations[0]).task
        return "multilabel" if (self.source.columns.get("label") or "label") in schema \
            else "binary"

    def evaluate(self, metrics: list[str], task: str, progress: Progress,
                 ) -> tuple[pl.DataFrame, pl.DataFrame, dict[tuple[str, ...], pl.DataFrame]]:
        """The metric rows, the sizes (samples, their weight) and the curve tables of every
        segment of every segmentation, one evaluation each; the curves by the kinds each table
        draws (ROC and PR: one table). The estimated metrics are an evaluation of their own,
        which reads every row: the sizes are its own, every row's, where the realised
        metrics read only those of known truth (``unlabelled = "skip"``: their share is
        ``label_coverage``)."""
        estimated = [m for m in metrics if m in ESTIMATED_METRICS]
        realised = [m for m in metrics if m not in ESTIMATED_METRICS]
        kinds = [] if task in NO_CURVES or not realised else \
            [k for k in self.job.curves if k in DRAWN]
        points = {"max_points": self.job.max_points} if {"roc", "pr"} & set(kinds) else {}
        averages = _averages(self.job, metrics)
        rows, sizes = [], []
        drawn: dict[tuple[str, ...], list[pl.DataFrame]] = {}
        for segmentation in self.job.segmentations:
            progress.stage(f"{self.source.key}: {segmentation.name}")
            outcome = self._run("evaluate", segmentation, metrics=realised or estimated,
                                task=task, average=averages, curves=kinds, **points)
            table, size = outcome.table, outcome.sizes.drop("rows")
            if realised and estimated:
                theirs = self._run("evaluate", segmentation, metrics=estimated, task=task,
                                   average=averages)
                assert table is not None and theirs.table is not None
                size = _every_row(size, theirs.sizes.drop("rows"))
                table = _with_coverage(pl.concat([table, theirs.table], how="diagonal_relaxed"),
                                       size)
            rows.append(self._keyed(table, segmentation))
            sizes.append(self._keyed(size, segmentation))
            for shared, table in shared_tables(outcome.curves).items():
                drawn.setdefault(shared, []).append(self._keyed(table, segmentation))
        curves = {shared: self._grid(parts) for shared, parts in drawn.items()}
        return self._grid(rows), self._grid(sizes), curves

    @contextmanager
    def _naming(self) -> Iterator[None]:
        """Bad input is reported with the source it is in."""
        try:
            yield
        except JobError:
            raise
        except InputError as error:
            raise InputError(f"{self.source.key} ({', '.join(self.source.paths)}): "
                             f"{error}") from None

    def sweep(self, task: str) -> pl.DataFrame | None:
        """F1, precision and recall at the sweep's thresholds (binary and multilabel: multiclass
        decisions are argmax, not thresholded)."""
        if task not in ("binary", "multilabel"):
            return None
        averages = ["none", "micro"] if task == "multilabel" else ["none"]
        # the sweep's points carry no intervals: one table of values per threshold
        rows = self._tables("evaluate", metrics=list(SWEEP_METRICS), task=task,
                            average=averages, bins=self.job.sweep_bins,
                            **NO_INTERVALS).drop("bins")
        return rows.pivot(on="metric", index=[*(c for c in rows.columns if c not in (
            "metric", "average", "label", "threshold", "value")), "average", "label",
            "threshold"], values="value")

    def slices(self, task: str) -> pl.DataFrame:
        """The weakest slices of each model of this source ([slices]): ``me.slices`` by the
        model column, ``model`` first and the slice columns named as in the tables."""
        from mleval_sql.slicing import sliced

        spec = self.job.slices
        assert spec is not None
        over = [self.read.get(c, c) for c in spec.over]
        try:
            request = self._request("slices", [self.model] if self.model else [],
                                    over=over, task=task, average=self.job.average or None,
                                    **spec.options)
        except InputError as error:
            raise JobError(f"slices: {error}") from None
        with self._naming():
            found = sliced(request, self.src, spec.metric)
        model = (pl.col(self.model).cast(pl.String) if self.model
                 else pl.lit(self.source.model, dtype=pl.String))
        names = {self.read.get(c, c): self.job.names[c] for c in spec.over}
        return found.select(model.alias(MODEL), pl.exclude(*([self.model] if self.model
                                                             else []))).rename(
            {k: v for k, v in names.items() if k != v})

    def drift(self) -> pl.DataFrame:
        """Drift against the job's reference ([drift]) of every segmentation: ``me.drift`` by
        the model column and the segmentation's, ``model`` first and the segment columns named
        as in the tables."""
        from mleval_sql.drift import drifted

        spec = self.job.drift
        assert spec is not None
        frames = []
        for segmentation in self.job.segmentations:
            try:
                request = self._request("drift", self._by(segmentation), **spec.options)
            except InputError as error:
                raise JobError(f"drift: {error}") from None
            request, src = self._drifted(request)
            with self._naming():
                rows = drifted(request, src)
            if self.night is not None:  # the windows before tonight's were their reference
                rows = rows.join(self.night.stale.select(GRANULARITY, START), how="semi",
                                 on=[GRANULARITY, START])
            frames.append(self._keyed(rows, segmentation))
        return self._grid(frames)

    def fairness(self, task: str) -> dict[str, pl.DataFrame]:
        """Gaps between groups ([fairness]): ``me.fairness`` of this source by its model
        column (and [fairness]'s ``by``), each table with ``model``, ``segmentation`` and
        ``segment`` first (the control segment: ``overall``, or ``col=value, ...``)."""
        from mleval_sql.fairness import fairness

        spec = self.job.fairness
        assert spec is not None
        by = [*([self.model] if self.model else []), *(self.read.get(c, c) for c in spec.by)]
        where = {"storage_options": None, "as_of": None} if self.renamed else {}
        options = self.job.request_options("evaluate", self.source, by, task=task,
                                           average=self.job.average or None, **where)
        if options.get("ci") is None:
            options = {**options, **NO_INTERVALS}
        options = {**options, **{k: v for k, v in spec.options.items()
                                 if k in ("ci", "resamples", "seed")}}
        own = {k: v for k, v in spec.options.items() if k not in ("ci", "resamples", "seed")}
        options = {k: v for k, v in options.items() if v is not None or k == "ci"}
        try:
            with self._naming():
                found = fairness(self.src, list(spec.metrics), sensitive=list(spec.sensitive),
                                 **own, **options)
        except InputError as error:
            raise JobError(f"fairness: {error}") from None
        model = (pl.col(self.model).cast(pl.String) if self.model
                 else pl.lit(self.source.model, dtype=pl.String))
        parts = [pl.concat_str(pl.lit(f"{c}="), pl.col(self.read.get(c, c)).cast(pl.String)
                               .fill_null("null")) for c in spec.by]
        segment = pl.concat_str(parts, separator=", ") if parts else pl.lit(OVERALL)
        keyed = {}
        for name in FAIRNESS_TABLES:
            table = getattr(found, name)
            keyed[name] = table.select(
                model.alias(MODEL), pl.lit(" x ".join(spec.by) or OVERALL).alias(SEGMENTATION),
                segment.alias(SEGMENT), pl.exclude(*([self.model] if self.model else [])))
        return keyed

    def drift_scores(self, row: dict[str, Any],
                     window: over_time.WindowKey | None) -> pl.DataFrame:
        """Both sides' scores of one of this source's drift rows (its model, segment and
        label; ``window``: the window it is of), binned: ``me.drift``'s ``score_bins``."""
        from mleval_sql.drift import score_bins

        spec = self.job.drift
        assert spec is not None
        segmentation = next(s for s in self.job.segmentations if s.name == row[SEGMENTATION])
        request = self._request("drift", self._by(segmentation),
                                **{**spec.options, "compared": "score"})
        segment = {self.read[c]: row[self.job.names[c]] for c in segmentation.columns}
        if self.model:
            segment[self.model] = row[MODEL]
        if window is not None:
            segment.update(zip(COLUMNS, window, strict=True))
        request, src = self._drifted(request)
        with self._naming():
            return score_bins(request, src, segment, row["label"])

    def paired(self, metrics: list[str], task: str,
               table: pl.DataFrame) -> pl.DataFrame | None:
        """The paired p-value (``paired_p``) of every model of this source against the
        baseline model, per segment: DeLong's for a label's ROC AUC, the paired bootstrap's
        for the others. None where this source does not hold the baseline model."""
        from mleval_sql.comparison import compared

        base = self.job.baseline
        assert base is not None
        # compare reads the truth, not the probabilities: an estimate is tested from its
        # intervals
        metrics = [m for m in metrics if m not in ESTIMATED_METRICS]
        if not metrics or self.model is None or base.model not in set(
                table.filter(pl.col(SEGMENTATION) == OVERALL)[MODEL]) or base.model not in set(
                self.src.polars().select(pl.col(self.model).cast(pl.String)
                                         .unique()).collect().to_series()):
            return None
        frames = []
        for segmentation in self.job.segmentations:
            request = self._request(
                "compare", [self.read[c] for c in segmentation.columns], metrics=metrics,
                task=task, average=_averages(self.job, metrics), model=self.model,
                baseline=base.model)
            with self._naming():
                rows = compared(request, self.src)
            frames.append(self._keyed(rows.rename({"p_value": "paired_p"}), segmentation))
        return self._grid(frames)

    def describe(self, sizes: pl.DataFrame) -> dict[str, Any]:
        overall = sizes.filter(pl.col(SEGMENTATION) == OVERALL)
        if self.job.window is not None:  # the windows of one granularity hold every row once
            overall = overall.filter(pl.col("granularity") == self.job.window.every[0])
        return {"source": self.source.key, "paths": list(self.source.paths),
                "models": sorted(set(overall[MODEL].to_list())),
                "samples": int(overall["samples"].sum()),
                "weight": float(overall["weight"].sum())}


def _every_row(ours: pl.DataFrame, theirs: pl.DataFrame) -> pl.DataFrame:
    """The sizes of every row of each segment and window (``theirs``, the estimated
    evaluation's: it reads them all), with the share of their weight whose truth is known
    (``label_coverage`` of the realised evaluation's, ``ours``; 0 where it has no row)."""
    if COVERAGE not in ours.columns:
        return theirs
    keys = [c for c in theirs.columns if c not in ("samples", "weight")]
    joined = theirs.join(ours.select(*keys, COVERAGE), on=keys, how="left", nulls_equal=True,
                         maintain_order="left") if keys else \
        theirs.join(ours.select(COVERAGE), how="cross")  # one segment, no window
    return joined.with_columns(
        pl.when(pl.col("weight") > 0).then(pl.col(COVERAGE).fill_null(0.0)).alias(COVERAGE))


def _with_coverage(table: pl.DataFrame, sizes: pl.DataFrame) -> pl.DataFrame:
    """Every metric row, estimated ones too, with its segment's ``label_coverage`` (a
    history keeps the segment's from any of its rows)."""
    if COVERAGE not in sizes.columns:
        return table
    keys = [c for c in sizes.columns if c in table.columns and c != COVERAGE]
    rest = table.drop(COVERAGE, strict=False)
    if not keys:  # one segment, no window
        return rest.join(sizes.select(COVERAGE), how="cross")
    return rest.join(sizes.select(*keys, COVERAGE), on=keys, how="left", nulls_equal=True,
                     maintain_order="left")


def _task(prepared: list[_Prepared], job: Job) -> str:
    tasks = {p.source.key: p.task() for p in prepared}
    if len(set(tasks.values())) > 1:
        raise JobError(f"task: the sources look like different tasks ({tasks}); set task = "
                       "... in the job")
    return next(iter(tasks.values()))


def _averages(job: Job, metrics: list[str]) -> list[str]:
    """The job's averages, plus per-label rows where every metric has them."""
    averages = list(job.average)
    if all("none" in m.averages(t) or not m.averages(t)
           for m in (METRICS[n] for n in metrics) for t in m.families):
        averages.insert(0, "none")
    return list(dict.fromkeys(averages)) or ["none"]


def _named(frame: pl.DataFrame, job: Job) -> pl.DataFrame:
    """Add ``segment``: ``overall`` or ``col=value, col=value`` for the segmentation's columns."""
    text = pl.lit(OVERALL)
    for seg in job.segmentations[1:]:
        parts = [pl.concat_str(pl.lit(f"{c}="),
                               pl.col(job.names[c]).cast(pl.String).fill_null("null"))
                 for c in seg.columns]
        text = pl.when(pl.col(SEGMENTATION) == seg.name).then(
            pl.concat_str(parts, separator=", ")).otherwise(text)
    rest = [c for c in frame.columns if c not in (MODEL, SEGMENTATION)]
    return frame.with_columns(text.alias(SEGMENT)).select(MODEL, SEGMENTATION, SEGMENT, *rest)


def _sorted(frame: pl.DataFrame, job: Job, order: dict[str, int]) -> pl.DataFrame:
    """Rows in the job's order of segmentations, then by every other column (nulls first)."""
    rank = pl.col(SEGMENTATION).replace_strict(order, return_dtype=pl.Int32)
    rest = [c for c in frame.columns if c not in (MODEL, SEGMENTATION)
            and frame.schema[c] != pl.Null]
    descending = [c == "threshold" for c in rest]
    return frame.sort([MODEL, rank, *rest], descending=[False, False, *descending],
                      nulls_last=False, maintain_order=True)


def _judged(sizes: pl.DataFrame, job: Job) -> pl.DataFrame:
    """``sizes`` with ``judged``: whether the segment is large enough, and its truth known
    enough (``label_coverage``, where truth may be unknown), to alert."""
    judged = big_enough(job)
    if COVERAGE in sizes.columns:
        judged = judged & (pl.col(COVERAGE).fill_null(0.0) >= job.min_label_coverage)
    return sizes.with_columns(judged=judged)


def big_enough(job: Job) -> pl.Expr:
    """Whether a segment (``samples``, ``weight``) is large enough to judge."""
    return (pl.col("samples") >= job.min_samples) & (pl.col("weight") >= job.min_weight)


def judged(metric: str, job: Job) -> pl.Expr:
    """Whether a segment's value of ``metric`` is judged (``judged`` of its sizes): an
    estimated metric reads every row, known truth or not, so only the segment's size
    counts."""
    return big_enough(job) if metric in ESTIMATED_METRICS else pl.col("judged")


METRIC_KEYS = (*COLUMNS, SEGMENTATION, SEGMENT, "metric", "average", "label", "predicted")


def _with_sizes(metrics: pl.DataFrame, sizes: pl.DataFrame) -> pl.DataFrame:
    """``metrics`` with their segment's ``samples`` and ``weight``."""
    keys = [c for c in sizes.columns if c in metrics.columns and c != COVERAGE]
    return metrics.join(sizes.select(*keys, "samples", "weight"), on=keys, how="left",
                        nulls_equal=True, maintain_order="left")


def _with_baseline(metrics: pl.DataFrame, job: Job,
                   window: pl.DataFrame | None = None) -> pl.DataFrame:
    """Add ``baseline`` (the baseline's value on the same row) and ``delta`` (value - it);
    ``window``: the rows of the baseline's window, where it is one of the job's windows."""
    base = job.baseline
    if base is None:
        return metrics.with_columns(baseline=pl.lit(None, pl.Float64),
                                    delta=pl.lit(None, pl.Float64))
    if window is not None:
        reference = window if base.model is None else window.filter(pl.col(MODEL) == base.model)
    elif base.path is not None:
        reference = pl.read_parquet(base.path / "metrics.parquet")
        if base.model is not None:
            if base.model not in reference[MODEL].unique().to_list():
                raise JobError(f"baseline.model: {base.model!r} is not a model of the run in "
                               f"{base.path}; its models are "
                               f"{sorted(reference[MODEL].unique().to_list())}")
            reference = reference.filter(pl.col(MODEL) == base.model)
    else:
        if base.model not in metrics[MODEL].unique().to_list() and not metrics.is_empty():
            raise JobError(f"baseline.model: {base.model!r} is not one of the job's models "
                           f"{sorted(metrics[MODEL].unique().to_list())}")
        reference = metrics.filter(pl.col(MODEL) == base.model)
    keys = [k for k in METRIC_KEYS if k in metrics.columns and k in reference.columns]
    if base.model is None:
        keys.insert(0, MODEL)
    intervals = {f"baseline_{c}": pl.col(c) for c in ("ci_low", "ci_high")
                 if c in reference.columns}
    reference = reference.select(*keys, baseline=pl.col("value"), **intervals).with_columns(
        pl.col(c).cast(metrics.schema[c]) for c in keys)
    joined = metrics.join(reference, on=keys, how="left", nulls_equal=True,
                          maintain_order="left")
    if window is None and base.path is None:  # the baseline model is not compared with itself
        joined = joined.with_columns(pl.when(pl.col(MODEL) != base.model)
                                     .then(pl.col(c)).alias(c) for c in ("baseline", *intervals))
    return joined.with_columns(delta=pl.col("value") - pl.col("baseline"))


def rule_rows(metrics: pl.DataFrame, rule: Rule, job: Job) -> pl.DataFrame:
    """The rows a rule judges: its metric at its average (default: the job's first average the
    metric has, else per label, else the segment's one value)."""
    rows = metrics.filter(pl.col("metric") == rule.metric)
    if "predicted" in rows.columns:
        rows = rows.filter(pl.col("predicted").is_null())
    if rule.label is not None:
        rows = rows.filter(pl.col("label").cast(pl.String) == rule.label)
        if rows.is_empty():
            raise JobError(f"{rule.key}.label: no label {rule.label!r} in the results of "
                           f"{rule.metric}")
    average = rule.average
    if average is None:
        have = set(rows["average"].drop_nulls().to_list())
        average = next((a for a in job.average if a in have), None)
        if average is None:
            average = "none" if rows["label"].drop_nulls().len() else None
    if average == "none":
        return rows.filter(pl.col("average").is_null() & pl.col("label").is_not_null())
    if average is None:
        return rows.filter(pl.col("average").is_null() & pl.col("label").is_null())
    picked = rows.filter(pl.col("average") == average)
    if picked.is_empty():
        raise JobError(f"{rule.key}.average: the job computes no {average!r} average of "
                       f"{rule.metric} (its averages: {job.average or ['none']})")
    return picked


def _drift_rows(drift: pl.DataFrame | None, rule: Rule, job: Job) -> pl.DataFrame:
    """The [drift] rows a drift rule judges: its statistic (of its compared column and label
    where it names them), in segments of at least the job's samples and weight; as alert
    rows (``metric``: the statistic and the column, ``samples`` and ``weight``: the current
    rows')."""
    assert drift is not None
    rows = drift.filter(pl.col("statistic") == rule.metric)
    for column, value in (("compared", rule.compared), ("label", rule.label)):
        if value is not None:
            rows = rows.filter(pl.col(column) == value)
            if rows.is_empty():
                raise JobError(f"{rule.key}.{column}: no {column} {value!r} in [drift]'s rows "
                               f"of {rule.metric}")
    rows = rows.filter(pl.col("current_rows") >= job.min_samples,
                       pl.col("current_weight") >= job.min_weight)
    return rows.select(
        MODEL, SEGMENTATION, SEGMENT,
        metric=pl.concat_str(pl.lit(f"{rule.metric} of "), "compared"),
        average=pl.lit(None, pl.String), label="label", value="value",
        baseline=pl.lit(None, pl.Float64), delta=pl.lit(None, pl.Float64),
        samples="current_rows", weight="current_weight", p_value="p_value")


def _fairness_rows(disparities: pl.DataFrame | None, rule: Rule, job: Job) -> pl.DataFrame:
    """The [fairness] rows a fairness rule judges: its disparity (of its label where it names
    one), per model and control segment, as alert rows (``samples``, ``weight``: null, the
    groups' are in fairness_groups.parquet)."""
    assert disparities is not None
    rows = disparities.filter(pl.col("disparity") == rule.metric)
    if rule.label is not None:
        rows = rows.filter(pl.col("label").cast(pl.String) == rule.label)
        if rows.is_empty():
            raise JobError(f"{rule.key}.label: no label {rule.label!r} in [fairness]'s rows "
                           f"of {rule.metric}")
    return rows.select(
        MODEL, SEGMENTATION, SEGMENT, metric="disparity", average=pl.lit(None, pl.String),
        label=pl.col("label").cast(pl.String), value="value",
        baseline=pl.lit(None, pl.Float64), delta=pl.lit(None, pl.Float64),
        samples=pl.lit(None, pl.Int64), weight=pl.lit(None, pl.Float64),
        p_value=pl.lit(None, pl.Float64))


def _alerts(metrics: pl.DataFrame, sizes: pl.DataFrame, job: Job,
            order: dict[str, int], drift: pl.DataFrame | None = None,
            fairness: pl.DataFrame | None = None) -> tuple[pl.DataFrame, int]:
    """The alerts, and the number of tests the significant rules made: a significant rule
    fires where its condition holds and its test's p-value, adjusted for the false discovery
    rate over every test of every significant rule (Benjamini-Hochberg), is at most the job's
    ``fdr``."""
    keys = [MODEL, SEGMENTATION, SEGMENT]
    sized = sizes.select(*keys, "samples", "weight", "judged")
    candidates = []
    for index, rule in enumerate(job.rules):
        if rule.drift:
            rows = _drift_rows(drift, rule, job)
            candidates.append(rows.with_columns(
                rule=pl.lit(index, pl.Int32),
                fires=(pl.col("value") > rule.value if rule.condition == "above"
                       else pl.col("value") < rule.value).fill_null(False),
                p_value=pl.col("p_value") if rule.significant else pl.lit(None, pl.Float64),
                tested=pl.lit(rule.significant) & pl.col("p_value").is_not_null()))
            continue
        if rule.fairness:
            candidates.append(_fairness_rows(fairness, rule, job).with_columns(
                rule=pl.lit(index, pl.Int32),
                fires=(pl.col("value") > rule.value if rule.condition == "above"
                       else pl.col("value") < rule.value).fill_null(False),
                tested=pl.lit(False)))
            continue
        rows = rule_rows(metrics, rule, job).join(sized, on=keys, how="left").filter(
            judged(rule.metric, job))
        value, base = pl.col("value"), pl.col("baseline")
        fires = {"below": value < rule.value, "above": value > rule.value,
                 "drop": (base - value) > rule.value, "rise": (value - base) > rule.value}
        against = rule.condition in ("drop", "rise")
        tested = (_against(rows, base if against else pl.lit(rule.value), baseline=against,
                           level=job.options["ci"])
                  if rule.significant else rows.with_columns(p_value=pl.lit(None, pl.Float64)))
        candidates.append(tested.with_columns(
            rule=pl.lit(index, pl.Int32), fires=fires[rule.condition].fill_null(False),
            tested=pl.lit(rule.significant) & pl.col("p_value").is_not_null()))
    if not candidates:
        return pl.DataFrame(schema=ALERT_SCHEMA), 0
    every = pl.concat(candidates, how="diagonal_relaxed")
    tests = int(every["tested"].sum())
    q = pl.Series("q_value", [None] * every.height, dtype=pl.Float64)
    if tests:
        q = q.scatter(every["tested"].arg_true(), uncertainty.adjusted(every["p_value"].filter(
            every["tested"])))
    every = every.with_columns(q)
    significant = pl.Series([job.rules[i].significant for i in every["rule"]],
                            dtype=pl.Boolean)  # no row judged: none
    fired = every.filter(pl.col("fires") & (~significant | (pl.col("q_value") <= job.fdr)))
    rank = pl.col(SEGMENTATION).replace_strict(order, return_dtype=pl.Int32)
    out = fired.select(
        "rule", rule_key=pl.col("rule").replace_strict(
            {i: r.key for i, r in enumerate(job.rules)}, return_dtype=pl.String),
        description=pl.col("rule").replace_strict(
            {i: r.describe() for i, r in enumerate(job.rules)}, return_dtype=pl.String),
        model=MODEL, segmentation=SEGMENTATION, segment=SEGMENT, metric="metric",
        average="average", label=pl.col("label").cast(pl.String), value="value",
        baseline="baseline", delta="delta", samples="samples", weight="weight",
        p_value="p_value", q_value="q_value")
    return out.cast(ALERT_SCHEMA).sort(["rule", MODEL, rank, SEGMENT, "label"],
                                       nulls_last=False, maintain_order=True), tests


ALERT_SCHEMA = {"rule": pl.Int32, "rule_key": pl.String, "description": pl.String,
                MODEL: pl.String, SEGMENTATION: pl.String, SEGMENT: pl.String,
                "metric": pl.String, "average": pl.String, "label": pl.String,
                "value": pl.Float64, "baseline": pl.Float64, "delta": pl.Float64,
                "samples": pl.Int64, "weight": pl.Float64, "p_value": pl.Float64,
                "q_value": pl.Float64}


def _against(rows: pl.DataFrame, reference: pl.Expr, *, baseline: bool,
             level: float) -> pl.DataFrame:
    """``rows`` with the two-sided p-value of ``value`` against ``reference``: the paired
    comparison's where it is known (``paired_p``: models on the same samples), else a normal
    approximation from the level-``level`` intervals (and the baseline's, independent, where
    it has one)."""
    z = uncertainty.z_value(level)
    spread = ((pl.col("ci_high") - pl.col("ci_low")) / (2 * z)) ** 2
    if baseline and "baseline_ci_low" in rows.columns:
        spread = spread + (((pl.col("baseline_ci_high") - pl.col("baseline_ci_low")) / (2 * z))
                           ** 2).fill_null(0.0)
    distance = rows.select(((pl.col("value") - reference).abs() / spread.sqrt()).alias("d"))
    p = [None if d is None or math.isnan(d) else math.erfc(d / math.sqrt(2))
         for d in distance["d"]]
    out = rows.with_columns(p_value=pl.Series(p, dtype=pl.Float64))
    if baseline and "paired_p" in out.columns:
        out = out.with_columns(p_value=pl.coalesce("paired_p", "p_value"))
    return out


def wide_table(result: Result) -> pl.DataFrame:
    """One row per model x segment, one column per metric (and average): the segment's single
    values (averages, whole-segment metrics; binary: its one label), with sizes."""
    rows = summary_rows(result)
    if rows.is_empty():
        return result.sizes
    wide = rows.pivot(on="column", index=[MODEL, SEGMENTATION, SEGMENT], values="value",
                      sort_columns=False)
    ordered = list(dict.fromkeys(rows["column"].to_list()))
    out = result.sizes.join(wide, on=[MODEL, SEGMENTATION, SEGMENT], how="left",
                            maintain_order="left")
    return out.select(*result.keys, "samples", "weight", "judged", *ordered)


def summary_rows(result: Result, metrics: pl.DataFrame | None = None) -> pl.DataFrame:
    """The rows of the wide table, tidy: ``model, segmentation, segment, column, metric,
    average, label, value, baseline, delta`` and, where the metrics have intervals, ``ci_low,
    ci_high``, the baseline's (``baseline_ci_low, baseline_ci_high``) and ``reason`` (why a
    value or its interval is null); ``column`` names the wide table's column. ``metrics``:
    those rows instead of the result's (every window's: ``Result.trend``, whose window
    columns are kept)."""
    m = result.metrics if metrics is None else metrics
    if "predicted" in m.columns:
        m = m.filter(pl.col("predicted").is_null())
    whole = pl.col("label").is_null()
    if result.task in ("binary", "regression"):  # one label: its own rows are the summary
        labels = m["label"].drop_nulls().unique()
        if labels.len() == 1:
            whole = whole | pl.col("average").is_null()
    # the metrics asked (not those the curves' legends take)
    m = m.filter(whole, pl.col("metric").is_in(result.job.metrics))
    order = {name: i for i, name in enumerate(result.job.metrics)}
    averages = {a: i for i, a in enumerate([None, *result.job.average])}
    m = m.with_columns(wide_column(m, short=True),
                       _order=pl.col("metric").replace_strict(order, return_dtype=pl.Int32),
                       _avg=pl.col("average").replace_strict(averages, default=99,
                                                             return_dtype=pl.Int32))
    intervals = [c for c in INTERVALS if c in m.columns]
    windowed = [c for c in (*COLUMNS, END) if c in m.columns]
    return m.sort("_order", "_avg", maintain_order=True).select(
        MODEL, SEGMENTATION, SEGMENT, *windowed, "column", "metric", "average",
        pl.col("label").cast(pl.String), "value",
        *(c if c in m.columns else pl.lit(None, pl.Float64).alias(c)
          for c in ("baseline", "delta")), *intervals)


#: The interval columns of a metric row (with ``ci``), its baseline's, and why either is null.
INTERVALS = ("ci_low", "ci_high", "baseline_ci_low", "baseline_ci_high", "reason")


def rank_column(result: Result) -> tuple[str, str]:
    """The wide column that orders segments, and its metric."""
    rows = summary_rows(result)
    metric = result.job.rank_by or next(
        (m for m in result.job.metrics if m in rows["metric"].to_list()
         and m not in NEUTRAL), rows["metric"][0] if rows.height else result.job.metrics[0])
    columns = rows.filter(pl.col("metric") == metric)["column"].unique(maintain_order=True)
    if columns.is_empty():
        raise JobError(f"report.rank_by: {metric!r} has no single value per segment to rank by")
    return columns[0], metric


def ordering(metric: str) -> Callable[[pl.Expr], pl.Expr]:
    """An expression that is larger where ``metric`` is better."""
    return (lambda e: -e) if metric in LOWER_IS_BETTER else (lambda e: e)
