"""The input checks' summary as a polars plan (mirror of queries/validate_summary.sql)."""

from __future__ import annotations

import polars as pl

__all__ = ["validate_summary"]

_truth = pl.col("truth").cast(pl.Float64)
_weight = pl.col("weight")


def validate_summary(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """One row per segment with the counts and examples that ``schema.check_summary`` reads.

    Each ``example_*`` is the smallest sample of the segment with that problem (null if none),
    as in the SQL, so both engines name the same sample. Distinct labels per sample are counted
    as set bits of the labels' bits OR-ed in 64-bit words, as in the SQL; a label's bit is its
    own integer (or text's category code), which spares the SQL's join with a table of bits.
    """
    segment_labels = predictions.select("segment", "label").unique()
    null_score, nan_score = pl.col("score").is_null(), ~pl.col("score").is_finite()
    bad_truth = ~_truth.is_in([0.0, 1.0])
    value_checks = predictions.group_by("segment").agg(
        null_label=pl.col("label").null_count(),
        null_score=null_score.sum(),
        nan_score=nan_score.sum(),
        null_truth=pl.col("truth").null_count(),
        bad_truth=bad_truth.sum(),
        nan_truth=(~_truth.is_finite()).sum(),
        min_score=pl.col("score").min(),
        max_score=pl.col("score").max(),
        bad_weight=(_weight.is_null() | (_weight < 0) | ~_weight.is_finite()).sum(),
    )
    # the examples from the rows with a bad value only (almost always none): building the
    # (sample, label) structs of every row to keep the smallest costs more than all the counts
    examples = predictions.filter(null_score | nan_score | bad_truth).group_by("segment").agg(
        **_first_row("null_score", null_score),
        **_first_row("nan_score", nan_score, pl.col("score")),
        **_first_row("bad_truth", bad_truth, _truth),
        min_bad_truth=_truth.filter(bad_truth).min(),
        max_bad_truth=_truth.filter(bad_truth).max(),
    )
    value_checks = value_checks.join(examples, on="segment", how="left", nulls_equal=True)
    labelled, bit = _label_bits(predictions, segment_labels)
    per_word = labelled.group_by("segment", "sample", (bit // 64).alias("word")).agg(
        n_rows=pl.len(),
        n_labelled=pl.col("label").count(),
        n_distinct=pl.lit(2, pl.UInt64).pow(bit % 64).bitwise_or().bitwise_count_ones(),
        n_true=(_truth == 1).sum(),
        min_weight=_weight.min(),
        max_weight=_weight.max(),
    )
    per_sample = per_word.group_by("segment", "sample").agg(
        n_rows=pl.col("n_rows").sum(),
        dup=pl.col("n_labelled").sum().cast(pl.Int64) - pl.col("n_distinct").sum(),
        n_true=pl.col("n_true").sum(),
        uneven_weight=pl.col("min_weight").min() != pl.col("max_weight").max(),
        weight=pl.col("min_weight").min(),
    )
    n_labels = segment_labels.group_by("segment").agg(n_labels=pl.col("label").count())
    samples = per_sample.join(n_labels, on="segment", how="inner", nulls_equal=True)
    sample = pl.col("sample")
    sample_checks = samples.group_by("segment").agg(
        n_rows=pl.col("n_rows").sum(),
        n_samples=sample.count(),
        sample_weight=pl.col("weight").sum(),
        n_labels=pl.col("n_labels").first(),
        null_sample=pl.col("n_rows").filter(sample.is_null()).sum(),
        min_rows=pl.col("n_rows").min(),
        max_rows=pl.col("n_rows").max(),
        dup_rows=pl.col("dup").sum(),
        min_true=pl.col("n_true").min(),
        max_true=pl.col("n_true").max(),
        uneven_weight=pl.col("uneven_weight").sum(),
        example_dup=sample.filter(pl.col("dup") > 0).min(),
        example_short=sample.filter(pl.col("n_rows") < pl.col("n_labels")).min(),
        example_not_one_true=sample.filter(pl.col("n_true") != 1).min(),
        example_weight=sample.filter(pl.col("uneven_weight")).min(),
    )
    return sample_checks.join(value_checks, on="segment", how="inner", nulls_equal=True)


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
