"""The input checks' summary as a polars plan (mirror of queries/validate_summary.sql)."""

from __future__ import annotations

import polars as pl

_truth = pl.col("truth").cast(pl.Float64)
_weight = pl.col("weight")


def validate_summary(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """One row per segment with the counts and examples that ``schema.check_summary`` reads.

    Each ``example_*`` is the smallest sample of the segment with that problem (null if none),
    as in the SQL, so both engines name the same sample.
    """
    segment_labels = predictions.group_by("segment").agg(
        n_labels=pl.col("label").drop_nulls().n_unique())
    per_sample = predictions.group_by("segment", "sample").agg(
        n_rows=pl.len(),
        n_distinct=pl.col("label").drop_nulls().n_unique(),
        null_label=pl.col("label").null_count(),
        null_score=pl.col("score").null_count(),
        nan_score=(~pl.col("score").is_finite()).sum(),
        null_truth=pl.col("truth").null_count(),
        bad_truth=(~_truth.is_in([0.0, 1.0])).sum(),
        nan_truth=(~_truth.is_finite()).sum(),
        min_score=pl.col("score").min(),
        max_score=pl.col("score").max(),
        bad_weight=(_weight.is_null() | (_weight < 0) | ~_weight.is_finite()).sum(),
        n_true=(_truth == 1).sum(),
        uneven_weight=_weight.min() != _weight.max(),
    )
    samples = per_sample.with_columns(
        dup=pl.col("n_rows") - pl.col("n_distinct") - pl.col("null_label"),
    ).join(segment_labels, on="segment", how="inner", nulls_equal=True)
    sample = pl.col("sample")
    return samples.group_by("segment").agg(
        n_rows=pl.col("n_rows").sum(),
        n_samples=sample.count(),
        n_labels=pl.col("n_labels").first(),
        null_sample=pl.col("n_rows").filter(sample.is_null()).sum(),
        null_label=pl.col("null_label").sum(),
        null_score=pl.col("null_score").sum(),
        nan_score=pl.col("nan_score").sum(),
        null_truth=pl.col("null_truth").sum(),
        bad_truth=pl.col("bad_truth").sum(),
        nan_truth=pl.col("nan_truth").sum(),
        min_score=pl.col("min_score").min(),
        max_score=pl.col("max_score").max(),
        bad_weight=pl.col("bad_weight").sum(),
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
