"""``report.html``: the job's results as one self-contained page, from a jinja2 template.

Alerts and the weakest segments come first, then the overview per model x segment with deltas
against the baseline, the metric across every segment, the curves of the overall row and the
weakest and strongest segments, the per-label tables, and what was run. Where the job sets
``ci``, values carry their intervals (in brackets in the tables, error bars in the chart of every
segment, in the curves' legends), significant rules' alerts their p- and q-values, and the
overview marks the values those rules flagged. An estimated metric (``estimated_f1``) sits
beside the value it estimates where the job asks both: its column right after it, its line
dashed in the same trend panel, a diamond beside each dot. No script, style sheet, font or
image is fetched: the styles are inline, the charts are inline SVG, and the page's
Content-Security-Policy forbids any request.

>>> page = render_html(result, versions={"mleval_sql": "0.1.0"})  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from mleval_sql.labels import COVERAGE
from mleval_sql.params import curve_bins
from mleval_sql.reporting import charts, over_time
from mleval_sql.reporting.job import MODEL, OVERALL, SEGMENT, SEGMENTATION, Job, JobError
from mleval_sql.reporting.run import (
    LOWER_IS_BETTER,
    NEUTRAL,
    Result,
    big_enough,
    judged,
    ordering,
    rank_column,
    shown_drift,
    summary_rows,
    wide_table,
)
from mleval_sql.request import ESTIMATED_METRICS
from mleval_sql.slicing import ROW_ERRORS

TEMPLATES = Path(__file__).resolve().parent / "templates"


def environment() -> Any:
    """The jinja2 environment of the report's templates, with its filters; a ``JobError``
    naming the extra to install where jinja2 is missing (the report checks this before any
    scan)."""
    try:
        import jinja2
    except ImportError as error:
        raise JobError(f"the report is written with jinja2, which is not installed: "
                       f"{charts.INSTALL_HINT}") from error
    env = jinja2.Environment(loader=jinja2.FileSystemLoader(TEMPLATES), autoescape=True,
                             undefined=jinja2.StrictUndefined, trim_blocks=True,
                             lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["num"] = number
    env.filters["signed"] = signed
    env.filters["size"] = size
    env.filters["bounds"] = charts.bounds
    env.filters["pvalue"] = pvalue
    return env


def number(value: Any, digits: int = 4) -> str:
    """``0.73272`` -> ``0.7327``; null -> an em dash; whole weights without decimals."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    if isinstance(value, bool):
        return "yes" if value else "no"
    return f"{value:.{digits}f}"


def size(value: Any) -> str:
    """A count or a weight: ``1,234``, ``337.5``."""
    if value is None:
        return "—"
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.2f}".rstrip("0")


def signed(value: Any, digits: int = 4) -> str:
    if value is None:
        return ""
    return f"{value:+.{digits}f}"


def pvalue(value: Any) -> str:
    """A p- or q-value: ``0.0123``, ``<0.0001``; empty where no test was made."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    return "<0.0001" if value < 0.0001 else f"{value:.4f}"


def _tone(metric: str, delta: float | None) -> str:
    """``better`` / ``worse`` for a delta of ``metric``, or nothing."""
    if delta is None or delta == 0 or metric in NEUTRAL:
        return ""
    good = delta < 0 if metric in LOWER_IS_BETTER else delta > 0
    return "better" if good else "worse"


Flags = dict[tuple[Any, ...], str]


def _cell(metric: str, row: Mapping[str, Any] | None, flag: str | None = None, *,
          few_labels: bool = False) -> dict[str, Any]:
    """A table cell: the value, its interval (``low``, ``high``; null without one) and why
    either is null (``reason``), its delta against the baseline and the delta's tone,
    ``flag``: what a significant rule said of it (or null), whether it is an estimate, and
    its ``classes``: flagged, an estimate, or greyed (a realised value of a segment whose
    truth is known too little to judge it: ``few_labels``)."""
    row = row or {}
    delta = row.get("delta")
    estimated = metric in ESTIMATED_METRICS
    classes = [c for c, on in (("flagged", flag), ("est", estimated),
                               ("unjudged", few_labels and not estimated)) if on]
    return {"value": row.get("value"), "low": row.get("ci_low"), "high": row.get("ci_high"),
            "reason": row.get("reason"), "delta": delta, "tone": _tone(metric, delta),
            "flag": flag, "estimated": estimated, "classes": " ".join(classes),
            "shade": " ".join(c for c in classes if c != "flagged")}  # its delta's


def realised(metric: str) -> str:
    """The metric an estimated one estimates (``estimated_f1`` -> ``f1``)."""
    return metric.removeprefix("estimated_")


def twins(rows: pl.DataFrame) -> dict[str, str]:
    """The columns of ``rows`` (``column, metric, average``) that estimate another of them ->
    that column: ``estimated_f1`` -> ``f1``, ``estimated_f1_macro`` -> ``f1_macro``."""
    named = {(m, a): c for c, m, a in rows.select("column", "metric", "average").unique(
        maintain_order=True).iter_rows()}
    return {c: named[(realised(m), a)] for (m, a), c in named.items()
            if m in ESTIMATED_METRICS and (realised(m), a) in named}


def beside(columns: list[str], pairs: Mapping[str, str]) -> list[str]:
    """``columns`` with each estimate (``pairs``: estimate -> realised) right after the value
    it estimates.

    >>> beside(["estimated_f1", "roc_auc", "f1"], {"estimated_f1": "f1"})
    ['roc_auc', 'f1', 'estimated_f1']
    """
    out = []
    for column in columns:
        if column not in pairs:
            out.append(column)
            out.extend(e for e, r in pairs.items() if r == column)
    return out


def _flags(result: Result) -> Flags:
    """The values a significant rule fired on: (model, segment, metric, average, label) -> the
    rules and their q-values, as the mark's tooltip says them."""
    significant = {i for i, r in enumerate(result.job.rules) if r.significant}
    flags: dict[tuple[Any, ...], list[str]] = {}
    for alert in result.alerts.filter(pl.col("rule").is_in(sorted(significant))).iter_rows(
            named=True):
        key = (alert[MODEL], alert[SEGMENT], alert["metric"], alert["average"], alert["label"])
        flags.setdefault(key, []).append(f"{alert['rule_key']}: {alert['description']}, "
                                         f"q = {pvalue(alert['q_value'])}")
    return {k: "; ".join(v) for k, v in flags.items()}


def _intervals(result: Result) -> dict[tuple[Any, ...], tuple[Any, ...]]:
    """(model, segment, metric, average, label) -> the value's interval and its baseline's
    (each null where there is none), for the alerts table."""
    m = result.metrics
    if "ci_low" not in m.columns:
        return {}
    if "predicted" in m.columns:
        m = m.filter(pl.col("predicted").is_null())
    ends = [pl.col(c) if c in m.columns else pl.lit(None, pl.Float64).alias(c)
            for c in ("ci_low", "ci_high", "baseline_ci_low", "baseline_ci_high")]
    return {row[:5]: row[5:] for row in m.select(
        MODEL, SEGMENT, "metric", "average", pl.col("label").cast(pl.String), *ends).iter_rows()}


def context(result: Result, versions: Mapping[str, str]) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    job = result.job
    wide = wide_table(result)
    rows = summary_rows(result)
    models = sorted(result.sizes[MODEL].unique().to_list())
    segments = list(dict.fromkeys(result.sizes[SEGMENT].to_list()))
    rank, rank_metric = rank_column(result) if rows.height else (None, None)
    paired = twins(rows)
    columns = beside(list(dict.fromkeys(rows["column"].to_list())), paired)
    metric_of = dict(zip(rows["column"].to_list(), rows["metric"].to_list(), strict=True))
    flags = _flags(result)
    cells = {(r[MODEL], r[SEGMENT], r["column"]): r for r in rows.iter_rows(named=True)}
    # a segment large enough that is not judged: its truth is known for too little of it
    few = set(result.sizes.filter(big_enough(job) & ~pl.col("judged")).select(
        MODEL, SEGMENT).iter_rows())

    def flag(row: Mapping[str, Any] | None) -> str | None:
        return None if row is None else flags.get(
            (row[MODEL], row[SEGMENT], row["metric"], row["average"], row["label"]))

    overview = [{
        "model": row[MODEL], "segment": row[SEGMENT], "samples": row["samples"],
        "weight": row["weight"], "judged": row["judged"],
        "few_labels": (row[MODEL], row[SEGMENT]) in few,
        "cells": [_cell(metric_of[c], cell, flag(cell),
                        few_labels=(row[MODEL], row[SEGMENT]) in few) for c in columns
                  for cell in [cells.get((row[MODEL], row[SEGMENT], c))]]}
        for row in wide.iter_rows(named=True)]
    ranked = _ranked(result, rows, rank, rank_metric) if rank else None
    significant = [r.key for r in job.rules if r.significant]
    alerts = _alerts(result)
    page = {
        "title": job.title, "task": result.task, "engine": job.engine,
        "job_file": str(job.file) if job.file else None,
        "models": models, "columns": columns, "overview": overview,
        "estimated": [c for c in columns if metric_of[c] in ESTIMATED_METRICS],
        "estimated_metrics": ESTIMATED_METRICS, "few_labels": bool(few),
        "estimates": _estimates_text(result, paired),
        "has_baseline": job.baseline is not None,
        "baseline": _baseline_text(result), "rank": rank, "rank_metric": rank_metric,
        "window": _window_text(result),
        "alerts": alerts, "tested": any(a["significant"] for a in alerts),
        "rules": [r.describe() for r in job.rules],
        "significant": significant, "tests": _tests(result.tests, job.fdr),
        "flagged": bool(flags), "level": _level(job),
        "min_samples": job.min_samples, "min_weight": job.min_weight,
        "weakest": _weakest(ranked, job.top * 2) if ranked is not None else [],
        "per_label": _per_label(result, flags),
        "charts": _charts(result, ranked, rows, models, segments, rank, rank_metric),
        "parameters": _parameters(result), "inputs": result.inputs,
        "timings": [(k, round(v, 2)) for k, v in result.timings.items()],
        "versions": sorted(versions.items()),
        "too_small": int((~result.sizes["judged"]).sum()),
        "slices": _slices(result),
        "drift": _drift(result),
        "fairness": _fairness(result),
    }
    return page


def _alerts(result: Result) -> list[dict[str, Any]]:
    """The alerts' rows, with ``significant`` (whether the rule tests) and the intervals of
    the value and of the baseline (``ci_low``, ``ci_high``, ``baseline_ci_low``, ...)."""
    intervals = _intervals(result)
    out = []
    for alert in result.alerts.iter_rows(named=True):
        ends = intervals.get((alert[MODEL], alert[SEGMENT], alert["metric"], alert["average"],
                              alert["label"]), (None,) * 4)
        out.append({**alert, "significant": result.job.rules[alert["rule"]].significant,
                    **dict(zip(("ci_low", "ci_high", "baseline_ci_low", "baseline_ci_high"),
                               ends, strict=True))})
    return out


def _interval_text(result: Result) -> str | None:
    """How the intervals were made, in words (null without ``ci``)."""
    options = result.job.options
    if options.get("ci") is None or "ci_method" not in result.metrics.columns:
        return None
    counts = dict(result.metrics.filter(pl.col("ci_method").is_not_null())
                  .group_by("ci_method").len().iter_rows())
    methods = {"delong": "DeLong's for a label's ROC AUC",
               "bootstrap": f"a Poisson bootstrap of {options['resamples']} resamples (seed "
                            f"{options['seed']}) for the others"}
    said = [f"{text} ({counts[name]:,} values)" for name, text in methods.items()
            if counts.get(name)]
    said += [f"{name} ({n:,} values)" for name, n in sorted(counts.items())
             if name not in methods]
    return f"{_level(result.job)}: " + ", ".join(said or ["no value has one"])


def _estimation_text(job: Job) -> str | None:
    """What the estimated metrics read the scores as, in words (null where none is asked)."""
    if not any(m in ESTIMATED_METRICS for m in job.metrics):
        return None
    spec = job.estimation
    if spec is None or spec.reference is None or spec.calibration == "none":
        return "the scores read as calibrated probabilities"
    return (f"the scores mapped to probabilities by the calibration map "
            f"({spec.calibration or 'isotonic'}) learnt on the labelled rows of "
            f"{spec.reference}")


def _estimates_text(result: Result, paired: Mapping[str, str]) -> str | None:
    """The overview's words on its estimated columns (null where the job asks none)."""
    said = _estimation_text(result.job)
    if said is None:
        return None
    where = "right after the value each estimates, " if paired else ""
    return (f"estimated columns ({where}in italics) are expected values from the scores "
            f"alone, every row counted whether its truth is known or not ({said})" + (
                f"; their intervals: where the realised value falls with {_level(result.job)} "
                "probability" if _level(result.job) else ""))


def _level(job: Job) -> str | None:
    """The intervals' level as a percentage (``95%``), or null without ``ci``."""
    level = job.options.get("ci")
    return None if level is None else f"{level * 100:g}%"


def render_html(result: Result, versions: Mapping[str, str]) -> str:
    return environment().get_template("report.html.j2").render(**context(result, versions))


def _window_text(result: Result) -> str | None:
    """The window the page's tables are of (the latest of the job's first granularity)."""
    window = result.job.window
    if window is None or result.trend is None or result.trend.is_empty():
        return None
    latest = over_time.latest_window(result.trend, window.every)
    assert latest is not None
    grain, start = latest
    end = result.trend.filter(pl.col("granularity") == grain,
                              pl.col("window_start") == start)["window_end"][0]
    return f"the {grain} window [{start}, {end}) of {window.column}, the latest"


def _baseline_text(result: Result) -> str | None:
    base = result.job.baseline
    if base is None:
        return None
    if base.previous or base.window is not None:
        which = "the window before" if base.previous else f"the window of {base.window}"
        return which + (f", model {base.model}" if base.model else ", the same model")
    if base.path is not None and base.model is not None:
        return f"model {base.model} of the run in {base.path}"
    if base.path is not None:
        return f"the same model in the run in {base.path}"
    return f"model {base.model} of this run"


def _ranked(result: Result, rows: pl.DataFrame, rank: str, metric: str) -> pl.DataFrame:
    """The rank column per model x segment with sizes, worst first (judged segments only,
    the overall row left out)."""
    better = ordering(metric)
    table = rows.filter(pl.col("column") == rank).join(
        result.sizes.select(MODEL, SEGMENT, "samples", "weight", "judged"),
        on=[MODEL, SEGMENT], how="left")
    return table.filter(judged(metric, result.job) & (pl.col(SEGMENTATION) != OVERALL)
                        & pl.col("value").is_not_null()).sort(
        better(pl.col("value")), MODEL, SEGMENT, maintain_order=True)


def _weakest(ranked: pl.DataFrame, n: int) -> list[dict[str, Any]]:
    weakest = ranked.group_by(MODEL, maintain_order=True).head(n).sort(MODEL,
                                                                       maintain_order=True)
    return [{**row, "tone": _tone(row["metric"], row["delta"])} for row in weakest.to_dicts()]


def _shown_segments(ranked: pl.DataFrame | None, segments: list[str], top: int,
                    metric: str | None) -> dict[str, str]:
    """The overall row, then the ``top`` weakest and ``top`` strongest segments (by their worst
    value across models), each with the name its row of charts shows."""
    if ranked is None or metric is None or ranked.is_empty():
        return {s: s for s in segments[: 1 + 2 * top]}
    better = ordering(metric)
    worst = ranked.group_by(SEGMENT).agg(score=better(pl.col("value")).min()).sort(
        "score", SEGMENT)
    names = worst[SEGMENT].to_list()
    weakest, strongest = names[:top], names[max(top, len(names) - top):][::-1]
    shown = {OVERALL: OVERALL}
    for names_, tag in ((weakest, "weak"), (strongest, "strong")):
        shown.update({s: f"{s}\n({tag})" for s in names_ if s not in shown})
    return shown


def _labels(table: pl.DataFrame, most: int) -> tuple[list[str], int]:
    labels = sorted({str(v) for v in table["label"].drop_nulls().to_list()})
    return labels[:most], max(0, len(labels) - most)


def _legend(result: Result, metric: str) -> tuple[dict[charts.Key, float | None],
                                                  dict[charts.Key, tuple[Any, Any]]]:
    """The legends' values of ``metric`` per (model, segment, label), and their intervals."""
    rows = result.metrics.filter((pl.col("metric") == metric) & pl.col("average").is_null()
                                 & pl.col("label").is_not_null())
    values = {(m, s, str(lab)): v for m, s, lab, v in
              rows.select(MODEL, SEGMENT, "label", "value").iter_rows()}
    if "ci_low" not in rows.columns:
        return values, {}
    return values, {(m, s, str(lab)): (lo, hi) for m, s, lab, lo, hi in
                    rows.select(MODEL, SEGMENT, "label", "ci_low", "ci_high").iter_rows()}


def _charts(result: Result, ranked: pl.DataFrame | None, rows: pl.DataFrame,
            models: list[str], segments: list[str], rank: str | None,
            metric: str | None) -> list[dict[str, str]]:
    job = result.job
    shown = _shown_segments(ranked, segments, job.top, metric)
    which = (f"the overall row and the {job.top} weakest and {job.top} strongest segments by "
             f"{rank}" if rank else "the first segments")
    out = []
    if result.trend is not None:
        out.append(_trends(result, models))
    if rank is not None:
        sized = result.sizes.select(MODEL, SEGMENT, "samples", "weight", "judged")
        dots = rows.filter(pl.col("column") == rank).join(
            sized, on=[MODEL, SEGMENT], how="left").with_columns(
            judged=judged(str(metric), job))
        estimate = next((e for e, r in twins(rows).items() if r == rank), None)
        diamonds = None if estimate is None else rows.filter(
            pl.col("column") == estimate).join(sized, on=[MODEL, SEGMENT], how="left")
        bars = "ci_low" in dots.columns
        note = "A dot per model; hollow dots: too small to judge" + (
            " or with too few labels" if COVERAGE in result.sizes.columns else "") + (
            "; rings: the baseline") + (f"; bars: the {_level(job)} intervals" if bars else "") + (
            f"; diamonds: {estimate}, the value estimated without the truth" if estimate
            else "") + "."
        out.append({"id": "by-segment", "title": f"{rank} in every segment", "note": note,
                    "svg": charts.segment_dots(dots, rank, models, segments, "by-segment",
                                               estimates=diamonds)})
    titles = {"roc": ("ROC curves", "roc_auc"), "pr": ("Precision-recall curves",
                                                        "average_precision"),
              "reliability": ("Reliability diagrams", "calibration_error")}
    for kind in ("roc", "pr", "sweep", "reliability"):
        table = result.curves.get(kind)
        if table is None or table.is_empty():
            continue
        if kind == "sweep":
            average = "micro" if table["average"].drop_nulls().len() else None
            part = table.filter(pl.col("average") == average) if average else table
            over = "micro average over labels" if average else "the one label"
            note = (f"F1, precision and recall against the threshold ({over}); the "
                    f"dash-dotted line is the job's threshold {job.options['threshold']}. "
                    f"Rows: {which}; columns: models." + (
                        " The sweep's points have no intervals." if _level(job) else ""))
            out.append({"id": "sweep", "title": "Threshold sweeps", "note": note,
                        "svg": charts.sweep_grid(part, shown, models,
                                                 float(job.options["threshold"]), "sweep")})
            continue
        labels, more = _labels(table, job.max_labels)
        title, legend_metric = titles[kind]
        stem = next(stem for stem, t in result.curve_files().items() if t is table)
        if len(labels) == 1:
            note = f"Panels: {which}; a line per model."
        else:
            note = f"Rows: {which}; columns: labels" + (
                f" (the first {len(labels)}; {more} more in {stem}.parquet)" if more
                else "") + "; a line per model."
        values, intervals = _legend(result, legend_metric)
        if intervals:
            note += " The legends give each area with its interval."
        if kind in ("roc", "pr"):
            note += " " + _thinning(job, kind)
        out.append({"id": kind, "title": title, "note": note,
                    "svg": charts.curve_grid(table, kind, shown, labels, models, values, kind,
                                             intervals)})
    matrix = result.metrics.filter((pl.col("metric") == "confusion_matrix")
                                   & (pl.col(SEGMENTATION) == OVERALL))
    if not matrix.is_empty():
        labels = sorted({str(v) for v in matrix["label"].drop_nulls().to_list()}
                        | {str(v) for v in matrix["predicted"].drop_nulls().to_list()})
        out.append({"id": "confusion", "title": "Confusion matrices (overall)",
                    "note": "Rows: the true class; columns: the predicted (argmax) class; "
                            "cells: weight, shaded by the share of the row.",
                    "svg": charts.confusion_heatmaps(
                        {m[0]: p for m, p in matrix.partition_by(MODEL, as_dict=True,
                                                                  maintain_order=True).items()},
                        labels, "confusion")})
    return out


def _trends(result: Result, models: list[str]) -> dict[str, str]:
    """The trend chart: each metric asked (overall, at its first average) over the windows of
    each granularity, a line per model."""
    job = result.job
    assert result.trend is not None and job.window is not None
    rows = summary_rows(result, result.trend).filter(pl.col(SEGMENTATION) == OVERALL)
    keys = [MODEL, SEGMENT, "metric", "average", "label"]
    fired = result.alerts.select(*keys).unique().with_columns(alerted=pl.lit(True))
    grain = job.window.every[0]  # the alerts judge its latest window
    latest = rows.filter(pl.col("granularity") == grain,
                         pl.col("window_start") == pl.col("window_start").max())
    rows = rows.join(latest.select(*keys, "granularity", "window_start").join(
        fired, on=keys, nulls_equal=True), on=[*keys, "granularity", "window_start"],
        how="left", nulls_equal=True).with_columns(pl.col("alerted").fill_null(False))
    sizes = result.trend.select(MODEL, SEGMENT, "granularity", "window_start", "samples",
                                "weight").unique()
    coverage = ([pl.col("label_coverage").fill_null(0.0) >= job.min_label_coverage]
                if "label_coverage" in result.trend.columns else [])
    if coverage:
        sizes = sizes.join(result.trend.select(MODEL, SEGMENT, "granularity", "window_start",
                                               "label_coverage").unique(
            [MODEL, SEGMENT, "granularity", "window_start"]),
            on=[MODEL, SEGMENT, "granularity", "window_start"], how="left", nulls_equal=True)
    # an estimate reads every row: the truth's coverage does not judge it
    rows = rows.join(sizes, on=[MODEL, SEGMENT, "granularity", "window_start"], how="left",
                     nulls_equal=True).with_columns(
        judged=big_enough(job) & (pl.col("metric").is_in(ESTIMATED_METRICS)
                                  | pl.all_horizontal(pl.lit(True), *coverage)))
    paired = twins(rows)
    columns = [c for c in dict.fromkeys(rows["column"].to_list()) if c not in paired]
    estimates = {r: e for e, r in paired.items()}
    bands = "ci_low" in rows.columns
    note = (f"Overall, each window of {job.window.column} ({job.window.time_zone}); a line per "
            "model" + (f", its band the {_level(job)} intervals" if bands else "") + (
                "; dashed, with diamonds and a hatched band: the value estimated without the "
                "truth, in the panel of the value it estimates" if estimates else "") +
            ("; dotted: the baseline" if job.baseline is not None and not job.baseline.previous
             else "") + "; hollow: too small to judge" + (
                f" or truth known for under {job.min_label_coverage:.0%} of its weight"
                if coverage else "") + "; red rings: the latest window's alerts.")
    return {"id": "trends", "title": "Trends", "note": note,
            "svg": charts.trend_grid(rows, columns, job.window.every, models, "trends",
                                     estimates)}


def _per_label(result: Result, flags: Flags) -> list[dict[str, Any]]:
    """Per model: a row per segment x label, a column per metric."""
    rows = result.metrics.filter(pl.col("average").is_null() & pl.col("label").is_not_null())
    if "predicted" in rows.columns:
        rows = rows.filter(pl.col("predicted").is_null())
    if rows.is_empty():
        return []
    metrics = list(dict.fromkeys(rows["metric"].to_list()))
    order = {m: i for i, m in enumerate(dict.fromkeys([*result.job.metrics, *metrics]))}
    metrics.sort(key=order.__getitem__)
    metrics = beside(metrics, {m: realised(m) for m in metrics
                               if m in ESTIMATED_METRICS and realised(m) in metrics})
    out = []
    for model in sorted(rows[MODEL].unique().to_list()):
        part = rows.filter(pl.col(MODEL) == model)
        cells = {(r[SEGMENT], str(r["label"]), r["metric"]): r
                 for r in part.iter_rows(named=True)}
        keys = list(dict.fromkeys((s, str(lab)) for s, lab in part.select(SEGMENT, "label")
                                  .iter_rows()))
        out.append({"model": model, "metrics": metrics, "rows": [
            {"segment": s, "label": lab,
             "cells": [_cell(m, cells.get((s, lab, m)), flags.get((model, s, m, None, lab)))
                       for m in metrics]}
            for s, lab in keys]})
    return out


def _parameters(result: Result) -> list[tuple[str, str]]:
    job = result.job
    options = ", ".join(f"{k}={'null' if v is None else v}" for k, v in job.options.items())
    return [
        ("task", result.task), ("engine", job.engine),
        ("metrics", ", ".join(job.metrics)),
        ("averages", ", ".join(["none (per label)", *job.average])),
        ("options", options),
        ("segmentations", "; ".join(s.name for s in job.segmentations)),
        ("curves", ", ".join(job.curves) + f" (sweep: {job.sweep_bins + 1} thresholds)"),
        ("baseline", _baseline_text(result) or "none"),
        ("judged segments", f"at least {job.min_samples} samples and weight "
                            f"{job.min_weight:g}"),
        ("intervals", _interval_text(result) or "none (ci not set)"),
        *([("estimated metrics", _estimation_text(job))] if _estimation_text(job) else []),
        *([("significance tests", f"{result.tests} by the significant rules ("
            + ", ".join(r.key for r in job.rules if r.significant) + "); false discovery "
            f"rate {job.fdr:g} (Benjamini-Hochberg over all of them)")]
          if any(r.significant for r in job.rules) else []),
        ("memory limit", job.memory_limit or "none"),
    ]


def _thinning(job: Job, kind: str) -> str:
    """What a drawn ROC / PR curve is: its points, and how far from the exact curve."""
    if not job.max_points:
        return (f"Every point is in the table; the chart draws at most {charts.MAX_POINTS} a "
                "curve, chosen as below.")
    both = "both" if {"roc", "pr"} <= set(job.curves) else kind
    bins = curve_bins(both, job.max_points)[kind]
    return (f"Each curve is drawn through at most {job.max_points} of its points (the first, "
            f"last, lowest and highest of each of {bins} bins of its x axis): within "
            f"{1 / bins:.3g} of the exact curve; the areas are from every point.")


def slice_name(row: Mapping[str, Any], columns: list[str]) -> str:
    """A slice as its predicates, ``region=eu, date=2026-11-01`` (a column it does not use is
    null in its row; where a value it uses is null, the level says so)."""
    used = [f"{c}={row[c]}" for c in columns if row.get(c) is not None]
    if len(used) < row.get("level", len(used)):
        used.append("a slice column = null")
    return ", ".join(used) or "all"


def _slices(result: Result) -> dict[str, Any] | None:
    """The [slices] section: per model, the slices found (worst first) as table rows, and a
    chart of each slice's value against the rest's."""
    spec, found = result.job.slices, result.slices
    if spec is None or found is None:
        return None
    names = [result.job.names[c] for c in spec.over]
    rows = [{**row, "slice": slice_name(row, names)} for row in found.iter_rows(named=True)]
    extra = [c for c in ("difference", "score", "q_value") if c in found.columns]
    # alpha weighs SliceLine's score (row-wise errors); fdr filters slices with intervals
    applied = {k for k in spec.options if not ((k == "alpha" and spec.metric not in ROW_ERRORS)
                                               or (k == "fdr" and "ci" not in spec.options))}
    return {"metric": spec.metric, "over": list(spec.over), "rows": rows, "extra": extra,
            "columns": found.columns,
            "options": ", ".join(f"{k}={v}" for k, v in spec.options.items()
                                 if k in applied) or "defaults",
            "svg": charts.slice_dots(rows, spec.metric, "slices") if rows else None}


#: The drift rows the page lists: the most drifted, by the statistic shown.
DRIFT_ROWS = 20


def _drift(result: Result) -> dict[str, Any] | None:
    """The [drift] section: a heat map of the statistic shown (a row per compared column and
    label, a column per model and segment) and the most drifted rows, of the latest window."""
    spec, rows = result.job.drift, result.drift
    if spec is None or rows is None:
        return None
    rows, _ = shown_drift(rows, result.job)
    shown = rows.filter(pl.col("statistic") == spec.statistic).with_columns(
        row=pl.when(pl.col("label").is_null()).then(pl.col("compared"))
        .otherwise(pl.concat_str("compared", pl.lit(" · "), "label")),
        column=pl.concat_str(MODEL, pl.lit(" · "), SEGMENT))
    values = {(r["row"], r["column"]): r["value"] for r in shown.iter_rows(named=True)}
    worst = shown.filter(pl.col("value").is_not_null()).sort(
        "value", descending=True, maintain_order=True).head(DRIFT_ROWS)
    reference = spec.options["reference"]
    return {"statistic": spec.statistic, "tested": spec.statistic in ("ks", "chi2"),
            "reference": ", ".join(f"{k} = {v}" for k, v in reference.items())
            if isinstance(reference, Mapping) else str(reference),
            "compared": ", ".join(dict.fromkeys(rows["compared"].to_list())),
            "statistics": ", ".join(dict.fromkeys(rows["statistic"].to_list())),
            "rows": worst.to_dicts(),
            "svg": charts.drift_heatmap(
                list(dict.fromkeys(shown["row"].to_list())),
                list(dict.fromkeys(shown["column"].to_list())), values, spec.statistic,
                "drift") if values else None,
            "scores": _drift_scores(result)}


#: The gaps the [fairness] section lists at most (every one in fairness_summary.parquet).
FAIRNESS_ROWS = 40


def _fairness(result: Result) -> dict[str, Any] | None:
    """The [fairness] section: per model (and control segment), metric and label, the lowest
    and highest group, the difference and the ratio with their intervals, the p-value of no
    gap, and the named disparities in a line."""
    spec, tables = result.job.fairness, result.fairness
    if spec is None or tables is None:
        return None
    summary = tables["summary"].sort(MODEL, maintain_order=True)  # a model's gaps together
    return {"sensitive": " x ".join(spec.sensitive), "by": ", ".join(spec.by),
            "method": spec.options.get("method", "between_groups"),
            "min_support": spec.options.get("min_support") or 0,
            "intervals": "p_value" in summary.columns,
            "level": f"{spec.options.get('ci', 0) * 100:g}%",
            "rows": summary.head(FAIRNESS_ROWS).to_dicts(),
            "disparities": tables["disparities"].sort(MODEL, maintain_order=True)
            .head(FAIRNESS_ROWS).to_dicts()}


def _drift_scores(result: Result) -> dict[str, Any] | None:
    """The chart of the most drifted segment's scores against the reference's (None: no score
    row has a value, or no score of it was read back)."""
    scores, spec = result.drift_scores, result.job.drift
    if scores is None or spec is None or scores.bins.is_empty():
        return None
    row = scores.row
    title = (f"Scores of model {row[MODEL]}, {row[SEGMENT]}, label {row['label']}, against the "
             "reference: "
             f"{spec.statistic} {row['value']:.4f}")
    return {"model": row[MODEL], "segment": row[SEGMENT], "label": row["label"],
            "value": row["value"],
            "svg": charts.drift_scores(scores.bins, title, (row["reference_rows"],
                                                            row["current_rows"]),
                                       "drift-scores")}


def _tests(tests: int, fdr: float) -> str:
    """``12 tests, false discovery rate 0.05``."""
    return f"{tests} test{'s' if tests != 1 else ''}, false discovery rate {fdr:g}"
