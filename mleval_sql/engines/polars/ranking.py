"""Ranking across samples, per label: curves and ranking metrics, and the multiclass one-vs-one
AUC.

Mirrors queries/ranked_points.sql, ranking_metrics.sql, curve_rates.sql,
pair_counts.sql and ovo_metrics.sql.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from mleval_sql.engines.polars._common import keys_as_text, nan_average, truth, weight
from mleval_sql.registry import RANKING, metrics_of

__all__ = ["curve_counts", "curve_rates", "ovo_metrics", "pair_counts", "ranked_points",
           "ranking_metrics"]

_KEYS = ("segment", "label")


def _gridded(bins: int | None) -> pl.Expr:
    """The score, or with ``bins`` the largest k/bins <= score, exactly."""
    score = pl.col("score")
    if bins is None:
        return score
    # polars divides by a literal through its reciprocal (6 / 10 -> 0.6000000000000001);
    # a divisor computed from the data keeps each k / bins correctly rounded, as in SQL
    n = score * 0.0 + bins
    k = (score * bins).floor()
    return (pl.when((k + 1) / n <= score).then((k + 1) / n)
            .when(k / n > score).then((k - 1) / n)
            .otherwise(k / n))


def ranked_points(predictions: pl.LazyFrame, *, bins: int | None,
                  unit_weights: bool = False) -> pl.LazyFrame:
    """tp, fp, fn, tn at every distinct score as threshold, plus the origin at +inf, and the
    weight (pos, neg) at that score: the rows of each label in one run, sorted by score, with
    running sums per label, and a row ends its block of tied scores where the next row has
    another score or label (no aggregation over distinct scores). Mirrors
    queries/ranked_points.sql.

    The cost is the rows', not the labels': each label is numbered (its run), the rows are
    sorted by score and then, stably, by run number (two sorts on one number each: a sort by
    label and score costs 4-6x more), and every other step compares a row with its neighbour
    in the whole table, where ``.over(segment, label)`` windows that shift or run a sum cost
    polars a unit of work per label. The keys join the run numbers back at the end. With
    ``unit_weights`` (no weight column: every weight is 1) the running sums are counts, exact
    as integers: the whole table's running count less the count at the label's origin.
    Otherwise they are windows over the run: the same with sums of float weights would be
    inexact (they cancel across labels: a weight of 1e300 in one ruins the next)."""
    score, tp, fp, run = pl.col("score"), pl.col("tp"), pl.col("fp"), pl.col("run")
    # the sorts carry each label's number (its run), truth, score and (if any) weight: 13 or
    # 21 bytes a row; the keys join back at the end, text as Categorical (4 bytes a row
    # instead of 16 on every point: the consumers give them back as text once grouped)
    labels = predictions.select(*_KEYS).unique().with_row_index("run").cache()
    weights = [] if unit_weights else ["weight"]
    rows = (predictions.select(*_KEYS, "truth", *weights, score=_gridded(bins))
            .join(labels, on=list(_KEYS), nulls_equal=True)
            .select("run", "truth", *weights, "score"))
    # each label's origin as a row of no weight at +inf (no row scores +inf: the checks
    # reject it): it sorts first in its run, and the running sums give it tp = fp = 0 and
    # fn = P, tn = N like any other point (no second pass over the rows)
    origins = labels.select("run", truth=pl.lit(False),
                            **({} if unit_weights else {"weight": pl.lit(0.0)}),
                            score=pl.lit(float("inf")))
    # two sorts, not one by (run, score): polars would fuse two sorts in a row, so the second
    # is a stable gather by run (a sort by a number and a text or a second number goes
    # through row encoding, 4-6x slower at 10M rows)
    runs = (pl.concat([origins, rows]).sort("score", descending=True)
            .select(pl.all().sort_by("run", maintain_order=True)))
    # a block of tied scores starts where the score changes: a label's run too, as it starts
    # with its origin (+inf, which no row scores)
    starts = (score != score.shift(1)).fill_null(True)
    origin = score == float("inf")
    if unit_weights:
        def running(counted: pl.Expr) -> pl.Expr:
            total = counted.cast(pl.Int64).cum_sum()  # the origin's own count cancels
            return total - pl.when(origin).then(total).forward_fill()

        ends = runs.with_columns(tp=running(truth), fp=running(~truth))
        # counts are exact: a block's weight is the step from the previous block's end
        pos = pl.when(origin).then(0).otherwise(tp - tp.shift(1))
        neg = pl.when(origin).then(0).otherwise(fp - fp.shift(1))
    else:
        own_pos = pl.when(truth).then(weight).otherwise(0.0)
        own_neg = pl.when(truth).then(0.0).otherwise(weight)
        ends = runs.with_columns(starts=starts, tp=own_pos.cum_sum().over(run),
                                 fp=own_neg.cum_sum().over(run))
        # a block's weight: the row's own for a block of one row (exact), else the running
        # sums' step from the previous block's end (of the same label: the origin ends the
        # first block)
        pos = pl.when("starts").then(own_pos).otherwise(tp - tp.shift(1))
        neg = pl.when("starts").then(own_neg).otherwise(fp - fp.shift(1))
    last_tied = (score != score.shift(-1)).fill_null(True) | (run != run.shift(-1))
    ends = ends.filter(last_tied).with_columns(  # a kept row that starts its block is alone
        last=(run != run.shift(-1)).fill_null(True))  # the label's last point
    # fn = P - tp with P the last running sum (a sequential sum): exactly 0 once no positive
    # weight is left; abs() turns the -0.0 of x - x into 0.0
    total_p = pl.when("last").then(tp).backward_fill()
    total_n = pl.when("last").then(fp).backward_fill()
    counts = {"tp": tp, "fp": fp, "fn": (total_p - tp).abs(), "tn": (total_n - fp).abs(),
              "pos": pos, "neg": neg}
    points = ends.select(
        "run", threshold="score", **{c: e.cast(pl.Float64) for c, e in counts.items()})
    if not unit_weights:  # zero-weight rows make no point (every row weighs 1 otherwise)
        points = points.filter((pl.col("pos") + pl.col("neg") > 0)
                               | (pl.col("threshold") == float("inf")))
    keys = labels.with_columns(pl.col(pl.String).cast(pl.Categorical))
    return points.join(keys, on="run").select(*_KEYS, pl.exclude("run", *_KEYS))


def curve_counts(curve_points: pl.LazyFrame, *, threshold: float) -> pl.LazyFrame:
    """Weighted tp, fp, fn, tn per (segment, label) at ``threshold``, read off the curve table
    (the blocks of tied scores at or above it are predicted positive): the decision counts of a
    request that also ranks, from the same sorted pass."""
    above = pl.col("threshold") >= threshold
    pos, neg = pl.col("pos"), pl.col("neg")
    # when/then rather than a filter inside the aggregation, which keeps each group's row indices
    return keys_as_text(curve_points.group_by(*_KEYS).agg(
        tp=pl.when(above).then(pos).otherwise(0.0).sum(),
        fp=pl.when(above).then(neg).otherwise(0.0).sum(),
        fn=pl.when(above).then(0.0).otherwise(pos).sum(),
        tn=pl.when(above).then(0.0).otherwise(neg).sum(),
    ))


# -- ranking metrics per label (queries/ranking_metrics.sql) -------------------------------------

RANKING_METRICS = metrics_of(RANKING)


def _divide(numerator: pl.Expr, value: float, like: pl.Expr) -> pl.Expr:
    """``numerator / value`` correctly rounded: polars divides by a literal via its reciprocal."""
    return numerator / (like * 0.0 + value)


def _scale(total: pl.Expr) -> pl.Expr:
    """A power of two near 1 / ``total``: scaling by it is exact, so the trapezoids of whole
    weights sum exactly (as P * N would) without P * N overflowing or underflowing."""
    return pl.lit(2.0).pow(-total.log(2).ceil())


def _label_points(curve_points: pl.LazyFrame) -> pl.LazyFrame:
    """Each point of each label's curve with the label's P and N (the previous point, tp0 =
    tp - pos and fp0 = fp - neg, and the scales are computed where they are summed: four
    columns fewer on every point)."""
    # P and N from the origin (+inf), where fn = P and tn = N: the same value on every point
    return curve_points.select(*_KEYS, "threshold", "tp", "fp", "pos", "neg",
                               p=pl.col("fn").max().over(_KEYS),
                               n=pl.col("tn").max().over(_KEYS))


def _micro_points(curve_points: pl.LazyFrame) -> pl.LazyFrame:
    """Every label's points on one curve per segment (average='micro'): a row is one label's
    weight at a score; tp, fp are those of its tied block and tp0, fp0 those just above it."""
    pos, neg, threshold = pl.col("pos"), pl.col("neg"), pl.col("threshold")
    tp, fp = pos.cum_sum(), neg.cum_sum()
    # sorted by threshold, a segment's tied rows are consecutive: a block ends where the next
    # row of the segment has another threshold, and starts where the previous one has
    last = (threshold != threshold.shift(-1)).fill_null(True)
    first = (threshold != threshold.shift(1)).fill_null(True)
    return (curve_points.filter(pos + neg > 0)  # not the origins
            .select("segment", "threshold", "pos", "neg")
            .sort("threshold", descending=True)
            .select(
                "segment", "threshold", "pos", "neg",
                tp=pl.when(last).then(tp).backward_fill().over("segment"),
                fp=pl.when(last).then(fp).backward_fill().over("segment"),
                tp0=pl.when(first).then(tp.shift(1, fill_value=0.0)).forward_fill()
                .over("segment"),
                fp0=pl.when(first).then(fp.shift(1, fill_value=0.0)).forward_fill()
                .over("segment"),
                p=tp.last().over("segment"),
                n=fp.last().over("segment"),
            ))


def _curve_values(points: pl.LazyFrame, keys: list[str], max_fpr: float | None, *,
                  tp0: pl.Expr, fp0: pl.Expr) -> pl.LazyFrame:
    """roc_auc, average_precision, break_even and support (P) of each curve: every term is local
    to a row (its block leads from (tp0, fp0) to (tp, fp)), so each is one sum per curve."""
    tp, fp, pos, neg, p, n = (pl.col(c) for c in ("tp", "fp", "pos", "neg", "p", "n"))
    # never a product of raw weight sums (P * N overflows at weights of 1e300): the trapezoids
    # in units of P and N scaled by powers of two near 1 / P and 1 / N (_scale), the other
    # terms from rates (tp / P, fp / N)
    big_p, big_n = p.max(), n.max()
    p_scale, n_scale = _scale(p), _scale(n)
    tpr, tpr0 = tp / p, tp0 / p
    fpr, fpr0 = fp / n, fp0 / n
    if max_fpr is None or max_fpr >= 1:
        auc = ((neg * n_scale) * ((tp + tp0) * p_scale)).sum() / (
            2 * (p * p_scale).max() * (n * n_scale).max())
    else:  # the curve interpolated at max_fpr, then McClish's correction, as scikit-learn
        m = max_fpr
        partial = (pl.when(fpr <= m).then(neg / n * (tpr + tpr0) / 2)
                   .when(fpr0 <= m).then(  # the block crossing max_fpr, cut there
                       neg / (fp - fp0) * (m - fpr0)
                       * (2 * tpr0 + (tpr - tpr0) * (m - fpr0) / (fpr - fpr0)) / 2)
                   .otherwise(0.0)).sum()
        auc = 0.5 * (1 + _divide(partial - m * m / 2, m - m * m / 2, big_p))
    step = pl.when(pos > 0).then(pos / p * (tp / (tp + fp))).sum()
    # the row's share of positive weight among the first P predicted: all of it in blocks that
    # end by P, none past P, the share (P - n_before) / n_block in the block that crosses P
    within = pl.when((pos > 0) & (tp + fp > tp0 + fp0)).then(
        pos / p * ((p - (tp0 + fp0)) / ((tp + fp) - (tp0 + fp0))).clip(0.0, 1.0)).sum()
    return points.group_by(*keys).agg(
        support=big_p,
        roc_auc=pl.when((big_p > 0) & (big_n > 0)).then(auc),
        average_precision=pl.when(big_p > 0).then(step),
        break_even=pl.when(big_p > 0).then(within),
    )


def ranking_metrics(curve_points: pl.LazyFrame, *, max_fpr: float | None, micro: bool,
                    keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """roc_auc, average_precision and break_even per label (support: P) and, if ``micro``, on
    the pooled curve (whose sort costs more than all per-label curves together), one micro row
    per segment; label_averages adds the rest. ``keep``: only these metrics."""
    tp, fp, pos, neg = (pl.col(c) for c in ("tp", "fp", "pos", "neg"))
    labels = _curve_values(_label_points(curve_points), list(_KEYS), max_fpr, tp0=tp - pos,
                           fp0=fp - neg)
    curves = labels.with_columns(average=pl.lit(None, dtype=pl.String))
    if micro:
        pooled = _curve_values(_micro_points(curve_points), ["segment"], max_fpr,
                               tp0=pl.col("tp0"), fp0=pl.col("fp0"))
        segments = labels.select("segment").unique()
        curves = pl.concat([curves, segments.join(pooled, on="segment", how="left",
                                                  nulls_equal=True)
                            .with_columns(average=pl.lit("micro"))], how="diagonal")
    metrics = [m for m in RANKING_METRICS if keep is None or m in keep[0]]
    return keys_as_text(curves).unpivot(
        on=metrics, index=["segment", "average", "label", "support"], variable_name="metric",
        value_name="value").select("segment", "metric", "average", "label", "value", "support")


# -- curves (queries/curve_rates.sql) -------------------------------------------------------------

def _kept_by_sklearn(kind: str) -> pl.Expr:
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
    if drop_intermediate:  # thresholds are distinct within a label: one sort orders them all
        points = points.sort("threshold", descending=True).filter(_kept_by_sklearn(kind))
    table = pl.concat([curve_points.filter(origin), points], how="diagonal")
    return keys_as_text(table).select(
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
    # as shares of P and N: a product of weights (pos * neg) would under- or overflow
    return ranked.group_by(*keys).agg(
        auc=pl.when((pos.sum() != 0) & (neg.sum() != 0))
        .then((pos / pos.sum() * ((pl.col("neg_below") + neg / 2) / neg.sum())).sum()))


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
