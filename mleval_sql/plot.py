"""Draw the tables of ``mleval_sql.curve`` with matplotlib (optional: ``mleval_sql[plot]``).

One line per (segment, label), a legend, axis labels and a title: ROC curves (false positive rate
against true positive rate, with the chance diagonal), precision-recall curves (as the steps that
average precision sums), threshold sweeps (true and false positive rates against the threshold)
and reliability diagrams (mean score against observed rate, with the diagonal of perfect
calibration). Drawing uses the non-interactive Agg canvas and never touches pyplot's state.

>>> import mleval_sql as me
>>> table = me.curve("fixtures/lake", "roc", by="model")  # doctest: +SKIP
>>> plot_curve(table, "roc", "roc.png", by=["model"])  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
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


STYLES: dict[str, Style] = {
    "roc": Style("fpr", ("tpr",), "False positive rate", "True positive rate", "ROC curve",
                 diagonal=True),
    # recall rises along the table (threshold descending): "steps-pre" holds each point's
    # precision over the recall it adds, the steps average precision sums
    "pr": Style("recall", ("precision",), "Recall", "Precision", "Precision-recall curve",
                drawstyle="steps-pre", legend="lower left"),
    "sweep": Style("threshold", ("tpr", "fpr"), "Threshold", "Rate", "Threshold sweep",
                   unit_square=False, legend="best"),
    "reliability": Style("mean_score", ("observed_rate",), "Mean score", "Observed rate",
                         "Reliability diagram", diagonal=True, marker="o",
                         legend="upper left"),
}
LINESTYLES = ("-", "--", ":", "-.")


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

    >>> check_target("curves.png")  # doctest: +SKIP
    >>> check_target("curves.xlsx")  # doctest: +SKIP
    Traceback (most recent call last):
    PlotError: cannot plot to 'curves.xlsx': ...
    """
    _, canvas = _matplotlib()
    supported = canvas.get_supported_filetypes()
    if Path(path).suffix.lower().lstrip(".") not in supported:
        kinds = ", ".join(f".{k}" for k in sorted(supported))
        raise PlotError(f"cannot plot to {os.fspath(path)!r}: name a file ending in one of "
                        f"{kinds}")


def figure(table: pl.DataFrame, kind: str, *, by: Sequence[str] = (),
           title: str | None = None) -> Figure:
    """The curves of ``table`` (a ``mleval_sql.curve`` result of ``kind``) as a Figure.

    >>> fig = figure(me.curve(data, "pr"), "pr")  # doctest: +SKIP
    >>> fig.axes[0].get_xlabel()  # doctest: +SKIP
    'Recall'
    """
    if kind not in STYLES:
        raise PlotError(f"unknown curve kind {kind!r}; kinds are {list(STYLES)}")
    figure_class, canvas = _matplotlib()
    style = STYLES[kind]
    fig = figure_class(figsize=(6.4, 5.2), layout="constrained")
    canvas(fig)
    ax = fig.add_subplot()
    if style.diagonal:
        ax.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=1, label="_diagonal")
    keys = [*by, "label"]
    for i, (key, group) in enumerate(table.partition_by(keys, maintain_order=True,
                                                        as_dict=True).items()):
        _draw(ax, style, group, _name(keys, key), color=f"C{i % 10}")
    _decorate(ax, style, title)
    return fig


def _draw(ax: Axes, style: Style, group: pl.DataFrame, name: str, *, color: str) -> None:
    x = group[style.x].cast(pl.Float64).to_numpy()
    for ys, linestyle in zip(style.ys, LINESTYLES, strict=False):
        label = name if len(style.ys) == 1 else f"{name}: {ys}"
        ax.plot(x, group[ys].cast(pl.Float64).to_numpy(), color=color, linestyle=linestyle,
                drawstyle=style.drawstyle, marker=style.marker, label=label)


def _name(keys: list[str], values: tuple[Any, ...]) -> str:
    return ", ".join(f"{k}={v}" for k, v in zip(keys, values, strict=True))


def _decorate(ax: Axes, style: Style, title: str | None) -> None:
    ax.set_xlabel(style.xlabel)
    ax.set_ylabel(style.ylabel)
    ax.set_title(title or style.title)
    if style.unit_square:
        ax.set_xlim(-0.02, 1.02)
    ax.set_ylim(-0.02, 1.02)
    ax.grid(alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(loc=style.legend, fontsize="small")


def plot_curve(table: pl.DataFrame, kind: str, path: str | os.PathLike[str], *,
               by: Sequence[str] = (), title: str | None = None) -> None:
    """Draw the curves of ``table`` (see :func:`figure`) into the image file ``path``.

    >>> table = me.curve(data, "roc", by="model")  # doctest: +SKIP
    >>> plot_curve(table, "roc", "roc.png", by=["model"])  # doctest: +SKIP
    """
    check_target(path)
    with atomic_output(path) as part:  # whole or not at all
        figure(table, kind, by=by, title=title).savefig(
            part, dpi=120, format=Path(path).suffix.lower().lstrip("."))
