"""Slices: by a row-wise error, the same slices, scores and order as the ``sliceline`` package
(SliceLine) for the same alpha, k, max_l and min_sup, ties included; by any other metric, a
planted slice of poor ranking but ordinary error rate comes first; bad slice columns are named
before any work."""

from __future__ import annotations

import math
import warnings
from itertools import combinations

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import mleval_sql as me
from mleval_sql import slicing
from tests.test_portable import load
from tests.test_statement import duckdb_rows, psql_rows

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # the package warns that numba is not installed
    from sliceline.slicefinder import Slicefinder


def planted(seed: int = 1, n: int = 3000) -> pl.DataFrame:
    """Binary predictions with a weak pair (a = 2 and b = y: random scores), a weaker single
    column (c = 1: 30% of scores flipped), a copy of b (e: ties with b's slices) and a
    relabelled a (f = 10 a: ties with a's)."""
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 4, n), rng.choice(["x", "y", "z"], n)
    c, d = rng.integers(0, 3, n), rng.choice(["p", "q"], n)
    truth = rng.random(n) < 0.4
    score = np.clip(rng.normal(0.35 + 0.3 * truth, 0.2), 0, 1)
    score = np.where((a == 2) & (b == "y"), rng.random(n), score)
    score = np.where((c == 1) & (rng.random(n) < 0.3), 1 - score, score)
    return pl.DataFrame({"a": a, "b": b, "c": c, "d": d, "e": b, "f": a * 10,
                         "sample": np.arange(n), "score": score, "truth": truth})


OVER = ["a", "b", "c", "d", "e", "f"]
#: sliceline reads its input through pandas APIs that pandas deprecates
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning",
                                        "ignore:is_sparse is deprecated")


@pytest.mark.parametrize(("k", "max_l", "min_sup", "alpha"), [
    (5, 2, 10, 0.9), (10, 3, 30, 0.95), (4, 4, 5, 0.99), (3, 2, 0.05, 0.97), (12, 3, 20, 0.98),
    (20, 2, 1, 0.99)])
def test_the_top_slices_are_the_sliceline_packages(engine, k, max_l, min_sup, alpha):
    frame = planted()
    error = ((frame["score"] >= 0.5) != frame["truth"]).cast(pl.Float64).to_numpy()
    finder = Slicefinder(alpha=alpha, k=k, max_l=max_l, min_sup=min_sup, verbose=False)
    finder.fit(frame.select(OVER).to_pandas(), error)
    got = me.slices(frame, "error_rate", over=OVER, top=k, max_level=max_l,
                    min_support=min_sup, alpha=alpha, engine=engine)
    assert got.height == len(finder.top_slices_) > 0
    for row, values, stats in zip(got.iter_rows(named=True), finder.top_slices_,
                                  finder.top_slices_statistics_, strict=True):
        assert tuple(row[c] for c in OVER) == tuple(values), (row, values)
        assert math.isclose(row["score"], stats["slice_score"], rel_tol=1e-9)
        assert row["size"] == stats["slice_size"]
        assert math.isclose(row["error"], stats["sum_slice_error"], rel_tol=1e-9)
        assert math.isclose(row["value"], stats["slice_average_error"], rel_tol=1e-9)
    assert (got["score"].diff().drop_nulls() <= 0).all()


def poor_ranking(seed: int = 2, n: int = 6000) -> tuple[pl.DataFrame, np.ndarray]:
    """Binary predictions where (country = fr, device = web) keeps every decision at 0.5 but
    ranks its rows backwards within each side of the threshold: an ordinary error rate, a
    poor AUC. The frame and the slice's rows."""
    rng = np.random.default_rng(seed)
    country = rng.choice(["de", "fr", "us", "jp"], n)
    device = rng.choice(["ios", "android", "web"], n)
    truth = rng.random(n) < 0.4
    score = np.clip(rng.normal(0.3 + 0.4 * truth, 0.15), 0, 1)
    weak = (country == "fr") & (device == "web")
    above = score >= 0.5
    score = np.where(weak & above, np.where(truth, 0.5 + 0.1 * rng.random(n),
                                            0.9 + 0.1 * rng.random(n)), score)
    score = np.where(weak & ~above, np.where(truth, 0.1 * rng.random(n),
                                             0.4 + 0.1 * rng.random(n)), score)
    frame = pl.DataFrame({"country": country, "device": device, "plan": rng.integers(0, 3, n),
                          "sample": np.arange(n), "score": score, "truth": truth})
    return frame, weak


def test_a_slice_of_poor_ranking_comes_first_by_roc_auc(engine):
    frame, weak = poor_ranking()
    got = me.slices(frame, "roc_auc", over=["country", "device", "plan"], top=3,
                    engine=engine)
    first = got.row(0, named=True)
    assert (first["country"], first["device"], first["plan"]) == ("fr", "web", None)
    inside = frame.filter(pl.Series(weak))
    outside = frame.filter(~pl.Series(weak))
    assert math.isclose(first["value"], me.evaluate(inside, "roc_auc")["value"].item(),
                        rel_tol=1e-12)
    assert math.isclose(first["rest_value"], me.evaluate(outside, "roc_auc")["value"].item(),
                        rel_tol=1e-12)
    accuracy = me.evaluate(inside, "accuracy")["value"].item()
    assert abs(accuracy - me.evaluate(frame, "accuracy")["value"].item()) < 0.05
    by_error = me.slices(frame, "error_rate", over=["country", "device", "plan"], top=3,
                         alpha=0.95, engine=engine)
    assert ("fr", "web") not in set(by_error.select("country", "device").rows())


@pytest.mark.parametrize("weighted", [False, True])
def test_slices_by_auc_are_those_of_every_slice_evaluated(engine, weighted):
    """The bounded ROC AUC (only slices whose bounds reach the top evaluated) against every
    slice evaluated by ``by=``: the same slices, values and rest values, on scores with many
    ties, with weights, and a slice of one class (its AUC undefined: never ranked)."""
    rng = np.random.default_rng(5)
    frame, _ = poor_ranking(n=4000)
    frame = frame.with_columns(score=pl.col("score").round(3),
                               weight=pl.Series(rng.integers(1, 4, frame.height) * 0.5),
                               truth=pl.when(pl.col("plan") == 2, pl.col("device") == "ios")
                               .then(False).otherwise(pl.col("truth")))
    if not weighted:
        frame = frame.drop("weight")
    over, top = ["country", "device", "plan"], 12
    got = me.slices(frame, "roc_auc", over=over, top=top, min_support=60, engine=engine)
    every = []
    for used in ([c] for c in over), combinations(over, 2):
        for columns in used:
            values = me.evaluate(frame, "roc_auc", by=list(columns)).join(
                frame.group_by(columns).len(), on=list(columns))
            every += [({c: row[c] for c in columns}, row["value"])
                      for row in values.iter_rows(named=True)
                      if row["len"] >= 60 and row["value"] is not None]
    every.sort(key=lambda s: s[1])
    cut = every[top - 1][1]
    want = {tuple(s.get(c) for c in over): v for s, v in every if v <= cut}
    assert got.height == len(want) >= top
    for row in got.iter_rows(named=True):
        key = tuple(row[c] for c in over)
        assert math.isclose(row["value"], want[key], rel_tol=1e-12), key
        inside = pl.all_horizontal(pl.col(c) == v for c, v in zip(over, key, strict=True)
                                   if v is not None)
        rest = me.evaluate(frame.filter(~inside), "roc_auc")["value"].item()
        assert math.isclose(row["rest_value"], rest, rel_tol=1e-12), key


def test_with_intervals_only_the_significant_slices_remain(engine):
    """Each slice tested against the rest of the data (as compare(against="rest") tests a
    segment), Benjamini-Hochberg over the slices tested: the planted slice stays, with the
    test of the segment against the rest; slices of noise go."""
    frame, weak = poor_ranking(n=3000)
    over = ["country", "device", "plan"]
    ranked = me.slices(frame, "roc_auc", over=over, top=30, engine=engine)
    got = me.slices(frame, "roc_auc", over=over, top=30, ci=0.95, fdr=0.05, engine=engine)
    assert 0 < got.height < ranked.height and (got["q_value"] <= 0.05).all()
    first = got.row(0, named=True)
    assert (first["country"], first["device"], first["plan"]) == ("fr", "web", None)
    parts = frame.with_columns(part=pl.when(pl.Series(weak)).then(pl.lit("in"))
                               .otherwise(pl.lit("out")))
    test = me.compare(parts, "roc_auc", against="rest", by="part", engine=engine).filter(
        part="in").row(0, named=True)
    for column in ("ci_low", "ci_high", "p_value"):
        assert math.isclose(first[column], test[column], rel_tol=1e-9), column
    assert math.isclose(first["difference"], test["value"], rel_tol=1e-12)


def test_slices_within_segments_and_quantile_bins():
    frame = planted().with_columns(model=pl.lit("m1"), amount=pl.col("score") * 100)
    both = pl.concat([frame, frame.with_columns(model=pl.lit("m2"))])
    got = me.slices(both, "error_rate", over=["a", "b"], by="model", top=2, alpha=0.95)
    alone = me.slices(frame, "error_rate", over=["a", "b"], top=2, alpha=0.95)
    assert alone.height > 0
    for model in ("m1", "m2"):
        assert got.filter(model=model).drop("model").equals(alone)
    binned = me.slices(frame, "error_rate", over=["amount", "b"], quantiles=4, top=3,
                       alpha=0.95)
    assert binned["amount"].dtype == pl.String and binned.height > 0
    assert all(v is None or v.startswith(("(", "[")) for v in binned["amount"])


@pytest.mark.parametrize(("given", "message"), [
    ({"over": ["sample"]}, "slice column 'sample' is a column the metrics read"),
    ({"over": ["nowhere"]}, "slice column 'nowhere' is not in the input"),
    ({"over": ["score2"]}, r"slice column 'score2' has \d+ values, more than 1000; cut it "
                           r"into quantiles with quantiles=N"),
    ({"over": ["size"]}, "slice column 'size' clashes with the result column"),
    ({"over": ["a"], "metric": "nope"}, "unknown metric 'nope' for slices"),
    ({"over": ["a"], "metric": "mse"}, "mse as a row-wise error is for regression tasks"),
    ({"over": []}, r"slices: name the columns slices are made of \(over=, --over\)"),
    ({"over": ["a"], "alpha": 0}, r"alpha must be a number in \(0, 1\]"),
    ({"over": ["a"], "min_support": 1.5}, "min_support must be a whole number of samples"),
])
def test_bad_slice_requests_are_named(given, message):
    frame = planted().with_columns(score2=pl.col("score"), size=pl.col("a"))
    metric = given.pop("metric", "error_rate")
    with pytest.raises(me.InputError, match=message):
        me.slices(frame, metric, **given)


def test_too_many_candidates_is_an_error(monkeypatch):
    monkeypatch.setattr(slicing, "MAX_CANDIDATES", 12)  # level 1: 10; level 2: 33
    with pytest.raises(me.InputError, match=r"level 2 has \d+ candidate slices, more than 12: "
                       "raise min_support or slice over fewer columns"):
        me.slices(planted(), "roc_auc", over=["a", "b", "c"], min_support=1)


def test_the_command_line(tmp_path, capsys):
    from mleval_sql.cli import main

    path = tmp_path / "planted.parquet"
    planted().write_parquet(path)
    assert main(["slices", str(path), "--over", "a,b", "--over", "c", "--top", "2",
                 "--alpha", "0.95", "--format", "csv"]) == 0
    out = capsys.readouterr().out
    want = me.slices(path, "error_rate", over=["a", "b", "c"], top=2, alpha=0.95)
    assert out == want.write_csv()


@pytest.fixture(scope="module")
def two_models() -> pl.DataFrame:
    """planted() twice, as two models with different weights (whole numbers: SliceLine's sizes
    are weights), a null in a slice column, and a segment column with a hostile name."""
    frame = planted().with_columns(
        pl.when(pl.col("d") == "q").then(None).otherwise(pl.col("d")).alias("d"))
    return pl.concat([
        frame.with_columns(**{"the model": pl.lit("m1"), "w": pl.lit(1.0)}),
        frame.with_columns(**{"the model": pl.lit("m2"),
                              "w": (pl.col("sample") % 3 + 1).cast(pl.Float64)})])


@pytest.mark.parametrize("dialect", ["duckdb", "postgres", "spark"])
def test_the_pasted_statement_gives_the_same_slices(dialect, two_models, request):
    """``mleval sql --over``: SliceLine's search as one statement, pasted into DuckDB, psql
    and spark.sql, gives me.slices' rows (ties between e and b, weights, a null value, two
    segments, a share as min_support)."""

    options = {"over": ["a", "b", "d", "e"], "by": "the model", "top": 6, "max_level": 3,
               "alpha": 0.95, "min_support": 0.02, "columns": {"weight": "w"}}
    want = me.slices(two_models, "error_rate", **options)
    assert want.height >= 12 and want["d"].null_count() > 0
    statement = me.sql("error_rate", dialect=dialect, table="sliced", **options)
    if dialect == "duckdb":
        got = duckdb_rows(two_models, "sliced", statement)
    elif dialect == "postgres":
        load("postgres", request.getfixturevalue("pg_connection"), "sliced", two_models)
        got = psql_rows(request.getfixturevalue("postgres"), statement)
    else:
        spark = request.getfixturevalue("spark")
        load("spark", spark, "sliced", two_models)
        got = pl.from_arrow(spark.sql(statement.rstrip().rstrip(";")).toArrow())
    assert got.columns == want.columns
    got = got.cast(dict(want.schema))
    assert_frame_equal(got, want, rel_tol=1e-9, check_exact=False)


@pytest.mark.parametrize(("metric", "task"), [("log_loss", "binary"), ("brier_score", "binary"),
                                              ("mse", "regression"), ("mae", "regression")])
def test_every_row_wise_error_has_its_statement(metric, task):
    frame = planted()
    if task == "regression":
        frame = frame.with_columns(truth=pl.col("truth").cast(pl.Float64) + pl.col("c") / 2)
    options = {"over": ["a", "b", "c"], "top": 4, "alpha": 0.95}
    want = me.slices(frame, metric, task=task, **options)
    assert want.height > 0
    got = duckdb_rows(frame, "sliced", me.sql(metric, table="sliced", **options))
    assert_frame_equal(got.cast(dict(want.schema)), want, rel_tol=1e-9, check_exact=False)


def test_the_statement_from_the_command_line(capsys):
    from mleval_sql.cli import main

    assert main(["sql", "--over", "a,b", "--over", "c", "--top", "2", "--alpha", "0.95",
                 "--dialect", "postgres", "--table", "preds"]) == 0
    out = capsys.readouterr().out
    assert out == me.sql("error_rate", over=["a", "b", "c"], top=2, alpha=0.95,
                         dialect="postgres", table="preds").rstrip("\n") + "\n"
    assert "GROUPING SETS" in out
    for args, message in ((["--top", "2"], "top does not apply to evaluate"),
                          (["--over", "a", "--metric", "roc_auc"],
                           "a statement ranks slices by a row-wise error"),
                          (["--over", "a", "--ci", "0.9"], "a statement gives no intervals"),
                          (["--over", "a", "--checks"], "over= asks for the slices statement")):
        assert main(["sql", *args]) == 2
        assert message in capsys.readouterr().err
