"""Bad input gets one clear line, on both engines; task inference and undefined values don't.

Each bad case is a row of ``CASES``: how to break a good table (or the call), and fragments the
``mleval_sql.InputError`` message must contain (the column, sample id or count at fault). Both
engines must raise the same message. Then: how the task is inferred, that an undefined metric
in one segment is null rather than an error, and that a failed run leaves a user's DuckDB
connection as it found it.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import duckdb
import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.engines import local_engines
from tests.data import cat_dog_eel
from tests.helpers import WITH_SPARK

LABELS = ("cat", "dog", "eel")


def make_data(n_samples: int = 12, seed: int = 3) -> pl.DataFrame:
    """A good multilabel table: 12 samples x 3 labels, per-sample weights, two regions."""
    return cat_dog_eel(n_samples, seed, ("north", "south")).with_columns(
        pl.col("truth").cast(pl.Int64))


def multiclass(data: pl.DataFrame) -> pl.DataFrame:
    """``data`` with exactly one true label per sample (the one after sample % 3)."""
    return data.with_columns(
        truth=(pl.col("label") == pl.lit(np.array(LABELS))
               .get(pl.col("sample") % 3)).cast(pl.Int64))


def put(column: str, value: Any, *, sample: int = 5, label: str = "dog",
        dtype: pl.DataType | None = None) -> Callable[[pl.DataFrame], pl.DataFrame]:
    """A breaker setting ``column`` of the row (sample, label) to ``value``."""
    def breaker(data: pl.DataFrame) -> pl.DataFrame:
        row = (pl.col("sample") == sample) & (pl.col("label") == label)
        return data.with_columns(
            pl.when(row).then(pl.lit(value, dtype=dtype or data.schema[column]))
            .otherwise(pl.col(column)).alias(column))
    return breaker


def _many_labels(data: pl.DataFrame) -> pl.DataFrame:
    """``data`` with 130 labels (three 64-bit words of label bits, bits 63 used), and sample 7
    given a second row for the last label of words 0 and 1."""
    wide = data.filter(pl.col("label") == "cat").drop("label").join(
        pl.DataFrame({"label": [f"l{i:03}" for i in range(130)]}), how="cross")
    again = wide.filter((pl.col("sample") == 7) & pl.col("label").is_in(["l063", "l127"]))
    return pl.concat([wide, again.select(wide.columns)])


def _both_models(data: pl.DataFrame) -> pl.DataFrame:
    return pl.concat([data.with_columns(model=pl.lit("m1")),
                      data.with_columns(model=pl.lit("m2"), score=1 - pl.col("score"))])


@dataclass(frozen=True)
class Case:
    """A bad input: ``breaker`` spoils the good table, ``kwargs`` the call."""

    name: str
    breaker: Callable[[pl.DataFrame], pl.DataFrame] | None
    fragments: tuple[str, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)


def _keep(data: pl.DataFrame) -> pl.DataFrame:
    return data


CASES = [
    # columns and their types
    Case("missing column", lambda d: d.drop("score"), ("missing column 'score'",)),
    Case("missing mapped column", _keep, ("missing column 'prob'", "'score'"),
         {"columns": {"score": "prob"}}),
    Case("missing mapped weight", _keep, ("missing weight column 'w'",),
         {"columns": {"weight": "w"}}),
    Case("score not numeric", lambda d: d.with_columns(pl.col("score").cast(pl.String)),
         ("'score'", "numeric", "String")),
    Case("truth not boolean or numeric",
         lambda d: d.with_columns(pl.col("truth").cast(pl.String)), ("'truth'", "String")),
    Case("weight not numeric", lambda d: d.with_columns(pl.col("weight").cast(pl.String)),
         ("'weight'", "numeric")),
    # bad values
    Case("null score", put("score", None), ("'score'", "1 null", "at sample 5, label 'dog'")),
    Case("NaN score", put("score", float("nan")),
         ("'score'", "1 NaN", "nan at sample 5, label 'dog'")),
    Case("infinite score", put("score", float("-inf")),
         ("'score'", "infinite", "-inf at sample 5, label 'dog'")),
    Case("NaN scores name the smallest sample",
         lambda d: put("score", float("nan"), sample=9, label="cat")(
             put("score", float("nan"), sample=4, label="eel")(d)),
         ("2 NaN", "at sample 4, label 'eel'")),
    Case("null score of a mapped column",
         lambda d: put("score", None)(d).rename({"score": "prob"}), ("'prob'", "1 null"),
         {"columns": {"score": "prob"}}),
    Case("null truth", put("truth", None), ("'truth'", "1 null")),
    Case("truth = 2", put("truth", 2),
         ("'truth'", "1 value(s) outside {0, 1}", "2 at sample 5, label 'dog'")),
    Case("truth = 0.5", lambda d: put("truth", 0.5)(d.with_columns(pl.col("truth") * 1.0)),
         ("'truth'", "1 value(s) outside {0, 1}", ": 0.5, e.g. 0.5 at sample 5")),
    Case("truths -1 and 3", lambda d: put("truth", 3, sample=7)(put("truth", -1, sample=2)(d)),
         ("'truth'", "2 value(s) outside {0, 1}", ": -1 to 3, e.g. -1 at sample 2")),
    Case("negative weight", lambda d: put("weight", -1.0)(put("weight", -1.0, label="cat")(
        put("weight", -1.0, label="eel")(d))), ("'weight'", "3 null, negative")),
    Case("NaN weight", put("weight", float("nan")), ("'weight'", "non-finite")),
    Case("null weight", put("weight", None), ("'weight'", "1 null")),
    Case("null sample", put("sample", None), ("'sample'", "1 null")),
    Case("null label", put("label", None), ("'label'", "1 null")),
    # the shape of the table
    Case("duplicate row", lambda d: pl.concat([d, d.filter(pl.col("sample") == 7)]),
         ("3 duplicate (sample, label)", "sample 7")),
    Case("duplicates among 130 labels", _many_labels, ("2 duplicate (sample, label)", "sample 7")),
    Case("several models, no by=", _both_models, ("36 duplicate", "by=")),
    Case("duplicate in one segment only",
         lambda d: pl.concat([d, d.filter((pl.col("sample") == 9) & (pl.col("label") == "eel"))]),
         ("1 duplicate", "sample 9"), {"by": ["region"]}),
    Case("sample missing a label's row",
         lambda d: d.filter((pl.col("sample") != 7) | (pl.col("label") != "dog")),
         ("sample 7 lacks rows",)),
    Case("sample missing a label's row, segmented",
         lambda d: d.filter(~pl.col("sample").is_in([7, 9]) | (pl.col("label") != "dog")),
         ("sample 7 lacks rows",), {"by": "region"}),
    Case("weights differ within a sample", put("weight", 9.0, sample=4),
         ("sample 4", "different weights")),
    Case("empty input", lambda d: d.head(0), ("no rows",)),
    Case("empty input, segmented", lambda d: d.head(0), ("no rows",), {"by": ["region"]}),
    # tasks
    Case("multiclass sample with no true label",
         lambda d: put("truth", 0, sample=5, label="eel")(multiclass(d)),
         ("'multiclass'", "exactly one true label", "sample 5", "0 to 1"),
         {"task": "multiclass"}),
    Case("multiclass sample with two true labels",
         lambda d: put("truth", 1, sample=8, label="cat")(multiclass(d)),
         ("'multiclass'", "sample 8", "1 to 2"), {"task": "multiclass"}),
    Case("binary task, several labels per sample", _keep,
         ("task 'binary'", "3 rows"), {"task": "binary"}),
    Case("unknown task", _keep, ("unknown task 'regresion'",), {"task": "regresion"}),
    # the call
    Case("unknown metric", _keep, ("unknown metric 'precison'", "did you mean 'precision'"),
         {"metrics": ["precison"]}),
    Case("unknown metric f1_score", _keep, ("unknown metric 'f1_score'", "'f1'"),
         {"metrics": ["f1_score"]}),
    Case("unknown average", _keep, ("unknown average 'mean'",), {"average": "mean"}),
    Case("unknown engine", _keep, ("unknown engine 'sparkle'",), {"engine": "sparkle"}),
    Case("average the metric lacks", _keep, ("'tp'", "no average 'samples'"),
         {"metrics": ["tp"], "average": "samples"}),
    Case("threshold NaN", _keep, ("threshold", "nan"), {"threshold": float("nan")}),
    Case("beta = 0", _keep, ("beta", "got 0"), {"beta": 0}),
    Case("beta < 0", _keep, ("beta", "got -1"), {"beta": -1.0}),
    Case("k = 0", _keep, ("k must be", "got 0"), {"k": 0}),
    Case("zero_division = 0.5", _keep, ("zero_division", "0.5"), {"zero_division": 0.5}),
    Case("segment named like a result column", lambda d: d.rename({"region": "metric"}),
         ("segment column 'metric'", "clashes"), {"by": ["metric"]}),
    Case("segment column does not exist", _keep, ("segment column 'shop'", "not in the input"),
         {"by": ["shop"]}),
    Case("segment is a prediction column", _keep, ("segment column 'label'",), {"by": ["label"]}),
    Case("unknown column role", _keep, ("unknown column role 'prediction'",),
         {"columns": {"prediction": "score"}}),
    Case("unreadable source", lambda d: d.rows(), ("cannot read predictions from a list",)),
]


def _params() -> list:
    return [pytest.param(c, id=c.name) for c in CASES]


def raise_for(case: Case, engine: str) -> me.InputError:
    data = make_data()
    source = case.breaker(data) if case.breaker else data
    kwargs = {"engine": engine, **case.kwargs}
    with pytest.raises(me.InputError) as caught:
        me.evaluate(source, **kwargs)
    return caught.value


@WITH_SPARK
@pytest.mark.parametrize("case", _params())
def test_bad_input_is_named_in_one_line(case: Case, engine: str) -> None:
    error = raise_for(case, engine)
    message = str(error)
    assert isinstance(error, ValueError)
    assert "\n" not in message
    for fragment in case.fragments:
        assert fragment in message


@pytest.mark.parametrize("case", [c for c in CASES if "engine" not in c.kwargs],
                         ids=lambda c: c.name)
def test_both_engines_say_the_same(case: Case) -> None:
    assert str(raise_for(case, "duckdb")) == str(raise_for(case, "polars"))


_INPUT_OPTIONS = {"by", "task", "columns"}


@pytest.mark.parametrize("engine", local_engines())
def test_check_alone_and_under_a_budget_says_the_same(engine: str, monkeypatch) -> None:
    """me.check raises what evaluate raises for a bad table, also under a memory budget, where
    the checks run a batch of segments at a time (here a segment a batch; every case is run
    segmented by region)."""
    monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", 10**9)
    checked = 0
    for case in CASES:
        if not set(case.kwargs) <= _INPUT_OPTIONS or case.kwargs.get("task") == "regresion":
            continue  # the metric's own options, checked by evaluate alone
        source = case.breaker(make_data()) if case.breaker else make_data()
        options = {"by": ["region"], "engine": engine, **case.kwargs}
        with pytest.raises(me.InputError) as want:
            me.evaluate(source, **options)
        for budget in (None, "200MB"):
            with pytest.raises(me.InputError) as got:
                me.check(source, memory_limit=budget, **options)
            assert str(got.value) == str(want.value), (case.name, budget)
        checked += 1
    assert checked >= 20
    assert me.check(make_data(), by="region", engine=engine, memory_limit="200MB") == "multilabel"


@pytest.mark.parametrize("engine", local_engines())
def test_a_parquet_file_says_what_the_frame_says(engine: str, tmp_path) -> None:
    """Each bad table written to parquet gets the line it gets in memory: the statistics of a
    parquet file's float column leave NaN out of its range, and must not hide the example of
    a NaN score from the checks."""
    checked = 0
    for i, case in enumerate(CASES):
        source = case.breaker(make_data()) if case.breaker else None
        if not set(case.kwargs) <= _INPUT_OPTIONS or not isinstance(source, pl.DataFrame):
            continue
        path = tmp_path / f"case-{i}.parquet"
        source.write_parquet(path)
        options = {"engine": engine, **case.kwargs}
        with pytest.raises(me.InputError) as want:
            me.evaluate(source, **options)
        with pytest.raises(me.InputError) as got:
            me.evaluate(str(path), **options)
        assert str(got.value) == str(want.value), case.name
        checked += 1
    assert checked >= 15


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("limit", ["1XB", "1000", "-1GB", "0GB", "big", -5, 1.5])
def test_a_bad_memory_limit_is_named_in_our_words(engine: str, limit: object) -> None:
    with pytest.raises(me.InputError, match=r"^memory_limit must be a positive size with a "
                                            r"unit, such as 500MB.*got"):
        me.check(make_data(), engine=engine, memory_limit=limit)


def test_a_budget_too_small_for_duckdb_is_named_in_our_words() -> None:
    with pytest.raises(me.InputError, match=r"^engine 'duckdb' ran out of memory under "
                                            r"memory_limit='1MB': the request needs a larger"):
        me.evaluate(make_data(), "roc_auc", engine="duckdb", memory_limit="1MB")


@pytest.mark.parametrize("limit", ["200MB", "0.5 GiB", "1gb"])
def test_memory_limits_with_units_are_taken(limit: str) -> None:
    assert me.check(make_data(), by="region", memory_limit=limit) == "multilabel"


def test_every_case_is_good_before_it_is_broken() -> None:
    """The good table passes: the cases fail for what they break, not for the table."""
    good = make_data()
    for engine in local_engines():
        assert me.evaluate(good, engine=engine, by="region").height > 0
        assert me.evaluate(multiclass(good), engine=engine, task="multiclass").height > 0


# -- task inference ---------------------------------------------------------------------------


def _same(a: pl.DataFrame, b: pl.DataFrame) -> bool:
    return a.select(pl.exclude("value")).equals(b.select(pl.exclude("value"))) and bool(
        np.allclose(a["value"].to_numpy(), b["value"].to_numpy(), rtol=0, atol=1e-12))


@pytest.mark.parametrize("engine", local_engines())
def test_one_row_per_sample_is_binary(engine: str) -> None:
    data = make_data().filter(pl.col("label") == "dog")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inferred = me.evaluate(data, ["precision", "recall"], engine=engine)
    assert _same(inferred, me.evaluate(data, ["precision", "recall"], engine=engine,
                                       task="binary"))
    assert inferred["label"].to_list() == ["dog", "dog"]  # binary: per label, no average


@pytest.mark.parametrize("engine", local_engines())
def test_one_true_label_per_sample_is_multiclass_with_a_warning(engine: str) -> None:
    data = multiclass(make_data())
    with pytest.warns(UserWarning, match="task to 'multilabel'"):
        inferred = me.evaluate(data, ["accuracy", "f1"], engine=engine)
    as_multiclass = me.evaluate(data, ["accuracy", "f1"], engine=engine, task="multiclass")
    as_multilabel = me.evaluate(data, ["accuracy", "f1"], engine=engine, task="multilabel")
    assert _same(inferred, as_multiclass)
    assert not _same(inferred, as_multilabel)


@pytest.mark.parametrize("engine", local_engines())
def test_other_tables_are_multilabel(engine: str) -> None:
    data = make_data()
    assert data.group_by("sample").agg(pl.col("truth").sum())["truth"].n_unique() > 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        inferred = me.evaluate(data, ["accuracy", "f1", "subset_accuracy"], engine=engine)
    assert _same(inferred, me.evaluate(data, ["accuracy", "f1", "subset_accuracy"],
                                       engine=engine, task="multilabel"))


# -- undefined is null, not an error ------------------------------------------------------------


@pytest.mark.parametrize("engine", local_engines())
def test_undefined_metric_in_one_segment_is_null(engine: str) -> None:
    # the south predicts nothing: its precision is 0/0
    data = make_data().with_columns(
        score=pl.when(pl.col("region") == "south").then(0.1).otherwise(pl.col("score")))
    got = me.evaluate(data, ["precision", "recall"], by="region", engine=engine,
                      average=["none", "macro"])
    precision = got.filter(metric="precision")
    assert precision.filter(region="south")["value"].null_count() == 4  # 3 labels + macro
    assert precision.filter(region="north")["value"].null_count() == 0
    recall = got.filter(metric="recall", region="south", average="macro")["value"]
    assert recall.to_list() == [0.0]
    zero = me.evaluate(data, ["precision"], by="region", engine=engine, zero_division=0)
    assert zero.filter(region="south")["value"].to_list() == [0.0]


# -- a failed run on the user's connection --------------------------------------------------


def _objects(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.sql("SELECT 'view', view_name FROM duckdb_views() WHERE NOT internal "
                   "UNION ALL SELECT 'table', table_name FROM duckdb_tables() "
                   "ORDER BY ALL").fetchall()


@pytest.mark.parametrize("case", [c for c in CASES if c.name in (
    "null score", "duplicate row", "multiclass sample with two true labels", "k = 0",
    "unknown average")], ids=lambda c: c.name)
@pytest.mark.parametrize("as_relation", [False, True], ids=["polars", "relation"])
def test_failed_run_leaves_the_connection_as_found(case: Case, as_relation: bool) -> None:
    con = duckdb.connect()
    con.execute("CREATE TABLE predictions AS SELECT 1 AS mine")
    assert case.breaker is not None
    bad = case.breaker(make_data())
    source = con.from_arrow(bad.to_arrow()) if as_relation else bad
    before = _objects(con)
    with pytest.raises(me.InputError):
        me.evaluate(source, engine="duckdb", connection=con, **case.kwargs)
    assert _objects(con) == before


@pytest.mark.parametrize("pattern", ["nothing/*.parquet", "empty_folder"])
def test_parquet_paths_that_match_nothing(tmp_path, pattern: str) -> None:
    (tmp_path / "empty_folder").mkdir()
    with pytest.raises(me.InputError, match="no parquet or CSV files match"):
        me.evaluate(str(tmp_path / pattern), ["f1"])


@pytest.mark.parametrize("name", ["predictions.json", "predictions.tsv", "predictions"])
def test_an_unknown_file_type_lists_what_is_read(tmp_path, name: str) -> None:
    path = tmp_path / name
    path.write_text("sample,label,score,truth\n1,a,0.5,1\n")
    with pytest.raises(me.InputError, match=r"unknown file type .*inputs are \.parquet, \.csv"):
        me.evaluate(str(path), ["f1"])


@pytest.mark.parametrize(("kind", "option"), [
    ("roc", {"n_bins": 5}), ("reliability", {"bins": 10}),
    ("sweep", {"thresholds": [0.5], "drop_intermediate": True}),
])
def test_curve_options_that_do_not_apply_are_refused(kind, option) -> None:
    frame = pl.DataFrame({"sample": [1, 2], "label": "a", "score": [0.2, 0.8],
                          "truth": [0, 1]})
    with pytest.raises(me.InputError, match="does not apply"):
        me.curve(frame, kind, **option)
