"""Ranking across samples, per label: weight per distinct score, curves and ranking metrics,
and the multiclass one-vs-one AUC.

Mirrors queries/score_counts.sql, distinct_points.sql, ranking_metrics.sql, curve_rates.sql,
pair_counts.sql and ovo_metrics.sql.
"""

from __future__ import annotations

import polars as pl

from mleval_sql.engines.polars._common import nan_average, truth, weight

__all__ = ["curve_rates", "distinct_points", "ovo_metrics", "pair_counts", "ranking_metrics",
           "score_counts"]

_KEYS = ("segment", "label")


def score_counts(predictions: pl.LazyFrame, *, bins: int | None) -> pl.LazyFrame:
    """Weight of true (pos) and false (neg) rows per (segment, label, distinct score)."""
    score = pl.col("score")
    if bins is not None:  # the largest k/bins <= score, exactly
        # polars divides by a literal through its reciprocal (6 / 10 -> 0.6000000000000001);
        # a divisor computed from the data keeps each k / bins correctly rounded, as in SQL
        n = score * 0.0 + bins
        k = (score * bins).floor()
        score = (pl.when((k + 1) / n <= score).then((k + 1) / n)
                 .when(k / n > score).then((k - 1) / n)
                 .otherwise(k / n))
    return predictions.group_by(*_KEYS, score.alias("score")).agg(
        pos=weight.filter(truth).sum(),
        neg=weight.filter(~truth).sum(),
    )


def distinct_points(score_counts: pl.LazyFrame) -> pl.LazyFrame:
    """tp, fp, fn, tn at every distinct score as threshold, plus the origin at +inf."""
    pos, neg = pl.col("pos"), pl.col("neg")
    weighted = score_counts.filter(pos + neg > 0)  # as scikit-learn: zero-weight rows make no point
    points = weighted.sort(*_KEYS, "score", descending=[False, False, True]).select(
        *_KEYS,
        threshold="score",
        tp=pos.cum_sum().over(_KEYS),
        fp=neg.cum_sum().over(_KEYS),
        fn=pos.cum_sum(reverse=True).shift(-1, fill_value=0.0).over(_KEYS),
        tn=neg.cum_sum(reverse=True).shift(-1, fill_value=0.0).over(_KEYS),
    )
    origin = score_counts.group_by(*_KEYS).agg(
        threshold=pl.lit(float("inf")), tp=pl.lit(0.0), fp=pl.lit(0.0), fn=pos.sum(),
        tn=neg.sum())
    return pl.concat([points, origin], how="diagonal")


# -- ranking metrics per label (queries/ranking_metrics.sql) -------------------------------------

RANKING_METRICS = ("roc_auc", "average_precision", "break_even")
_CURVE = ("segment", "average", "label")


def _divide(numerator: pl.Expr, value: float, like: pl.Expr) -> pl.Expr:
    """``numerator / value`` correctly rounded: polars divides by a literal via its reciprocal."""
    return numerator / (like * 0.0 + value)


def _pooled_points(curve_points: pl.LazyFrame, score_counts: pl.LazyFrame) -> pl.LazyFrame:
    """Cumulative tp, fp of every label's scores on one curve per segment (average='micro')."""
    pos, neg = pl.col("pos"), pl.col("neg")
    pooled = (score_counts.group_by("segment", "score").agg(pos.sum(), neg.sum())
              .filter(pos + neg > 0))
    origins = curve_points.select("segment").unique().with_columns(
        score=pl.lit(float("inf")), pos=pl.lit(0.0), neg=pl.lit(0.0))
    return (pl.concat([pooled, origins], how="diagonal")
            .sort("segment", "score", descending=[False, True])
            .select("segment", average=pl.lit("micro"), threshold="score",
                    tp=pos.cum_sum().over("segment"), fp=neg.cum_sum().over("segment")))


def _curve_values(curves: pl.LazyFrame, max_fpr: float | None) -> pl.LazyFrame:
    """roc_auc, average_precision, break_even and support (P) of each curve."""
    tp, fp = pl.col("tp"), pl.col("fp")
    walked = curves.sort(*_CURVE, "threshold", descending=[False, False, False, True],
                         nulls_last=False).with_columns(
        tp0=tp.shift(1).over(_CURVE), fp0=fp.shift(1).over(_CURVE),
        p=tp.max().over(_CURVE), n=fp.max().over(_CURVE))
    tp0, fp0, p, n = (pl.col(c) for c in ("tp0", "fp0", "p", "n"))
    rates = walked.with_columns(
        tpr=pl.when(p > 0).then(tp / p), tpr0=pl.when(p > 0).then(tp0 / p),
        fpr=pl.when(n > 0).then(fp / n), fpr0=pl.when(n > 0).then(fp0 / n))
    tpr, tpr0, fpr, fpr0 = (pl.col(c) for c in ("tpr", "tpr0", "fpr", "fpr0"))
    area = (fpr - fpr0) * (tpr + tpr0) / 2
    if max_fpr is None or max_fpr >= 1:
        auc = area.sum()
    else:  # the curve interpolated at max_fpr, then McClish's correction, as scikit-learn
        m = max_fpr
        partial = (pl.when(fpr <= m).then(area)
                   .when(fpr0 <= m).then(
                       (m - fpr0) * (2 * tpr0 + (tpr - tpr0) * (m - fpr0) / (fpr - fpr0)) / 2)
                   .otherwise(0.0))
        auc = 0.5 * (1 + _divide(partial.sum() - m * m / 2, m - m * m / 2, p.max()))
    step = pl.when(tp + fp > 0).then((tpr - tpr0) * (tp / (tp + fp)))
    crossing = (tp0 + fp0 < p) & (tp + fp >= p)
    break_even = pl.when(crossing).then(
        (tp0 + (tp - tp0) * (p - (tp0 + fp0)) / ((tp + fp) - (tp0 + fp0))) / p)
    return rates.group_by(*_CURVE).agg(
        support=p.max(),
        roc_auc=pl.when((p.max() > 0) & (n.max() > 0)).then(auc),
        average_precision=pl.when(p.max() > 0).then(step.sum()),
        break_even=break_even.max(),
    )


def ranking_metrics(curve_points: pl.LazyFrame, score_counts: pl.LazyFrame, *,
                    max_fpr: float | None) -> pl.LazyFrame:
    """roc_auc, average_precision and break_even per label, micro (pooled) and averaged."""
    labelled = curve_points.select("segment", "label", "threshold", "tp", "fp").with_columns(
        average=pl.lit(None, dtype=pl.String))
    curves = pl.concat([labelled, _pooled_points(curve_points, score_counts)], how="diagonal")
    values = _curve_values(curves, max_fpr)
    segments = curve_points.select("segment").unique()
    per_label = (segments.join(curve_points.select("label").unique(), how="cross")
                 .join(values.filter(pl.col("average").is_null()).drop("average"),
                       on=["segment", "label"], how="left", nulls_equal=True)
                 .with_columns(average=pl.lit(None, dtype=pl.String)))
    micro = segments.join(values.filter(pl.col("average") == "micro").drop("label"),
                          on="segment", how="left", nulls_equal=True)
    grid = pl.concat([per_label, micro], how="diagonal")
    long = grid.unpivot(on=list(RANKING_METRICS), index=["segment", "average", "label", "support"],
                        variable_name="metric", value_name="value")
    value = pl.col("value")
    averaged = (long.filter(pl.col("average").is_null())
                .group_by("segment", "metric")
                .agg(macro=value.mean(),
                     weighted=nan_average(value, pl.col("support")),
                     macro_std=value.std(ddof=0))
                .unpivot(on=["macro", "weighted", "macro_std"], index=["segment", "metric"],
                         variable_name="average", value_name="value"))
    return pl.concat([long.drop("support"), averaged], how="diagonal").select(
        "segment", "metric", "average", "label", "value")


# -- curves (queries/curve_rates.sql) -------------------------------------------------------------

def _kept(kind: str) -> pl.Expr:
    """The points scikit-learn's roc_curve / precision_recall_curve(drop_intermediate=True) keep:
    the first, the last, and (roc) corners where the second difference of fp or tp is not 0,
    (pr) points whose tp differs from the previous or the next point's."""
    keys = ("segment", "label")
    tp, fp = pl.col("tp"), pl.col("fp")
    tp_prev, tp_next = tp.shift(1).over(keys), tp.shift(-1).over(keys)
    if kind == "pr":
        kept = (tp != tp_prev) | (tp_next != tp)
    else:
        fp_prev, fp_next = fp.shift(1).over(keys), fp.shift(-1).over(keys)
        kept = (((fp_next - fp) - (fp - fp_prev)) != 0) | (((tp_next - tp) - (tp - tp_prev)) != 0)
    return tp_prev.is_null() | tp_next.is_null() | kept


def curve_rates(curve_points: pl.LazyFrame, *, kind: str,
                drop_intermediate: bool) -> pl.LazyFrame:
    """The ROC / PR curve table: counts and rates at every distinct score, plus the origin."""
    tp, fp, fn, tn = (pl.col(c) for c in ("tp", "fp", "fn", "tn"))
    origin = tp + fp == 0  # every other point predicts some weight positive
    points = curve_points.filter(~origin)
    if drop_intermediate:
        points = (points.sort(*_KEYS, "threshold", descending=[False, False, True])
                  .filter(_kept(kind)))
    table = pl.concat([curve_points.filter(origin), points], how="diagonal")
    return table.select(
        *_KEYS, "threshold", "tp", "fp", "fn", "tn",
        tpr=pl.when(tp + fn != 0).then(tp / (tp + fn)),
        fpr=pl.when(fp + tn != 0).then(fp / (fp + tn)),
        precision=pl.when(origin).then(1.0).when(tp + fp != 0).then(tp / (tp + fp)),
        recall=pl.when(tp + fn != 0).then(tp / (tp + fn)),
    )


# -- one-vs-one multiclass AUC (queries/pair_counts.sql, queries/ovo_metrics.sql) ---------------

def pair_counts(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """Weight per (segment, scored label, the sample's true label, distinct score)."""
    truths = predictions.filter(truth).select("segment", "sample", truth_label="label")
    return (predictions.join(truths, on=["segment", "sample"], nulls_equal=True)
            .group_by("segment", "label", "truth_label", "score")
            .agg(weight=weight.sum()))


def _directed_auc(pair_counts: pl.LazyFrame, classes: pl.LazyFrame) -> pl.LazyFrame:
    """AUC of label a's score separating true a (positives) from true b (negatives), per (a, b)."""
    label, truth_label, other = pl.col("label"), pl.col("truth_label"), pl.col("other")
    keys = ("segment", "label", "other")
    directed = (pair_counts.join(classes.select("segment", other="class"), on="segment",
                                 nulls_equal=True)
                .filter((other != label) & ((truth_label == label) | (truth_label == other)))
                .group_by(*keys, "score")
                .agg(pos=weight.filter(truth_label == label).sum(),
                     neg=weight.filter(truth_label == other).sum()))
    pos, neg = pl.col("pos"), pl.col("neg")
    ranked = directed.sort(*keys, "score", descending=[False, False, False, True]).with_columns(
        neg_below=neg.cum_sum(reverse=True).shift(-1, fill_value=0.0).over(keys))
    return ranked.group_by(*keys).agg(
        wins=(pos * (pl.col("neg_below") + neg / 2)).sum(), pairs=pos.sum() * neg.sum(),
    ).select(*keys, auc=pl.when(pl.col("pairs") != 0).then(pl.col("wins") / pl.col("pairs")))


def ovo_metrics(pair_counts: pl.LazyFrame) -> pl.LazyFrame:
    """Hand & Till's one-vs-one ROC AUC: macro and prevalence-weighted means over class pairs."""
    classes = (pair_counts.filter(pl.col("label") == pl.col("truth_label"))
               .group_by("segment", pl.col("truth_label").alias("class"))
               .agg(prevalence=weight.sum()))
    directed = _directed_auc(pair_counts, classes)
    back = directed.select("segment", label="other", other="label", auc_back="auc")
    pairs = (directed.filter(pl.col("label") < pl.col("other"))
             .join(back, on=["segment", "label", "other"], nulls_equal=True)
             .join(classes.select("segment", label="class", weight_a="prevalence"),
                   on=["segment", "label"], nulls_equal=True)
             .join(classes.select("segment", other="class", weight_b="prevalence"),
                   on=["segment", "other"], nulls_equal=True)
             .select("segment", auc=(pl.col("auc") + pl.col("auc_back")) / 2,
                     prevalence=pl.col("weight_a") + pl.col("weight_b")))
    auc = pl.col("auc")
    return (pair_counts.select("segment").unique()
            .join(pairs, on="segment", how="left", nulls_equal=True)
            .group_by("segment")
            .agg(macro=auc.mean(), weighted=nan_average(auc, pl.col("prevalence")))
            .unpivot(on=["macro", "weighted"], index="segment", variable_name="average",
                     value_name="value")
            .select("segment", metric=pl.lit("roc_auc_ovo"), average="average",
                    label=pl.lit(None), value="value"))
