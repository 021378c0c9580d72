"""Curves sized for people: ``max_points`` keeps at most that many points of each ROC / PR curve,
and the curve drawn through them (lines, or PR's steps) stays within the stated distance of the
exact one (``params.curve_bins``), on data with ties, weights and degenerate curves, on both
engines, through ``me.curve``, an evaluation's ``curves=`` and a pasted statement; the areas
still come from every point."""

from __future__ import annotations

from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal
from sklearn.metrics import average_precision_score, roc_auc_score

import mleval_sql as me
from mleval_sql.api import run
from mleval_sql.engines import local_engines
from mleval_sql.params import curve_bins
from mleval_sql.request import Request
from tests.data import make_predictions

XY = {"roc": ("fpr", "tpr"), "pr": ("recall", "precision")}


def _predictions(n: int = 3000, seed: int = 0) -> pl.DataFrame:
    """A binary log of seven curves (``curve``, a segment): tied scores (rounded to 2 and 3
    decimals) and fractional weights; and degenerate ones: without positives, without
    negatives, every score tied, a single sample."""
    rng = np.random.default_rng(seed)
    frames = []
    for curve, decimals, prevalence in (("a", 3, 0.3), ("b", 2, 0.1), ("c", 6, 0.5)):
        truth = rng.random(n) < prevalence
        score = np.round(1 / (1 + np.exp(-(rng.normal(size=n) + 1.3 * truth))), decimals)
        frames.append(pl.DataFrame({"curve": curve, "score": score, "truth": truth,
                                    "weight": rng.choice([0.5, 1.0, 2.5], n)}))
    for curve, truth, score in (("none_true", np.zeros(500, bool), rng.random(500)),
                                ("all_true", np.ones(500, bool), rng.random(500)),
                                ("tied", rng.random(500) < 0.4, np.full(500, 0.7)),
                                ("one", np.ones(1, bool), np.array([0.2]))):
        frames.append(pl.DataFrame({"curve": curve, "score": score, "truth": truth,
                                    "weight": np.ones(len(truth))}))
    return pl.concat(frames).with_row_index("sample")


DATA = _predictions()
TASK: dict[str, Any] = {"task": "binary", "by": ["curve"], "columns": {"label": None}}
CURVES = ("a", "b", "c")


def _path(x: np.ndarray, y: np.ndarray, steps: bool) -> np.ndarray:
    """The drawn polyline: points joined by lines, or by matplotlib's steps-pre."""
    if steps and len(x) > 1:
        xs, ys = np.empty(2 * len(x) - 1), np.empty(2 * len(x) - 1)
        xs[0::2], ys[0::2], xs[1::2], ys[1::2] = x, y, x[:-1], y[1:]
        x, y = xs, ys
    return np.c_[x, y]


def _distances(points: np.ndarray, path: np.ndarray) -> np.ndarray:
    """Each point's distance to the polyline ``path``."""
    if len(path) == 1:
        return np.hypot(*(points - path[0]).T)
    a, d = path[:-1], path[1:] - path[:-1]
    length = (d ** 2).sum(1)
    out = np.empty(len(points))
    for i in range(0, len(points), 1000):
        q = points[i:i + 1000, None, :]
        t = np.clip(((q - a) * d).sum(2) / np.where(length > 0, length, 1), 0, 1)
        out[i:i + 1000] = np.sqrt(((q - (a + t[..., None] * d)) ** 2).sum(2)).min(1)
    return out


def _samples(path: np.ndarray, per: int = 6) -> np.ndarray:
    """Points along ``path``: its vertices and ``per - 1`` between each two."""
    if len(path) == 1:
        return path
    t = np.linspace(0, 1, per, endpoint=False)[None, :, None]
    inner = (path[:-1, None, :] + (path[1:] - path[:-1])[:, None, :] * t).reshape(-1, 2)
    return np.r_[inner, path[-1:]]


def hausdorff(exact: pl.DataFrame, thinned: pl.DataFrame, kind: str, steps: bool) -> float:
    """The largest distance from a point of either drawn curve to the other (sampled along
    both, measured exactly to the other polyline)."""
    x, y = XY[kind]
    a = _path(*(exact.drop_nulls([x, y])[c].to_numpy() for c in (x, y)), steps)
    b = _path(*(thinned.drop_nulls([x, y])[c].to_numpy() for c in (x, y)), steps)
    if len(a) == 0:
        return 0.0
    return float(max(_distances(_samples(a), b).max(), _distances(_samples(b), a).max()))


def _check_thinned(exact: pl.DataFrame, thinned: pl.DataFrame, kinds: tuple[str, ...],
                   drawn: str, max_points: int) -> int:
    """``thinned`` holds at most ``max_points`` rows of each label, each an exact point, and
    each curve of ``kinds`` it draws is within the stated distance; how many curves were
    actually thinned."""
    crowded = 0
    for (label,), curve in exact.group_by(["curve"], maintain_order=True):
        kept = thinned.filter(pl.col("curve") == label)
        assert 1 <= kept.height <= max(max_points, 1), (label, kept.height)
        if kept.height < curve.height:
            crowded += 1
        # every kept row is a row of the exact curve, in the same order, origin first
        assert kept.join(curve, on=kept.columns, how="anti", nulls_equal=True).is_empty()
        assert kept["threshold"][0] == float("inf")
        assert kept["threshold"].is_sorted(descending=True)
        for kind in kinds:
            bound = 1 / curve_bins(drawn, max_points)[kind]
            for steps in ((False, True) if kind == "pr" else (False,)):
                gap = hausdorff(curve, kept, kind, steps)
                assert gap <= bound + 1e-12, (label, kind, steps, gap, bound)
    return crowded


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("kind", ["roc", "pr"])
@pytest.mark.parametrize("max_points", [8, 40, 400])
def test_curve_keeps_few_points_close_to_the_exact_curve(engine, kind, max_points):
    exact = me.curve(DATA, kind, drop_intermediate=False, engine=engine, **TASK)
    thinned = me.curve(DATA, kind, max_points=max_points, engine=engine, **TASK)
    crowded = _check_thinned(exact, thinned, (kind,), kind, max_points)
    assert crowded >= (3 if max_points < 400 else 1)  # a test that cannot fail is none
    # a curve with no more points than that keeps them all: the exact curve itself
    small = exact.group_by("curve").len().filter(pl.col("len") <= max_points)["curve"]
    default = me.curve(DATA, kind, engine=engine, **TASK)
    assert_frame_equal(thinned.filter(pl.col("curve").is_in(small.implode())),
                       default.filter(pl.col("curve").is_in(small.implode())))


def test_a_curve_of_more_points_is_thinned_from_all_of_them(engine):
    """A curve of more than max_points points but few bends (30 positives ranked above 70
    negatives: 101 points, 4 of them kept by drop_intermediate) is thinned, its picks taken
    among all its points (some on a straight run), not its bends alone; a curve of at most
    max_points points keeps its bends."""
    n = 100
    data = pl.DataFrame({"curve": ["long"] * n + ["short"] * 10,
                         "score": [*np.linspace(1, 0, n), *np.linspace(1, 0, 10)],
                         "truth": [*(i < 30 for i in range(n)), *(i < 3 for i in range(10))],
                         "weight": 1.0}).with_row_index("sample")
    exact = me.curve(data, "roc", drop_intermediate=False, engine=engine, **TASK)
    bends = me.curve(data, "roc", engine=engine, **TASK)
    thinned = me.curve(data, "roc", max_points=16, engine=engine, **TASK)
    long = thinned.filter(pl.col("curve") == "long")
    assert bends.filter(pl.col("curve") == "long").height == 4
    assert 4 < long.height <= 16
    # within the bound; both curves lose points (the short one its straight runs)
    assert _check_thinned(exact, thinned, ("roc",), "roc", 16) == 2
    assert_frame_equal(thinned.filter(pl.col("curve") == "short"),
                       bends.filter(pl.col("curve") == "short"))


def test_the_bound_is_tight_enough_to_fail():
    """Evenly spaced points instead of the bins' extremes break the PR bound: the check sees
    it (the greedy zigzag at the start of a PR curve)."""
    exact = me.curve(DATA, "pr", drop_intermediate=False, **TASK).filter(pl.col("curve") == "b")
    every = max(1, exact.height // 40)
    even = exact.gather_every(every)
    assert hausdorff(exact, even, "pr", True) > 1 / curve_bins("pr", 4 * 40)["pr"]


@pytest.mark.parametrize("engine", local_engines())
def test_an_evaluation_draws_roc_and_pr_from_one_table_of_its_pass(engine):
    metrics = ["roc_auc", "average_precision", "f1"]
    plain = me.evaluate(DATA, metrics, engine=engine, **TASK)
    request = Request.build("evaluate", metrics=metrics, engine=engine,
                            curves=["roc", "pr", "reliability"], max_points=40, **TASK)
    assert request.plan("binary").steps().count("ranked_points") == 1
    outcome = run(request, DATA)
    assert_frame_equal(outcome.table, plain)  # the areas: every point, as without curves
    assert outcome.curves["roc"] is outcome.curves["pr"]
    exact = me.curve(DATA, "roc", drop_intermediate=False, engine=engine, **TASK)
    assert _check_thinned(exact, outcome.curves["roc"], ("roc", "pr"), "both", 40) >= 3
    assert_frame_equal(outcome.curves["reliability"],
                       me.curve(DATA, "reliability", engine=engine, **TASK))
    for curve in CURVES:
        rows = DATA.filter(pl.col("curve") == curve)
        for metric, function in (("roc_auc", roc_auc_score),
                                 ("average_precision", average_precision_score)):
            want = function(rows["truth"], rows["score"], sample_weight=rows["weight"])
            got = plain.filter((pl.col("curve") == curve) & (pl.col("metric") == metric))
            assert got["value"].item() == pytest.approx(want, rel=1e-12), (curve, metric)


@pytest.mark.parametrize("average", [["none", "macro", "weighted"], ["micro", "macro"]],
                         ids=["per label", "micro"])
@pytest.mark.parametrize("weighted", [True, False], ids=["weights", "unit weights"])
@pytest.mark.parametrize("by", [["region"], ["region", "model"]], ids=["region", "region x model"])
def test_metrics_read_off_the_curve_table_equal_those_of_their_own_pass(engine, by, weighted,
                                                                       average):
    """Multilabel: with curves asked, the ranking and decision metrics come off the curve
    table (each label's curve on its own, or micro: a segment's labels pooled); they equal an
    evaluation without curves, and the curves stay keyed by the data's own segments and
    labels."""
    data = make_predictions("multilabel", 3, n_samples=120, weighted=weighted)
    options: dict[str, Any] = {"metrics": ["roc_auc", "average_precision", "f1", "precision"],
                               "average": average, "by": by, "task": "multilabel",
                               "engine": engine}
    plain = me.evaluate(data, **options)
    outcome = run(Request.build("evaluate", curves=["roc", "pr"], max_points=16, **options), data)
    assert plain.filter(pl.col("value").is_not_null()).height > 0
    assert_frame_equal(outcome.table, plain, check_exact=False, rel_tol=1e-12)
    keys = [*by, "label"]
    assert_frame_equal(outcome.curves["roc"].select(keys).unique().sort(keys),
                       data.select(keys).unique().sort(keys))


def test_both_engines_and_the_pasted_statement_keep_the_same_points():
    for kind in ("roc", "pr"):
        want = me.curve(DATA, kind, max_points=24, **TASK)
        got = me.curve(DATA, kind, max_points=24, engine="polars", **TASK)
        assert_frame_equal(got, want, check_exact=False, rel_tol=1e-12)
        # a statement reads the weight column it is told of
        statement = me.sql(curve=kind, max_points=24, table="preds", by=["curve"],
                           columns={"label": None, "weight": "weight"})
        con = duckdb.connect()
        con.register("preds", DATA)
        pasted = con.sql(statement).pl()
        assert_frame_equal(pasted, want, check_dtypes=False, check_exact=False, rel_tol=1e-12)


@pytest.mark.parametrize(("options", "message"), [
    ({"kind": "roc", "max_points": 3}, "max_points must be 0 .* >= 8, got 3"),
    ({"kind": "roc", "max_points": -1}, "max_points must be 0"),
    ({"kind": "pr", "max_points": True}, "max_points must be 0"),
    ({"kind": "sweep", "bins": 4, "max_points": 50}, "max_points does not apply to a sweep"),
    ({"kind": "reliability", "max_points": 50}, "does not apply to a reliability curve"),
])
def test_bad_max_points(options, message):
    with pytest.raises(me.InputError, match=message):
        Request.build("curve", **options)


def test_curves_of_an_evaluation_are_checked():
    with pytest.raises(me.InputError, match="max_points thins roc and pr curves"):
        Request.build("evaluate", metrics=["f1"], max_points=50)
    with pytest.raises(me.InputError, match="a sweep is a request of its own"):
        Request.build("evaluate", metrics=["f1"], curves=["sweep"])
    with pytest.raises(me.InputError, match="curves are for classification tasks"):
        Request.build("evaluate", metrics=["mse"], task="regression", curves=["roc"])
    assert Request.build("curve", kind="pr", max_points=0).max_points == 0  # every point
