"""``mleval sql --drift``: the drift statement, pasted into DuckDB, psql and spark.sql, gives
``me.drift``'s rows but its p-values (ties, weights, a feature of each kind, unseen categories,
a segment the reference lacks, a model as the reference, windows, given edges)."""

from __future__ import annotations

import itertools
from datetime import date, timedelta

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.errors import InputError
from tests.test_portable import load
from tests.test_statement import psql_rows, spark_rows

#: What a statement does not give: the p-values (SQL has no Kolmogorov or chi-square tail).
NOT_IN_SQL = ("p_value", "p_value_method", "note")


def predictions(n: int, seed: int, shift: float) -> pl.DataFrame:
    """``n`` samples x 2 labels of two models, scores rounded (ties), a weight, a numeric and a
    categorical feature, a segment and a day."""
    rng = np.random.default_rng(seed)
    samples = np.arange(n)
    score = np.round(np.clip(rng.random((n, 2)) + shift, 0, 1), 2).ravel()
    return pl.DataFrame({
        "sample": np.repeat(samples, 2),
        "label": np.tile(["l0", "l1"], n),
        "score": score,
        "truth": rng.random(2 * n) < 0.3,
        "w": np.repeat(rng.integers(1, 4, n).astype(float), 2),
        "model": np.repeat(rng.choice(["a", "b"], n), 2),
        "region": np.repeat(rng.choice(["eu", "us", "asia"] if shift else ["eu", "us"], n), 2),
        "age": np.repeat(np.round(rng.normal(40, 10, n)), 2),
        "city": np.repeat(rng.choice(["p", "q", "r"] if shift else ["p", "q"], n), 2),
        "day": pl.Series([date(2026, 11, 1) + timedelta(days=int(d))
                          for d in np.repeat(rng.integers(0, 3, n), 2)], dtype=pl.Date),
    })


CURRENT = predictions(160, 1, 0.05)
REFERENCE = predictions(120, 2, 0.0)
CASES = {
    "model-window": {"reference": {"model": "a"}, "window": "day:1d", "compared":
                     ["score", "decision"], "statistics": ["ks", "psi", "chi2",
                                                           "total_variation"]},
    "table-weights": {"reference": "reference_rows", "by": "region",
                      "compared": ["score", "truth", "age", "city"],
                      "columns": {"weight": "w"}},
    "edges": {"reference": "reference_rows", "compared": ["score"], "edges": [0.2, 0.5, 0.8],
              "statistics": ["psi", "jensen_shannon", "l_infinity", "wasserstein"]},
    # the table's rows of a day, whole, against each day's; and against the rows of other days
    "period-window": {"reference": {"period": "2026-11-02"}, "window": "day:1d", "by": "model",
                      "compared": ["score", "city"]},
    "period": {"reference": {"column": "day", "period": "2026-11-01"}, "by": "region",
               "compared": ["score", "decision", "age"], "columns": {"weight": "w"}},
}


def expected(case: dict) -> pl.DataFrame:
    options = dict(case)
    reference = options.pop("reference")
    return me.drift(CURRENT, REFERENCE if reference == "reference_rows" else reference,
                    **options).drop(*NOT_IN_SQL)


def same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    assert got.columns == want.columns
    assert want.height > 0 and want["value"].null_count() < want.height
    assert_frame_equal(got.cast(dict(want.schema)), want, rel_tol=1e-9, check_exact=False)


@pytest.mark.parametrize("case", CASES)
def test_the_statement_on_duckdb_equals_drift(case, tmp_path):
    want = expected(CASES[case])
    path = tmp_path / "preds.parquet"
    CURRENT.write_parquet(path)
    statement = me.sql(drift=True, table="preds", schema_from=str(path), **CASES[case])
    import duckdb

    con = duckdb.connect()
    con.register("preds", CURRENT)
    con.register("reference_rows", REFERENCE)
    same(con.sql(statement).pl(), want)


@pytest.mark.parametrize("case", ["model-window", "table-weights", "period-window"])
def test_the_statement_in_psql_equals_drift(case, postgres, pg_connection):
    load("postgres", pg_connection, "preds", CURRENT)
    load("postgres", pg_connection, "reference_rows", REFERENCE)
    statement = me.sql(drift=True, dialect="postgres", table="preds", connection=pg_connection,
                       **CASES[case])
    got = psql_rows(postgres, statement)
    want = expected(CASES[case])
    if "window_start" in want.columns:  # psql's text of a date
        got = got.with_columns(pl.col("window_start", "window_end").str.to_date())
    same(got, want)


def test_the_script_in_spark_equals_drift(spark):
    load("spark", spark, "preds", CURRENT)
    load("spark", spark, "reference_rows", REFERENCE)
    case = CASES["table-weights"]
    statement = me.sql(drift=True, dialect="spark", table="preds", connection=spark, **case)
    same(spark_rows(spark, statement), expected(case))


def test_the_command_line_prints_the_statement(capsys):
    assert main(["sql", "--drift", "--reference", "model=a", "--compared", "score,decision",
                 "--by", "region", "--dialect", "postgres", "--table", "preds"]) == 0
    out = capsys.readouterr().out
    assert out == me.sql(drift=True, reference={"model": "a"}, compared=["score", "decision"],
                         by="region", dialect="postgres", table="preds").rstrip("\n") + "\n"
    assert out.startswith("-- mleval_sql: drift of score, decision from preds against model = ")
    assert main(["sql", "--reference", "model=a", "--table", "preds"]) != 0
    assert "--reference: an option of the drift statement" in capsys.readouterr().err


def test_a_feature_needs_the_tables_columns():
    with pytest.raises(InputError, match="'age' is compared by its type"):
        me.sql(drift=True, reference="ref", compared=["age"], table="preds")
    with pytest.raises(InputError, match="drift= asks for the drift statement"):
        me.sql("f1", drift=True, reference="ref", table="preds")


def test_each_window_against_the_one_before(engine):
    """reference='previous': each window's rows against the window before's (of its
    granularity), the first window against none (null values), no window after the last."""
    got = me.drift(CURRENT, "previous", ["score", "decision"], by="model", window="day:1d",
                   columns={"weight": "w"}, engine=engine)
    days = sorted(CURRENT["day"].unique().to_list())
    assert got["window_start"].unique().sort().to_list() == days
    assert got.filter(pl.col("window_start") == days[0])["value"].null_count() == \
        got.filter(pl.col("window_start") == days[0]).height
    for before, day in itertools.pairwise(days):
        want = me.drift(CURRENT.filter(pl.col("day") == day),
                        CURRENT.filter(pl.col("day") == before), ["score", "decision"],
                        by="model", columns={"weight": "w"}, engine=engine)
        assert_frame_equal(got.filter(pl.col("window_start") == day).drop(
            "granularity", "window_start", "window_end"), want, rel_tol=1e-12,
            check_exact=False)
    with pytest.raises(InputError, match="reference='previous' compares each window"):
        me.drift(CURRENT, "previous", engine=engine)
    with pytest.raises(InputError, match="reference='previous': a statement compares"):
        me.sql(drift=True, reference="previous", window="day:1d", table="preds")
