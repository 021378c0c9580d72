"""me.fairness against fairlearn (the oracle): MetricFrame's difference and ratio (both
methods, two sensitive columns, a control feature, sample weights) and the named disparities,
on random binary data with ties (scores on a 0.1 grid, many at the threshold) and a degenerate
group; and the bad inputs, each a test. One body per engine."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

fairlearn = pytest.importorskip("fairlearn.metrics")

import mleval_sql as me  # noqa: E402
from mleval_sql.fairness import DISPARITIES  # noqa: E402

RATES = {"selection_rate": fairlearn.selection_rate,
         "true_positive_rate": fairlearn.true_positive_rate,
         "false_positive_rate": fairlearn.false_positive_rate}


def _data(seed: int = 7, n: int = 400, degenerate: bool = False) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], size=n).astype(object)
    race = rng.choice(["a", "b", "c"], size=n).astype(object)
    truth = rng.random(n) < 0.4
    if degenerate:  # a group with no positives: its true positive rate is undefined
        race[:12] = "d"
        truth[:12] = False
    return pl.DataFrame({
        "sample": [f"s{i}" for i in range(n)],
        "score": np.round(rng.integers(0, 11, size=n) / 10, 1),  # ties, many at 0.5
        "truth": truth, "weight": rng.choice([0.5, 1.0, 2.0, 3.0], size=n),
        "sex": sex, "race": race, "region": rng.choice(["north", "south"], size=n)})


def _frame(data: pl.DataFrame, rate: str, sensitive: list[str],
           control: list[str] | None) -> fairlearn.MetricFrame:
    pdf = data.to_pandas()
    return fairlearn.MetricFrame(
        metrics=RATES[rate], y_true=pdf["truth"].astype(int),
        y_pred=(pdf["score"] >= 0.5).astype(int), sensitive_features=pdf[sensitive],
        control_features=pdf[control] if control else None,
        sample_params={"sample_weight": pdf["weight"].to_numpy()})


def _close(got: float | None, want: float) -> None:
    assert got is not None and math.isclose(got, want, rel_tol=1e-9, abs_tol=1e-12), (got, want)


@pytest.mark.parametrize("method", ["between_groups", "to_overall"])
@pytest.mark.parametrize("control", [None, ["region"]])
def test_difference_and_ratio_equal_metricframes(engine, method, control):
    data = _data()
    got = me.fairness(data, list(RATES), sensitive=["sex", "race"], method=method,
                      by=control or (), engine=engine)
    for rate in RATES:
        frame = _frame(data, rate, ["sex", "race"], control)
        difference, ratio = frame.difference(method=method), frame.ratio(method=method)
        rows = got.summary.filter(pl.col("metric") == rate)
        if control is None:
            row = rows.row(0, named=True)
            _close(row["difference"], float(difference))
            _close(row["ratio"], float(ratio))
            assert row["groups"] == 6 and row["left_out"] == []
        else:
            for region in ("north", "south"):
                row = rows.filter(pl.col("region") == region).row(0, named=True)
                _close(row["difference"], float(difference[region]))
                _close(row["ratio"], float(ratio[region]))


def test_group_values_and_min_max_equal_by_group(engine):
    data = _data()
    got = me.fairness(data, "selection_rate", sensitive=["sex", "race"], engine=engine)
    frame = _frame(data, "selection_rate", ["sex", "race"], None)
    for (sex, race), want in frame.by_group.items():
        row = got.groups.filter((pl.col("sex") == sex) & (pl.col("race") == race))
        _close(row["value"][0], float(want))
        assert row["group"][0] == f"{sex}, {race}"
        assert row["samples"][0] == int(((data["sex"] == sex) & (data["race"] == race)).sum())
    summary = got.summary.row(0, named=True)
    _close(summary["min_value"], float(frame.group_min()))
    _close(summary["max_value"], float(frame.group_max()))
    _close(summary["overall"], float(frame.overall))
    assert summary["min_group"] == ", ".join(frame.by_group.idxmin())


@pytest.mark.parametrize("method", ["between_groups", "to_overall"])
@pytest.mark.parametrize("agg", ["worst_case", "mean"])
def test_named_disparities_equal_fairlearns(engine, method, agg):
    data = _data(seed=11)
    got = me.fairness(data, list(DISPARITIES), sensitive=["sex", "race"], method=method,
                      agg=agg, engine=engine)
    pdf = data.to_pandas()
    args = dict(y_true=pdf["truth"].astype(int), y_pred=(pdf["score"] >= 0.5).astype(int),
                sensitive_features=pdf[["sex", "race"]], method=method,
                sample_weight=pdf["weight"].to_numpy())
    for name in DISPARITIES:
        extra = {"agg": agg} if name.startswith("equalized_odds") else {}
        want = getattr(fairlearn, name)(**args, **extra)
        row = got.disparities.filter(pl.col("disparity") == name).row(0, named=True)
        _close(row["value"], float(want))


def test_a_degenerate_group_is_left_out_with_its_reason(engine):
    """race "d" has no positives: fairlearn counts its true positive rate as 0; here it is
    undefined, listed and left out, and the gap is fairlearn's over the other groups."""
    data = _data(degenerate=True)
    got = me.fairness(data, ["equal_opportunity_difference", "selection_rate"],
                      sensitive="race", engine=engine)
    tpr = got.summary.filter(pl.col("metric") == "true_positive_rate").row(0, named=True)
    assert tpr["left_out"] == ["d"] and "d: undefined value" in tpr["note"]
    frame = _frame(data, "true_positive_rate", ["race"], None)
    kept = frame.by_group.drop("d")
    _close(tpr["difference"], float(kept.max() - kept.min()))
    _close(got.disparities["value"][0], float(kept.max() - kept.min()))
    selection = got.summary.filter(pl.col("metric") == "selection_rate").row(0, named=True)
    assert selection["left_out"] == [] and selection["groups"] == 4


def test_groups_under_min_support_are_left_out(engine):
    data = _data(degenerate=True)
    got = me.fairness(data, "selection_rate", sensitive="race", min_support=13, engine=engine)
    row = got.summary.row(0, named=True)
    assert row["left_out"] == ["d"] and "under min_support=13" in row["note"]
    frame = _frame(data, "selection_rate", ["race"], None)
    kept = frame.by_group.drop("d")
    _close(row["difference"], float(kept.max() - kept.min()))


def test_registry_metrics_compare_across_groups(engine):
    data = _data()
    got = me.fairness(data, ["recall", "roc_auc"], sensitive="sex", engine=engine)
    pdf = data.to_pandas()
    want = fairlearn.MetricFrame(
        metrics=lambda y, p, sample_weight: __import__("sklearn.metrics").metrics.recall_score(
            y, p, sample_weight=sample_weight),
        y_true=pdf["truth"], y_pred=pdf["score"] >= 0.5, sensitive_features=pdf["sex"],
        sample_params={"sample_weight": pdf["weight"].to_numpy()})
    row = got.summary.filter(pl.col("metric") == "recall").row(0, named=True)
    _close(row["difference"], float(want.difference()))
    assert got.summary.filter(pl.col("metric") == "roc_auc")["difference"][0] is not None


def test_null_values_are_a_group_named_null(engine):
    data = _data().with_columns(sex=pl.when(pl.col("sample").str.ends_with("3"))
                                .then(None).otherwise(pl.col("sex")))
    got = me.fairness(data, "selection_rate", sensitive="sex", engine=engine)
    assert sorted(got.groups["group"]) == ["F", "M", "null"]
    assert got.groups["samples"].sum() == data.height
    pdf = data.to_pandas()
    pdf["sex"] = pdf["sex"].fillna("null")
    frame = fairlearn.MetricFrame(
        metrics=fairlearn.selection_rate, y_true=pdf["truth"].astype(int),
        y_pred=(pdf["score"] >= 0.5).astype(int), sensitive_features=pdf["sex"],
        sample_params={"sample_weight": pdf["weight"].to_numpy()})
    _close(got.summary["difference"][0], float(frame.difference()))


def test_a_zero_denominator_gives_a_null_ratio_with_a_reason(engine):
    data = _data().with_columns(score=pl.when(pl.col("sex") == "F").then(0.0)
                                .otherwise(pl.col("score")))
    got = me.fairness(data, "selection_rate", sensitive="sex", method="to_overall",
                      engine=engine)
    row = got.summary.row(0, named=True)
    assert row["ratio"] is None and "ratio" in row["note"] and row["difference"] is not None
    data = data.with_columns(score=pl.lit(0.0))
    row = me.fairness(data, "selection_rate", sensitive="sex", engine=engine).summary.row(
        0, named=True)
    assert row["ratio"] is None and row["difference"] == 0.0
    assert "largest group value is 0" in row["note"]


@pytest.mark.parametrize("column", ["sample", "score", "truth", "weight"])
def test_a_sensitive_column_that_is_a_role_is_refused(column):
    with pytest.raises(me.InputError, match=f"is the {column} column"):
        me.fairness(_data(), "selection_rate", sensitive=column)


def test_a_sensitive_column_that_is_a_role_by_mapping_is_refused():
    data = _data().rename({"score": "prob"})
    with pytest.raises(me.InputError, match="is the score column"):
        me.fairness(data, "selection_rate", sensitive="prob", columns={"score": "prob"})


def test_a_sensitive_column_that_is_a_by_column_is_refused():
    with pytest.raises(me.InputError, match="also a by column"):
        me.fairness(_data(), "selection_rate", sensitive=["sex"], by="sex")


def test_a_missing_sensitive_column_is_refused():
    with pytest.raises(me.InputError, match="'age' is not in the input"):
        me.fairness(_data(), "selection_rate", sensitive="age")


def test_an_all_null_sensitive_column_is_refused():
    data = _data().with_columns(age=pl.lit(None, pl.String))
    with pytest.raises(me.InputError, match="null in every row"):
        me.fairness(data, "selection_rate", sensitive="age")


def test_too_many_groups_are_refused_with_a_hint():
    data = _data().with_columns(age=pl.int_range(pl.len()) % 50)
    with pytest.raises(me.InputError, match="more than max_groups=100: bin a numeric"):
        me.fairness(data, "selection_rate", sensitive=["age", "race"])
    got = me.fairness(data, "selection_rate", sensitive="age", max_groups=50)
    assert got.summary["groups"][0] == 50


def test_bad_method_and_agg_are_refused():
    with pytest.raises(me.InputError, match="method 'worst'"):
        me.fairness(_data(), "selection_rate", sensitive="sex", method="worst")  # type: ignore[arg-type]
    with pytest.raises(me.InputError, match="agg 'max'"):
        me.fairness(_data(), "selection_rate", sensitive="sex", agg="max")  # type: ignore[arg-type]
