"""How sure a value is: the intervals ``evaluate(..., ci=0.95)`` adds to its rows.

A label's ROC AUC (the whole curve) gets DeLong's interval, ``AUC ± z·SE`` clipped to [0, 1],
its variance from the placement values of the exact curve (``queries/delong.sql``). Every other
value gets a Poisson bootstrap's percentile interval: each replicate weighs every sample by a
Poisson(1) draw hashed from (sample id, replicate, seed) (``queries/replicates.sql``), so the
replicates are one more key of the statistics tables and the interval is the same whatever the
row order, the files or the engine (polars sorts the rows once for every replicate where the
metrics read only running sums down the sorted rows, whole counts or weights, the weighted sums
in a stated order: engines/polars/bootstrap.py, ``Ranked`` and ``RankedWeights``).
A value undefined in a replicate is counted, not dropped: with fewer than ``ci * resamples``
replicates defined the interval is null.

>>> chunks(10, rows=3, budget_rows=10)
[[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from statistics import NormalDist

import polars as pl

#: Rows of replicated predictions a run computes at once without a memory budget.
CHUNK_ROWS = 8_000_000
#: The memory a replicated row is taken to cost under a budget: it carries its draw's weight,
#: so it runs on the weighted path (not measured apart: the conservative figure).
REPLICATED_ROW_BYTES = 250
#: The interval columns, and the method of each row's interval.
CI_COLUMNS = ("ci_low", "ci_high", "ci_method", "ci_resamples")


def chunks(resamples: int, *, rows: int, budget_rows: int = CHUNK_ROWS) -> list[list[int]]:
    """The replicates 0 .. resamples - 1 in runs of about ``budget_rows`` replicated rows (the
    input's ``rows`` once per replicate), at least one replicate a run."""
    size = max(1, min(resamples, budget_rows // max(rows, 1)))
    return [list(range(a, min(a + size, resamples))) for a in range(0, resamples, size)]


def z_value(level: float) -> float:
    """The two-sided normal quantile of ``level``: 1.96 for 0.95."""
    return NormalDist().inv_cdf(1 - (1 - level) / 2)


def percentile_intervals(replicated: pl.DataFrame, keys: Sequence[str], *, level: float,
                         resamples: int) -> pl.DataFrame:
    """``keys``, ``ci_low``, ``ci_high`` (the replicates' (1 - level) / 2 and (1 + level) / 2
    quantiles, linear interpolation as numpy's default) and ``ci_resamples`` (how many
    replicates defined the value) from one row per key and replicate; null where fewer than
    ``level * resamples`` are defined.

    >>> rows = pl.DataFrame({"metric": "f1", "replicate": range(20),
    ...                      "value": [i / 19 for i in range(20)]})
    >>> percentile_intervals(rows, ["metric"], level=0.9, resamples=20).select(
    ...     "metric", pl.col("ci_low", "ci_high").round(12), "ci_resamples").row(0)
    ('f1', 0.05, 0.95, 20)
    """
    value = pl.col("value").filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())
    low, high = (1 - level) / 2, (1 + level) / 2
    enough = math.ceil(level * resamples - 1e-9)
    return replicated.group_by(keys, maintain_order=True).agg(
        ci_low=value.quantile(low, "linear"), ci_high=value.quantile(high, "linear"),
        ci_resamples=value.len().cast(pl.Int64),
    ).with_columns(
        pl.when(pl.col("ci_resamples") >= enough).then(pl.col(c)).alias(c)
        for c in ("ci_low", "ci_high"))


def delong_intervals(delong: pl.DataFrame, *, level: float) -> pl.DataFrame:
    """``label``, the segment columns, ``ci_low`` and ``ci_high``: AUC ± z·SE clipped to
    [0, 1], from DeLong's variance (null where it is undefined)."""
    se = pl.col("variance").sqrt() * z_value(level)
    return delong.select(
        pl.exclude("p", "n", "auc", "variance"),
        ci_low=(pl.col("auc") - se).clip(0.0, 1.0),
        ci_high=(pl.col("auc") + se).clip(0.0, 1.0))


def normal_intervals(table: pl.DataFrame, variances: pl.DataFrame, keys: Sequence[str], *,
                     level: float) -> pl.DataFrame:
    """``keys``, ``average``, ``ci_low`` and ``ci_high``: value ± z·SD clipped to [0, 1] on
    the rows of ``table`` whose ``variances`` (one per key, a label's) are known; the averages
    over labels of their metrics get no interval (null). An estimated metric's."""
    se = pl.col("variance").sqrt() * z_value(level)
    rows = table.filter(pl.col("metric").is_in(variances["metric"].unique().implode())).join(
        variances.with_columns(average=pl.lit(None, pl.String)), on=[*keys, "average"],
        how="left", nulls_equal=True)
    return rows.select(*keys, "average", ci_low=(pl.col("value") - se).clip(0.0, 1.0),
                       ci_high=(pl.col("value") + se).clip(0.0, 1.0))


def with_intervals(table: pl.DataFrame, keys: Sequence[str], *, bootstrap: pl.DataFrame | None,
                   delong: pl.DataFrame | None,
                   expected: pl.DataFrame | None = None) -> pl.DataFrame:
    """``table`` with the interval columns: DeLong's on the rows ``delong`` has (a label's ROC
    AUC, keyed by the segment columns and ``label``), the bootstrap's on the rows of
    ``bootstrap`` (:func:`percentile_intervals`, keyed by ``keys``), an estimated metric's on
    the rows of ``expected`` (:func:`normal_intervals`); null elsewhere."""
    out = table.with_columns(ci_low=pl.lit(None, pl.Float64), ci_high=pl.lit(None, pl.Float64),
                             ci_method=pl.lit(None, pl.String),
                             ci_resamples=pl.lit(None, pl.Int64))
    found = []
    if bootstrap is not None:
        found.append((bootstrap.with_columns(ci_method=pl.lit("bootstrap")), list(keys)))
    if delong is not None:
        on = [*(k for k in keys if k in delong.columns), "metric", "average"]
        found.append((delong.with_columns(metric=pl.lit("roc_auc"),
                                          average=pl.lit(None, pl.String),
                                          ci_method=pl.lit("delong")), on))
    if expected is not None:
        on = [k for k in keys if k in expected.columns]
        found.append((expected.with_columns(ci_method=pl.lit("expected")), on))
    for rows, on in found:
        out = out.join(rows.select(*on, *(c for c in CI_COLUMNS if c in rows.columns)), on=on,
                       how="left", nulls_equal=True, maintain_order="left", suffix="_found")
        out = out.with_columns(pl.coalesce(f"{c}_found", c).alias(c) for c in CI_COLUMNS
                               if f"{c}_found" in out.columns).drop(
            f"{c}_found" for c in CI_COLUMNS if f"{c}_found" in out.columns)
    return out


def with_reasons(table: pl.DataFrame, *, level: float, resamples: int) -> pl.DataFrame:
    """``table`` with ``reason``: why a value, or its interval, is null (null otherwise). An
    undefined value says when its metric is undefined (``Metric.undefined``); an interval
    says how many replicates defined the value, or why DeLong's variance is undefined."""
    from mleval_sql.registry import METRICS

    enough = math.ceil(level * resamples - 1e-9)
    undefined = pl.col("metric").replace_strict({m: x.undefined for m, x in METRICS.items()},
                                                return_dtype=pl.String)
    value = pl.when(pl.col("average").is_null() | (pl.col("average") == "micro")).then(
        undefined).otherwise(pl.concat_str(undefined, pl.lit(", for every label")))
    interval = pl.when(pl.col("ci_method") == "delong").then(pl.lit(
        "DeLong's variance needs a positive and a negative weight above 1")).when(
        pl.col("ci_method") == "expected").then(pl.lit(
            "an estimate's interval is per label, where the estimate is defined")).when(
        pl.col("ci_method") == "bootstrap").then(pl.format(
            "defined in {} of {} resamples (fewer than {})", "ci_resamples", pl.lit(resamples),
            pl.lit(enough)))
    return table.with_columns(reason=pl.when(pl.col("value").is_null()).then(value)
                              .when(pl.col("ci_low").is_null()).then(interval))


def adjusted(p: pl.Series) -> pl.Series:
    """Benjamini-Hochberg's adjusted p-values (q-values) of ``p``, in its order.

    >>> adjusted(pl.Series([0.01, 0.04, 0.03])).round(4).to_list()
    [0.03, 0.04, 0.04]
    """
    m = p.len()
    ranked = pl.DataFrame({"p": p, "at": range(m)}).sort("p", maintain_order=True)
    return ranked.with_columns(q=(pl.col("p") * m / pl.int_range(1, m + 1)).reverse()
                               .cum_min().reverse().clip(upper_bound=1.0)).sort("at")["q"]
