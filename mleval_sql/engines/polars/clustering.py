"""Clustering: the contingency table per segment and every metric from it (polars plans).

Mirrors queries/cluster_summary.sql, queries/contingency.sql, queries/clustering_metrics.sql
(whose header defines each metric) and queries/contingency_cells.sql.
"""

from __future__ import annotations

import math

import polars as pl

__all__ = ["cluster_summary", "clustering_metrics", "contingency", "contingency_cells"]

EPS = 2.220446049250313e-16  # numpy's float64 eps, as scikit-learn uses it
METRICS = ("adjusted_rand", "rand", "mutual_info", "normalized_mutual_info",
           "adjusted_mutual_info", "homogeneity", "completeness", "v_measure", "fowlkes_mallows",
           "purity")
_n, _weight, _sample = pl.col("n"), pl.col("weight"), pl.col("sample")


def cluster_summary(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """One row per segment with the counts and examples that ``clustering.check_summary``
    reads; each ``example_*`` is the smallest sample of the segment with that problem."""
    fractional = _weight != _weight.floor()
    value_checks = predictions.group_by("segment").agg(
        n_rows=pl.len(),
        sample_weight=_weight.sum(),
        null_sample=_sample.null_count(),
        null_truth=pl.col("truth").null_count(),
        null_cluster=pl.col("cluster").null_count(),
        bad_weight=(_weight.is_null() | (_weight < 0) | ~_weight.is_finite()).sum(),
        fractional_weight=fractional.sum(),
        example_null_truth=_sample.filter(pl.col("truth").is_null()).min(),
        example_null_cluster=_sample.filter(pl.col("cluster").is_null()).min(),
        example_fractional=_sample.filter(fractional).min(),
    )
    sample_checks = (predictions.filter(_sample.is_not_null())
                     .group_by("segment", "sample").agg(n_rows=pl.len())
                     .group_by("segment").agg(
                         n_samples=pl.len(),
                         dup_rows=(pl.col("n_rows") - 1).sum(),
                         example_dup=_sample.filter(pl.col("n_rows") > 1).min()))
    return value_checks.join(sample_checks, on="segment", how="left", nulls_equal=True).select(
        "segment", "n_rows", pl.col("n_samples").fill_null(0), "sample_weight", "null_sample",
        "null_truth",
        "null_cluster", "bad_weight", "fractional_weight", pl.col("dup_rows").fill_null(0),
        "example_null_truth", "example_null_cluster", "example_dup", "example_fractional")


def contingency(predictions: pl.LazyFrame) -> pl.LazyFrame:
    """The weight of each (segment, reference class, cluster) cell; cells of weight 0 kept."""
    return predictions.group_by("segment", "truth", "cluster").agg(weight=_weight.sum())


def contingency_cells(contingency: pl.LazyFrame) -> pl.LazyFrame:
    """The cells of positive weight as tidy rows: truth, cluster, value = weight."""
    return contingency.filter(_weight > 0).select(
        "segment", metric=pl.lit("contingency"), average=pl.lit(None, dtype=pl.String),
        label=pl.lit(None, dtype=pl.String), truth="truth", cluster="cluster", value="weight")


def lgamma(x: pl.Expr) -> pl.Expr:
    """ln Γ(x) for x >= 1, from Stirling's series at x + 20 below 20 (error under 1e-17 there).

    >>> frame = pl.DataFrame({"x": [1.0, 2.5, 7.0, 19.0, 20.0, 1234.5, 1e9]})
    >>> got = frame.select(lgamma(pl.col("x")))["x"].to_list()
    >>> all(math.isclose(g, math.lgamma(x), rel_tol=1e-14, abs_tol=1e-14)
    ...     for g, x in zip(got, frame["x"]))
    True
    """
    small = x < 20
    y = pl.when(small).then(x + 20).otherwise(x)
    inv, inv2 = 1 / y, 1 / (y * y)
    series = inv * (1 / 12 - inv2 * (1 / 360 - inv2 * (1 / 1260 - inv2 * (1 / 1680
                                                                      - inv2 / 1188))))
    stirling = (y - 0.5) * y.log() - y + 0.5 * math.log(2 * math.pi) + series
    rising = math.prod([x + k for k in range(20)])  # x (x + 1) ... (x + 19)
    return pl.when(small).then(stirling - rising.log()).otherwise(stirling)


def _mean(h_class: pl.Expr, h_cluster: pl.Expr, average_method: str) -> pl.Expr:
    return {"min": pl.min_horizontal(h_class, h_cluster),
            "geometric": (h_class * h_cluster).sqrt(),
            "max": pl.max_horizontal(h_class, h_cluster)}.get(average_method,
                                                               (h_class + h_cluster) / 2)


def _expected_mi(classes: pl.LazyFrame, clusters: pl.LazyFrame,
                 totals: pl.LazyFrame) -> pl.LazyFrame:
    """E[MI] per segment over the margins, over the same terms as queries/clustering_metrics.sql
    (those beyond Bernstein's reach left out). Each pair of margins (a, b) gets the
    hypergeometric log-probability of its first n from lgamma; the next ones follow from the
    ratio P(m) / P(m - 1) = (a - m + 1)(b - m + 1) / (m (N - a - b + m)), summed in logs, so no
    term needs a log-gamma of its own. A pair's terms stay one list (no explode and window:
    3.3x faster at 10M samples)."""
    a, b, total = pl.col("a"), pl.col("b"), pl.col("total")
    low, high = pl.col("low"), pl.col("high")
    variance = a * b * (total - pl.max_horizontal(a, b)) / (total * total)
    reach = 70 / 3 + ((70 / 3) ** 2 + 140 * variance).sqrt()
    pairs = (classes.join(clusters, on="segment", nulls_equal=True)
             .join(totals, on="segment", nulls_equal=True)
             .group_by("segment", "a", "b", "total").agg(n_pairs=pl.len())
             .with_columns(
                 low=pl.max_horizontal(1.0, a + b - total, (a * b / total - reach).ceil()),
                 high=pl.min_horizontal(a, b, (a * b / total + reach).floor()))
             .with_columns(
                 log_first=lgamma(a + 1) + lgamma(b + 1) + lgamma(total - a + 1)
                 + lgamma(total - b + 1) - (lgamma(low + 1) + lgamma(total + 1))
                 - lgamma(a - low + 1) - lgamma(b - low + 1) - lgamma(total - a - b + low + 1),
                 n=_range(low, high), m=_range(low + 1, high)))

    def each(expr: pl.Expr, *, cumulative: bool = False) -> pl.Expr:  # log of a list's items
        logs = expr.list.eval(pl.element().log())
        return logs.list.eval(pl.element().cum_sum()) if cumulative else logs

    n, m = pl.col("n"), pl.col("m")
    steps = each((a - m + 1) * (b - m + 1) / (m * (total - a - b + m)), cumulative=True)
    log_p = pl.col("log_first") + pl.concat_list(pl.lit(0.0), steps)
    terms = (n / total) * (total.log() + each(n) - a.log() - b.log()) \
        * log_p.list.eval(pl.element().exp())
    return pairs.group_by("segment").agg(emi=(pl.col("n_pairs") * terms.list.sum()).sum())


def _range(low: pl.Expr, high: pl.Expr) -> pl.Expr:
    """The whole numbers low..high (both included) of each row, as a list of floats."""
    return pl.int_ranges(low.cast(pl.Int64), high.cast(pl.Int64) + 1).cast(pl.List(pl.Float64))


def clustering_metrics(contingency: pl.LazyFrame, *, beta: float, average_method: str,
                       adjusted: bool) -> pl.LazyFrame:
    """Every clustering metric per segment, and the pair confusion matrix's four cells."""
    cells = contingency.filter(_weight > 0).rename({"weight": "n"})
    total = pl.col("total")
    totals = cells.group_by("segment").agg(total=_n.sum(), sum_n2=(_n * _n).sum())
    classes = cells.group_by("segment", "truth").agg(a=_n.sum())
    clusters = cells.group_by("segment", "cluster").agg(b=_n.sum(), top=_n.max())
    a, b = pl.col("a"), pl.col("b")
    class_stats = classes.join(totals, on="segment", nulls_equal=True).group_by("segment").agg(
        n_classes=pl.len(), sum_a2=(a * a).sum(),
        h_class=-(a / total * (a.log() - total.log())).sum())
    cluster_stats = clusters.join(totals, on="segment", nulls_equal=True).group_by(
        "segment").agg(n_clusters=pl.len(), sum_b2=(b * b).sum(),
                       h_cluster=-(b / total * (b.log() - total.log())).sum(),
                       top_total=pl.col("top").sum())
    term = (_n / total * (_n.log() - total.log())
            + _n / total * (-(a * b).log() + total.log() + total.log()))
    mutual = (cells.join(totals, on="segment", nulls_equal=True)
              .join(classes, on=["segment", "truth"], nulls_equal=True)
              .join(clusters, on=["segment", "cluster"], nulls_equal=True)
              .group_by("segment")
              .agg(mi_sum=pl.when(term.abs() < EPS).then(0.0).otherwise(term).sum()
                   .clip(lower_bound=0.0)))
    stats = contingency.select("segment").unique()
    for part in (totals, class_stats, cluster_stats, mutual):
        stats = stats.join(part, on="segment", how="left", nulls_equal=True)
    if adjusted:
        stats = stats.join(_expected_mi(classes, clusters, totals), on="segment", how="left",
                           nulls_equal=True).with_columns(pl.col("emi").fill_null(0.0))
    else:
        stats = stats.with_columns(emi=pl.lit(None, dtype=pl.Float64))

    n_classes, n_clusters = pl.col("n_classes"), pl.col("n_clusters")
    h_class, h_cluster, emi = pl.col("h_class"), pl.col("h_cluster"), pl.col("emi")
    sum_n2 = pl.col("sum_n2")
    stats = stats.with_columns(
        mi=pl.when((n_classes == 1) | (n_clusters == 1)).then(0.0).otherwise("mi_sum"),
        mean_entropy=_mean(h_class, h_cluster, average_method),
        tp=(sum_n2 - total).fill_null(0.0),
        fp=(pl.col("sum_b2") - sum_n2).fill_null(0.0),
        fn=(pl.col("sum_a2") - sum_n2).fill_null(0.0),
    ).with_columns(tn=(total * total - pl.col("fp") - pl.col("fn") - sum_n2).fill_null(0.0))
    tp, fp, fn, tn, mi = (pl.col(c) for c in ("tp", "fp", "fn", "tn", "mi"))
    mean_entropy = pl.col("mean_entropy")
    one_each = (n_classes == 1) & (n_clusters == 1)

    def away_from_zero(x: pl.Expr) -> pl.Expr:
        return pl.when(x < 0).then(pl.min_horizontal(x, -EPS)).otherwise(
            pl.max_horizontal(x, EPS))

    def defined(value: pl.Expr) -> pl.Expr:  # null for a segment of no weight
        return pl.when(total > 0).then(value)

    scores = stats.select(
        "segment", "tp", "fp", "fn", "tn",
        adjusted_rand=defined(pl.when((fn == 0) & (fp == 0)).then(1.0).otherwise(
            2.0 * (tp * tn - fn * fp) / ((tp + fn) * (fn + tn) + (tp + fp) * (fp + tn)))),
        rand=defined(pl.when((tp + tn + fp + fn == 0) | (fp + fn == 0)).then(1.0)
                     .otherwise((tp + tn) / (tp + tn + fp + fn))),
        mutual_info=defined(mi),
        normalized_mutual_info=defined(pl.when(one_each).then(1.0).when(mi == 0).then(0.0)
                                       .otherwise(mi / mean_entropy)),
        adjusted_mutual_info=defined(
            pl.when(emi.is_null()).then(None).when(one_each).then(1.0)
            .when((n_classes == 1) | (n_clusters == 1)).then(0.0)
            .otherwise(away_from_zero(mi - emi) / away_from_zero(mean_entropy - emi))),
        homogeneity=defined(pl.when(h_class == 0).then(1.0).otherwise(mi / h_class)),
        completeness=defined(pl.when(h_cluster == 0).then(1.0).otherwise(mi / h_cluster)),
        fowlkes_mallows=defined(pl.when(tp != 0).then((tp / (tp + fp)).sqrt()
                                                      * (tp / (tp + fn)).sqrt())
                                .otherwise(0.0)),
        purity=defined(pl.col("top_total") / total),
    )
    h, c = pl.col("homogeneity"), pl.col("completeness")
    scores = scores.with_columns(
        v_measure=pl.when(h + c == 0).then(0.0)
        .otherwise((1 + beta) * h * c / (beta * h + c)))
    long = scores.unpivot(on=list(METRICS), index="segment", variable_name="metric",
                          value_name="value").with_columns(
        truth=pl.lit(None, dtype=pl.Int32), cluster=pl.lit(None, dtype=pl.Int32))
    pairs = scores.unpivot(on=["tp", "fp", "fn", "tn"], index="segment", variable_name="cell",
                           value_name="value").select(
        "segment", metric=pl.lit("pair_confusion_matrix"),
        value="value",
        truth=pl.col("cell").is_in(["tp", "fn"]).cast(pl.Int32),
        cluster=pl.col("cell").is_in(["tp", "fp"]).cast(pl.Int32))
    return pl.concat([long, pairs], how="diagonal").select(
        "segment", "metric", average=pl.lit(None, dtype=pl.String),
        label=pl.lit(None, dtype=pl.String), truth="truth", cluster="cluster", value="value")
