"""Reporting jobs: a TOML job in, a folder of tables and a self-contained HTML report out.

``mleval report JOB.toml --output DIR`` and ``mleval_sql.report(JOB, DIR)`` compute every table
first, render the charts and the page, and only then write, each file atomically (a temporary
file renamed into place): a run that fails leaves the previous run's files as they were. The
same inputs give the same files, but for the run times in ``report.html`` and ``summary.json``.

Files in DIR: ``metrics.parquet`` / ``.csv`` (tidy, with the baseline and the delta),
``wide.parquet`` / ``.csv`` (one row per model x segment, one column per metric),
``curve_<kinds>.parquet`` (``curve_roc_pr``: one table of points draws both, at most
``max_points`` a curve), ``slices.parquet`` / ``.csv`` ([slices]), ``drift.parquet`` /
``.csv`` ([drift]), ``fairness_groups.parquet``, ``fairness_summary.parquet`` and
``fairness_disparities.parquet`` ([fairness]), ``alerts.csv``,
``summary.json`` and ``report.html``. With a [window], the tables are of the latest window,
and ``windows.parquet`` holds every window's metric rows with their segment's samples and
weight (the trends' rows).

>>> import mleval_sql as me
>>> outcome = me.report("examples/report.toml", "report/")  # doctest: +SKIP
>>> outcome.alerts  # doctest: +SKIP
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import polars as pl

from mleval_sql.outputs import atomic_output, check_folder
from mleval_sql.registry import scoped
from mleval_sql.reporting.job import Job, JobError

__all__ = ["Job", "JobError", "Outcome", "add_command", "report"]

#: Exit status of ``mleval report --fail-on-alert`` when a rule fired (errors exit with 2).
EXIT_ALERT = 1
VERSIONED = ("mleval_sql", "polars", "duckdb", "pyarrow", "matplotlib", "jinja2")


@dataclass(frozen=True)
class Outcome:
    """What a run wrote: the folder, its files, and the alerts that fired (a list of dicts)."""

    output: Path
    files: list[Path]
    alerts: list[dict[str, Any]]
    summary: dict[str, Any]


@scoped
def report(job: str | os.PathLike[str] | Mapping[str, Any] | Job,
           output: str | os.PathLike[str], *, progress: bool | None = None,
           full_refresh: bool = False) -> Outcome:
    """Run ``job`` (a TOML file, its parsed dict, or a :class:`Job`) and write its outputs into
    the folder ``output`` (created if needed). ``progress``: stage messages on stderr (default:
    when stderr is a terminal). ``full_refresh``: a job with a [history] recomputes every
    window (and starts over a history another job or layout wrote), not only those whose
    inputs or request changed.

    >>> report("examples/report.toml", "report/").alerts  # doctest: +SKIP
    """
    from mleval_sql.reporting.charts import require_matplotlib
    from mleval_sql.reporting.html import environment, render_html
    from mleval_sql.reporting.run import Progress, run, stages, wide_table

    require_matplotlib(), environment()  # a missing extra fails before any scan
    if not isinstance(job, Job):
        job = Job.from_dict(job) if isinstance(job, Mapping) else Job.load(job)
    output = check_folder(output, inputs=[p for s in job.sources for p in s.paths])
    steps = Progress(stages(job) + 3, show=progress)
    result = run(job, steps, full_refresh=full_refresh)
    steps.stage("drawing the report")
    versions = _versions()
    page = render_html(result, versions)
    steps.stage("writing")
    wide = wide_table(result)
    timings = steps.finish()
    summary = _summary(result, versions, timings)
    output.mkdir(parents=True, exist_ok=True)
    files: dict[str, Any] = {
        "metrics.parquet": result.metrics.write_parquet,
        "metrics.csv": result.metrics.write_csv,
        "wide.parquet": wide.write_parquet,
        "wide.csv": wide.write_csv,
        "alerts.csv": result.alerts.write_csv,
        **{f"{stem}.parquet": table.write_parquet
           for stem, table in sorted(result.curve_files().items())},
        **({"slices.parquet": result.slices.write_parquet,
            "slices.csv": result.slices.write_csv} if result.slices is not None else {}),
        **({"drift.parquet": result.drift.write_parquet,
            "drift.csv": result.drift.write_csv} if result.drift is not None else {}),
        **({"windows.parquet": result.trend.write_parquet} if result.trend is not None
           else {}),
        **{f"fairness_{name}.parquet": table.write_parquet
           for name, table in (result.fairness or {}).items()},
    }
    written = []
    for name, write in files.items():
        with atomic_output(output / name) as part:
            write(part)
        written.append(output / name)
    with atomic_output(output / "summary.json") as part:
        part.write_text(json.dumps(summary, indent=2, sort_keys=False, default=str) + "\n",
                        encoding="utf-8")
    written.append(output / "summary.json")
    with atomic_output(output / "report.html") as part:
        part.write_text(_with_timings(page, timings), encoding="utf-8")
    written.append(output / "report.html")
    _drop_stale(output, written)
    return Outcome(output, written, summary["alerts"], summary)


#: The names of the files a report writes: in its folder, one of these that a run did not
#: write is an earlier run's (a curve kind or [slices] since dropped) and is removed.
OWN_FILES = ("metrics.parquet", "metrics.csv", "wide.parquet", "wide.csv", "alerts.csv",
             "curve_*.parquet", "slices.parquet", "slices.csv", "drift.parquet", "drift.csv",
             "windows.parquet", "fairness_*.parquet")


def _drop_stale(output: Path, written: list[Path]) -> None:
    """Remove the report's own files in ``output`` that this run did not write, so that the
    folder never mixes two runs' tables; any other file is left alone."""
    keep = {p.name for p in written}
    for pattern in OWN_FILES:
        for path in output.glob(pattern):
            if path.name not in keep and path.is_file():
                path.unlink()


def _with_timings(page: str, timings: Mapping[str, float]) -> str:
    """The page with the final run times (known only once everything else is drawn)."""
    start = page.index('<dl id="run-time">')
    end = page.index("</dl>", start)
    items = "".join(f"<dt>{name}</dt><dd>{seconds:.2f} s</dd>\n"
                    for name, seconds in timings.items())
    return page[:start] + '<dl id="run-time">\n' + items + page[end:]


def _versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def _summary(result: Any, versions: Mapping[str, str],
             timings: Mapping[str, float]) -> dict[str, Any]:
    job = result.job
    alerts = result.alerts.with_columns(pl.col(pl.Float64).fill_nan(None)).to_dicts()
    return {
        "title": job.title,
        "ok": not alerts,
        "alerts": alerts,
        "rules": [{"key": r.key, "rule": r.describe(), "significant": r.significant}
                  for r in job.rules],
        "tests": result.tests,
        "fdr": job.fdr,
        "intervals": _intervals(result),
        "task": result.task,
        "engine": job.engine,
        "reproducible": job.reproducible,
        "memory_limit": job.memory_limit,
        "job": os.fspath(job.file) if job.file else None,
        "metrics": job.metrics,
        "averages": job.average,
        "options": job.options,
        "estimation": None if job.estimation is None else job.estimation.options(),
        "segmentations": [list(s.columns) for s in job.segmentations],
        "segment_columns": job.names,
        "curves": {"kinds": job.curves, "max_points": job.max_points,
                   "files": sorted(f"{stem}.parquet" for stem in result.curve_files())},
        "slices": None if job.slices is None else {
            "metric": job.slices.metric, "over": list(job.slices.over),
            **job.slices.options, "found": result.slices.height},
        "drift": None if job.drift is None or result.drift is None else {
            **{k: v for k, v in job.drift.options.items()}, "statistic": job.drift.statistic,
            "rows": result.drift.height},
        "fairness": None if job.fairness is None or result.fairness is None else {
            "metrics": list(job.fairness.metrics), "sensitive": list(job.fairness.sensitive),
            "by": list(job.fairness.by), **job.fairness.options,
            "gaps": result.fairness["summary"].height},
        "models": sorted(result.sizes["model"].unique().to_list()),
        "segments": result.sizes.height,
        "segments_too_small": int((~result.sizes["judged"]).sum()),
        "baseline": None if job.baseline is None else {
            "path": None if job.baseline.path is None else os.fspath(job.baseline.path),
            "model": job.baseline.model, "previous": job.baseline.previous,
            "window": job.baseline.window},
        "window": None if job.window is None else {
            "column": job.window.column, "every": list(job.window.every),
            "time_zone": job.window.time_zone,
            "windows": 0 if result.trend is None else result.trend.select(
                "granularity", "window_start").n_unique()},
        "night": result.night,
        "inputs": result.inputs,
        "versions": dict(versions),
        "seconds": {k: round(v, 3) for k, v in timings.items()},
    }


def _intervals(result: Any) -> dict[str, Any] | None:
    """The intervals' options and how many values each method gave; null without ``ci``."""
    options = result.job.options
    if options.get("ci") is None:
        return None
    methods: dict[str, int] = {}
    if "ci_method" in result.metrics.columns:
        counts = result.metrics.filter(pl.col("ci_method").is_not_null()).group_by(
            "ci_method").len().sort("ci_method")
        methods = {name: int(n) for name, n in counts.iter_rows()}
    return {"ci": options["ci"], "resamples": options["resamples"], "seed": options["seed"],
            "methods": methods}


def add_command(commands: argparse._SubParsersAction) -> None:
    """The ``mleval report`` subcommand."""
    cmd = commands.add_parser("report", help="run a reporting job (TOML): tables, alerts and "
                              "a self-contained HTML report")
    cmd.add_argument("job", type=Path, metavar="JOB.toml")
    cmd.add_argument("-o", "--output", type=Path, required=True, metavar="DIR",
                     help="the folder to write into (created if needed)")
    cmd.add_argument("--fail-on-alert", action="store_true",
                     help=f"exit with status {EXIT_ALERT} when a rule fired")
    cmd.add_argument("--full-refresh", action="store_true",
                     help="with a [history]: recompute every window, not only those whose "
                          "inputs or request changed")
    cmd.set_defaults(run=_run_command)


def _run_command(args: argparse.Namespace) -> int:
    import sys

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outcome = report(args.job, args.output, full_refresh=args.full_refresh)
    for message in dict.fromkeys(" ".join(str(w.message).split()) for w in caught):
        print(f"mleval: note: {message}", file=sys.stderr)
    n = len(outcome.alerts)
    print(f"{outcome.output / 'report.html'}: {n} alert{'s' if n != 1 else ''}"
          f"{'' if n else ' (ok)'}", file=sys.stderr)
    return EXIT_ALERT if n and args.fail_on_alert else 0
