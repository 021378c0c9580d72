"""The input checks' summary by one integer per (segment, sample) (polars, rows in memory) is the
summary of the general plan, on inputs with every problem the checks look for."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from mleval_sql.engines.polars.validate import (
    _in_blocks,
    _slices,
    sample_key,
    summary_by_key,
    summary_of_rows,
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
        monkeypatch.setattr("mleval_sql.engines.polars.collect.HELD_BATCH_ROWS", batch_rows)
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


def _blocked(seed: int, *, sample: str, label: str, truth: str, width: int = 4,
             one_true: bool = False) -> pl.DataFrame:
    """A table as a long table is written: three segments in turn, each segment's samples
    ascending, each sample's rows its segment's labels in one order (the last segment's
    order its own, one label fewer), one weight a sample."""
    rng = np.random.default_rng(seed)
    parts = []
    for segment in range(3):
        labels = rng.permutation(width)[: width - (segment == 2)]
        ids = np.cumsum(rng.integers(1, 4, rng.integers(3, 7))) * 7 + 3
        n = len(labels) * len(ids)
        trues = rng.integers(0, 2, n) if not one_true else np.concatenate(
            [np.eye(len(labels), dtype=int)[rng.integers(0, len(labels))] for _ in ids])
        parts.append(pl.DataFrame({
            "sample": np.repeat(ids, len(labels)), "label": np.tile(labels, len(ids)),
            "score": rng.random(n), "truth": trues,
            "weight": np.repeat(rng.choice([0.5, 1.0, 2.0], len(ids)), len(labels)),
            "segment": np.full(n, segment)}))
    rows = pl.concat(parts)
    if sample == "text":  # zero-padded: the text ascends with the number
        rows = rows.with_columns(pl.format("x{}", pl.col("sample").cast(pl.String)
                                           .str.zfill(4)).alias("sample"))
    if sample == "category":  # new texts, descending: their codes ascend, their texts not
        rows = rows.with_columns(pl.format("c{}-{}", "segment", 1000 - pl.col("sample"))
                                 .cast(pl.Categorical).alias("sample"))
    if label == "text":
        rows = rows.with_columns(pl.format("l{}", "label").cast(pl.Categorical))
    if truth == "bool":
        rows = rows.with_columns(pl.col("truth").cast(pl.Boolean))
    return rows


def _at(rows: pl.DataFrame, index: int, **values: object) -> pl.DataFrame:
    """``rows`` with row ``index``'s columns set to ``values``."""
    return rows.with_columns(pl.when(pl.int_range(pl.len()) == index).then(pl.lit(value))
                             .otherwise(pl.col(name)).alias(name)
                             for name, value in values.items())


def _after(sample: object) -> object:
    """A sample id between ``sample`` and the next in :func:`_blocked` (7 or more above)."""
    return sample + 1 if isinstance(sample, int) else f"{sample}a"


def _swap(rows: pl.DataFrame, i: int, j: int) -> pl.DataFrame:
    order = list(range(rows.height))
    order[i], order[j] = order[j], order[i]
    return rows[order]


#: A change to a table in blocks (row 5: the second sample's second row) and whether the
#: table is still in blocks after it.
CHANGES = {
    "none": (lambda rows: rows, True),
    "a label missing": (lambda rows: rows.filter(pl.int_range(pl.len()) != 5), False),
    "a label twice": (lambda rows: _at(rows, 5, label=rows["label"][4]), False),
    "labels in another order": (lambda rows: _swap(rows, 5, 6), False),
    "samples descending": (lambda rows: rows.reverse().sort("segment", maintain_order=True),
                           False),
    "a sample's rows apart": (lambda rows: _swap(rows, 5, 9), False),
    "two samples one id": (lambda rows: rows.with_columns(  # the second's and the third's
        pl.when(pl.int_range(pl.len()).is_between(8, 11)).then(pl.col("sample").get(4))
        .otherwise(pl.col("sample")).alias("sample")), False),
    "a sample's last row another sample": (lambda rows: _at(rows, 7, sample=_after(
        rows["sample"][7])), False),
    "a label twice in every sample": (lambda rows: rows.with_columns(
        pl.when(pl.int_range(pl.len()).over("segment", "sample") == 1)
        .then(pl.col("label").shift(1)).otherwise(pl.col("label")).alias("label")), False),
    "a sample's weights uneven": (lambda rows: _at(rows, 5, weight=3.0), False),
    "a NaN weight": (lambda rows: _at(rows, 5, weight=float("nan")), False),
    "a null weight": (lambda rows: _at(rows, 4, weight=None), False),
    "a null sample": (lambda rows: _at(rows, 5, sample=None), False),
    "a null truth": (lambda rows: _at(rows, 5, truth=None), False),
    "a NaN score": (lambda rows: _at(rows, 5, score=float("nan")), True),
    "a null score": (lambda rows: _at(rows, 5, score=None), True),
}


@pytest.mark.parametrize("change", list(CHANGES))
@pytest.mark.parametrize(("sample", "label", "truth", "one_true"), [
    ("int", "int", "int", False), ("text", "text", "bool", False),
    ("int", "text", "bool", True), ("category", "int", "int", True)])
def test_the_checks_of_samples_in_blocks_are_the_grouping(change: str, sample: str, label: str,
                                                          truth: str, one_true: bool) -> None:
    """Rows in blocks of one sample each are checked without grouping by sample, and give the
    grouping's summary; a change that breaks the blocks sends them to the grouping."""
    make, in_blocks = CHANGES[change]
    rows = make(_blocked(7, sample=sample, label=label, truth=truth, one_true=one_true))
    if sample == "text" and change == "a null sample":
        rows = rows.with_columns(pl.col("sample").cast(pl.String))
    sliced = _slices(rows["segment"])
    assert sliced is not None
    assert (_in_blocks(rows, sliced, unit_weights=False) is not None) == in_blocks
    general = validate_summary(rows.lazy()).collect().sort("segment")
    assert summary_of_rows(rows).collect().sort("segment").equals(general)
    if change == "none":  # the table has what the samples' checks report
        assert general["n_labels"].to_list() == [4, 4, 3]
        assert general["min_true"].min() == (1 if one_true else 0)
        assert one_true == general["example_not_one_true"].is_null().all()


@pytest.mark.parametrize("sample", ["int", "category"])
def test_bad_truths_in_blocks_name_the_smallest_sample(sample: str) -> None:
    """A multiclass table in blocks with samples of no and of two true labels: the summary
    names the smallest, as the grouping does (a category's: by its text, not its code)."""
    rows = _blocked(3, sample=sample, label="int", truth="int", one_true=True)
    for index in (5, 9):  # the second and third samples of the first segment
        rows = _at(rows, index, truth=1 - rows["truth"][index])
    sliced = _slices(rows["segment"])
    assert _in_blocks(rows, sliced, unit_weights=False) is not None
    summary = summary_of_rows(rows).collect().sort("segment")
    assert summary.equals(validate_summary(rows.lazy()).collect().sort("segment"))
    bad = rows["sample"].gather([5, 9])
    assert summary["example_not_one_true"][0] == (bad.min() if sample == "int" else
                                                  bad.cast(pl.String).min())
    assert sample == "int" or bad.to_physical().is_sorted()  # the codes ascend, not the texts


def test_one_row_a_sample_is_a_block_of_one() -> None:
    """A binary table (one label, a row a sample) is in blocks of one; unit weights too."""
    rows = _blocked(5, sample="int", label="int", truth="bool", width=1).filter(
        pl.col("segment") < 2).drop("weight").with_columns(weight=pl.lit(1.0))
    assert _in_blocks(rows, _slices(rows["segment"]), unit_weights=True) is not None
    assert summary_of_rows(rows, unit_weights=True).collect().sort("segment").equals(
        validate_summary(rows.lazy()).collect().sort("segment"))
