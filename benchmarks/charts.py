"""Charts of the lake benchmark (``benchmarks/lake.py``) for the documentation: its results as
JSON and as SVG charts, each dated and labelled with the machine that ran it.

    python benchmarks/charts.py run -- --samples 3_000_000 --scaling 0.3334,1 --repeat 3
    python benchmarks/charts.py draw docs/performance/results.json
    python benchmarks/charts.py draw saved-output.txt --date 2026-11-25 --machine "..."

``run`` runs ``benchmarks/lake.py`` with the arguments after ``--`` (its report goes to the
terminal as usual), reads the tables it prints, writes them to ``results.json`` and draws the
charts, all in ``--output`` (default ``docs/performance``). ``draw`` draws them again from a
``results.json``, or from the saved output of an earlier ``lake.py`` run (then ``--date``,
``--machine`` and ``--command`` say when, where and how it ran; by default today, this machine
and nothing). Charts:

- ``time.svg``: wall time of the exact request (checks, ROC AUC, average precision, P/R/F1 per
  segment and label) with no engine named and on each engine, of scikit-learn and of a plain
  scan, by rows;
- ``memory.svg``: their peak memory (RSS), by rows;
- ``steps.svg``: every step at the largest size, against scikit-learn's time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
DEFAULT_OUTPUT = HERE.parent / "docs" / "performance"
#: The steps of the time and memory charts, in their order, with their legends.
HEADLINE = {"exact-default": "mleval_sql, no engine named",
            "exact-polars": "mleval_sql, polars", "exact-duckdb": "mleval_sql, DuckDB",
            "sklearn": "scikit-learn (after loading with pyarrow)", "scan": "DuckDB scan (floor)"}
COLORS = {"exact-default": "#1b2f66", "exact-polars": "#3b5ba9", "exact-duckdb": "#e0a526",
          "sklearn": "#8c8c8c", "scan": "#c9c9c9"}
CREATOR = "benchmarks/charts.py"

_ROWS = re.compile(r"^rows: ([\d,]+) \(([\d,]+) samples")


def parse_output(text: str) -> list[dict[str, Any]]:
    """The runs in ``lake.py``'s printed report: per size, its rows, samples, rounds and a
    row per step (``step, wall_s, cpu_s, peak_rss_mib``, ``max_rel_diff`` where checked,
    ``wall_min`` and ``wall_max`` with several rounds)."""
    runs: list[dict[str, Any]] = []
    header: list[str] = []
    for line in text.splitlines():
        found = _ROWS.match(line)
        if found:
            rounds = re.search(r"median of (\d+) runs", line)
            runs.append({"rows": int(found.group(1).replace(",", "")),
                         "samples": int(found.group(2).replace(",", "")),
                         "rounds": int(rounds.group(1)) if rounds else 1, "steps": []})
        elif line.startswith("| step |"):
            header = [c.strip() for c in line.strip().strip("|").split("|")]
        elif line.startswith("| ") and runs and header and not line.startswith("|---"):
            cells = dict(zip(header, (c.strip() for c in line.strip().strip("|").split("|")),
                             strict=False))
            row: dict[str, Any] = {"step": cells["step"], "wall_s": float(cells["wall s"]),
                                   "cpu_s": float(cells["CPU s"]),
                                   "peak_rss_mib": float(cells["peak RSS MiB"]),
                                   "max_rel_diff": None if cells["max rel diff"] == "-"
                                   else float(cells["max rel diff"])}
            if "wall s, min-max" in cells:
                low, high = cells["wall s, min-max"].split("-")
                row.update(wall_min=float(low), wall_max=float(high))
            runs[-1]["steps"].append(row)
    if not runs or not all(r["steps"] for r in runs):
        raise SystemExit("no benchmark tables found (the output of benchmarks/lake.py)")
    return runs


def this_machine() -> str:
    """A one-line description: CPU model, cores, memory, OS."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError, AttributeError):
        pass
    return f"{model}, {os.cpu_count()} cores{memory}, {platform.system()}"


def results(runs: list[dict[str, Any]], *, date: str, machine: str,
            command: str) -> dict[str, Any]:
    return {"date": date, "machine": machine, "command": command, "runs": runs}


# -- the charts --------------------------------------------------------------------------------

def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"svg.hashsalt": "mleval-benchmark", "svg.fonttype": "none",
                         "font.size": 9})
    return plt


def _label(doc: dict[str, Any]) -> str:
    command = f"\npython benchmarks/lake.py {doc['command']}" if doc.get("command") else ""
    return f"{doc['date']} · {doc['machine']}{command}"


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def _save(fig: Any, path: Path, doc: dict[str, Any], title: str) -> None:
    fig.text(0.01, 0.01, _label(doc), fontsize=7, color="#555555")
    fig.savefig(path, format="svg", metadata={
        "Title": title, "Creator": CREATOR, "Date": doc["date"],
        "Description": _label(doc).replace("\n", "; ")})


def _rows(n: int) -> str:
    return f"{n / 1e6:.0f}M rows" if n >= 1e7 else f"{n / 1e6:.2g}M rows"


def _bars(doc: dict[str, Any], key: str, ylabel: str, title: str, path: Path) -> None:
    plt = _pyplot()
    runs = sorted(doc["runs"], key=lambda r: r["rows"])
    steps = [s for s in HEADLINE if any(s == r["step"] for run in runs for r in run["steps"])]
    fig, ax = plt.subplots(figsize=(7, 3.6))
    width = 0.8 / max(len(steps), 1)
    for j, step in enumerate(steps):
        xs, heights, errors = [], [], [[], []]
        for i, run in enumerate(runs):
            row = next((r for r in run["steps"] if r["step"] == step), None)
            if row is None:
                continue
            xs.append(i + (j - (len(steps) - 1) / 2) * width)
            heights.append(row[key])
            low = row.get("wall_min", row[key]) if key == "wall_s" else row[key]
            high = row.get("wall_max", row[key]) if key == "wall_s" else row[key]
            errors[0].append(row[key] - low)
            errors[1].append(high - row[key])
        bars = ax.bar(xs, heights, width * 0.95, label=HEADLINE[step], color=COLORS[step],
                      yerr=errors if key == "wall_s" and any(map(any, errors)) else None,
                      capsize=2, error_kw={"elinewidth": 0.8})
        ax.bar_label(bars, [_number(h) for h in heights], fontsize=7, padding=2)
    ax.set_xticks(range(len(runs)), [_rows(r["rows"]) for r in runs])
    ax.set_ylabel(ylabel)
    rounds = runs[0].get("rounds", 1)
    ax.set_title(title + (f" (median of {rounds} runs, range as bars)" if rounds > 1 and
                          key == "wall_s" else ""), fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    ax.legend(frameon=False, fontsize=8)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    _save(fig, path, doc, title)
    plt.close(fig)


def _steps(doc: dict[str, Any], path: Path) -> None:
    plt = _pyplot()
    run = max(doc["runs"], key=lambda r: r["rows"])
    rows = list(run["steps"])
    sklearn = next((r["wall_s"] for r in rows if r["step"] == "sklearn"), None)
    fig, ax = plt.subplots(figsize=(7, 0.28 * len(rows) + 1.5))
    names = [r["step"] for r in rows][::-1]
    values = [r["wall_s"] for r in rows][::-1]
    colors = [COLORS.get(n, "#6f9bd1" if n.endswith("polars") else "#f0c36a"
                         if n.endswith("duckdb") else "#b0b0b0") for n in names]
    bars = ax.barh(names, values, color=colors)
    if sklearn:
        ax.axvline(sklearn, color="#444444", linewidth=0.8, linestyle="--")
        ax.bar_label(bars, [f"{_number(v)} s ({sklearn / v:.2g}x)" if v else "" for v in values],
                     fontsize=7, padding=2)
    ax.set_xlabel("wall seconds (in brackets: scikit-learn's time / the step's)")
    ax.set_title(f"Every step at {_rows(run['rows'])}", fontsize=10)
    ax.spines[["top", "right"]].set_visible(False)
    fig.tight_layout(rect=(0, 0.09, 1, 1))
    _save(fig, path, doc, f"Every step at {_rows(run['rows'])}")
    plt.close(fig)


def draw(doc: dict[str, Any], output: Path) -> list[Path]:
    """``results.json`` and the charts of ``doc`` in ``output``; the paths written."""
    output.mkdir(parents=True, exist_ok=True)
    paths = [output / "results.json", output / "time.svg", output / "memory.svg",
             output / "steps.svg"]
    paths[0].write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    _bars(doc, "wall_s", "wall seconds", "Exact request: wall time", paths[1])
    _bars(doc, "peak_rss_mib", "peak RSS, MiB", "Exact request: peak memory", paths[2])
    _steps(doc, paths[3])
    return paths


# -- the command -------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run benchmarks/lake.py, then draw its results")
    run.add_argument("lake_args", nargs=argparse.REMAINDER,
                     help="benchmarks/lake.py's arguments, after --")
    again = commands.add_parser("draw", help="draw from results.json or a saved output")
    again.add_argument("source", type=Path)
    again.add_argument("--date", help="of a saved output's run (default: today)")
    again.add_argument("--machine", help="of a saved output's run (default: this machine)")
    again.add_argument("--command", default="", help="a saved output's lake.py arguments")
    for cmd in (run, again):
        cmd.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    if args.command == "run":
        lake_args = [a for a in args.lake_args if a != "--"]
        done = subprocess.run([sys.executable, str(HERE / "lake.py"), *lake_args],
                              stdout=subprocess.PIPE, text=True, check=True)
        sys.stdout.write(done.stdout)
        doc = results(parse_output(done.stdout), date=dt.date.today().isoformat(),
                      machine=this_machine(), command=" ".join(lake_args))
    elif args.source.suffix == ".json":
        doc = json.loads(args.source.read_text(encoding="utf-8"))
    else:
        doc = results(parse_output(args.source.read_text(encoding="utf-8")),
                      date=args.date or dt.date.today().isoformat(),
                      machine=args.machine or this_machine(), command=args.command)
    for path in draw(doc, args.output):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
