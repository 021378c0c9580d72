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
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import polars as pl

from mleval_sql.api import ComparisonOptions, run
from mleval_sql.request import Request
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
    """

    groups: pl.DataFrame
    summary: pl.DataFrame
    disparities: pl.DataFrame
    sensitive: tuple[str, ...]
    by: tuple[str, ...]
    method: Method


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
    ``threshold``, ``columns``, ``engine``...), except ``ci`` (not yet).

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
    if options.get("ci") is not None:
        raise InputError("fairness: ci= is not yet given for the gaps between groups")
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
    average = options.pop("average", None)  # type: ignore[misc]
    if rates and average is not None:  # the rates are per label: the counts' own rows
        average = [average] if isinstance(average, str) else list(average)
        average = list(dict.fromkeys([*average, "none"]))
    _check_names(Columns.from_mapping(options.get("columns")), sens, by)
    request = Request.build("evaluate", metrics=asked, average=average, by=[*by, *sens],
                            _source=source, **options)
    _check_values(request, source, sens, max_groups)
    grouped = run(request, source)
    overall = run(Request.build("evaluate", metrics=asked, average=average, by=list(by),
                                _source=source, **options), source)
    assert grouped.table is not None and overall.table is not None
    groups = _with_rates(grouped.table, [*by, *sens], rates, registry)
    whole = _with_rates(overall.table, list(by), rates, registry)
    groups = _named(groups, sens).join(
        grouped.sizes.select(*by, *sens, "samples", "weight"), on=[*by, *sens], how="left",
        nulls_equal=True, maintain_order="left")
    small = pl.col("samples") < min_support
    undefined = pl.col("value").is_null() | pl.col("value").is_nan()
    groups = groups.with_columns(
        included=~(small | undefined),
        reason=pl.when(small).then(pl.format("{} samples, under min_support={}",
                                             pl.col("samples"), pl.lit(min_support)))
        .when(undefined).then(pl.lit("undefined value")).otherwise(pl.lit(None, pl.String)))
    summary = _summary(groups, whole, list(by), method)
    named = _disparities(summary, list(by), disparities, agg)
    return Fairness(groups, summary, named, sens, by, method)


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
    """fairlearn's named disparities from the summary's rows of their rates."""
    schema = {**{k: summary.schema[k] for k in by}, "label": summary.schema["label"],
              "disparity": pl.String, "value": pl.Float64, "reason": pl.String}
    rows = []
    rates = summary.filter(pl.col("metric").is_in(list(RATES)) & pl.col("average").is_null())
    for key, part in rates.group_by([*by, "label"], maintain_order=True):
        found = {m: r for m, r in zip(part["metric"], part.iter_rows(named=True), strict=True)}
        for name in names:
            needs, kind = DISPARITIES[name]
            values = [found[r][kind] for r in needs]
            row: dict[str, Any] = dict(zip([*by, "label"], key, strict=True))
            if any(v is None for v in values):
                lacking = next(r for r, v in zip(needs, values, strict=True) if v is None)
                row.update(disparity=name, value=None,
                           reason=f"{lacking}: {found[lacking]['note'] or 'undefined'}")
            else:
                value = ((max(values) if kind == "difference" else min(values))
                         if agg == "worst_case" else sum(values) / len(values))
                row.update(disparity=name, value=value, reason=None)
            rows.append(row)
    return pl.DataFrame(rows, schema=schema, orient="row")
