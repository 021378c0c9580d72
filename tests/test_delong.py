"""DeLong's variance of the ROC AUC (queries/delong.sql) and each row's placement
(queries/placements.sql) against a direct O(P * N) computation over every (positive, negative)
pair, and against scikit-learn for the AUC; the SQL equal to the polars plans, on DuckDB,
PostgreSQL and Spark; weights scaled by 2^k and 1e±100 (up to 1e±300).

The data has heavy ties, weights with zeros and fractions, a null segment, a one-class segment,
a segment with P = 1 and one with P = 1.5, and a score only a zero-weight row has.
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest
from sklearn.metrics import roc_auc_score

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.engines import ENGINES, make_engine
from mleval_sql.engines import polars as plans
from mleval_sql.schema import Columns
from mleval_sql.sources import as_source
from tests.helpers import assert_frames_close
from tests.test_portable import BY, COLUMNS, hostile, load

STEPS = ["ranked_points", "block_placements", "delong", "placements"]
REL = 1e-9  # against the direct computation (pairs summed in another order)
#: scales of every weight: 2^k exactly, and 1e±100, 1e±300 (P <= 1 there: variance null)
SCALES = [2.0**-3, 2.0**40, 1e100, 1e-100, 1e300, 1e-300]


def _frame(seed: int) -> pl.DataFrame:
    """Rows ``sample, label, score, truth, weight, region`` for labels a and b."""
    rng = np.random.default_rng(seed)
    sizes = {"north": 40, "south": 25, "one_class": 8, "one_positive": 9, None: 7}
    rows = []
    for region, size in sizes.items():
        for i in range(size):
            for label in ("a", "b"):
                # ties: most scores on a grid of sevenths (off the bins' grids), a few free
                score = (float(rng.integers(0, 8)) / 7 if rng.random() < 0.75
                         else round(float(rng.random()), 3))
                weight = float(rng.choice([0.0, 0.5, 1.0, 2.5, 3.0]))
                truth = bool(rng.random() < 0.4)
                if region == "one_class":
                    truth = False
                elif region == "one_positive":  # P = 1
                    truth, weight = (True, 1.0) if i == 0 else (False, weight)
                elif region is None:  # P = 1.5, a null segment
                    truth, weight = (True, [0.5, 1.0][i]) if i < 2 else (False, weight)
                rows.append((f"s{len(rows) // 2:03d}", label, score, truth, weight, region))
    # a score only a zero-weight row has: no point on the curve, a null placement
    rows += [("zero", label, 0.123456, label == "a", 0.0, "north") for label in ("a", "b")]
    return pl.DataFrame(rows, orient="row",
                        schema=["sample", "label", "score", "truth", "weight", "region"])


def _gridded(score: np.ndarray, bins: int | None) -> np.ndarray:
    """The score as ranked_points puts it on the curve: with bins, the largest k/bins <= it."""
    if bins is None:
        return score
    k = np.floor(score * bins)
    return np.where((k + 1) / bins <= score, (k + 1) / bins,
                    np.where(k / bins > score, (k - 1) / bins, k / bins))


def _direct(truth: np.ndarray, score: np.ndarray, weight: np.ndarray
            ) -> tuple[dict[str, float | None], list[float | None]]:
    """p, n, auc, variance and each row's placement, from every (positive, negative) pair:
    psi(x, y) = 1 if x > y, 1/2 if x = y, 0 otherwise."""
    x, y = score[truth], score[~truth]
    wx, wy = weight[truth], weight[~truth]
    p, n = wx.sum(), wy.sum()
    values: dict[str, float | None] = {"p": p, "n": n, "auc": None, "variance": None}
    if p == 0 or n == 0:
        return values, [None] * len(score)
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    v10 = psi @ wy / n  # each positive's placement among the negatives
    v01 = wx @ psi / p  # each negative's among the positives
    auc = wx @ v10 / p
    values["auc"] = auc
    if p > 1 and n > 1:
        s10 = (wx * (v10 - auc) ** 2).sum() / (p - 1)
        s01 = (wy * (v01 - auc) ** 2).sum() / (n - 1)
        values["variance"] = s10 / p + s01 / n
    placement = np.empty(len(score))
    placement[truth], placement[~truth] = v10, v01
    # a row at a score no weighted row of the label has makes no point on the curve
    weighted = set(score[weight > 0].tolist())
    return values, [float(v) if s in weighted else None
                    for v, s in zip(placement, score, strict=True)]


def _oracle(frame: pl.DataFrame, bins: int | None
            ) -> tuple[dict[tuple, dict[str, float | None]], dict[tuple, float | None]]:
    """The direct values per (region, label) and the placement per (region, label, sample)."""
    values, placements = {}, {}
    for (region, label), part in frame.group_by("region", "label"):
        truth = part["truth"].to_numpy()
        score = _gridded(part["score"].to_numpy(), bins)
        values[region, label], placed = _direct(truth, score, part["weight"].to_numpy())
        placements.update({(region, label, s): v
                           for s, v in zip(part["sample"], placed, strict=True)})
    return values, placements


def _run(engine: str, frame: pl.DataFrame, bins: int | None) -> dict[str, pl.DataFrame]:
    runner = make_engine(engine, as_source(frame), Columns(), "weight", ["region"])
    try:
        runner.summary()
        return runner.results(STEPS, {"bins": bins})
    finally:
        runner.close()


def _close(got: float | None, want: float | None, what: object, rel: float = REL,
           abs_: float = 1e-15) -> None:
    if want is None:
        assert got is None, f"{what}: got {got}, want null"
    else:
        assert got is not None and math.isclose(got, want, rel_tol=rel, abs_tol=abs_), \
            f"{what}: got {got}, want {want}"


@pytest.mark.parametrize("bins", [None, 4, 10])
@pytest.mark.parametrize("seed", [1, 2])
def test_variance_and_placements_equal_the_direct_computation(engine, seed, bins):
    frame = _frame(seed)
    values, placed = _oracle(frame, bins)
    got = _run(engine, frame, bins)
    rows = got["delong"]
    assert rows.columns == ["segment", "label", "p", "n", "auc", "variance"]
    assert rows.height == len(values)
    for row in rows.iter_rows(named=True):
        want = values[row["segment"], row["label"]]
        for column in ("p", "n", "auc", "variance"):
            _close(row[column], want[column], (row["segment"], row["label"], column))
    # the null rules: a one-class segment, P = 1; P = 1.5 has a variance
    nulls = {(r["segment"], r["label"]): (r["auc"] is None, r["variance"] is None)
             for r in rows.iter_rows(named=True)}
    assert nulls["one_class", "a"] == (True, True)
    assert nulls["one_positive", "a"] == (False, True)
    assert nulls[None, "a"] == (False, False)
    table = got["placements"]
    assert table.columns == ["segment", "label", "sample", "truth", "weight", "placement"]
    assert table.height == frame.height == len(placed)
    for row in table.iter_rows(named=True):
        key = (row["segment"], row["label"], row["sample"])
        _close(row["placement"], placed[key], key)
    if bins is None:  # the zero-weight row's score has no point (binned: its bin has)
        assert placed["north", "a", "zero"] is None


@pytest.mark.parametrize("bins", [None, 4])
def test_auc_equals_scikit_learn(engine, bins):
    frame = _frame(3)
    rows = _run(engine, frame, bins)["delong"]
    checked = 0
    for (region, label), part in frame.group_by("region", "label"):
        truth = part["truth"].to_numpy()
        weight = part["weight"].to_numpy()
        if weight[truth].sum() == 0 or weight[~truth].sum() == 0:
            continue
        want = roc_auc_score(truth, _gridded(part["score"].to_numpy(), bins),
                             sample_weight=weight)
        got = rows.filter(pl.col("segment").eq_missing(region), label=label)["auc"].item()
        assert math.isclose(got, want, rel_tol=1e-12), (region, label)
        checked += 1
    assert checked == 8


def _steps_on_both(predictions: pl.DataFrame, bins: int | None
                   ) -> list[tuple[pl.DataFrame, pl.DataFrame, list[str]]]:
    """Each new step's rows from its SQL on DuckDB and from its polars plan, and their keys."""
    con = duckdb.connect()
    con.register("predictions", predictions)
    con.execute(f"CREATE TABLE curve_points AS {queries.load('ranked_points')}", {"bins": bins})
    con.execute(f"CREATE TABLE block_placements AS {queries.load('block_placements')}")
    blocks = plans.block_placements(plans.ranked_points(predictions.lazy(), bins=bins))
    out = []
    for step, keys, polars_plan in (
            ("delong", ["segment", "label"], plans.delong(blocks)),
            ("placements", ["segment", "label", "sample"],
             plans.placements(predictions.lazy(), blocks, bins=bins))):
        sql = queries.load(step)
        from_sql = con.sql(sql, params={p: bins for p in queries.parameters(sql)}).pl()
        out.append((from_sql.sort(keys), polars_plan.collect().sort(keys), keys))
    return out


@pytest.mark.parametrize("bins", [None, 5])
def test_sql_equals_polars(bins):
    frame = _frame(4)
    predictions = frame.select("sample", "label", "score", "truth", "weight",
                               segment=pl.struct("region"))
    for from_sql, from_polars, keys in _steps_on_both(predictions, bins):
        assert from_sql.height >= 10  # 5 segments x 2 labels
        assert from_sql.columns == from_polars.columns
        assert_frames_close(from_sql, from_polars)
        assert from_sql.select(keys).null_count().sum_horizontal().item() == 0


def test_scaled_weights(engine):
    """Placements and the AUC do not depend on the weights' scale; the variance does only
    through P - 1 and N - 1 (frequency weights: c times the weight is c times the samples):
    variance(c) = M10 / (c P - 1) + M01 / (c N - 1), M the shares' squared deviations of the
    unscaled weights, and null where c P <= 1 or c N <= 1."""
    frame = _frame(5)
    base = _run(engine, frame, None)
    deviations = {}
    for (region, label), part in frame.group_by("region", "label"):
        truth, score, weight = (part[c].to_numpy() for c in ("truth", "score", "weight"))
        values, placed = _direct(truth, score, weight)
        if values["auc"] is None:
            continue
        v = np.array([np.nan if x is None else x for x in placed])
        kept = ~np.isnan(v)  # zero-weight rows at a score of their own: no term
        share = np.where(truth, weight / values["p"], weight / values["n"])[kept]
        squares = share * (v[kept] - values["auc"]) ** 2
        deviations[region, label] = (squares[truth[kept]].sum(), squares[~truth[kept]].sum())
    for scale in SCALES:
        got = _run(engine, frame.with_columns(pl.col("weight") * scale), None)
        for old, new in zip(base["delong"].sort("segment", "label", nulls_last=True)
                            .iter_rows(named=True),
                            got["delong"].sort("segment", "label", nulls_last=True)
                            .iter_rows(named=True), strict=True):
            key = (old["segment"], old["label"])
            assert (new["segment"], new["label"]) == key
            # relative only: the values of tiny weights are tiny
            _close(new["auc"], old["auc"], (scale, key), 1e-12, 0.0)
            for column in ("p", "n"):
                _close(new[column], old[column] * scale, (scale, key, column), 1e-12, 0.0)
            want = None
            if key in deviations and new["p"] > 1 and new["n"] > 1:
                m10, m01 = deviations[key]
                want = m10 / (new["p"] - 1) + m01 / (new["n"] - 1)
            _close(new["variance"], want, (scale, key, "variance"), 1e-12, 0.0)
        keys = ["segment", "label", "sample"]
        before = base["placements"].sort(keys, nulls_last=True)
        after = got["placements"].sort(keys, nulls_last=True)
        assert_frames_close(after.drop("weight"), before.drop("weight"))
    assert got["delong"]["variance"].null_count() == got["delong"].height  # 1e-300: P <= 1


@pytest.fixture(params=["postgres", "spark"])
def database(request: pytest.FixtureRequest) -> tuple[str, Any]:
    con = request.getfixturevalue("pg_connection" if request.param == "postgres" else "spark")
    return request.param, con


@pytest.mark.parametrize("bins", [None, 4])
def test_postgres_and_spark_equal_duckdb(database, bins):
    """engine="sql" on PostgreSQL and Spark SQL (and Spark's own engine): DuckDB's rows, on
    hostile names, two segment columns and a null segment."""
    kind, con = database
    frame = hostile("multilabel", seed=9)
    table = f"delong_input_{bins or 0}"
    load(kind, con, table, frame)
    columns = Columns.from_mapping({k: v for k, v in COLUMNS.items() if k != "weight"})
    weight = COLUMNS["weight"]
    runners: dict[str, Any] = {}
    entry = ENGINES["sql"]
    runners["sql"] = entry.make(entry.read(table, con), columns, weight, BY)
    if kind == "spark":
        spark_entry = ENGINES["spark"]
        runners["spark"] = spark_entry.make(spark_entry.read(frame, con), columns, weight, BY)
    reference = make_engine("duckdb", as_source(frame), columns, weight, BY)
    try:
        want = reference.results(STEPS, {"bins": bins})
        for name, runner in runners.items():
            runner.summary()
            got = runner.results(STEPS, {"bins": bins})
            for step, keys in (("delong", ["segment", "label"]),
                               ("placements", ["segment", "label", "sample"])):
                a = got[step].sort(keys, nulls_last=True)
                b = want[step].sort(keys, nulls_last=True)
                assert a.height == b.height > 20, (name, step)
                assert a.columns == b.columns, (name, step)
                assert_frames_close(a.unnest("segment"), b.unnest("segment"))
                values = a["variance" if step == "delong" else "placement"]
                assert 0 < values.null_count() < a.height, (name, step)
    finally:
        reference.close()
        for runner in runners.values():
            runner.close()



@pytest.mark.parametrize("bins", [None, 4])
def test_whole_count_intervals_equal_the_direct_computation(engine, bins):
    """Rows without weights (polars reads the AUC and DeLong's variance off one pass by each
    label's number): the interval AUC ± z·SE of the direct placements, ties and all."""
    frame = _frame(4).drop("weight")
    values, _ = _oracle(frame.with_columns(weight=pl.lit(1.0)), bins)
    got = me.evaluate(frame, "roc_auc", by="region", ci=0.95, bins=bins, engine=engine,
                      task="multilabel", average="none")
    z = NormalDist().inv_cdf(0.975)
    assert got.height == len(values)
    for row in got.iter_rows(named=True):
        key = (row["region"], row["label"])
        want = values[key]
        _close(row["value"], want["auc"], (*key, "value"))
        if want["variance"] is None:
            assert row["ci_low"] is None and row["ci_high"] is None, key
            continue
        se = z * math.sqrt(want["variance"])
        _close(row["ci_low"], max(0.0, want["auc"] - se), (*key, "ci_low"))
        _close(row["ci_high"], min(1.0, want["auc"] + se), (*key, "ci_high"))
        assert row["ci_method"] == "delong"
