"""The input checks' summary by one integer per (segment, sample) (polars, rows in memory) is the
summary of the general plan, on inputs with every problem the checks look for."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from mleval_sql.engines.polars.validate import (
    _slices,
    sample_key,
    summary_by_key,
    validate_summary,
)


def _rows(seed: int, *, label: str, segment: str, sample: str, truth: str,
          weights: bool) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    n = 400
    samples = rng.integers(-5, 60, n)
    frame = pl.DataFrame({
        "sample": samples,
        "label": rng.integers(0, 6, n),
        "score": rng.random(n),
        "truth": rng.integers(0, 2, n),
        "weight": np.where(rng.random(n) < 0.9, 1.0, 2.0) if weights else np.ones(n),
        "segment": rng.integers(0, 3, n),
    })
    nulls = rng.random((4, n)) < 0.02
    frame = frame.with_columns(  # a few nulls, NaN scores and a truth outside {0, 1}
        pl.when(pl.Series(nulls[0])).then(None).otherwise(pl.col("sample")).alias("sample"),
        pl.when(pl.Series(nulls[1])).then(None).otherwise(pl.col("label")).alias("label"),
        pl.when(pl.Series(nulls[2])).then(float("nan")).otherwise(pl.col("score")).alias("score"),
        pl.when(pl.Series(nulls[3])).then(None).otherwise(pl.col("segment")).alias("segment"),
        pl.when(pl.int_range(pl.len()) == 7).then(3).otherwise(pl.col("truth")).alias("truth"),
    )
    if label == "text":
        frame = frame.with_columns(pl.format("l{}", "label").cast(pl.Categorical))
    if segment == "text":
        frame = frame.with_columns(pl.format("s{}", "segment").cast(pl.Categorical))
    if sample == "text":
        frame = frame.with_columns(pl.format("x{}", "sample").cast(pl.Categorical))
    if truth == "bool":
        frame = frame.with_columns(pl.col("truth").clip(0, 1).cast(pl.Boolean))
    return frame


@pytest.mark.parametrize("seed", [0, 1])
@pytest.mark.parametrize("label", ["int", "text"])
@pytest.mark.parametrize("segment", ["int", "text"])
@pytest.mark.parametrize(("sample", "truth"), [("int", "int"), ("text", "bool")])
def test_the_summary_by_one_integer_is_the_general_one(seed: int, label: str, segment: str,
                                                       sample: str, truth: str) -> None:
    rows = _rows(seed, label=label, segment=segment, sample=sample, truth=truth, weights=True)
    key = sample_key(rows)
    assert key is not None
    general = validate_summary(rows.lazy()).collect().sort("segment")
    keyed = summary_by_key(rows.lazy(), key).collect().sort("segment")
    assert keyed.columns == general.columns
    assert keyed.equals(general)
    # each segment's rows together (a null segment's too): value checks over slices
    together = rows.sort(pl.col("segment").to_physical(), nulls_last=True)
    assert _slices(together["segment"]) is not None and _slices(rows["segment"]) is None
    assert summary_by_key(together, key).collect().sort("segment").equals(general)
    assert general["dup_rows"].sum() > 0 and general["uneven_weight"].sum() > 0
    assert general["null_sample"].sum() > 0
    assert general["bad_truth"].sum() > 0 or truth == "bool"


def test_unit_weights_change_nothing_where_every_weight_is_1() -> None:
    rows = _rows(2, label="int", segment="text", sample="int", truth="bool", weights=False)
    general = validate_summary(rows.lazy()).collect().sort("segment")
    keyed = summary_by_key(rows.lazy(), sample_key(rows), unit_weights=True).collect()
    assert keyed.sort("segment").equals(general)


def test_many_segments_are_grouped_not_sliced() -> None:
    """Beyond 64 segments a batch's value checks are one grouping, not a select a segment."""
    rows = _rows(4, label="int", segment="int", sample="int", truth="int", weights=True)
    many = rows.with_columns(pl.col("segment") * 100 + pl.col("sample") % 30).sort(
        "segment", nulls_last=True)
    assert _slices(many.head(200)["segment"]) is not None and _slices(many["segment"]) is None
    assert summary_by_key(many, sample_key(many)).collect().sort("segment").equals(
        validate_summary(many.lazy()).collect().sort("segment"))


def test_no_key_where_labels_do_not_fit_one_word() -> None:
    rows = _rows(3, label="int", segment="int", sample="int", truth="int", weights=True)
    assert sample_key(rows.with_columns(pl.col("label") * 20)) is None
    spread = rows.with_columns(pl.col("label") * 12 - 7)  # codes -7..53: bits 0..60
    assert summary_by_key(spread.lazy(), sample_key(spread)).collect().sort("segment").equals(
        validate_summary(spread.lazy()).collect().sort("segment"))
    assert sample_key(rows.with_columns(pl.col("sample").cast(pl.String))) is None


@pytest.mark.parametrize("segment", ["int", "text"])
def test_the_checks_of_batches_of_segments_are_those_of_all_rows(segment: str,
                                                                 monkeypatch) -> None:
    """Without a budget polars checks the rows it holds a batch of whole segments at a time
    (segments apart in the input, so the batches are sorted first): the summary, a row per
    segment, is that of every row at once, counts and examples of each problem alike."""
    from mleval_sql.engines import make_engine
    from mleval_sql.schema import Columns
    from mleval_sql.sources import as_source

    rows = _rows(3, label="text", segment=segment, sample="int", truth="int", weights=True)

    def summary(batch_rows: int) -> pl.DataFrame:
        monkeypatch.setattr("mleval_sql.engines.polars.engine.HELD_BATCH_ROWS", batch_rows)
        engine = make_engine("polars", as_source(rows), Columns(), "weight", ["segment"])
        try:
            out = engine.summary()
            assert len(engine.batches) == (1 if batch_rows > rows.height else 4)
            return out.sort("segment")
        finally:
            engine.close()

    whole = summary(10**9)
    assert whole.height == 4 and whole["dup_rows"].sum() > 0
    assert summary(100).equals(whole)
