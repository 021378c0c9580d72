"""``evaluate(..., wide=True)`` / ``--wide``: the tidy rows as one row per segment and label, one
column per metric and average, every value where the tidy form has it."""

from __future__ import annotations

import io

import polars as pl
import polars.selectors as cs
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from tests.data import make_predictions

REQUESTS = [
    pytest.param("multilabel", ["f1", "roc_auc", "max_f1", "subset_accuracy"],
                 {"average": ["none", "macro"]}, id="multilabel"),
    pytest.param("multiclass", ["accuracy", "f1", "confusion_matrix", "top_k_accuracy"],
                 {"average": ["macro", "weighted"]}, id="multiclass"),
    pytest.param("multilabel", ["precision", "recall"],
                 {"average": ["none", "micro"], "thresholds": [0.3, 0.5]}, id="sweep"),
]


@pytest.mark.parametrize(("task", "metrics", "options"), REQUESTS)
def test_every_tidy_value_is_in_its_cell(engine, task, metrics, options):
    frame = make_predictions(task, seed=4)
    common = {"by": "region", "task": task, "engine": engine, **options}
    tidy = me.evaluate(frame, metrics, **common)
    wide = me.evaluate(frame, metrics, wide=True, **common)
    keys = ["region", "label", *(["threshold"] if "thresholds" in options else []),
            *(["predicted"] if "predicted" in tidy.columns else [])]
    assert wide.select(keys).is_unique().all()  # one row per segment, label (...)
    for row in tidy.iter_rows(named=True):
        column = row["metric"] if row["average"] is None else f"{row['metric']}_{row['average']}"
        cell = wide.filter(pl.all_horizontal(pl.col(k).eq_missing(row[k]) for k in keys))
        assert cell.height == 1, row
        value = cell[column].item()
        assert value == (row["value"] if row["value"] is None
                         else pytest.approx(row["value"], rel=1e-12)), row
        if row["metric"] == "max_f1" and row["average"] is None:
            assert cell[f"{column}_threshold"].item() == row["operating_threshold"]
    n_columns = tidy.select("metric", "average").unique().height
    assert len(wide.columns) >= len(keys) + n_columns


def test_whole_segment_metrics_drop_the_empty_label(engine):
    frame = make_predictions("multilabel", seed=4)
    wide = me.evaluate(frame, ["f1", "subset_accuracy"], by="region", average="macro",
                       engine=engine, wide=True)
    assert wide.columns == ["region", "f1_macro", "subset_accuracy"]
    assert wide.height == frame["region"].n_unique()


def test_command_line(tmp_path, capsys):
    path = tmp_path / "ml.parquet"
    frame = make_predictions("multilabel", seed=4)
    frame.write_parquet(path)
    assert main(["evaluate", str(path), "--metric", "f1,precision", "--by", "region",
                 "--average", "macro", "--wide", "--format", "csv"]) == 0
    got = pl.read_csv(io.StringIO(capsys.readouterr().out))
    want = me.evaluate(frame, ["f1", "precision"], by="region", average="macro", wide=True)
    assert got.columns == ["region", "f1_macro", "precision_macro"]
    assert got.drop(cs.float()).equals(want.drop(cs.float()))
    for column in ("f1_macro", "precision_macro"):
        assert got[column].to_list() == pytest.approx(want[column].to_list(), rel=1e-12)
