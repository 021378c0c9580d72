"""Draw the tables of ``mleval_sql.curve`` with matplotlib (optional: ``mleval_sql[plot]``).

One line per (segment, label), a legend, axis labels and a title: ROC curves (false positive rate
against true positive rate, with the chance diagonal), precision-recall curves (as the steps that
average precision sums), threshold sweeps (true and false positive rates against the threshold)
and reliability diagrams (mean score against observed rate, with the diagonal of perfect
calibration). Drawing uses the non-interactive Agg canvas and never touches pyplot's state.

>>> import tempfile
>>> import mleval_sql as me
>>> table = me.curve("fixtures/lake", "roc", by="model")
>>> folder = Path(tempfile.mkdtemp())
>>> plot_curve(table, "roc", folder / "roc.png", by=["model"])
>>> (folder / "roc.png").read_bytes()[:4]
b'\x89PNG'
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist
from typing import TYPE_CHECKING, Any

import polars as pl

from mleval_sql.outputs import atomic_output

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure

INSTALL_HINT = "pip install 'mleval_sql[plot]'"


class PlotError(Exception):
    """A plot cannot be drawn: matplotlib is missing or the file type is unknown."""


@dataclass(frozen=True)
class Style:
    """How one kind of curve is drawn: the x column against one line per y column."""

    x: str
    ys: tuple[str, ...]
    xlabel: str
    ylabel: str
    title: str
    diagonal: bool = False
    unit_square: bool = True
    drawstyle: str = "default"
    marker: str | None = None
    legend: str = "lower right"
    #: both axes on the normal deviate scale (probit), as scikit-learn's DetCurveDisplay
    deviates: bool = False
    rates: bool = True  # the y values lie in [0, 1] (a thresholds table may hold counts)


STYLES: dict[str, Style] = {
    "roc": Style("fpr", ("tpr",), "False positive rate", "True positive rate", "ROC curve",
                 diagonal=True),
    # recall rises along the table (threshold descending): "steps-pre" holds each point's
    # precision over the recall it adds, the steps average precision sums
    "pr": Style("recall", ("precision",), "Recall", "Precision", "Precision-recall curve",
                drawstyle="steps-pre", legend="lower left"),
    "sweep": Style("threshold", ("tpr", "fpr"), "Threshold", "Rate", "Threshold sweep",
                   unit_square=False, legend="best"),
    "det": Style("fpr", ("fnr",), "False positive rate", "False negative rate",
                 "DET curve", unit_square=False, legend="upper right", deviates=True),
    # every metric the table holds is a line (the columns after tp: :func:`_metric_columns`)
    "thresholds": Style("threshold", (), "Threshold", "Value", "Metrics at every threshold",
                        unit_square=False, legend="best", rates=False),
    "reliability": Style("mean_score", ("observed_rate",), "Mean score", "Observed rate",
                         "Reliability diagram", diagonal=True, marker="o",
                         legend="upper left"),
}
LINESTYLES = ("-", "--", ":", "-.")
#: The columns of a curve table (``mleval_sql.curve``) besides its segment columns.
CURVE_COLUMNS = ("label", "threshold", "tp", "fp", "fn", "tn", "tpr", "fpr", "fnr", "precision",
                 "recall", "bin", "lower", "upper", "mean_score", "observed_rate", "weight")


def _matplotlib() -> tuple[Any, Any]:
    """The Figure and Agg canvas classes, or a PlotError naming the extra to install."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError as error:
        raise PlotError(f"plotting needs matplotlib, which is not installed: "
                        f"{INSTALL_HINT}") from error
    return Figure, FigureCanvasAgg


def check_target(path: str | os.PathLike[str]) -> None:
    """Fail early unless matplotlib is installed and can write files like ``path``.

    >>> check_target("curves.png")
    >>> check_target("curves.xlsx")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    mleval_sql.plot.PlotError: cannot plot to 'curves.xlsx': ...
    """
    _, canvas = _matplotlib()
    supported = canvas.get_supported_filetypes()
    if Path(path).suffix.lower().lstrip(".") not in supported:
        kinds = ", ".join(f".{k}" for k in sorted(supported))
        raise PlotError(f"cannot plot to {os.fspath(path)!r}: name a file ending in one of "
                        f"{kinds}")


#: more segments than this, or more lines than MAX_LINES, are drawn as small multiples, one
#: panel per segment
SMALL_MULTIPLES = 4
MAX_LINES = 8
#: at most this many panels (a larger figure reads no better: filter the table first)
MAX_PANELS = 64


def segment_columns(table: pl.DataFrame, by: Sequence[str] = (),
                    kind: str | None = None) -> list[str]:
    """The segment columns of a curve table: ``by``, then every other column that is not a
    curve's own (a ``thresholds`` table's metrics are its own), so that no two segments are
    ever drawn as one line.

    >>> segment_columns(pl.DataFrame({"model": ["a"], "label": ["x"], "tpr": [1.0]}))
    ['model']
    """
    missing = [c for c in by if c not in table.columns]
    if missing:
        raise PlotError(f"segment column {missing[0]!r} is not in the curve table; it has "
                        f"{table.columns}")
    own = set(CURVE_COLUMNS) | (set(_metric_columns(table, by)) if kind == "thresholds"
                                else set())
    return [*by, *(c for c in table.columns if c not in own and c not in by)]


def _metric_columns(table: pl.DataFrame, by: Sequence[str] = ()) -> list[str]:
    """The metrics of a ``thresholds`` table: its columns after tn, fp, fn, tp."""
    return [c for c in table.columns[table.columns.index("tp") + 1:] if c not in by]


def figure(table: pl.DataFrame, kind: str, *, by: Sequence[str] = (),
           title: str | None = None, areas: bool = True) -> Figure:
    """The curves of ``table`` (a ``mleval_sql.curve`` result of ``kind``) as a Figure.

    One line per (segment, label): the segments are ``by`` and every other column of the table
    that a curve does not have (:func:`segment_columns`); the label is left out of the legend
    when the table has one (binary). With ``areas``, each ROC line's legend gives its AUC and
    each PR line its average precision, computed from the table's points (the trapezoids of
    ROC, scikit-learn's step-wise sum of PR: equal to ``roc_auc`` and ``average_precision``
    when the PR table keeps every point, as ``curve`` does by default). More than
    ``SMALL_MULTIPLES`` segments, or more than ``MAX_LINES`` lines, are drawn as small
    multiples: one panel per segment, sharing axes.

    >>> import mleval_sql as me
    >>> fig = figure(me.curve("fixtures/lake", "pr", by="model"), "pr", by=["model"])
    >>> fig.axes[0].get_xlabel()
    'Recall'
    """
    if kind not in STYLES:
        raise PlotError(f"unknown curve kind {kind!r}; kinds are {list(STYLES)}")
    figure_class, canvas = _matplotlib()
    style = STYLES[kind]
    if kind == "thresholds":  # a line per metric asked (none asked: the counts)
        style = replace(style, ys=tuple(_metric_columns(table, by)) or ("tn", "fp", "fn", "tp"))
    by = segment_columns(table, by, kind)
    labels = ["label"] if table["label"].n_unique() > 1 else []
    segments = table.select(by).n_unique() if by else 1
    many = segments > SMALL_MULTIPLES or segments * table["label"].n_unique() > MAX_LINES
    panels = (table.partition_by(by, maintain_order=True, as_dict=True) if by and many
              else {(): table})
    if len(panels) > MAX_PANELS:
        raise PlotError(f"{len(panels)} segments are too many to plot (at most {MAX_PANELS}); "
                        "plot fewer segments or a coarser --by")
    columns = math.ceil(math.sqrt(len(panels)))
    rows = math.ceil(len(panels) / columns)
    size = (6.4, 5.2) if len(panels) == 1 else (3.2 * columns + 0.8, 2.8 * rows + 0.8)
    fig = figure_class(figsize=size, layout="constrained")
    canvas(fig)
    axes = fig.subplots(rows, columns, sharex=True, sharey=True, squeeze=False).ravel()
    for ax, (segment, panel) in zip(axes, panels.items(), strict=False):
        if style.diagonal:
            ax.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=1,
                    label="_diagonal")
        keys = [*(by if not segment else []), *labels]
        groups = (panel.partition_by(keys, maintain_order=True, as_dict=True) if keys
                  else {(): panel})
        for i, (key, group) in enumerate(groups.items()):
            name = _name(keys, key)
            area = _area(group, kind) if areas else None
            if area is not None:
                name = f"{name} ({area})" if name else area
            _draw(ax, style, group, name, color=f"C{i % 10}")
        panel_title = _name(by, segment) if segment else (title or style.title)
        _decorate(ax, style, panel_title, axis_labels=len(panels) == 1)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    if len(panels) > 1:
        fig.suptitle(title or style.title)
        fig.supxlabel(style.xlabel)
        fig.supylabel(style.ylabel)
    return fig


def _area(group: pl.DataFrame, kind: str) -> str | None:
    """``AUC = 0.812`` or ``AP = 0.734`` of one curve's points (threshold descending); None
    where undefined (no positives, or no negatives for ROC) or for other kinds."""
    if kind == "roc":
        x, y = group["fpr"], group["tpr"]
        if x.null_count() or y.null_count():
            return None
        trapezoids = x.diff() * (y + y.shift(1)) / 2
        return f"AUC = {float(trapezoids.sum()):.3f}"
    if kind == "pr":
        recall, precision = group["recall"], group["precision"]
        if recall.null_count() or recall.is_empty():
            return None
        steps = recall.diff().fill_null(recall[0]) * precision.fill_null(0.0)
        return f"AP = {float(steps.sum()):.3f}"
    return None


#: The rates a DET plot shows, and its ticks (scikit-learn's DetCurveDisplay's).
DEVIATE_RANGE = (0.0005, 0.9995)
DEVIATE_TICKS = (0.001, 0.01, 0.05, 0.2, 0.5, 0.8, 0.95, 0.99, 0.999)


def _deviate(rates: Any) -> Any:
    """Rates as normal deviates (the inverse of the standard normal CDF), clipped to
    :data:`DEVIATE_RANGE` so that 0 and 1 stay on the plot; NaN (undefined) stays NaN."""
    import numpy as np

    inverse = NormalDist().inv_cdf
    clipped = np.clip(rates, *DEVIATE_RANGE)
    return np.array([math.nan if math.isnan(r) else inverse(r) for r in clipped])


def _draw(ax: Axes, style: Style, group: pl.DataFrame, name: str, *, color: str) -> None:
    x = group[style.x].cast(pl.Float64).fill_null(math.nan).to_numpy()
    if style.deviates:
        x = _deviate(x)
    for ys, linestyle in zip(style.ys, LINESTYLES, strict=False):
        label = name if len(style.ys) == 1 else (f"{name}: {ys}" if name else ys)
        y = group[ys].cast(pl.Float64).fill_null(math.nan).to_numpy()
        ax.plot(x, _deviate(y) if style.deviates else y, color=color, linestyle=linestyle,
                drawstyle=style.drawstyle, marker=style.marker, label=label or "_nolegend_")


def _name(keys: list[str], values: tuple[Any, ...]) -> str:
    if keys == ["label"]:
        return str(values[0])
    return ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))


def _decorate(ax: Axes, style: Style, title: str | None, *, axis_labels: bool = True) -> None:
    if axis_labels:
        ax.set_xlabel(style.xlabel)
        ax.set_ylabel(style.ylabel)
    ax.set_title(title or style.title, fontsize="medium" if axis_labels else "small")
    if style.deviates:  # ticks at rates, placed at their deviates
        ticks = _deviate(DEVIATE_TICKS)
        names = [f"{t:.0%}" if t >= 0.01 and t <= 0.99 else f"{t:.1%}" for t in DEVIATE_TICKS]
        limits = tuple(_deviate(DEVIATE_RANGE))
        for axis, set_limits in ((ax.xaxis, ax.set_xlim), (ax.yaxis, ax.set_ylim)):
            axis.set_ticks(ticks, names)
            set_limits(*limits)
    else:
        if style.unit_square:
            ax.set_xlim(-0.02, 1.02)
        if style.rates:
            ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc=style.legend, fontsize="small" if axis_labels else "x-small")


def plot_curve(table: pl.DataFrame, kind: str, path: str | os.PathLike[str], *,
               by: Sequence[str] = (), title: str | None = None, areas: bool = True) -> None:
    """Draw the curves of ``table`` (see :func:`figure`) into the image file ``path``.

    >>> import tempfile
    >>> import mleval_sql as me
    >>> table = me.curve("fixtures/lake", "roc", by="model")
    >>> path = Path(tempfile.mkdtemp()) / "roc.png"
    >>> plot_curve(table, "roc", path, by=["model"])
    >>> path.stat().st_size > 10_000
    True
    """
    check_target(path)
    with atomic_output(path) as part:  # whole or not at all
        figure(table, kind, by=by, title=title, areas=areas).savefig(
            part, dpi=120, format=Path(path).suffix.lower().lstrip("."))
