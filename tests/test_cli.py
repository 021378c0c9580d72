"""The ``mleval`` command line gives what ``mleval_sql.evaluate`` gives, in every format."""

from __future__ import annotations

import io
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

import mleval_sql as me
from mleval_sql.cli import averages_text, main, table


@dataclass(frozen=True)
class Inputs:
    binary: Path  # one label, no weight: precision = recall = 2/3 at 0.5
    multilabel: Path  # labels a, b, c; a weight and a region segment
    renamed: Path  # the multilabel table with other column names
    multiclass: Path  # exactly one true label per sample
    lake: Path  # hive folder: model=a, model=b


def _multilabel() -> pl.DataFrame:
    rows = []
    for sample in range(12):
        for i, label in enumerate("abc"):
            rows.append({
                "sample": sample, "label": label,
                "score": ((sample * 7 + i * 5) % 11) / 10,
                "truth": int((sample + i) % 3 != 0) if label != "c" else int(sample % 4 == 0),
                "weight": 1.0 + sample % 3,
                "region": "north" if sample % 2 else "south",
            })
    return pl.DataFrame(rows)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Inputs:
    root = tmp_path_factory.mktemp("cli")
    found = Inputs(binary=root / "binary.parquet", multilabel=root / "multilabel.parquet",
                   renamed=root / "renamed.parquet", multiclass=root / "multiclass.parquet",
                   lake=root / "lake")
    pl.DataFrame({"sample": [1, 2, 3, 4, 5, 6], "label": "spam",
                  "score": [0.9, 0.8, 0.3, 0.6, 0.2, 0.1],
                  "truth": [1, 1, 1, 0, 0, 0]}).write_parquet(found.binary)
    multilabel = _multilabel()
    multilabel.write_parquet(found.multilabel)
    multilabel.rename({"sample": "id", "label": "cls", "score": "prob", "truth": "y",
                       "weight": "w"}).write_parquet(found.renamed)
    pl.DataFrame({"sample": [s for s in range(4) for _ in "xy"], "label": ["x", "y"] * 4,
                  "score": [0.8, 0.2, 0.4, 0.6, 0.3, 0.7, 0.9, 0.1],
                  "truth": [1, 0, 1, 0, 0, 1, 0, 1]}).write_parquet(found.multiclass)
    for model, power in (("a", 2.0), ("b", 0.5)):
        folder = found.lake / f"model={model}"
        folder.mkdir(parents=True)
        multilabel.with_columns(pl.col("score") ** power).write_parquet(folder / "part-0.parquet")
    return found


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def read_back(text: str, fmt: str) -> pl.DataFrame:
    source = io.StringIO(text)
    return pl.read_csv(source) if fmt == "csv" else pl.read_json(source)


def same(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    assert expected.height > 0
    assert_frame_equal(got, expected, check_dtypes=False)


# ------------------------------------------------------------------------------ evaluate

ML_ARGS = ["--metric", "f1,precision", "--metric", "recall", "--by", "region",
           "--average", "macro", "--average", "micro"]
ML_KWARGS = {"metrics": ["f1", "precision", "recall"], "by": ["region"],
             "average": ["macro", "micro"]}


def test_known_values_of_a_binary_table(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, "evaluate", inputs.binary, "--metric", "precision,recall",
                         "--format", "csv")
    assert (code, err) == (0, "")
    got = pl.read_csv(io.StringIO(out))
    assert got["metric"].to_list() == ["precision", "recall"]
    assert got["label"].to_list() == ["spam", "spam"]
    assert got["value"].to_list() == pytest.approx([2 / 3, 2 / 3])


@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_stdout_formats_match_the_api(inputs: Inputs, capsys: pytest.CaptureFixture,
                                      fmt: str) -> None:
    code, out, _ = run(capsys, "evaluate", inputs.multilabel, *ML_ARGS, "--format", fmt)
    assert code == 0
    same(read_back(out, fmt), me.evaluate(str(inputs.multilabel), **ML_KWARGS))


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_output_file_format_follows_its_extension(inputs: Inputs, capsys: pytest.CaptureFixture,
                                                  tmp_path: Path, suffix: str) -> None:
    target = tmp_path / f"scores{suffix}"
    code, out, _ = run(capsys, "evaluate", inputs.multilabel, *ML_ARGS, "-o", target)
    assert (code, out) == (0, "")
    reader = {".csv": pl.read_csv, ".json": pl.read_json, ".parquet": pl.read_parquet}[suffix]
    same(reader(target), me.evaluate(str(inputs.multilabel), **ML_KWARGS))


def test_format_option_overrides_the_extension(inputs: Inputs, capsys: pytest.CaptureFixture,
                                               tmp_path: Path) -> None:
    target = tmp_path / "scores.txt"
    code, _, _ = run(capsys, "evaluate", inputs.multilabel, *ML_ARGS, "--format", "csv",
                     "-o", target)
    assert code == 0
    same(pl.read_csv(target), me.evaluate(str(inputs.multilabel), **ML_KWARGS))


def test_table_shows_every_row_without_shape_or_dtypes(inputs: Inputs,
                                                       capsys: pytest.CaptureFixture) -> None:
    many = ["--metric", "tp,fp,fn,tn,f1,precision,recall", "--by", "region",
            "--average", "none", "--average", "macro"]
    code, out, _ = run(capsys, "evaluate", inputs.multilabel, *many)
    expected = me.evaluate(str(inputs.multilabel), by="region",
                           metrics=["tp", "fp", "fn", "tn", "f1", "precision", "recall"],
                           average=["none", "macro"])
    assert code == 0
    assert expected.height == 56  # more than polars' default of 10 rows shown
    assert out == table(expected) + "\n"
    assert "shape:" not in out
    assert "f64" not in out
    assert "…" not in out
    rows = [line for line in out.splitlines() if line.startswith("│ north") or
            line.startswith("│ south")]
    assert len(rows) == expected.height


def test_table_to_a_txt_file(inputs: Inputs, capsys: pytest.CaptureFixture,
                             tmp_path: Path) -> None:
    target = tmp_path / "scores.txt"
    code, _, _ = run(capsys, "evaluate", inputs.multilabel, *ML_ARGS, "-o", target)
    assert code == 0
    expected = me.evaluate(str(inputs.multilabel), **ML_KWARGS)
    assert target.read_text(encoding="utf-8") == table(expected) + "\n"


def test_column_mapping(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    mapping = ["--column", "sample=id", "--column", "label=cls", "--column", "score=prob",
               "--column", "truth=y", "--column", "weight=w"]
    code, out, _ = run(capsys, "evaluate", inputs.renamed, *ML_ARGS, *mapping, "--format", "csv")
    assert code == 0
    # the same numbers as the canonical names give, weight included
    same(pl.read_csv(io.StringIO(out)), me.evaluate(str(inputs.multilabel), **ML_KWARGS))


def test_empty_weight_mapping_ignores_the_weight(inputs: Inputs,
                                                 capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "evaluate", inputs.multilabel, *ML_ARGS, "--column", "weight=",
                       "--format", "csv")
    assert code == 0
    unweighted = me.evaluate(str(inputs.multilabel), columns={"weight": None}, **ML_KWARGS)
    weighted = me.evaluate(str(inputs.multilabel), **ML_KWARGS)
    assert unweighted["value"].to_list() != weighted["value"].to_list()
    same(pl.read_csv(io.StringIO(out)), unweighted)


def test_hive_folder_by_partition(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "evaluate", inputs.lake, "--metric", "f1", "--by", "model",
                       "--by", "region", "--format", "json")
    got = pl.read_json(io.StringIO(out))
    assert code == 0
    assert got["model"].unique().sort().to_list() == ["a", "b"]
    same(got, me.evaluate(str(inputs.lake), metrics="f1", by=["model", "region"]))


def test_several_inputs(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    parts = sorted(str(p) for p in inputs.lake.glob("*/*.parquet"))
    code, out, _ = run(capsys, "evaluate", *parts, "--metric", "recall", "--by", "model",
                       "--format", "csv")
    got = pl.read_csv(io.StringIO(out))
    assert code == 0
    assert got.height == 2
    same(got, me.evaluate(parts, metrics="recall", by="model"))


def test_polars_engine_gives_the_duckdb_values(inputs: Inputs,
                                               capsys: pytest.CaptureFixture) -> None:
    results = {}
    for engine in ("duckdb", "polars"):
        code, out, _ = run(capsys, "evaluate", inputs.multilabel, *ML_ARGS, "--engine", engine,
                           "--format", "csv")
        assert code == 0
        results[engine] = pl.read_csv(io.StringIO(out))
    same(results["polars"], results["duckdb"])


@pytest.mark.parametrize(("argv", "kwargs"), [
    (["--metric", "fbeta,f1", "--beta", "2", "--threshold", "0.3", "--average", "samples",
      "--task", "multilabel"],
     {"metrics": ["fbeta", "f1"], "beta": 2.0, "threshold": 0.3, "average": "samples",
      "task": "multilabel"}),
    (["--metric", "precision", "--threshold", "0.95", "--zero-division", "1",
      "--average", "none"],
     {"metrics": "precision", "threshold": 0.95, "zero_division": 1, "average": "none"}),
    (["--metric", "precision", "--threshold", "0.95", "--average", "none"],
     {"metrics": "precision", "threshold": 0.95, "average": "none"}),
    (["--metric", "f1", "--average", "macro_std", "--average", "weighted", "--engine", "polars",
      "--memory-limit", "1GB"],
     {"metrics": "f1", "average": ["macro_std", "weighted"], "engine": "polars",
      "memory_limit": "1GB"}),
])
def test_options_reach_the_api(inputs: Inputs, capsys: pytest.CaptureFixture,
                               argv: list[str], kwargs: dict[str, object]) -> None:
    code, out, _ = run(capsys, "evaluate", inputs.multilabel, *argv, "--format", "json")
    assert code == 0
    same(pl.read_json(io.StringIO(out)), me.evaluate(str(inputs.multilabel), **kwargs))


def test_arguments_map_onto_evaluate(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture) -> None:
    # the engines agree on values, so only a spy tells whether --engine (and the rest) arrive
    calls: list[tuple[object, dict[str, object]]] = []

    def spy(source: object, **kwargs: object) -> pl.DataFrame:
        calls.append((source, kwargs))
        return pl.DataFrame({"metric": ["f1"], "value": [0.25]})

    monkeypatch.setattr(me, "evaluate", spy)
    code, out, _ = run(capsys, "evaluate", "a.parquet", "b/", "--metric", "f1, recall",
                       "--metric", "mcc", "--by", "region", "--by", "model", "--task",
                       "multilabel", "--engine", "polars", "--threshold", "0.25", "--average",
                       "micro", "--average", "samples", "--beta", "0.5", "--k", "3",
                       "--zero-division", "0", "--column", "score=prob", "--column", "weight=",
                       "--memory-limit", "2GB", "--format", "csv")
    assert (code, out) == (0, "metric,value\nf1,0.25\n")
    assert calls == [(["a.parquet", "b/"], {
        "metrics": ["f1", "recall", "mcc"], "by": ["region", "model"], "task": "multilabel",
        "engine": "polars", "threshold": 0.25, "average": ["micro", "samples"], "beta": 0.5,
        "k": 3, "zero_division": 0.0, "columns": {"score": "prob", "weight": None},
        "memory_limit": "2GB"})]


def test_zero_division_changes_values(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    values = {}
    for zero in ("0", "1", "null"):
        code, out, _ = run(capsys, "evaluate", inputs.binary, "--metric", "precision",
                           "--threshold", "0.95", "--zero-division", zero, "--format", "json")
        assert code == 0
        values[zero] = pl.read_json(io.StringIO(out))["value"].to_list()
    assert values == {"0": [0.0], "1": [1.0], "null": [None]}


def test_top_k_parameter(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "evaluate", inputs.multiclass, "--task", "multiclass",
                       "--metric", "top_k_accuracy", "--k", "1", "--format", "csv")
    got = pl.read_csv(io.StringIO(out))
    assert code == 0
    assert got["k"].to_list() == [1]
    assert got["value"].to_list() == [0.5]  # samples 0 and 2 have their true label on top


def test_warnings_print_as_notes(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, "evaluate", inputs.multiclass, "--metric", "accuracy",
                         "--format", "csv")
    assert code == 0
    assert err.splitlines() == [err.rstrip("\n")]
    assert err.startswith("mleval: note: task inferred as 'multiclass'")
    assert pl.read_csv(io.StringIO(out))["value"].to_list() == [0.5]


# ------------------------------------------------------------------------------- metrics, sql

def test_metrics_lists_every_metric(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "metrics")
    assert code == 0
    first_cells = [line.split("┆")[0].strip("│ ") for line in out.splitlines() if "┆" in line]
    assert first_cells == ["metric", *me.METRICS]
    for metric in me.METRICS.values():
        assert metric.summary in out


def test_metrics_averages_column() -> None:
    assert averages_text(me.METRICS["tp"]) == "none, micro, macro, weighted, macro_std"
    assert averages_text(me.METRICS["f1"]) == (
        "none, micro, macro, weighted, macro_std; samples (multilabel)")
    assert averages_text(me.METRICS["accuracy"]) == (
        "none, micro, macro, weighted, macro_std (binary, multilabel)")
    assert averages_text(me.METRICS["cohen_kappa"]) == "-"


def test_sql_prints_the_query(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "sql", "f1", "--task", "multilabel")
    assert code == 0
    assert "$threshold" in out
    assert out == me.sql("f1", task="multilabel") + "\n"


def test_sql_options(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "sql", "precision", "--task", "multilabel", "--average",
                       "samples", "--dialect", "spark")
    assert code == 0
    assert out == me.sql("precision", task="multilabel", average="samples",
                         dialect="spark") + "\n"
    assert "sample_counts" in out


# ------------------------------------------------------------------------------------ errors

@pytest.mark.parametrize(("argv", "culprit"), [
    (["evaluate", "{dir}/no-such.parquet"], "no-such.parquet"),
    (["evaluate", "{binary}", "--metric", "f1,bogus_metric"], "bogus_metric"),
    (["evaluate", "{binary}", "--by", "region"], "region"),
    (["evaluate", "{binary}", "--column", "score=prob"], "prob"),
    (["evaluate", "{binary}", "--column", "scor=prob"], "scor"),
    (["evaluate", "{binary}", "--column", "score"], "ROLE=NAME"),
    (["evaluate", "{binary}", "--format", "parquet"], "-o"),
    (["evaluate", "{binary}", "-o", "{dir}/scores.xlsx"], "scores.xlsx"),
    (["evaluate", "{binary}", "--average", "mean"], "mean"),
    (["evaluate", "{binary}", "--engine", "spark"], "spark"),
    (["evaluate", "{binary}", "--zero-division", "2"], "zero-division"),
    (["evaluate", "{binary}", "--threshold", "half"], "half"),
    (["evaluate", "{binary}", "--task", "multiclass"], "multiclass"),
    (["evaluate", "{dir}/nothing-*.parquet"], "nothing-"),
    (["sql", "no_metric"], "no_metric"),
    (["sql", "f1", "--dialect", "no_dialect"], "no_dialect"),
    (["frobnicate"], "frobnicate"),
    ([], "required"),
])
def test_bad_input_is_one_line_and_status_2(inputs: Inputs, capsys: pytest.CaptureFixture,
                                            tmp_path: Path, argv: list[str],
                                            culprit: str) -> None:
    argv = [a.format(dir=tmp_path, binary=inputs.binary) for a in argv]
    code, out, err = run(capsys, *argv)
    assert code == 2
    assert out == ""
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("mleval: error: ")
    assert culprit in lines[0]


def test_parquet_without_output_fails_before_evaluating(capsys: pytest.CaptureFixture,
                                                        tmp_path: Path) -> None:
    # the input does not exist: the format error comes first, as it needs no scan
    code, _, err = run(capsys, "evaluate", tmp_path / "missing.parquet", "--format", "parquet")
    assert code == 2
    assert err == "mleval: error: --format parquet needs -o FILE\n"


# ------------------------------------------------------------------------------ console script

def _console_script() -> list[str]:
    beside = Path(sys.executable).with_name("mleval")
    found = str(beside) if beside.exists() else shutil.which("mleval")
    return [found] if found else [sys.executable, "-m", "mleval_sql.cli"]


@pytest.mark.slow
def test_console_script(inputs: Inputs, tmp_path: Path) -> None:
    target = tmp_path / "scores.csv"
    done = subprocess.run([*_console_script(), "evaluate", str(inputs.multilabel), *ML_ARGS,
                           "-o", str(target)], capture_output=True, text=True, check=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    same(pl.read_csv(target), me.evaluate(str(inputs.multilabel), **ML_KWARGS))

    failed = subprocess.run([*_console_script(), "evaluate", str(tmp_path / "none.parquet")],
                            capture_output=True, text=True, check=False)
    assert failed.returncode == 2
    assert failed.stderr.splitlines() == [f"mleval: error: no such file or folder: "
                                          f"{tmp_path / 'none.parquet'}"]
