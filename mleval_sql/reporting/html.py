"""``report.html``: the job's results as one self-contained page, from a jinja2 template.

Alerts and the weakest segments come first, then the overview per model x segment with deltas
against the baseline, the metric across every segment, the curves of the overall row and the
weakest and strongest segments, the per-label tables, and what was run. No script, style sheet,
font or image is fetched: the styles are inline, the charts are inline SVG, and the page's
Content-Security-Policy forbids any request.

>>> page = render_html(result, versions={"mleval_sql": "0.1.0"})  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import polars as pl

from mleval_sql.reporting import charts
from mleval_sql.reporting.job import MODEL, OVERALL, SEGMENT, SEGMENTATION, JobError
from mleval_sql.reporting.run import (
    LOWER_IS_BETTER,
    NEUTRAL,
    Result,
    ordering,
    rank_column,
    summary_rows,
    wide_table,
)

TEMPLATES = Path(__file__).resolve().parent / "templates"


def _jinja() -> Any:
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


def _tone(metric: str, delta: float | None) -> str:
    """``better`` / ``worse`` for a delta of ``metric``, or nothing."""
    if delta is None or delta == 0 or metric in NEUTRAL:
        return ""
    good = delta < 0 if metric in LOWER_IS_BETTER else delta > 0
    return "better" if good else "worse"


def _cell(metric: str, pair: tuple[float | None, float | None] | None) -> dict[str, Any]:
    """A table cell: the value, its delta against the baseline and the delta's tone."""
    value, delta = pair or (None, None)
    return {"value": value, "delta": delta, "tone": _tone(metric, delta)}


def context(result: Result, versions: Mapping[str, str]) -> dict[str, Any]:
    """Everything the template shows, as plain values."""
    job = result.job
    wide = wide_table(result)
    rows = summary_rows(result)
    models = sorted(result.sizes[MODEL].unique().to_list())
    segments = list(dict.fromkeys(result.sizes[SEGMENT].to_list()))
    rank, rank_metric = rank_column(result) if rows.height else (None, None)
    columns = list(dict.fromkeys(rows["column"].to_list()))
    metric_of = dict(zip(rows["column"].to_list(), rows["metric"].to_list(), strict=True))
    cells = {(m, s, c): (v, d) for m, s, c, v, d in rows.select(
        MODEL, SEGMENT, "column", "value", "delta").iter_rows()}
    overview = [{
        "model": row[MODEL], "segment": row[SEGMENT], "samples": row["samples"],
        "weight": row["weight"], "judged": row["judged"],
        "cells": [_cell(metric_of[c], cells.get((row[MODEL], row[SEGMENT], c)))
                  for c in columns]} for row in wide.iter_rows(named=True)]
    ranked = _ranked(result, rows, rank, rank_metric) if rank else None
    page = {
        "title": job.title, "task": result.task, "engine": job.engine,
        "job_file": str(job.file) if job.file else None,
        "models": models, "columns": columns, "overview": overview,
        "has_baseline": job.baseline is not None,
        "baseline": _baseline_text(result), "rank": rank, "rank_metric": rank_metric,
        "alerts": result.alerts.to_dicts(), "rules": [r.describe() for r in job.rules],
        "min_samples": job.min_samples, "min_weight": job.min_weight,
        "weakest": _weakest(ranked, job.top * 2) if ranked is not None else [],
        "per_label": _per_label(result),
        "charts": _charts(result, ranked, rows, models, segments, rank, rank_metric),
        "parameters": _parameters(result), "inputs": result.inputs,
        "timings": [(k, round(v, 2)) for k, v in result.timings.items()],
        "versions": sorted(versions.items()),
        "too_small": int((~result.sizes["judged"]).sum()),
    }
    return page


def render_html(result: Result, versions: Mapping[str, str]) -> str:
    return _jinja().get_template("report.html.j2").render(**context(result, versions))


def _baseline_text(result: Result) -> str | None:
    base = result.job.baseline
    if base is None:
        return None
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
    return table.filter(pl.col("judged") & (pl.col(SEGMENTATION) != OVERALL)
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


def _legend(result: Result, metric: str) -> dict[tuple[str, str, str], float | None]:
    rows = result.metrics.filter((pl.col("metric") == metric) & pl.col("average").is_null()
                                 & pl.col("label").is_not_null())
    return {(m, s, str(lab)): v for m, s, lab, v in
            rows.select(MODEL, SEGMENT, "label", "value").iter_rows()}


def _charts(result: Result, ranked: pl.DataFrame | None, rows: pl.DataFrame,
            models: list[str], segments: list[str], rank: str | None,
            metric: str | None) -> list[dict[str, str]]:
    job = result.job
    shown = _shown_segments(ranked, segments, job.top, metric)
    which = (f"the overall row and the {job.top} weakest and {job.top} strongest segments by "
             f"{rank}" if rank else "the first segments")
    out = []
    if rank is not None:
        dots = rows.filter(pl.col("column") == rank).join(
            result.sizes.select(MODEL, SEGMENT, "judged"), on=[MODEL, SEGMENT], how="left")
        out.append({"id": "by-segment", "title": f"{rank} in every segment",
                    "note": "A dot per model; hollow dots: too small to judge; rings: the "
                            "baseline.",
                    "svg": charts.segment_dots(dots, rank, models, segments, "by-segment")})
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
                    f"Rows: {which}; columns: models.")
            out.append({"id": "sweep", "title": "Threshold sweeps", "note": note,
                        "svg": charts.sweep_grid(part, shown, models,
                                                 float(job.options["threshold"]), "sweep")})
            continue
        labels, more = _labels(table, job.max_labels)
        title, legend_metric = titles[kind]
        if len(labels) == 1:
            note = f"Panels: {which}; a line per model."
        else:
            note = f"Rows: {which}; columns: labels" + (
                f" (the first {len(labels)}; {more} more in curve_{kind}.parquet)" if more
                else "") + "; a line per model."
        out.append({"id": kind, "title": title, "note": note,
                    "svg": charts.curve_grid(table, kind, shown, labels, models,
                                             _legend(result, legend_metric), kind)})
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


def _per_label(result: Result) -> list[dict[str, Any]]:
    """Per model: a row per segment x label, a column per metric."""
    rows = result.metrics.filter(pl.col("average").is_null() & pl.col("label").is_not_null())
    if "predicted" in rows.columns:
        rows = rows.filter(pl.col("predicted").is_null())
    if rows.is_empty():
        return []
    metrics = list(dict.fromkeys(rows["metric"].to_list()))
    order = {m: i for i, m in enumerate(dict.fromkeys([*result.job.metrics, *metrics]))}
    metrics.sort(key=order.__getitem__)
    out = []
    for model in sorted(rows[MODEL].unique().to_list()):
        part = rows.filter(pl.col(MODEL) == model)
        cells = {(s, str(lab), m): (v, d) for s, lab, m, v, d in part.select(
            SEGMENT, "label", "metric", "value", "delta").iter_rows()}
        keys = list(dict.fromkeys((s, str(lab)) for s, lab in part.select(SEGMENT, "label")
                                  .iter_rows()))
        out.append({"model": model, "metrics": metrics, "rows": [
            {"segment": s, "label": lab,
             "cells": [_cell(m, cells.get((s, lab, m))) for m in metrics]}
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
        ("memory limit", job.memory_limit or "none"),
    ]
