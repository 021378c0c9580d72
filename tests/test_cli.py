"""The ``mleval`` command line gives what ``mleval_sql.evaluate`` and ``mleval_sql.curve`` give, in
every format, and plots curves."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import plot
from mleval_sql.cli import averages_text, build_parser, main, table
from mleval_sql.engines import local_engines
from mleval_sql.params import DEFAULTS
from mleval_sql.schema import TASKS
from tests.helpers import assert_frames_close

SEEDS = Path(__file__).resolve().parent.parent / "fixtures" / "seeds"
NOTE = "mleval: note: counts are weighted by column 'weight'"  # begins every weighted run's err
WEIGHTED = ("counts are weighted by column 'weight' (columns={'weight': None}, --column weight= "
            "to ignore it)")
ROC = json.loads((SEEDS / "expected.json").read_text(encoding="utf-8"))["roc_points"]


@dataclass(frozen=True)
class Inputs:
    binary: Path  # one label, no weight: precision = recall = 2/3 at 0.5
    multilabel: Path  # labels a, b, c; a weight and a region segment
    renamed: Path  # the multilabel table with other column names
    multiclass: Path  # exactly one true label per sample
    lake: Path  # hive folder: model=a, model=b
    regression: Path  # numeric truth, one label
    seed: Path  # fixtures/seeds/004_roc.csv as parquet: models res_1, res_2


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
                   lake=root / "lake", regression=root / "regression.parquet",
                   seed=root / "004_roc.parquet")
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
    pl.DataFrame({"sample": range(6), "label": "y", "score": [1.0, 2.5, 2.0, 4.0, 6.0, 5.5],
                  "truth": [1.5, 2.0, 3.0, 4.0, 5.0, 7.0]}).write_parquet(found.regression)
    pl.read_csv(SEEDS / ROC["fixture"]).write_parquet(found.seed)
    return found


def run(capsys: pytest.CaptureFixture[str], *argv: object) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def only_the_weight_note(err: str) -> bool:
    """Nothing on stderr but the note that counts are weighted (when the input has weights)."""
    return err == "" or (err.startswith(NOTE) and err.count("\n") == 1)


def read_back(text: str, fmt: str) -> pl.DataFrame:
    source = io.StringIO(text)
    return pl.read_csv(source) if fmt == "csv" else pl.read_json(source)


def same(got: pl.DataFrame, expected: pl.DataFrame) -> None:
    assert expected.height > 0
    assert_frames_close(got, expected)


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
    for engine in local_engines():
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


Calls = list[tuple[tuple[object, ...], dict[str, object]]]


def spy_on(monkeypatch: pytest.MonkeyPatch, name: str) -> Calls:
    """Replace ``mleval_sql.<name>`` by a spy recording its calls; it returns a tiny frame."""
    calls: Calls = []

    def spy(*args: object, **kwargs: object) -> pl.DataFrame:
        calls.append((args, kwargs))
        return pl.DataFrame({"metric": ["f1"], "value": [0.25]})

    monkeypatch.setattr(me, name, spy)
    return calls


def test_arguments_map_onto_evaluate(monkeypatch: pytest.MonkeyPatch,
                                     capsys: pytest.CaptureFixture) -> None:
    # the engines agree on values, so only a spy tells whether --engine (and the rest) arrive
    calls = spy_on(monkeypatch, "evaluate")
    code, out, _ = run(capsys, "evaluate", "a.parquet", "b/", "--metric", "f1, recall",
                       "--metric", "mcc", "--by", "region, model", "--wide", "--task",
                       "multilabel", "--engine", "polars", "--threshold", "0.25", "--average",
                       "micro", "--average", "samples", "--beta", "0.5", "--k", "3",
                       "--zero-division", "0", "--column", "score=prob", "--column", "weight=",
                       "--memory-limit", "2GB", "--thresholds", "0.75, 0.25,0.5",
                       "--max-fpr", "0.3", "--min-recall", "0.8", "--min-precision", "0.7",
                       "--n-bins", "5", "--average-method", "geometric",
                       "--storage-option", "aws_region=eu-west-1", "--as-of", "3",
                       "--format", "csv")
    assert (code, out) == (0, "metric,value\nf1,0.25\n")
    assert calls == [((["a.parquet", "b/"],), {
        "metrics": ["f1", "recall", "mcc"], "by": ["region", "model"], "task": "multilabel",
        "engine": "polars", "threshold": 0.25, "average": ["micro", "samples"], "beta": 0.5,
        "k": 3, "zero_division": 0.0, "columns": {"score": "prob", "weight": None},
        "memory_limit": "2GB", "thresholds": [0.75, 0.25, 0.5], "bins": None, "max_fpr": 0.3,
        "min_recall": 0.8, "min_precision": 0.7, "n_bins": 5, "average_method": "geometric",
        "wide": True, "storage_options": {"aws_region": "eu-west-1"}, "as_of": "3",
        "log_base": 2.0, "ignore_ties": False, "pinball_alpha": 0.5, "power": 0.0})]
    run(capsys, "evaluate", "a.parquet", "--by", "region", "--by", "model,date")
    assert calls[1][1]["by"] == ["region", "model", "date"]


def test_help_says_what_k_applies_to(capsys: pytest.CaptureFixture) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["evaluate", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "the k of top_k_accuracy, precision_at_k, recall_at_k, dcg and ndcg" in text


def test_weights_are_named_in_a_note(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    code, _, err = run(capsys, "evaluate", inputs.multilabel, "--metric", "f1")
    assert (code, err) == (0, f"mleval: note: {WEIGHTED}\n")
    code, _, err = run(capsys, "evaluate", inputs.multilabel, "--metric", "f1",
                       "--column", "weight=")
    assert (code, err) == (0, "")
    code, _, err = run(capsys, "evaluate", inputs.renamed, "--metric", "f1", "--column",
                       "sample=id", "--column", "label=cls", "--column", "score=prob",
                       "--column", "truth=y", "--column", "weight=w")
    assert (code, err) == (0, "mleval: note: counts are weighted by column 'w' (columns="
                              "{'weight': None}, --column weight= to ignore it)\n")


def test_the_duplicate_rows_hint_names_the_by_option(inputs: Inputs,
                                                     capsys: pytest.CaptureFixture) -> None:
    code, _, err = run(capsys, "check", inputs.lake / "*" / "*.parquet")
    assert code == 2 and "duplicate" in err and "--by" in err


def test_evaluate_defaults_are_the_registry_defaults(monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture) -> None:
    calls = spy_on(monkeypatch, "evaluate")
    assert run(capsys, "evaluate", "a.parquet", "--bins", "4")[0] == 0
    assert run(capsys, "evaluate", "a.parquet")[0] == 0
    assert calls[0][1]["bins"] == 4
    kwargs = calls[1][1]
    names = ("threshold", "thresholds", "bins", "beta", "k", "zero_division", "max_fpr",
             "min_recall", "min_precision", "n_bins", "average_method")
    assert {n: kwargs[n] for n in names} == {n: DEFAULTS[n] for n in names}
    assert "metrics" not in kwargs  # the API's own default list


def test_task_choices_are_the_schema_tasks() -> None:
    parser = build_parser()
    for command in ("evaluate", "curve"):
        for task in TASKS:
            assert parser.parse_args([command, "x.parquet", "--task", task]).task == task


def _without(kwargs: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in kwargs.items() if k != key}


@pytest.mark.parametrize(("argv", "kwargs", "option"), [
    (["--metric", "precision,recall", "--by", "region", "--thresholds", "0.2,0.5,0.8"],
     {"metrics": ["precision", "recall"], "by": "region", "thresholds": [0.2, 0.5, 0.8]},
     "thresholds"),
    (["--metric", "f1,roc_auc", "--bins", "4", "--average", "macro"],
     {"metrics": ["f1", "roc_auc"], "bins": 4, "average": "macro"}, "bins"),
    (["--metric", "roc_auc", "--max-fpr", "0.5", "--average", "none"],
     {"metrics": "roc_auc", "max_fpr": 0.5, "average": "none"}, "max_fpr"),
    (["--metric", "precision_at_recall", "--min-recall", "0.4", "--average", "none"],
     {"metrics": "precision_at_recall", "min_recall": 0.4, "average": "none"}, "min_recall"),
    (["--metric", "recall_at_precision", "--min-precision", "0.5", "--average", "none"],
     {"metrics": "recall_at_precision", "min_precision": 0.5, "average": "none"},
     "min_precision"),
    (["--metric", "calibration_error", "--n-bins", "3", "--average", "none"],
     {"metrics": "calibration_error", "n_bins": 3, "average": "none"}, "n_bins"),
])
@pytest.mark.parametrize("fmt", ["csv", "json"])
def test_new_options_reach_the_api(inputs: Inputs, capsys: pytest.CaptureFixture,
                                   argv: list[str], kwargs: dict[str, Any], option: str,
                                   fmt: str) -> None:
    expected = me.evaluate(str(inputs.multilabel), **kwargs)
    # the option matters on this data, so dropping it on the way would show
    assert not expected.equals(me.evaluate(str(inputs.multilabel), **_without(kwargs, option)))
    code, out, err = run(capsys, "evaluate", inputs.multilabel, *argv, "--format", fmt)
    assert code == 0 and only_the_weight_note(err)
    same(read_back(out, fmt), expected)


def test_regression_task(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, "evaluate", inputs.regression, "--task", "regression",
                         "--metric", "mae,rmse,r2", "--format", "csv")
    assert (code, err) == (0, "")
    got = pl.read_csv(io.StringIO(out))
    same(got, me.evaluate(str(inputs.regression), ["mae", "rmse", "r2"], task="regression"))
    # |errors| 0.5, 0.5, 1, 0, 1, 1.5
    assert got.filter(metric="mae")["value"].item() == pytest.approx(4.5 / 6)


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


# ------------------------------------------------------------------------------------ curve

@pytest.mark.parametrize(("argv", "kwargs", "option"), [
    (["--kind", "roc", "--by", "region"], {"kind": "roc", "by": "region"}, "by"),
    (["--kind", "roc", "--keep-intermediate"], {"kind": "roc", "drop_intermediate": False},
     "drop_intermediate"),
    (["--kind", "pr", "--by", "region"], {"kind": "pr", "by": "region"}, "kind"),
    (["--kind", "pr", "--drop-intermediate"], {"kind": "pr", "drop_intermediate": True},
     "drop_intermediate"),
    (["--kind", "roc", "--bins", "5"], {"kind": "roc", "bins": 5}, "bins"),
    (["--kind", "sweep", "--thresholds", "0,0.3,0.6,0.9", "--by", "region"],
     {"kind": "sweep", "thresholds": [0, 0.3, 0.6, 0.9], "by": "region"}, "by"),
    (["--kind", "sweep", "--bins", "4"], {"kind": "sweep", "bins": 4}, None),
    (["--kind", "reliability", "--n-bins", "4", "--by", "region"],
     {"kind": "reliability", "n_bins": 4, "by": "region"}, "n_bins"),
    (["--kind", "reliability", "--engine", "polars", "--column", "weight="],
     {"kind": "reliability", "engine": "polars", "columns": {"weight": None}}, "columns"),
])
def test_curve_matches_the_api(inputs: Inputs, capsys: pytest.CaptureFixture,
                               argv: list[str], kwargs: dict[str, Any],
                               option: str | None) -> None:
    expected = me.curve(str(inputs.multilabel), **kwargs)
    if option is not None:  # the option matters on this data
        baseline = me.curve(str(inputs.multilabel), **_without(kwargs, option))
        assert not expected.equals(baseline)
    # JSON has no infinity: the roc and pr origin (threshold +inf) is compared through csv
    formats = ["csv"] if kwargs["kind"] in ("roc", "pr") else ["csv", "json"]
    for fmt in formats:
        code, out, err = run(capsys, "curve", inputs.multilabel, *argv, "--format", fmt)
        assert code == 0 and only_the_weight_note(err)
        same(read_back(out, fmt), expected)


def test_arguments_map_onto_curve(monkeypatch: pytest.MonkeyPatch,
                                  capsys: pytest.CaptureFixture) -> None:
    calls = spy_on(monkeypatch, "curve")
    assert run(capsys, "curve", "a.parquet", "b/", "--kind", "sweep", "--by", "model",
               "--task", "multilabel", "--engine", "polars", "--thresholds", "0,0.5",
               "--n-bins", "7", "--keep-intermediate", "--column", "score=prob",
               "--memory-limit", "1GB", "--format", "csv")[0] == 0
    assert run(capsys, "curve", "a.parquet", "--bins", "3", "--drop-intermediate",
               "--max-points", "200")[0] == 0
    assert run(capsys, "curve", "a.parquet")[0] == 0
    assert calls == [
        ((["a.parquet", "b/"], "sweep"), {
            "by": ["model"], "task": "multilabel", "engine": "polars", "thresholds": [0.0, 0.5],
            "bins": None, "n_bins": 7, "drop_intermediate": False, "max_points": None,
            "columns": {"score": "prob"}, "memory_limit": "1GB", "beta": 1.0,
            "zero_division": None}),
        ((["a.parquet"], "roc"), {
            "by": [], "task": None, "engine": None, "thresholds": None, "bins": 3,
            "n_bins": 10, "drop_intermediate": True, "max_points": 200, "columns": {},
            "memory_limit": None, "beta": 1.0, "zero_division": None}),
        ((["a.parquet"], DEFAULTS["kind"]), {
            "by": [], "task": None, "engine": None, "thresholds": None, "bins": None,
            "n_bins": DEFAULTS["n_bins"], "drop_intermediate": None, "max_points": None,
            "columns": {}, "memory_limit": None, "beta": 1.0, "zero_division": None}),
    ]


@pytest.mark.parametrize("engine", local_engines())
def test_sweep_reproduces_the_seed_roc_points(inputs: Inputs, capsys: pytest.CaptureFixture,
                                              engine: str) -> None:
    thresholds = ",".join(str(t) for t in ROC["thresholds"])
    assert thresholds == "0,0.2,0.4,0.6,0.8,1"
    code, out, err = run(capsys, "curve", inputs.seed, "--kind", "sweep", "--thresholds",
                         thresholds, "--by", "model", "--engine", engine, "--format", "csv")
    assert (code, err) == (0, "")
    got = pl.read_csv(io.StringIO(out))
    assert got.height == len(ROC["points"]) == 12
    for point in ROC["points"]:
        row = got.filter(model=point["model"], threshold=float(point["threshold"]))
        assert row.height == 1, point
        assert row["fpr"].item() == pytest.approx(point["fpr"], rel=1e-9), point
        assert row["tpr"].item() == pytest.approx(point["tpr"], rel=1e-9), point


def test_curve_to_a_file_by_extension(inputs: Inputs, capsys: pytest.CaptureFixture,
                                      tmp_path: Path) -> None:
    target = tmp_path / "roc.parquet"
    code, out, _ = run(capsys, "curve", inputs.lake, "--kind", "roc", "--by", "model",
                       "-o", target)
    assert (code, out) == (0, "")
    same(pl.read_parquet(target), me.curve(str(inputs.lake), "roc", by="model"))


def test_curve_table_on_stdout(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "curve", inputs.binary, "--kind", "pr")
    assert code == 0
    assert out == table(me.curve(str(inputs.binary), "pr")) + "\n"


def test_curve_warnings_print_as_notes(inputs: Inputs, capsys: pytest.CaptureFixture) -> None:
    code, out, err = run(capsys, "curve", inputs.multiclass, "--format", "csv")
    assert code == 0
    assert err.splitlines() == [err.rstrip("\n")]
    assert err.startswith("mleval: note: task inferred as 'multiclass'")
    same(pl.read_csv(io.StringIO(out)), me.curve(str(inputs.multiclass), task="multiclass"))


# ------------------------------------------------------------------------------------- plots

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("kind", ["roc", "pr", "sweep", "reliability"])
def test_plot_writes_a_png(inputs: Inputs, capsys: pytest.CaptureFixture, tmp_path: Path,
                           kind: str) -> None:
    from matplotlib.image import imread

    target = tmp_path / f"{kind}.png"
    sweep = ["--bins", "10"] if kind == "sweep" else []
    code, out, err = run(capsys, "curve", inputs.lake, "--kind", kind, *sweep, "--by", "model",
                         "--format", "csv", "--plot", target)
    assert code == 0 and only_the_weight_note(err)
    # the table is written as without --plot
    options = {"bins": 10} if kind == "sweep" else {}
    same(pl.read_csv(io.StringIO(out)), me.curve(str(inputs.lake), kind, by="model", **options))
    assert target.read_bytes().startswith(PNG_MAGIC)
    assert target.stat().st_size > 10_000
    height, width = imread(target).shape[:2]
    assert height >= 400 and width >= 500


@pytest.mark.parametrize(("kind", "x", "ys", "diagonal"), [
    ("roc", "fpr", ["tpr"], True),
    ("pr", "recall", ["precision"], False),
    ("sweep", "threshold", ["tpr", "fpr"], False),
    ("reliability", "mean_score", ["observed_rate"], True),
])
def test_figure_draws_one_line_per_segment_and_label(inputs: Inputs, kind: str, x: str,
                                                     ys: list[str], diagonal: bool) -> None:
    options = {"thresholds": [0, 0.25, 0.5, 0.75, 1]} if kind == "sweep" else {}
    curves = me.curve(str(inputs.multilabel), kind, by="region", **options)
    ax = plot.figure(curves, kind, by=["region"], areas=False).axes[0]
    lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    groups = curves.partition_by(["region", "label"], maintain_order=True)
    assert len(groups) == 6  # regions north, south x labels a, b, c
    assert len(lines) == len(groups) * len(ys)
    for i, line in enumerate(lines):
        group, y = groups[i // len(ys)], ys[i % len(ys)]
        region, label = group["region"][0], group["label"][0]
        name = f"region={region}, label={label}"
        assert line.get_label() == (name if len(ys) == 1 else f"{name}: {y}")
        for drawn, column in ((line.get_xdata(), x), (line.get_ydata(), y)):
            # nulls (e.g. recall where a region lacks positives) are drawn as gaps: NaN
            want = group[column].cast(pl.Float64).fill_null(float("nan")).to_list()
            assert list(drawn) == pytest.approx(want, nan_ok=True)
    diagonals = [line for line in ax.get_lines() if line.get_label() == "_diagonal"]
    assert len(diagonals) == int(diagonal)
    assert [t.get_text() for t in ax.get_legend().get_texts()] == [
        line.get_label() for line in lines]
    assert (ax.get_xlabel(), ax.get_ylabel(), ax.get_title()) == (
        plot.STYLES[kind].xlabel, plot.STYLES[kind].ylabel, plot.STYLES[kind].title)


def test_plot_without_matplotlib(inputs: Inputs, capsys: pytest.CaptureFixture,
                                 tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for module in ("matplotlib", "matplotlib.figure", "matplotlib.backends",
                   "matplotlib.backends.backend_agg"):
        monkeypatch.setitem(sys.modules, module, None)  # import fails
    target = tmp_path / "roc.png"
    code, out, err = run(capsys, "curve", inputs.binary, "--plot", target)
    assert (code, out) == (2, "")
    assert err.splitlines() == [err.rstrip("\n")]
    assert err.startswith("mleval: error: ")
    assert "pip install 'mleval_sql[plot]'" in err
    assert not target.exists()


def test_plot_problems_come_before_evaluating(capsys: pytest.CaptureFixture,
                                              tmp_path: Path) -> None:
    # the input does not exist: the plot's file type is checked first, as it needs no scan
    code, _, err = run(capsys, "curve", tmp_path / "missing.parquet", "--plot",
                       tmp_path / "roc.xlsx")
    assert code == 2
    assert err.startswith(f"mleval: error: cannot plot to '{tmp_path / 'roc.xlsx'}'")


# ------------------------------------------------------------------------------- metrics, sql

def test_metrics_lists_every_metric_within_100_columns(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "metrics")
    assert code == 0
    names = [line.split()[0] for line in out.splitlines() if not line.startswith(" ")]
    assert names == list(me.METRICS)
    assert max(len(line) for line in out.splitlines()) <= 100
    flat = " ".join(out.split())
    for metric in me.METRICS.values():
        assert " ".join(metric.summary.split()) in flat
        assert f"averages: {' '.join(averages_text(metric).split())}" in flat


def test_metrics_averages_column() -> None:
    assert averages_text(me.METRICS["tp"]) == "none, micro, macro, weighted, macro_std"
    assert averages_text(me.METRICS["f1"]) == (
        "none, micro, macro, weighted, macro_std; samples (multilabel)")
    assert averages_text(me.METRICS["accuracy"]) == (
        "none, micro, macro, weighted, macro_std (binary, multilabel)")
    assert averages_text(me.METRICS["cohen_kappa"]) == "-"


def test_sql_prints_the_query(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "sql", "--metric", "f1", "--task", "multilabel")
    assert code == 0
    assert "score >= CAST(0.5 AS DOUBLE)" in out  # parameters as literals, defaults filled in
    assert out == me.sql("f1", task="multilabel") + "\n"


def test_sql_options(capsys: pytest.CaptureFixture) -> None:
    code, out, _ = run(capsys, "sql", "--metric", "precision", "--task", "multilabel", "--average",
                       "samples", "--dialect", "spark")
    assert code == 0
    assert out == me.sql("precision", task="multilabel", average="samples",
                         dialect="spark") + "\n"
    assert "sample_counts" in out


@pytest.mark.parametrize("engine", local_engines())
def test_check_prints_the_task(inputs: Inputs, capsys: pytest.CaptureFixture,
                               engine: str) -> None:
    code, out, err = run(capsys, "check", inputs.binary, "--engine", engine,
                         "--memory-limit", "1GB")
    assert (code, out, err) == (0, "ok: binary\n", "")


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
    (["evaluate", "{binary}", "--engine", "sparc"], "sparc"),
    (["evaluate", "{binary}", "--zero-division", "2"], "zero-division"),
    (["evaluate", "{binary}", "--threshold", "half"], "half"),
    (["evaluate", "{binary}", "--task", "multiclass"], "multiclass"),
    (["evaluate", "{dir}/nothing-*.parquet"], "nothing-"),
    (["evaluate", "{binary}", "--thresholds", "0,x"], "0,x"),
    (["evaluate", "{binary}", "--thresholds", "0,nan"], "0,nan"),
    (["evaluate", "{binary}", "--thresholds", ""], "--thresholds"),
    (["evaluate", "{binary}", "--thresholds", "0.5", "--bins", "2"], "--bins"),
    (["evaluate", "{binary}", "--bins", "x"], "--bins"),
    (["evaluate", "{binary}", "--bins", "0"], "bins"),
    (["evaluate", "{binary}", "--max-fpr", "0"], "max_fpr"),
    (["evaluate", "{binary}", "--max-fpr", "x"], "--max-fpr"),
    (["evaluate", "{binary}", "--min-recall", "1.5"], "min_recall"),
    (["evaluate", "{binary}", "--min-precision", "x"], "--min-precision"),
    (["evaluate", "{binary}", "--n-bins", "0"], "n_bins"),
    (["evaluate", "{binary}", "--n-bins", "2.5"], "--n-bins"),
    (["evaluate", "{binary}", "--task", "regression", "--metric", "f1"], "regression"),
    (["evaluate", "{binary}", "--task", "ranking"], "ranking"),
    (["evaluate", "{binary}", "--metric", "roc_auc", "--thresholds", "0.5"], "roc_auc"),
    (["curve", "{dir}/no-such.parquet"], "no-such.parquet"),
    (["curve", "{binary}", "--kind", "lift"], "lift"),
    (["curve", "{binary}", "--kind", "sweep"], "--thresholds"),
    (["curve", "{binary}", "--kind", "sweep", "--thresholds", "0,x"], "0,x"),
    (["curve", "{binary}", "--kind", "sweep", "--bins", "0"], "bins"),
    (["curve", "{binary}", "--kind", "roc", "--thresholds", "0.5"], "thresholds"),
    (["curve", "{binary}", "--kind", "reliability", "--n-bins", "0"], "n_bins"),
    (["curve", "{binary}", "--drop-intermediate", "--keep-intermediate"],
     "--keep-intermediate"),
    (["curve", "{binary}", "--task", "regression"], "regression"),
    (["curve", "{binary}", "--by", "region"], "region"),
    (["curve", "{binary}", "--format", "parquet"], "-o"),
    (["curve", "{binary}", "--plot", "{dir}/curve.xlsx"], "curve.xlsx"),
    (["check", "{dir}/no-such.parquet"], "no-such.parquet"),
    (["check", "{binary}", "--by", "region"], "region"),
    (["check", "{binary}", "--task", "multiclass"], "multiclass"),
    (["check", "{binary}", "--memory-limit", "1XB"], "memory_limit must be a positive size"),
    (["evaluate", "{binary}", "--memory-limit", "lots", "--engine", "polars"], "'lots'"),
    (["sql", "--metric", "no_metric"], "no_metric"),
    (["sql", "--metric", "f1", "--task", "binary", "--dialect", "no_dialect"], "no_dialect"),
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
    assert (done.returncode, done.stdout) == (0, "")
    notes = done.stderr.splitlines()  # the weight column's, and a label left out of a mean
    assert all(n.startswith("mleval: note: ") for n in notes), notes
    assert any(n.startswith(NOTE) for n in notes) and any("0/0" in n for n in notes)
    same(pl.read_csv(target), me.evaluate(str(inputs.multilabel), **ML_KWARGS))

    failed = subprocess.run([*_console_script(), "evaluate", str(tmp_path / "none.parquet")],
                            capture_output=True, text=True, check=False)
    assert failed.returncode == 2
    assert failed.stderr.splitlines() == [f"mleval: error: no such file or folder: "
                                          f"{tmp_path / 'none.parquet'}"]
