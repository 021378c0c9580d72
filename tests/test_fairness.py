"""me.fairness against fairlearn (the oracle): MetricFrame's difference and ratio (both
methods, two sensitive columns, a control feature, sample weights) and the named disparities,
on random binary data with ties (scores on a 0.1 grid, many at the threshold) and a degenerate
group; and the bad inputs, each a test. One body per engine."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

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


# -- intervals on the gap (ci=) ------------------------------------------------------------------

def _replicated_rates(data: pl.DataFrame, sensitive: str, resamples: int, seed: int,
                      groups: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Each group's and the overall selection rate in every replicate, recomputed with numpy
    from the project's draws (a sample's id: its rank among the distinct samples)."""
    from mleval_sql.engines.polars.bootstrap import draws, hash_starts

    ids = {s: i for i, s in enumerate(sorted(set(data["sample"])))}
    rank = np.array([ids[s] for s in data["sample"]])
    starts = hash_starts(len(ids), seed)
    weight = data["weight"].to_numpy()
    predicted = (data["score"] >= 0.5).to_numpy()
    member = [(data[sensitive] == g).to_numpy() for g in groups]
    per_group, overall = [], []
    for replicate in range(resamples):
        w = weight * draws(starts, replicate)[rank]
        per_group.append([(w * predicted * m).sum() / (w * m).sum() for m in member])
        overall.append((w * predicted).sum() / w.sum())
    return np.array(per_group), np.array(overall)


@pytest.mark.parametrize("method", ["between_groups", "to_overall"])
def test_the_gaps_interval_is_the_replicates(engine, method):
    """The interval and p-value equal those computed with numpy from each group's rates in
    the same replicates (the same draws for every group and the overall value)."""
    data, level, resamples, seed = _data(seed=3), 0.9, 60, 5
    got = me.fairness(data, ["selection_rate", "demographic_parity_ratio"], sensitive="race",
                      method=method, ci=level, resamples=resamples, seed=seed, engine=engine)
    groups = ["a", "b", "c"]
    reps, overall = _replicated_rates(data, "race", resamples, seed, groups)
    rows = got.groups.sort("group")
    points = rows["value"].to_numpy()
    _close(rows["ci_low"][1], float(np.quantile(reps[:, 1], (1 - level) / 2)))
    o = got.summary["overall"][0]
    if method == "between_groups":
        t = (reps - points).max(axis=1) - (reps - points).min(axis=1)
        d = points.max() - points.min()
        logs = np.log(reps) - np.log(points)
        t_log = logs.max(axis=1) - logs.min(axis=1)
        d_log = np.log(points.max()) - np.log(points.min())
    else:
        t = np.abs((reps - points) - (overall - o)[:, None]).max(axis=1)
        d = np.abs(points - o).max()
        t_log = np.abs((np.log(reps) - np.log(points))
                       - (np.log(overall) - np.log(o))[:, None]).max(axis=1)
        d_log = np.abs(np.log(points) - np.log(o)).max()
    c, c_log = np.quantile(t, level), np.quantile(t_log, level)
    row = got.summary.row(0, named=True)
    _close(row["difference"], float(d))
    _close(row["difference_low"], max(0.0, float(d - c)))
    _close(row["difference_high"], float(d + c))
    _close(row["ratio_low"], float(np.exp(-(d_log + c_log))))
    _close(row["ratio_high"], float(np.exp(-max(0.0, d_log - c_log))))
    _close(row["p_value"], min(1.0, ((t >= d).sum() + 1) / (resamples + 1)))
    assert row["ci_resamples"] == resamples
    named = got.disparities.row(0, named=True)
    assert (named["ci_low"], named["ci_high"], named["p_value"]) == (
        row["ratio_low"], row["ratio_high"], row["p_value"])


def _simulated(datasets: int, n: int, rates: Sequence[float], seed: int) -> pl.DataFrame:
    """``datasets`` data sets of ``n`` samples (a ``dataset`` column), each sample in a group
    ``g0``, ``g1``... at random and predicted positive with its group's rate."""
    rng = np.random.default_rng(seed)
    group = rng.integers(0, len(rates), size=datasets * n)
    return pl.DataFrame({
        "sample": np.arange(datasets * n), "dataset": np.repeat(np.arange(datasets), n),
        "group": [f"g{g}" for g in group],
        "score": (rng.random(datasets * n) < np.asarray(rates)[group]).astype(float),
        "truth": rng.random(datasets * n) < 0.5})


@pytest.mark.parametrize(("rates", "method"), [((0.4, 0.4), "between_groups"),
                                               ((0.3, 0.45), "between_groups"),
                                               ((0.4, 0.4, 0.4), "between_groups"),
                                               ((0.3, 0.4, 0.5), "to_overall")])
def test_the_gaps_interval_covers_the_true_gap(rates, method):
    """Over 200 simulated data sets: the 95% interval holds the true gap in 90-99% of them
    (at least 95% by construction, about 95% for two groups), and with no real gap the
    p-value is under 0.05 in at most 10% (the selection of the extremes among three groups
    does not inflate it). A polars run of all data sets at once (dataset: a by column)."""
    datasets, n = 200, 300
    data = _simulated(datasets, n, rates, seed=len(rates) * 10 + int(rates[1] * 100))
    got = me.fairness(data, "selection_rate", sensitive="group", by="dataset", method=method,
                      ci=0.95, resamples=200, columns={"label": None, "weight": None},
                      task="binary").summary
    truths = np.asarray(rates)
    true_gap = (truths.max() - truths.min() if method == "between_groups"
                else np.abs(truths - truths.mean()).max())  # groups of equal expected size
    folded = np.minimum(truths / truths.mean(), truths.mean() / truths)
    true_ratio = truths.min() / truths.max() if method == "between_groups" else folded.min()
    covered = ((got["difference_low"] <= true_gap + 1e-12)
               & (got["difference_high"] >= true_gap - 1e-12)).mean()
    ratio = ((got["ratio_low"] <= true_ratio + 1e-12)
             & (got["ratio_high"] >= true_ratio - 1e-12)).mean()
    assert got.height == datasets and got["difference_low"].null_count() == 0
    assert 0.90 <= covered <= 0.99 and 0.90 <= ratio <= 0.99, (covered, ratio)
    if true_gap == 0:
        assert (got["p_value"] < 0.05).mean() <= 0.10
    else:
        assert (got["p_value"] < 0.05).mean() >= 0.5  # a gap of 0.15 on ~100 samples a group


def test_bad_interval_options_are_refused():
    with pytest.raises(me.InputError, match="ci must be a finite number in \\(0, 1\\)"):
        me.fairness(_data(), "selection_rate", sensitive="sex", ci=1.5)
    with pytest.raises(me.InputError, match="min_support must be"):
        me.fairness(_data(), "selection_rate", sensitive="sex", min_support=-1)
    with pytest.raises(me.InputError, match="resamples= and seed= are the bootstrap's"):
        me.fairness(_data(), "selection_rate", sensitive="sex", resamples=50)


# -- the command line ------------------------------------------------------------------------------

def test_the_command_line_gives_the_apis_rows(tmp_path):
    """`mleval fairness` writes the table asked (--result) and it equals the API's, with the
    same options by their flags."""
    from mleval_sql.cli import main

    path = tmp_path / "preds.parquet"
    _data().write_parquet(path)
    flags = ["--metric", "demographic_parity_ratio,recall", "--sensitive", "sex,race",
             "--by", "region", "--method", "to_overall", "--min-support", "20",
             "--ci", "0.9", "--resamples", "40", "--seed", "3", "--threshold", "0.4"]
    api = me.fairness(str(path), ["demographic_parity_ratio", "recall"],
                      sensitive=["sex", "race"], by="region", method="to_overall",
                      min_support=20, ci=0.9, resamples=40, seed=3, threshold=0.4)
    for table in ("summary", "groups", "disparities"):
        out = tmp_path / f"{table}.parquet"
        assert main(["fairness", str(path), *flags, "--result", table, "-o", str(out)]) == 0
        assert pl.read_parquet(out).equals(getattr(api, table)), table


@pytest.mark.parametrize(("flags", "said"), [
    (["--sensitive", "age"], "sensitive column 'age' is not in the input"),
    (["--sensitive", "sex", "--ci", "1.5"], "ci must be a finite number in (0, 1)"),
    (["--sensitive", "sex", "--method", "worst"], "argument --method: invalid choice"),
    (["--metric", "selection_rate"], "the following arguments are required: --sensitive"),
])
def test_the_command_line_refuses_bad_options(tmp_path, capsys, flags, said):
    from mleval_sql.cli import main

    path = tmp_path / "preds.parquet"
    _data().write_parquet(path)
    metric = [] if "--metric" in flags else ["--metric", "selection_rate"]
    assert main(["fairness", str(path), *metric, *flags]) == 2
    assert said in capsys.readouterr().err


# -- a report job's [fairness] ---------------------------------------------------------------------

def test_a_report_jobs_fairness_section(tmp_path):
    """[fairness]: its tables written beside the others (equal to me.fairness by the model
    column), a section of the page, and a rule on a disparity that fires for the model with
    the gap and not for the other; bad keys are named."""
    pytest.importorskip("jinja2")
    pytest.importorskip("matplotlib")
    rng = np.random.default_rng(5)
    n = 600
    sex = np.tile(rng.choice(["F", "M"], size=n), 2)  # a sample's, under both models
    model = np.repeat(["a", "b"], n)
    rate = np.where((model == "b") & (sex == "F"), 0.25, 0.5)  # model b selects fewer women
    data = pl.DataFrame({"sample": np.tile(np.arange(n), 2), "model": model, "sex": sex,
                         "score": (rng.random(2 * n) < rate).astype(float),
                         "truth": rng.random(2 * n) < 0.5})
    path = tmp_path / "preds.parquet"
    data.write_parquet(path)
    job = {"sources": [{"path": str(path), "model_column": "model"}], "metrics": ["accuracy"],
           "task": "binary", "curves": {"kinds": []},
           "fairness": {"metrics": ["demographic_parity_ratio", "recall"], "sensitive": "sex",
                        "ci": 0.9, "min_support": 10},
           "alerts": {"rules": [{"metric": "demographic_parity_ratio", "below": 0.8}]}}
    outcome = me.report(job, tmp_path / "out", progress=False)
    summary = pl.read_parquet(tmp_path / "out" / "fairness_summary.parquet")
    groups = pl.read_parquet(tmp_path / "out" / "fairness_groups.parquet")
    named = pl.read_parquet(tmp_path / "out" / "fairness_disparities.parquet")
    want = me.fairness(data, ["demographic_parity_ratio", "recall"], sensitive="sex",
                       by="model", ci=0.9, min_support=10, columns={"label": None},
                       task="binary")
    keys = ["model", "metric", "label"]
    got = summary.drop("segmentation", "segment").sort(keys)
    assert got.select(want.summary.columns).equals(want.summary.sort(keys))
    assert groups.height == want.groups.height and named.height == 2
    assert [(a["rule_key"], a["model"]) for a in outcome.alerts] == [("alerts.rules[0]", "b")]
    page = (tmp_path / "out" / "report.html").read_text()
    assert 'id="fairness"' in page and "demographic_parity_ratio" in page
    assert outcome.summary["fairness"]["sensitive"] == ["sex"]
    bad = {**job, "fairness": {**job["fairness"], "ci": 1.5}}
    with pytest.raises(me.reporting.JobError, match=r"fairness\.ci: ci must be"):
        me.reporting.Job.from_dict(bad)
    bad = {**job, "fairness": {**job["fairness"], "method": "worst"}}
    with pytest.raises(me.reporting.JobError, match=r"fairness\.method: expected one of"):
        me.reporting.Job.from_dict(bad)
    bad = {**job, "fairness": {**job["fairness"], "sensitive": "age"}}
    with pytest.raises(me.reporting.JobError,
                       match=r"fairness\.sensitive: sources\[0\] has no column 'age'"):
        me.report(bad, tmp_path / "bad", progress=False)


def test_the_gaps_interval_leaves_out_what_the_gap_leaves_out():
    """A group under min_support is not in the gap nor in its replicates (every replicate
    of the three others counts); a label's ROC AUC has DeLong's interval per group and none
    on its gap, and the note says why."""
    data = _data(degenerate=True)
    got = me.fairness(data, ["selection_rate", "roc_auc"], sensitive="race", min_support=13,
                      ci=0.9, resamples=40)
    rate = got.summary.filter(pl.col("metric") == "selection_rate").row(0, named=True)
    assert rate["left_out"] == ["d"] and rate["ci_resamples"] == 40
    assert rate["difference_low"] <= rate["difference"] <= rate["difference_high"]
    auc = got.summary.filter(pl.col("metric") == "roc_auc").row(0, named=True)
    assert auc["difference_low"] is None and "DeLong" in auc["note"]
    groups = got.groups.filter(pl.col("metric") == "roc_auc", pl.col("included"))
    assert groups["ci_low"].null_count() == 0


def test_rates_of_a_multilabel_lake_with_the_default_average():
    """The rates are per label whatever the average; a registry metric keeps the task's
    default (multilabel: macro) beside its per-label rows."""
    lake = Path(__file__).resolve().parent.parent / "fixtures" / "lake"
    got = me.fairness(lake, ["selection_rate", "recall"], sensitive="region", by="model").summary
    rates = got.filter(pl.col("metric") == "selection_rate")
    assert rates["average"].null_count() == rates.height == 8  # 2 models x 4 labels
    assert got.filter(pl.col("metric") == "recall")["average"].to_list().count("macro") == 2
