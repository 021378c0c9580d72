"""Plots for reading: ROC and PR legends carry each curve's AUC / AP (equal to the metrics), a
binary table's legend has no label noise, many segments become small multiples; on both engines
and through ``mleval curve --plot``."""

from __future__ import annotations

import re

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import plot
from mleval_sql.cli import main
from tests.data import make_predictions

AREA = {"roc": ("AUC", "roc_auc"), "pr": ("AP", "average_precision")}


def _legend(ax) -> list[str]:
    return [t.get_text() for t in ax.get_legend().get_texts()]


@pytest.mark.parametrize("kind", ["roc", "pr"])
def test_legends_carry_the_area_of_each_curve(engine, kind):
    frame = make_predictions("multilabel", seed=7, complete=True)
    curves = me.curve(frame, kind, by="model", engine=engine, task="multilabel")
    name, metric = AREA[kind]
    ax = me.plot.figure(curves, kind, by=["model"]).axes[0]
    values = me.evaluate(frame, [metric], by="model", engine=engine, task="multilabel",
                         average="none")
    texts = _legend(ax)
    assert len(texts) == values.height
    for row in values.iter_rows(named=True):
        text = next(t for t in texts if t.startswith(f"model={row['model']}, label="
                                                     f"{row['label']} "))
        shown = float(re.search(rf"\({name} = ([0-9.]+)\)", text).group(1))
        assert shown == pytest.approx(row["value"], abs=5e-4)


def test_binary_legends_have_no_label(engine):
    log = make_predictions("binary", seed=1).drop("label")
    ax = plot.figure(me.curve(log, "roc", engine=engine), "roc").axes[0]
    auc = me.evaluate(log, ["roc_auc"], engine=engine)["value"].item()
    assert _legend(ax) == [f"AUC = {auc:.3f}"]
    by_region = plot.figure(me.curve(log, "pr", by="region", engine=engine), "pr",
                            by=["region"]).axes[0]
    assert all(t.startswith("region=") and "label" not in t for t in _legend(by_region))


def test_many_segments_are_small_multiples(engine):
    rng = np.random.default_rng(0)
    n = 600
    log = pl.DataFrame({"sample": range(n), "score": rng.random(n).round(2),
                        "truth": rng.random(n) < 0.4, "shop": rng.integers(0, 7, n)})
    fig = plot.figure(me.curve(log, "roc", by="shop", engine=engine), "roc", by=["shop"])
    shown = [ax for ax in fig.axes if ax.get_visible()]
    assert len(shown) == 7
    assert sorted(ax.get_title() for ax in shown) == [f"shop={s}" for s in range(7)]
    assert all(len(_legend(ax)) == 1 and _legend(ax)[0].startswith("AUC = ") for ax in shown)
    assert fig._suptitle.get_text() == "ROC curve"


def test_plot_without_a_table_output_prints_a_summary(tmp_path, capsys):
    from matplotlib.image import imread

    path = tmp_path / "log.parquet"
    make_predictions("binary", seed=1).drop("label").write_parquet(path)
    target = tmp_path / "roc.png"
    assert main(["curve", str(path), "--by", "region", "--plot", str(target)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"wrote {target}: 4 curve(s), ") and out.count("\n") == 1
    assert imread(target).shape[2] in (3, 4)
