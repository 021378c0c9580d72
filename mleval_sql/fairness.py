"""Fair across groups: each metric per group of the sensitive columns, how far apart the
groups are (fairlearn's ``MetricFrame.difference`` / ``ratio``), and fairlearn's named
disparities (``demographic_parity_difference``...).

Not a pipeline of its own: the groups are segments. The metrics are evaluated through the one
request and engines of :func:`mleval_sql.evaluate`, once by ``[*by, *sensitive]`` (each
group, per control segment ``by``) and once by ``by`` (the overall value of each control
segment); the summary is arithmetic on those few rows. The rates of the named disparities
(``selection_rate``, ``true_positive_rate``, ``false_positive_rate``) are derived from the
confusion counts the engines give (tp, fp, fn, tn), every count a sum of the weight.

>>> import mleval_sql as me
>>> result = me.fairness("fixtures/lake", ["demographic_parity_difference"],
...                      sensitive="region", by="model", columns={"label": None},
...                      task="binary")  # doctest: +SKIP
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from mleval_sql import uncertainty
from mleval_sql.api import ComparisonOptions, _with_intervals, execute, run
from mleval_sql.params import DEFAULTS
from mleval_sql.registry import default_averages, scoped
from mleval_sql.request import ESTIMATED_METRICS, Request, tidy
from mleval_sql.schema import Columns, InputError
from mleval_sql.sources import as_source

if TYPE_CHECKING:
    from typing_extensions import Unpack

Method = Literal["between_groups", "to_overall"]
METHODS: tuple[Method, ...] = ("between_groups", "to_overall")
AGGS = ("worst_case", "mean")
#: The rates derived from the confusion counts (fairlearn's functions of the same names).
RATES = ("selection_rate", "true_positive_rate", "false_positive_rate")
#: fairlearn's named disparities: the rates each reads and whether it is a difference.
DISPARITIES: dict[str, tuple[tuple[str, ...], Literal["difference", "ratio"]]] = {
    "demographic_parity_difference": (("selection_rate",), "difference"),
    "demographic_parity_ratio": (("selection_rate",), "ratio"),
    "equal_opportunity_difference": (("true_positive_rate",), "difference"),
    "equal_opportunity_ratio": (("true_positive_rate",), "ratio"),
    "equalized_odds_difference": (("true_positive_rate", "false_positive_rate"), "difference"),
    "equalized_odds_ratio": (("true_positive_rate", "false_positive_rate"), "ratio"),
}
#: The most groups the sensitive columns may cross into (``max_groups=`` raises it): beyond
#: it a group's value rests on few samples, and a column such as an id was likely meant.
MAX_GROUPS = 100
#: The name of a group whose sensitive value is null (a group of its own, never dropped).
NULL = "null"
_COUNTS = ("tp", "fp", "fn", "tn")
_KEYS = ("metric", "average", "label")


@dataclass(frozen=True)
class Fairness:
    """The result of :func:`fairness`.

    ``groups``: one row per control segment (``by``), group, metric, average and label:
    ``*by, *sensitive, group, metric, average, label, value, samples, weight, included,
    reason`` (``included`` false: left out of the summary, ``reason`` says why).
    ``summary``: one row per control segment, metric, average and label: ``overall``,
    ``min_group, min_value, max_group, max_value, difference, ratio, method, groups``
    (counted), ``left_out`` (the groups left out, listed), ``note``.
    ``disparities``: one row per control segment, label and named disparity asked:
    ``*by, label, disparity, value, reason``.
    With ``ci``: ``groups`` gains each group's ``ci_low, ci_high``; ``summary`` the gap's
    ``difference_low, difference_high, ratio_low, ratio_high, p_value, ci_resamples``
    (:func:`gap_intervals`); ``disparities`` a one-rate disparity's ``ci_low, ci_high,
    p_value`` (its gap's).
    """

    groups: pl.DataFrame
    summary: pl.DataFrame
    disparities: pl.DataFrame
    sensitive: tuple[str, ...]
    by: tuple[str, ...]
    method: Method


@scoped
def fairness(
    source: Any,
    metrics: str | Sequence[str] | None = None,
    *,
    sensitive: str | Sequence[str],
    method: Method = "between_groups",
    min_support: int = 0,
    agg: Literal["worst_case", "mean"] = "worst_case",
    max_groups: int = MAX_GROUPS,
    **options: Unpack[ComparisonOptions],
) -> Fairness:
    """Each metric per group of the ``sensitive`` columns (crossed, as ``by`` crosses
    segments), per control segment ``by``, and how far apart the groups are.

    ``metrics``: registry metrics (``recall``, ``roc_auc``...), the rates ``selection_rate``,
    ``true_positive_rate`` and ``false_positive_rate`` (from the confusion counts at
    ``threshold``), and fairlearn's named disparities (:data:`DISPARITIES`: each adds the
    rates it reads, and a row of ``disparities``; ``agg``: equalized odds' ``worst_case`` or
    ``mean`` of its two rates). ``method``: ``between_groups`` (difference ``max - min``,
    ratio ``min / max``) or ``to_overall`` (difference: the largest ``|group - overall|``;
    ratio: the smallest ``group / overall``, as fairlearn's folded to at most 1). Groups of
    fewer than ``min_support`` samples, and groups whose value is undefined, are listed in
    ``left_out`` and left out of the min, max, difference and ratio. A ratio whose
    denominator is 0 is null, and ``note`` says so. A null sensitive value is a group of its
    own, named ``null``. Every option of :func:`mleval_sql.evaluate` applies (``by``,
    ``threshold``, ``columns``, ``engine``...).

    ``ci`` (a level, e.g. 0.95; ``resamples``, ``seed``): each group's interval, and in
    ``summary`` an interval on the difference and on the ratio and the p-value of "no gap",
    from the bootstrap of :func:`mleval_sql.evaluate` (:func:`gap_intervals`: one set of draws
    for every group and the overall value, so each replicate gives a gap).

    >>> result = fairness(frame, ["demographic_parity_difference", "recall"],
    ...                   sensitive=["sex", "race"])  # doctest: +SKIP
    >>> result.disparities["value"][0]  # doctest: +SKIP
    """
    names = [metrics] if isinstance(metrics, str) else list(metrics or ())
    sens = (sensitive,) if isinstance(sensitive, str) else tuple(sensitive)
    if method not in METHODS:
        raise InputError(f"method {method!r}: one of {list(METHODS)}")
    if agg not in AGGS:
        raise InputError(f"agg {agg!r}: one of {list(AGGS)}")
    if not sens:
        raise InputError("fairness: name the sensitive columns (sensitive=['sex', ...])")
    if isinstance(min_support, bool) or not isinstance(min_support, (int, float)) \
            or not min_support >= 0:
        raise InputError(f"min_support must be a number of samples >= 0, got {min_support!r}")
    ci = options.get("ci")
    if options.get("window") is not None:  # its columns would need to key every gap
        raise InputError("fairness: window= is not yet taken; give the window as a by= "
                         "column (a date or month column)")
    if ci is not None and any(options.get(k) not in (None, "error")
                              for k in ("labels", "unlabelled")):
        raise InputError("fairness: ci= with labels= or unlabelled= is not yet given; run it "
                         "on the outcomes joined to the predictions")
    by = options.pop("by", ())  # type: ignore[misc]
    by = (by,) if isinstance(by, str) else tuple(by)
    disparities = [m for m in names if m in DISPARITIES]
    rates = list(dict.fromkeys([*(m for m in names if m in RATES),
                                *(r for d in disparities for r in DISPARITIES[d][0])]))
    registry = [m for m in names if m not in DISPARITIES and m not in RATES]
    asked = list(dict.fromkeys([*registry, *(_COUNTS if rates else ())]))
    if not asked:
        raise InputError("fairness: name the metrics (a registry metric, a rate of "
                         f"{list(RATES)} or a disparity of {list(DISPARITIES)})")
    estimated = [m for m in registry if m in ESTIMATED_METRICS]
    if ci is not None and estimated:  # their intervals are not the bootstrap's
        raise InputError(f"fairness: ci= with {estimated[0]} (an estimated metric) is not yet "
                         "given; compare the realised metric, or drop ci=")
    average = options.pop("average", None)  # type: ignore[misc]
    if rates:  # the rates are per label: the counts' own rows, beside the averages asked
        if average is None:  # the registry metrics': the task's default
            average = list(default_averages(_task(source, asked, by, options))) \
                if registry else []
        average = [average] if isinstance(average, str) else list(average)
        average = list(dict.fromkeys([*average, "none"]))
    _check_names(Columns.from_mapping(options.get("columns")), sens, by)
    request = Request.build("evaluate", metrics=asked, average=average, by=[*by, *sens],
                            _source=source, **options)
    _check_values(request, source, sens, max_groups)
    # the overall values' replicates serve only to_overall's gap (the same draws: they hash
    # the sample, whatever the segments)
    whole_options = options if method == "to_overall" else {
        k: v for k, v in options.items() if k not in ("ci", "resamples", "seed")}
    table, sizes, replicated = _evaluated(request, source)
    overall, _, whole_replicated = _evaluated(
        Request.build("evaluate", metrics=asked, average=average, by=list(by), _source=source,
                      **whole_options), source)
    group_keys = [*by, *sens]
    groups = _with_rates(table, group_keys, rates, registry)
    whole = _with_rates(overall, list(by), rates, registry)
    if replicated is not None:
        replicated = _named(_with_rates(replicated, group_keys, rates, registry), sens)
        groups = _group_intervals(groups, table, replicated, group_keys, ci,
                                  options.get("resamples", DEFAULTS["resamples"]))
    if whole_replicated is not None:
        whole_replicated = _with_rates(whole_replicated, list(by), rates, registry)
    groups = _named(groups, sens).join(
        sizes.select(*by, *sens, "samples", "weight"), on=[*by, *sens], how="left",
        nulls_equal=True, maintain_order="left")
    small = pl.col("samples") < min_support
    undefined = pl.col("value").is_null() | pl.col("value").is_nan()
    groups = groups.with_columns(
        included=~(small | undefined),
        reason=pl.when(small).then(pl.format("{} samples, under min_support={}",
                                             pl.col("samples"), pl.lit(min_support)))
        .when(undefined).then(pl.lit("undefined value")).otherwise(pl.lit(None, pl.String)))
    summary = _summary(groups, whole, list(by), method)
    if replicated is not None:
        summary = gap_intervals(summary, groups, replicated, whole_replicated, list(by),
                                method=method, level=ci,
                                resamples=options.get("resamples", DEFAULTS["resamples"]))
    named = _disparities(summary, list(by), disparities, agg)
    return Fairness(groups, summary, named, sens, by, method)


def _task(source: Any, metrics: list[str], by: Sequence[str], options: Mapping[str, Any]) -> Any:
    """The task of the request: settled by its options and metrics, else read from the data
    (the checks' pass)."""
    request = Request.build("evaluate", metrics=metrics, by=list(by), _source=source,
                            **options)
    return request.settled_task() or run(replace(request, action="check"), source).task


def _evaluated(request: Request, source: Any) -> tuple[pl.DataFrame, pl.DataFrame,
                                                       pl.DataFrame | None]:
    """The tidy rows of ``request`` (without interval columns: the rates are derived first),
    the segments' sizes and, with ``ci``, the bootstrap's rows (one per row and replicate)."""
    if request.params["ci"] is None:
        done = run(request, source)
        assert done.table is not None
        return done.table, done.sizes, None
    executed = execute(request, source)
    assert executed.plan is not None
    by = list(request.by)
    table = tidy(executed.plan, executed.results, by)
    if executed.plan.delong():  # a label's ROC AUC has DeLong's interval, not replicates
        table = _with_intervals(table, executed.plan, executed.results, None, by)
        table = table.drop("reason", "ci_method", "ci_resamples")
    return table, executed.sizes, executed.replicated


def _group_intervals(groups: pl.DataFrame, table: pl.DataFrame, replicated: pl.DataFrame,
                     keys: list[str], level: float, resamples: int) -> pl.DataFrame:
    """``groups`` with each group's ``ci_low``, ``ci_high``: the bootstrap's percentile
    interval of its replicates (a rate's from the replicated counts), DeLong's for a
    label's ROC AUC."""
    on = [c for c in groups.columns if c in replicated.columns and c != "value"]
    found = uncertainty.percentile_intervals(replicated, on, level=level, resamples=resamples)
    out = groups.drop("ci_low", "ci_high", strict=False).join(
        found.select(*on, "ci_low", "ci_high"), on=on, how="left", nulls_equal=True,
        maintain_order="left")
    if "ci_low" in table.columns:  # DeLong's, where the bootstrap has no rows
        first = [*keys, *_KEYS]
        delong = table.filter(pl.col("ci_low").is_not_null()).select(
            *first, d_low="ci_low", d_high="ci_high")
        out = out.join(delong, on=first, how="left", nulls_equal=True, maintain_order="left")
        out = out.with_columns(ci_low=pl.coalesce("ci_low", "d_low"),
                               ci_high=pl.coalesce("ci_high", "d_high")).drop("d_low", "d_high")
    return out


def _check_names(cols: Columns, sensitive: Sequence[str], by: Sequence[str]) -> None:
    """Refuse a sensitive column that is a role or a ``by`` column (before the request, whose
    own message would not say why)."""
    roles = {getattr(cols, r): r for r in ("sample", "label", "score", "truth", "weight")
             if getattr(cols, r) is not None}
    if len(set(sensitive)) < len(sensitive):
        raise InputError(f"sensitive columns {list(sensitive)} name one column twice")
    for column in sensitive:
        if column in roles:
            raise InputError(f"sensitive column {column!r} is the {roles[column]} column; "
                             "name a column that says the sample's group (sex, region...)")
        if column in by:
            raise InputError(f"sensitive column {column!r} is also a by column: by= are the "
                             "control features (a disparity per segment), sensitive= the "
                             "groups compared; name it in one of them")


def _check_values(request: Request, source: Any, sensitive: Sequence[str],
                  max_groups: int) -> None:
    """Refuse a sensitive column that is missing, all null, or (with the others) crossing
    into more than ``max_groups`` groups: one scan of the sensitive columns."""
    src = as_source(source, storage_options=request.storage_options, as_of=request.as_of)
    frame = src.polars()
    present = frame.collect_schema().names()
    for column in sensitive:
        if column not in present:
            raise InputError(f"sensitive column {column!r} is not in the input; it has "
                             f"{sorted(present)}")
    stats = frame.select(
        *(pl.col(c).is_not_null().any().alias(f"known_{c}") for c in sensitive),
        groups=pl.struct(list(sensitive)).n_unique()).collect().row(0, named=True)
    for column in sensitive:
        if not stats[f"known_{column}"]:
            raise InputError(f"sensitive column {column!r} is null in every row: it names no "
                             "group")
    if stats["groups"] > max_groups:
        raise InputError(f"sensitive columns {list(sensitive)} cross into {stats['groups']} "
                         f"groups, more than max_groups={max_groups}: bin a numeric column "
                         "(age into bands), or raise max_groups= if that many are meant")


def _with_rates(table: pl.DataFrame, keys: list[str], rates: Sequence[str],
                registry: Sequence[str]) -> pl.DataFrame:
    """The rows of the registry metrics asked, and the rates from the per-label counts."""
    first = [*keys, *_KEYS]
    extra = [c for c in table.columns if c not in (*first, "value")]  # threshold...
    kept = table.filter(pl.col("metric").is_in(list(registry)))
    if not rates:
        return kept
    counts = table.filter(pl.col("metric").is_in(list(_COUNTS)) & pl.col("average").is_null())
    wide = counts.pivot(on="metric", index=[k for k in first if k != "metric"] + extra,
                        values="value")
    tp, fp, fn, tn = (pl.col(c) for c in _COUNTS)
    formulas = {"selection_rate": (tp + fp, tp + fp + fn + tn),
                "true_positive_rate": (tp, tp + fn),
                "false_positive_rate": (fp, fp + tn)}
    derived = wide.with_columns(
        (pl.when(formulas[r][1] != 0).then(formulas[r][0] / formulas[r][1])).alias(r)
        for r in rates).unpivot(on=list(rates), index=[k for k in first if k != "metric"]
                                + extra, variable_name="metric", value_name="value")
    return pl.concat([kept, derived.select(kept.columns)], how="vertical_relaxed")


def _named(groups: pl.DataFrame, sensitive: Sequence[str]) -> pl.DataFrame:
    """``groups`` with ``group``: the sensitive values joined by ", " (null: ``null``)."""
    parts = [pl.col(c).cast(pl.String).fill_null(NULL) for c in sensitive]
    return groups.with_columns(group=pl.concat_str(parts, separator=", "))


def _summary(groups: pl.DataFrame, whole: pl.DataFrame, by: list[str],
             method: Method) -> pl.DataFrame:
    """Per (control segment, metric, average, label): the min and max group, the difference
    and the ratio by ``method`` (fairlearn's definitions) over the included groups."""
    keys = [*by, *_KEYS]
    rows = []
    overall = {tuple(r[:-1]): r[-1] for r in whole.select(*keys, "value").iter_rows()}
    for key, part in groups.group_by(keys, maintain_order=True):
        part = part.sort("group")
        kept = part.filter(pl.col("included"))
        left = part.filter(~pl.col("included"))
        total = overall.get(tuple(key))
        row: dict[str, Any] = dict(zip(keys, key, strict=True))
        notes = [f"{g}: {r}" for g, r in left.select("group", "reason").iter_rows()]
        row.update(overall=total, min_group=None, min_value=None, max_group=None,
                   max_value=None, difference=None, ratio=None, method=method,
                   groups=part.height, left_out=left["group"].to_list())
        if kept.height:
            low = kept.row(int(kept["value"].arg_min()), named=True)  # type: ignore[arg-type]
            high = kept.row(int(kept["value"].arg_max()), named=True)  # type: ignore[arg-type]
            row.update(min_group=low["group"], min_value=low["value"],
                       max_group=high["group"], max_value=high["value"])
            values = kept["value"].to_list()
            if method == "between_groups":
                row["difference"] = high["value"] - low["value"]
                if high["value"] == 0:
                    notes.append("ratio: the largest group value is 0")
                else:
                    row["ratio"] = low["value"] / high["value"]
            elif total is None or math.isnan(total):
                notes.append("the overall value is undefined")
            else:
                row["difference"] = max(abs(v - total) for v in values)
                ratios = [_folded(v, total) for v in values]
                if None in ratios:
                    notes.append("ratio: a group or overall value is 0")
                else:
                    row["ratio"] = min(ratios)  # type: ignore[type-var]
        else:
            notes.append("no group is left to compare")
        row["note"] = "; ".join(notes) or None
        rows.append(row)
    schema = {**{k: groups.schema[k] for k in keys}, "overall": pl.Float64,
              "min_group": pl.String, "min_value": pl.Float64, "max_group": pl.String,
              "max_value": pl.Float64, "difference": pl.Float64, "ratio": pl.Float64,
              "method": pl.String, "groups": pl.Int64, "left_out": pl.List(pl.String),
              "note": pl.String}
    return pl.DataFrame(rows, schema=schema, orient="row")


def _folded(value: float, total: float) -> float | None:
    """group / overall as fairlearn's ``to_overall`` ratio takes it: its inverse where above 1;
    None where either is 0 (fairlearn gives 0 or NaN there: a ratio with no denominator)."""
    if total == 0 or value == 0:
        return None
    ratio = value / total
    return 1 / ratio if ratio > 1 else ratio


def _disparities(summary: pl.DataFrame, by: list[str], names: Sequence[str],
                 agg: str) -> pl.DataFrame:
    """fairlearn's named disparities from the summary's rows of their rates; with ``ci``, a
    disparity of one rate has its gap's interval and p-value (equalized odds, of two rates,
    has each rate's in ``summary``)."""
    intervals = "p_value" in summary.columns
    schema = {**{k: summary.schema[k] for k in by}, "label": summary.schema["label"],
              "disparity": pl.String, "value": pl.Float64,
              **({"ci_low": pl.Float64, "ci_high": pl.Float64, "p_value": pl.Float64}
                 if intervals else {}), "reason": pl.String}
    rows = []
    rates = summary.filter(pl.col("metric").is_in(list(RATES)) & pl.col("average").is_null())
    for key, part in rates.group_by([*by, "label"], maintain_order=True):
        found = {m: r for m, r in zip(part["metric"], part.iter_rows(named=True), strict=True)}
        for name in names:
            needs, kind = DISPARITIES[name]
            values = [found[r][kind] for r in needs]
            row: dict[str, Any] = dict(zip([*by, "label"], key, strict=True))
            if intervals:
                one = found[needs[0]] if len(needs) == 1 else {}
                row.update(ci_low=one.get(f"{kind}_low"), ci_high=one.get(f"{kind}_high"),
                           p_value=one.get("p_value"))
            if any(v is None for v in values):
                lacking = next(r for r, v in zip(needs, values, strict=True) if v is None)
                row.update(disparity=name, value=None,
                           reason=f"{lacking}: {found[lacking]['note'] or 'undefined'}")
            else:
                value = ((max(values) if kind == "difference" else min(values))
                         if agg == "worst_case" else sum(values) / len(values))
                reason = ("interval: each rate's gap has its own, in summary"
                          if intervals and len(needs) > 1 else None)
                row.update(disparity=name, value=value, reason=reason)
            rows.append(row)
    return pl.DataFrame(rows, schema=schema, orient="row")


#: The columns ``ci`` adds to ``summary`` (:func:`gap_intervals`).
GAP_COLUMNS = ("difference_low", "difference_high", "ratio_low", "ratio_high", "p_value",
               "ci_resamples")


def gap_intervals(summary: pl.DataFrame, groups: pl.DataFrame, replicated: pl.DataFrame,
                  whole: pl.DataFrame | None, by: list[str], *, method: Method, level: float,
                  resamples: int) -> pl.DataFrame:
    """``summary`` with an interval on each gap and the p-value of "no gap".

    Every replicate weighs a sample by the same draw in every group and in the overall value
    (the draws hash the sample), so each replicate gives every included group's value at once.
    Centred on its own estimate, a group's replicate values say how far the estimate may lie
    from the truth; the replicate's spread ``T``, the same gap taken over the centred values
    (``max - min``; to overall, the largest ``|group - overall|``), is how far the *largest*
    of those errors may reach. With ``c`` the ``level`` quantile of ``T`` over the replicates
    in which every included value is defined, every pairwise difference of the true values lies
    within ``c`` of the estimated one at once, so the gap ``D`` lies in
    ``[max(0, D - c), D + c]`` (at least ``level`` of the time; about ``level`` for two
    groups). The ratio gets the same on the logarithms (``ratio = exp(-D_log)``), where every
    value is positive. The p-value of "no gap" (every group's true value the same, so ``T`` is
    how the gap is distributed): the share of replicates with ``T >= D``, counted as compare
    counts, ``(count + 1) / (defined + 1)``; 0 lies outside the interval where it is below
    ``1 - level``. For two groups it is compare's two-sided paired p-value where the
    replicates' differences are symmetric; for more it accounts for the choice of the two
    extremes. Fewer than ``level * resamples`` replicates defined: no interval (``note``).

    >>> rows = fairness(frame, "selection_rate", sensitive="sex", ci=0.95)  # doctest: +SKIP
    >>> rows.summary.select("difference", "difference_low", "difference_high", "p_value")
    ... # doctest: +SKIP
    """
    keys = [*by, *_KEYS]
    extra = [c for c in summary.columns if c in replicated.columns and c not in keys
             and c not in ("value", "replicate", "group")]  # a parameter column (threshold)
    on = [*keys, *extra]
    kept = groups.filter(pl.col("included")).select(*on, "group", point="value")
    reps = replicated.join(kept, on=[*on, "group"], how="inner", nulls_equal=True)
    counted = kept.group_by(on, maintain_order=True).agg(groups_in=pl.len())
    value, point = pl.col("value"), pl.col("point")
    positive = (value > 0) & (point > 0)
    reps = reps.with_columns(error=value - point,
                             log_error=pl.when(positive).then(value.log() - point.log()))
    if method == "to_overall":
        assert whole is not None
        whole_points = summary.select(*on, o="overall")
        base = whole.join(whole_points, on=on, how="inner", nulls_equal=True).select(
            *on, "replicate", o_error=pl.col("value") - pl.col("o"),
            o_log=pl.when((pl.col("value") > 0) & (pl.col("o") > 0))
            .then(pl.col("value").log() - pl.col("o").log()))
        reps = reps.join(base, on=[*on, "replicate"], how="left", nulls_equal=True)
        reps = reps.with_columns(error=pl.col("error") - pl.col("o_error"),
                                 log_error=pl.col("log_error") - pl.col("o_log"))
        spread = {c: pl.col(c).abs().max() for c in ("error", "log_error")}
    else:
        spread = {c: pl.col(c).max() - pl.col(c).min() for c in ("error", "log_error")}
    defined = {c: (pl.col(c).is_not_null() & pl.col(c).is_not_nan()).sum() for c in spread}
    per_replicate = reps.group_by([*on, "replicate"]).agg(
        t=spread["error"], t_log=spread["log_error"], n=defined["error"],
        n_log=defined["log_error"]).join(counted, on=on, nulls_equal=True)
    # a replicate counts where every included group (and the overall value) is defined in it
    full = pl.col("n") == pl.col("groups_in")
    full_log = pl.col("n_log") == pl.col("groups_in")
    per_replicate = per_replicate.with_columns(t=pl.when(full).then("t"),
                                               t_log=pl.when(full_log).then("t_log"))
    joined = summary.select(*on, "difference", "ratio").join(
        per_replicate, on=on, how="left", nulls_equal=True)
    enough = math.ceil(level * resamples - 1e-9)
    d, d_log = pl.col("difference"), -pl.col("ratio").log()
    t, t_log = pl.col("t").drop_nulls(), pl.col("t_log").drop_nulls()
    found = joined.group_by(on, maintain_order=True).agg(
        c=t.quantile(level, "linear"), c_log=t_log.quantile(level, "linear"),
        defined=t.len(), defined_log=t_log.len(),
        beyond=(t >= d.first()).sum(), d=d.first(), d_log=d_log.first())
    ok = (pl.col("defined") >= enough) & pl.col("d").is_not_null()
    ok_log = (pl.col("defined_log") >= enough) & pl.col("d_log").is_finite()
    found = found.select(
        *on,
        difference_low=pl.when(ok).then(pl.max_horizontal(pl.lit(0.0), pl.col("d") - pl.col("c"))),
        difference_high=pl.when(ok).then(pl.col("d") + pl.col("c")),
        ratio_low=pl.when(ok_log).then((-(pl.col("d_log") + pl.col("c_log"))).exp()),
        ratio_high=pl.when(ok_log).then((-pl.max_horizontal(
            pl.lit(0.0), pl.col("d_log") - pl.col("c_log"))).exp()),
        p_value=pl.when(ok).then(pl.min_horizontal(
            pl.lit(1.0), (pl.col("beyond") + 1) / (pl.col("defined") + 1))),
        ci_resamples=pl.col("defined").cast(pl.Int64),
        why=pl.when(pl.col("d").is_null()).then(pl.lit(None, pl.String))
        .when(pl.col("defined").is_null() | (pl.col("defined") == 0)).then(pl.lit(
            "interval: no replicates (a label's ROC AUC has DeLong's interval per group, "
            "not the bootstrap's)"))
        .when(~ok).then(pl.format("interval: every included value defined in {} of {} "
                                  "resamples (fewer than {})", "defined", pl.lit(resamples),
                                  pl.lit(enough)))
        .when(~ok_log & pl.col("d_log").is_not_null()).then(pl.lit(
            "ratio interval: a group's value is 0 or negative in some replicates, or "
            "defined in too few")))
    out = summary.join(found, on=on, how="left", nulls_equal=True, maintain_order="left")
    note = pl.when(pl.col("why").is_null()).then("note").when(pl.col("note").is_null()).then(
        "why").otherwise(pl.concat_str("note", pl.lit("; "), "why"))
    return out.with_columns(note=note).drop("why").select(
        *(c for c in summary.columns if c != "note"), *GAP_COLUMNS, "note")
