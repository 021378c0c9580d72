"""Benchmark: the statements ``mleval sql`` prints, pasted into PostgreSQL and DuckDB, against
the query an analyst writes by hand for the same metric.

    python benchmarks/sql.py                                   # 1M rows, both databases
    python benchmarks/sql.py --rows 1_000_000,10_000_000 --postgres-max-rows 1_000_000

The table: binary predictions (``id, seg, score, truth``; no label column, no weights), 8
segments, scores rounded to 4 decimals (ties), 30% positives. PostgreSQL is the server the
tests start (``tests/servers.py``: a temporary data directory, a Unix socket, the server's
default settings), the table loaded over ADBC and analysed; DuckDB an in-memory table. Each
query runs ``--repeat`` times in turn, after one warm-up run; the report gives the median wall
time, its range and the ratio of each statement's median to the rank-sum query's. Queries:

- ``rank-sum``: the textbook ROC AUC, Mann-Whitney's U from average ranks (``rank()`` and a
  count of the rows up to each score, one window per segment, one GROUP BY);
- ``roc_auc``: ``me.sql(["roc_auc"], ...)`` as pasted;
- ``roc_auc+ap+f1``: ``me.sql(["roc_auc", "average_precision", "f1"], ...)`` as pasted.

Every statement's values are checked against scikit-learn's per segment (within 1e-9).
``--output FILE`` writes the figures as JSON (docs/performance/sql.json).
"""

from __future__ import annotations

import argparse
import datetime
import json
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import polars as pl

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.servers

import mleval_sql as me
from tests.servers import running_postgres

SEGMENTS = 8
COLUMNS = {"sample": "id", "label": None}
THREE = ["roc_auc", "average_precision", "f1"]
#: Mann-Whitney's U over average ranks: (rank + rows up to the score) / 2 is the mean of the
#: 1-based ranks of the rows tied at that score.
RANK_SUM = """
SELECT seg, (sum(CASE WHEN truth THEN r END)
             - count(*) FILTER (WHERE truth) * (count(*) FILTER (WHERE truth) + 1) / 2.0)
            / (count(*) FILTER (WHERE truth) * count(*) FILTER (WHERE NOT truth)) AS roc_auc
FROM (
    SELECT seg, truth, (rank() OVER w + count(*) OVER w) / 2.0 AS r
    FROM preds
    WINDOW w AS (PARTITION BY seg ORDER BY score)
) AS ranked
GROUP BY seg
ORDER BY seg
"""


def table(rows: int, seed: int = 0) -> pl.DataFrame:
    """``rows`` binary predictions in :data:`SEGMENTS` segments, scores with ties."""
    rng = np.random.default_rng(seed)
    truth = rng.random(rows) < 0.3
    score = np.round(np.clip(rng.normal(0.4 + 0.2 * truth, 0.2), 0, 1), 4)
    seg = np.char.add("s", rng.integers(0, SEGMENTS, rows).astype(str))
    return pl.DataFrame({"id": np.arange(rows), "seg": seg, "score": score, "truth": truth})


def sklearn_values(frame: pl.DataFrame) -> dict[tuple[str, str], float]:
    """scikit-learn's roc_auc, average_precision and f1 at 0.5 per segment."""
    from sklearn.metrics import average_precision_score, f1_score, roc_auc_score

    out = {}
    for (seg,), part in frame.partition_by("seg", as_dict=True).items():
        y, s = part["truth"].to_numpy(), part["score"].to_numpy()
        out[(seg, "roc_auc")] = roc_auc_score(y, s)
        out[(seg, "average_precision")] = average_precision_score(y, s)
        out[(seg, "f1")] = f1_score(y, s >= 0.5)
    return out


def queries(dialect: str) -> dict[str, str]:
    options: dict[str, Any] = {"task": "binary", "dialect": dialect, "table": "preds",
                               "by": "seg", "columns": COLUMNS, "no_weight": True}
    return {"rank-sum": RANK_SUM, "roc_auc": me.sql(["roc_auc"], **options),
            "roc_auc+ap+f1": me.sql(THREE, **options)}


def check(name: str, rows: list[tuple], want: dict[tuple[str, str], float]) -> float:
    """The largest difference of a query's values from scikit-learn's (raises past 1e-9)."""
    if name == "rank-sum":
        got = {(seg, "roc_auc"): value for seg, value in rows}
    else:
        got = {(row[0], row[1]): row[-1] for row in rows}
    worst = max(abs(float(got[k]) - v) for k, v in want.items() if k in got)
    if worst > 1e-9 or not got:
        raise SystemExit(f"{name}: values differ from scikit-learn's by {worst}")
    return worst


def bench(database: str, run: Callable[[str], list[tuple]], dialect: str,
          want: dict[tuple[str, str], float], repeat: int) -> list[dict[str, Any]]:
    """Each query once to warm up and check, then ``repeat`` rounds of every query in turn
    (a load that comes and goes weighs on each alike)."""
    texts = queries(dialect)
    checked = {name: check(name, run(text), want) for name, text in texts.items()}
    times: dict[str, list[float]] = {name: [] for name in texts}
    for _ in range(repeat):
        for name, text in texts.items():
            start = time.perf_counter()
            run(text)
            times[name].append(time.perf_counter() - start)
    base = statistics.median(times["rank-sum"])
    return [{"database": database, "query": name,
             "median_s": round(statistics.median(spent), 3),
             "min_s": round(min(spent), 3), "max_s": round(max(spent), 3),
             "ratio": round(statistics.median(spent) / base, 2),
             "max_abs_diff": checked[name]} for name, spent in times.items()]


def on_duckdb(frame: pl.DataFrame, want: dict[tuple[str, str], float],
              repeat: int) -> list[dict[str, Any]]:
    con = duckdb.connect()
    con.execute("CREATE TABLE preds AS SELECT * FROM frame")
    return bench("duckdb", lambda q: con.sql(q).fetchall(), "duckdb", want, repeat)


def on_postgres(frame: pl.DataFrame, want: dict[tuple[str, str], float],
                repeat: int) -> list[dict[str, Any]]:
    import adbc_driver_postgresql.dbapi as pg

    with running_postgres(port=54339) as server, pg.connect(server.uri, autocommit=True) as con:
        with con.cursor() as cursor:
            cursor.adbc_ingest("preds", frame.to_arrow(), mode="create")
            cursor.execute("ANALYZE preds")

        def run(text: str) -> list[tuple]:
            with con.cursor() as cursor:
                cursor.execute(text)
                return cursor.fetchall()
        return bench("postgres", run, "postgres", want, repeat)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="1_000_000", help="comma-separated table sizes")
    parser.add_argument("--postgres-max-rows", type=lambda s: int(s.replace("_", "")),
                        default=1_000_000, help="larger tables run in DuckDB only")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--output", type=Path, help="write the figures as JSON")
    args = parser.parse_args(argv)
    runs = []
    for rows in (int(r.replace("_", "")) for r in args.rows.split(",")):
        frame = table(rows)
        want = sklearn_values(frame)
        results = on_duckdb(frame, want, args.repeat)
        if rows <= args.postgres_max_rows:
            results += on_postgres(frame, want, args.repeat)
        for r in results:
            print(f"{rows:>11,} {r['database']:<9} {r['query']:<14} {r['median_s']:>7.3f} s "
                  f"({r['min_s']:.3f}-{r['max_s']:.3f}) {r['ratio']:>5.2f}x  "
                  f"|diff| {r['max_abs_diff']:.1e}", flush=True)
        runs.append({"rows": rows, "segments": SEGMENTS, "results": results})
    if args.output:
        args.output.write_text(json.dumps({
            "date": datetime.date.today().isoformat(),
            "machine": f"{platform.processor() or platform.machine()}, {platform.system()}",
            "command": " ".join(argv if argv is not None else sys.argv[1:]),
            "repeat": args.repeat, "runs": runs}, indent=1) + "\n")


if __name__ == "__main__":
    main()
