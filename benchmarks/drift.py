"""Benchmark: drift of the scores of 10 labels in 8 segments against a reference, by mleval_sql
on each engine, beside one exact ROC AUC evaluation of the same rows and scipy on the same
data, in one run.

    python benchmarks/drift.py                                   # 10M rows against 1M
    python benchmarks/drift.py --samples 100_000 --reference 10_000 --memory-limit 1GB
    python benchmarks/drift.py --evidently-python /tmp/evidently-venv/bin/python

The lakes are :func:`lake.make_lake`'s (``segment=sK/part-N.parquet``, ``sample, label,
score, truth``): the current one of ``--samples`` samples x 10 labels, the reference of
``--reference`` samples drawn anew (the same distribution). Steps, each in a child process
(wall time, CPU time and peak RSS from ``wait4``):

- ``drift-<engine>``: KS (with its p-value), Wasserstein-1 and PSI of the scores per
  (segment, label), ``me.drift(current, reference, by="segment")``;
- ``auc-<engine>``: ``me.evaluate(current, "roc_auc", by="segment", average="none")``, the
  exact ROC AUC of the current rows per (segment, label): one sort per group too;
- ``estimated-<engine>``: performance without the truth, ``me.evaluate(current,
  ["estimated_f1", "estimated_roc_auc"], reference=reference, by="segment",
  average="none")``: an isotonic calibration map per (segment, label) learnt on the reference,
  the current rows' scores mapped through it, the expected counts and ROC AUC (the current
  rows' truth is not read);
- ``scipy``: the same statistics per (segment, label) after loading the columns with pyarrow:
  ``ks_2samp``, ``wasserstein_distance``, and PSI with numpy over the reference's quantile bins
  (``numpy.quantile(method="inverted_cdf")``, right-closed bins).

Every mleval step's numbers are checked against scipy's (the largest relative difference).

``--evidently-python PYTHON`` adds ``evidently``: Evidently (a benchmark-only comparison, never
a dependency: PYTHON is another virtualenv's interpreter, where ``pip install evidently``
ran) on the same lakes, loaded with pyarrow into pandas, a ``Report`` per segment of a
``ValueDrift`` per label's score column (the labels pivoted to columns) and method ``ks``,
``wasserstein`` and ``psi``. Its values are not all this project's: its ``ks`` is the test's
p-value (compared with ``me.drift``'s ``p_value``), its ``wasserstein`` the distance divided by
the reference's standard deviation (multiplied back here before comparing), its ``psi`` over
Sturges's equal-width bins of both sides' values (not the reference's quantiles: told, not
compared). The step is stopped past ``--evidently-timeout`` seconds or ``--evidently-max-rss``
MiB of memory, and its failure, time and memory so far are told.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lake import in_child, make_lake  # a sibling script, not a package

STATISTICS = ["ks", "wasserstein", "psi"]
ENGINES = ["polars", "duckdb"]


def run_child(step: str, args: argparse.Namespace) -> dict:
    """One step, run here (in the child): its numbers by ``segment|label|statistic``."""
    if step == "scipy":
        return scipy_numbers(Path(args.current), Path(args.reference), args.bins)
    if step == "evidently":
        return evidently_numbers(Path(args.current), Path(args.reference))
    import mleval_sql as me

    kind, engine = step.split("-")
    if kind == "auc":
        me.evaluate(args.current, "roc_auc", by="segment", average="none", engine=engine,
                    memory_limit=args.memory_limit)
        return {}
    if kind == "estimated":
        me.evaluate(args.current, ["estimated_f1", "estimated_roc_auc"], by="segment",
                    average="none", reference=args.reference, engine=engine,
                    memory_limit=args.memory_limit)
        return {}
    rows = me.drift(args.current, args.reference, by="segment", statistics=STATISTICS,
                    bins=args.bins, engine=engine, memory_limit=args.memory_limit)
    numbers = {f"{r['segment']}|{r['label']}|{r['statistic']}": r["value"]
               for r in rows.iter_rows(named=True)}
    numbers.update({f"{r['segment']}|{r['label']}|ks_p_value": r["p_value"]
                    for r in rows.filter(statistic="ks").iter_rows(named=True)})
    return numbers


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


def evidently_numbers(current: Path, reference: Path) -> dict:
    """Evidently's ``ks`` (a p-value), ``wasserstein`` (normed) and ``psi`` of each segment
    and label: a Report per segment, the labels' scores as columns."""
    import numpy as np
    import pyarrow.dataset as ds
    from evidently import DataDefinition, Dataset, Report
    from evidently.metrics import ValueDrift

    def load(folder: Path) -> dict:
        frame = ds.dataset(folder, partitioning="hive").to_table(
            columns=["segment", "sample", "label", "score"]).to_pandas()
        frame["label"] = frame["label"].astype(str)
        return {str(segment): part.pivot(index="sample", columns="label", values="score")
                for segment, part in frame.groupby("segment", observed=True)}

    cur, ref = load(current), load(reference)
    numbers: dict = {}
    for segment, reference_rows in ref.items():
        columns = [str(c) for c in reference_rows.columns]
        definition = DataDefinition(numerical_columns=columns)
        report = Report([ValueDrift(column=c, method=m) for c in columns
                         for m in ("ks", "wasserstein", "psi")])
        snapshot = report.run(Dataset.from_pandas(cur[segment], data_definition=definition),
                              Dataset.from_pandas(reference_rows, data_definition=definition))
        for metric in snapshot.dict()["metrics"]:
            column, method = metric["config"]["column"], metric["config"]["method"]
            key = f"{segment}|{column}"
            if method == "wasserstein":  # normed by the reference's std, as Evidently norms it
                norm = max(float(np.std(reference_rows[column].dropna())), 0.001)
                numbers[f"{key}|wasserstein_normed"] = float(metric["value"])
                numbers[f"{key}|wasserstein"] = float(metric["value"]) * norm
            else:
                numbers[f"{key}|{'ks_p_value' if method == 'ks' else method}"] = float(
                    metric["value"])
    return numbers


def measure_bounded(step: str, cmd: list[str], timeout: float, max_rss_mib: float) -> dict:
    """``cmd`` run as a child as :func:`lake.in_child` runs it, but stopped past ``timeout``
    seconds or ``max_rss_mib`` of resident memory (polled: on a shared machine a library that
    does not fit is stopped before the kernel's OOM killer picks a process): its failure, if
    it failed, with the time and memory until then."""
    start = time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as errors:
        child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=errors, text=True)
        done, stopped = threading.Event(), []

        def watch() -> None:  # never waits on the child: wait4 below reaps it, with its usage
            while not done.wait(0.2):
                try:
                    status = Path(f"/proc/{child.pid}/status").read_text()
                    rss = int(next(line.split()[1] for line in status.splitlines()
                                   if line.startswith("VmRSS:"))) / 1024
                except (OSError, StopIteration):
                    rss = 0.0
                if time.perf_counter() - start > timeout:
                    stopped.append(f"stopped after {timeout:.0f} s")
                elif rss > max_rss_mib:
                    stopped.append(f"stopped at {rss:,.0f} MiB of memory")
                if stopped:
                    os.kill(child.pid, signal.SIGKILL)
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        output = child.stdout.read() if child.stdout else ""
        _, status, usage = os.wait4(child.pid, 0)
        child.returncode = os.waitstatus_to_exitcode(status)
        done.set()
        watcher.join()
        seconds = time.perf_counter() - start
        run = {"step": step, "seconds": seconds, "numbers": {},
               "cpu_seconds": usage.ru_utime + usage.ru_stime,
               "peak_rss_mib": usage.ru_maxrss / 1024}
        if stopped or child.returncode:
            errors.seek(0)
            tail = [line for line in errors.read().splitlines() if line.strip()][-1:]
            run["failed"] = stopped[0] if stopped else (
                f"exit status {child.returncode}" + (f": {tail[0]}" if tail else ""))
            return run
        run["numbers"] = json.loads(output)
        return run


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
    parser.add_argument("--evidently-python", default=None,
                        help="another virtualenv's python, with evidently installed")
    parser.add_argument("--evidently-timeout", type=float, default=1800.0,
                        help="seconds before the evidently step is stopped")
    parser.add_argument("--evidently-max-rss", type=float, default=16384.0,
                        help="MiB of resident memory at which the evidently step is stopped")
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
               ("scipy", *(f"{k}-{e}" for e in ENGINES for k in ("auc", "drift",
                                                                  "estimated")))]
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
        elif r["step"].startswith("estimated"):
            auc = by[r["step"].replace("estimated", "auc")]["seconds"]
            said = f"  {r['seconds'] / auc:.2f}x the AUC"
        print(f"{r['step']:>13}: {r['seconds']:7.2f} s  cpu {r['cpu_seconds']:7.2f} s  "
              f"peak {r['peak_rss_mib']:6.0f} MiB{said}")
    if args.evidently_python:
        cmd = [args.evidently_python, __file__, "--child", "evidently", "--current",
               args.current, "--reference", args.reference]
        run = measure_bounded("evidently", cmd, args.evidently_timeout, args.evidently_max_rss)
        print(f"{'evidently':>13}: {run['seconds']:7.2f} s  cpu {run['cpu_seconds']:7.2f} s  "
              f"peak {run['peak_rss_mib']:6.0f} MiB  "
              + (f"FAILED: {run['failed']}" if "failed" in run
                 else evidently_agreement(run["numbers"], by["drift-polars"]["numbers"])))


def evidently_agreement(theirs: dict, ours: dict) -> str:
    """How Evidently's values stand against ``me.drift``'s (polars): the KS p-values (absolute
    difference), the Wasserstein distances once Evidently's norm is taken off (relative), and
    how far apart the two PSIs are, each over its own bins."""
    def gap(statistic: str, relative: bool) -> float:
        keys = [k for k in theirs if k.endswith(f"|{statistic}")]
        if len(keys) != sum(k.endswith(f"|{statistic}") for k in ours):
            raise SystemExit(f"evidently: {len(keys)} {statistic} values, not one per group")
        return max(abs(theirs[k] - ours[k]) / (max(abs(ours[k]), 1e-300) if relative else 1.0)
                   for k in keys)

    return (f"KS p-value: {gap('ks_p_value', False):.1e} (absolute); Wasserstein x reference "
            f"std: {gap('wasserstein', True):.1e} (relative); PSI over other bins: up to "
            f"{gap('psi', False):.1e} apart")


if __name__ == "__main__":
    main()
