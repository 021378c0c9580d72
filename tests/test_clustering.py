"""Clustering, on both engines, against scikit-learn's clustering metrics.

The clusterings are real (KMeans on scikit-learn's digits and iris, which ship with it), split
into segments, with degenerate segments beside them: one cluster, one class, one sample, every
sample its own cluster, and (weighted) a segment whose weights are all 0. Integer weights are
checked against scikit-learn on repeated rows. The metric list comes from the registry.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import polars as pl
import pytest
from sklearn import metrics as skm
from sklearn.cluster import KMeans
from sklearn.datasets import load_digits, load_iris

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.registry import METRICS
from tests.oracle_clustering import ORACLES, expected, text

CLUSTERING = [name for name, m in METRICS.items() if "clustering" in m.families]


def test_every_clustering_metric_has_an_oracle():
    assert set(CLUSTERING) == set(ORACLES)
def got_rows(result: pl.DataFrame, by: list[str]) -> dict:
    cells = [c for c in ("truth", "cluster") if c in result.columns]
    out = {}
    for row in result.iter_rows(named=True):
        t, c = (text(row.get(name)) if name in cells else None for name in ("truth", "cluster"))
        out[(*(row[b] for b in by), row["metric"], t, c)] = row["value"]
    return out


def assert_rows_equal(got: dict, want: dict, rel: float) -> None:
    assert got.keys() == want.keys(), (sorted(got.keys() - want.keys(), key=str)[:5],
                                       sorted(want.keys() - got.keys(), key=str)[:5])
    for key, value in want.items():
        if value is None:
            assert got[key] is None, (key, got[key])
        else:
            assert got[key] is not None and math.isclose(got[key], value, rel_tol=rel,
                                                         abs_tol=1e-13), (key, got[key], value)


# -- the data --------------------------------------------------------------------------------

@dataclass(frozen=True)
class Case:
    name: str
    by: tuple[str, ...] = ("region",)
    params: dict = field(default_factory=dict)

    def __str__(self) -> str:
        return self.name


def _digits(weighted: bool) -> pl.DataFrame:
    """KMeans on the digits in three segments, plus the degenerate ones; int classes and
    clusters, string sample ids; weights 0-3 when ``weighted`` (a segment all 0)."""
    x, y = load_digits(return_X_y=True)
    x, y = x[:900], y[:900]
    cluster = KMeans(n_clusters=12, n_init=1, random_state=0).fit_predict(x)
    rng = np.random.default_rng(0)
    region = rng.choice(["north", "south", "east"], size=len(y)).astype(object)
    region[:30] = "one_cluster"
    cluster[:30] = 7
    fives = np.flatnonzero(y == 5)[:25]
    region[fives] = "one_class"
    region[30] = "single"
    region[31:51] = "own"
    cluster[31:51] = 100 + np.arange(20)
    weight = rng.integers(0, 4, size=len(y)).astype(float)
    weight[:31] = 1.0  # "single" keeps its one sample
    if weighted:
        region[51:61] = "zero"
        weight[51:61] = 0.0
    frame = pl.DataFrame({"sample": [f"d{i:04d}" for i in range(len(y))], "truth": y,
                          "cluster": cluster, "weight": weight, "region": region.astype(str),
                          "model": np.where(np.arange(len(y)) % 2, "m1", "m2")})
    return frame if weighted else frame.drop("weight")


def _iris() -> pl.DataFrame:
    """KMeans on iris, string classes and clusters, no weight column."""
    x, y = load_iris(return_X_y=True)
    cluster = KMeans(n_clusters=4, n_init=1, random_state=1).fit_predict(x)
    return pl.DataFrame({"sample": np.arange(len(y)),
                         "truth": np.array(["setosa", "versicolor", "virginica"])[y],
                         "cluster": [f"c{c}" for c in cluster]})


@pytest.fixture(scope="module")
def frames() -> dict[str, pl.DataFrame]:
    return {"digits-weighted": _digits(True), "digits-two-keys": _digits(False),
            "iris": _iris()}


CASES = [
    Case("digits-weighted"),
    Case("digits-two-keys", by=("region", "model"),
         params={"average_method": "geometric", "beta": 2.0}),
    Case("iris", by=(), params={"average_method": "max", "beta": 0.5}),
]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_every_clustering_metric_equals_scikit_learn(engine, frames, case):
    frame = frames[case.name]
    got = me.evaluate(frame, CLUSTERING, by=list(case.by), engine=engine, **case.params)
    want = {}
    for metric in CLUSTERING:
        want.update(expected(frame, metric, list(case.by), case.params))
    assert_rows_equal(got_rows(got, list(case.by)), want, rel=1e-12)
    assert got.filter(pl.col("metric") == "normalized_mutual_info")["average_method"].unique() \
        .to_list() == [case.params.get("average_method", "arithmetic")]


@pytest.mark.parametrize("method", ["arithmetic", "geometric", "min", "max"])
def test_average_methods_of_normalized_and_adjusted_mutual_info(engine, frames, method):
    frame = frames["digits-weighted"]
    metrics = ["normalized_mutual_info", "adjusted_mutual_info"]
    got = me.evaluate(frame, metrics, by="region", engine=engine, average_method=method)
    want = {k: v for m in metrics
            for k, v in expected(frame, m, ["region"], {"average_method": method}).items()}
    assert_rows_equal(got_rows(got, ["region"]), want, rel=1e-12)


def test_integer_weights_count_as_repeated_rows(engine, frames):
    frame = frames["digits-weighted"].filter(pl.col("region") != "zero")
    repeated = frame.select(pl.all().repeat_by(pl.col("weight").cast(pl.Int64)).explode()) \
        .with_columns(sample=pl.col("sample") + "-" + pl.int_range(pl.len()).cast(pl.String),
                      weight=pl.lit(1.0))
    a = me.evaluate(frame, CLUSTERING, by="region", engine=engine)
    b = me.evaluate(repeated, CLUSTERING, by="region", engine=engine)
    assert_rows_equal(got_rows(a, ["region"]), got_rows(b, ["region"]), rel=1e-12)


def test_fractional_weights_are_fractional_counts_but_not_for_adjusted_mutual_info(engine):
    frame = _iris().with_columns(weight=pl.lit(0.5))
    halves = me.evaluate(frame, ["homogeneity", "completeness", "normalized_mutual_info",
                                 "purity"], engine=engine)
    whole = me.evaluate(frame.drop("weight"), ["homogeneity", "completeness",
                                               "normalized_mutual_info", "purity"],
                        engine=engine)
    assert_rows_equal(got_rows(halves, []), got_rows(whole, []), rel=1e-12)
    with pytest.raises(me.InputError, match=r"adjusted_mutual_info reads weights as counts.*"
                                            r"fractional weight\(s\), e.g. sample 0"):
        me.evaluate(frame, ["adjusted_mutual_info"], engine=engine)


def test_a_budget_changes_nothing(engine, frames):
    frame = frames["digits-weighted"]
    a = me.evaluate(frame, CLUSTERING, by="region", engine=engine)
    b = me.evaluate(frame, CLUSTERING, by="region", engine=engine, memory_limit="1GB")
    assert_rows_equal(got_rows(b, ["region"]), got_rows(a, ["region"]), rel=0)


# -- which requests are clustering ------------------------------------------------------------

def test_task_is_clustering_only_from_the_request_or_a_cluster_column(engine):
    table = _iris()
    renamed = table.rename({"truth": "cls", "cluster": "pred"})
    assert me.check(table, engine=engine) == "clustering"  # a cluster column and no score
    assert me.check(renamed, engine=engine, columns={"truth": "cls", "cluster": "pred"}) \
        == "clustering"
    assert me.evaluate(renamed.rename({"pred": "cluster"}), "purity", engine=engine,
                       columns={"truth": "cls"})["value"].item() > 0.8
    with pytest.raises(me.InputError, match="columns\\['cluster'\\] is for task 'clustering'"):
        me.check(renamed, task="binary", engine=engine, columns={"cluster": "pred"})
    # a segment column called cluster in a binary log is a segment, not a clustering
    binary = pl.DataFrame({"sample": [1, 2, 3, 4], "label": "y", "score": [0.2, 0.8, 0.6, 0.1],
                           "truth": [0, 1, 1, 0], "cluster": ["k8s-a", "k8s-a", "b", "b"]})
    assert me.check(binary, by="cluster", engine=engine) == "binary"
    assert me.check(binary, engine=engine) == "binary"  # a score column: not clustering


def test_clustering_metrics_alone_make_the_task(engine):
    table = _iris().with_columns(score=pl.lit(0.5))  # a score column, but clustering asked
    got = me.evaluate(table, ["rand", "contingency"], engine=engine)
    assert set(got["metric"]) == {"rand", "contingency"}
    with pytest.raises(me.InputError, match="not defined for task 'binary'"):
        me.evaluate(pl.DataFrame({"sample": [1, 2], "label": "y", "score": [0.1, 0.9],
                                  "truth": [0, 1], "cluster": [0, 1]}), ["rand"],
                    task="binary", engine=engine)


# -- bad input --------------------------------------------------------------------------------

def _broken(**change: object) -> pl.DataFrame:
    frame = _iris().with_columns(sample=pl.format("s{}", pl.col("sample")))
    rows = frame.to_dicts()
    rows[7].update(change)
    return pl.DataFrame(rows, schema=frame.schema)


@pytest.mark.parametrize(("frame", "message"), [
    (lambda: _broken(sample="s3"), r"1 duplicate 'sample' row\(s\), e.g. sample 's3'"),
    (lambda: _broken(truth=None), r"column 'truth' \(truth\) has 1 null value\(s\), e.g. "
                                  r"sample 's7'"),
    (lambda: _broken(cluster=None), r"column 'cluster' \(cluster\) has 1 null value\(s\), "
                                    r"e.g. sample 's7'"),
    (lambda: _iris().with_columns(cluster=pl.lit(1.5)),
     r"column 'cluster' \(cluster\) must hold integers or strings, not Float64"),
    (lambda: _iris().with_columns(weight=pl.lit(-1.0)),
     r"column 'weight' has 150 null, negative or non-finite weight"),
    (lambda: _iris().drop("cluster"), r"missing column 'cluster' for task 'clustering'"),
    (lambda: _iris().head(0), "the input has no rows"),
])
def test_bad_clustering_input_is_named(engine, frame, message):
    with pytest.raises(me.InputError, match=message):
        me.evaluate(frame(), ["rand"], task="clustering", engine=engine)


# -- the command line and the SQL -----------------------------------------------------------

def test_command_line(tmp_path, capsys):
    path = tmp_path / "clusters.parquet"
    _iris().rename({"cluster": "pred"}).write_parquet(path)
    assert main(["evaluate", str(path), "--column", "cluster=pred", "--metric",
                 "normalized_mutual_info,v_measure", "--average-method", "min", "--beta", "2",
                 "--format", "csv"]) == 0
    got = pl.read_csv(capsys.readouterr().out.encode())
    frame = _iris()
    assert math.isclose(got.filter(pl.col("metric") == "normalized_mutual_info")["value"].item(),
                        skm.normalized_mutual_info_score(frame["truth"], frame["cluster"],
                                                         average_method="min"), rel_tol=1e-12)
    assert math.isclose(got.filter(pl.col("metric") == "v_measure")["value"].item(),
                        skm.v_measure_score(frame["truth"], frame["cluster"], beta=2.0),
                        rel_tol=1e-12)
    assert main(["sql", "--metric", "adjusted_mutual_info", "--table", "clusters"]) == 0
    assert "-- mleval_sql: adjusted_mutual_info (clustering) from clusters" in \
        capsys.readouterr().out
    assert main(["metrics"]) == 0
    assert "pair_confusion_matrix" in capsys.readouterr().out


def test_the_statement_runs_on_the_users_table(frames):
    import duckdb

    frame = frames["digits-two-keys"].rename({"cluster": "pred"})
    con = duckdb.connect()
    con.register("clusters", frame)
    statement = me.sql("adjusted_mutual_info", table="clusters", by="region",
                       columns={"cluster": "pred", "weight": None})
    got = con.sql(statement).pl()
    want = expected(frame.rename({"pred": "cluster"}), "adjusted_mutual_info", ["region"], {})
    assert_rows_equal(got_rows(got, ["region"]), want, rel=1e-12)


def test_contingency_statistics_agree_between_engines(frames):
    import duckdb
    from polars.testing import assert_frame_equal

    from mleval_sql import queries
    from mleval_sql.engines import polars as plans

    predictions = frames["digits-weighted"].select(
        "sample", "truth", "cluster", "weight", segment=pl.struct("region", "model"))
    con = duckdb.connect()
    con.register("predictions", predictions)
    keys = ["segment", "truth", "cluster"]
    from_sql = con.sql(queries.load("contingency")).pl().sort(keys)
    from_polars = plans.contingency(predictions.lazy()).collect().sort(keys)
    assert from_sql.height > 100
    assert_frame_equal(from_sql, from_polars.select(from_sql.columns), check_dtypes=False)
