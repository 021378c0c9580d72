"""Benchmark: a nightly report job over time on a date-partitioned lake that grows by a day,
beside ``evaluate`` of the same metrics by window in the same run.

    python benchmarks/nightly.py                        # 30 days x 100k samples x 10 labels
    python benchmarks/nightly.py --days 30 --samples 10_000 --after 60
    python benchmarks/nightly.py --memory-limit 1GB

The lake is ``date=YYYY-MM-DD/segment=sK/part-0.parquet``: ``--samples`` samples a day, 10
labels, 8 segments (:func:`lake.make_lake`'s rows, a day at a time). The job: ``roc_auc,
average_precision, f1, precision, recall`` (per label and macro), ``segments = ["segment"]``
(with the whole lake: 9 segments a window), ``[window] column = "date"`` and a ``[history]``;
no curves, so that the job and ``evaluate`` compute the same. Steps, each in a child process
(wall time, CPU time and peak RSS from ``wait4``):

- ``evaluate``: ``me.evaluate`` of the metrics with ``window="date:1d,1w"``, overall and by
  segment, in one process, as a user would without a job;
- ``first``: the job's first night, every window (``every = ["1d", "1w"]``);
- ``night``: one more day written, the next night (the new day and its week);
- ``first-1d`` / ``night-1d``: the same with ``every = ["1d"]``;
- ``after``: with ``--after N``, the lake grown to N days and the night after day N (1d, 1w),
  against ``night`` (its cost should not grow with the lake's age);
- ``full``: a full refresh of the grown lake into a history of its own, whose values the
  nights' history must equal (the largest relative difference is printed; 0 on one thread);
- ``labels``: the job with its truth from outcomes kept apart (``[labels]``, ``unlabelled =
  "skip"``; ``outcomes/day=N/part-0.parquet``, ``sample, label, truth``), the first night with
  every day's outcomes but the last ``--late`` days' (1d, 1w);
- ``late``: those days' outcomes arrive, the next night: it recomputes exactly those days and
  their weeks; ``late-full``, a full refresh of the same, whose values it must equal.

Each night's ``summary.json`` says what it computed and read: its windows, files and rows
are printed beside its time.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lake import LABELS, in_child, segment_tables  # a sibling script, not a package

METRICS = ["roc_auc", "average_precision", "f1", "precision", "recall"]
START = dt.date(2026, 10, 1)


def write_day(lake: Path, day: int, samples: int) -> None:
    """One day of predictions, ``samples`` samples x 10 labels in 8 segments
    (:func:`lake.segment_tables`), in hive folders ``date=`` and ``segment=``."""
    import numpy as np
    import pyarrow.parquet as pq

    date = START + dt.timedelta(days=day)
    for s, table in segment_tables(np.random.default_rng(day), day * samples, samples):
        out = lake / f"date={date}" / f"segment=s{s}" / "part-0.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table, out)


def grow(lake: Path, days: int, samples: int) -> None:
    """The lake holds days 0 .. ``days`` - 1 (those missing are written)."""
    for day in range(days):
        if not (lake / f"date={START + dt.timedelta(days=day)}").exists():
            write_day(lake, day, samples)


def write_outcomes(lake: Path, outcomes: Path, days: range) -> None:
    """The truth of the lake's ``days``, as outcomes kept apart: ``sample, label, truth``."""
    import pyarrow.dataset as ds
    import pyarrow.parquet as pq

    for day in days:
        date = START + dt.timedelta(days=day)
        rows = ds.dataset(lake / f"date={date}", partitioning="hive").to_table(
            columns=["sample", "label", "truth"])
        out = outcomes / f"day={date}" / "part-0.parquet"
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(rows, out)


def job_file(lake: Path, folder: Path, history: Path, every: list[str], engine: str,
             memory_limit: str | None, outcomes: Path | None = None) -> Path:
    lines = [
        'title = "Nightly evaluation over time: benchmark lake"',
        'task = "multilabel"',
        f'engine = "{engine}"',
        *([f'memory_limit = "{memory_limit}"'] if memory_limit else []),
        *(['unlabelled = "skip"'] if outcomes else []),
        'segments = ["segment"]',
        f"metrics = {json.dumps(METRICS)}",
        'average = ["macro"]',
        "[[sources]]",
        f"path = {json.dumps(str(lake))}",
        'model = "m"',
        "[curves]",
        "kinds = []",
        "[window]",
        'column = "date"',
        f"every = {json.dumps(every)}",
        "[history]",
        f"path = {json.dumps(str(history))}",
        *(["[labels]", f"path = {json.dumps(str(outcomes))}"] if outcomes else []),
    ]
    path = folder / f"job-{history.name}.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_child(step: str, args: argparse.Namespace) -> dict:
    """One step, run here (in the child)."""
    import mleval_sql as me

    out = Path(args.out)
    if step == "evaluate":
        for by in ([], ["segment"]):
            me.evaluate(args.lake, METRICS, by=by, task="multilabel", engine=args.engine,
                        average=["none", "macro"], memory_limit=args.memory_limit,
                        window="date:1d,1w")
        return {}
    every = ["1d"] if step.endswith("-1d") else ["1d", "1w"]
    labels = step in ("labels", "late", "late-full")
    name = {"full": "history-full", "late-full": "history-late-full"}.get(
        step, "history-1d" if step.endswith("-1d") else "history-labels" if labels
        else "history")
    job = job_file(Path(args.lake), out, out / name, every, args.engine, args.memory_limit,
                   out / "outcomes" if labels else None)
    report = out / f"report-{step}"
    me.report(job, report, progress=False, full_refresh=step.endswith("full"))
    night = json.loads((report / "summary.json").read_text())["night"]
    return {"windows": len(night["computed"]), "kept": night["kept"],
            "computed": sorted(f"{w['granularity']} {str(w['window_start'])[:10]}"
                               for w in night["computed"]),
            "files_read": night["files_read"], "rows_read": night["rows_read"]}


def measure(step: str, args: argparse.Namespace) -> dict:
    cmd = [sys.executable, __file__, "--child", step, "--lake", args.lake, "--out", args.out,
           "--engine", args.engine]
    if args.memory_limit:
        cmd += ["--memory-limit", args.memory_limit]
    run = in_child(step, cmd)
    return {**run, "step": step, **json.loads(run.pop("output"))}


def history_difference(a: Path, b: Path) -> float:
    """The largest relative difference between two histories' values (matched by every key)."""
    import polars as pl

    from mleval_sql.history import read

    drop = ("run_id", "computed_at", "job", "value")
    left, right = read(a), read(b)
    keys = [c for c in left.columns if c not in drop]
    joined = left.join(right, on=keys, how="full", nulls_equal=True, coalesce=True)
    if joined.height != left.height or joined.height != right.height:
        raise SystemExit(f"the histories hold other rows: {left.height} and {right.height}, "
                         f"{joined.height} matched")
    both = joined.filter(pl.col("value").is_not_null() | pl.col("value_right").is_not_null())
    if both.filter(pl.col("value").is_null() != pl.col("value_right").is_null()).height:
        raise SystemExit("a value is null in one history only")
    gap = both.select(((pl.col("value") - pl.col("value_right")).abs()
                       / pl.col("value_right").abs().clip(1e-300)).max()).item()
    return float(gap or 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30)
    parser.add_argument("--samples", type=lambda t: int(t.replace("_", "")), default=100_000,
                        help="samples a day (x 10 labels: rows)")
    parser.add_argument("--after", type=int, default=0,
                        help="also the night after this many days (e.g. 60)")
    parser.add_argument("--late", type=int, default=3,
                        help="days whose outcomes arrive late (the labels and late steps)")
    parser.add_argument("--engine", default="polars")
    parser.add_argument("--memory-limit", default=None)
    parser.add_argument("--folder", default="/tmp/mleval-nightly")
    parser.add_argument("--child", default=None)
    parser.add_argument("--lake", default=None)
    parser.add_argument("--out", default=None)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_child(args.child, args)))
        return
    folder = Path(args.folder) / f"{args.days}x{args.samples}"
    lake = folder / "lake"
    for extra in lake.glob("date=*"):  # the days an earlier run grew the lake by
        if dt.date.fromisoformat(extra.name[5:]) >= START + dt.timedelta(days=args.days):
            shutil.rmtree(extra)
    out = folder / "out"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    grow(lake, args.days, args.samples)
    args.lake, args.out = str(lake), str(out)
    rows = args.days * args.samples * LABELS
    print(f"lake: {args.days} days x {args.samples:,} samples x {LABELS} labels = {rows:,} "
          f"rows, engine {args.engine}, memory_limit {args.memory_limit}")
    results = [measure("evaluate", args), measure("first", args), measure("first-1d", args)]
    grow(lake, args.days + 1, args.samples)
    results += [measure("night", args), measure("night-1d", args)]
    if args.after:
        grow(lake, args.after, args.samples)
        measure("night", args)  # the nights between: every window written once
        grow(lake, args.after + 1, args.samples)
        results.append({**measure("night", args), "step": "after"})
    results.append(measure("full", args))
    days = args.after + 1 if args.after else args.days + 1
    write_outcomes(lake, out / "outcomes", range(days - args.late))
    results.append(measure("labels", args))
    write_outcomes(lake, out / "outcomes", range(days - args.late, days))
    results += [measure("late", args), measure("late-full", args)]
    by = {r["step"]: r for r in results}
    for r in results:
        said = "" if r["step"] == "evaluate" else (
            f"  windows {r['windows']:>3}, kept {r['kept']:>3}, files {r['files_read']}, "
            f"rows {r['rows_read']:,}")
        print(f"{r['step']:>9}: {r['seconds']:7.2f} s  cpu {r['cpu_seconds']:7.2f} s  "
              f"peak {r['peak_rss_mib']:6.0f} MiB{said}")
        if r["step"] == "late":
            print(f"{'':>11}recomputed: {', '.join(r['computed'])}")
    print(f"first / evaluate: {by['first']['seconds'] / by['evaluate']['seconds']:.2f}x; "
          f"night / first: {by['night']['seconds'] / by['first']['seconds']:.2f} (1d, 1w), "
          f"{by['night-1d']['seconds'] / by['first-1d']['seconds']:.2f} (1d)"
          + (f"; night after day {args.after} / after day {args.days}: "
             f"{by['after']['seconds'] / by['night']['seconds']:.2f}x" if args.after else ""))
    gap = history_difference(out / "history", out / "history-full")
    print(f"history after the nights against a full refresh: largest relative difference "
          f"{gap:.1e}")
    gap = history_difference(out / "history-labels", out / "history-late-full")
    print(f"history after the late outcomes against a full refresh: largest relative "
          f"difference {gap:.1e}")


if __name__ == "__main__":
    main()
