"""The report's charts: matplotlib figures rendered to SVG text for inline use.

Deterministic: no date in the SVG, and element ids hashed from a salt per chart (so ids are the
same from run to run, and differ between the charts of one page). Text stays text (the page's
fonts draw it). Grids are small multiples: one row per segment shown (the overall row and the
weakest and strongest ones), one column per label, one line per model.

>>> svg = render(Figure())  # doctest: +SKIP
"""

from __future__ import annotations

import io
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from mleval_sql.reporting.job import MODEL, SEGMENT

INSTALL_HINT = "pip install 'mleval_sql[report]'"
#: Points drawn per ROC / PR line at most where the job's table keeps every point
#: ([curves] max_points = 0): thinned as the tables are (queries/curve_rates.sql).
MAX_POINTS = 400
PANEL = (2.6, 2.3)  # inches per small multiple
WRAP = 4  # panels per row when a chart has one label
COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2",
          "#7f7f7f", "#bcbd22", "#17becf")


def require_matplotlib() -> Any:
    """matplotlib's ``Figure`` class, which every chart is drawn on; a ``JobError`` naming the
    extra to install where matplotlib is missing (the report checks this before any scan)."""
    try:
        from matplotlib.figure import Figure
    except ImportError as error:
        from mleval_sql.reporting.job import JobError

        raise JobError(f"the report draws its charts with matplotlib, which is not installed: "
                       f"{INSTALL_HINT}") from error
    return Figure


def render(figure: Any, salt: str) -> str:
    """``figure`` as an inline ``<svg>`` element (no XML prolog), the same on every run."""
    import matplotlib
    from matplotlib.backends.backend_svg import FigureCanvasSVG

    out = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": salt, "svg.fonttype": "none"}):
        FigureCanvasSVG(figure).print_svg(out, metadata={
            "Date": None, "Creator": None, "Format": None, "Type": None})
    text = out.getvalue()
    return _compact(text[text.index("<svg"):])


#: A coordinate in a path's data or a position attribute of the SVG.
_PATH = re.compile(r'( d="[^"]*"| (?:x|y|x1|x2|y1|y2|width|height)="[-\d.]+")')
_NUMBER = re.compile(r"-?\d+\.\d{3,}")


def _compact(svg: str) -> str:
    """``svg`` with its coordinates to 1/100 of a point (matplotlib writes six decimals), a
    path's data on one line and no indentation: a page of a few hundred curves stays small,
    and a point moves by at most 0.005 pt, far below what a curve's thinning allows."""
    def coordinates(match: re.Match[str]) -> str:
        text = _NUMBER.sub(lambda m: f"{float(m[0]):.2f}".rstrip("0").rstrip("."), match[0])
        return text.replace(" \n", " ").replace("\n", " ")
    return re.sub(r"\n +<", "\n<", _PATH.sub(coordinates, svg))  # and no indentation


def _grid(rows: int, cols: int, *, width: float = PANEL[0],
          height: float = PANEL[1]) -> tuple[Any, Any]:
    """A figure of ``rows`` x ``cols`` panels with fixed margins (in inches): constrained
    layout measures every tick label and costs seconds on a grid of a few dozen panels. The
    panels share no axes (each sets its limits; shared axes make every tick and limit call
    visit all of them): tick labels on the bottom row and the first column only."""
    left, right, bottom, top, gap = 0.95, 0.15, 0.45, 0.3, 0.18
    size = (left + right + cols * width, bottom + top + rows * height)
    figure = require_matplotlib()(figsize=size)
    axes = figure.subplots(rows, cols, squeeze=False, gridspec_kw={
        "left": left / size[0], "right": 1 - right / size[0], "bottom": bottom / size[1],
        "top": 1 - top / size[1], "wspace": gap * cols / (cols * width),
        "hspace": 2.4 * gap * rows / (rows * height)})
    for r, row in enumerate(axes):
        for c, ax in enumerate(row):
            ax.set_xticks([0, 0.5, 1], ["0", "0.5", "1"])
            ax.set_yticks([0, 0.5, 1], ["0", "0.5", "1"])
            ax.tick_params(labelsize=7, length=2, pad=1.5, labelbottom=r == rows - 1,
                           labelleft=c == 0)
            ax.grid(alpha=0.25)
    return figure, axes


def _thin(frame: pl.DataFrame, kind: str) -> pl.DataFrame:
    """One curve's points, at most :data:`MAX_POINTS` of them, chosen as the curve tables'
    are: within 1/B of the exact curve (reliability tables are small already)."""
    if frame.height <= MAX_POINTS or kind not in ("roc", "pr"):
        return frame
    from mleval_sql.engines.polars.ranking import thinned

    keyed = frame.with_columns(segment=pl.lit(0), label=pl.lit(0))
    return thinned(keyed.lazy(), kind, MAX_POINTS).collect().drop("segment", "label")


def colors(models: Sequence[str]) -> dict[str, str]:
    return {m: COLORS[i % len(COLORS)] for i, m in enumerate(models)}


KINDS = {
    # x, y, x label, y label, the metric shown in the legend, diagonal
    "roc": ("fpr", "tpr", "False positive rate", "True positive rate", "AUC", True),
    "pr": ("recall", "precision", "Recall", "Precision", "AP", False),
    "reliability": ("mean_score", "observed_rate", "Mean score", "Observed rate", "ECE", True),
}


def bounds(low: float | None, high: float | None) -> str:
    """An interval, compact: ``[0.70, 0.75]``, with more digits where two would not tell its
    ends apart (``[0.995, 0.998]``); empty where an end is unknown."""
    if low is None or high is None or math.isnan(low) or math.isnan(high):
        return ""
    digits = 2 if max(abs(low), abs(high)) < 100 else 0
    while digits < 4 and f"{low:.{digits}f}" == f"{high:.{digits}f}" and low != high:
        digits += 1
    return f"[{low:.{digits}f}, {high:.{digits}f}]"


Key = tuple[str, str, str]


def curve_grid(table: pl.DataFrame, kind: str, segments: Mapping[str, str],
               labels: Sequence[str],
               models: Sequence[str], legend: dict[Key, float | None],
               salt: str,
               intervals: Mapping[Key, tuple[float | None, float | None]] | None = None) -> str:
    """ROC / PR / reliability curves, a panel per segment x label and a line per model:
    a row per segment and a column per label, or with one label the segments in rows of
    ``WRAP``. ``segments``: segment -> the name its panels show; ``legend[(model, segment,
    label)]``: the value shown next to the model's name, and ``intervals[...]`` its interval
    (low, high) where it has one."""
    x, y, xlabel, ylabel, area, diagonal = KINDS[kind]
    one = len(labels) == 1
    panels = [(segment, name, label) for segment, name in segments.items() for label in labels]
    cols = min(WRAP, len(panels)) if one else len(labels)
    rows = -(-len(panels) // cols)
    figure, axes = _grid(rows, cols, height=PANEL[1] + (0.25 if one else 0))
    palette = colors(models)
    parts = table.partition_by([MODEL, SEGMENT, "label"], as_dict=True, maintain_order=True)
    for i, (segment, name, label) in enumerate(panels):
        r, c = divmod(i, cols)
        ax = axes[r][c]
        if diagonal:
            ax.plot([0, 1], [0, 1], linestyle=":", color="#999999", linewidth=0.8)
        for model in models:
            part = parts.get((model, segment, label))
            if part is None or part.is_empty():
                continue
            part = _thin(part, kind).filter(pl.col(x).is_not_null() & pl.col(y).is_not_null())
            value = legend.get((model, segment, label))
            span = bounds(*(intervals or {}).get((model, segment, label), (None, None)))
            text = model if value is None else f"{model} ({area} {value:.3f}" + (
                f" {span})" if span else ")")
            ax.plot(part[x].to_list(), part[y].to_list(), color=palette[model],
                    linewidth=1.3, label=text, marker="o" if kind == "reliability" else None,
                    markersize=2.5, drawstyle="steps-pre" if kind == "pr" else "default")
        ax.set_xlim(-0.02, 1.02)
        ax.set_ylim(-0.02, 1.02)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=6.5, loc="lower right" if kind == "roc" else "best",
                      frameon=False, handlelength=1.2)
        if one:
            ax.set_title(name.replace("\n", " "), fontsize=8)
        elif r == 0:
            ax.set_title(f"label {label}", fontsize=8.5)
        if c == 0:
            ax.set_ylabel(ylabel if one else f"{_short(name)}\n{ylabel}", fontsize=7.5)
        if r == rows - 1 or (one and i + cols >= len(panels)):
            ax.set_xlabel(xlabel, fontsize=7.5)
            ax.tick_params(labelbottom=True)
    for i in range(len(panels), rows * cols):  # the empty end of the last row
        axes[i // cols][i % cols].set_visible(False)
    return render(figure, salt)


def sweep_grid(table: pl.DataFrame, segments: Mapping[str, str], models: Sequence[str],
               threshold: float, salt: str) -> str:
    """F1, precision and recall against the threshold: a row per segment, a column per model."""
    figure, axes = _grid(len(segments), len(models), width=3.0)
    parts = table.partition_by([MODEL, SEGMENT], as_dict=True, maintain_order=True)
    styles = {"f1": ("#333333", "-"), "precision": ("#1f77b4", "--"),
              "recall": ("#d62728", ":")}
    for r, (segment, name) in enumerate(segments.items()):
        for c, model in enumerate(models):
            ax = axes[r][c]
            part = parts.get((model, segment))
            if part is not None:
                part = part.sort("threshold")
                for metric, (color, line) in styles.items():
                    ax.plot(part["threshold"].to_list(), part[metric].to_list(), color=color,
                            linestyle=line, linewidth=1.3, label=metric)
            ax.axvline(threshold, color="#999999", linewidth=0.8, linestyle="-.")
            ax.set_xlim(0, 1)
            ax.set_ylim(-0.02, 1.02)
            if r == 0:
                ax.set_title(f"model {model}", fontsize=8.5)
                ax.legend(fontsize=6.5, loc="lower left", frameon=False, handlelength=1.6)
            if c == 0:
                ax.set_ylabel(_short(name), fontsize=7.5)
            if r == len(segments) - 1:
                ax.set_xlabel("Threshold", fontsize=7.5)
    return render(figure, salt)


def segment_dots(rows: pl.DataFrame, metric: str, models: Sequence[str],
                 segments: Sequence[str], salt: str,
                 estimates: pl.DataFrame | None = None) -> str:
    """One line per segment (all of them), a dot per model, a ring at the baseline; segments too
    small to judge are greyed. Where ``rows`` has ``ci_low`` and ``ci_high``, each value's
    interval is an error bar, and the models' dots sit side by side on their segment's line so
    that their bars do not overlap (the bars of model ``i`` are the SVG group
    ``<salt>-interval-<i>``, their caps ``<salt>-interval-<i>-caps``). ``estimates``: the
    rows of the value's estimate, a hollow diamond beside each dot (SVG group
    ``<salt>-estimate-<i>``)."""
    height = 0.22 * len(segments) + 1.0
    intervals = "ci_low" in rows.columns and "ci_high" in rows.columns
    if intervals:
        height += 0.1 * len(segments) * (len(models) > 1)
    figure = require_matplotlib()(figsize=(7.5, height), layout="constrained")
    ax = figure.subplots()
    palette = colors(models)
    index = {s: len(segments) - 1 - i for i, s in enumerate(segments)}
    for i, model in enumerate(models):
        part = rows.filter(pl.col(MODEL) == model)
        shift = _dodge(i, len(models)) if intervals else 0.0
        ys = [index[s] + shift for s in part[SEGMENT].to_list()]
        judged = part["judged"].to_list()
        face = [palette[model] if j else "#ffffff" for j in judged]
        if intervals:
            bars = [(y, lo, hi) for y, lo, hi in zip(
                ys, part["ci_low"].to_list(), part["ci_high"].to_list(), strict=True)
                if lo is not None and hi is not None
                and not (math.isnan(lo) or math.isnan(hi))]
            if bars:
                y, lo, hi = (list(c) for c in zip(*bars, strict=True))
                lines = ax.hlines(y, lo, hi, color=palette[model], linewidth=1.1, alpha=0.75,
                                  zorder=1)
                caps = ax.plot(lo + hi, y + y, linestyle="none", marker="|", markersize=4,
                               markeredgewidth=1.0, color=palette[model], alpha=0.75,
                               zorder=1)
                lines.set_gid(f"{salt}-interval-{i}")
                caps[0].set_gid(f"{salt}-interval-{i}-caps")
        ax.scatter(part["value"].to_list(), ys, s=28, color=face, edgecolors=palette[model],
                   label=model, zorder=3)
        if estimates is not None:
            guess = estimates.filter(pl.col(MODEL) == model)
            marks = ax.scatter(guess["value"].to_list(),
                               [index[s] + shift for s in guess[SEGMENT].to_list()], s=30,
                               marker="D", facecolors="none", edgecolors=palette[model],
                               linewidths=1.0, zorder=3)
            marks.set_gid(f"{salt}-estimate-{i}")
        if part["baseline"].null_count() < part.height:
            ax.scatter(part["baseline"].to_list(), ys, s=60, facecolors="none",
                       edgecolors="#777777", linewidths=0.8, zorder=2,
                       label="baseline" if model == models[-1] else None)
    ax.set_yticks(range(len(segments)), [_short(s) for s in reversed(segments)], fontsize=7)
    ax.set_ylim(-0.7, len(segments) - 0.3)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=7)
    if estimates is not None:  # one entry, in no model's colour
        ax.scatter([], [], s=30, marker="D", facecolors="none", edgecolors="#555555",
                   label="estimated")
    ax.set_xlabel(metric + (" (bars: intervals)" if intervals else ""), fontsize=8)
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0),
              ncol=len(ax.get_legend_handles_labels()[0]), frameon=False)
    return render(figure, salt)


def trend_grid(rows: pl.DataFrame, columns: Sequence[str], granularities: Sequence[str],
               models: Sequence[str], salt: str,
               estimates: Mapping[str, str] | None = None) -> str:
    """A panel per wide column (a metric at its average) and granularity: a line per model
    over the windows (x: each window's start), its interval as a band where ``rows`` have
    ``ci_low`` and ``ci_high``, the baseline (``baseline``) as a dotted line, a window that
    alerted (``alerted``) ringed in red, and a window too small to judge (``judged`` false)
    hollow. ``estimates``: a column -> the column of its estimate, drawn in its panel as a
    dashed line of the model's colour with its interval as a hatched band (the estimate's
    lines of model ``i`` are the SVG group ``<salt>-estimate-<i>``)."""
    from matplotlib.lines import Line2D

    estimates = estimates or {}
    figure = require_matplotlib()(figsize=(3.6 * len(granularities) + 0.4,
                                           2.2 * len(columns) + 0.6), layout="constrained")
    axes = figure.subplots(len(columns), len(granularities), squeeze=False)
    palette = colors(models)
    bands = "ci_low" in rows.columns and "ci_high" in rows.columns
    for r, column in enumerate(columns):
        for c, grain in enumerate(granularities):
            ax = axes[r][c]
            # a window without a value breaks the line (a day whose truth is all unknown)
            starts = rows.filter(pl.col("granularity") == grain).select(
                "window_start").unique().sort("window_start")
            for i, model in enumerate(models):
                for drawn, estimate in ((column, False), (estimates.get(column), True)):
                    if drawn is None:
                        continue
                    part = rows.filter(pl.col("column") == drawn, pl.col("granularity") == grain,
                                       pl.col(MODEL) == model)
                    if not part.is_empty():
                        _trend_line(ax, starts.join(part, on="window_start", how="left"),
                                    palette[model], model, bands, estimate,
                                    f"{salt}-estimate-{i}")
            ax.set_title(f"{column}, {grain}" if column not in estimates else
                         f"{column} (dashed: {estimates[column]}), {grain}", fontsize=8)
            _window_ticks(ax, starts["window_start"])
            ax.tick_params(labelsize=6.5)
            ax.grid(alpha=0.3)
            for label in ax.get_xticklabels():
                label.set_rotation(30)
                label.set_horizontalalignment("right")
    handles, labels = axes[0][0].get_legend_handles_labels()
    if not estimates:
        axes[0][0].legend(fontsize=7, frameon=False)
        return render(figure, salt)
    # the models' colours and the two line styles, above the panels (not over a line)
    handles += [Line2D([], [], color="#555555", linewidth=1.2, marker="o", markersize=3.5),
                Line2D([], [], color="#555555", linewidth=1.2, linestyle="--", marker="D",
                       markersize=3, markerfacecolor="#555555")]
    labels += ["realised", "estimated"]
    figure.legend(handles, labels, loc="outside upper center", ncol=len(labels), fontsize=7,
                  frameon=False)
    return render(figure, salt)


def _window_ticks(ax: Any, starts: pl.Series) -> None:
    """A tick at each of a few days' windows, named by its date (matplotlib's own ticks
    fall at hours between them)."""
    days = starts.unique().sort().drop_nulls()
    if starts.dtype == pl.Date and 0 < days.len() <= 12:
        ax.set_xticks(days.to_list(), [str(d) for d in days.to_list()])


def _trend_line(ax: Any, part: pl.DataFrame, color: str, model: str, bands: bool,
                estimate: bool, gid: str) -> None:
    """One model's line of a trend panel, a row per window (null where it has no value;
    ``estimate``: dashed, its band hatched)."""
    def values(column: str) -> list[float]:
        return [math.nan if v is None else v for v in part[column].to_list()]

    x, y = part["window_start"].to_list(), values("value")
    line = ax.plot(x, y, color=color, linewidth=1.2, zorder=2,
                   linestyle="--" if estimate else "-", label=None if estimate else model)
    judged = part["judged"].fill_null(False).to_list()
    dots = ax.scatter(x, y, s=16, zorder=3, edgecolors=color,
                      marker="D" if estimate else "o",
                      color=[color if j else "#ffffff" for j in judged])
    if bands and part["ci_low"].null_count() < part.height:
        low, high = values("ci_low"), values("ci_high")
        if estimate:  # hatched, so that it reads apart from the realised band it overlaps
            band = ax.fill_between(x, low, high, facecolor="none", edgecolor=color,
                                   hatch="///", alpha=0.3, linewidth=0, zorder=1)
            if hasattr(band, "set_hatch_linewidth"):  # matplotlib >= 3.10
                band.set_hatch_linewidth(0.6)
            band.set_gid(gid + "-band")
        else:
            ax.fill_between(x, low, high, color=color, alpha=0.15, linewidth=0, zorder=1)
    if estimate:
        line[0].set_gid(gid)
        dots.set_gid(gid + "-dots")
    elif part["baseline"].null_count() < part.height:
        ax.plot(x, values("baseline"), color=color, linewidth=0.9, linestyle=":",
                zorder=2)
    fired = part.filter(pl.col("alerted").fill_null(False))
    if fired.height:
        ax.scatter(fired["window_start"].to_list(), fired["value"].to_list(), s=70,
                   facecolors="none", edgecolors="#c62828", linewidths=1.2, zorder=4)


def slice_dots(rows: Sequence[Mapping[str, Any]], metric: str, salt: str) -> str:
    """The weakest slices of each model, a line each (a model's slices together, worst first):
    the slice's value (a dot in the model's colour) joined to the rest of the data's (grey),
    on an axis that fits the values (a gap of 0.83 against 0.91 shows)."""
    models = list(dict.fromkeys(str(r[MODEL]) for r in rows))
    palette = colors(models)
    n = len(rows)
    figure = require_matplotlib()(figsize=(7.5, 0.26 * n + 1.1), layout="constrained")
    ax = figure.subplots()
    ys = [n - 1 - i for i in range(n)]
    value = [math.nan if r["value"] is None else r["value"] for r in rows]
    rest = [math.nan if r.get("rest_value") is None else r["rest_value"] for r in rows]
    ax.hlines(ys, value, rest, color="#c4c9d2", linewidth=2, zorder=1)
    ax.scatter(rest, ys, s=22, color="#8a93a3", zorder=2, label="rest of the data")
    ax.scatter(value, ys, s=30, color=[palette[str(r[MODEL])] for r in rows], zorder=3,
               label="slice")
    ax.set_yticks(ys, [_short(f"{r[MODEL]}: {r['slice']}", 48) for r in rows], fontsize=7)
    ax.set_ylim(-0.7, n - 0.3)
    ax.margins(x=0.08)
    ax.grid(axis="x", alpha=0.3)
    ax.tick_params(axis="x", labelsize=7)
    ax.set_xlabel(metric, fontsize=8)
    ax.legend(fontsize=7, loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    return render(figure, salt)


def _dodge(i: int, n: int, span: float = 0.5) -> float:
    """The vertical offset of model ``i`` of ``n`` on its segment's line (the first on top)."""
    return 0.0 if n < 2 else span / 2 - i * span / (n - 1)


def confusion_heatmaps(matrices: dict[str, pl.DataFrame], labels: Sequence[str],
                       salt: str) -> str:
    """A heat map per model: rows the true label, columns the predicted one, each row as shares
    of its weight, with the weights written in the cells."""
    import numpy as np

    n = len(labels)
    side = max(2.8, 0.45 * n + 1.2)
    figure = require_matplotlib()(figsize=(side * len(matrices), side), layout="constrained")
    axes = figure.subplots(1, len(matrices), squeeze=False)[0]
    where = {label: i for i, label in enumerate(labels)}
    for ax, (model, frame) in zip(axes, matrices.items(), strict=True):
        counts = np.zeros((n, n))
        for truth, predicted, value in frame.select("label", "predicted", "value").iter_rows():
            counts[where[str(truth)], where[str(predicted)]] = value or 0.0
        totals = counts.sum(axis=1, keepdims=True)
        shares = np.divide(counts, totals, out=np.zeros_like(counts), where=totals > 0)
        ax.imshow(shares, cmap="Blues", vmin=0, vmax=1)
        for i in range(n):
            for j in range(n):
                ax.text(j, i, _count(counts[i, j]), ha="center", va="center", fontsize=7,
                        color="white" if shares[i, j] > 0.6 else "black")
        ax.set_xticks(range(n), list(labels), fontsize=7, rotation=45 if n > 6 else 0)
        ax.set_yticks(range(n), list(labels), fontsize=7)
        ax.set_xlabel("predicted", fontsize=8)
        ax.set_ylabel("true", fontsize=8)
        ax.set_title(f"model {model}", fontsize=9)
    return render(figure, salt)


def drift_heatmap(rows: Sequence[str], columns: Sequence[str],
                  values: Mapping[tuple[str, str], float | None], statistic: str,
                  salt: str) -> str:
    """A heat map of one drift statistic: a row per compared column (and label), a column per
    model and segment, the value written in each cell (an empty cell: undefined)."""
    import numpy as np

    grid = np.full((len(rows), len(columns)), np.nan)
    for (row, column), value in values.items():
        if value is not None:
            grid[rows.index(row), columns.index(column)] = value
    names = [_short(c, 18) for c in columns]
    longest = max(len(line) for n in names for line in n.split("\n"))
    # upright, a name wider than its column (about 16 characters) runs into the next one's
    slanted = len(columns) > 4 or longest > 16
    width = max(3.2, 0.55 * len(columns) + 2.2)
    height = max(1.6, 0.3 * len(rows) + 1.2) + (0.04 * longest if slanted else 0.0)
    figure = require_matplotlib()(figsize=(width, height), layout="constrained")
    ax = figure.subplots()
    top = np.nanmax(grid) if np.isfinite(grid).any() else 1.0
    ax.imshow(np.ma.masked_invalid(grid), cmap="Oranges", vmin=0, vmax=top or 1.0,
              aspect="auto")
    for i in range(len(rows)):
        for j in range(len(columns)):
            if np.isfinite(grid[i, j]):
                ax.text(j, i, f"{grid[i, j]:.3g}", ha="center", va="center", fontsize=6,
                        color="white" if grid[i, j] > 0.6 * top else "black")
    ax.set_xticks(range(len(columns)), names, fontsize=7, rotation=45 if slanted else 0,
                  ha="right" if slanted else "center", rotation_mode="anchor" if slanted
                  else "default")
    ax.set_yticks(range(len(rows)), list(rows), fontsize=7)
    ax.set_title(statistic, fontsize=9)
    return render(figure, salt)


#: The most bars of a histogram of scores (fewer for fewer rows: about the root of them).
SCORE_BARS = 40


def drift_scores(bins: pl.DataFrame, title: str, rows: tuple[int, int], salt: str) -> str:
    """One segment's scores against the reference's (``bins``: each side's weight per bin, as
    ``score_bins`` gives it; ``rows``: the reference's and the current rows): each side's
    share in bars of a few of those bins (at most about :data:`SCORE_BARS`, about the root of
    the fewer rows: noise does not draw as drift), and the two ECDFs at the bins' edges."""
    import textwrap

    import numpy as np

    count = int(bins["bin"].max()) + 1
    low = float(bins.filter(pl.col("bin") == 0)["low"][0])
    width = float((bins["high"] - bins["low"]).max())
    weights = np.zeros((2, count))
    for current, at, weight in bins.select("current", "bin", "weight").iter_rows():
        weights[int(current), at] += weight
    shares = weights / np.where(weights.sum(axis=1, keepdims=True) > 0,
                                weights.sum(axis=1, keepdims=True), 1.0)
    step = max(1, count // min(SCORE_BARS, max(10, math.isqrt(max(min(rows), 1)))))
    starts = np.arange(0, count, step)
    bars = np.add.reduceat(shares, starts, axis=1)
    bar_edges = low + np.append(starts, count) * width
    edges = low + np.arange(count + 1) * width
    cumulative = np.hstack([np.zeros((2, 1)), np.cumsum(shares, axis=1)])
    figure = require_matplotlib()(figsize=(7.5, 3.0), layout="constrained")
    hist, ecdf = figure.subplots(1, 2)
    sides = ((0, f"reference ({rows[0]:,} rows)", "#8a93a3"),
             (1, f"current ({rows[1]:,} rows)", COLORS[1]))
    for side, name, color in sides:
        hist.stairs(bars[side], bar_edges, color=color, linewidth=1.3, label=name,
                    fill=side == 0, alpha=0.45 if side == 0 else 1.0)
        ecdf.plot(edges, cumulative[side], color=color, linewidth=1.3, label=name)
    hist.set_ylabel("share of weight", fontsize=7.5)
    ecdf.set_ylabel("cumulative share", fontsize=7.5)
    ecdf.set_ylim(-0.02, 1.02)
    for ax in (hist, ecdf):
        ax.set_xlabel("score", fontsize=7.5)
        ax.tick_params(labelsize=7, length=2, pad=1.5)
        ax.grid(alpha=0.25)
    ecdf.legend(fontsize=6.5, loc="lower right", frameon=False, handlelength=1.2)
    figure.suptitle(textwrap.fill(title, 100), fontsize=8.5)
    return render(figure, salt)


def _count(value: float) -> str:
    return f"{value:.0f}" if math.isclose(value, round(value)) else f"{value:.1f}"


def _short(segment: str, width: int = 28) -> str:
    """A segment name in lines of about ``width`` characters, broken after its commas."""
    lines = []
    for line in segment.split("\n"):
        head, sep, tail = line.partition(", ")
        lines.extend([f"{head},", tail] if sep and len(line) > width else [line])
    return "\n".join(lines)
