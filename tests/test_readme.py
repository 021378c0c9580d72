"""The README's two commands: CI runs the test command verbatim, and the main job works (the
README's other examples run in tests/test_docs.py, with the documentation's)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import polars as pl

from mleval_sql.cli import main
from tests.oracle import expected
from tests.test_metrics import DEFAULT_PARAMS

ROOT = Path(__file__).resolve().parent.parent


def _commands() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", (ROOT / "README.md").read_text(), flags=re.S)
    return [line for block in blocks[:2] for line in block.splitlines()
            if line and not line.startswith("#")]


def test_ci_runs_the_readme_test_command():
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci == _commands()[1]


def test_readme_main_job_runs_on_the_fixture(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    job = _commands()[0].split(".venv/bin/mleval ", 1)[1]
    assert main(shlex.split(job)) == 0
    out = capsys.readouterr().out
    # every printed row holds the oracle's value (the table shows six decimals)
    lake = pl.read_parquet(ROOT / "fixtures" / "lake" / "**" / "*.parquet", hive_partitioning=True)
    cells = [[c.strip() for c in line.strip("│").split("┆")] for line in out.splitlines()
             if "┆" in line and "metric" not in line]
    assert len(cells) == 8
    for model, metric, average, _label, threshold, value in cells:
        want = expected(lake.filter(pl.col("model") == model), "multilabel", metric,
                        ("macro",), [], DEFAULT_PARAMS)["value"].item()
        assert average == ("null" if metric == "subset_accuracy" else "macro")
        assert threshold == "0.5" and float(value) == round(want, 6), (model, metric)
