"""Performance estimated without the truth: the calibration maps against scikit-learn's
isotonic regression and a hand-worked histogram, the estimates against their definitions
(tests/oracle_estimation.py; every metric and engine also runs in test_metrics), their
intervals against simulated outcomes, and bad input."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.api import run
from mleval_sql.estimation import Expected, calibration_map
from mleval_sql.request import Request
from tests.oracle_estimation import estimates

ESTIMATED = ["estimated_accuracy", "estimated_precision", "estimated_recall", "estimated_f1",
             "estimated_roc_auc"]


def _rows(rng: np.random.Generator, samples: int, labels: int = 1, *,
          weights: bool = False, raw: bool = False) -> pl.DataFrame:
    """``samples`` x ``labels`` rows whose truth is drawn with the score as its probability
    (with ``raw``: the probability is a logistic of the score, which is then not one)."""
    q = rng.beta(2, 3, (samples, labels)).round(2)  # ties
    frame = pl.DataFrame({
        "sample": np.repeat(np.arange(samples), labels),
        "label": np.tile([f"l{j}" for j in range(labels)], samples),
        "probability": q.ravel(),
        "truth": (rng.random(samples * labels) < q.ravel()),
        "region": np.repeat(rng.choice(["north", "south"], samples), labels),
        **({"weight": np.repeat(rng.integers(0, 4, samples).astype(float), labels)}
           if weights else {}),
    })
    score = (np.log(frame["probability"] / (1 - frame["probability"])) if raw
             else frame["probability"])
    return frame.with_columns(score=pl.Series(score))


def test_isotonic_map_is_scikit_learns(engine: str) -> None:
    """The isotonic map equals IsotonicRegression(out_of_bounds='clip') with weights, per
    label and segment, read between its points linearly, on the reference's own scores and
    beyond them; the estimates then equal their definitions at those probabilities."""
    from sklearn.isotonic import IsotonicRegression

    rng = np.random.default_rng(5)
    reference = _rows(rng, 300, 2, weights=True, raw=True)
    current = _rows(rng, 200, 2, weights=True, raw=True).with_columns(
        pl.col("score") * 1.5)  # beyond the reference's range at both ends
    got = me.evaluate(current.drop("truth"), ESTIMATED, reference=reference, engine=engine,
                      average="none", by="region")
    for (region, label), part in current.partition_by("region", "label", as_dict=True).items():
        ref = reference.filter(pl.col("label") == label, pl.col("region") == region)
        iso = IsotonicRegression(out_of_bounds="clip").fit(
            ref["score"], ref["truth"].cast(float), sample_weight=ref["weight"])
        q = iso.predict(part["score"].to_numpy())
        want = estimates(q, part["score"].to_numpy(), part["weight"].to_numpy(), 0.5)
        for metric, value in want.items():
            row = got.filter(metric=metric, label=label, region=region)
            assert row["value"][0] == pytest.approx(value, rel=1e-9, abs=1e-12), metric


def test_histogram_map_by_hand(engine: str) -> None:
    """Two bins of equal reference weight over four scores: each bin's positive rate."""
    reference = pl.DataFrame({"sample": range(8), "score": [1, 1, 2, 2, 3, 3, 4, 4],
                              "truth": [0, 0, 0, 1, 1, 1, 1, 0]})
    knots = calibration_map(reference.lazy(), "histogram", score="score", truth="truth",
                            keys=(), weight=None, n_bins=2)
    assert knots.rows() == [(float("-inf"), 3.0, 0.25, 0.0), (3.0, float("inf"), 0.75, 0.0)]
    current = pl.DataFrame({"sample": range(4), "score": [0.0, 2.9, 3.0, 9.0]})
    derived = Expected("truth", "score", (), knots, replaces=False)
    assert derived.polars(current.lazy()).sort("sample").collect()["truth"].to_list() == [
        0.25, 0.25, 0.75, 0.75]
    got = me.evaluate(current, ["estimated_accuracy"], reference=reference,
                      calibration="histogram", n_bins=2, threshold=3.0, engine=engine)
    # predicted positive: 3.0 and 9.0 (q 0.75 each), negative: 0.0, 2.9 (q 0.25 each)
    assert got["value"].to_list() == [pytest.approx((0.75 * 2 + 0.75 * 2) / 4)]


def test_estimates_without_calibration_equal_their_definitions(engine: str) -> None:
    """Weighted rows in segments, one of them degenerate (every probability 0): the expected
    counts' ratios, or null where they are 0 / 0."""
    rng = np.random.default_rng(11)
    frame = _rows(rng, 120, 1, weights=True)
    empty = frame.head(10).with_columns(region=pl.lit("east"), score=pl.lit(0.0),
                                        sample=pl.col("sample") + 1000)
    frame = pl.concat([frame, empty], how="vertical_relaxed")
    got = me.evaluate(frame.drop("truth"), ESTIMATED, by="region", columns={"label": None},
                      engine=engine)
    for (region,), part in frame.partition_by("region", as_dict=True).items():
        q = part["score"].to_numpy()
        want = estimates(q, q, part["weight"].to_numpy(), 0.5)
        for metric, value in want.items():
            row = got.filter((pl.col("region") == region) & (pl.col("metric") == metric))
            assert row["value"][0] == pytest.approx(value, rel=1e-9, abs=1e-12) \
                if value is not None else row["value"][0] is None, (region, metric)
    assert got.filter(pl.col("region") == "east", pl.col("metric") == "estimated_recall")[
        "value"][0] is None


def test_interval_width_matches_simulated_outcomes() -> None:
    """The interval's half width / z is the spread of the realised values when outcomes are
    drawn with their probabilities (1,000 draws of 400 rows, within 12%)."""
    from sklearn.metrics import (
        accuracy_score,
        f1_score,
        precision_score,
        recall_score,
        roc_auc_score,
    )

    rng = np.random.default_rng(3)
    frame = _rows(rng, 400, 1)
    q, decided = frame["score"].to_numpy(), frame["score"].to_numpy() >= 0.5
    got = me.evaluate(frame, ESTIMATED, ci=0.95, columns={"label": None})
    draws = rng.random((1000, q.size)) < q
    realised = {
        "estimated_accuracy": [accuracy_score(y, decided) for y in draws],
        "estimated_precision": [precision_score(y, decided) for y in draws],
        "estimated_recall": [recall_score(y, decided) for y in draws],
        "estimated_f1": [f1_score(y, decided) for y in draws],
        "estimated_roc_auc": [roc_auc_score(y, q) for y in draws],
    }
    for row in got.iter_rows(named=True):
        sd = (row["ci_high"] - row["ci_low"]) / 2 / 1.959963984540054
        assert sd == pytest.approx(np.std(realised[row["metric"]]), rel=0.12), row["metric"]
        assert row["ci_method"] == "expected"


def test_realised_values_fall_in_the_intervals(engine: str) -> None:
    """Calibrated scores in 150 windows of 600 rows: each realised metric lies in its
    estimate's 95% interval in 90% to 98% of the windows."""
    rng = np.random.default_rng(7)
    frame = _rows(rng, 150 * 600, 1).with_columns(window=pl.col("sample") // 600)
    metrics = [*ESTIMATED, "accuracy", "precision", "recall", "f1", "roc_auc"]
    got = me.evaluate(frame, metrics, by="window", ci=0.95, columns={"label": None},
                      resamples=20, engine=engine)
    estimated = got.filter(pl.col("metric").str.starts_with("estimated_")).with_columns(
        pl.col("metric").str.strip_prefix("estimated_"))
    both = estimated.join(got.select("window", "metric", realised="value"),
                          on=["window", "metric"])
    inside = both.group_by("metric").agg(
        ((pl.col("realised") >= pl.col("ci_low")) & (pl.col("realised") <= pl.col("ci_high")))
        .mean().alias("coverage"))
    for metric, coverage in inside.iter_rows():
        assert 0.90 <= coverage <= 0.98, (metric, coverage)


def test_estimated_beside_realised_in_windows_and_macro(engine: str) -> None:
    """Multilabel rows in daily windows: each estimate equals the same request on one window's
    rows, with the realised metric beside it, in the order asked; macro averages the labels
    (its interval is null, with the reason)."""
    rng = np.random.default_rng(2)
    frame = _rows(rng, 90, 3).with_columns(
        day=pl.date(2026, 11, 1) + pl.duration(days=pl.col("sample") % 3))
    got = me.evaluate(frame, ["estimated_f1", "f1"], window="day:1d", ci=0.9, resamples=20,
                      engine=engine)
    assert got["metric"].unique(maintain_order=True).to_list() == ["estimated_f1", "f1"]
    first = frame.filter(pl.col("day") == pl.date(2026, 11, 1))
    alone = me.evaluate(first.drop("day"), ["estimated_f1"], average=["none", "macro"],
                        engine=engine)
    day = got.filter(pl.col("window_start").dt.date() == pl.date(2026, 11, 1),
                     pl.col("metric") == "estimated_f1")
    assert day["value"].to_list() == pytest.approx(
        alone.filter(pl.col("average") == "macro")["value"].to_list())
    assert day["ci_low"][0] is None and "per label" in day["reason"][0]


def test_a_segment_without_truth_is_sized_by_its_estimates(engine: str) -> None:
    """Realised metrics of the labelled rows (unlabelled="skip") beside the estimates: the
    sizes hold every segment, one with no known truth at a coverage of 0."""
    rng = np.random.default_rng(3)
    frame = _rows(rng, 60, 2).with_columns(region=pl.col("sample") % 3)
    frame = frame.with_columns(truth=pl.when(pl.col("region") == 2).then(None)
                               .otherwise(pl.col("truth")))
    request = Request.build("evaluate", metrics=["f1", "estimated_f1"], by="region",
                            unlabelled="skip", engine=engine)
    sizes = run(request, frame).sizes.sort("region")
    assert sizes["region"].to_list() == [0, 1, 2]
    assert sizes["samples"].to_list() == [20, 20, 20]
    assert sizes["label_coverage"].to_list() == [1.0, 1.0, 0.0]


@pytest.mark.parametrize(("options", "match"), [
    ({"calibration": "isotonic"}, "learnt on labelled rows: name them"),
    ({"metrics": ["f1"], "reference": "REF"}, "serves the estimated metrics"),
    ({"reference": {"model": "a"}}, "not {column: value}"),
    ({"reference": "NO_TRUTH"}, "no column 'truth'"),
    ({"reference": "ONE_LABEL"}, "no labelled row of label='l1'"),
    ({}, r"outside \[0, 1\]|probabilit"),
    ({"engine": "sql"}, "engines that read files and frames"),
])
def test_bad_input(options: dict, match: str) -> None:
    rng = np.random.default_rng(1)
    reference = _rows(rng, 50, 2)
    current = _rows(rng, 40, 2, raw=True).drop("truth")
    named = {"REF": reference, "NO_TRUTH": reference.drop("truth"),
             "ONE_LABEL": reference.filter(pl.col("label") == "l0")}
    options = {k: named.get(v, v) if isinstance(v, str) else v for k, v in options.items()}
    metrics = options.pop("metrics", ["estimated_f1"])
    with pytest.raises(me.InputError, match=match):
        me.evaluate(current, metrics, **options)


def test_only_an_evaluation_at_one_threshold_estimates() -> None:
    frame = _rows(np.random.default_rng(4), 20, 1).with_columns(model=pl.lit("a"))
    with pytest.raises(me.InputError, match="compare takes the realised ones"):
        me.compare(frame, ["estimated_f1"], model="model", baseline="a")
    with pytest.raises(me.InputError, match="slices takes the realised ones"):
        me.slices(frame, "estimated_f1", over=["region"])
    with pytest.raises(me.InputError, match="at one threshold"):
        me.evaluate(frame, ["estimated_f1", "f1"], thresholds=[0.2, 0.5])


def test_no_statement_reads_estimates() -> None:
    with pytest.raises(me.InputError, match="reads each row's probability"):
        me.sql(["estimated_roc_auc"], task="binary", table="preds")
