"""Ranking across labels, per sample: coverage, ranking loss, LRAP, one-error, precision@k and
recall@k; DCG and NDCG by graded relevance (polars plans).

Mirrors queries/sample_ranks.sql, label_ranking_metrics.sql, sample_gains.sql and
gain_metrics.sql.
"""

from __future__ import annotations

import math

import polars as pl

from mleval_sql.engines.polars._common import truth, weight
from mleval_sql.registry import GRADED, LABEL_RANKING, metrics_of

__all__ = ["gain_metrics", "label_ranking_metrics", "sample_gains", "sample_ranks"]

_score, _label = pl.col("score"), pl.col("label")
METRICS = metrics_of(LABEL_RANKING)


def sample_ranks(predictions: pl.LazyFrame, *, k: int) -> pl.LazyFrame:
    """Per sample: label counts, coverage, wrong (true, false) pairs, LRAP and top-k hits.

    A label's rank counts the sample's labels scored >= it (ties at their maximum, as
    scikit-learn); positions for the top label and the top k order ties by the smallest label.
    """
    n_ge = _score.rank("max", descending=True).cast(pl.Int64)
    # ranked among the true labels only: the false ones are null and rank null
    true_ge = pl.when(truth).then(_score).rank("max", descending=True).cast(pl.Int64)
    by_position = truth.sort_by(_score, _label, descending=[True, False])
    n_true, n_labels = truth.sum(), pl.len()
    return predictions.group_by("segment", "sample").agg(
        weight=weight.first(),
        n_labels=n_labels,
        n_true=n_true,
        coverage=n_ge.filter(truth).max().fill_null(0),
        wrong_pairs=(n_ge - true_ge).filter(truth).sum(),
        lrap=pl.when((n_true == 0) | (n_true == n_labels)).then(1.0)
        .otherwise((true_ge / n_ge).filter(truth).mean()),
        top_true=by_position.first(),
        n_at_k=by_position.head(k).len(),
        hits_at_k=by_position.head(k).sum(),
    )


def label_ranking_metrics(sample_ranks: pl.LazyFrame) -> pl.LazyFrame:
    """Each metric's per-sample value, averaged over samples weighted by sample weight."""
    n_true = pl.col("n_true").cast(pl.Float64)
    n_labels = pl.col("n_labels").cast(pl.Float64)
    hits = pl.col("hits_at_k").cast(pl.Float64)
    scores = sample_ranks.select(
        "segment", "weight",
        coverage_error=pl.col("coverage").cast(pl.Float64),
        label_ranking_loss=pl.when((n_true == 0) | (n_true == n_labels)).then(0.0)
        .otherwise(pl.col("wrong_pairs") / (n_true * (n_labels - n_true))),
        label_ranking_average_precision=pl.col("lrap").cast(pl.Float64),
        one_error=pl.when(pl.col("top_true")).then(0.0).otherwise(1.0),
        precision_at_k=hits / pl.col("n_at_k"),
        recall_at_k=pl.when(n_true != 0).then(hits / n_true),
    )
    value = pl.col("value")
    kept = weight.filter(value.is_not_null()).sum()
    return (scores.unpivot(index=["segment", "weight"], on=list(METRICS), variable_name="metric",
                           value_name="value")
            .group_by("segment", "metric")
            .agg(value=(value * weight).sum() / pl.when(kept != 0).then(kept))
            .select("segment", "metric", average=pl.lit(None, dtype=pl.String),
                    label=pl.lit(None), value="value"))


def sample_gains(predictions: pl.LazyFrame, *, k: int, log_base: float,
                 ignore_ties: bool) -> pl.LazyFrame:
    """Per sample: DCG and NDCG of its labels ranked by score, the truth read as graded
    relevance (a boolean as 1 / 0), to position ``k``.

    Ties as scikit-learn: each label of a block of tied scores gains the block's mean
    relevance at its own position (``ignore_ties``: its own relevance, tied labels in label
    order, the last first, as scikit-learn's reversed argsort). The discount is
    ln(log_base) / ln(position + 1); NDCG divides by the ideal ranking's DCG (0 where that
    is 0), with the base cancelled.

    >>> rows = pl.LazyFrame({"segment": 0, "sample": 1, "label": list("abcde"),
    ...                      "score": [.1, .2, .3, 4, 70], "truth": [10, 0, 0, 1, 5],
    ...                      "weight": 1.0})
    >>> gains = sample_gains(rows, k=5, log_base=2, ignore_ties=False).collect()
    >>> round(gains["dcg"].item(), 4), round(gains["ndcg"].item(), 4)
    (9.4995, 0.6957)
    """
    gain = pl.col("gain")
    rows = predictions.select("segment", "sample", "label", "score", "weight",
                              gain=pl.col("truth").cast(pl.Float64))
    ranked = gain if ignore_ties else gain.mean().over("segment", "sample", "score")
    rows = rows.with_columns(ranked=ranked)
    # ln(position + 1) of positions 1..k (fewer where the sample has fewer labels)
    discount = pl.int_range(2, pl.len() + 2).cast(pl.Float64).log().head(k)
    by_score = pl.col("ranked").sort_by(["score", "label"], descending=[True, True]).head(k)
    gained = (by_score / discount).sum()
    ideal = (gain.sort(descending=True).head(k) / discount).sum()
    per_sample = rows.group_by("segment", "sample").agg(
        weight=weight.first(), gained=gained, ideal=ideal)
    return per_sample.select(
        "segment", "sample", "weight",
        dcg=pl.col("gained") * math.log(log_base),
        ndcg=pl.when(pl.col("ideal") == 0).then(0.0)
        .otherwise(pl.col("gained") / pl.col("ideal")))


def gain_metrics(sample_gains: pl.LazyFrame) -> pl.LazyFrame:
    """DCG and NDCG averaged over samples weighted by sample weight (null: no weight)."""
    value, total = pl.col("value"), weight.sum()
    return (sample_gains.unpivot(index=["segment", "weight"], on=list(metrics_of(GRADED)),
                                 variable_name="metric", value_name="value")
            .group_by("segment", "metric")
            .agg(value=(value * weight).sum() / pl.when(total != 0).then(total))
            .select("segment", "metric", average=pl.lit(None, dtype=pl.String),
                    label=pl.lit(None), value="value"))
