"""Is a difference real? Paired differences of models scored on the same samples, and each
segment against the rest of the data, with an interval and a two-sided p-value.

A label's ROC AUC gets DeLong's test: for two models on the same samples the covariance of
their placement values (paired); for a segment and the rest, two independent curves (their
variances add). Every other value gets the bootstrap's: the same replicate draws weigh a sample
under both models (they hash the sample, not the model), so each replicate gives a paired
difference; the interval is the differences' percentiles and the p-value twice the smaller
share of differences on either side of zero, ``(count + 1) / (resamples + 1)``.

>>> import mleval_sql as me
>>> rows = me.compare("fixtures/lake", "f1", model="model", baseline="a", average="macro",
...                   resamples=50)
>>> rows.select("model", "metric", "value").rows()  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import polars as pl

from mleval_sql import uncertainty
from mleval_sql.api import ComparisonOptions, Execution, derived, execute
from mleval_sql.registry import scoped
from mleval_sql.request import DELONG, PLACEMENTS, Request, tidy, unpack_segment
from mleval_sql.schema import InputError
from mleval_sql.sources import as_source

if TYPE_CHECKING:
    from typing_extensions import Unpack

#: The column that tells a segment's own rows from the rest's (compare against="rest").
SIDE = "__side"


@scoped
def compare(
    source: Any,
    metrics: str | Sequence[str] | None = None,
    *,
    model: str | None = None,
    baseline: Any = None,
    against: str | None = None,
    average: str | Sequence[str] | None = None,
    **options: Unpack[ComparisonOptions],
) -> pl.DataFrame:
    """Is a difference real? For models scored on the same samples (``model``: the column
    naming them), each model's metrics minus the ``baseline`` model's, per segment; with
    ``against="rest"``, each segment's minus the data's outside it. One row per segment, model
    (or segment) and metric row: ``value`` (the difference), the two values compared
    (``model_value`` and ``baseline_value``, or ``segment_value`` and ``rest_value``),
    ``ci_low``, ``ci_high`` (level ``ci``, default 0.95), ``ci_method`` and a two-sided
    ``p_value``: DeLong's test for a label's ROC AUC (paired for models), the bootstrap's
    (paired: the same draws weigh a sample under every model) for the others. A sample scored
    by some models of its segment and not others is an error naming it. Every parameter of
    :func:`evaluate` applies (``ComparisonOptions``), and the options of ``SourceOptions``.

    >>> rows = compare("fixtures/lake", "roc_auc", model="model", baseline="a",
    ...                average="none", by="region")
    >>> rows.select("region", "label", pl.col("value", "p_value").round(4)).row(0)
    ('asia', 'bird', 0.1931, 0.0003)
    """
    request = Request.build("compare", metrics=metrics, model=model, baseline=baseline,
                            against=against, average=average, _source=source, **options)
    return compared(request, source)


def compared(request: Request, source: Any) -> pl.DataFrame:
    """The rows of a ``compare`` request: one per segment, model (other than the baseline;
    against the rest: per segment) and metric row, ``value`` the difference, with the two
    values compared, ``ci_low``, ``ci_high``, ``ci_method`` and ``p_value``."""
    derivation = derived(request, source)
    if derivation is not None:
        return derivation.finished(compared(derivation.request, derivation.source))
    if request.against == "rest":
        return _against_rest(request, source)
    return _models(request, source)


def _models(request: Request, source: Any) -> pl.DataFrame:
    model, by = request.model, list(request.by)
    assert model is not None
    src = as_source(source, storage_options=request.storage_options, as_of=request.as_of)
    _check_same_samples(src.polars(), request, model, by)
    inner = replace(request, action="evaluate", by=(*by, model))
    done = execute(inner, src)
    keys = _keys(done, by)
    table = tidy(done.plan, done.results, [*by, model])  # type: ignore[arg-type]
    named = pl.col(model).cast(pl.String)
    baseline = str(request.baseline)
    if baseline not in set(table[model].cast(pl.String)):
        raise InputError(f"baseline {request.baseline!r} is not a model of column {model!r}; "
                         f"its models are {sorted(set(table[model].cast(pl.String)))}")
    base = table.filter(named == baseline).drop(model)
    others = table.filter(named != baseline)
    out = others.join(base.select(*keys, baseline_value="value"), on=keys, how="left",
                      nulls_equal=True, maintain_order="left").rename({"value": "model_value"})
    out = out.with_columns(value=pl.col("model_value") - pl.col("baseline_value"))
    found = []
    if done.replicated is not None:
        reps = done.replicated
        pairs = reps.filter(pl.col(model).cast(pl.String) != baseline).join(
            reps.filter(pl.col(model).cast(pl.String) == baseline).drop(model)
            .select(*keys, "replicate", base="value"),
            on=[*keys, "replicate"], how="left", nulls_equal=True)
        found.append((_bootstrap(pairs.with_columns(value=pl.col("value") - pl.col("base")),
                                 [*keys, model], request), [*keys, model]))
    if done.plan is not None and done.plan.delong():
        placements = unpack_segment(done.results[PLACEMENTS], [*by, model])
        found.append((_paired_delong(placements, model, baseline, by, request),
                      [*by, model, "metric", "average", "label"]))
    return _finish(out, found, [*by, model], keys)


def _against_rest(request: Request, source: Any) -> pl.DataFrame:
    by = list(request.by)
    src = as_source(source, storage_options=request.storage_options, as_of=request.as_of)
    frame = src.polars()
    present = frame.collect_schema().names()
    missing = [c for c in by if c not in present]
    if missing:
        raise InputError(f"segment column {missing[0]!r} is not in the input; it has "
                         f"{sorted(present)}")
    segments = frame.select(by).unique().collect()
    own = {c: f"__own_{c}" for c in by}
    mine = pl.all_horizontal(pl.col(own[c]).eq_missing(pl.col(c)) for c in by)
    sides = (frame.rename(own).join(segments.lazy(), how="cross")
             .with_columns(pl.when(mine).then(pl.lit("segment")).otherwise(pl.lit("rest"))
                           .alias(SIDE))
             .drop(list(own.values())))
    return against_rest(request, sides, by)


def against_rest(request: Request, sides: Any, by: Sequence[str]) -> pl.DataFrame:
    """Each group of ``by`` against the rest of the data: ``sides`` holds, for each group, its
    rows with ``SIDE`` "segment" and every other row with ``SIDE`` "rest" (groups may
    overlap: the rows are copies). The rows of :func:`compare` with ``against="rest"``."""
    by = list(by)
    inner = replace(request, action="evaluate", by=(*by, SIDE), against=None, over=())
    done = execute(inner, sides)
    keys = _keys(done, by)
    table = tidy(done.plan, done.results, [*by, SIDE])  # type: ignore[arg-type]
    segment = table.filter(pl.col(SIDE) == "segment").drop(SIDE)
    rest = table.filter(pl.col(SIDE) == "rest").drop(SIDE)
    out = segment.rename({"value": "segment_value"}).join(
        rest.select(*keys, rest_value="value"), on=keys, how="left", nulls_equal=True,
        maintain_order="left").with_columns(
        value=pl.col("segment_value") - pl.col("rest_value"))
    found = []
    if done.replicated is not None:
        reps = done.replicated
        pairs = reps.filter(pl.col(SIDE) == "segment").drop(SIDE).join(
            reps.filter(pl.col(SIDE) == "rest").drop(SIDE).select(*keys, "replicate",
                                                                  base="value"),
            on=[*keys, "replicate"], how="left", nulls_equal=True)
        found.append((_bootstrap(pairs.with_columns(value=pl.col("value") - pl.col("base")),
                                 keys, request), keys))
    if done.plan is not None and done.plan.delong():
        found.append((_unpaired_delong(unpack_segment(done.results[DELONG], [*by, SIDE]), by,
                                       request), [*by, "metric", "average", "label"]))
    return _finish(out, found, by, keys)


def _keys(done: Execution, by: Sequence[str]) -> list[str]:
    """The columns naming a row of the comparison, besides the models or sides."""
    assert done.plan is not None
    return [*by, "metric", "average", "label",
            *(["predicted"] if "confusion_matrix" in done.plan.request.metric_names(
                done.task) else []),
            *(["threshold"] if done.plan.sweep else [])]


def _bootstrap(differences: pl.DataFrame, keys: Sequence[str], request: Request) -> pl.DataFrame:
    """The percentile interval and the p-value of each key's replicate differences."""
    level, resamples = request.params["ci"], request.params["resamples"]
    intervals = uncertainty.percentile_intervals(differences, keys, level=level,
                                                 resamples=resamples)
    d = pl.col("value").filter(pl.col("value").is_not_null() & pl.col("value").is_not_nan())
    sides = differences.group_by(keys, maintain_order=True).agg(
        below=(d <= 0).sum(), above=(d >= 0).sum(), defined=d.len())
    p = pl.min_horizontal(pl.lit(1.0), 2 * pl.min_horizontal(
        (pl.col("below") + 1) / (pl.col("defined") + 1),
        (pl.col("above") + 1) / (pl.col("defined") + 1)))
    return intervals.join(sides.with_columns(p_value=p), on=list(keys), nulls_equal=True).select(
        *keys, "ci_low", "ci_high", "ci_resamples",
        pl.when(pl.col("ci_low").is_not_null()).then(pl.col("p_value")).alias("p_value"),
        ci_method=pl.lit("bootstrap"))


def _normal(frame: pl.DataFrame, difference: pl.Expr, variance: pl.Expr,
            level: float) -> pl.DataFrame:
    """``frame`` with ``value`` (the difference), its normal interval and two-sided p-value
    (null where the variance is)."""
    out = frame.with_columns(value=difference, se=variance.sqrt())
    z = uncertainty.z_value(level)
    p = [None if d is None or se is None else (1.0 if d == 0 else 0.0) if se == 0
         else math.erfc(abs(d) / se / math.sqrt(2)) for d, se in zip(out["value"], out["se"],
                                                                      strict=True)]
    return out.with_columns(ci_low=pl.col("value") - z * pl.col("se"),
                            ci_high=pl.col("value") + z * pl.col("se"),
                            p_value=pl.Series(p, dtype=pl.Float64)).drop("se", "value")


def _paired_delong(placements: pl.DataFrame, model: str, baseline: str, by: Sequence[str],
                   request: Request) -> pl.DataFrame:
    """DeLong's paired test of each model's ROC AUC against the baseline's, per segment and
    label: the variance of the difference from the covariance of the two models' placement
    values over the same samples (positives and negatives apart)."""
    named = pl.col(model).cast(pl.String)
    keys = [*by, "label", "sample"]
    base = placements.filter(named == baseline).select(*keys, truth_b="truth", v_b="placement")
    pairs = placements.filter(named != baseline).join(base, on=keys, how="left",
                                                      nulls_equal=True)
    changed = pairs.filter(pl.col("truth") != pl.col("truth_b"))
    if changed.height:
        row = changed.row(0, named=True)
        raise InputError(f"sample {row['sample']!r} has another truth under model "
                         f"{row[model]!r} than under the baseline {baseline!r}: a paired "
                         "comparison needs the same samples and labels")
    group = [*by, model, "label"]
    w, a, b = pl.col("weight"), pl.col("placement"), pl.col("v_b")
    def side(truth: bool) -> pl.DataFrame:
        rows = pairs.filter(pl.col("truth") == truth)
        total = w.sum()
        mean_a, mean_b = (w * a).sum() / total, (w * b).sum() / total
        return rows.group_by(group, maintain_order=True).agg(
            total=total, auc_a=mean_a, auc_b=mean_b,
            var=((w * ((a - mean_a) - (b - mean_b)) ** 2).sum() / (total - 1)))
    pos, neg = side(True), side(False)
    joined = pos.join(neg, on=group, how="full", nulls_equal=True, coalesce=True,
                      suffix="_neg")
    good = (pl.col("total") > 1) & (pl.col("total_neg") > 1)
    variance = pl.when(good).then(pl.col("var") / pl.col("total")
                                  + pl.col("var_neg") / pl.col("total_neg"))
    difference = pl.when(good).then(pl.col("auc_a") - pl.col("auc_b"))
    return _normal(joined, difference, variance, request.params["ci"]).select(
        *group, "ci_low", "ci_high", "p_value", metric=pl.lit("roc_auc"),
        average=pl.lit(None, pl.String), ci_method=pl.lit("delong"))


def _unpaired_delong(delong: pl.DataFrame, by: Sequence[str], request: Request) -> pl.DataFrame:
    """DeLong's test of a segment's ROC AUC against the rest's: independent samples, so the
    variance of the difference is the sum of the two variances."""
    keys = [*by, "label"]
    segment = delong.filter(pl.col(SIDE) == "segment").drop(SIDE)
    rest = delong.filter(pl.col(SIDE) == "rest").drop(SIDE)
    joined = segment.join(rest, on=keys, how="left", nulls_equal=True, suffix="_rest")
    return _normal(joined, pl.col("auc") - pl.col("auc_rest"),
                   pl.col("variance") + pl.col("variance_rest"), request.params["ci"]).select(
        *keys, "ci_low", "ci_high", "p_value", metric=pl.lit("roc_auc"),
        average=pl.lit(None, pl.String), ci_method=pl.lit("delong"))


def _finish(out: pl.DataFrame, found: list[tuple[pl.DataFrame, list[str]]],
            first: Sequence[str], keys: Sequence[str]) -> pl.DataFrame:
    """``out`` with the intervals and p-values ``found``, its columns in order."""
    columns = ("ci_low", "ci_high", "ci_method", "ci_resamples", "p_value")
    out = out.with_columns(ci_low=pl.lit(None, pl.Float64), ci_high=pl.lit(None, pl.Float64),
                           ci_method=pl.lit(None, pl.String),
                           ci_resamples=pl.lit(None, pl.Int64), p_value=pl.lit(None, pl.Float64))
    for rows, on in found:
        rows = rows.with_columns(pl.col(c).cast(out.schema[c]) for c in on)
        out = out.join(rows.select(*on, *(c for c in columns if c in rows.columns)), on=on,
                       how="left", nulls_equal=True, maintain_order="left", suffix="_found")
        out = out.with_columns(pl.coalesce(f"{c}_found", c).alias(c) for c in columns
                               if f"{c}_found" in out.columns).drop(
            f"{c}_found" for c in columns if f"{c}_found" in out.columns)
    compared = [c for c in out.columns if c.endswith("_value") and c != "p_value"]
    rest = [c for c in out.columns if c not in (*first, *keys, "value", *compared, *columns)]
    return out.select(*first, *(k for k in keys if k not in first), *rest, "value", *compared,
                      *columns)


def _check_same_samples(frame: pl.LazyFrame, request: Request, model: str,
                        by: Sequence[str]) -> None:
    """Every model of a segment scored the same samples: a sample one model lacks is an
    error naming it."""
    sample = request.column_map.sample
    present = frame.collect_schema().names()
    for column in (model, sample):
        if column not in present:
            raise InputError(f"missing column {column!r}; the input has {sorted(present)}")
    per_sample = frame.group_by([*by, sample]).agg(models=pl.col(model).n_unique())
    per_segment = frame.group_by(list(by) or pl.lit(0)).agg(
        total=pl.col(model).n_unique()) if by else frame.select(
        total=pl.col(model).n_unique())
    joined = (per_sample.join(per_segment, on=list(by), nulls_equal=True) if by
              else per_sample.join(per_segment, how="cross"))
    lacking = joined.filter(pl.col("models") < pl.col("total")).sort(sample).head(1).collect()
    if lacking.height:
        row = lacking.row(0, named=True)
        raise InputError(f"sample {row[sample]!r} is scored by {row['models']} of the "
                         f"{row['total']} models in column {model!r}: a paired comparison "
                         "needs every model on the same samples")
