"""Benchmark: the weakest slices of a lake of binary predictions with six categorical columns,
by mleval_sql on each engine, by the ``sliceline`` package on the same rows, and beside one
``evaluate`` of the same rows, in one run.

    python benchmarks/slices.py                            # 10M rows
    python benchmarks/slices.py --rows 1_000_000 --repeat 3

Every step runs in its own child process; the parent reports wall time, CPU time and peak RSS
(from ``wait4``), and checks the slices by error rate are the package's (the same slices in
the same order, scores within 1e-9). Steps:

- ``evaluate-<engine>``: ROC AUC of all rows, one request (the unit of cost);
- ``error-<engine>``: the exact top 10 slices by error rate at 0.5 (SliceLine's score);
- ``auc-<engine>``: the 10 slices of least ROC AUC;
- ``sliceline``: the package's ``Slicefinder`` on the same rows and errors, after reading the
  columns with pyarrow (its one-hot matrix must fit in memory).

The slice columns have 3, 5, 8, 12, 20 and 50 values; ``max_level=2``, ``min_support`` 0.1% of
the rows, ``alpha=0.95``. Two weaknesses are planted: random scores where ``c1 = 1`` and
``c2 = 3`` (a poor error rate and AUC), and in ``c4 = 7`` the scores ranked backwards on each
side of 0.5 (an ordinary error rate, a poor AUC).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

OVER = ["c1", "c2", "c3", "c4", "c5", "c6"]
CARDINALITIES = [3, 5, 8, 12, 20, 50]
FILES = 10
TOP = 10
ALPHA = 0.95
STEPS = ("evaluate-duckdb", "evaluate-polars", "error-duckdb", "error-polars", "auc-duckdb",
         "auc-polars", "sliceline")


def make_lake(folder: Path, rows: int, seed: int = 0) -> Path:
    """``rows`` binary predictions in ``FILES`` parquet files (made once per size)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    lake, done = folder / f"slices-{rows}", folder / f"slices-{rows}.done"
    if done.exists():
        return lake
    lake.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    per = -(-rows // FILES)
    for part, start in enumerate(range(0, rows, per)):
        n = min(per, rows - start)
        codes = [rng.integers(0, k, n, dtype=np.int16) for k in CARDINALITIES]
        truth = rng.random(n) < 0.3
        score = np.clip(rng.normal(0.3 + 0.4 * truth, 0.15), 0, 1)
        score = np.where((codes[0] == 1) & (codes[1] == 3), rng.random(n), score)
        backwards = codes[3] == 7
        above = score >= 0.5
        score = np.where(backwards & above, 1.5 - score, score)
        score = np.where(backwards & ~above, 0.5 - score, score)
        columns = {f"c{i + 1}": pa.array([f"v{c:02d}" for c in range(k)]).take(codes[i])
                   for i, k in enumerate(CARDINALITIES)}
        table = pa.table({"sample": np.arange(start, start + n), "score": score,
                          "truth": truth, **columns})
        pq.write_table(table, lake / f"part-{part}.parquet")
    done.touch()
    return lake


def run_step(step: str, lake: Path, rows: int) -> dict:
    """Run one step here; return its result as JSON-able data."""
    min_support = max(rows // 1000, 1)
    if step == "sliceline":
        return _sliceline(lake, min_support)
    import mleval_sql as me

    kind, engine = step.split("-")
    source = str(lake)
    if kind == "evaluate":
        value = me.evaluate(source, "roc_auc", task="binary", engine=engine)["value"].item()
        return {"roc_auc": value}
    metric = "error_rate" if kind == "error" else "roc_auc"
    found = me.slices(source, metric, over=OVER, max_level=2, min_support=min_support,
                      top=TOP, alpha=ALPHA, task="binary", engine=engine)
    return {"slices": [[r[c] for c in OVER] for r in found.iter_rows(named=True)],
            "scores": found["score" if kind == "error" else "value"].to_list()}


def _sliceline(lake: Path, min_support: int) -> dict:
    import warnings

    import pyarrow.dataset as ds

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the package warns that numba is not installed
        from sliceline.slicefinder import Slicefinder

        table = ds.dataset(lake, format="parquet").to_table(columns=[*OVER, "score", "truth"])
        frame = table.to_pandas()
        errors = ((frame["score"] >= 0.5) != frame["truth"]).to_numpy(dtype=float)
        finder = Slicefinder(alpha=ALPHA, k=TOP, max_l=2, min_sup=min_support, verbose=False)
        finder.fit(frame[OVER], errors)
    return {"slices": [list(s) for s in finder.top_slices_],
            "scores": [s["slice_score"] for s in finder.top_slices_statistics_]}


def measure(step: str, lake: Path, rows: int) -> dict:
    """Run ``step`` in a child; its wall time, CPU time, peak RSS and result."""
    cmd = [sys.executable, __file__, "--child", step, "--lake", str(lake), "--rows", str(rows)]
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    output = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    if status != 0 and step == "sliceline":  # its one-hot matrix and pair products: memory
        print(f"sliceline failed (status {status}, peak RSS "
              f"{usage.ru_maxrss / 2**20:.1f} GiB): not measured at this size", flush=True)
        return {}
    if status != 0:
        raise SystemExit(f"step {step} failed (status {status})")
    return {"step": step, "seconds": time.perf_counter() - start,
            "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024, "result": json.loads(output)}


def check(runs: dict[str, list[dict]]) -> None:
    """The slices by error rate are the package's, in its order, scores within 1e-9; every
    engine finds the same slices by AUC."""
    oracle = runs.get("sliceline", [{}])[0].get("result")
    for step, found in runs.items():
        for run in found:
            got = run["result"]
            if step.startswith("error") and oracle:
                same = got["slices"] == oracle["slices"] and all(
                    abs(a - b) <= 1e-9 * max(abs(b), 1) for a, b in
                    zip(got["scores"], oracle["scores"], strict=True))
                if not same:
                    raise SystemExit(f"{step} differs from sliceline:\n{got}\n{oracle}")
            if step.startswith("auc"):
                first = runs["auc-duckdb" if "auc-duckdb" in runs else step][0]["result"]
                if got["slices"] != first["slices"]:
                    raise SystemExit(f"{step} finds other slices than {first}")


def report(runs: dict[str, list[dict]], rows: int) -> str:
    medians = {step: statistics.median(r["seconds"] for r in found)
               for step, found in runs.items()}
    lines = [f"rows: {rows:,} (binary, columns of {CARDINALITIES} values), max_level=2, "
             f"top {TOP}, median of {len(next(iter(runs.values())))}", "",
             "| step | wall s | CPU s | peak RSS MiB | / evaluate (same engine) "
             "| sliceline / step |",
             "|---|---:|---:|---:|---:|---:|"]
    for step, found in runs.items():
        engine = step.split("-")[-1]
        unit = medians.get(f"evaluate-{engine}")
        line = medians.get("sliceline")
        lines.append(
            f"| {step} | {medians[step]:.1f} "
            f"| {statistics.median(r['cpu_seconds'] for r in found):.1f} "
            f"| {max(r['peak_rss_mib'] for r in found):.0f} "
            f"| {f'{medians[step] / unit:.2f}x' if unit and step != 'sliceline' else '-'} "
            f"| {f'{line / medians[step]:.2f}x' if line else '-'} |")
    first = runs.get("auc-duckdb", runs.get("auc-polars"))
    if first:
        lines += ["", "by ROC AUC, worst first: " + "; ".join(
            " & ".join(f"{c}={v}" for c, v in zip(OVER, s, strict=True) if v is not None)
            for s in first[0]["result"]["slices"][:3])]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda s: int(s.replace("_", "")), default=10_000_000)
    parser.add_argument("--folder", type=Path, default=Path("/tmp/mleval-bench"))
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--repeat", type=int, default=1, help="rounds of every step (medians)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--lake", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_step(args.child, Path(args.lake), args.rows)))
        return
    steps = args.steps.split(",")
    unknown = set(steps) - set(STEPS)
    if unknown:
        parser.error(f"unknown steps {sorted(unknown)}; known: {', '.join(STEPS)}")
    lake = make_lake(args.folder, args.rows)
    runs: dict[str, list[dict]] = {}
    for _ in range(args.repeat):
        for step in steps:
            run = measure(step, lake, args.rows)
            if run:
                runs.setdefault(step, []).append(run)
    check(runs)
    print(report(runs, args.rows), flush=True)


if __name__ == "__main__":
    main()
