"""The grid of labels and the averages over them, for every averaged final step (polars plan).

Mirrors queries/label_averages.sql.
"""

from __future__ import annotations

from collections.abc import Sequence

import polars as pl

from mleval_sql.engines.polars._common import nan_average

__all__ = ["label_averages"]

AVERAGED = ("macro", "weighted", "macro_std")  # the averages over labels this step adds
_KEYS = ["metric", "average", "label"]


def label_averages(label_values: pl.LazyFrame, *,
                   keep: tuple[Sequence[str], Sequence[str]] | None = None) -> pl.LazyFrame:
    """Every (metric, average, label) of ``label_values`` in every segment (null where a
    segment lacks it), and the macro, weighted (by ``support``) and macro_std rows of each
    (segment, metric) over its per-label rows (label set, average null), skipping null values.
    ``keep``: the averages wanted ("none": per label); the others are not computed.

    >>> rows = pl.LazyFrame({"segment": [0, 0, 1], "metric": "f1", "average": None,
    ...                      "label": ["a", "b", "a"], "value": [0.5, None, 1.0],
    ...                      "support": [1.0, 3.0, 2.0]}, schema_overrides={"average": pl.String})
    >>> out = label_averages(rows).filter(segment=1).sort("average", "label", nulls_last=False)
    >>> out.collect()["value"].to_list()  # segment 1 lacks b: a, b, macro, macro_std, weighted
    [1.0, None, 1.0, 0.0, 1.0]
    """
    grid = (label_values.select("segment").unique()
            .join(label_values.select(_KEYS).unique(), how="cross")
            .join(label_values, on=["segment", *_KEYS], how="left", nulls_equal=True))
    out = [grid.select("segment", *_KEYS, "value")]
    if keep is None or set(AVERAGED) & set(keep[1]):
        # each group's labels in one order, as a list: a sum's last bit follows the order of
        # its terms and the joins above keep none, and polars drops a sort_by feeding a sum or
        # a mean, not one feeding a list (a rerun gives the same bits)
        pairs = pl.struct("value", "support").sort_by(pl.col("label").cast(pl.String))
        value = pl.element().struct.field("value")
        support = pl.element().struct.field("support")
        averages = {"macro": value.mean(), "weighted": nan_average(value, support),
                    "macro_std": _spread(value)}
        per_label = grid.filter(pl.col("average").is_null() & pl.col("label").is_not_null())
        out.append(per_label.group_by("segment", "metric").agg(pairs.alias("_labels"))
                   .select("segment", "metric", **{
                       name: pl.col("_labels").list.eval(average).list.first()
                       for name, average in averages.items()})
                   .unpivot(on=list(AVERAGED), index=["segment", "metric"],
                            variable_name="average", value_name="value"))
    return pl.concat(out, how="diagonal").select("segment", *_KEYS, "value")


def _spread(value: pl.Expr) -> pl.Expr:
    """Population standard deviation, of the values as shares of the largest (squared counts
    of weights of 1e300 would overflow)."""
    scale = value.abs().max()
    # null without a value: polars' std of a list holding one null is 0.0
    return pl.when(value.count() == 0).then(None).when(scale > 0).then(
        (value / scale).std(ddof=0) * scale).otherwise(value.std(ddof=0))
