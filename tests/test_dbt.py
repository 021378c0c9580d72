"""The dbt package dbt_mleval/: generated from the project (a stale package fails), and its
integration project built with dbt-duckdb and dbt-postgres, the models equal to ``evaluate``
and the seeds' expected values to scikit-learn.

``python -m tests.test_dbt`` rewrites the integration project's seeds."""

from __future__ import annotations

import io
import math
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import mleval_sql as me
from mleval_sql import dbt

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "dbt_mleval"
PROJECT = PACKAGE / "integration_tests"
#: model -> the evaluate request it makes (seed, metrics, options), as its .sql file says
MODELS = {
    "multilabel_metrics": ("preds_multilabel", dict(metrics=["roc_auc", "f1"], by=["model"],
                                                    task="multilabel",
                                                    columns={"weight": "weight"})),
    "binary_metrics": ("clicks", dict(metrics=["roc_auc", "f1", "precision"], by=["model"],
                                      task="binary", threshold=0.4,
                                      columns={"sample": "id", "score": "prob",
                                               "truth": "clicked", "label": None})),
    "multilabel_by_two": ("preds_multilabel", dict(
        metrics=["average_precision", "recall", "log_loss", "subset_accuracy"],
        by=["model", "day"], task="multilabel", average=["macro", "micro"],
        columns={"weight": "weight"})),
    "multiclass_metrics": ("preds_multiclass", dict(
        metrics=["accuracy", "f1", "roc_auc", "log_loss"], task="multiclass",
        average=["macro", "weighted", "none"])),
}


def seeds() -> dict[str, pl.DataFrame]:
    """The integration project's seeds: predictions and scikit-learn's values."""
    rng = np.random.default_rng(48)
    rows = []
    for model in ("a", "b"):
        for sample in range(40):
            for label in ("x", "y", "z"):
                truth = int(rng.random() < 0.4)
                score = round(float(np.clip(0.3 * truth + rng.random() * 0.7, 0, 1)), 2)
                rows.append((model, "d1" if sample < 20 else "d2", sample, label, score, truth,
                             float(1 + sample % 3)))
    multilabel = pl.DataFrame(rows, orient="row", schema=["model", "day", "sample", "label",
                                                          "score", "truth", "weight"])
    clicks = pl.DataFrame({
        "model": ["a"] * 50 + ["b"] * 50, "id": list(range(100)),
        "prob": [round(float(v), 2) for v in rng.random(100)],
        "clicked": [int(v) for v in rng.random(100) < 0.3]})
    mc = []
    for sample in range(30):
        true = int(rng.integers(3))
        raw = rng.random(3) + np.eye(3)[true] * 0.5
        probs = raw / raw.sum()
        for k in range(3):
            mc.append((sample, f"c{k}", round(float(probs[k]), 3), int(k == true)))
    multiclass = pl.DataFrame(mc, orient="row", schema=["sample", "label", "score", "truth"])
    return {"preds_multilabel": multilabel, "clicks": clicks, "preds_multiclass": multiclass,
            "expected": _expected(multilabel, clicks)}


def _expected(multilabel: pl.DataFrame, clicks: pl.DataFrame) -> pl.DataFrame:
    """scikit-learn's values of the models multilabel_metrics and binary_metrics."""
    from sklearn.metrics import f1_score, precision_score, roc_auc_score

    out = []
    for model in ("a", "b"):
        wide = (multilabel.filter(pl.col("model") == model)
                .pivot(on="label", index=["sample", "weight"], values=["score", "truth"])
                .sort("sample"))
        labels = ("x", "y", "z")
        y = wide.select([f"truth_{x}" for x in labels]).to_numpy()
        s = wide.select([f"score_{x}" for x in labels]).to_numpy()
        w = wide["weight"].to_numpy()
        out.append(("multilabel_metrics", model, "roc_auc", "macro", None,
                    roc_auc_score(y, s, average="macro", sample_weight=w)))
        out.append(("multilabel_metrics", model, "f1", "macro", None,
                    f1_score(y, s >= 0.5, average="macro", sample_weight=w)))
        part = clicks.filter(pl.col("model") == model)
        yb, sb = part["clicked"].to_numpy(), part["prob"].to_numpy()
        out.append(("binary_metrics", model, "roc_auc", None, "prob", roc_auc_score(yb, sb)))
        out.append(("binary_metrics", model, "f1", None, "prob", f1_score(yb, sb >= 0.4)))
        out.append(("binary_metrics", model, "precision", None, "prob",
                    precision_score(yb, sb >= 0.4)))
    return pl.DataFrame(out, orient="row", schema=["model_name", "model", "metric", "average",
                                                   "label", "value"])


def _csv(frame: pl.DataFrame) -> str:
    return frame.write_csv(float_precision=17)


def write_seeds() -> None:
    for name, frame in seeds().items():
        (PROJECT / "seeds" / f"{name}.csv").write_text(_csv(frame))


def test_package_is_generated() -> None:
    """The committed macros are what the generator writes today (`python -m mleval_sql.dbt`)."""
    stale = [name for name, text in dbt.files().items()
             if not (PACKAGE / name).exists() or (PACKAGE / name).read_text() != text]
    assert not stale, f"stale dbt package files (run python -m mleval_sql.dbt): {stale}"


def test_seeds_are_current() -> None:
    """The seeds are the data and scikit-learn values this module makes (python -m
    tests.test_dbt rewrites them)."""
    for name, frame in seeds().items():
        committed = pl.read_csv(PROJECT / "seeds" / f"{name}.csv")
        assert committed.columns == frame.columns, name
        for column in frame.columns:
            a, b = committed[column].to_list(), frame[column].to_list()
            if frame[column].dtype == pl.Float64:
                assert all(x == y or (x is not None and math.isclose(x, y, rel_tol=1e-15))
                           for x, y in zip(a, b, strict=True)), (name, column)
            else:
                assert a == b, (name, column)


def _build(tmp_path: Path, profile: str) -> Path:
    """``dbt build`` of a copy of the integration project (nothing written into the
    checkout); the copy's folder."""
    project = tmp_path / "project"
    shutil.copytree(PROJECT, project)
    (tmp_path / "dbt_mleval").mkdir()
    for part in ("dbt_project.yml", "macros"):
        source = PACKAGE / part
        target = tmp_path / "dbt_mleval" / part
        (shutil.copytree if source.is_dir() else shutil.copy)(source, target)
    # the package beside the copy, as ../ is beside the project in the checkout
    (project / "packages.yml").write_text("packages:\n  - local: ../dbt_mleval\n")
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    (profiles / "profiles.yml").write_text(profile)
    dbt_bin = str(Path(sys.executable).parent / "dbt")
    common = ["--project-dir", str(project), "--profiles-dir", str(profiles)]
    env = {"DBT_SEND_ANONYMOUS_USAGE_STATS": "false", "DO_NOT_TRACK": "1",
           "PATH": "/usr/bin:/bin"}
    for command in (["deps"], ["build", "--target-path", str(tmp_path / "target"),
                               "--log-path", str(tmp_path / "logs")]):
        done = subprocess.run([dbt_bin, *command, *common], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=600, check=False)
        assert done.returncode == 0, done.stdout[-6000:] + done.stderr[-3000:]
    return project


def _compare(read: dict[str, pl.DataFrame]) -> None:
    """Each model's rows equal evaluate's of the same seed and request."""
    data = seeds()
    for model, (seed, request) in MODELS.items():
        got = read[model]
        want = me.evaluate(data[seed], **request)
        assert got.columns == want.columns, (model, got.columns, want.columns)
        assert got.height == want.height, (model, got, want)
        keys = [c for c in want.columns if c != "value"]
        got = got.sort(keys, nulls_last=False)
        want = want.sort(keys, nulls_last=False)
        for column in keys:
            assert got[column].cast(pl.String).to_list() == \
                want[column].cast(pl.String).to_list(), (model, column)
        for x, y in zip(got["value"].to_list(), want["value"].to_list(), strict=True):
            assert (x is None and y is None) or math.isclose(x, y, rel_tol=1e-12), (model, x, y)


@pytest.mark.slow
def test_dbt_duckdb(tmp_path: Path) -> None:
    import duckdb

    path = tmp_path / "it.duckdb"
    _build(tmp_path, f"dbt_mleval_integration_tests:\n  target: it\n  outputs:\n    it:\n"
                     f"      type: duckdb\n      path: {path}\n      threads: 1\n")
    with duckdb.connect(str(path), read_only=True) as con:
        read = {m: con.sql(f'select * from "{m}"').pl() for m in MODELS}
    _compare(read)


@pytest.mark.slow
def test_dbt_postgres(tmp_path: Path, postgres: object) -> None:
    server = postgres
    _build(tmp_path, f"dbt_mleval_integration_tests:\n  target: it\n  outputs:\n    it:\n"
                     f"      type: postgres\n      host: {server.socket_dir}\n"
                     f"      port: {server.port}\n      user: {server.user}\n"
                     f"      password: ''\n      dbname: postgres\n      schema: dbt_it\n"
                     f"      threads: 1\n")
    read = {}
    for m in MODELS:
        done = server.psql(f'select * from dbt_it."{m}"')
        assert done.returncode == 0, done.stderr
        read[m] = pl.read_csv(io.StringIO(done.stdout), infer_schema_length=None)
    _compare(read)


if __name__ == "__main__":
    write_seeds()
