"""Benchmark: a hive-partitioned lake of multilabel predictions, evaluated by mleval_sql on each
engine, by scikit-learn per group, and by a plain scan (the floor), in one run on the same data.

    python benchmarks/lake.py                          # 100M rows: 10M samples x 10 labels
    python benchmarks/lake.py --samples 1_000_000 --scaling 1,3,10 --memory-limit 1GB
    python benchmarks/lake.py --store s3://bucket/bench      # also from object storage
    python benchmarks/lake.py --store local-s3               # ... a moto server on 127.0.0.1

Every step runs in its own child process; the parent reports its wall time, CPU time (user +
system, less disturbed by other work on the machine) and peak RSS (from ``wait4``; the lakes
are written by a child too, so that no step's peak holds the parent's) and checks
that every engine's numbers equal scikit-learn's. With ``--repeat N`` it runs N rounds of every
step and reports medians: on a shared machine one run's wall time moves by a third. For each
mleval step it also reports the stages in the child's process (``mleval_sql.progress.timings``):
the request's time there, each stage's share of it, and the checks besides the reading of their
input. Steps:

- ``exact-<engine>``: ROC AUC and average precision per (segment, label), plus precision,
  recall, F1 at 0.5 per label and macro-averaged, in one request; ``exact-default`` names no
  engine (the one a user gets: ``mleval_sql.engines.choose_engine``'s);
- ``<step>@1cpu``: the step on one core (``taskset -c 0``), against the step on every core;
- ``binned-<engine>``: the same decision metrics at 101 thresholds (``bins=100``);
- ``sweep-<engine>``: the same decision metrics at three listed thresholds (0.1, 0.3, 0.5),
  to be read against ``threshold-<engine>``, the decision metrics at 0.5 alone: a listed sweep
  is one scan into buckets between the thresholds, so it should cost about one threshold's run;
- ``sklearn``: the same numbers per group after loading the columns with pyarrow;
- ``checks-<engine>``: only the input checks every request starts with (a sample's rows span
  its labels, so they group by sample: the part of each request a plain scan does not pay for);
- ``scan``: count and sum of score per (segment, label) with DuckDB, which no evaluation beats;
- intervals (not run by default): ``auc-<engine>`` is the exact ROC AUC per (segment, label)
  alone and ``delong-<engine>`` the same with ``ci=0.95`` (DeLong's interval from the same
  sorted curve); ``pair-<engine>`` is F1 and average precision per label and macro-averaged,
  ``bootstrap-<engine>`` the same with ``ci=0.95`` (a Poisson bootstrap of 200 replicates)::

    python benchmarks/lake.py --samples 100_000 --steps auc-polars,delong-polars,sklearn
- weighted intervals (not run by default): ``wpair-<engine>`` is F1, average precision and ROC
  AUC per label and macro-averaged on the same lake with a ``weight`` column (each sample's
  weight 1 / its sampling rate, a rate drawn in [0.05, 1]: fractional weights, as a log that
  samples writes them), ``wbootstrap-<engine>`` the same with ``ci=0.95`` (200 replicates), and
  ``wsklearn`` scikit-learn's numbers with ``sample_weight``::

    python benchmarks/lake.py --samples 100_000 --steps wpair-polars,wbootstrap-polars,wsklearn

  Both engines rank the rows once for every replicate (the same kernel), so the report ends
  with each interval step's time over the same request's without ``ci`` on its engine
  (``wbootstrap-duckdb / wpair-duckdb``).
- ``<kind>-spark`` (not run by default): the same requests on Spark (``--spark-master``,
  default ``local[2]``; the JVM's start, a few seconds, is in its time), and ``mllib``: what a
  Spark user does without mleval, MLlib's ``BinaryClassificationEvaluator`` (exact:
  ``numBins=0``) in a loop over the (segment, label) groups, ROC AUC only::

    python benchmarks/lake.py --samples 1_000_000 --steps exact-duckdb,exact-spark,mllib,sklearn
- ``many-<engine>`` / ``few-<engine>`` (not run by default): F1 and ROC AUC of a binary table of
  ``--samples`` rows, each row its own segment / the same rows in 8 segments: the cost of a
  segment, which should not be the unit of cost::

    python benchmarks/lake.py --samples 1_000_000 \\
        --steps many-duckdb,few-duckdb,many-polars,few-polars

With ``--store URL`` the lake is also uploaded under URL (``s3://``, ``gs://``, ``az://``: the
cloud's standard environment variables say where and as whom), and every mleval step runs a
second time reading it from there (``<step> @store``), next to the same step on local disk.
``--store local-s3`` starts moto's S3 server on a free port of 127.0.0.1 for the run: its figures
are those of a single-process Python server on this machine, not of a cloud.

Clustering runs on a lake of its own (``clusters-N``: one row per sample, the same number of
samples, 8 segments, 50 classes x 60 clusters):

- ``cluster-<engine>``: every scalar clustering metric (adjusted_mutual_info included) per
  segment, in one request;
- ``cluster-sklearn``: scikit-learn's functions of the same names, per segment, after loading the
  columns with pyarrow;
- ``cluster-scan``: count and sums of class and cluster per segment with DuckDB.
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
from typing import Any

# numpy and pyarrow (pyarrow.dataset alone takes about 0.4 s to import) are imported where they
# are used: a step's time is its own imports and work, not those of the steps beside it
LABELS = 10
SEGMENTS = 8
EXACT = ["roc_auc", "average_precision", "precision", "recall", "f1"]
DECISIONS = ["precision", "recall", "f1"]
SWEEP = [0.1, 0.3, 0.5]
STEPS = ("exact-default", "exact-default@1cpu", "exact-duckdb", "exact-polars", "binned-duckdb",
         "binned-polars", "sweep-duckdb", "sweep-polars", "threshold-duckdb", "threshold-polars",
         "checks-default", "checks-duckdb", "checks-polars", "sklearn", "scan")
CLASSES, CLUSTERS = 50, 60
CLUSTER_METRICS = ["adjusted_rand", "rand", "mutual_info", "normalized_mutual_info",
                   "adjusted_mutual_info", "homogeneity", "completeness", "v_measure",
                   "fowlkes_mallows"]
CLUSTER_STEPS = ("cluster-duckdb", "cluster-polars", "cluster-sklearn", "cluster-scan")
CARDINALITY = ("many-duckdb", "many-polars", "few-duckdb", "few-polars")
SPARK_STEPS = ("exact-spark", "binned-spark", "sweep-spark", "threshold-spark", "checks-spark",
               "mllib")
CI_STEPS = tuple(f"{kind}-{engine}" for kind in ("auc", "delong", "pair", "bootstrap")
                 for engine in ("duckdb", "polars"))
WEIGHTED_STEPS = (*(f"{kind}-{engine}" for kind in ("wpair", "wbootstrap")
                    for engine in ("duckdb", "polars")), "wsklearn")
WEIGHTED_METRICS = ["f1", "average_precision", "roc_auc"]


# -- the lake ----------------------------------------------------------------------------------

def make_lake(folder: Path, samples: int, seed: int = 0, *, weighted: bool = False) -> Path:
    """``folder/segment=sK/part-N.parquet``: ``samples`` samples x 10 labels, 8 segments;
    ``weighted``: the same rows with a ``weight`` column (:func:`segment_tables`)."""
    import numpy as np
    import pyarrow.parquet as pq

    done = folder / "_complete"
    if done.exists():
        return folder
    rng = np.random.default_rng(seed)
    per_file = 1_000_000
    for start in range(0, samples, per_file):
        n = min(per_file, samples - start)
        for s, table in segment_tables(rng, start, n, weighted=weighted):
            out = folder / f"segment=s{s}"
            out.mkdir(parents=True, exist_ok=True)
            pq.write_table(table, out / f"part-{start // per_file:05d}.parquet")
    done.touch()
    return folder


def segment_tables(rng: Any, start: int, n: int, *,
                   weighted: bool = False) -> list[tuple[int, Any]]:
    """``n`` samples (ids from ``start``) x 10 labels, each in one of 8 segments: each
    segment's number and its rows as an Arrow table (sample, label, score, truth, and with
    ``weighted`` each sample's weight: 1 / a sampling rate drawn in [0.05, 1], drawn after
    the rest so that the other columns are the unweighted lake's)."""
    import numpy as np
    import pyarrow as pa

    labels = pa.array([f"l{j}" for j in range(LABELS)]).dictionary_encode()
    segment = rng.integers(0, SEGMENTS, size=n)
    truth = rng.random((n, LABELS)) < np.linspace(0.05, 0.5, LABELS)
    # continuous scores with some signal: a logistic of a shifted normal
    logit = rng.normal(0.0, 1.0, size=(n, LABELS)) + np.where(truth, 1.2, -0.4)
    score = 1.0 / (1.0 + np.exp(-logit))
    sample = np.arange(start, start + n, dtype=np.int64)
    weight = 1.0 / rng.uniform(0.05, 1.0, size=n) if weighted else None
    tables = []
    for s in range(SEGMENTS):
        rows = segment == s
        k = int(rows.sum())
        tables.append((s, pa.table({
            "sample": np.repeat(sample[rows], LABELS),
            "label": pa.DictionaryArray.from_arrays(
                np.tile(np.arange(LABELS, dtype=np.int32), k), labels.dictionary),
            "score": score[rows].ravel(),
            "truth": truth[rows].ravel(),
            **({} if weight is None else {"weight": np.repeat(weight[rows], LABELS)}),
        })))
    return tables


def make_cluster_lake(folder: Path, samples: int, seed: int = 0) -> Path:
    """``folder/segment=sK/part-N.parquet``: one row per sample (sample, truth, cluster), 8
    segments, 50 classes; the cluster follows the class 70% of the time, else is random."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    done = folder / "_complete"
    if done.exists():
        return folder
    rng = np.random.default_rng(seed)
    per_file = 1_000_000
    for start in range(0, samples, per_file):
        n = min(per_file, samples - start)
        segment = rng.integers(0, SEGMENTS, size=n)
        truth = rng.integers(0, CLASSES, size=n).astype(np.int32)
        follows = rng.random(n) < 0.7
        cluster = np.where(follows, truth * CLUSTERS // CLASSES + rng.integers(0, 2, size=n),
                           rng.integers(0, CLUSTERS, size=n)).astype(np.int32)
        sample = np.arange(start, start + n, dtype=np.int64)
        for s in range(SEGMENTS):
            rows = segment == s
            out = folder / f"segment=s{s}"
            out.mkdir(parents=True, exist_ok=True)
            pq.write_table(pa.table({"sample": sample[rows], "truth": truth[rows],
                                     "cluster": cluster[rows]}),
                           out / f"part-{start // per_file:05d}.parquet")
    done.touch()
    return folder


def make_segments_table(folder: Path, rows: int, seed: int = 0) -> Path:
    """``folder/segments-<rows>.parquet``: a binary table of ``rows`` rows, with segment columns
    ``one`` (each row its own segment) and ``few`` (8 segments)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = folder / f"segments-{rows}.parquet"
    if path.exists():
        return path
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    sample = np.arange(rows, dtype=np.int64)
    pq.write_table(pa.table({
        "sample": sample, "label": pa.array(["y"] * rows), "score": rng.random(rows),
        "truth": rng.random(rows) < 0.3, "one": sample, "few": sample % SEGMENTS,
    }), path)
    return path


# -- the steps, each run in a child process ------------------------------------------------------

def upload_lake(lake: Path, url: str) -> str:
    """``lake``'s files under ``url`` (once: a ``_complete`` marker is written last)."""
    import pyarrow.fs as pafs

    from mleval_sql.lakes.stores import Location, filesystem

    where = Location.parse(f"{url.rstrip('/')}/{lake.name}")
    fs = filesystem(where, None)
    if fs.get_file_info(f"{where.arrow_path}/_complete").type != pafs.FileType.File:
        files = [*sorted(lake.rglob("*.parquet")), lake / "_complete"]
        for file in files:
            pafs.copy_files(str(file), f"{where.arrow_path}/{file.relative_to(lake)}",
                            destination_filesystem=fs)
    return where.url


def local_s3() -> str:
    """moto's S3 server on a free port of 127.0.0.1, its settings in this process's
    environment (which the steps inherit); a bucket ``bench``. Returns ``s3://bench``."""
    import atexit
    import socket

    import pyarrow.fs as pafs

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = subprocess.Popen([sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p",
                               str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    atexit.register(server.terminate)
    os.environ.update(AWS_ACCESS_KEY_ID="bench", AWS_SECRET_ACCESS_KEY="bench",
                      AWS_REGION="us-east-1", AWS_ENDPOINT_URL=f"http://127.0.0.1:{port}",
                      AWS_ALLOW_HTTP="true", AWS_EC2_METADATA_DISABLED="true")
    for _ in range(300):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.1)
    pafs.S3FileSystem(endpoint_override=f"127.0.0.1:{port}", scheme="http",
                      allow_bucket_creation=True).create_dir("bench")
    return "s3://bench"


def run_step(step: str, lake: Path | str, memory_limit: str | None) -> dict:
    """Run one step here; return its numbers as {key: value}."""
    if step == "scan":
        return _scan(lake, "segment, label, count(*), sum(score)", memory_limit)
    if step in ("sklearn", "wsklearn"):
        return _sklearn(lake, weighted=step == "wsklearn")
    if step == "cluster-scan":
        return _scan(lake, "segment, count(*), sum(truth), sum(cluster)", None)
    if step == "cluster-sklearn":
        return _sklearn_clusters(lake)
    if step == "mllib":
        return _mllib(lake)
    if step.endswith("-spark"):
        _spark_session()  # the session the engine then finds active
    import mleval_sql  # noqa: F401  (its import is not the request's time)
    from mleval_sql.progress import timings

    with timings() as seconds:
        start = time.perf_counter()
        numbers = _evaluated(step, lake, memory_limit)
        seconds["request"] = time.perf_counter() - start
    STAGES.clear()
    STAGES.update(seconds)
    return numbers


#: The stages of the last mleval step run in this process, by mleval_sql.progress.timings, and
#: the request's own time in process ("request": the call, after the imports).
STAGES: dict[str, float] = {}


def _evaluated(step: str, lake: Path | str, memory_limit: str | None) -> dict:
    """The numbers of mleval step ``step``."""
    import mleval_sql as me

    kind, engine = step.split("-")
    engine = None if engine == "default" else engine
    if kind == "cluster":
        frame = me.evaluate(str(lake), CLUSTER_METRICS, by="segment", task="clustering",
                            engine=engine, memory_limit=memory_limit)
        return {_key(r): r["value"] for r in frame.iter_rows(named=True)}
    if kind in ("many", "few"):
        frame = me.evaluate(str(lake), ["f1", "roc_auc"], by="one" if kind == "many" else "few",
                            task="binary", engine=engine, memory_limit=memory_limit)
        return {"rows": frame.height}
    if kind == "checks":
        me.check(str(lake), by="segment", task="multilabel", engine=engine,
                 memory_limit=memory_limit)
        return {}
    if kind == "exact":
        frame = me.evaluate(str(lake), EXACT, by="segment", task="multilabel", engine=engine,
                            average=["none", "macro"], memory_limit=memory_limit)
    elif kind in ("auc", "delong", "pair", "bootstrap", "wpair", "wbootstrap"):
        metrics, averages = ((["roc_auc"], ["none"]) if kind in ("auc", "delong")
                             else (WEIGHTED_METRICS, ["none", "macro"]) if kind.startswith("w")
                             else (["f1", "average_precision"], ["none", "macro"]))
        frame = me.evaluate(str(lake), metrics, by="segment", task="multilabel", engine=engine,
                            average=averages, memory_limit=memory_limit,
                            ci=0.95 if kind in ("delong", "bootstrap", "wbootstrap") else None)
    else:
        sweep = {"binned": {"bins": 100}, "sweep": {"thresholds": SWEEP},
                 "threshold": {"threshold": 0.5}}[kind]
        frame = me.evaluate(str(lake), DECISIONS, by="segment", task="multilabel",
                            engine=engine, average=["none", "macro"],
                            memory_limit=memory_limit, **sweep)
    return {_key(r): r["value"] for r in frame.iter_rows(named=True)}


def _scan(lake: Path | str, columns: str, memory_limit: str | None) -> dict:
    """The floor: a plain DuckDB aggregate ``SELECT columns ... GROUP BY ALL`` over the lake."""
    import duckdb

    con = duckdb.connect()
    if memory_limit:
        con.execute("SET memory_limit = $m", {"m": memory_limit})
    rows = con.execute(f"SELECT {columns} FROM read_parquet($p, hive_partitioning = true) "
                       "GROUP BY ALL", {"p": f"{lake}/**/*.parquet"}).fetchall()
    return {"groups": len(rows)}


def _key(row: dict) -> str:
    threshold = row.get("threshold")
    return "|".join(str(row[c]) for c in ("segment", "metric", "average", "label")) + (
        f"|{threshold:g}" if threshold is not None else "")


def _spark_session():
    from pyspark.sql import SparkSession

    master = os.environ.get("MLEVAL_SPARK_MASTER", "local[2]")
    cores = master.removeprefix("local[").removesuffix("]")
    cores = str(os.cpu_count()) if cores == "*" else cores
    # two shuffle partitions per core: Spark's default of 200 is sized for a cluster, and on
    # local[2] made the exact request five times slower (515 s instead of 103 s at 1M rows)
    session = (SparkSession.builder.master(master)
               .config("spark.driver.memory", os.environ.get("MLEVAL_SPARK_MEMORY", "6g"))
               .config("spark.sql.shuffle.partitions", str(2 * int(cores)))
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


def _mllib(lake: Path) -> dict:
    """ROC AUC per (segment, label) by MLlib's evaluator, one group at a time."""
    from pyspark.ml.evaluation import BinaryClassificationEvaluator
    from pyspark.sql import functions as F

    frame = (_spark_session().read.parquet(str(lake))
             .select("segment", "label", "score", F.col("truth").cast("double").alias("truth")))
    evaluator = BinaryClassificationEvaluator(rawPredictionCol="score", labelCol="truth",
                                              metricName="areaUnderROC", numBins=0)
    out = {}
    for row in frame.select("segment", "label").distinct().collect():
        group = frame.filter((F.col("segment") == row.segment) & (F.col("label") == row.label))
        key = {"segment": row.segment, "metric": "roc_auc", "average": None,
               "label": row.label}
        out[_key(key)] = evaluator.evaluate(group)
    return out


def _sklearn(lake: Path, *, weighted: bool = False) -> dict:
    """The exact request's numbers per group by scikit-learn (``weighted``: with the lake's
    ``weight`` column as ``sample_weight``)."""
    import numpy as np
    import pyarrow.dataset as pads
    from sklearn.metrics import (
        average_precision_score,
        precision_recall_fscore_support,
        roc_auc_score,
    )

    dataset = pads.dataset(lake, format="parquet", partitioning="hive")
    out: dict[str, float] = {}
    for s in range(SEGMENTS):
        table = dataset.to_table(columns=["label", "score", "truth",
                                          *(["weight"] if weighted else [])],
                                 filter=pads.field("segment") == f"s{s}")
        label = table["label"].combine_chunks()
        codes = label.indices.to_numpy()
        names = label.dictionary.to_pylist()
        score = table["score"].to_numpy()
        truth = table["truth"].to_numpy()
        weight = table["weight"].to_numpy() if weighted else None
        per_label = {m: [] for m in DECISIONS}
        for j, name in enumerate(names):
            rows = codes == j
            y, p = truth[rows], score[rows]
            w = None if weight is None else weight[rows]
            out[f"s{s}|roc_auc|None|{name}"] = roc_auc_score(y, p, sample_weight=w)
            out[f"s{s}|average_precision|None|{name}"] = average_precision_score(
                y, p, sample_weight=w)
            prf = precision_recall_fscore_support(y, p >= 0.5, average="binary",
                                                  sample_weight=w)
            for metric, value in zip(DECISIONS, prf, strict=False):
                out[f"s{s}|{metric}|None|{name}|0.5"] = value
                per_label[metric].append(value)
        for metric, values in per_label.items():
            out[f"s{s}|{metric}|macro|None|0.5"] = float(np.mean(values))
    return out


def _sklearn_clusters(lake: Path) -> dict:
    import pyarrow.dataset as pads
    from sklearn import metrics as skm

    dataset = pads.dataset(lake, format="parquet", partitioning="hive")
    out: dict[str, float] = {}
    for s in range(SEGMENTS):
        table = dataset.to_table(columns=["truth", "cluster"],
                                 filter=pads.field("segment") == f"s{s}")
        truth, cluster = table["truth"].to_numpy(), table["cluster"].to_numpy()
        for metric in CLUSTER_METRICS:
            out[f"s{s}|{metric}|None|None"] = float(getattr(skm, f"{metric}_score")(truth,
                                                                                      cluster))
    return out


# -- the parent: time, memory, checks, report ---------------------------------------------------

def measure(step: str, lake: Path | str, memory_limit: str | None, label: str = "") -> dict:
    """Run ``step`` in a child (``<step>@1cpu``: on core 0 alone); its wall time, peak RSS and
    numbers."""
    base, _, cores = step.partition("@")
    cmd = [sys.executable, __file__, "--child", base, "--lake", str(lake)]
    if cores:
        cmd = ["taskset", "-c", "0", *cmd]
    if memory_limit:
        cmd += ["--memory-limit", memory_limit]
    run = in_child(step, cmd)
    output = json.loads(run.pop("output"))
    return {**run, "step": step + label, **output}


def in_child(step: str, cmd: list[str]) -> dict:
    """``cmd`` run as a child: its wall and CPU time, peak RSS (``wait4``: the child's own,
    not this process's) and what it printed."""
    start = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    output = child.stdout.read() if child.stdout else ""
    _, status, usage = os.wait4(child.pid, 0)
    seconds = time.perf_counter() - start
    if status != 0:
        raise SystemExit(f"step {step} failed (status {status})")
    return {"seconds": seconds, "cpu_seconds": usage.ru_utime + usage.ru_stime,
            "peak_rss_mib": usage.ru_maxrss / 1024, "output": output}


def median_run(runs: list[dict]) -> dict:
    """One step's repeated runs as one: median wall and CPU time, the largest peak RSS, the
    range of wall times, and every run's numbers (each is checked)."""
    walls = sorted(r["seconds"] for r in runs)
    return {**runs[0], "numbers": [r["numbers"] for r in runs], "seconds":
            statistics.median(walls), "wall_range": (walls[0], walls[-1]),
            "cpu_seconds": statistics.median(r["cpu_seconds"] for r in runs),
            "peak_rss_mib": max(r["peak_rss_mib"] for r in runs), "runs": len(runs),
            "stages": {k: statistics.median(r["stages"].get(k, 0.0) for r in runs)
                       for k in runs[0]["stages"]}}


def agreement(result: dict, oracle: dict) -> float:
    """The largest relative difference on the numbers both computed."""
    shared = set(result) & set(oracle)
    if not shared:
        raise SystemExit("no numbers in common with scikit-learn")
    return max(abs(result[k] - oracle[k]) / max(abs(oracle[k]), 1e-300) for k in shared)


def report(rows: list[dict], samples: int) -> str:
    by_step = {r["step"]: r for r in rows}
    lake = (f"{samples * LABELS:,} ({samples:,} samples x {LABELS} labels, {SEGMENTS} "
            f"segments); clustering: {samples:,} rows, {CLASSES} classes x {CLUSTERS} clusters")
    if all(r["step"] in CARDINALITY for r in rows):
        lake = f"{samples:,} (binary; many: a segment per row, few: {SEGMENTS} segments)"
    repeated = rows[0].get("runs", 1) > 1
    lines = [f"rows: {lake}" + (f"; median of {rows[0]['runs']} runs" if repeated else ""), "",
             "| step | wall s | CPU s | peak RSS MiB | sklearn / step | step / scan "
             "| max rel diff |" + (" wall s, min-max |" if repeated else ""),
             "|---|---:|---:|---:|---:|---:|---:|" + ("---:|" if repeated else "")]
    for r in rows:
        prefix = "cluster-" if r["step"].startswith("cluster-") else ""
        sk, scan = by_step.get(f"{prefix}sklearn"), by_step.get(f"{prefix}scan")
        if r["step"] in WEIGHTED_STEPS:  # the weighted lake's own oracle
            sk = by_step.get("wsklearn")
        vs_sk = f"{sk['seconds'] / r['seconds']:.2f}x" if sk else "-"
        vs_scan = f"{r['seconds'] / scan['seconds']:.2f}x" if scan else "-"
        diff = r.get("max_rel_diff")
        lines.append(f"| {r['step']} | {r['seconds']:.1f} | {r['cpu_seconds']:.1f} "
                     f"| {r['peak_rss_mib']:.0f} | {vs_sk} "
                     f"| {vs_scan} | {'-' if diff is None else f'{diff:.1e}'} |" +
                     (" {:.1f}-{:.1f} |".format(*r["wall_range"]) if repeated else ""))
    return "\n".join(lines)


#: Each interval step and the same request without ``ci`` that its cost is read against.
WITHOUT_CI = {"delong": "auc", "bootstrap": "pair", "wbootstrap": "wpair"}


def interval_ratios(rows: list[dict]) -> str:
    """Each interval step's wall and CPU time over the same request's without ``ci`` on the
    same engine (``bootstrap-duckdb / pair-duckdb``), where both ran."""
    by_step = {r["step"]: r for r in rows}
    lines = []
    for r in rows:
        kind, _, engine = r["step"].partition("-")
        plain = by_step.get(f"{WITHOUT_CI.get(kind)}-{engine}")
        if plain is not None:
            lines.append(f"  {r['step']} / {plain['step']}: "
                         f"{r['seconds'] / plain['seconds']:.1f}x wall, "
                         f"{r['cpu_seconds'] / plain['cpu_seconds']:.1f}x CPU")
    return "intervals against the request without ci:\n" + "\n".join(lines) if lines else ""


def stage_profile(rows: list[dict]) -> str:
    """Each mleval step's stages in its process (medians): seconds and share of the request's
    time there, the stages run within each in brackets, and the checks besides the reading of
    their input (the share the checks' target is about)."""
    lines = []
    for r in rows:
        stages = dict(r.get("stages") or {})
        request = stages.pop("request", 0.0)
        if not request:
            continue
        parts = []
        for name, seconds in stages.items():
            if " > " in name:
                continue
            inner = [f"{k[len(name) + 3:]} {v:.2f} s" for k, v in stages.items()
                     if k.startswith(f"{name} > ")]
            parts.append(f"{name} {seconds:.2f} s ({seconds / request:.0%})" +
                         (f" [{', '.join(inner)}]" if inner else ""))
        checks = sum(v for k, v in stages.items() if k.startswith("checks") and " > " not in k)
        reading = sum(v for k, v in stages.items() if k.startswith("checks")
                      and k.endswith(" > reading"))
        if checks:
            parts.append(f"checks besides reading {checks - reading:.2f} s "
                         f"({(checks - reading) / request:.0%})")
        lines.append(f"- {r['step']}: {request:.2f} s in process; " + "; ".join(parts))
    return "\n".join(["stages in process (medians):", *lines] if lines else [])


MAKERS = {"lake": make_lake, "cluster": make_cluster_lake, "segments": make_segments_table,
          "weighted": lambda folder, samples: make_lake(folder, samples, weighted=True)}


def made(kind: str, folder: Path, samples: int) -> Path:
    """``MAKERS[kind](folder, samples)``'s path, written by a child: the parent stays small,
    and a child started from it (by vfork) would count its peak as its own."""
    subprocess.run([sys.executable, __file__, "--make", kind, "--lake", str(folder),
                    "--samples", str(samples)], check=True)
    return folder / f"segments-{samples}.parquet" if kind == "segments" else folder


def compiled() -> None:
    """The package's bytecode written, as ``pip install`` writes it: a step's time is that of
    the installed package, not of compiling its source in every child (a checkout run with
    PYTHONDONTWRITEBYTECODE set, as on this project's machines, never caches it: 0.06 s of
    every mleval step's start). In a child: the parent stays small (see :func:`made`)."""
    import importlib.util

    spec = importlib.util.find_spec("mleval_sql")
    package = spec.submodule_search_locations[0] if spec and spec.submodule_search_locations \
        else None
    if package:
        subprocess.run([sys.executable, "-m", "compileall", "-q", package], check=True,
                       stdout=subprocess.DEVNULL)


def _positive(text: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"expected a whole number of at least 1, not {text!r}")
    return int(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=lambda s: int(s.replace("_", "")),
                        default=10_000_000, help="samples in the full lake (x 10 labels)")
    parser.add_argument("--scaling", default="", help="also run at these fractions of "
                        "--samples, e.g. 0.1,0.3,1 (default: only the full size)")
    parser.add_argument("--folder", type=Path, default=Path("/tmp/mleval-bench"))
    every = (*STEPS, *CLUSTER_STEPS, *CARDINALITY, *SPARK_STEPS, *CI_STEPS, *WEIGHTED_STEPS)
    parser.add_argument("--steps", default=",".join(STEPS),
                        help=f"comma-separated, of {', '.join(every)}")
    parser.add_argument("--memory-limit", default=None, help="e.g. 1GB, for both engines")
    parser.add_argument("--repeat", type=_positive, default=1, help="rounds of every step; "
                        "the report gives medians (and the range of wall times)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--make", help=argparse.SUPPRESS)
    parser.add_argument("--store", help="also read the lake from object storage under this "
                        "URL (s3://, gs://, az://), or from moto's S3 server on 127.0.0.1: "
                        "local-s3")
    parser.add_argument("--lake", help=argparse.SUPPRESS)
    parser.add_argument("--spark-master", default="local[2]",
                        help="the Spark steps' master, e.g. local[16]")
    args = parser.parse_args()
    os.environ["MLEVAL_SPARK_MASTER"] = args.spark_master
    if args.child:
        lake = args.lake if "://" in args.lake else Path(args.lake)
        numbers = run_step(args.child, lake, args.memory_limit)
        print(json.dumps({"numbers": numbers, "stages": STAGES}))
        return
    if args.make:
        MAKERS[args.make](Path(args.lake), args.samples)
        return
    compiled()
    store = local_s3() if args.store == "local-s3" else args.store
    fractions = [float(f) for f in args.scaling.split(",")] if args.scaling else [1.0]
    summary = []
    for fraction in fractions:
        samples = int(args.samples * fraction)
        steps = args.steps.split(",")
        lakes: dict[str, Path] = {}
        if set(steps) - set(CLUSTER_STEPS) - set(CARDINALITY) - set(WEIGHTED_STEPS):
            lakes["lake"] = made("lake", args.folder / f"lake-{samples}", samples)
        if set(steps) & set(WEIGHTED_STEPS):
            lakes["weighted"] = made("weighted", args.folder / f"weighted-{samples}", samples)
        if set(steps) & set(CLUSTER_STEPS):
            lakes["cluster"] = made("cluster", args.folder / f"clusters-{samples}", samples)
        if set(steps) & set(CARDINALITY):
            lakes["segments"] = made("segments", args.folder, samples)
        remote = upload_lake(lakes["lake"], store) if store and "lake" in lakes else None
        runs: dict[str, list[dict]] = {}
        for _ in range(args.repeat):  # rounds of every step: a drift of the machine hits all
            for step in steps:  # each step from the store right after the same on local disk
                which = "cluster" if step in CLUSTER_STEPS else "segments" \
                    if step in CARDINALITY else "weighted" if step in WEIGHTED_STEPS else "lake"
                run = measure(step, lakes[which], args.memory_limit)
                runs.setdefault(run["step"], []).append(run)
                if remote and step in STEPS and step not in ("sklearn", "scan"):
                    run = measure(step, remote, args.memory_limit, " @store")
                    runs.setdefault(run["step"], []).append(run)
        rows = [median_run(r) for r in runs.values()]
        oracles = {r["step"]: r["numbers"][0] for r in rows if r["step"].endswith("sklearn")}
        for r in rows:
            oracle = oracles.get("cluster-sklearn" if r["step"].startswith("cluster-")
                                 else "wsklearn" if r["step"].startswith("w") else "sklearn")
            if oracle and r["step"].startswith(("exact", "binned", "sweep", "threshold", "mllib",
                                                "cluster-duckdb", "cluster-polars", "auc",
                                                "delong", "pair", "bootstrap", "wpair",
                                                "wbootstrap")):
                r["max_rel_diff"] = max(agreement(n, oracle) for n in r["numbers"])
        print(report(rows, samples), "\n", flush=True)
        ratios = interval_ratios(rows)
        if ratios:
            print(ratios, "\n", flush=True)
        profile = stage_profile(rows)
        if profile:
            print(profile, "\n", flush=True)
        summary.append({"samples": samples, "steps": {r["step"]: r["seconds"] for r in rows}})
    if len(summary) > 1:
        print("growth with rows (seconds per million rows):")
        for s in summary:
            per = {k: v / (s["samples"] * LABELS / 1e6) for k, v in s["steps"].items()}
            print(f"  {s['samples'] * LABELS:>12,} rows: " +
                  ", ".join(f"{k} {v:.3f}" for k, v in per.items()))


if __name__ == "__main__":
    main()
