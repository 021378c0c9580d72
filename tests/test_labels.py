"""Truth that arrives late, on every engine: ``unlabelled="skip"`` equals the evaluation of the
rows whose truth is known, with each segment's ``label_coverage``; outcomes kept apart
(``labels=``) equal the predictions with their truth joined; what each refuses."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import roc_auc_score

import mleval_sql as me
from mleval_sql.cli import main
from tests.helpers import assert_frames_close

METRICS = ["roc_auc", "f1", "log_loss"]


def predictions(n: int = 240) -> pl.DataFrame:
    """Multilabel rows (3 labels) with ties, weights, two segments, three days; a quarter of
    the samples' truth unknown, and segment 'empty' with no truth at all."""
    rng = np.random.default_rng(3)
    sample = np.repeat(np.arange(n), 3)
    frame = pl.DataFrame({
        "sample": sample, "label": np.tile(["a", "b", "c"], n),
        "score": rng.integers(0, 8, 3 * n) / 8, "truth": rng.random(3 * n) < 0.4,
        "weight": np.repeat(rng.integers(1, 4, n).astype(float), 3),
        "region": np.repeat(np.where(np.arange(n) < n - 12, "eu", "empty"), 3),
        "day": [dt.date(2026, 11, 1) + dt.timedelta(days=int(s % 3)) for s in sample]})
    unknown = (pl.col("sample") % 4 == 1) | (pl.col("region") == "empty")
    return frame.with_columns(pl.when(unknown).then(None).otherwise(pl.col("truth"))
                              .alias("truth"))


def test_skip_equals_the_known_rows_with_their_coverage(engine: str) -> None:
    rows = predictions()
    got = me.evaluate(rows, METRICS, by="region", average="macro", unlabelled="skip",
                      window="day:1d", engine=engine)
    want = me.evaluate(rows.filter(pl.col("truth").is_not_null()), METRICS, by="region",
                       average="macro", window="day:1d", engine=engine)
    assert_frames_close(got.drop("label_coverage"), want)
    assert "empty" not in got["region"].to_list()  # no known truth: no values
    for (day, region), part in got.group_by("window_start", "region"):
        segment = rows.filter(pl.col("day") == day, pl.col("region") == region)
        share = segment.filter(pl.col("truth").is_not_null())["weight"].sum() / \
            segment["weight"].sum()
        assert part["label_coverage"].unique().to_list() == [pytest.approx(share, rel=1e-12)]
    known = rows.filter(pl.col("truth").is_not_null(), pl.col("label") == "a")
    per_label = me.evaluate(rows, "roc_auc", average="none", unlabelled="skip", engine=engine)
    assert per_label.filter(label="a")["value"].item() == pytest.approx(
        roc_auc_score(known["truth"], known["score"], sample_weight=known["weight"]), rel=1e-12)


def test_outcomes_joined_equal_the_truth_in_the_rows(engine: str, tmp_path: Path) -> None:
    rows = predictions()
    outcomes = rows.filter(pl.col("truth").is_not_null()).select("sample", "label", "truth")
    outcomes.write_parquet(tmp_path / "outcomes.parquet")
    got = me.evaluate(rows.drop("truth"), METRICS, by="region", average="macro",
                      labels=tmp_path / "outcomes.parquet", unlabelled="skip", engine=engine)
    want = me.evaluate(rows, METRICS, by="region", average="macro", unlabelled="skip",
                       engine=engine)
    assert_frames_close(got, want)  # the join orders the rows otherwise: the last bits of sums
    by_sample = outcomes.filter(pl.col("label") == "a").select("sample", "truth")
    binary = rows.filter(pl.col("label") == "a").drop("label", "truth")
    joined = me.evaluate(binary, "roc_auc", labels=by_sample, unlabelled="skip", engine=engine)
    direct = me.evaluate(rows.filter(pl.col("label") == "a").drop("label"), "roc_auc",
                         unlabelled="skip", engine=engine)
    assert_frames_close(joined, direct)


def test_what_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rows = predictions()
    with pytest.raises(me.InputError, match=r"null value\(s\).*unlabelled='skip'"):
        me.evaluate(rows, "roc_auc")
    twice = pl.concat([rows.select("sample", "label", "truth").head(2),
                       rows.select("sample", "label", "truth").head(1)])
    with pytest.raises(me.InputError, match="2 outcomes for sample=0, label='a'"):
        me.evaluate(rows.drop("truth"), "roc_auc", labels=twice, unlabelled="skip")
    with pytest.raises(me.InputError, match="the outcomes have no column 'truth'"):
        me.evaluate(rows.drop("truth"), "roc_auc", labels=rows.select("sample", "label"))
    with pytest.raises(me.InputError, match="unknown unlabelled 'drop'"):
        me.evaluate(rows, "roc_auc", unlabelled="drop")
    rows.write_parquet(tmp_path / "rows.parquet")
    assert main(["evaluate", str(tmp_path / "rows.parquet"), "--metric", "roc_auc",
                 "--unlabelled", "skip", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].endswith("value,label_coverage")


def test_a_statement_leaves_out_the_unknown_rows_as_evaluate(tmp_path: Path) -> None:
    import duckdb

    rows = predictions()
    rows.write_parquet(tmp_path / "rows.parquet")
    text = me.sql(METRICS, task="multilabel", by="region", average="macro", table="p",
                  unlabelled="skip", schema_from=str(tmp_path / "rows.parquet"))
    assert "left out" in text.splitlines()[2]
    con = duckdb.connect()
    con.register("p", rows.to_arrow())
    want = me.evaluate(rows, METRICS, by="region", average="macro", unlabelled="skip")
    assert_frames_close(con.sql(text).pl(), want.drop("label_coverage"))
