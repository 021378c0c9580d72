"""Per-sample multilabel metrics averaged over samples (polars plans).

Mirrors queries/sample_counts.sql and queries/sample_metrics.sql.
"""

from __future__ import annotations

import polars as pl

from mleval_sql.engines.polars._common import rate_scores, truth, weight, weighted_mean

__all__ = ["sample_counts", "sample_metrics"]

_score, _label = pl.col("score"), pl.col("label")
SAMPLE_AVERAGED = ("precision", "recall", "f1", "fbeta", "jaccard")


def sample_counts(predictions: pl.LazyFrame, *, threshold: float) -> pl.LazyFrame:
    """Per sample: its weight, label counts at the threshold, and whether its top label is true."""
    decided = _score >= threshold
    top_label = _label.filter(_score == _score.max()).min()
    return predictions.group_by("segment", "sample").agg(
        weight=weight.first(),
        tp=(truth & decided).sum(),
        fp=(~truth & decided).sum(),
        fn=(truth & ~decided).sum(),
        top_true=truth.filter(_label == top_label).first(),
    )


def sample_metrics(sample_counts: pl.LazyFrame, *, beta: float,
                   zero_division: float | None) -> pl.LazyFrame:
    """Samples-averaged P/R/F/jaccard, subset accuracy, zero_one_loss (its complement) and
    adjusted (top-1-in-truth) accuracy."""
    # as scikit-learn: a sample's counts scale with its weight (zero weight: 0/0)
    tp, fp, fn = (pl.col(c) * weight for c in ("tp", "fp", "fn"))
    scores = sample_counts.select(
        "segment", "weight",
        subset_accuracy=(pl.col("fp") + pl.col("fn") == 0).cast(pl.Float64),
        zero_one_loss=(pl.col("fp") + pl.col("fn") != 0).cast(pl.Float64),
        adjusted_accuracy=pl.col("top_true").cast(pl.Float64),
        **rate_scores(tp, fp, fn, beta, zero_division),
    )
    long = scores.unpivot(index=["segment", "weight"], variable_name="metric",
                          value_name="value")
    return long.group_by("segment", "metric").agg(
        value=weighted_mean(pl.col("value"), weight),
        # samples of positive weight the mean skipped (0/0), which scikit-learn counts as 0
        undefined_samples=(pl.col("value").is_null() & (weight > 0)).sum().cast(pl.Int64),
    ).select(
        "segment", "metric",
        average=pl.when(pl.col("metric").is_in(SAMPLE_AVERAGED)).then(pl.lit("samples")),
        label=pl.lit(None),
        value="value",
        undefined_samples="undefined_samples",
    )
