"""``evaluate``, ``curve`` and ``check``: each builds one :class:`~mleval_sql.request.Request`
and :func:`run` carries it out: read the source, check it, plan the statistics once, run them
on an engine, lay the rows out.

>>> import polars as pl
>>> data = pl.DataFrame({"sample": [1, 2, 3, 4], "label": "spam",
...                      "score": [0.9, 0.4, 0.6, 0.2], "truth": [1, 1, 0, 0]})
>>> evaluate(data, metrics=["precision", "recall"])["value"].to_list()
[0.5, 0.5]
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypedDict

import polars as pl

from mleval_sql import clustering, domains, estimation, labels, uncertainty, windows
from mleval_sql.engines import (
    ENGINES,
    Engine,
    EngineName,
    Keep,
    choose_engine,
    engine_errors,
    errors_of,
    local_engines,
    make_engine,
    memory_bytes,
)
from mleval_sql.engines.segments import with_progress
from mleval_sql.errors import InputError, note_sklearn_default
from mleval_sql.params import DEFAULTS
from mleval_sql.progress import stage
from mleval_sql.registry import CURVES, DECISIONS, scoped
from mleval_sql.request import (
    DELONG,
    ESTIMATED_METRICS,
    ESTIMATED_VARIANCE,
    CurveKind,
    Plan,
    Request,
    curve_table,
    tidy,
    unpack_segment,
    widen,
)
from mleval_sql.schema import Columns, Task, check_columns, check_probabilities, check_summary
from mleval_sql.sources import Derived, Parquet, Source, as_source, underlying

if TYPE_CHECKING:
    from typing_extensions import Unpack

LOG = logging.getLogger("mleval_sql")


class SourceOptions(TypedDict, total=False):
    """What to read and how to run it: the options ``evaluate``, ``curve`` and ``check`` share
    (:data:`mleval_sql.request.OPTIONS` says each)."""

    by: str | Sequence[str]
    task: Task | None
    engine: EngineName | None
    columns: Mapping[str, str | None] | None
    memory_limit: str | int | None
    threads: int | None
    connection: Any
    storage_options: Mapping[str, str] | None
    as_of: int | str | datetime | None
    window: str | Mapping[str, Any] | windows.Window | None
    unlabelled: str
    labels: Any
    define: Mapping[str, Any]  # evaluate, compare and slices: metrics declared (me.define)


@dataclass(frozen=True)
class Outcome:
    """What a request gave: the task, its table (none for ``check``), the size of each
    segment (``*by, rows, samples, weight``: the weight of its samples) and, for an evaluation
    with ``curves=``, the table that draws each curve (``roc`` and ``pr``: the same table)."""

    task: Task
    table: pl.DataFrame | None
    sizes: pl.DataFrame
    curves: Mapping[str, pl.DataFrame] = field(default_factory=dict)


@scoped
def evaluate(
    source: Any,
    metrics: str | Sequence[str] | None = None,
    *,
    threshold: float = DEFAULTS["threshold"],
    thresholds: Sequence[float] | None = DEFAULTS["thresholds"],
    bins: int | None = DEFAULTS["bins"],
    average: str | Sequence[str] | None = None,
    beta: float = DEFAULTS["beta"],
    k: int = DEFAULTS["k"],
    log_base: float = DEFAULTS["log_base"],
    ignore_ties: bool = DEFAULTS["ignore_ties"],
    zero_division: float | None = DEFAULTS["zero_division"],
    max_fpr: float | None = DEFAULTS["max_fpr"],
    min_recall: float = DEFAULTS["min_recall"],
    min_precision: float = DEFAULTS["min_precision"],
    n_bins: int = DEFAULTS["n_bins"],
    average_method: str = DEFAULTS["average_method"],
    pinball_alpha: float = DEFAULTS["pinball_alpha"],
    power: float = DEFAULTS["power"],
    ci: float | None = DEFAULTS["ci"],
    resamples: int = DEFAULTS["resamples"],
    seed: int = DEFAULTS["seed"],
    wide: bool = False,
    **options: Unpack[SourceOptions],
) -> pl.DataFrame:
    """Metrics of the predictions in ``source``, one tidy row per value.

    ``source``: parquet path(s), glob or hive folder, local or in object storage (``s3://``,
    ``gs://``, ``az://``; ``storage_options``: what the environment does not say), a Delta or
    Iceberg table (``as_of``: an earlier version or snapshot); Arrow, polars, pandas or DuckDB
    data with columns ``sample, label, score, truth[, weight]`` (other names: ``columns=``).
    The options of :class:`SourceOptions`: ``by``, segment columns; ``task`` (default: the
    metrics' one task, else inferred from the data); ``engine`` (default: the fastest that fits
    the input and options, :func:`mleval_sql.engines.choose_engine`); ``memory_limit``;
    ``threads`` (DuckDB's); ``connection`` (a DuckDB connection, or a database's for
    ``engine="sql"``); ``storage_options``; ``as_of``; ``window`` (time windows,
    :class:`mleval_sql.windows.Window`: ``"ts:1d,1w@Europe/Paris"``; the rows gain
    ``granularity, window_start, window_end``); ``unlabelled="skip"`` (rows of unknown truth
    left out, ``label_coverage`` said) and ``labels`` (outcomes joined by sample), see
    :mod:`mleval_sql.labels`.

    ``average``: "none" (per label), "micro", "macro", "weighted", "samples", "macro_std",
    "variance_weighted" (r2), or a list; default per label for binary and regression, macro
    otherwise. ``zero_division``: the value of 0/0 (0, 1, or None: null). ``thresholds`` (a
    list) or ``bins`` (N: thresholds 0, 1/N, ..., 1) sweep the decision metrics; ``bins`` also
    puts ranking metrics on that grid (pairs in one bin count as ties). ``metrics`` default:
    accuracy, precision, recall, f1 (regression: mse, rmse, mae, r2; clustering:
    adjusted_rand, adjusted_mutual_info, homogeneity, completeness, v_measure). Clustering
    reads one row per sample, ``sample, truth, cluster[, weight]``; ``average_method``
    ("arithmetic", "geometric", "min", "max") is the mean of the entropies that normalized and
    adjusted mutual information divide by. ``pinball_alpha``: the quantile of the pinball loss
    (mean_pinball_loss, d2_pinball); ``power``: the Tweedie power (mean_tweedie_deviance,
    d2_tweedie).

    ``ci`` (a level, e.g. 0.95) adds an interval to every row: ``ci_low``, ``ci_high``,
    ``ci_method`` ("delong" for a label's ROC AUC, "bootstrap" for the others: a Poisson
    bootstrap of ``resamples`` replicates whose draws hash (sample, replicate, ``seed``), the
    same on every engine and for any order of the rows) and ``ci_resamples`` (the replicates
    in which the value is defined; fewer than ``ci * resamples``: no interval).

    Returns ``*by, metric, average, label, [predicted, threshold, <parameters>,
    operating_threshold,] value``: segments in order, then the metrics and averages in the
    order asked, then labels. ``threshold`` is the threshold decisions were made at (the one
    given, or a sweep's); ``operating_threshold`` the one an operating point (``max_f1``...)
    found. ``wide=True``: one row per segment (and label, sweep threshold, predicted class
    where they apply) and one column per metric (``f1``) or metric and average (``f1_macro``),
    see :func:`mleval_sql.request.widen`.

    >>> result = evaluate("fixtures/lake", ["roc_auc", "f1"], by="model", average="macro")
    >>> result.select("model", "metric", pl.col("value").round(4)).rows()
    [('a', 'roc_auc', 0.7278), ('a', 'f1', 0.5976), ('b', 'roc_auc', 0.8966), ('b', 'f1', 0.7463)]
    """
    request = Request.build(
        "evaluate", metrics=metrics, threshold=threshold, thresholds=thresholds, bins=bins,
        average=average, beta=beta, k=k, log_base=log_base, ignore_ties=ignore_ties,
        zero_division=zero_division, max_fpr=max_fpr,
        min_recall=min_recall, min_precision=min_precision, n_bins=n_bins,
        average_method=average_method, pinball_alpha=pinball_alpha, power=power, ci=ci,
        resamples=resamples, seed=seed, wide=wide, _source=source, **options)
    return run(request, source).table  # type: ignore[return-value]


class ComparisonOptions(SourceOptions, total=False):
    """The options of ``compare`` beyond its own: every parameter of ``evaluate``."""

    threshold: float
    thresholds: Sequence[float] | None
    bins: int | None
    beta: float
    k: int
    log_base: float
    ignore_ties: bool
    zero_division: float | None
    max_fpr: float | None
    min_recall: float
    min_precision: float
    n_bins: int
    average_method: str
    pinball_alpha: float
    power: float
    ci: float | None
    resamples: int
    seed: int


def check(source: Any, **options: Unpack[SourceOptions]) -> Task:
    """Run only the input checks that every evaluation starts with; return the task.

    Raises ``InputError`` naming the first problem, as ``evaluate`` would: a pre-flight for a
    nightly job, at the cost of one pass that groups by sample.

    >>> check("fixtures/lake", by="model")
    'multilabel'
    """
    return run(Request.build("check", **options), source).task


def curve(
    source: Any,
    kind: CurveKind = "roc",
    *,
    thresholds: Sequence[float] | None = DEFAULTS["thresholds"],
    bins: int | None = DEFAULTS["bins"],
    n_bins: int = DEFAULTS["n_bins"],
    drop_intermediate: bool | None = None,
    max_points: int | None = None,
    **options: Unpack[SourceOptions],
) -> pl.DataFrame:
    """A curve per (segment, label) as a table, thresholds descending (the origin first).

    ``roc`` and ``pr``: one row per distinct score (tied scores are one threshold) plus the
    origin (threshold +inf), ``*by, label, threshold, tp, fp, fn, tn, tpr, fpr, precision,
    recall``; ``drop_intermediate`` drops the points scikit-learn drops (default: True for roc,
    False for pr, as scikit-learn). ``max_points`` (N >= 8; 0 or None: every point): a curve
    of more points keeps, in each of B equal-width bins of its x axis (fpr for roc, recall
    for pr; B = N/2 for roc, N/4 for pr), its first and last point and (pr) its points of
    lowest and highest precision: at most N points, and the curve drawn through them (lines
    or steps) is within 1/B of the exact one horizontally (``params.curve_bins``). ``sweep``:
    the same columns at ``thresholds`` or at ``bins`` + 1 evenly spaced thresholds.
    ``reliability``: ``*by, label, bin, lower, upper, mean_score, observed_rate, weight`` over
    ``n_bins`` equal-width bins (non-empty ones).

    >>> table = curve("fixtures/lake", "roc", by="model")
    >>> table.columns
    ['model', 'label', 'threshold', 'tp', 'fp', 'fn', 'tn', 'tpr', 'fpr', 'precision', 'recall']
    >>> table.filter(model="a", label="cat")["threshold"][0]  # the origin first
    inf
    """
    request = Request.build("curve", kind=kind, thresholds=thresholds, bins=bins,
                            n_bins=n_bins, drop_intermediate=drop_intermediate,
                            max_points=max_points, **options)
    return run(request, source).table  # type: ignore[return-value]


def run(request: Request, source: Any) -> Outcome:
    """Carry out ``request`` on ``source``: the one path of every door that evaluates.

    >>> outcome = run(Request.build("check", by="model"), "fixtures/lake")
    >>> outcome.task, outcome.sizes["samples"].to_list()
    ('multilabel', [300, 300])
    """
    parts = estimation.split(request, source)
    if parts is not None:
        return _with_estimates(request, source, *parts)
    derivation = derived(request, source)
    if derivation is not None:
        try:
            done = run(derivation.request, derivation.source)
        finally:
            derivation.close()
        finish = derivation.finished
        return Outcome(done.task, None if done.table is None else finish(done.table),
                       finish(done.sizes), {kind: derivation.window.finished(t)
                                            if derivation.window else t
                                            for kind, t in done.curves.items()})
    done = execute(request, source)
    if done.plan is None:
        return Outcome(done.task, None, done.sizes)
    by = list(request.by)
    if done.plan.curve or request.kind in ("sweep", "thresholds"):
        return Outcome(done.task, curve_table(done.plan, done.results, by), done.sizes)
    table = tidy(done.plan, done.results, by)
    if request.params["ci"] is not None:
        table = _with_intervals(table, done.plan, done.results, done.replicated, by)
    return Outcome(done.task,
                   widen(table, by, sweep=done.plan.sweep) if request.wide else table,
                   done.sizes, _drawn(request, done, by))


def _with_estimates(request: Request, source: Any, realised: Request | None,
                    estimated: Request) -> Outcome:
    """The realised metrics asked, run on the rows as they are, and the estimated ones, run on
    their expected outcomes (:func:`mleval_sql.estimation.expected`), in one table."""
    if estimated.engine is not None and ENGINES[estimated.engine].reader is not None:
        raise InputError(f"estimated metrics run on the engines that read files and frames "
                         f"({', '.join(local_engines())}), not on engine "
                         f"{estimated.engine!r}")
    ours = None if realised is None else run(replace(realised, wide=False), source)
    expected = estimation.expected(estimated, source)
    # per label, the estimates are the same whatever the classes' task (it sets the averages)
    task = estimated.task or (ours.task if ours is not None else
                              estimation.task_of(expected, estimated.column_map.label))
    theirs = run(replace(estimated, task=task, wide=False), expected)
    assert theirs.table is not None
    tables = [theirs.table] if ours is None or ours.table is None else [ours.table, theirs.table]
    table = pl.concat(tables, how="diagonal_relaxed")
    keys = table.columns[:table.columns.index("metric")]
    rank = {m: i for i, m in enumerate(request.metrics or ())}
    table = table.sort([*keys, pl.col("metric").replace_strict(rank, return_dtype=pl.Int32)],
                       nulls_last=False, maintain_order=True)
    return Outcome(task, widen(table, keys) if request.wide else table,
                   theirs.sizes if ours is None else _unlabelled_too(ours.sizes, theirs.sizes),
                   {} if ours is None else ours.curves)


def _unlabelled_too(realised: pl.DataFrame, estimated: pl.DataFrame) -> pl.DataFrame:
    """The sizes of the realised metrics' segments, and of those only the estimates have (no
    row of known truth there: a label coverage of 0)."""
    keys = [c for c in realised.columns if c in estimated.columns
            and c not in ("rows", "samples", "weight", labels.COVERAGE)]
    missing = estimated.join(realised, on=keys, how="anti", nulls_equal=True)
    if not missing.height:
        return realised
    if labels.COVERAGE in realised.columns:
        missing = missing.with_columns(pl.lit(0.0).alias(labels.COVERAGE))
    return pl.concat([realised, missing.select(realised.columns)], how="vertical_relaxed")


@dataclass(frozen=True)
class Derivation:
    """A request carried out on a derived input: ``request`` (without its window, outcomes
    and unlabelled rule; segmented by the window's columns first) on ``source`` (the outcomes
    joined, the window's columns made, the rows of unknown truth left out), then
    :meth:`finished` lays its rows out; :meth:`close` removes the files the outcomes were
    joined into (else they go with the object)."""

    request: Request
    source: Source
    window: windows.Window | None
    coverage: pl.DataFrame | None  # label_coverage per segment, where truth may be unknown
    joined: labels.Joined | None = None

    def close(self) -> None:
        if self.joined is not None:
            self.joined.close()

    def finished(self, table: pl.DataFrame) -> pl.DataFrame:
        """``table`` with its window's columns laid out and its segments' coverage."""
        if self.window is not None:
            table = self.window.finished(table)
        if self.coverage is None:
            return table
        shares = self.coverage if self.window is None else self.window.finished(self.coverage)
        keys = [c for c in shares.columns if c != labels.COVERAGE and c in table.columns]
        if not keys:
            return table.with_columns(pl.lit(shares[labels.COVERAGE].first(), pl.Float64)
                                      .alias(labels.COVERAGE))
        return table.join(shares, on=keys, how="left", nulls_equal=True, maintain_order="left")


def derived(request: Request, source: Any) -> Derivation | None:
    """How ``request`` reads ``source`` where it has a window, outcomes (``labels``) or lets
    the truth be unknown (``unlabelled="skip"``); None where it reads it as it is. Every door
    that runs a request goes through here."""
    if request.window is None and request.labels is None and request.unlabelled != "skip":
        return None
    name = request.engine or choose_engine(
        source, connection=request.connection, memory_limit=request.memory_limit,
        threads=request.threads, reproducible=request.reproducible)[0]
    if ENGINES[name].reader is not None:
        raise InputError(f"window=, labels= and unlabelled= run on the engines that read "
                         f"files and frames ({', '.join(local_engines())}), not on engine "
                         f"{name!r}; for a database or Spark, `mleval sql --window` writes "
                         "the statement")
    src: Source = as_source(source, storage_options=request.storage_options,
                            as_of=request.as_of)
    cols = request.column_map
    joined = None
    if request.labels is not None:
        outcomes = as_source(request.labels, storage_options=request.storage_options)
        schema = src.schema()
        join = labels.outcomes(schema, outcomes, cols.sample,
                               cols.label if cols.label in schema else None, cols.truth)
        budget = memory_bytes(request.memory_limit) if request.memory_limit else None
        joined = labels.joined(src, join, memory_limit=budget)
        src = joined.source
    try:
        return _derivation(request, src, cols, joined)
    except BaseException:
        if joined is not None:
            joined.close()
        raise


def _derivation(request: Request, src: Source, cols: Columns,
                joined: labels.Joined | None) -> Derivation:
    """:func:`derived` once the outcomes are joined: the window's columns, the rows of unknown
    truth left out, each segment's coverage."""
    by = list(request.by)
    if request.window is not None:
        src = windows.windowed(src, request.window, by)
        by = [*windows.COLUMNS, *by]
    shares = None
    if request.unlabelled == "skip" or request.labels is not None:
        schema = src.schema()
        weight = cols.for_schema(schema).weight if cols.weight in schema else None
        shares = labels.coverage(src.polars(), cols.truth, weight, by)
        if request.unlabelled == "skip":
            src = Derived(src, labels.Known(cols.truth))
    inner = replace(request, window=None, labels=None, unlabelled="error", by=tuple(by))
    return Derivation(inner, src, request.window, shares, joined)


def _drawn(request: Request, done: Execution, by: list[str]) -> dict[str, pl.DataFrame]:
    """The curves an evaluation was asked to draw (``curves=``), by kind: one table of the
    points of its ROC and PR curves, and the reliability table."""
    assert done.plan is not None
    tables = {step: curve_table(done.plan, done.results, by, step=step)
              for step in dict.fromkeys(CURVES[kind][-1] for kind in request.curves)}
    return {kind: tables[CURVES[kind][-1]] for kind in request.curves}


@dataclass(frozen=True)
class Execution:
    """What an engine gave for a request: the task, the plan (none for ``check``), each final
    step's rows, the bootstrap's rows (one per kept row and replicate) and the sizes."""

    task: Task
    plan: Plan | None
    results: dict[str, pl.DataFrame]
    replicated: pl.DataFrame | None
    sizes: pl.DataFrame


def execute(request: Request, source: Any) -> Execution:
    """Read ``source``, check it, and run the steps of ``request`` (and its bootstrap) on an
    engine; an error of an engine's library whose entry says so (``EngineErrors.input_error``:
    Spark's) reaches the caller as ``InputError``, its cause in one line."""
    try:
        return _execute(request, source)
    except engine_errors() as error:
        said = errors_of(error)
        if said is None or said.input_error is None:
            raise
        raise InputError(f"{said.input_error}: {said.cause_of(error)}") from error


def _execute(request: Request, source: Any) -> Execution:
    def chosen(without: tuple[str, ...] = ()) -> tuple[str, str]:
        return choose_engine(underlying(source), connection=request.connection,
                             memory_limit=request.memory_limit, threads=request.threads,
                             reproducible=request.reproducible, without=without)

    name, why = (request.engine, "named") if request.engine is not None else chosen()
    entry = ENGINES[name]
    if entry.reader is not None:  # e.g. a table of a database
        src: Any = entry.read(source, request.connection)
    else:
        src = as_source(source, storage_options=request.storage_options, as_of=request.as_of)
    by = list(request.by)
    cols = request.column_map
    # estimated metrics read each row's probability as its truth (estimation.Expected)
    expected = bool(request.metrics) and set(request.metrics) <= set(ESTIMATED_METRICS)
    used = [*(c for r, c in cols.required().items() if not (expected and r == "truth")),
            cols.weight, *by]
    files = underlying(src)
    if isinstance(files, Parquet):
        files.check(used)  # before the engines read one file's schema for all
    schema = src.schema()
    clusters = clustering.is_clustering(schema, cols, by, request.settled_task(),
                                        mapped=set(request.columns))
    if clusters and isinstance(files, Parquet):
        files.check([cols.cluster])
        used.append(cols.cluster)
    if not clusters:
        cols = cols.for_schema(schema)
    weight = (clustering.check_columns if clusters else check_columns)(schema, cols, by)
    if weight is not None:
        LOG.info("counts are weighted by column %r (columns={'weight': None}, --column weight= "
                 "to ignore it)", weight)
    options = {k: v for k, v in request.source_options().items()
               if k in ("memory_limit", "threads", "reproducible", "connection")
               and v not in (None, False)}
    runner = make_engine(name, src, cols, weight, by, clustering=clusters, **options)
    try:
        large = runner.over_budget() if request.engine is None else None
        if large is not None:  # the default engine would pass the budget: the next keeps it
            runner.close()
            name, _ = chosen(without=(name,))
            why = f"the fastest that keeps to memory_limit={request.memory_limit!r}: {large}"
            entry = ENGINES[name]
            runner = make_engine(name, src, cols, weight, by, clustering=clusters, **options)
        LOG.debug("engine %s (%s)", name, why)
        with stage(f"checks ({name})"):
            summary = runner.summary()
        if clusters:
            task: Task = clustering.check_summary(summary, cols, weight)
        else:
            graded = request.metrics[0] if request.graded else None  # type: ignore[index]
            task = check_summary(summary, cols, weight, request.settled_task(),
                                 expected=expected, graded=graded)
            entry.check_task(task)
        sizes = unpack_segment(summary.select(
            "segment", rows=pl.col("n_rows").cast(pl.Int64), samples="n_samples",
            weight=pl.col("sample_weight").cast(pl.Float64)), by)
        if request.action == "check":
            return Execution(task, None, {}, None, sizes)
        plan = request.plan(task)
        asked = plan.probabilities()
        if clusters:
            clustering.check_whole_weights(summary, weight, asked)
        else:
            check_probabilities(summary, cols, asked)
            if task == "regression":
                domains.check(summary, cols, request.metric_names(task), request.params)
        params = request.engine_params(plan)
        # graded relevance (ndcg, dcg asked alone): the truth as the number it is
        numeric = task in ("regression", "clustering") or expected or request.graded
        results = runner.results(plan.steps(), params, numeric_truth=numeric,
                                 keep=_with_labels(plan.rows()))
        _note_skipped_samples(results)
        _note_skipped_labels(results, plan)
        replicated = _replicated(runner, plan, params, by, numeric_truth=numeric,
                                 rows=int(summary["n_rows"].sum()))
    except (OSError, *engine_errors()) as error:
        # a corrupt page shows only when read, and the engines' errors may not name the file
        found = files.unreadable(used) if isinstance(files, Parquet) else None
        if found is not None:
            raise found from error
        said = errors_of(error)
        if request.memory_limit is not None and said is not None \
                and said.is_out_of_memory(error):
            raise InputError(f"engine {name!r} ran out of memory under memory_limit="
                             f"{request.memory_limit!r}: the request needs a larger one") from error
        raise
    finally:
        runner.close()
    return Execution(task, plan, results, replicated, sizes)


#: What a sample lacks where a samples-averaged metric is 0/0.
_UNDEFINED_WHERE = {"precision": "no predicted label", "recall": "no true label",
                    **dict.fromkeys(("f1", "fbeta", "jaccard"), "no true and no predicted label")}


def _note_skipped_samples(results: dict[str, pl.DataFrame]) -> None:
    """A note where a mean over samples left out samples whose value is 0/0, which
    scikit-learn's default (``zero_division="warn"``) counts as 0: another number."""
    rows = results.get("sample_metrics")
    if rows is None or "undefined_samples" not in rows.columns:
        return
    skipped = rows.filter(pl.col("average") == "samples", pl.col("undefined_samples") > 0)
    skipped = skipped.sort("metric")
    for metric, n in skipped.group_by("metric", maintain_order=True).agg(
            pl.col("undefined_samples").sum()).iter_rows():
        note_sklearn_default(
            f"{metric}:samples",
            f"{metric} with average='samples': {n} sample{'s' if n != 1 else ''} with "
            f"{_UNDEFINED_WHERE.get(metric, 'an undefined value')} (0/0) left out of the mean, "
            f"where scikit-learn's default (zero_division='warn') counts them as 0; "
            f"zero_division=0 gives scikit-learn's number")


#: What a label lacks in a segment where a metric of its rows is 0/0.
_UNDEFINED_LABEL = {"precision": "never predicted", "recall": "never true",
                    **dict.fromkeys(("f1", "fbeta", "jaccard"), "neither true nor predicted")}
#: The averages over labels that skip a label whose value is 0/0 (:func:`_note_skipped_labels`).
_OVER_LABELS = ("macro", "weighted")


def _with_labels(keep: Keep) -> Keep:
    """``keep`` with the per-label rows of the decision metrics where an average over labels
    is asked, whose undefined labels :func:`_note_skipped_labels` counts (a few rows per
    segment; the result keeps only the rows asked)."""
    asked = keep.get(DECISIONS.final)
    if asked is None or not set(_OVER_LABELS) & set(asked[1]) or "none" in asked[1]:
        return keep
    return {**keep, DECISIONS.final: (asked[0], sorted({*asked[1], "none"}))}


def _note_skipped_labels(results: dict[str, pl.DataFrame], plan: Plan) -> None:
    """A note where a macro or weighted mean over labels left out labels whose value is 0/0
    (precision of a label never predicted, ...), which scikit-learn's default
    (``zero_division="warn"``) counts as 0: another number."""
    rows = results.get(DECISIONS.final)
    if rows is None or plan.request.params["zero_division"] is not None:
        return
    wanted = {(m, a) for family, metrics in plan.keep.items()
              if plan.families[family].final == DECISIONS.final
              for m, averages in metrics.items() if m in _UNDEFINED_LABEL
              for a in averages if a in _OVER_LABELS}
    if not wanted:
        return
    undefined = rows.filter(pl.col("average").is_null(), pl.col("label").is_not_null(),
                            pl.col("value").is_null())
    averaged = rows.filter(pl.col("average").is_in(_OVER_LABELS), pl.col("value").is_not_null())
    skipped = averaged.join(undefined.select("segment", "metric", "label"),
                            on=["segment", "metric"], nulls_equal=True)
    for (metric, average), group in sorted(skipped.group_by("metric", "average"),
                                           key=lambda g: (str(g[0][0]), str(g[0][1]))):
        if (metric, average) not in wanted:
            continue
        n = group.select("segment", "label").unique().height
        note_sklearn_default(
            f"{metric}:{average}",
            f"{metric} with average={average!r}: {n} label{'s' if n != 1 else ''} of a "
            f"segment {_UNDEFINED_LABEL[metric]} there (0/0) left out of the mean, where "
            "scikit-learn's default (zero_division='warn') counts them as 0; "
            "zero_division=0 gives scikit-learn's number")


def _replicated(runner: Engine, plan: Plan, params: dict[str, object], by: list[str], *,
                numeric_truth: bool, rows: int) -> pl.DataFrame | None:
    """The bootstrap's rows of ``plan``: one per kept row and replicate (the replicates run a
    chunk at a time, as the engine takes them)."""
    resampled = plan.resampled() if params["ci"] is not None else None
    if resampled is None:
        return None
    steps = ["sample_ids", "replicates", *resampled.steps()]
    parts = []
    chunks = runner.replicate_chunks(steps, params, rows=rows, keep=resampled.rows())
    for chunk in with_progress(chunks, "bootstrap"):
        results = runner.results(steps, {**params, "replicates": chunk},
                                 numeric_truth=numeric_truth, keep=resampled.rows())
        parts.append(tidy(resampled, results, by, replicated=True))
    return pl.concat(parts, how="diagonal_relaxed")


def _with_intervals(table: pl.DataFrame, plan: Plan, results: dict[str, pl.DataFrame],
                    replicated: pl.DataFrame | None, by: list[str]) -> pl.DataFrame:
    level = plan.request.params["ci"]
    keys = [*by, "metric", "average", "label",
            *(c for c in ("predicted", *clustering.CELL_COLUMNS) if c in table.columns),
            *(["threshold"] if plan.sweep else [])]
    bootstrap = None if replicated is None else uncertainty.percentile_intervals(
        replicated, [k for k in keys if k in replicated.columns], level=level,
        resamples=plan.request.params["resamples"])
    delong = (uncertainty.delong_intervals(unpack_segment(results[DELONG], by), level=level)
              if plan.delong() else None)
    expected = None if ESTIMATED_VARIANCE not in results else uncertainty.normal_intervals(
        table, unpack_segment(results[ESTIMATED_VARIANCE], by), [*by, "metric", "label"],
        level=level)
    return uncertainty.with_reasons(
        uncertainty.with_intervals(table, keys, bootstrap=bootstrap, delong=delong,
                                   expected=expected),
        level=level, resamples=plan.request.params["resamples"])


__all__ = ["ComparisonOptions", "Execution", "Outcome", "SourceOptions", "check", "curve",
           "evaluate", "execute", "run"]
