"""CSV input: a file, a glob or a list of ``.csv`` files, scanned by the engine that runs, gives
what the same rows give from parquet, with the same checks."""

from __future__ import annotations

import io

import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.engines import local_engines
from mleval_sql.sources import Csv, as_source
from tests.data import make_predictions
from tests.helpers import assert_same_rows

METRICS = ["f1", "precision", "roc_auc", "average_precision", "log_loss"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    root = tmp_path_factory.mktemp("csv")
    frame = make_predictions("multilabel", seed=5)
    frame.write_parquet(root / "all.parquet")
    frame.write_csv(root / "all.csv")
    for region, part in frame.partition_by("region", as_dict=True).items():
        part.write_csv(root / f"part-{region[0]}.csv")
    return {"root": root, "frame": frame}


def test_a_csv_path_is_scanned_not_loaded(files):
    source = as_source(str(files["root"] / "all.csv"))
    assert isinstance(source, Csv)
    assert isinstance(source.polars(), pl.LazyFrame)


@pytest.mark.parametrize("pattern", ["all.csv", "part-*.csv"])
def test_csv_equals_parquet(engine, files, pattern):
    root = files["root"]
    got = me.evaluate(str(root / pattern), METRICS, by="region", engine=engine,
                      task="multilabel", average=["none", "macro"])
    want = me.evaluate(str(root / "all.parquet"), METRICS, by="region", engine=engine,
                       task="multilabel", average=["none", "macro"])
    assert got.height == want.height > 0
    assert_same_rows(got, want, ["region"], rel=1e-12)
    curve = me.curve(str(root / pattern), "pr", by="region", engine=engine, task="multilabel")
    assert curve.height == me.curve(str(root / "all.parquet"), "pr", by="region",
                                    engine=engine, task="multilabel").height


def test_a_list_of_csv_files(engine, files):
    root = files["root"]
    parts = sorted(str(p) for p in root.glob("part-*.csv"))
    assert me.check(parts, engine=engine, by="region", task="multilabel") == "multilabel"


def test_csv_values_are_checked(engine, tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("sample,score,truth\n1,0.5,1\n2,0.7,2\n3,0.1,0\n")
    with pytest.raises(me.InputError, match=r"'truth' has 1 value\(s\) outside \{0, 1\}.*"
                                            r"2 at sample 2"):
        me.check(str(path), engine=engine)


def test_parquet_and_csv_do_not_mix(files):
    root = files["root"]
    with pytest.raises(me.InputError, match="either parquet or CSV"):
        me.evaluate([str(root / "all.csv"), str(root / "all.parquet")], ["f1"])
    with pytest.raises(me.InputError, match="both parquet and CSV"):
        me.evaluate(str(root / "all.*"), ["f1"])


@pytest.mark.parametrize("engine_name", local_engines())
def test_command_line(files, capsys, engine_name):
    root = files["root"]
    assert main(["evaluate", str(root / "part-*.csv"), "--metric", "f1,roc_auc", "--by",
                 "region", "--engine", engine_name, "--format", "csv"]) == 0
    got = pl.read_csv(io.StringIO(capsys.readouterr().out))
    want = me.evaluate(str(root / "all.parquet"), ["f1", "roc_auc"], by="region")
    assert_same_rows(got, want, ["region"], rel=1e-12)
    assert main(["check", str(root / "all.csv"), "--by", "region", "--engine", engine_name,
                 "--task", "multilabel"]) == 0
    assert capsys.readouterr().out == "ok: multilabel\n"
