"""Benchmark: a nightly report job at lake scale, beside ``evaluate`` of the same metrics and
segmentations, in one run on the same data.

    python benchmarks/report.py                                  # 10M rows: 1M samples x 10 labels
    python benchmarks/report.py --samples 10_000_000 --repeat 1  # 100M rows
    python benchmarks/report.py --memory-limit 1GB --engine duckdb

The lake is :func:`lake.make_lake`'s (``segment=sK`` hive folders, 8 segments, 10 labels) with
one more column, ``day`` (3 values, from the sample id), so that the job has a second
segmentation crossed with the first. Steps, each in a child process (wall time, CPU time and
peak RSS from ``wait4``; with ``--repeat N``, medians of N rounds):

- ``job``: ``mleval report`` of a job with ``roc_auc, average_precision, f1, precision,
  recall`` (per label and macro), ``segments = ["segment", ["segment", "day"]]`` (with the
  whole lake: 33 segments), ``[curves] kinds = ["roc", "pr"]``; its folder's size, the HTML's
  and the curve table's;
- ``evaluate``: ``me.evaluate`` of the same metrics and averages, once per segmentation (the
  whole lake, by segment, by segment and day), in one process, as a user would without a job.

Then the job's metrics are checked against ``evaluate``'s (the largest relative difference) and
its ROC AUC and average precision of each label over the whole lake against scikit-learn's.
``--curves ''`` runs the job without curves (what the curves cost). ``--ci 0.95`` adds a step,
``job-ci``: the same job with ``ci = 0.95`` (DeLong's interval for a label's ROC AUC, a Poisson
bootstrap of 200 replicates for the others), against ``job``; its rounds' ``metrics.parquet``
must be the same bytes (a rerun is reproducible) and its values equal the job's::

    python benchmarks/report.py --memory-limit 1GB --ci 0.95
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from lake import in_child, make_lake  # a sibling script, not a package

METRICS = ["roc_auc", "average_precision", "f1", "precision", "recall"]
AVERAGES = ["none", "macro"]
SEGMENTATIONS = [[], ["segment"], ["segment", "day"]]
DAYS = 3


def make_report_lake(folder: Path, samples: int) -> Path:
    """``folder/segment=sK/part-N.parquet``: :func:`lake.make_lake`'s rows with ``day``
    (``d0``..``d2``: the sample id modulo 3)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = folder / "_complete"
    if done.exists():
        return folder
    base = make_lake(folder.parent / f"base-{samples}", samples)
    days = pa.array([f"d{i}" for i in range(DAYS)]).dictionary_encode().dictionary
    for part in sorted(base.glob("segment=*/*.parquet")):
        table = pq.read_table(part)
        index = pa.array(np.asarray(table["sample"]) % DAYS, type=pa.int32())
        day = pa.DictionaryArray.from_arrays(index, days)
        out = folder / part.parent.name / part.name
        out.parent.mkdir(parents=True, exist_ok=True)
        pq.write_table(table.append_column("day", day), out)
    done.touch()
    return folder


def job_file(lake: Path, folder: Path, engine: str, memory_limit: str | None,
             curves: list[str], ci: float | None = None) -> Path:
    """The job: the metrics, by segment and by segment x day, and ``curves`` (ROC and PR);
    ``ci``: with intervals of that level."""
    lines = [
        'title = "Nightly evaluation: benchmark lake"',
        'task = "multilabel"',
        f'engine = "{engine}"',
        *([f'memory_limit = "{memory_limit}"'] if memory_limit else []),
        *([f"ci = {ci}"] if ci else []),
        'segments = ["segment", ["segment", "day"]]',
        f"metrics = {json.dumps(METRICS)}",
        'average = ["macro"]',
        "[[sources]]",
        f"path = {json.dumps(str(lake))}",
        'model = "m"',
        "[curves]",
        f"kinds = {json.dumps(curves)}",
    ]
    path = folder / "job.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def run_step(step: str, lake: Path, out: Path, engine: str, memory_limit: str | None,
             curves: list[str], ci: float | None = None) -> dict:
    """Run one step here; its numbers (the metrics, keyed) and sizes."""
    import hashlib

    import polars as pl

    import mleval_sql as me

    if step in ("job", "job-ci"):
        job = job_file(lake, out, engine, memory_limit, curves, ci if step == "job-ci" else None)
        me.report(job, out / "report", progress=False)
        folder = out / "report"
        sizes = {p.name: p.stat().st_size for p in folder.iterdir()}
        # the report's own ``segment`` column names the segment; the lake's is ``segment_``
        tidy = pl.read_parquet(folder / "metrics.parquet").drop("segment").rename(
            {"segment_": "segment"})
        digest = hashlib.sha256((folder / "metrics.parquet").read_bytes()).hexdigest()
        return {"sizes": sizes, "digest": digest, "numbers": {
            _key(r["segmentation"], r): r["value"] for r in tidy.iter_rows(named=True)}}
    numbers = {}
    for by in SEGMENTATIONS:
        frame = me.evaluate(str(lake), METRICS, by=by, task="multilabel", engine=engine,
                            average=AVERAGES, memory_limit=memory_limit)
        name = " x ".join(by) or "overall"
        numbers.update({_key(name, r): r["value"] for r in frame.iter_rows(named=True)})
    return {"sizes": {}, "numbers": numbers}


def _key(segmentation: str, row: dict) -> str:
    segment = ",".join(f"{row[c]}" for c in ("segment", "day")
                       if c in row and row[c] is not None and segmentation != "overall")
    return "|".join(str(x) for x in (segmentation, segment, row["metric"], row["average"],
                                     row["label"]))


def measure(step: str, lake: Path, out: Path, engine: str, memory_limit: str | None,
            curves: list[str], ci: float | None = None) -> dict:
    """Run ``step`` in a child: its wall and CPU time, peak RSS and result."""
    cmd = [sys.executable, __file__, "--child", step, "--lake", str(lake), "--out", str(out),
           "--engine", engine, "--curves", ",".join(curves)]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    if ci:
        cmd += ["--ci", str(ci)]
    run = in_child(step, cmd)
    printed = json.loads(run.pop("output"))
    return {**run, "step": step, **printed}


def difference(job: dict, evaluate: dict) -> tuple[float, int]:
    """The largest relative difference between the job's and evaluate's numbers, and how many
    were compared (every evaluate number must be in the job)."""
    worst = 0.0
    for key, want in evaluate.items():
        got = job[key]
        if want is None or got is None:
            if (want is None) != (got is None):
                raise SystemExit(f"{key}: job {got}, evaluate {want}")
            continue
        worst = max(worst, abs(got - want) / max(abs(want), 1e-300))
    return worst, len(evaluate)


def sklearn_check(lake: Path, job: dict) -> tuple[float, int]:
    """The largest absolute difference between the job's ROC AUC and average precision of each
    label over the whole lake and scikit-learn's, and how many were compared."""
    import numpy as np
    import pyarrow.dataset as ds
    from sklearn.metrics import average_precision_score, roc_auc_score

    table = ds.dataset(lake, format="parquet", partitioning="hive").to_table(
        columns=["sample", "label", "score", "truth"])
    order = np.lexsort((np.asarray(table["sample"]), np.asarray(table["label"])))
    label = np.asarray(table["label"])[order]
    score = np.asarray(table["score"])[order]
    truth = np.asarray(table["truth"])[order].astype(bool)
    worst, compared = 0.0, 0
    for name in np.unique(label):
        rows = label == name
        for metric, function in (("roc_auc", roc_auc_score),
                                 ("average_precision", average_precision_score)):
            want = function(truth[rows], score[rows])
            got = job[_key("overall", {"metric": metric, "average": None, "label": name})]
            worst, compared = max(worst, abs(got - want)), compared + 1
    return worst, compared


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--samples", type=lambda t: int(t.replace("_", "")), default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--engine", default="duckdb")
    parser.add_argument("--memory-limit")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/mleval-bench"))
    parser.add_argument("--curves", type=lambda t: [k for k in t.split(",") if k],
                        default=["roc", "pr"], help="the job's curve kinds ('': none)")
    parser.add_argument("--ci", type=float, default=None,
                        help="also the job with ci = CI (the job-ci step)")
    parser.add_argument("--child")
    parser.add_argument("--lake", type=Path)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(run_step(args.child, args.lake, args.out, args.engine,
                                  args.memory_limit, args.curves, args.ci)))
        return
    lake = make_report_lake(args.folder / f"report-{args.samples}", args.samples)
    rows = args.samples * 10
    runs: dict[str, list[dict]] = {"job": [], "evaluate": [], **({"job-ci": []} if args.ci
                                                                 else {})}
    for i in range(args.repeat):
        for step in runs:  # alternating: the machine's load falls on both alike
            out = args.folder / f"out-{step}-{i}"
            shutil.rmtree(out, ignore_errors=True)  # no file of an earlier run in the sizes
            out.mkdir(parents=True)
            runs[step].append(measure(step, lake, out, args.engine, args.memory_limit,
                                      args.curves, args.ci))
            r = runs[step][-1]
            print(f"  round {i + 1} {step}: {r['seconds']:.1f} s wall, {r['cpu_seconds']:.1f} s "
                  f"CPU, {r['peak_rss_mib']:.0f} MiB", file=sys.stderr, flush=True)
    median = {step: {k: statistics.median(r[k] for r in rs)
                     for k in ("seconds", "cpu_seconds")} | {
                         "peak_rss_mib": max(r["peak_rss_mib"] for r in rs),
                         "walls": sorted(round(r["seconds"], 1) for r in rs)}
              for step, rs in runs.items()}
    worst, compared = difference(runs["job"][0]["numbers"], runs["evaluate"][0]["numbers"])
    sk_worst, sk_compared = sklearn_check(lake, runs["job"][0]["numbers"])
    sizes = runs["job"][0]["sizes"]
    total = sum(sizes.values())
    curves = sum(v for k, v in sizes.items() if k.startswith("curve_"))
    job, ev = median["job"], median["evaluate"]
    print(f"{rows:,} rows ({args.samples:,} samples x 10 labels), engine {args.engine}, "
          f"memory_limit {args.memory_limit}, {args.repeat} round(s), "
          f"load average {os.getloadavg()[0]:.1f} at the end")
    print("| step | wall s (median) | walls | CPU s | peak RSS MiB |")
    print("|---|---:|---|---:|---:|")
    for step, m in median.items():
        print(f"| {step} | {m['seconds']:.1f} | {m['walls']} | {m['cpu_seconds']:.1f} | "
              f"{m['peak_rss_mib']:.0f} |")
    print(f"job / evaluate: {job['seconds'] / ev['seconds']:.2f}x wall, "
          f"{job['cpu_seconds'] / ev['cpu_seconds']:.2f}x CPU")
    if args.ci:
        with_ci = median["job-ci"]
        same, _ = difference(runs["job-ci"][0]["numbers"], runs["job"][0]["numbers"])
        digests = {r["digest"] for r in runs["job-ci"]}
        print(f"job-ci / job: {with_ci['seconds'] / job['seconds']:.2f}x wall, "
              f"{with_ci['cpu_seconds'] / job['cpu_seconds']:.2f}x CPU; its values equal the "
              f"job's within {same:.1e}; metrics.parquet "
              + ("the same bytes in every round" if len(digests) == 1 else
                 f"DIFFERS between rounds ({len(digests)} digests)"))
    print(f"curves {args.curves}; report folder {total / 1e6:.2f} MB (report.html "
          f"{sizes['report.html'] / 1e6:.2f} MB, curve tables {curves / 1e6:.2f} MB); "
          f"{compared} numbers equal evaluate's within {worst:.1e} (relative); "
          f"{sk_compared} AUC / AP equal scikit-learn's within {sk_worst:.1e}")


if __name__ == "__main__":
    main()
