"""Ranking across labels, per sample: the sample_ranks statistics agree between engines, one-error
is 1 - adjusted accuracy, and hand-worked examples pin the tie and undefined conventions."""

from __future__ import annotations

import duckdb
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.engines import polars as plans
from tests.data import make_predictions
from tests.helpers import assert_frames_close

METRICS = ["coverage_error", "label_ranking_loss", "label_ranking_average_precision",
           "one_error", "precision_at_k", "recall_at_k"]


@pytest.mark.parametrize("task", ["multilabel", "multiclass"])
@pytest.mark.parametrize("k", [1, 2, 5])
def test_sample_ranks_agree_between_engines(task: str, k: int) -> None:
    frame = make_predictions(task, seed=21).select(
        "sample", "label", "score", "truth", "weight", segment=pl.struct("region", "model"))
    con = duckdb.connect()
    con.register("predictions", frame)
    from_sql = con.sql(queries.load("sample_ranks"), params={"k": k}).pl()
    from_polars = plans.sample_ranks(frame.lazy(), k=k).collect()
    keys = ["segment", "sample"]
    assert from_sql.height == frame["sample"].n_unique()
    assert_frames_close(from_sql.sort(keys), from_polars.select(from_sql.columns).sort(keys))


def _values(result: pl.DataFrame, by: list[str]) -> dict[tuple, float | None]:
    return {(*(row[c] for c in by), row["metric"]): row["value"]
            for row in result.iter_rows(named=True)}


@pytest.mark.parametrize(("task", "top1"), [("multilabel", "adjusted_accuracy"),
                                             ("multiclass", "accuracy")])
def test_one_error_is_one_minus_top_label_accuracy(engine: str, task: str, top1: str) -> None:
    frame = make_predictions(task, seed=22)
    got = _values(me.evaluate(frame, ["one_error", top1], by=["region"], task=task,
                              engine=engine), ["region"])
    regions = frame["region"].unique().to_list()
    assert len(regions) == 4
    for region in regions:
        one_error, accuracy = got[(region, "one_error")], got[(region, top1)]
        assert one_error is not None and accuracy is not None
        assert one_error == pytest.approx(1 - accuracy, rel=1e-12, abs=1e-12)


def _frame(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, orient="row",
                        schema=["part", "sample", "label", "score", "truth", "weight"])


# segment "a": labels x < y < z; sample 1 scores x = y = z (all tied) with truth {x},
# sample 2 scores x 0.9, y 0.5, z 0.5 with truth {y}; segment "b": only samples without a true
# label; segment "c": every weight 0; segment "d": two labels, so k = 3 covers both.
TIES = _frame([
    ("a", 1, "x", 0.5, 1, 1.0), ("a", 1, "y", 0.5, 0, 1.0), ("a", 1, "z", 0.5, 0, 1.0),
    ("a", 2, "x", 0.9, 0, 3.0), ("a", 2, "y", 0.5, 1, 3.0), ("a", 2, "z", 0.5, 0, 3.0),
    ("b", 3, "x", 0.2, 0, 1.0), ("b", 3, "y", 0.8, 0, 1.0), ("b", 3, "z", 0.1, 0, 1.0),
    ("c", 4, "x", 0.2, 1, 0.0), ("c", 4, "y", 0.8, 0, 0.0), ("c", 4, "z", 0.1, 0, 0.0),
    ("d", 5, "x", 0.3, 1, 1.0), ("d", 5, "y", 0.3, 0, 1.0),
])
EXPECTED = {
    # sample 1: every label ties with the true one -> coverage 3, both pairs wrong (loss 1),
    # LRAP 1/3, top label x (smallest of the tie) true, top-2 {x, y}: precision 1/2, recall 1.
    # sample 2: y ties with false z below false x -> coverage 3, pairs (y,x) (y,z) wrong, LRAP
    # 1/3, top x false, top-2 {x, y}: precision 1/2, recall 1. Weights 1 and 3.
    ("a", "coverage_error"): 3.0,
    ("a", "label_ranking_loss"): 1.0,
    ("a", "label_ranking_average_precision"): 1 / 3,
    ("a", "one_error"): (1 * 0 + 3 * 1) / 4,
    ("a", "precision_at_k"): 0.5,
    ("a", "recall_at_k"): 1.0,
    # no true label: coverage 0, loss 0, LRAP 1 (scikit-learn), top label false, recall undefined
    ("b", "coverage_error"): 0.0,
    ("b", "label_ranking_loss"): 0.0,
    ("b", "label_ranking_average_precision"): 1.0,
    ("b", "one_error"): 1.0,
    ("b", "precision_at_k"): 0.0,
    ("b", "recall_at_k"): None,
    **{("c", m): None for m in METRICS},
    # k = 2 = both labels; x and y tie: coverage 2, loss 1, LRAP 1/2, top label x (true)
    ("d", "coverage_error"): 2.0,
    ("d", "label_ranking_loss"): 1.0,
    ("d", "label_ranking_average_precision"): 0.5,
    ("d", "one_error"): 0.0,
    ("d", "precision_at_k"): 0.5,
    ("d", "recall_at_k"): 1.0,
}


def test_hand_worked_ties_and_undefined(engine: str) -> None:
    got = _values(me.evaluate(TIES, METRICS, by=["part"], task="multilabel", k=2,
                              engine=engine), ["part"])
    assert got.keys() == EXPECTED.keys()
    for key, want in EXPECTED.items():
        if want is None:
            assert got[key] is None, key
        else:
            assert got[key] == pytest.approx(want, rel=1e-12), key


def test_fewer_labels_than_k_divide_by_the_labels(engine: str) -> None:
    # segment "d" has two labels: precision@3 = 1 true of its 2 labels, not 1/3
    got = _values(me.evaluate(TIES.filter(pl.col("part") == "d"), ["precision_at_k"],
                              task="multilabel", k=3, engine=engine), [])
    assert got[("precision_at_k",)] == pytest.approx(0.5, rel=1e-12)
