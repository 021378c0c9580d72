"""What an unattended run meets, through the command line on both engines: lakes as Spark leaves
them, odd paths, files that disagree or cannot be read, outputs that must not be lost, signals,
and a budget that is malformed."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.cli import main
from mleval_sql.sources import as_source
from tests.helpers import assert_same_rows

ARGS = ["--metric", "roc_auc,f1", "--by", "model", "--format", "csv"]


def predictions(seed: int, n: int = 40, *, weight: bool = True) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    columns = {"sample": np.arange(n), "label": "y", "score": rng.random(n).round(2),
               "truth": rng.random(n) < 0.4}
    if weight:
        columns["weight"] = rng.integers(1, 4, n).astype(float)
    return pl.DataFrame(columns)


def write_lake(root: Path, seed: int = 0, **options: bool) -> Path:
    for i, model in enumerate("ab"):
        folder = root / f"model={model}"
        folder.mkdir(parents=True, exist_ok=True)
        predictions(seed + i, **options).write_parquet(folder / "part-0.parquet")
    return root


def cli(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def one_error(capsys: pytest.CaptureFixture[str], *argv: object) -> str:
    """The one line of a run that fails with status 2."""
    code, out, err = cli(capsys, *argv)
    assert (code, out) == (2, ""), err
    assert len(err.splitlines()) == 1 and err.startswith("mleval: error: "), err
    return err


# -- lake conventions and paths ---------------------------------------------------------------

def test_names_starting_with_underscore_or_dot_are_not_data(engine, tmp_path, capsys):
    clean = cli(capsys, "evaluate", write_lake(tmp_path / "clean"), *ARGS, "--engine", engine)
    lake = write_lake(tmp_path / "lake")
    junk = predictions(7, n=60)  # other rows and scores: read as data, they change roc_auc
    (lake / "_temporary" / "0" / "model=a").mkdir(parents=True)
    junk.write_parquet(lake / "_temporary" / "0" / "model=a" / "part-0.parquet")
    junk.write_parquet(lake / "model=a" / ".part-1.parquet.crc.parquet")
    (lake / "model=b" / ".hidden").mkdir()
    junk.write_parquet(lake / "model=b" / ".hidden" / "part-1.parquet")
    (lake / "_SUCCESS").touch()
    assert cli(capsys, "evaluate", lake, *ARGS, "--engine", engine) == clean
    assert clean[0] == 0


def test_an_existing_path_is_literal_and_only_a_missing_one_a_glob(engine, tmp_path, capsys):
    starred = write_lake(tmp_path / "run*", seed=0)
    write_lake(tmp_path / "run_old", seed=5)
    bracketed = write_lake(tmp_path / "brack[1]", seed=0)
    alone = cli(capsys, "evaluate", starred, *ARGS, "--engine", engine)
    assert alone[0] == 0
    assert cli(capsys, "evaluate", bracketed, *ARGS, "--engine", engine) == alone
    both = cli(capsys, "evaluate", tmp_path / "run_*", *ARGS, "--engine", engine)
    assert both[0] == 0 and both != alone  # a missing path: a glob, matching run_old only
    assert cli(capsys, "evaluate", tmp_path / "run_o*" / "model=*", *ARGS, "--engine",
               engine) == both
    err = one_error(capsys, "evaluate", tmp_path / "nothing*", "--engine", engine)
    assert "no parquet or CSV files match" in err and "nothing*" in err


def test_a_path_through_a_partition_folder_and_back_is_the_folder(engine, tmp_path, capsys):
    """lake/model=a/.. is the lake: read as given, model=a would be a column of every file."""
    lake = write_lake(tmp_path / "lake")
    expected = cli(capsys, "evaluate", lake, *ARGS, "--engine", engine)
    assert expected[0] == 0
    assert cli(capsys, "evaluate", lake / "model=a" / "..", *ARGS, "--engine", engine) \
        == expected
    err = one_error(capsys, "evaluate", lake / "model=a" / ".." / "nowhere", "--engine", engine)
    assert err.rstrip().endswith(f"no such file or folder: {lake / 'model=a' / '..' / 'nowhere'}")


def test_the_input_is_listed_once(engine, tmp_path):
    """Every stage and segment reads the files listed when the source was made: a file added
    afterwards is not read, one removed is an error naming it."""
    lake = write_lake(tmp_path / "lake")
    source = as_source(str(lake))
    before = me.evaluate(source, ["roc_auc"], by="model", engine=engine, memory_limit="1GB")
    (lake / "model=c").mkdir()
    predictions(9).write_parquet(lake / "model=c" / "part-0.parquet")
    after = me.evaluate(source, ["roc_auc"], by="model", engine=engine, memory_limit="1GB")
    assert after.equals(before)
    (lake / "model=a" / "part-0.parquet").unlink()
    with pytest.raises(me.InputError, match=re.escape("model=a/part-0.parquet")):
        me.evaluate(source, ["roc_auc"], by="model", engine=engine)


# -- files that disagree or cannot be read ------------------------------------------------------

def test_a_file_without_the_weight_is_an_error_not_a_weight_of_one(engine, tmp_path, capsys):
    lake = write_lake(tmp_path / "lake")
    # the first file in listing order lacks the weight the others have
    predictions(3, weight=False).write_parquet(lake / "model=a" / "a-first.parquet")
    err = one_error(capsys, "evaluate", lake, *ARGS, "--engine", engine)
    assert "'weight'" in err and "a-first.parquet" in err


def test_files_that_disagree_on_a_type_name_the_file_and_column(engine, tmp_path, capsys):
    lake = write_lake(tmp_path / "lake")
    predictions(3).with_columns(pl.col("score").cast(pl.Float32)).write_parquet(
        lake / "model=b" / "part-1.parquet")
    err = one_error(capsys, "evaluate", lake, *ARGS, "--engine", engine)
    assert "'score'" in err and "model=b/part-1.parquet" in err


def test_files_may_differ_in_columns_a_request_does_not_use(engine, tmp_path, capsys):
    lake = write_lake(tmp_path / "lake")
    expected = cli(capsys, "evaluate", lake, *ARGS, "--engine", engine)
    predictions(0).with_columns(note=pl.lit("x")).write_parquet(lake / "model=a" /
                                                                "part-0.parquet")
    assert cli(capsys, "evaluate", lake, *ARGS, "--engine", engine) == expected


def _corrupt(path: Path) -> None:
    data = bytearray(path.read_bytes())
    for i in range(8, 120):  # the first data page's header, inside the file: the footer is fine
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("damage", ["truncated", "corrupt page", "not parquet",
                                    "dangling link"])
def test_an_unreadable_file_is_named(engine, tmp_path, capsys, damage):
    lake = write_lake(tmp_path / "lake")
    bad = lake / "model=b" / "part-1.parquet"
    predictions(4).write_parquet(bad)
    if damage == "truncated":
        bad.write_bytes(bad.read_bytes()[:200])
    elif damage == "corrupt page":
        _corrupt(bad)
    elif damage == "not parquet":
        bad.write_text("sample,label\n1,y\n")
    else:
        bad.unlink()
        bad.symlink_to(tmp_path / "gone.parquet")
    for target in (lake, bad) if damage != "dangling link" else (lake,):
        err = one_error(capsys, "evaluate", target, *ARGS, "--engine", engine)
        assert f"cannot read {bad}" in err


# -- outputs -------------------------------------------------------------------------------------

def test_an_output_that_is_an_input_is_refused_before_any_work(engine, tmp_path, capsys):
    lake = write_lake(tmp_path / "lake")
    file = lake / "model=a" / "part-0.parquet"
    data = file.read_bytes()
    for output, args in [(file, [file]), (lake / "model=a" / "scores.parquet", [lake]),
                         (lake / "model=b" / "scores.csv", [lake / "model=*"]),
                         (lake / "model=b" / "new.parquet", [lake / "*" / "*.parquet"])]:
        err = one_error(capsys, "evaluate", *args, "--by", "model", "--engine", engine,
                        "-o", output)
        assert f"the output {output} is" in err
        assert not output.exists() or output == file
    assert file.read_bytes() == data
    for output in (tmp_path / "elsewhere.csv", lake / "scores.csv"):  # not read by the glob
        assert cli(capsys, "evaluate", lake / "*" / "*.parquet", "--by", "model", "--engine",
                   engine, "-o", output)[0] == 0


def test_a_missing_output_folder_is_reported_before_evaluating(tmp_path, capsys, monkeypatch):
    def fail(*args, **kwargs):
        raise AssertionError("evaluated before checking the output")

    monkeypatch.setattr(me, "evaluate", fail)
    monkeypatch.setattr(me, "curve", fail)
    lake = write_lake(tmp_path / "lake")
    err = one_error(capsys, "evaluate", lake, "-o", tmp_path / "missing" / "scores.csv")
    assert "missing" in err and "does not exist" in err
    err = one_error(capsys, "curve", lake, "-o", tmp_path / "out.csv", "--plot",
                    tmp_path / "missing" / "roc.png")
    assert "roc.png" in err
    err = one_error(capsys, "evaluate", lake, "-o", tmp_path, "--format", "csv")
    assert "is a folder" in err


def test_a_failed_run_leaves_the_previous_output(tmp_path, capsys):
    lake = write_lake(tmp_path / "lake")
    target = tmp_path / "scores.csv"
    target.write_text("previous\n")
    predictions(2).with_columns(pl.lit(None, pl.Float64).alias("score")).write_parquet(
        lake / "model=b" / "part-0.parquet")
    one_error(capsys, "evaluate", lake, "--by", "model", "-o", target)
    assert target.read_text() == "previous\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["lake", "scores.csv"]


# -- signals ----------------------------------------------------------------------------------

def _mleval(*argv: object, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "mleval_sql.cli", *map(str, argv)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _wait_for(process: subprocess.Popen[str], pattern: str, folder: Path) -> bool:
    """Poll until a path matching ``pattern`` shows in ``folder``; False if the process ended
    first."""
    while process.poll() is None:
        if any(folder.glob(pattern)):
            return True
        time.sleep(0.001)
    return False


@pytest.fixture(scope="module")
def big_table(tmp_path_factory) -> Path:
    """Enough distinct scores for a ROC curve whose CSV takes a while to write."""
    rng = np.random.default_rng(0)
    n = 200_000
    path = tmp_path_factory.mktemp("big") / "scores.parquet"
    pl.DataFrame({"sample": np.arange(n), "label": "y", "score": rng.random(n),
                  "truth": rng.random(n) < 0.3}).write_parquet(path)
    return path


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_while_writing_leaves_the_old_or_the_whole_new_file(big_table, tmp_path,
                                                                     stop):
    target = tmp_path / "roc.csv"
    target.write_text("old\n")
    expected = me.curve(str(big_table), "roc", drop_intermediate=False).write_csv()
    run = _mleval("curve", big_table, "--kind", "roc", "--keep-intermediate", "-o", target)
    assert _wait_for(run, ".roc.csv.*.part", tmp_path), run.communicate()
    run.send_signal(stop)
    _, err = run.communicate(timeout=120)
    assert target.read_text() in ("old\n", expected)
    if target.read_text() == "old\n":  # stopped while writing, as is all but certain
        assert run.returncode == 128 + stop
        assert err == f"mleval: stopped by {signal.Signals(stop).name}\n"
    assert [p.name for p in tmp_path.iterdir()] == ["roc.csv"]  # no part file left


@pytest.mark.slow
def test_two_runs_writing_one_target_leave_one_whole(big_table, tmp_path):
    target = tmp_path / "roc.csv"
    # a long and a short table: written in place, the short one over the long one left its tail
    runs = [_mleval("curve", big_table, "--kind", kind, "-o", target)
            for kind in ("roc", "reliability")]
    assert [run.wait(timeout=300) for run in runs] == [0, 0]
    written = {me.curve(str(big_table), kind).write_csv() for kind in ("roc", "reliability")}
    assert target.read_text() in written
    assert [p.name for p in tmp_path.iterdir()] == ["roc.csv"]


@pytest.mark.slow
@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_removes_the_spill_folder(big_table, tmp_path, stop):
    temp = tmp_path / "tmp"
    temp.mkdir()
    run = _mleval("curve", big_table, "--kind", "roc", "--engine", "duckdb",  # DuckDB spills
                  "--memory-limit", "100MB", "-o", tmp_path / "roc.csv",
                  env={**os.environ, "TMPDIR": str(temp)})
    assert _wait_for(run, "mleval-spill-*", temp), run.communicate()
    run.send_signal(stop)
    _, err = run.communicate(timeout=120)
    assert (run.returncode, err) == (128 + stop,
                                     f"mleval: stopped by {signal.Signals(stop).name}\n")
    assert list(temp.iterdir()) == []
    assert not (tmp_path / "roc.csv").exists()


# -- memory limits ------------------------------------------------------------------------------

@pytest.mark.parametrize("limit", ["lots", "1 GBs", "-1GB", "0MB", "GB"])
def test_a_malformed_memory_limit_is_refused(engine, tmp_path, capsys, limit):
    lake = write_lake(tmp_path / "lake")
    err = one_error(capsys, "check", lake, "--by", "model", "--engine", engine,
                    f"--memory-limit={limit}")
    assert err == (f"mleval: error: memory_limit must be a positive size with a unit, such as "
                   f"500MB, 1.5GiB or 50% (of the machine's memory), got {limit!r}\n")


# -- many segments --------------------------------------------------------------------------

def test_more_groups_than_the_narrowest_number_holds():
    """DuckDB numbers the (segment, label) groups its windows sort by in the narrowest type
    that holds them (engines/duckdb.CODES): 70,000 segments need more than 16 bits, and every
    segment's ROC AUC is still its own (as polars, which numbers no groups, gives it)."""
    from mleval_sql.engines.duckdb import CODES

    rng = np.random.default_rng(2)
    n = 2 * 70_000
    assert n // 2 > CODES[0][1]
    data = pl.DataFrame({"sample": np.arange(n), "score": rng.random(n).round(2),
                         "truth": np.arange(n) % 2 == 0, "shop": np.arange(n) // 2})
    options = dict(metrics=["roc_auc"], by="shop", task="binary")
    numbered = me.evaluate(data, engine="duckdb", **options)
    assert numbered.height == n // 2
    assert_same_rows(numbered, me.evaluate(data, engine="polars", **options), ["shop"],
                     rel=1e-12)


def test_many_small_segments_in_batches_give_the_numbers_of_one_run(engine, monkeypatch):
    """A budget packs segments into batches of bounded rows; a batch of many segments is
    selected by a semi-join (null segment values included)."""
    rng = np.random.default_rng(1)
    n = 3_000
    data = pl.DataFrame({"sample": np.arange(n), "label": "y", "score": rng.random(n),
                         "truth": rng.random(n) < 0.5,
                         "shop": pl.Series(rng.integers(0, 400, n)).cast(pl.String),
                         "day": rng.integers(0, 3, n)})
    data = data.with_columns(pl.when(pl.col("day") == 0).then(None).otherwise(pl.col("shop"))
                             .alias("shop"))
    options = dict(metrics=["f1", "roc_auc", "precision"], by=["shop", "day"], engine=engine,
                   average=["none", "macro"])
    free = me.evaluate(data, **options)
    monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", 10**6)  # 1000 rows a batch
    bounded = me.evaluate(data, memory_limit="1GB", **options)  # polars: batches in memory
    assert free.height > 1000
    assert_same_rows(bounded, free, ["shop", "day"], rel=1e-12)
