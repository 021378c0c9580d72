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

__all__ = ["drift_binned", "drift_categories", "drift_ecdf", "drift_edges", "drift_histogram",
           "drift_points", "drift_sizes"]

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
    """Each side's weight and rows at each distinct numeric value."""
    return drift_rows.filter(value.is_not_null()).group_by(*_KEYS, "value").agg(
        **_sides(pl.lit(True)))


def _ordered(drift_points: pl.LazyFrame) -> pl.LazyFrame:
    return drift_points.sort(*_KEYS, "value", nulls_last=True)


def drift_ecdf(drift_points: pl.LazyFrame) -> pl.LazyFrame:
    """ks and wasserstein per (segment, compared, label), from the values in order."""
    def cdf(side: str) -> pl.Expr:
        total = pl.col(side).sum().over(_KEYS)
        return pl.col(side).cum_sum().over(_KEYS) / pl.when(total != 0).then(total)

    gap = (pl.col("reference_cdf") - pl.col("current_cdf")).abs()
    both = (pl.col("reference_cdf").count() > 0) & (pl.col("current_cdf").count() > 0)
    return _ordered(drift_points).with_columns(
        reference_cdf=cdf("reference_weight"),
        current_cdf=cdf("current_weight"),
        width=value.shift(-1).over(_KEYS) - value,
    ).group_by(*_KEYS).agg(
        ks=gap.max(),
        wasserstein=pl.when(both).then((gap * pl.col("width")).sum()),
    )


def drift_edges(drift_points: pl.LazyFrame, *, bins: int) -> pl.LazyFrame:
    """The reference's quantile edges: for i = 1 .. bins - 1 the smallest reference value x
    with F_r(x) >= i / bins, each once."""
    through = pl.col("reference_weight").cum_sum().over(_KEYS)
    total = pl.col("reference_weight").sum().over(_KEYS)
    stepped = _ordered(drift_points.filter(pl.col("reference_weight") > 0)).with_columns(
        through=through, total=total).with_columns(
        before=pl.col("through").shift(1, fill_value=0.0).over(_KEYS),
        quantile=pl.min_horizontal((pl.col("through") * bins / pl.col("total")).floor(),
                                   pl.lit(bins - 1.0)))
    return stepped.filter(
        (pl.col("quantile") >= 1)
        & (pl.col("quantile") * pl.col("total") > pl.col("before") * bins)
    ).select(*_KEYS, edge=value)


def drift_histogram(drift_points: pl.LazyFrame, drift_edges: pl.LazyFrame) -> pl.LazyFrame:
    """Each side's weight and rows per bin (-inf, e1], (e1, e2], ..., (ek, +inf); ``bins``
    is the number of edges + 1."""
    sides = ["reference_weight", "current_weight", "reference_rows", "current_rows"]
    edges = drift_edges.select(*_KEYS, value=pl.col("edge"), is_edge=pl.lit(1, pl.Int32),
                               **{c: pl.lit(0, pl.Float64 if c.endswith("weight") else pl.Int64)
                                  for c in sides})
    marked = pl.concat([
        drift_points.select(*_KEYS, "value", *sides, is_edge=pl.lit(0, pl.Int32)),
        edges.select(*_KEYS, "value", *sides, "is_edge"),
    ])
    placed = marked.sort(*_KEYS, "value", "is_edge", nulls_last=True).with_columns(
        bin=pl.col("is_edge").cum_sum().over(_KEYS),
        bins=pl.col("is_edge").sum().over(_KEYS) + 1)
    return placed.filter(pl.col("is_edge") == 0).group_by(*_KEYS, "bin").agg(
        pl.col("bins").max().cast(pl.Int64), *(pl.col(c).sum() for c in sides)).drop("bin")


def drift_categories(drift_rows: pl.LazyFrame) -> pl.LazyFrame:
    """Each side's weight and rows per value of a categorical column; ``bins``: its values."""
    return drift_rows.filter(pl.col("category").is_not_null()).group_by(
        *_KEYS, "category").agg(**_sides(pl.lit(True))).with_columns(
        bins=pl.len().over(_KEYS).cast(pl.Int64)).drop("category")


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
