"""Drift: how far the distribution of a compared column has moved from the reference, per
(segment, compared column, label).

Mirrors queries/drift_*.sql (their headers hold the definitions). ``drift_rows`` has a row per
row of either side: ``segment, compared, label`` (null for a feature), ``current`` (false: the
reference), ``value`` (a numeric column's) or ``category`` (a categorical one's, as text), and
``weight``.
"""

from __future__ import annotations

import math

import polars as pl

from mleval_sql.engines.polars._common import weight

__all__ = ["drift_binned", "drift_categories", "drift_ecdf", "drift_histogram", "drift_points",
           "drift_sizes"]

_KEYS = ("segment", "compared", "label")
_LARGEST = 1.7976931348623157e308
current = pl.col("current")
value = pl.col("value")
known = value.is_not_null() | pl.col("category").is_not_null()


def _sides(rows: pl.Expr) -> dict[str, pl.Expr]:
    """Each side's weight and rows of the rows ``rows`` selects."""
    return {"reference_weight": weight.filter(rows & ~current).sum(),
            "current_weight": weight.filter(rows & current).sum(),
            "reference_rows": (rows & ~current).sum().cast(pl.Int64),
            "current_rows": (rows & current).sum().cast(pl.Int64)}


def drift_sizes(drift_rows: pl.LazyFrame) -> pl.LazyFrame:
    """rows, weight, weight_squares, null_weight and nonfinite per (segment, compared, label,
    side)."""
    return drift_rows.group_by(*_KEYS, "current").agg(
        rows=known.sum().cast(pl.Int64),
        weight=weight.filter(known).sum(),
        weight_squares=(weight * weight).filter(known).sum(),
        null_weight=weight.filter(~known).sum(),
        nonfinite=(value.abs() > _LARGEST).sum().cast(pl.Int64),
    )


def drift_points(drift_rows: pl.LazyFrame) -> pl.LazyFrame:
    """Each side's weight and rows at each distinct numeric value (and its given bin)."""
    return drift_rows.filter(value.is_not_null()).group_by(*_KEYS, "value").agg(
        pl.col("bin").max(), pl.col("given_bins").max(), **_sides(pl.lit(True)))


def drift_histogram(drift_points: pl.LazyFrame, drift_sizes: pl.LazyFrame, *,
                    bins: int) -> pl.LazyFrame:
    """Each side's weight and rows per bin, with ks and wasserstein's parts in each, from one
    pass down the values in order: the given bins, or the reference's quantile bins (a
    value's bin is the number of quantile levels reached below it)."""
    totals = drift_sizes.group_by(*_KEYS).agg(
        reference_total=pl.col("weight").filter(~current).sum(),
        current_total=pl.col("weight").filter(current).sum())

    def share(through: str, total: str) -> pl.Expr:
        return pl.col(through) / pl.when(pl.col(total) != 0).then(pl.col(total))

    def level(weight: pl.Expr) -> pl.Expr:
        return pl.min_horizontal((weight * bins / pl.when(pl.col("reference_total") != 0)
                                  .then(pl.col("reference_total"))).floor(),
                                 pl.lit(bins - 1.0))

    # one sort by value: each group's rows are then in the order of its values, which the
    # running sums read (a sort per window expression cost three)
    placed = drift_points.join(totals, on=_KEYS, nulls_equal=True).sort("value").with_columns(
        reference_through=pl.col("reference_weight").cum_sum().over(_KEYS),
        current_through=pl.col("current_weight").cum_sum().over(_KEYS),
        width=value.shift(-1).over(_KEYS) - value,
    ).with_columns(
        reference_cdf=share("reference_through", "reference_total"),
        current_cdf=share("current_through", "current_total"),
        level_below=level(pl.col("reference_through") - pl.col("reference_weight")),
        level_through=level(pl.col("reference_through")),
    )
    gap = (pl.col("reference_cdf") - pl.col("current_cdf")).abs()
    edge = pl.col("level_through") > pl.col("level_below").fill_null(0.0)
    sides = ["reference_weight", "current_weight", "reference_rows", "current_rows"]
    return placed.group_by(*_KEYS, pl.coalesce(pl.col("bin").cast(pl.Float64),
                                               pl.col("level_below")).alias("_bin")).agg(
        pl.col("given_bins").max(),
        edge.sum().alias("_edges"),
        *(pl.col(c).sum() for c in sides),
        ks=gap.max(),
        wasserstein=pl.when(gap.count() > 0).then((gap * pl.col("width").fill_null(0.0)).sum()),
    ).with_columns(
        bins=pl.coalesce(pl.col("given_bins").max().over(_KEYS),
                         pl.col("_edges").sum().over(_KEYS) + 1).cast(pl.Int64),
    ).drop("_bin", "_edges", "given_bins")


def drift_ecdf(drift_bins: pl.LazyFrame) -> pl.LazyFrame:
    """ks and wasserstein per (segment, compared, label), from their parts in the bins."""
    return drift_bins.group_by(*_KEYS).agg(
        ks=pl.col("ks").max(),
        wasserstein=pl.when(pl.col("ks").count() > 0).then(pl.col("wasserstein").sum()))


def drift_categories(drift_rows: pl.LazyFrame) -> pl.LazyFrame:
    """Each side's weight and rows per value of a categorical column; ``bins``: its values."""
    return drift_rows.filter(pl.col("category").is_not_null()).group_by(
        *_KEYS, "category").agg(**_sides(pl.lit(True))).with_columns(
        bins=pl.len().over(_KEYS).cast(pl.Int64), ks=pl.lit(None, pl.Float64),
        wasserstein=pl.lit(None, pl.Float64)).drop("category")


def drift_binned(drift_bins: pl.LazyFrame, drift_sizes: pl.LazyFrame, *,
                 epsilon: float) -> pl.LazyFrame:
    """psi, jensen_shannon, total_variation, l_infinity, chi2 and chi2_dof per (segment,
    compared, label) from each side's weight per bin."""
    def side(is_current: bool, name: str) -> pl.LazyFrame:
        return drift_sizes.filter(current == is_current).select(
            *_KEYS, **{f"{name}_scale": pl.col("weight") / pl.when(
                pl.col("weight_squares") != 0).then(pl.col("weight_squares"))})

    def share(column: str) -> pl.Expr:
        total = pl.col(column).sum().over(_KEYS)
        return pl.col(column) / pl.when(total != 0).then(total)

    def floor(share: pl.Expr) -> pl.Expr:
        return pl.when(share > 0).then(share).when(share == 0).then(epsilon)

    def observed(count: str, expected: str) -> pl.Expr:
        gap = pl.col(expected) - pl.col(count)
        return pl.when(pl.col("filled") == 2).then(
            pl.col(count) + gap.sign() * pl.min_horizontal(pl.lit(0.5), gap.abs())
        ).otherwise(pl.col(count))

    rw, cw = pl.col("reference_count"), pl.col("current_count")
    r_total, c_total = rw.sum().over(_KEYS), cw.sum().over(_KEYS)
    counted = drift_bins.filter(
        (pl.col("reference_weight") > 0) | (pl.col("current_weight") > 0)
    ).join(side(False, "reference"), on=_KEYS, nulls_equal=True).join(
        side(True, "current"), on=_KEYS, nulls_equal=True).with_columns(
        reference_count=pl.col("reference_weight") * pl.col("reference_scale"),
        current_count=pl.col("current_weight") * pl.col("current_scale"),
        p=share("reference_weight"),
        q=share("current_weight"),
        filled=pl.len().over(_KEYS),
    ).with_columns(
        reference_expected=r_total * (rw + cw) / (r_total + c_total),
        current_expected=c_total * (rw + cw) / (r_total + c_total),
    ).with_columns(
        reference_observed=observed("reference_count", "reference_expected"),
        current_observed=observed("current_count", "current_expected"),
    )
    p, q = pl.col("p"), pl.col("q")
    both = (p.count() > 0) & (q.count() > 0)
    p_floor, q_floor = floor(p), floor(q)
    kl = (pl.when(p > 0).then(p * (2 * p / (p + q)).log()).otherwise(0.0)
          + pl.when(q > 0).then(q * (2 * q / (p + q)).log()).otherwise(0.0))

    def term(side: str) -> pl.Expr:
        gap = pl.col(f"{side}_observed") - pl.col(f"{side}_expected")
        return gap * gap / pl.col(f"{side}_expected")

    return counted.group_by(*_KEYS).agg(
        bins=pl.col("bins").max(),
        psi=pl.when(both).then(((q_floor - p_floor) * (q_floor / p_floor).log()).sum()),
        jensen_shannon=pl.when(both).then(
            (kl.sum() / (2 * math.log(2))).clip(lower_bound=0.0).sqrt()),
        total_variation=pl.when(both).then((p - q).abs().sum() / 2),
        l_infinity=(p - q).abs().max(),
        chi2=pl.when(~both).then(None).when(pl.col("filled").max() == 1).then(0.0)
        .otherwise((term("reference") + term("current")).sum()),
        chi2_dof=pl.col("filled").max() - 1,
    )
