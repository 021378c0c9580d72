"""Benchmark: drift of the scores of 10 labels in 8 segments against a reference, by mleval_sql
on each engine, beside one exact ROC AUC evaluation of the same rows and scipy on the same
data, in one run.

    python benchmarks/drift.py                                   # 10M rows against 1M
    python benchmarks/drift.py --samples 100_000 --reference 10_000 --memory-limit 1GB

The lakes are :func:`lake.make_lake`'s (``segment=sK/part-N.parquet``, ``sample, label,
score, truth``): the current one of ``--samples`` samples x 10 labels, the reference of
``--reference`` samples drawn anew (the same distribution). Steps, each in a child process
(wall time, CPU time and peak RSS from ``wait4``):

- ``drift-<engine>``: KS (with its p-value), Wasserstein-1 and PSI of the scores per
  (segment, label), ``me.drift(current, reference, by="segment")``;
- ``auc-<engine>``: ``me.evaluate(current, "roc_auc", by="segment", average="none")``, the
  exact ROC AUC of the current rows per (segment, label): one sort per group too;
- ``scipy``: the same statistics per (segment, label) after loading the columns with pyarrow:
  ``ks_2samp``, ``wasserstein_distance``, and PSI with numpy over the reference's quantile bins
  (``numpy.quantile(method="inverted_cdf")``, right-closed bins).

Every mleval step's numbers are checked against scipy's (the largest relative difference).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lake import in_child, make_lake  # a sibling script, not a package

STATISTICS = ["ks", "wasserstein", "psi"]
ENGINES = ["polars", "duckdb"]


def run_child(step: str, args: argparse.Namespace) -> dict:
    """One step, run here (in the child): its numbers by ``segment|label|statistic``."""
    if step == "scipy":
        return scipy_numbers(Path(args.current), Path(args.reference), args.bins)
    import mleval_sql as me

    kind, engine = step.split("-")
    if kind == "auc":
        me.evaluate(args.current, "roc_auc", by="segment", average="none", engine=engine,
                    memory_limit=args.memory_limit)
        return {}
    rows = me.drift(args.current, args.reference, by="segment", statistics=STATISTICS,
                    bins=args.bins, engine=engine, memory_limit=args.memory_limit)
    return {f"{r['segment']}|{r['label']}|{r['statistic']}": r["value"]
            for r in rows.iter_rows(named=True)}


def scipy_numbers(current: Path, reference: Path, bins: int) -> dict:
    import numpy as np
    import pyarrow.dataset as ds
    from scipy import stats

    def load(folder: Path) -> dict:
        table = ds.dataset(folder, partitioning="hive").to_table(
            columns=["segment", "label", "score"])
        segment = table["segment"].to_numpy()
        label = table["label"].cast("string").to_numpy(zero_copy_only=False)
        score = table["score"].to_numpy()
        order = np.lexsort((label, segment))
        keys = np.char.add(np.char.add(segment[order].astype(str), "|"),
                           label[order].astype(str))
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        ordered = score[order]
        return {keys[s]: ordered[s:e]
                for s, e in zip(starts, [*starts[1:], len(keys)], strict=True)}

    cur, ref = load(current), load(reference)
    numbers = {}
    for key, r in ref.items():
        c = cur[key]
        numbers[f"{key}|ks"] = float(stats.ks_2samp(r, c).statistic)
        numbers[f"{key}|wasserstein"] = float(stats.wasserstein_distance(r, c))
        edges = np.unique(np.quantile(r, np.arange(1, bins) / bins, method="inverted_cdf"))
        p = np.bincount(np.searchsorted(edges, r, side="left"), minlength=len(edges) + 1)
        q = np.bincount(np.searchsorted(edges, c, side="left"), minlength=len(edges) + 1)
        p, q = p / p.sum(), q / q.sum()
        p, q = np.where(p > 0, p, 1e-4), np.where(q > 0, q, 1e-4)
        numbers[f"{key}|psi"] = float(np.sum((q - p) * np.log(q / p)))
    return numbers


def measure(step: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", step, "--current", args.current,
           "--reference", args.reference, "--bins", str(args.bins)]
    if args.memory_limit:
        cmd += ["--memory-limit", args.memory_limit]
    run = in_child(step, cmd)
    return {**run, "step": step, "numbers": json.loads(run.pop("output"))}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    number = lambda t: int(t.replace("_", ""))  # noqa: E731
    parser.add_argument("--samples", type=number, default=1_000_000)
    parser.add_argument("--reference", type=str, default="100_000",
                        help="the reference's samples (x 10 labels: rows)")
    parser.add_argument("--bins", type=int, default=10)
    parser.add_argument("--memory-limit", default="1GB")
    parser.add_argument("--folder", default="/tmp/mleval-drift")
    parser.add_argument("--child", default=None)
    parser.add_argument("--current", default=None)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, args)))
        return
    reference = number(args.reference)
    folder = Path(args.folder)
    args.current = str(make_lake(folder / f"current-{args.samples}", args.samples, seed=0))
    args.reference = str(make_lake(folder / f"reference-{reference}", reference, seed=1))
    print(f"current: {args.samples * 10:,} rows ({args.samples:,} samples x 10 labels, 8 "
          f"segments); reference: {reference * 10:,} rows; memory_limit {args.memory_limit}")
    results = [measure(step, args) for step in
               ("scipy", *(f"{k}-{e}" for e in ENGINES for k in ("auc", "drift")))]
    by = {r["step"]: r for r in results}
    oracle = by["scipy"]["numbers"]
    for r in results:
        said = ""
        if r["step"].startswith("drift"):
            shared = set(r["numbers"]) & set(oracle)
            if len(shared) != len(oracle):
                raise SystemExit(f"{r['step']}: {len(shared)} of scipy's {len(oracle)} numbers")
            gap = max(abs(r["numbers"][k] - oracle[k]) / max(abs(oracle[k]), 1e-300)
                      for k in shared)
            auc = by[r["step"].replace("drift", "auc")]["seconds"]
            said = f"  {r['seconds'] / auc:.2f}x the AUC; against scipy {gap:.1e}"
        print(f"{r['step']:>13}: {r['seconds']:7.2f} s  cpu {r['cpu_seconds']:7.2f} s  "
              f"peak {r['peak_rss_mib']:6.0f} MiB{said}")


if __name__ == "__main__":
    main()
