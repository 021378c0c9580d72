"""The built wheel carries queries/ inside the package, and the installed package reads it."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from mleval_sql.registry import STEPS

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out),
                    str(ROOT)], check=True, capture_output=True)
    (built,) = out.glob("mleval_sql-*.whl")
    return built


@pytest.mark.slow
def test_wheel_ships_every_query(wheel: Path):
    names = zipfile.ZipFile(wheel).namelist()
    assert {f"mleval_sql/queries/{s}.sql" for s in STEPS} <= set(names)


@pytest.mark.slow
def test_wheel_ships_the_report_templates(wheel: Path):
    names = set(zipfile.ZipFile(wheel).namelist())
    templates = ROOT / "mleval_sql" / "reporting" / "templates"
    shipped = {f"mleval_sql/reporting/templates/{p.name}" for p in templates.iterdir()}
    assert shipped and shipped <= names


@pytest.mark.slow
def test_installed_package_loads_its_own_queries(wheel: Path, tmp_path: Path):
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    code = ("import sys; sys.path.insert(0, sys.argv[1]); from mleval_sql import queries; "
            "print(queries.folder()); print(queries.load('threshold_counts').splitlines()[0])")
    done = subprocess.run([sys.executable, "-c", code, str(site)], cwd=tmp_path, check=True,
                          capture_output=True, text=True)
    folder, first_line = done.stdout.splitlines()
    assert Path(folder) == site / "mleval_sql" / "queries"
    assert first_line.startswith("-- threshold_counts:")


def test_import_leaves_pandas_and_arrow_datasets_alone():
    """pyarrow.dataset imports pandas, half a second of every run's start: imported only where
    an Arrow dataset is read (Delta, Iceberg, object storage for DuckDB), never by the package."""
    code = ("import sys, mleval_sql; "
            "print(sorted({'pyarrow.dataset', 'pandas'} & set(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True,
                         text=True).stdout
    assert out.strip() == "[]"


def test_every_import_of_the_package_is_a_declared_dependency():
    """A module the package imports comes with ``pip install mleval_sql`` or with the extra
    that needs it (not only with the test extra): a user's install has it."""
    import ast
    import importlib.metadata
    import re

    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = {k: v for k, v in project["optional-dependencies"].items()
              if k not in ("test", "docs")}
    declared = {_distribution(r) for r in project["dependencies"]}
    declared |= {_distribution(r) for rs in extras.values() for r in rs}
    imported: dict[str, set[str]] = {}
    for path in (ROOT / "mleval_sql").rglob("*.py"):
        tree = ast.parse(path.read_text())
        typing_only = {id(n) for block in ast.walk(tree) if isinstance(block, ast.If)
                       and ast.unparse(block.test) == "TYPE_CHECKING"
                       for stmt in block.body for n in ast.walk(stmt)}
        for node in ast.walk(tree):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and not node.level
                     and node.module else [])
            for name in names if id(node) not in typing_only else []:
                imported.setdefault(name.split(".")[0], set()).add(path.name)
    providers = importlib.metadata.packages_distributions()
    third_party = {m: files for m, files in imported.items()
                   if m not in sys.stdlib_module_names and m != "mleval_sql"}
    undeclared = {m: sorted(files) for m, files in third_party.items()
                  if not {re.sub(r"[-_.]+", "-", d).lower() for d in providers.get(m, [m])}
                  & declared}
    assert third_party and not undeclared, undeclared


def _distribution(requirement: str) -> str:
    """``"pyiceberg[pyarrow]>=0.9"`` -> ``"pyiceberg"`` (normalised as pip does)."""
    import re

    return re.sub(r"[-_.]+", "-", re.match(r"[A-Za-z0-9_.-]+", requirement).group()).lower()
