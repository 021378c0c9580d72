"""Every input kind, on both engines, gives the oracle's metrics (tests/oracle.py).

One small multilabel table (40 samples x 3 labels, a per-sample weight, ``region`` and ``channel``
segment columns) is handed over as parquet (path, glob, list, hive lake), Arrow (table, reader,
dataset), polars (DataFrame, LazyFrame), pandas and DuckDB relations. Then the shape of the data
varies: a column mapping, string or integer ids and labels, zero, one and two segment columns,
null segment values, and boolean, integer or float truth. Last, the DuckDB engine must leave a
user's connection as it found it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import polars as pl
import pyarrow as pa
import pyarrow.dataset as pads
import pytest

import mleval_sql as me
from mleval_sql.engines import local_engines
from tests.data import cat_dog_eel
from tests.helpers import assert_same_rows
from tests.oracle import expected
from tests.test_metrics import DEFAULT_PARAMS

METRICS = ["accuracy", "precision", "recall", "f1", "tp", "fp", "fn", "tn", "support",
           "jaccard", "mcc", "subset_accuracy", "hamming_loss"]
AVERAGES = ["none", "micro", "macro"]


def make_data(n_samples: int = 40, seed: int = 7) -> pl.DataFrame:
    """The multilabel table: weights constant within a sample, about 40% true labels."""
    data = cat_dog_eel(n_samples, seed, ("north", "south", "west"))
    return data.with_columns(channel=pl.Series(np.array(["app", "web"])[
        (data["sample"].to_numpy() // 3) % 2]))


def run(source: Any, engine: str, **kwargs: Any) -> pl.DataFrame:
    kwargs.setdefault("task", "multilabel")
    return me.evaluate(source, METRICS, engine=engine, average=AVERAGES, **kwargs)


def oracle(frame: pl.DataFrame, by: list[str], task: str = "multilabel",
           metrics: list[str] = METRICS, averages: list[str] = AVERAGES) -> pl.DataFrame:
    """The rows ``run`` must give, from the oracle (scikit-learn), never from an engine."""
    return pl.concat([expected(frame, task, m, tuple(averages), by, DEFAULT_PARAMS)
                      for m in metrics], how="diagonal_relaxed")


def assert_same(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """The result's columns in order, rows in order (segments, then the metrics and averages
    as asked, then labels), and the oracle's rows and values."""
    by = got.columns[:got.columns.index("metric")]
    assert got.columns == [*by, "metric", "average", "label", "threshold", "value"]
    assert got["threshold"].drop_nulls().unique().to_list() == [0.5]
    assert got.height == want.height > 0
    asked = pl.col("metric").replace_strict({m: i for i, m in enumerate(METRICS)})
    average = pl.col("average").fill_null("none").replace_strict(
        {a: i for i, a in enumerate(AVERAGES)})
    keys = [*by, asked, average, "label"]
    assert got.equals(got.sort(keys, nulls_last=False, maintain_order=True))
    assert_same_rows(got, want, by)


@pytest.fixture(scope="module")
def data() -> pl.DataFrame:
    return make_data()


@pytest.fixture(scope="module")
def reference(data: pl.DataFrame) -> pl.DataFrame:
    return oracle(data, ["region"])


# -- every kind of input ----------------------------------------------------------------------


def _parquet(data: pl.DataFrame, tmp_path: Path) -> Path:
    path = tmp_path / "predictions.parquet"
    data.write_parquet(path)
    return path


def _parts(data: pl.DataFrame, tmp_path: Path) -> list[Path]:
    """The table split by sample into three files of one folder."""
    folder = tmp_path / "parts"
    folder.mkdir()
    paths = []
    for i in range(3):
        paths.append(folder / f"part-{i}.parquet")
        data.filter(pl.col("sample") % 3 == i).write_parquet(paths[-1])
    return paths


def _relation(data: pl.DataFrame) -> tuple[duckdb.DuckDBPyRelation, duckdb.DuckDBPyConnection]:
    con = duckdb.connect()
    con.from_arrow(data.to_arrow()).create("user_predictions")
    return con.table("user_predictions"), con


def _reader(data: pl.DataFrame) -> pa.RecordBatchReader:
    table = data.to_arrow()
    return pa.RecordBatchReader.from_batches(table.schema, table.to_batches(max_chunksize=17))


# name -> (data, tmp_path) -> (source, connection= to pass)
KINDS: dict[str, Callable[[pl.DataFrame, Path], tuple[Any, Any]]] = {
    "parquet str": lambda d, t: (str(_parquet(d, t)), None),
    "parquet Path": lambda d, t: (_parquet(d, t), None),
    "glob": lambda d, t: (str(_parts(d, t)[0].parent / "*.parquet"), None),
    "list of files": lambda d, t: (_parts(d, t), None),
    "folder": lambda d, t: (_parts(d, t)[0].parent, None),
    "arrow table": lambda d, t: (d.to_arrow(), None),
    "arrow reader": lambda d, t: (_reader(d), None),
    "arrow dataset": lambda d, t: (pads.dataset(d.to_arrow()), None),
    "polars DataFrame": lambda d, t: (d, None),
    "polars LazyFrame": lambda d, t: (d.lazy(), None),
    "pandas DataFrame": lambda d, t: (d.to_pandas(), None),
    "duckdb relation": lambda d, t: (_relation(d)[0], None),
    "duckdb relation + its connection": lambda d, t: _relation(d),
}


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("kind", list(KINDS))
def test_every_input_kind(kind: str, engine: str, data: pl.DataFrame,
                          reference: pl.DataFrame, tmp_path: Path) -> None:
    source, connection = KINDS[kind](data, tmp_path)
    got = run(source, engine, by=["region"], connection=connection)
    assert_same(got, reference)


def _lake(data: pl.DataFrame, root: Path) -> pl.DataFrame:
    """Write ``root/model=*/date=*/part-0.parquet``; return the same rows as one frame."""
    frames = []
    for m, model in enumerate(["a", "b"]):
        for date in ["2026-11-01", "2026-11-02", "2026-11-03"]:
            # each model and day scores a little differently, so the segments differ
            part = data.with_columns(score=(pl.col("score") * (0.6 + 0.3 * m)
                                            + 0.01 * int(date[-1])).clip(0, 1))
            folder = root / f"model={model}" / f"date={date}"
            folder.mkdir(parents=True)
            part.write_parquet(folder / "part-0.parquet")
            frames.append(part.with_columns(model=pl.lit(model),
                                            date=pl.lit(date).str.to_date()))
    return pl.concat(frames)


LAKE_KINDS: dict[str, Callable[[Path], Any]] = {
    "folder Path": lambda lake: lake,
    "folder str": lambda lake: str(lake),
    "glob": lambda lake: str(lake / "**" / "*.parquet"),
    "list of files": lambda lake: sorted(lake.rglob("*.parquet")),
}


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("kind", list(LAKE_KINDS))
def test_hive_lake_partition_keys_are_segments(kind: str, engine: str, data: pl.DataFrame,
                                               tmp_path: Path) -> None:
    everything = _lake(data, tmp_path / "lake")
    by = ["model", "date", "region"]
    want = oracle(everything, by)
    got = run(LAKE_KINDS[kind](tmp_path / "lake"), engine, by=by)
    assert_same(got, want)
    assert got.select("model", "date").unique().height == 6


# -- shapes of the data -------------------------------------------------------------------------


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("names", [
    {"sample": "id", "label": "cls", "score": "prob", "truth": "y", "weight": "w"},
    # identifiers are quoted, never pasted: spaces, quotes, keywords, canonical names swapped
    {"sample": "label", "label": "sample", "score": 'my "score"', "truth": "select",
     "weight": "w;drop table x"},
], ids=["plain", "awkward"])
def test_column_mapping(names: dict[str, str], engine: str, data: pl.DataFrame,
                        reference: pl.DataFrame) -> None:
    renamed = data.rename({role: name for role, name in names.items()})
    assert renamed.columns != data.columns
    assert_same(run(renamed, engine, by=["region"], columns=names), reference)


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("ids", ["int", "str"])
@pytest.mark.parametrize("labels", ["int", "str"])
def test_string_and_integer_ids_and_labels(ids: str, labels: str, engine: str,
                                           data: pl.DataFrame, reference: pl.DataFrame) -> None:
    codes = {"cat": 10, "dog": 20, "eel": 30}  # same order as the names
    frame = data.with_columns(
        sample=pl.format("s-{}", "sample") if ids == "str" else pl.col("sample") * 7 + 100,
        label=pl.col("label").replace_strict(codes) if labels == "int" else pl.col("label"),
    )
    got = run(frame, engine, by=["region"])
    assert got.schema["label"] == (pl.Int64 if labels == "int" else pl.String)
    names = {str(v): k for k, v in codes.items()}
    assert_same(got.with_columns(pl.col("label").cast(pl.String).replace(names)), reference)


def _alone(data: pl.DataFrame, engine: str, by: list[str], key: tuple) -> pl.DataFrame:
    """The metrics of one segment, computed on its rows alone, with its key columns in front."""
    keep = [pl.col(c).eq_missing(v) for c, v in zip(by, key, strict=True)]
    rows = data.filter(*keep) if keep else data
    return run(rows, engine).select(
        *(pl.lit(v, dtype=data.schema[c]).alias(c) for c, v in zip(by, key, strict=True)),
        pl.all())


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("by", [[], ["region"], ["region", "channel"]],
                         ids=["no segment", "one", "two"])
def test_segments_are_the_metrics_of_their_rows(by: list[str], engine: str,
                                                data: pl.DataFrame) -> None:
    got = run(data, engine, by=by)
    assert got.columns[:len(by)] == by
    keys = data.select(by).unique().sort(by).rows() if by else [()]
    want = pl.concat([_alone(data, engine, by, key) for key in keys])
    assert_same(got, want)
    assert_same(got, oracle(data, by))


@pytest.mark.parametrize("engine", local_engines())
def test_null_segment_value_is_its_own_segment(engine: str, data: pl.DataFrame) -> None:
    holes = data.with_columns(
        region=pl.when(pl.col("sample") % 4 == 0).then(None).otherwise("region"))
    got = run(holes, engine, by=["region", "channel"])
    keys = holes.select("region", "channel").unique().sort("region", "channel",
                                                           nulls_last=False).rows()
    assert (None, "app") in keys
    want = pl.concat([_alone(holes, engine, ["region", "channel"], key) for key in keys])
    assert_same(got, want)
    assert_same(got, oracle(holes, ["region", "channel"]))
    assert got["region"].null_count() > 0


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("truth", [pl.Boolean, pl.Int64, pl.Int8, pl.UInt8, pl.Float64,
                                   pl.Float32])
def test_truth_as_bool_int_or_float(truth: pl.DataType, engine: str, data: pl.DataFrame,
                                    reference: pl.DataFrame) -> None:
    # from 0/1 integers, so that every case (Boolean too) is a conversion of the reference's
    frame = data.with_columns(pl.col("truth").cast(pl.Int8).cast(truth))
    assert frame.schema["truth"] == truth
    assert_same(run(frame, engine, by=["region"]), reference)


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("coded", ["polars Enum", "polars Categorical", "pandas category",
                                   "duckdb ENUM"])
def test_coded_labels_behave_as_their_text(coded: str, engine: str) -> None:
    """Enum labels out of text order still sort, and break argmax ties, by their text. polars
    numbers a Categorical's text in the order the process first sees it: the labels are seen
    here first in reverse, so that codes and text disagree (the engine codes text keys too)."""
    labels = ["coded-c", "coded-b", "coded-a"]
    seen_first = pl.Series(labels, dtype=pl.Categorical)  # held: unheld text is forgotten
    assert pl.Series(labels[::-1], dtype=pl.Categorical).to_physical().is_sorted(
        descending=True), f"codes in text order: nothing here tells them apart ({seen_first})"
    plain = pl.DataFrame({"sample": np.repeat([1, 2, 3], 3), "label": labels[::-1] * 3,
                          "score": [0.3, 0.3, 0.3, 0.1, 0.5, 0.5, 0.2, 0.7, 0.1],
                          "truth": [1, 0, 0, 0, 0, 1, 0, 1, 0], "region": "x"})
    source: Any
    con = None
    if coded == "duckdb ENUM":
        con = duckdb.connect()
        con.execute("CREATE TYPE coded AS ENUM ('coded-c', 'coded-b', 'coded-a')")
        con.execute("CREATE TABLE t AS SELECT * REPLACE (label::coded AS label, "
                    "region::ENUM ('x') AS region) FROM plain")
        source = con.table("t")
    elif coded == "pandas category":
        source = plain.to_pandas().astype({"label": pd.CategoricalDtype(labels),
                                           "region": "category"})
    else:
        enum = coded == "polars Enum"
        source = plain.with_columns(
            pl.col("label").cast(pl.Enum(labels) if enum else pl.Categorical),
            pl.col("region").cast(pl.Enum(["x"]) if enum else pl.Categorical))
    metrics = ["accuracy", "confusion_matrix", "recall"]
    got = me.evaluate(source, metrics, task="multiclass", engine=engine, average="none",
                      by="region", connection=con)
    assert_same_rows(got, oracle(plain, ["region"], "multiclass", metrics, ["none"]), ["region"])


# -- the user's DuckDB connection -------------------------------------------------------------


def _objects(con: duckdb.DuckDBPyConnection) -> list[tuple]:
    return con.sql("""
        SELECT 'view', database_name, schema_name, view_name FROM duckdb_views() WHERE NOT internal
        UNION ALL
        SELECT 'table', database_name, schema_name, table_name FROM duckdb_tables()
        ORDER BY ALL""").fetchall()


CONNECTION_KINDS: dict[str, Callable[[pl.DataFrame, duckdb.DuckDBPyConnection, Path], Any]] = {
    "relation": lambda d, con, t: con.from_arrow(d.to_arrow()),
    "table": lambda d, con, t: (con.from_arrow(d.to_arrow()).create("mine"), con.table("mine"))[1],
    "polars DataFrame": lambda d, con, t: d,
    "polars LazyFrame": lambda d, con, t: d.lazy(),
    "pandas DataFrame": lambda d, con, t: d.to_pandas(),
    "arrow table": lambda d, con, t: d.to_arrow(),
    "arrow dataset": lambda d, con, t: pads.dataset(d.to_arrow()),
    "parquet": lambda d, con, t: _parquet(d, t),
}


@pytest.mark.parametrize("kind", list(CONNECTION_KINDS))
def test_user_connection_is_left_as_found(kind: str, data: pl.DataFrame,
                                          reference: pl.DataFrame, tmp_path: Path) -> None:
    con = duckdb.connect()
    # the user's own tables, named like the relations the queries read
    con.execute("CREATE TABLE predictions AS SELECT 'mine' AS owner")
    con.execute("CREATE TEMP TABLE mleval_input AS SELECT 'mine' AS owner")
    con.execute("CREATE VIEW confusion_counts AS SELECT 'mine' AS owner")
    source = CONNECTION_KINDS[kind](data, con, tmp_path)
    before = _objects(con)
    assert_same(run(source, "duckdb", by=["region"], connection=con), reference)
    assert _objects(con) == before
    for name in ("predictions", "mleval_input", "confusion_counts"):
        assert con.sql(f"SELECT * FROM {name}").fetchall() == [("mine",)]


def test_relation_of_another_connection(engine: str, data: pl.DataFrame,
                                        reference: pl.DataFrame) -> None:
    relation, _ = _relation(data)
    got = run(relation, engine, by=["region"], connection=duckdb.connect())
    assert_same(got, reference)


def test_a_segment_column_named_segment(engine: str, data: pl.DataFrame,
                                        reference: pl.DataFrame) -> None:
    """``segment`` is the natural name for a segment column (DESIGN's own example)."""
    got = run(data.rename({"region": "segment"}), engine, by=["segment"])
    assert_same(got.rename({"segment": "region"}), reference)
