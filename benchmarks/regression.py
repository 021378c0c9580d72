"""Benchmark: the median absolute error of a regression lake against the mean absolute error of
the same rows, by mleval_sql on each engine under a memory budget and by scikit-learn on the
same data, in one run.

    python benchmarks/regression.py                          # 30M rows, memory_limit 1GB
    python benchmarks/regression.py --rows 1_000_000 --repeat 5
    python benchmarks/regression.py --rows 10_000_000 --steps mae-duckdb,median-duckdb

The lake (``segment=sK/part-N.parquet``, 8 segments): ``--rows`` rows of ``sample, label,
score, truth, weight``, each sample 2 outputs (labels ``y0``, ``y1``); the truths are prices
to the cent (they tie), the predictions a model's, not rounded (the errors are all but
distinct: the median sorts as many values as there are rows), and each sample weighs 1 / a
sampling rate drawn in [0.05, 1] (fractional weights: the weighted median, not ``np.median``,
is what is exact). Steps, each in a child process (wall time, CPU time and peak
RSS from ``wait4``, as benchmarks/lake.py measures them), ``--repeat`` rounds of each (medians
reported):

- ``mae-<engine>``: ``me.evaluate(lake, "mae", by="segment", average=["none", "macro"],
  memory_limit=...)``: one pass of sums;
- ``median-<engine>``: the same request of ``median_absolute_error``: an exact weighted median
  per (segment, output), one sort of each output's errors;
- ``d2-<engine>``: ``d2_absolute_error``: the sums and the truths' weighted median (and the
  sum of the absolute deviations from it);
- ``sklearn``: ``median_absolute_error``, ``mean_absolute_error`` and
  ``d2_absolute_error_score`` with ``sample_weight`` per (segment, output), after loading the
  columns with pyarrow (one segment at a time), and their means over the outputs.

Every mleval step's numbers are compared with scikit-learn's (the largest relative difference
is printed), and each engine's median and D² time is given over its mae time (the issue's
figure: the median within 2x the mean's time, same run).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lake import compiled, in_child  # a sibling script, not a package

SEGMENTS = 8
LABELS = 2
ENGINES = ("polars", "duckdb")
KINDS = {"mae": "mae", "median": "median_absolute_error", "d2": "d2_absolute_error"}
STEPS = (*(f"{kind}-{engine}" for engine in ENGINES for kind in KINDS), "sklearn")
ROWS_PER_FILE = 1_000_000


# -- the lake ----------------------------------------------------------------------------------

def make_lake(folder: Path, rows: int, seed: int = 0) -> Path:
    """``folder/segment=sK/part-N.parquet``: ``rows`` rows (``rows // 2`` samples x 2 outputs),
    8 segments; written once (``_complete`` marks a whole lake)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = folder / "_complete"
    if done.exists():
        return folder
    rng = np.random.default_rng(seed)
    labels = pa.array([f"y{j}" for j in range(LABELS)]).dictionary_encode().dictionary
    samples = rows // LABELS
    per_file = ROWS_PER_FILE // LABELS
    for start in range(0, samples, per_file):
        n = min(per_file, samples - start)
        segment = rng.integers(0, SEGMENTS, size=n)
        # a price per output (to the cent: truths tie) and a model's prediction off it by a
        # relative error and noise (not rounded: the errors are all but distinct)
        truth = np.round(rng.lognormal(3.0, 1.0, size=(n, LABELS)), 2)
        score = (truth * rng.normal(1.0, 0.2, size=(n, LABELS))
                 + rng.normal(0.0, 1.0, size=(n, LABELS)))
        weight = 1.0 / rng.uniform(0.05, 1.0, size=n)
        sample = np.arange(start, start + n, dtype=np.int64)
        for s in range(SEGMENTS):
            kept = segment == s
            k = int(kept.sum())
            out = folder / f"segment=s{s}"
            out.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({
                "sample": np.repeat(sample[kept], LABELS),
                "label": pa.DictionaryArray.from_arrays(
                    np.tile(np.arange(LABELS, dtype=np.int32), k), labels),
                "score": score[kept].ravel(),
                "truth": truth[kept].ravel(),
                "weight": np.repeat(weight[kept], LABELS),
            }), out / f"part-{start // per_file:05d}.parquet")
    done.touch()
    return folder


# -- the steps (in a child) ---------------------------------------------------------------------

def run_step(step: str, lake: Path, memory_limit: str | None) -> dict[str, float]:
    """Run one step here; its numbers by ``segment|metric|average|label``."""
    if step == "sklearn":
        return _sklearn(lake)
    import mleval_sql as me

    kind, engine = step.split("-")
    frame = me.evaluate(str(lake), KINDS[kind], by="segment", task="regression",
                        engine=engine, average=["none", "macro"], memory_limit=memory_limit)
    return {_key(r): r["value"] for r in frame.iter_rows(named=True)}


def _key(row: dict[str, Any]) -> str:
    return "|".join(str(row[c]) for c in ("segment", "metric", "average", "label"))


def _sklearn(lake: Path) -> dict[str, float]:
    """scikit-learn's numbers of every step's metric per (segment, output), and their means over
    the outputs (``multioutput="uniform_average"``)."""
    import numpy as np
    import pyarrow.dataset as pads
    from sklearn import metrics as skm

    functions = {"median_absolute_error": skm.median_absolute_error,
                 "mae": skm.mean_absolute_error, "d2_absolute_error": skm.d2_absolute_error_score}
    dataset = pads.dataset(lake, format="parquet", partitioning="hive")
    out: dict[str, float] = {}
    for s in range(SEGMENTS):
        table = dataset.to_table(columns=["label", "score", "truth", "weight"],
                                 filter=pads.field("segment") == f"s{s}")
        label = table["label"].combine_chunks()
        codes, names = label.indices.to_numpy(), label.dictionary.to_pylist()
        score, truth = table["score"].to_numpy(), table["truth"].to_numpy()
        weight = table["weight"].to_numpy()
        for metric, function in functions.items():
            values = []
            for j, name in enumerate(names):
                rows = codes == j
                values.append(float(function(truth[rows], score[rows],
                                             sample_weight=weight[rows])))
                out[f"s{s}|{metric}|None|{name}"] = values[-1]
            out[f"s{s}|{metric}|macro|None"] = float(np.mean(values))
    return out


# -- the parent ---------------------------------------------------------------------------------

def measure(step: str, lake: Path, memory_limit: str | None) -> dict:
    cmd = [sys.executable, __file__, "--child", step, "--lake", str(lake)]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    run = in_child(step, cmd)
    return {**run, "step": step, "numbers": json.loads(run.pop("output"))}


def median_run(runs: list[dict]) -> dict:
    """A step's rounds as one: median wall and CPU time, the range of wall times, the largest
    peak RSS, every round's numbers."""
    walls = sorted(r["seconds"] for r in runs)
    return {"step": runs[0]["step"], "seconds": statistics.median(walls),
            "wall_range": (walls[0], walls[-1]),
            "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs),
            "numbers": [r["numbers"] for r in runs], "runs": len(runs)}


def agreement(numbers: dict[str, float], oracle: dict[str, float]) -> float:
    """The largest relative difference on the numbers both computed (every one of the step's
    must be scikit-learn's too)."""
    missing = set(numbers) - set(oracle)
    if missing or not numbers:
        raise SystemExit(f"numbers scikit-learn did not compute: {sorted(missing)[:3]}")
    return max(abs(numbers[k] - oracle[k]) / max(abs(oracle[k]), 1e-300) for k in numbers)


def report(rows: list[dict], lake_rows: int, memory_limit: str | None,
           load: tuple[float, float]) -> str:
    by_step = {r["step"]: r for r in rows}
    lines = [f"rows: {lake_rows:,} ({lake_rows // LABELS:,} samples x {LABELS} outputs, "
             f"{SEGMENTS} segments, weighted); memory_limit {memory_limit}; median of "
             f"{rows[0]['runs']} runs; load average {load[0]:.2f} before, {load[1]:.2f} after",
             "", "| step | wall s | wall s, min-max | CPU s | peak RSS MiB | step / mae "
             "| max rel diff vs sklearn |", "|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        engine = r["step"].partition("-")[2]
        mae = by_step.get(f"mae-{engine}")
        ratio = f"{r['seconds'] / mae['seconds']:.2f}x" if mae and engine else "-"
        diff = r.get("max_rel_diff")
        lines.append(f"| {r['step']} | {r['seconds']:.2f} | "
                     "{:.2f}-{:.2f} | ".format(*r["wall_range"]) +
                     f"{r['cpu_seconds']:.2f} | {r['peak_rss_mib']:.0f} | {ratio} | "
                     f"{'-' if diff is None else f'{diff:.1e}'} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=lambda s: int(s.replace("_", "")), default=30_000_000,
                        help="rows of the lake (samples x 2 outputs)")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/mleval-regression"))
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated, of {', '.join(STEPS)}")
    parser.add_argument("--memory-limit", default="1GB", help="both engines' budget")
    parser.add_argument("--repeat", type=int, default=3, help="rounds of every step; the "
                        "report gives medians (and the range of wall times)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--make", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--lake", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_step(args.child, Path(args.lake), args.memory_limit)))
        return
    if args.make:
        make_lake(Path(args.lake), args.rows)
        return
    steps = args.steps.split(",")
    unknown = sorted(set(steps) - set(STEPS))
    if unknown:
        raise SystemExit(f"unknown steps {unknown}; the steps are {', '.join(STEPS)}")
    compiled()
    lake = args.folder / f"lake-{args.rows}"
    # written by a child: the parent stays small, and no step's peak holds the parent's
    in_child("make", [sys.executable, __file__, "--make", "--lake", str(lake),
                      "--rows", str(args.rows)])
    before = os.getloadavg()[0]
    rounds: dict[str, list[dict]] = {step: [] for step in steps}
    for _ in range(max(1, args.repeat)):  # rounds interleaved: a slow spell hits every step
        for step in steps:
            rounds[step].append(measure(step, lake, args.memory_limit))
    rows = [median_run(runs) for runs in rounds.values()]
    oracle = next((r["numbers"][0] for r in rows if r["step"] == "sklearn"), None)
    for r in rows:
        if oracle is not None and r["step"] != "sklearn":
            r["max_rel_diff"] = max(agreement(n, oracle) for n in r["numbers"])
    print(report(rows, args.rows, args.memory_limit, (before, os.getloadavg()[0])))


if __name__ == "__main__":
    main()
