"""Ranking across samples, per label: curves and ranking metrics, and the multiclass one-vs-one
AUC.

Mirrors queries/ranked_points.sql, ranking_metrics.sql, curve_metrics.sql, curve_rates.sql,
delong.sql, placements.sql, pair_counts.sql and ovo_metrics.sql.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from mleval_sql.engines.polars._common import grid_index, keys_as_text, nan_average, truth, weight
from mleval_sql.params import curve_bins
from mleval_sql.registry import RANKING, metrics_of

__all__ = ["block_placements", "curve_counts", "curve_metrics", "curve_rates", "delong",
           "det_rates", "ovo_metrics", "pair_counts", "placements", "point_counts",
           "ranked_points", "ranking_metrics"]

_KEYS = ("segment", "label")


def _gridded(bins: int | None) -> pl.Expr:
    """The score, or with ``bins`` the largest k/bins <= score, exactly."""
    score = pl.col("score")
    if bins is None:
        return score
    k, n = grid_index(score, bins)
    return k / n


def ranked_points(predictions: pl.LazyFrame, *, bins: int | None,
                  unit_weights: bool = False) -> pl.LazyFrame:
    """tp, fp, fn, tn at every distinct score as threshold, plus the origin at +inf, and the
    weight (pos, neg) at that score: the rows of each label in one run, sorted by score, with
    running sums per label, and a row ends its block of tied scores where the next row has
    another score or label (no aggregation over distinct scores). Mirrors
    queries/ranked_points.sql."""
    points, labels = _run_points(predictions, bins=bins, unit_weights=unit_weights)
    points = points.cache()  # read twice: the origins and the points
    tp = pl.col("tp")
    # each run's origin (+inf: nothing predicted positive) from its last point, where tp = P
    origins = points.filter("last").select(
        "run", threshold=pl.lit(float("inf")), tp=pl.lit(0.0), fp=pl.lit(0.0),
        fn=tp + pl.col("fn"), tn=pl.col("fp") + pl.col("tn"), pos=pl.lit(0.0), neg=pl.lit(0.0))
    points = points.drop("last", "p", "n")
    if not unit_weights:  # zero-weight rows make no point (every row weighs 1 otherwise)
        points = points.filter(pl.col("pos") + pl.col("neg") > 0)
    keys = labels.with_columns(pl.col(pl.String).cast(pl.Categorical))
    # a left join keeps the points in place and gathers only the keys (Categorical when text)
    return (pl.concat([origins, points])
            .join(keys, on="run", how="left", maintain_order="left")
            .select(*_KEYS, pl.exclude("run", *_KEYS)))


def _run_points(predictions: pl.LazyFrame, *, bins: int | None,
                unit_weights: bool) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The points of :func:`ranked_points` but the origins, by each label's number (``run``),
    with the label's totals ``p`` and ``n`` on each (and ``last``: its last point), zero-weight
    blocks included; and the table of run numbers and keys.

    The cost is the rows', not the labels': each label is numbered (its run), the rows are
    sorted by score and then, stably, by run number (two sorts on one number each: a sort by
    label and score costs 2-3x more), and every other step compares a row with its neighbour
    in the whole table, where ``.over(segment, label)`` windows that shift or run a sum cost
    polars a unit of work per label. The keys come back by run number at the end. With
    ``unit_weights`` (no weight column: every weight is 1) the running sums are counts, exact
    as integers: the whole table's running count less the count before the run. Otherwise
    they are windows over the run: the same with sums of float weights would be inexact (they
    cancel across labels: a weight of 1e300 in one ruins the next)."""
    score, tp, fp, run = pl.col("score"), pl.col("tp"), pl.col("fp"), pl.col("run")
    labels = predictions.select(*_KEYS).unique().with_row_index("run").cache()
    weights = [] if unit_weights else ["weight"]
    # the sorts carry each label's number (its run), truth, score and (if any) weight: 13 or
    # 21 bytes a row
    rows = (predictions.select(*_KEYS, "truth", *weights, score=_gridded(bins))
            .join(labels, on=list(_KEYS), nulls_equal=True)
            .select("run", "truth", *weights, "score"))
    # cached between the sorts: polars would otherwise fuse them into one sort by (run, score),
    # through row encoding
    runs = rows.sort("score", descending=True).cache().sort("run", maintain_order=True)
    run_starts = (run != run.shift(1)).fill_null(True)
    run_ends = (run != run.shift(-1)).fill_null(True)
    if unit_weights:
        row = pl.int_range(pl.len(), dtype=pl.Int64)
        counted = truth.cast(pl.Int64).cum_sum()
        seen = counted - pl.when(run_starts).then(counted - truth.cast(pl.Int64)).forward_fill()
        summed = runs.with_columns(tp=seen, fp=row - pl.when(run_starts).then(row).forward_fill()
                                   + 1 - seen)
    else:
        own_pos = pl.when(truth).then(weight).otherwise(0.0)
        own_neg = pl.when(truth).then(0.0).otherwise(weight)
        summed = runs.with_columns(  # a block of one row: its own weight (exact)
            tp=own_pos.cum_sum().over(run), fp=own_neg.cum_sum().over(run),
            alone=run_starts | (score != score.shift(1)), own_pos=own_pos, own_neg=own_neg)
    # each block's last row: its running sums are the counts at its score
    ends = summed.filter((score != score.shift(-1)).fill_null(True) | run_ends)
    # a block's weight is the step from the previous block's end (of the same run)
    pos = pl.when(run_starts).then(tp).otherwise(tp - tp.shift(1))
    neg = pl.when(run_starts).then(fp).otherwise(fp - fp.shift(1))
    if not unit_weights:
        pos = pl.when("alone").then("own_pos").otherwise(pos)
        neg = pl.when("alone").then("own_neg").otherwise(neg)
    # fn = P - tp with P the run's last running sum (a sequential sum): exactly 0 once no
    # positive weight is left; abs() turns the -0.0 of x - x into 0.0
    total_p = pl.when(run_ends).then(tp).backward_fill()
    total_n = pl.when(run_ends).then(fp).backward_fill()
    counts = {"tp": tp, "fp": fp, "fn": (total_p - tp).abs(), "tn": (total_n - fp).abs(),
              "pos": pos, "neg": neg, "p": total_p, "n": total_n}
    points = ends.select("run", threshold="score", last=run_ends,
                         **{c: e.cast(pl.Float64) for c, e in counts.items()})
    return points, labels


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


# -- ranking metrics per label (queries/ranking_metrics.sql, curve_metrics.sql) -----------------

RANKING_METRICS = metrics_of(RANKING)


def _divide(numerator: pl.Expr, value: float, like: pl.Expr) -> pl.Expr:
    """``numerator / value`` correctly rounded: polars divides by a literal via its reciprocal."""
    return numerator / (like * 0.0 + value)


def _scale(total: pl.Expr) -> pl.Expr:
    """A power of two near 1 / ``total``: scaling by it is exact, so the trapezoids of whole
    weights sum exactly (as P * N would) without P * N overflowing or underflowing."""
    return pl.lit(2.0).pow(-total.log(2).ceil())


def _with_scales(totals: pl.LazyFrame) -> pl.LazyFrame:
    return totals.with_columns(p_scale=_scale(pl.col("p")), n_scale=_scale(pl.col("n")))


def _label_points(curve_points: pl.LazyFrame) -> pl.LazyFrame:
    """Each point of each label's curve with the label's P and N (and their scales), from its
    origin (+inf), where fn = P and tn = N: a table of the labels joined to the points, which
    the streaming engine pipes into the sums (a window would materialise four columns)."""
    totals = curve_points.group_by(*_KEYS).agg(p=pl.col("fn").max(), n=pl.col("tn").max())
    return curve_points.select(*_KEYS, "threshold", "tp", "fp", "pos", "neg").join(
        _with_scales(totals), on=list(_KEYS), nulls_equal=True)


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
            ).pipe(_with_scales))


def _curve_values(points: pl.LazyFrame, keys: list[str], max_fpr: float | None,
                  metrics: Sequence[str], *, tp0: pl.Expr, fp0: pl.Expr) -> pl.LazyFrame:
    """support (P) and each of ``metrics`` (roc_auc, average_precision, break_even) of each
    curve: every term is local to a row (its block leads from (tp0, fp0) to (tp, fp)), so
    each is a plain sum per curve of terms computed row by row. P and N are the largest tp
    and fp of the curve (its last point's); the rows' own ``p`` and ``n`` are read only by
    the terms that need them (a partial AUC, break_even), so a table without them serves the
    rest. Weighted points carry ``p_scale`` and ``n_scale`` (:func:`_with_scales`); whole
    counts need none."""
    tp, fp, pos, neg, p, n = (pl.col(c) for c in ("tp", "fp", "pos", "neg", "p", "n"))
    # never a product of raw weight sums (P * N overflows at weights of 1e300): the trapezoids
    # in units of P and N scaled by powers of two near 1 / P and 1 / N (_scale), the other
    # terms from rates (tp / P, fp / N)
    scaled = "p_scale" in points.collect_schema()  # else whole counts: scaling by 1 is exact
    p_scale, n_scale = ((pl.col("p_scale"), pl.col("n_scale")) if scaled
                        else (pl.lit(1.0), pl.lit(1.0)))
    tpr, tpr0 = tp / p, tp0 / p
    fpr, fpr0 = fp / n, fp0 / n
    terms: dict[str, pl.Expr] = {}
    if "roc_auc" in metrics and (max_fpr is None or max_fpr >= 1):
        terms["roc_auc"] = (neg * n_scale) * ((tp + tp0) * p_scale)
    elif "roc_auc" in metrics:  # the curve interpolated at max_fpr (McClish-corrected below)
        m = max_fpr
        terms["roc_auc"] = (pl.when(fpr <= m).then(neg / n * (tpr + tpr0) / 2)
                            .when(fpr0 <= m).then(  # the block crossing max_fpr, cut there
                                neg / (fp - fp0) * (m - fpr0)
                                * (2 * tpr0 + (tpr - tpr0) * (m - fpr0) / (fpr - fpr0)) / 2)
                            .otherwise(0.0))
    if "average_precision" in metrics:  # over P once summed
        terms["average_precision"] = pl.when(pos > 0).then(pos * (tp / (tp + fp)))
    if "break_even" in metrics:
        # the row's share of positive weight among the first P predicted: all of it in blocks
        # that end by P, none past P, the share (P - n_before) / n_block in the block crossing P
        terms["break_even"] = pl.when((pos > 0) & (tp + fp > tp0 + fp0)).then(
            pos / p * ((p - (tp0 + fp0)) / ((tp + fp) - (tp0 + fp0))).clip(0.0, 1.0))
    scales = ["p_scale", "n_scale"] if scaled else []
    sums = (points.select(*keys, "tp", "fp", *scales, **terms)
            .group_by(*keys).agg(tp.max().alias("p"), fp.max().alias("n"),
                                 *(pl.col(c).first() for c in scales),
                                 *(pl.col(t).sum() for t in terms)))
    big_p, big_n = p, n
    values: dict[str, pl.Expr] = {}
    if "roc_auc" in terms:
        area = pl.col("roc_auc")
        auc = (area / (2 * (big_p * p_scale) * (big_n * n_scale)) if max_fpr is None
               or max_fpr >= 1 else
               0.5 * (1 + _divide(area - max_fpr * max_fpr / 2,
                                  max_fpr - max_fpr * max_fpr / 2, big_p)))
        values["roc_auc"] = pl.when((big_p > 0) & (big_n > 0)).then(auc)
    if "average_precision" in terms:
        values["average_precision"] = pl.when(big_p > 0).then(
            pl.col("average_precision") / big_p)
    if "break_even" in terms:
        values["break_even"] = pl.when(big_p > 0).then(pl.col("break_even"))
    return sums.select(*keys, support=big_p, **values)


def ranking_metrics(predictions: pl.LazyFrame, *, bins: int | None, max_fpr: float | None,
                    micro: bool, unit_weights: bool, class_counts: bool, label_totals: bool,
                    keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """roc_auc, average_precision and break_even per label (support: P) and, if ``micro``, of
    the labels pooled: the rows of queries/ranking_metrics.sql. polars' cheapest exact plan
    is its curve table (one sort, running sums as cumulative sums, no window per label; its
    ranks would cost a sort as well), so they are read off it whatever ``class_counts`` and
    ``label_totals`` say.
    ``keep``: only these metrics. Every weight 1 and no pooled curve: each label's sums by its
    run number, off the points as the sort leaves them (no origins, no keys on 10M points, its
    totals already on each)."""
    if micro or not unit_weights:
        return curve_metrics(ranked_points(predictions, bins=bins, unit_weights=unit_weights),
                             max_fpr=max_fpr, micro=micro, unit_weights=unit_weights, keep=keep)
    tp, fp, pos, neg = (pl.col(c) for c in ("tp", "fp", "pos", "neg"))
    metrics = [m for m in RANKING_METRICS if keep is None or m in keep[0]]
    points, labels = _run_points(predictions, bins=bins, unit_weights=True)
    # whole counts: P * N cannot overflow, so no scales (as scaling by 1, the bits any power of
    # two gives)
    values = _curve_values(points, ["run"], max_fpr, metrics, tp0=tp - pos, fp0=fp - neg)
    curves = (labels.join(values, on="run", how="left").drop("run")
              .with_columns(average=pl.lit(None, dtype=pl.String)))
    return _long(curves, metrics)


def curve_metrics(curve_points: pl.LazyFrame, *, max_fpr: float | None, micro: bool,
                  unit_weights: bool = False,
                  keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """roc_auc, average_precision and break_even per label (support: P) and, if ``micro``, on
    the pooled curve (whose sort costs more than all per-label curves together), one micro row
    per segment, read off the curve table; label_averages adds the rest. ``keep``: only these
    metrics. ``unit_weights`` switches the SQL to exact sums of its fractional terms (in no
    order: reproducible on any number of threads); polars sums them as doubles either way."""
    tp, fp, pos, neg = (pl.col(c) for c in ("tp", "fp", "pos", "neg"))
    metrics = [m for m in RANKING_METRICS if keep is None or m in keep[0]]
    labels = _curve_values(_label_points(curve_points), list(_KEYS), max_fpr, metrics,
                           tp0=tp - pos, fp0=fp - neg)
    curves = labels.with_columns(average=pl.lit(None, dtype=pl.String))
    if micro:
        pooled = _curve_values(_micro_points(curve_points), ["segment"], max_fpr, metrics,
                               tp0=pl.col("tp0"), fp0=pl.col("fp0"))
        segments = labels.select("segment").unique()
        curves = pl.concat([curves, segments.join(pooled, on="segment", how="left",
                                                  nulls_equal=True)
                            .with_columns(average=pl.lit("micro"))], how="diagonal")
    return _long(curves, metrics)


def _long(curves: pl.LazyFrame, metrics: Sequence[str]) -> pl.LazyFrame:
    """A row per curve and metric: ranking_metrics.sql's columns."""
    return keys_as_text(curves).unpivot(
        on=metrics, index=["segment", "average", "label", "support"], variable_name="metric",
        value_name="value").select("segment", "metric", "average", "label", "value", "support")


# -- DeLong's variance of the AUC (queries/delong.sql, queries/placements.sql) --------------------

def block_placements(curve_points: pl.LazyFrame) -> pl.LazyFrame:
    """Each point of each label's curve with the label's P and N (fn and tn at its origin, the
    largest on the curve) and the placements of its block: ``v10`` = (tn + neg / 2) / N for
    its positives, ``v01`` = (tp - pos / 2) / P for its negatives; null where P or N is 0.
    Mirrors queries/block_placements.sql."""
    totals = curve_points.group_by(*_KEYS).agg(p=pl.col("fn").max(), n=pl.col("tn").max())
    p, n, both = pl.col("p"), pl.col("n"), (pl.col("p") > 0) & (pl.col("n") > 0)
    return curve_points.join(totals, on=list(_KEYS), nulls_equal=True).select(
        *_KEYS, "threshold", "pos", "neg", "p", "n",
        v10=pl.when(both).then((pl.col("tn") + pl.col("neg") / 2) / n),
        v01=pl.when(both).then((pl.col("tp") - pl.col("pos") / 2) / p))


def delong(block_placements: pl.LazyFrame) -> pl.LazyFrame:
    """DeLong's variance of each label's ROC AUC from its curve's blocks (Sun & Xu's sorted
    form), weights as frequency weights: p, n, auc (null where P or N is 0) and variance =
    S10 / P + S01 / N (null where P <= 1 or N <= 1), the squared deviations from the AUC
    summed in a second pass with the AUC known. Terms are shares (pos / P, tn / N), never
    products of weights. Mirrors queries/delong.sql."""
    p, n, auc = pl.col("p"), pl.col("n"), pl.col("auc")
    both = (p > 0) & (n > 0)
    placed = block_placements.select(
        *_KEYS, "p", "n", "v10", "v01",
        pos_share=pl.when(both).then(pl.col("pos") / p),
        neg_share=pl.when(both).then(pl.col("neg") / n))
    pos_share, neg_share, v10, v01 = (pl.col(c) for c in ("pos_share", "neg_share", "v10",
                                                          "v01"))
    totals = (placed.group_by(*_KEYS)
              .agg(p.first(), n.first(), auc=(pos_share * v10).sum())
              .with_columns(auc=pl.when(both).then(auc)))
    return keys_as_text(
        placed.join(totals.select(*_KEYS, "auc"), on=list(_KEYS), nulls_equal=True)
        .group_by(*_KEYS)
        .agg(s10=(pos_share * (v10 - auc) * (v10 - auc)).sum(),
             s01=(neg_share * (v01 - auc) * (v01 - auc)).sum())
        .join(totals, on=list(_KEYS), nulls_equal=True)
        .select(*_KEYS, "p", "n", "auc",
                variance=pl.when((p > 1) & (n > 1))
                .then(pl.col("s10") / (p - 1) + pl.col("s01") / (n - 1))))


def ranked_delong(predictions: pl.LazyFrame, *, bins: int | None, max_fpr: float | None,
                  keep: tuple[Sequence[str], Sequence[str]] | None = None
                  ) -> tuple[pl.LazyFrame, pl.LazyFrame]:
    """The rows of :func:`curve_metrics` and of :func:`delong` from one sorted pass over
    whole-count rows (every weight 1), as :func:`ranking_metrics` reads its metrics: each
    label's blocks by its run number, with its totals on each (no origins, no keys on every
    block, no join of the blocks to their label's totals), the keys back at the end. The
    same terms as block_placements and delong, summed per run."""
    tp, fp, pos, neg, p, n = (pl.col(c) for c in ("tp", "fp", "pos", "neg", "p", "n"))
    metrics = [m for m in RANKING_METRICS if keep is None or m in keep[0]]
    points, labels = _run_points(predictions, bins=bins, unit_weights=True)
    # read by the metrics and by DeLong's two passes: the columns they read
    points = points.select("run", "tp", "fp", "tn", "pos", "neg", "p", "n").cache()
    values = _curve_values(points, ["run"], max_fpr, metrics, tp0=tp - pos, fp0=fp - neg)
    curves = (labels.join(values, on="run", how="left").drop("run")
              .with_columns(average=pl.lit(None, dtype=pl.String)))
    both = (p > 0) & (n > 0)
    placed = points.select(
        "run", "p", "n", v10=pl.when(both).then((pl.col("tn") + neg / 2) / n),
        v01=pl.when(both).then((tp - pos / 2) / p),
        pos_share=pl.when(both).then(pos / p), neg_share=pl.when(both).then(neg / n))
    pos_share, neg_share, v10, v01 = (pl.col(c) for c in ("pos_share", "neg_share", "v10",
                                                          "v01"))
    auc = pl.col("auc")
    # the AUC of each run on its blocks (a window: the runs lie in order), then the squared
    # deviations from it
    sums = (placed.with_columns(auc=(pos_share * v10).sum().over("run"))
            .group_by("run").agg(p.first(), n.first(), auc.first(),
                                 s10=(pos_share * (v10 - auc) * (v10 - auc)).sum(),
                                 s01=(neg_share * (v01 - auc) * (v01 - auc)).sum()))
    variance = labels.join(sums, on="run", how="left").select(
        *_KEYS, "p", "n", auc=pl.when(both).then(auc),
        variance=pl.when((p > 1) & (n > 1)).then(pl.col("s10") / (p - 1)
                                                 + pl.col("s01") / (n - 1)))
    return _long(curves, metrics), keys_as_text(variance)


def placements(predictions: pl.LazyFrame, block_placements: pl.LazyFrame, *,
               bins: int | None) -> pl.LazyFrame:
    """Each prediction row's DeLong placement: V10 of its block for a positive row, V01 for a
    negative one (the per-sample term of a paired DeLong test), its block found by its score
    as ranked_points puts it on the curve (with ``bins``: its bin). Null where P or N is 0, and
    for a row whose score only zero-weight rows have (no point on the curve). Mirrors
    queries/placements.sql."""
    schema = predictions.collect_schema()
    # the curve's keys as the rows have them (ranked_points gives text keys as Categorical)
    blocks = (block_placements
              .select(*_KEYS, "v10", "v01", score="threshold")
              .cast({k: schema[k] for k in _KEYS}))
    rows = predictions.select(*_KEYS, "sample", "truth", "weight", score=_gridded(bins))
    return keys_as_text(
        rows.join(blocks, on=[*_KEYS, "score"], how="left", nulls_equal=True,
                  maintain_order="left")
        .select(*_KEYS, "sample", "truth", "weight",
                placement=pl.when(truth).then("v10").otherwise("v01")))


# -- curves (queries/curve_rates.sql) -------------------------------------------------------------

def _kept_by_sklearn(kind: str) -> pl.Expr:
    """The points scikit-learn's roc_curve / precision_recall_curve(drop_intermediate=True) keep:
    the first, the last, and (roc) corners where the second difference of fp or tp is not 0,
    (pr) points whose tp differs from the previous or the next point's; ("both") either."""
    keys = ("segment", "label")
    tp, fp = pl.col("tp"), pl.col("fp")
    tp_prev, tp_next = tp.shift(1).over(keys), tp.shift(-1).over(keys)
    fp_prev, fp_next = fp.shift(1).over(keys), fp.shift(-1).over(keys)
    pr = (tp != tp_prev) | (tp_next != tp)
    roc = (((fp_next - fp) - (fp - fp_prev)) != 0) | (((tp_next - tp) - (tp - tp_prev)) != 0)
    kept = pr if kind == "pr" else roc if kind == "roc" else pr | roc
    return tp_prev.is_null() | tp_next.is_null() | kept


def curve_rates(curve_points: pl.LazyFrame, *, kind: str, drop_intermediate: bool,
                max_points: int | None = None) -> pl.LazyFrame:
    """The ROC / PR curve table: counts and rates at every distinct score, plus the origin;
    with ``max_points``, a curve of more points thinned (:func:`thinned`), the others' points
    kept as ``drop_intermediate`` says."""
    tp, fp, fn, tn = (pl.col(c) for c in ("tp", "fp", "fn", "tn"))
    origin = tp + fp == 0  # every other point predicts some weight positive
    points = curve_points.filter(~origin)
    kept = pl.lit(True)
    if drop_intermediate:  # thresholds are distinct within a label: one sort orders them all
        points = points.sort("threshold", descending=True)
        kept = _kept_by_sklearn(kind)
    table = pl.concat([curve_points.filter(origin).with_columns(kept=pl.lit(True)),
                       points.with_columns(kept=kept)], how="diagonal")
    rates = keys_as_text(table).select(
        *_KEYS, "threshold", "tp", "fp", "fn", "tn",
        tpr=pl.when(tp + fn != 0).then(tp / (tp + fn)),
        fpr=pl.when(fp + tn != 0).then(fp / (fp + tn)),
        precision=pl.when(origin).then(1.0).when(tp + fp != 0).then(tp / (tp + fp)),
        kept="kept",
    )
    rates = (thinned(rates, kind, max_points, kept=pl.col("kept")) if max_points
             else rates.filter("kept"))
    return rates.drop("kept").with_columns(recall=pl.col("tpr"))


def thinned(rates: pl.LazyFrame, kind: str, max_points: int,
            kept: pl.Expr | None = None) -> pl.LazyFrame:
    """A curve of more than ``max_points`` points keeps, in each bin of its x axis (fpr for
    roc, recall for pr; :func:`mleval_sql.params.curve_bins`), its first and last point and (pr)
    its points of lowest and highest precision, the higher threshold on a tie; a curve of at
    most that many keeps its ``kept`` points (default: all)."""
    threshold, precision = pl.col("threshold"), pl.col("precision")
    fits = pl.len().over(_KEYS) <= max_points
    keep = pl.lit(False)
    columns = []
    for name, bins in curve_bins(kind, max_points).items():
        x = pl.col("fpr" if name == "roc" else "tpr")
        columns.append(pl.when(x.is_null()).then(-1.0)
                       .otherwise(pl.min_horizontal((x * float(bins)).floor(), bins - 1.0))
                       .alias(f"{name}_bin"))
        group = [*_KEYS, f"{name}_bin"]
        keep = keep | (threshold == threshold.max().over(group)) | (
            threshold == threshold.min().over(group))
        if name == "pr":
            low = threshold.sort_by([precision, -threshold]).first()
            high = threshold.sort_by([precision, threshold], descending=True).first()
            keep = keep | (threshold == low.over(group)) | (threshold == high.over(group))
    return (rates.with_columns(columns)
            .filter(pl.when(fits).then(pl.lit(True) if kept is None else kept).otherwise(keep))
            .drop(c.meta.output_name() for c in columns))


def point_counts(curve_points: pl.LazyFrame) -> pl.LazyFrame:
    """The counts at every distinct score (the origin left out) as confusion counts whose
    segment is the struct {segment, threshold}: decision_metrics then gives each decision
    metric at every score (scikit-learn's metric_at_thresholds). Mirrors
    queries/point_counts.sql."""
    return (curve_points.filter(pl.col("tp") + pl.col("fp") > 0)
            .select(segment=pl.struct("segment", "threshold"), label="label",
                    tp="tp", fp="fp", fn="fn", tn="tn"))


def det_rates(curve_points: pl.LazyFrame, *, drop_intermediate: bool) -> pl.LazyFrame:
    """scikit-learn's DET curve per label: fpr and fnr at every distinct score plus the origin,
    from the last point with fp = 0 to the first with fn = 0 (``drop_intermediate``: first
    the points whose tp equals both neighbours' dropped). Mirrors queries/det_rates.sql.

    >>> points = pl.LazyFrame({"segment": 0, "label": "a",
    ...     "threshold": [float("inf"), .8, .4, .35, .1], "tp": [0., 1, 1, 2, 2],
    ...     "fp": [0., 0, 1, 1, 2], "fn": [2., 1, 1, 0, 0], "tn": [2., 2, 1, 1, 0]})
    >>> det = det_rates(points, drop_intermediate=False).collect()
    >>> det.sort("threshold")[["threshold", "fpr", "fnr"]].rows()
    [(0.35, 0.5, 0.0), (0.4, 0.5, 0.5), (0.8, 0.0, 0.5)]
    """
    tp, fp, fn, tn, threshold = (pl.col(c) for c in ("tp", "fp", "fn", "tn", "threshold"))
    points = curve_points.select(*_KEYS, "threshold", "tp", "fp", "fn", "tn")
    if drop_intermediate:
        points = points.sort("threshold", descending=True)
        prev, after = tp.shift(1).over(_KEYS), tp.shift(-1).over(_KEYS)
        points = points.filter(prev.is_null() | after.is_null() | (tp != prev)
                               | (tp != after))
    highest = threshold.filter(fp == 0).min().over(_KEYS)
    lowest = threshold.filter(fn == 0).max().over(_KEYS)
    return keys_as_text(points.filter((threshold <= highest) & (threshold >= lowest))).select(
        *_KEYS, "threshold", "tp", "fp", "fn", "tn",
        fpr=pl.when(fp + tn != 0).then(fp / (fp + tn)),
        fnr=pl.when(tp + fn != 0).then(fn / (tp + fn)))


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
