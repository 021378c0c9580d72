"""The input checks' summary as a polars plan (mirror of queries/validate_summary.sql)."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import accumulate

import polars as pl

__all__ = ["validate_summary"]  # the step; summary_of_rows: for the engine

_truth = pl.col("truth").cast(pl.Float64)
_weight = pl.col("weight")


def validate_summary(predictions: pl.LazyFrame, *, unit_weights: bool = False) -> pl.LazyFrame:
    """One row per segment with the counts and examples that ``schema.check_summary`` reads
    (:func:`summary_by_key` with no key)."""
    return summary_by_key(predictions, None, unit_weights=unit_weights)


def summary_of_rows(rows: pl.DataFrame, *, unit_weights: bool = False) -> pl.LazyFrame:
    """:func:`validate_summary` of rows in memory, the cheapest way their layout allows: where
    each segment's rows lie in blocks of one sample each (:func:`_in_blocks`), as a long table
    is written, the checks of the samples read the blocks; else the rows are grouped by one
    integer per (segment, sample) where there is one (:func:`sample_key`), else by the two
    columns."""
    sliced = _slices(rows["segment"])
    blocks = None if sliced is None else _in_blocks(rows, sliced, unit_weights=unit_weights)
    key = None if blocks is not None else sample_key(rows)
    return _summary(rows, key, sliced, blocks, unit_weights=unit_weights)


def summary_by_key(predictions: pl.LazyFrame | pl.DataFrame, key: SampleKey | None, *,
                   unit_weights: bool = False) -> pl.LazyFrame:
    """:func:`validate_summary`, the samples' rows grouped by ``key`` where there is one.

    Each ``example_*`` is the smallest sample of the segment with that problem (null if none),
    as in the SQL, so both engines name the same sample. Distinct labels per sample are counted
    as set bits of the labels' bits OR-ed in 64-bit words, as in the SQL; a label's bit is its
    own integer (or text's category code), which spares the SQL's join with a table of bits.
    ``key`` (:func:`sample_key`): one integer per (segment, sample), which makes the grouping by
    sample one pass on one integer. ``unit_weights``: every weight is 1 (no weight column).
    Rows in memory (a DataFrame) whose segments lie together, as a batch of whole segments
    does, have their value checks computed over each segment's slice (:func:`_slices`).
    """
    sliced = _slices(predictions["segment"]) if isinstance(predictions, pl.DataFrame) else None
    return _summary(predictions, key, sliced, None, unit_weights=unit_weights)


def _summary(predictions: pl.LazyFrame | pl.DataFrame, key: SampleKey | None,
             sliced: list[tuple[int, int]] | None, blocks: pl.DataFrame | None, *,
             unit_weights: bool) -> pl.LazyFrame:
    """:func:`summary_by_key` with the rows' segments' slices (``sliced``) and, where found
    already, the checks of their samples (``blocks``: :func:`_in_blocks`; ``key`` None)."""
    rows = predictions if isinstance(predictions, pl.DataFrame) else None
    null_labels = rows is None or rows["label"].null_count() > 0
    predictions = predictions.lazy()
    segment_labels = predictions.select("segment", "label").unique()
    null_score, nan_score = pl.col("score").is_null(), ~pl.col("score").is_finite()
    # a boolean truth is 0 or 1 where it is not null: nothing to cast or compare
    boolean = predictions.collect_schema()["truth"] == pl.Boolean
    bad_truth = pl.lit(False) if boolean else ~_truth.is_in([0.0, 1.0])
    per_segment = {
        "null_label": pl.col("label").null_count(),
        "null_score": null_score.sum(),
        "nan_score": nan_score.sum(),
        "null_truth": pl.col("truth").null_count(),
        "bad_truth": bad_truth.sum().cast(pl.UInt32),
        "nan_truth": pl.lit(0, pl.UInt32) if boolean else (~_truth.is_finite()).sum(),
        "min_score": pl.col("score").min(),
        "max_score": pl.col("score").max(),
        # the regression losses' domains (mleval_sql/domains.py)
        "min_truth": _truth.min(),
        "bad_weight": pl.lit(0, pl.UInt32) if unit_weights else (
            _weight.is_null() | (_weight < 0) | ~_weight.is_finite()).sum(),
    }
    if sliced is None:
        value_checks = predictions.group_by("segment").agg(**per_segment)
    else:  # a select over each segment's rows: no grouping (5M rows: 0.005 s, not 0.03 s)
        value_checks = pl.concat([predictions.slice(start, length).select(
            pl.col("segment").first(), **per_segment) for start, length in sliced])
    if key is not None:  # the segment's code from its one value (not from every row's)
        value_checks = value_checks.with_columns(key.segment.alias(_SEGMENT))
    # the examples from the rows with a bad value only (almost always none): building the
    # (sample, label) structs of every row to keep the smallest costs more than all the counts
    examples = predictions.filter(null_score | nan_score | bad_truth).group_by("segment").agg(
        **_first_row("null_score", null_score),
        **_first_row("nan_score", nan_score, pl.col("score")),
        **_first_row("bad_truth", bad_truth, _truth),
        # a graded relevance (ndcg, dcg) may be any number >= 0: its negative values' row
        **_first_row("negative_truth", _truth < 0, _truth),
        min_bad_truth=_truth.filter(bad_truth).min(),
        max_bad_truth=_truth.filter(bad_truth).max(),
    )
    value_checks = value_checks.join(examples, on="segment", how="left", nulls_equal=True)
    labelled, bit = _label_bits(predictions, segment_labels)
    n_true = pl.col("truth").sum() if boolean else (_truth == 1).sum()
    if key is not None:
        samples = _per_key(labelled, bit, n_true, key, unit_weights,
                           null_labels=null_labels)
        # the segment's labels: the bits of its samples' labels
        labels = pl.col("mask").bitwise_or().bitwise_count_ones().fill_null(0).cast(pl.UInt32)
        checks = _sample_checks(samples, _SEGMENT, labels).join(value_checks, on=_SEGMENT)
        return checks.select("segment", pl.exclude("segment", _SEGMENT))
    n_labels = segment_labels.group_by("segment").agg(n_labels=pl.col("label").count())
    samples = _per_sample(labelled, bit, n_true).join(n_labels, on="segment", how="inner",
                                                      nulls_equal=True)
    checks = _sample_checks(samples, "segment", pl.col("n_labels").first()).join(
        value_checks, on="segment", how="inner", nulls_equal=True)
    if blocks is None:
        return checks
    # the samples' checks found already: the grouping's table, in its columns and types
    schema = checks.collect_schema()
    return blocks.lazy().join(value_checks, on="segment", how="inner", nulls_equal=True).select(
        pl.col(name).cast(dtype) for name, dtype in schema.items())


def _sample_checks(samples: pl.LazyFrame, segment: str, n_labels: pl.Expr) -> pl.LazyFrame:
    """The checks of the samples' rows per ``segment`` from a row per sample; ``n_labels``:
    the segment's labels, from its samples' rows."""
    sample = pl.col("sample")
    return samples.group_by(segment).agg(
        n_rows=pl.col("n_rows").sum(),
        n_samples=sample.count(),
        sample_weight=pl.col("weight").sum(),
        n_labels=n_labels,
        null_sample=pl.col("n_rows").filter(sample.is_null()).sum(),
        min_rows=pl.col("n_rows").min(),
        max_rows=pl.col("n_rows").max(),
        dup_rows=pl.col("dup").sum(),
        min_true=pl.col("n_true").min(),
        max_true=pl.col("n_true").max(),
        uneven_weight=pl.col("uneven_weight").sum(),
        example_dup=sample.filter(pl.col("dup") > 0).min(),
        example_short=sample.filter(pl.col("n_rows") < n_labels).min(),
        example_not_one_true=sample.filter(pl.col("n_true") != 1).min(),
        example_weight=sample.filter(pl.col("uneven_weight")).min(),
    )


def _per_sample(labelled: pl.LazyFrame, bit: pl.Expr, n_true: pl.Expr) -> pl.LazyFrame:
    """Rows, duplicate labels, true labels and weights per (segment, sample): by 64-bit words
    of label bits, then by sample."""
    per_word = _with_bits(labelled, bit % 64).group_by(
        "segment", "sample", (bit // 64).alias("word")).agg(
        n_rows=pl.len(),
        n_labelled=pl.col("label").count(),
        n_distinct=pl.col(_BIT).bitwise_or().bitwise_count_ones(),
        n_true=n_true,
        min_weight=_weight.min(),
        max_weight=_weight.max(),
    )
    return per_word.group_by("segment", "sample").agg(
        n_rows=pl.col("n_rows").sum(),
        dup=pl.col("n_labelled").sum().cast(pl.Int64) - pl.col("n_distinct").sum(),
        n_true=pl.col("n_true").sum(),
        uneven_weight=pl.col("min_weight").min() != pl.col("max_weight").max(),
        weight=pl.col("min_weight").min(),
    )


def _per_key(labelled: pl.LazyFrame, bit: pl.Expr, n_true: pl.Expr, key: SampleKey,
             unit_weights: bool, *, null_labels: bool = True) -> pl.LazyFrame:
    """:func:`_per_sample` by one integer, every label's bit in one word, with the segment's
    code (``_SEGMENT``) for the segment and the sample decoded from the key where it is an
    integer. ``null_labels``: the labels may have nulls (else every row has a label)."""
    code = pl.col(_KEY)
    per_key = _with_bits(labelled, bit - key.first_label).group_by(key.key.alias(_KEY)).agg(
        n_rows=pl.len(),
        n_labelled=(pl.col("label").count() if null_labels else pl.len()).cast(pl.Int64),
        mask=pl.col(_BIT).bitwise_or(),
        n_true=n_true.cast(pl.UInt32),
        **({} if unit_weights else {"uneven_weight": _weight.min() != _weight.max(),
                                    "weight": _weight.min()}),
        **({} if key.sample is not None else {"sample": pl.col("sample").first()}),
    )
    if unit_weights:
        per_key = per_key.with_columns(uneven_weight=pl.lit(False), weight=pl.lit(1.0))
    if key.sample is not None:
        at = code % key.slots
        per_key = per_key.with_columns(sample=pl.when(at < key.slots - 1).then(
            at + key.low).cast(key.sample))
    return per_key.with_columns(
        (code // key.slots).alias(_SEGMENT),
        dup=pl.col("n_labelled") - pl.col("mask").bitwise_count_ones().fill_null(0))


def _in_blocks(rows: pl.DataFrame, sliced: list[tuple[int, int]], *,
               unit_weights: bool) -> pl.DataFrame | None:
    """The checks of the samples' rows (:func:`_sample_checks`' columns and ``segment``) where
    every segment's rows (``sliced``: :func:`_slices`) lie in blocks of one sample each, the
    samples ascending, every block with the segment's labels in one order and one weight;
    else None (the grouping finds what is wrong).

    That is how a long table is written, a sample's rows one after the other, and checking it
    takes a few passes over contiguous arrays instead of a hash grouping by sample.

    >>> rows = pl.DataFrame({"segment": [0] * 4, "sample": [3, 3, 5, 5], "label": [0, 1] * 2,
    ...                      "truth": [True, False, True, True]})
    >>> _in_blocks(rows, [(0, 4)], unit_weights=True).select("n_labels", "min_true",
    ...                                                      "max_true").row(0)
    (2, 1, 2)
    >>> _in_blocks(rows.reverse(), [(0, 4)], unit_weights=True) is None  # descending
    True
    """
    physical = {name: rows[name].to_physical().dtype for name in ("sample", "label")}
    if not (physical["sample"].is_integer() or physical["sample"] == pl.String) or not (
            physical["label"].is_integer()) or any(
            rows[name].null_count() for name in ("sample", "label", "truth")):
        return None  # floats (NaN, -0.0) and nulls: the grouping's rules
    found = []
    for start, length in sliced:
        checks = _block_checks(rows.slice(start, length), unit_weights=unit_weights)
        if checks is None:
            return None
        found.append(checks)
    return pl.concat(found, how="vertical_relaxed")


def _block_checks(part: pl.DataFrame, *, unit_weights: bool) -> pl.DataFrame | None:
    """:func:`_in_blocks` of one segment's rows (``part``): a row, or None."""
    length = part.height
    sample = part["sample"].to_physical()
    width = _first_run(sample)
    if length % width or not sample.is_sorted():
        return None
    shape = (length // width, width)
    first, last = sample.gather_every(width), sample.gather_every(width, width - 1)
    # sorted, so a block's rows are one sample where its first and last rows are, and the
    # samples differ where each block's first differs from the last before it
    if not ((first == last).all() and (first.slice(1) != last.slice(0, shape[0] - 1)).all()):
        return None
    # each block's labels those of the block before it: all of them the first block's
    labels = part["label"]
    if labels.head(width).n_unique() < width or not (
            labels.slice(width) == labels.slice(0, length - width)).all():
        return None
    truth = part["truth"]
    ones = truth if truth.dtype == pl.Boolean else truth.cast(pl.Float64) == 1
    per_sample = ones.reshape(shape).arr.sum()  # a boolean's sum: its true values
    fewest, most = per_sample.min(), per_sample.max()
    if unit_weights:
        weight = float(shape[0])
    else:
        weights = part["weight"]
        per_block = weights.reshape(shape)
        if weights.null_count() or (weights.dtype.is_float() and weights.is_nan().any()) or not (
                per_block.arr.min() == per_block.arr.max()).all():  # nulls, NaN: the grouping
            return None
        weight = float(weights.gather_every(width).sum())
    # the smallest sample with other than one true label: the first such block's where the
    # blocks ascend by the samples' values, else (a category's code) the least of them all
    not_one = part["sample"].clear(1)
    if not fewest == most == 1:
        bad = per_sample != 1
        not_one = part["sample"].gather(
            [bad.arg_max() * width] if not_one.dtype == sample.dtype else
            bad.arg_true() * width).sort().head(1)
    return pl.DataFrame({
        "segment": part["segment"].head(1), "n_rows": length, "n_samples": shape[0],
        "sample_weight": weight, "n_labels": width, "null_sample": 0, "min_rows": width,
        "max_rows": width, "dup_rows": 0, "min_true": fewest, "max_true": most,
        "uneven_weight": 0, "example_dup": None, "example_short": None,
        "example_not_one_true": not_one, "example_weight": None})


def _first_run(values: pl.Series) -> int:
    """The length of the run of ``values``' first value (a non-empty series)."""
    size = 64
    while True:
        head = values.head(size)
        changed = (head != head[0]).arg_true()
        if changed.len():
            return int(changed[0])
        if size >= values.len():
            return values.len()
        size *= 16


def _slices(segment: pl.Series) -> list[tuple[int, int]] | None:
    """The (start, length) of each segment's rows where they lie together, each segment in
    one run of rows, and there are at most :data:`_SLICED` segments; else None.

    >>> _slices(pl.Series([4, 4, 6, 6, 6]))
    [(0, 2), (2, 3)]
    >>> _slices(pl.Series([4, 6, 4])) is None
    True
    """
    if segment.is_empty() or segment.dtype == pl.Struct:
        return None
    runs = segment.to_physical().rle()
    if runs.len() > _SLICED or runs.struct.field("value").n_unique() < runs.len():
        return None
    lengths = runs.struct.field("len").to_list()
    return list(zip(accumulate([0, *lengths[:-1]]), lengths, strict=True))


#: The most segments of a batch whose value checks are selects over slices: beyond, one
#: grouping costs less than a select each.
_SLICED = 64


def _with_bits(rows: pl.LazyFrame, bit: pl.Expr) -> pl.LazyFrame:
    """``rows`` with 2 ** ``bit`` (in [0, 64)) as a 64-bit word in ``_BIT``: looked up in a
    table before any grouping (5M rows: 0.007 s, against 0.015 s for the power, and a lookup
    in each group costs far more)."""
    return rows.with_columns(pl.lit(_BITS).gather(bit).alias(_BIT))


#: Integer codes kept below this, so that a product of two stays within Int64.
_CODES = 2**62
_KEY, _SEGMENT, _BIT = "__sample_key", "__segment_code", "__label_bit"
_BITS = pl.Series("bits", [2**bit for bit in range(64)], dtype=pl.UInt64)  # 2 ** bit


@dataclass(frozen=True)
class SampleKey:
    """One integer per (segment, sample): ``segment`` (a segment's code) x ``slots`` + the
    sample's code (the last slot: a null sample); ``sample``: the samples' integer type, where
    the code is the sample less ``low``; a label's bit: its code less ``first_label``."""

    key: pl.Expr
    segment: pl.Expr
    slots: int
    low: int
    sample: pl.DataType | None
    first_label: int  # the smallest label's code: its bit is bit 0


def sample_key(rows: pl.DataFrame) -> SampleKey | None:
    """The :class:`SampleKey` of ``rows`` (the canonical columns), where segments and samples
    have integer codes (integers, booleans, categories) and the labels' codes span less than
    64; else None.

    >>> rows = pl.DataFrame({"segment": ["a", "b", "a", "a"], "sample": [7, 7, 9, None],
    ...                      "label": [1, 1, 1, 1]}).with_columns(pl.col("segment").cast(
    ...     pl.Categorical))
    >>> rows.select(sample_key(rows).key).to_series().n_unique()
    4
    """
    schema = rows.schema
    physical = {name: _physical(pl.col(name), schema[name]) for name in ("segment", "sample",
                                                                         "label")}
    if any(code is None for code in physical.values()):
        return None
    codes = {name: e.cast(pl.Int64) for name, e in physical.items()}  # type: ignore[union-attr]
    extremes = rows.select(*(e.min().alias(f"{n}_lo") for n, e in physical.items()),  # type: ignore[union-attr]
                           *(e.max().alias(f"{n}_hi") for n, e in physical.items()))  # type: ignore[union-attr]
    ranges = {k: None if v is None else int(v) for k, v in extremes.row(0, named=True).items()}
    if ranges["label_lo"] is not None and ranges["label_hi"] - ranges["label_lo"] >= 64:
        return None  # the labels' codes span more than one word of bits
    lo = {n: ranges[f"{n}_lo"] or 0 for n in ("segment", "sample")}
    size = {n: (ranges[f"{n}_hi"] if ranges[f"{n}_hi"] is not None else lo[n]) - lo[n] + 2
            for n in ("segment", "sample")}  # the last code: a null
    if max(size.values()) >= _CODES or size["segment"] * size["sample"] >= _CODES:
        return None
    segment, sample = ((codes[n] - lo[n]).fill_null(size[n] - 1)  # type: ignore[operator]
                       for n in ("segment", "sample"))
    integer = schema["sample"].is_integer()
    return SampleKey(segment * size["sample"] + sample, segment, size["sample"], lo["sample"],
                     schema["sample"] if integer else None, ranges["label_lo"] or 0)


def _physical(column: pl.Expr, dtype: pl.DataType) -> pl.Expr | None:
    """An integer code of ``column``'s values (equal values, equal codes) that fits Int64, where
    it has one: a category's code, the integer itself, a boolean."""
    if dtype == pl.Categorical or isinstance(dtype, pl.Enum):
        return column.to_physical()
    if dtype == pl.Boolean or (dtype.is_integer() and dtype != pl.UInt64):
        return column
    return None


def _label_bits(predictions: pl.LazyFrame,
                segment_labels: pl.LazyFrame) -> tuple[pl.LazyFrame, pl.Expr]:
    """The rows and a distinct integer per label (null for a null label): the label itself
    when it is an integer, its category's code when it is text (no join: the codes are
    polars' own), else its rank among the labels by a join with the sorted labels.

    >>> rows = pl.LazyFrame({"label": ["b", "a", "b", None]})
    >>> _, bit = _label_bits(rows, rows)
    >>> codes = rows.select(bit).collect().to_series().to_list()
    >>> codes[0] == codes[2] != codes[1], codes[3]
    (True, None)
    """
    dtype = predictions.collect_schema()["label"]
    if dtype.is_integer():
        return predictions, pl.col("label")
    if dtype in (pl.String, pl.Categorical) or isinstance(dtype, pl.Enum):
        return predictions, pl.col("label").cast(pl.Categorical).to_physical().cast(pl.Int64)
    bits = segment_labels.select(pl.col("label").drop_nulls().unique().sort()).with_row_index(
        "bit")
    return predictions.join(bits, on="label", how="left"), pl.col("bit").cast(pl.Int64)


def _first_row(problem: str, where: pl.Expr, value: pl.Expr | None = None) -> dict[str, pl.Expr]:
    """``example_<problem>_sample`` / ``_label`` (/ ``_value``): the smallest (sample, label)
    row where ``where`` holds (nulls if none), as the SQL's ``arg_min(x, (sample, label))``."""
    fields = {"sample": pl.col("sample"), "label": pl.col("label"),
              **({} if value is None else {"value": value})}
    first = pl.struct(**fields).filter(where).sort().first()
    return {f"example_{problem}_{name}": first.struct.field(name) for name in fields}
