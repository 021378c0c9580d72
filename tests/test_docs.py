"""The documentation: every Python and shell example of the README and of docs/ runs against the
demo lake, the site builds in strict mode (a broken link or reference fails), and the built site
has what a reader looks for: a page per family listing every metric, the API and command-line
references, a performance page with the benchmark's own charts.

Examples run in one working folder for the whole run, holding ``fixtures/``, ``examples/`` and
``queries/`` (what they write stays out of the checkout). A page's ```python blocks run in order
in one namespace (mktestdocs finds them); each line of its ```bash blocks that starts with
``mleval`` runs in this process (an identical line runs once), and every other line must be one
of the commands listed in ``NOT_RUN`` (installs, the benchmark, the test and docs commands),
which the tests run elsewhere or that take hours. Pages whose examples need a service get a
local one: moto's S3 server holding the demo lake as ``s3://preds/lake``, the tests' PostgreSQL
server in ``DATABASE_URL``, the tests' SparkSession as the active one.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mktestdocs import grab_code_blocks

from mleval_sql import errors
from mleval_sql.cli import build_parser, main
from mleval_sql.registry import METRICS

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]
#: Shell commands shown but not run here: installs, the benchmark (minutes to hours), and the
#: commands of the tests and the site, which CI runs as they are.
NOT_RUN = ("python3 -m venv", "pip install", ".venv/bin/pip install", "bash .ci/",
           "python benchmarks/", ".venv/bin/python -m pytest", "mkdocs ", ".venv/bin/mkdocs ",
           "HYPOTHESIS_PROFILE=")
#: The services each page's examples use.
SERVICES = {"guides/lake.md": ("s3",), "guides/sql.md": ("postgres",),
            "guides/spark.md": ("spark",)}


def _name(page: Path) -> str:
    return page.relative_to(DOCS).as_posix() if page.is_relative_to(DOCS) else page.name


def shell_lines(page: Path) -> list[str]:
    """The commands of a page's ```bash blocks (continuations joined, comments dropped); the
    README's first two blocks (install and CI) are tests/test_readme.py's."""
    blocks = grab_code_blocks(page.read_text(encoding="utf-8"), lang="bash")
    if page.name == "README.md":
        blocks = blocks[2:]
    text = "\n".join(blocks).replace("\\\n", " ")
    return [line.strip() for line in text.splitlines()
            if line.strip() and not line.strip().startswith("#")]


@pytest.fixture(scope="session")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("docs")
    for name in ("examples", "queries"):
        (folder / name).symlink_to(ROOT / name)
    (folder / "fixtures").mkdir()
    for path in (ROOT / "fixtures").iterdir():  # the lake a copy: Spark resolves no links
        if path.name == "lake":
            shutil.copytree(path, folder / "fixtures" / "lake")
        else:
            (folder / "fixtures" / path.name).symlink_to(path)
    return folder


@pytest.fixture(scope="session")
def s3_lake(workdir: Path) -> Iterator[dict[str, str]]:
    """The demo lake in moto's S3 server as s3://preds/lake; the variables that find it."""
    import pyarrow.fs as pafs

    from tests.test_lakes import CREDENTIALS, _start_store

    server, endpoint = _start_store()
    try:
        fs = pafs.S3FileSystem(access_key=CREDENTIALS["AWS_ACCESS_KEY_ID"],
                               secret_key=CREDENTIALS["AWS_SECRET_ACCESS_KEY"],
                               endpoint_override=endpoint.removeprefix("http://"),
                               scheme="http", region="us-east-1", allow_bucket_creation=True)
        fs.create_dir("preds")
        pafs.copy_files(str(ROOT / "fixtures" / "lake"), "preds/lake",
                        destination_filesystem=fs)
        yield {**CREDENTIALS, "AWS_ENDPOINT_URL": endpoint}
    finally:
        server.terminate()
        server.wait(10)


def _environment(request: pytest.FixtureRequest, page: str) -> dict[str, str]:
    """The services of ``page``, started: the variables its examples read."""
    env: dict[str, str] = {}
    for service in SERVICES.get(page, ()):
        if service == "s3":
            env.update(request.getfixturevalue("s3_lake"))
        elif service == "postgres":
            env["DATABASE_URL"] = request.getfixturevalue("postgres").uri
        elif service == "spark":
            request.getfixturevalue("spark")  # the active session: getOrCreate() finds it
    return env


_RAN: dict[str, str] = {}


def run_shell(line: str, capsys: pytest.CaptureFixture[str]) -> str:
    """One command of a page: ``mleval ...`` in this process (once per distinct line); what
    it printed."""
    if line.startswith(NOT_RUN):
        return ""
    assert line.startswith("mleval "), f"an example that no test runs: {line!r}"
    if line not in _RAN:
        capsys.readouterr()
        code = main(shlex.split(line)[1:])
        out, err = capsys.readouterr()
        assert code == 0, f"{line}\n{err}"
        _RAN[line] = out + err
    return _RAN[line]


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_examples_run(page: Path, workdir: Path, request: pytest.FixtureRequest,
                      monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]):
    name = _name(page)
    for key, value in _environment(request, name).items():
        monkeypatch.setenv(key, value)
    # Spark's JVM resolves relative paths against the folder it started in (the checkout):
    # the Spark page runs there (it writes nothing)
    monkeypatch.chdir(ROOT if "spark" in SERVICES.get(name, ()) else workdir)
    monkeypatch.setattr(errors, "_NOTED", set())
    monkeypatch.setenv("MPLBACKEND", "Agg")
    namespace: dict[str, Any] = {"__name__": "__main__"}
    for i, block in enumerate(grab_code_blocks(page.read_text(encoding="utf-8"))):
        try:
            exec(compile(block, f"{name}[python {i}]", "exec"), namespace)
        except Exception as error:
            raise AssertionError(f"{name}: python block {i} failed:\n{block}") from error
    for line in shell_lines(page):
        run_shell(line, capsys)


def test_every_shell_example_is_run_or_listed():
    """Each shell line of the pages is an ``mleval`` command or a command listed as not run,
    and the listed ones are few."""
    lines = [line for page in PAGES for line in shell_lines(page)]
    assert sum(line.startswith("mleval ") for line in lines) >= 20
    skipped = [line for line in lines if line.startswith(NOT_RUN)]
    assert all(line.startswith(("mleval ", *NOT_RUN)) for line in lines)
    assert len(skipped) <= 12, skipped


def test_the_click_log_examples(workdir: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]):
    """The examples on fixtures/clicks.csv, a binary log in CSV without a label column: the
    one label is named after the score column (``prob``), or the plot was written."""
    monkeypatch.chdir(workdir)
    lines = [line for page in PAGES for line in shell_lines(page)
             if line.startswith("mleval ") and "fixtures/clicks.csv" in line]
    assert len(lines) >= 3
    for line in lines:
        out = run_shell(line, capsys)
        assert "prob" in out or "wrote" in out, line


# -- the site ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``mkdocs build --strict`` of the checkout: any warning (a broken link, an anchor or
    reference that does not exist) fails it."""
    folder = tmp_path_factory.mktemp("site")
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet",
                           "--site-dir", str(folder)], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"}, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder


def _text(path: Path) -> str:
    return re.sub(r"<[^>]+>", " ", path.read_text(encoding="utf-8"))


def test_a_page_per_family_lists_every_metric(site: Path):
    sys.path.insert(0, str(DOCS))
    try:
        import hooks
    finally:
        sys.path.remove(str(DOCS))
    listed: set[str] = set()
    for family in hooks.documented_families():
        html = (site / "metrics" / hooks.family_slug(family) / "index.html").read_text()
        names = {m.name for m in hooks.family_metrics(family)}
        assert all(f'id="{name}"' in html for name in names), family.name
        listed |= names
    assert listed == set(METRICS)
    index = _text(site / "metrics" / "index.html")
    assert all(name in index for name in METRICS)


def test_the_api_page_documents_the_functions(site: Path):
    html = (site / "reference" / "api" / "index.html").read_text(encoding="utf-8")
    for name in ("mleval_sql.evaluate", "mleval_sql.curve", "mleval_sql.check",
                 "mleval_sql.compare", "mleval_sql.slices", "mleval_sql.statement.sql",
                 "mleval_sql.reporting.report"):
        assert f'id="{name}"' in html, name
    assert "Metrics of the predictions in" in html  # evaluate's docstring


def test_the_cli_page_has_every_flag_of_every_subcommand(site: Path):
    text = _text(site / "reference" / "cli" / "index.html")
    parser = build_parser()
    (commands,) = [a for a in parser._actions if hasattr(a, "choices") and
                   isinstance(a.choices, dict)]
    assert set(commands.choices) >= {"evaluate", "curve", "compare", "slices", "check",
                                      "metrics", "sql", "report"}
    for name, sub in commands.choices.items():
        assert f"mleval {name}" in text
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in text, (name, flag)


def test_the_performance_page_shows_the_benchmark_charts(site: Path):
    html = (site / "performance" / "index.html").read_text(encoding="utf-8")
    charts = re.findall(r'<img[^>]+src="([^"]+\.svg)"', html)
    assert charts
    for src in charts:
        chart = (site / "performance" / src).resolve()
        assert chart.is_file(), src
        assert "benchmarks/charts.py" in chart.read_text(encoding="utf-8")  # drawn by it


def test_the_readme_is_short_and_its_figure_current():
    """At most 150 lines; its headline chart is the benchmark's, and its sentence names the
    date of the results the charts were drawn from (redrawn charts: the sentence follows)."""
    import json

    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 150
    assert "](docs/performance/time.svg)" in readme
    results = json.loads((DOCS / "performance" / "results.json").read_text(encoding="utf-8"))
    assert results["date"] in readme


def test_every_scikit_learn_function_named_exists():
    import importlib

    for metric in METRICS.values():
        if metric.sklearn is None:
            continue
        path = metric.sklearn.split()[0].rstrip(":")
        module, _, function = path.rpartition(".")
        assert callable(getattr(importlib.import_module(module), function)), metric.name


# -- the benchmark's charts --------------------------------------------------------------------

def _module(path: Path, name: str) -> Any:
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_charts_read_what_the_benchmark_prints(tmp_path: Path):
    """benchmarks/charts.py reads the tables benchmarks/lake.py prints (its report(), with one
    round and with medians) and draws dated, machine-labelled charts from them."""
    lake = _module(ROOT / "benchmarks" / "lake.py", "lake_benchmark")
    charts = _module(ROOT / "benchmarks" / "charts.py", "benchmark_charts")
    steps = ["exact-duckdb", "exact-polars", "sklearn", "scan"]
    printed = []
    for samples, runs in ((100_000, 1), (300_000, 3)):
        rows = [{"step": step, "seconds": 2.0 + i, "cpu_seconds": 1.5 + i,
                 "peak_rss_mib": 100.0 * (i + 1), "runs": runs, "wall_range": (1.9 + i, 2.5 + i),
                 **({"max_rel_diff": 1e-14} if step.startswith("exact") else {})}
                for i, step in enumerate(steps)]
        printed.append(lake.report(rows, samples))
    runs = charts.parse_output("\n\n".join(printed))
    assert [(r["rows"], r["samples"], r["rounds"]) for r in runs] == \
        [(1_000_000, 100_000, 1), (3_000_000, 300_000, 3)]
    assert [s["step"] for s in runs[1]["steps"]] == steps
    assert runs[1]["steps"][0] == {"step": "exact-duckdb", "wall_s": 2.0, "cpu_s": 1.5,
                                   "peak_rss_mib": 100.0, "max_rel_diff": 1e-14,
                                   "wall_min": 1.9, "wall_max": 2.5}
    doc = charts.results(runs, date="2026-11-25", machine="a test machine, 2 cores",
                         command="--samples 300_000")
    paths = charts.draw(doc, tmp_path)
    assert [p.name for p in paths] == ["results.json", "time.svg", "memory.svg", "steps.svg"]
    for chart in paths[1:]:
        svg = chart.read_text(encoding="utf-8")
        assert "benchmarks/charts.py" in svg and "2026-11-25" in svg
        assert "a test machine, 2 cores" in svg
