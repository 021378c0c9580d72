"""The ``mleval`` command line: evaluate parquet predictions, draw their curves, list the metrics,
print their SQL.

Usage::

    mleval evaluate preds/*.parquet --metric roc_auc,f1 --by region --format csv -o scores.csv
    mleval evaluate lake/ --metric f1 --by model --task multilabel --average macro --average micro
    mleval evaluate lake/ --metric precision,recall --by model --thresholds 0.3,0.5,0.7
    mleval evaluate preds.parquet --metric roc_auc --max-fpr 0.1 --metric calibration_error
    mleval evaluate clusters.parquet --task clustering --column cluster=pred --by model
    mleval curve lake/ --kind roc --by model -o roc.csv --plot roc.png
    mleval curve lake/ --kind sweep --bins 20 --by model --format json
    mleval check lake/ --by model --memory-limit 1GB
    mleval metrics
    mleval sql f1 --task multilabel --dialect spark
    mleval sql adjusted_rand
    mleval report examples/report.toml --output report/ --fail-on-alert

Bad input prints one line ``mleval: error: <message>`` on stderr and exits with status 2;
warnings raised while evaluating print as ``mleval: note: <message>``. Outputs are written whole
or not at all (``mleval_sql.outputs``); Ctrl-C (SIGINT) and SIGTERM stop a run with one line and
status 130 / 143, after removing its temporary files and spill folder.
"""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import duckdb
import polars as pl

import mleval_sql as me
from mleval_sql.api import DEFAULT_METRICS
from mleval_sql.engines import ENGINES
from mleval_sql.outputs import atomic_output, check_output
from mleval_sql.params import CURVE_PARAMS, DEFAULTS, PARAMS, Param
from mleval_sql.plot import INSTALL_HINT, PlotError, check_target, plot_curve
from mleval_sql.registry import AVERAGES, METRICS, Metric
from mleval_sql.reporting import add_command as add_report_command
from mleval_sql.schema import TASKS

PROG = "mleval"
FORMATS = ("table", "csv", "json", "parquet")
EXTENSIONS = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".txt": "table",
              ".table": "table"}
#: The parameters of ``evaluate`` given as flags of their own, after --threshold, the sweep's
#: --thresholds / --bins and --average.
EVALUATE_PARAMS = [p for p in PARAMS if p not in ("threshold", "thresholds", "bins")]
EXIT_ERROR = 2
T = TypeVar("T")

# Everything printed as a table shows all rows and columns in full, without shape or dtypes.
TABLE_CONFIG: dict[str, Any] = {
    "tbl_rows": -1, "tbl_cols": -1, "tbl_width_chars": -1, "fmt_str_lengths": 10_000,
    "tbl_hide_dataframe_shape": True, "tbl_hide_column_data_types": True,
    "tbl_hide_dtype_separator": True,
}


class UsageError(Exception):
    """A bad command line, reported like any other bad input."""


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the program is, as Ctrl-C raises KeyboardInterrupt, so that every
    ``finally`` and context manager cleans up on the way out."""


#: The signals that stop a run, and the exit status of each (128 + the signal's number).
STOP_SIGNALS = {signal.SIGINT: 130, signal.SIGTERM: 143}


@contextmanager
def _signals_raise() -> Iterator[list[int]]:
    """SIGINT and SIGTERM raise KeyboardInterrupt / Terminated (once: a second signal during
    the cleanup is ignored); yields the signals received. Does nothing off the main thread."""
    received: list[int] = []

    def stop(signum: int, _frame: object) -> None:
        if received:
            return
        received.append(signum)
        raise Terminated if signum == signal.SIGTERM else KeyboardInterrupt

    try:
        previous = {s: signal.signal(s, stop) for s in STOP_SIGNALS}
    except ValueError:  # not the main thread: leave the signals alone
        previous = {}
    try:
        yield received
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


class _Parser(argparse.ArgumentParser):
    # argparse prints the usage and exits on its own; report one line through main() instead
    def error(self, message: str) -> NoReturn:
        raise UsageError(message)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``mleval`` with ``argv`` (default: the process arguments); return the exit code."""
    parser = build_parser()
    notes = _Notes()
    log = logging.getLogger("mleval_sql")
    log.addHandler(notes)
    log.setLevel(logging.INFO)
    with _signals_raise() as received:
        try:
            args = parser.parse_args(argv)
            code = int(args.run(args))
            notes.flush_notes()
            return code
        except KeyboardInterrupt:
            return _stopped(received[0] if received else signal.SIGINT)
        except Exception as error:
            if received:  # an engine turned the signal into an error of its own
                return _stopped(received[0])
            if isinstance(error, (UsageError, me.InputError, PlotError, OSError,
                                  pl.exceptions.PolarsError, duckdb.Error)):
                # the engines' own complaints are about the input or the machine in practice
                return _error(str(error))
            raise
        finally:
            log.removeHandler(notes)


class _Notes(logging.Handler):
    """What the library logs (e.g. that counts are weighted) as ``mleval: note:`` lines, each
    once, after a run that succeeded (a failed run prints its error line alone)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.messages: dict[str, None] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.messages[record.getMessage()] = None

    def flush_notes(self) -> None:
        for message in self.messages:
            _say("note", message)
        self.messages.clear()


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand; each sets ``run`` to the function that carries it out."""
    parser = _Parser(prog=PROG, description="Evaluate ML predictions stored in long-format "
                     "tables (sample, label, score, truth[, weight]).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {me.__version__}")
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="{evaluate,curve,check,metrics,sql,report}")
    _add_evaluate(commands)
    _add_curve(commands)
    checking = commands.add_parser("check", help="only check the input (as every evaluation "
                                   "does first) and print its task")
    _add_source(checking)
    checking.set_defaults(run=run_check)
    listing = commands.add_parser("metrics", help="list the metrics, their tasks and averages")
    listing.set_defaults(run=run_metrics)
    query = commands.add_parser("sql", help="print one statement computing metrics over your "
                                "table, to paste into a BI tool, psql or spark.sql")
    query.add_argument("metric", nargs="*", help=f"default: {', '.join(DEFAULT_METRICS)}")
    query.add_argument("--task", choices=TASKS,
                       help="default: multilabel, or the metric's task when it has no multilabel "
                            "form (clustering)")
    query.add_argument("--average", action="append", choices=AVERAGES)
    query.add_argument("--dialect", default="duckdb",
                       help="any dialect sqlglot writes: duckdb, postgres, spark, trino, ...")
    query.add_argument("--table", default="predictions", help="the table or view to read")
    query.add_argument("--by", default="", help="segment columns, comma-separated")
    query.add_argument("--column", action="append", default=[], type=_column, metavar="ROLE=NAME",
                       help="where a canonical column is, e.g. score=prob; weight=w to weigh")
    query.add_argument("--param", action="append", default=[], type=_param, metavar="NAME=VALUE",
                       help="a parameter, e.g. threshold=0.3, thresholds=0.1,0.5, k=3")
    query.add_argument("--view", help="wrap the statement in CREATE VIEW NAME")
    kinds = query.add_mutually_exclusive_group()
    kinds.add_argument("--checks", action="store_true",
                       help="the input checks instead: one row per problem found")
    kinds.add_argument("--curve", choices=["roc", "pr", "sweep", "reliability"])
    query.set_defaults(run=run_sql)
    add_report_command(commands)
    return parser


def _add_evaluate(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("evaluate", help="compute metrics of parquet predictions")
    _add_source(cmd)
    cmd.add_argument("--metric", action="append", default=[], metavar="NAME",
                     help=f"repeatable or comma-separated (default: {','.join(DEFAULT_METRICS)})")
    _add_param(cmd, "threshold")
    _add_thresholds(cmd, "sweep the decision metrics over these thresholds, e.g. 0,0.25,0.5",
                    "sweep the decision metrics over thresholds 0, 1/N, ..., 1; ranking metrics "
                    "become one-pass approximations on that grid")
    cmd.add_argument("--average", action="append", choices=AVERAGES,
                     help="repeatable (default: none for binary, macro otherwise)")
    for name in EVALUATE_PARAMS:
        _add_param(cmd, name)
    cmd.add_argument("--wide", action="store_true",
                     help="one row per segment and label, one column per metric (and average) "
                          "instead of one row per value")
    _add_output(cmd)
    cmd.set_defaults(run=run_evaluate)


def _add_curve(commands: argparse._SubParsersAction) -> None:
    cmd = commands.add_parser("curve", help="tabulate (and plot) ROC, PR, sweep or "
                              "reliability curves per segment and label")
    _add_source(cmd)
    _add_param(cmd, "kind")
    _add_thresholds(cmd, "the thresholds of a sweep, e.g. 0,0.25,0.5",
                    "a sweep at thresholds 0, 1/N, ..., 1; roc and pr: approximate curves "
                    "on that grid")
    _add_param(cmd, "n_bins")
    drop = cmd.add_mutually_exclusive_group()
    drop.add_argument("--drop-intermediate", dest="drop_intermediate", action="store_true",
                      default=None, help="drop the points scikit-learn drops (default for roc)")
    drop.add_argument("--keep-intermediate", dest="drop_intermediate", action="store_false",
                      help="keep a point per distinct score (default for pr)")
    _add_output(cmd)
    cmd.add_argument("--plot", type=Path, metavar="FILE.png",
                     help=f"also draw the curves with matplotlib ({INSTALL_HINT})")
    cmd.set_defaults(run=run_curve)


def _add_source(cmd: argparse.ArgumentParser) -> None:
    """The options saying what to read and how: inputs, segments, task, engine, columns."""
    cmd.add_argument("inputs", nargs="+", metavar="INPUT",
                     help="parquet file, glob or hive-partitioned folder, local or s3://, gs://, "
                          "az://...; a Delta or Iceberg table (delta://LOCATION, "
                          "iceberg://CATALOG/NAMESPACE.TABLE, or detected from its folder)")
    cmd.add_argument("--by", action="append", default=[], metavar="COL",
                     help="segment columns, repeatable or comma-separated: --by model,dataset")
    cmd.add_argument("--task", choices=TASKS, help="default: inferred from the data")
    offered = [name for name, entry in ENGINES.items() if entry.offered]
    cmd.add_argument("--engine", choices=offered, default=offered[0],
                     help="spark: the active or a local SparkSession reads the parquet inputs, "
                          "or a table of its catalog named as the input")
    cmd.add_argument("--column", action="append", default=[], type=_column, metavar="ROLE=NAME",
                     help="where a role (sample, label, score, truth, weight; clustering: "
                          "sample, truth, cluster, weight) is found, e.g. score=prob or "
                          "cluster=pred; weight= ignores a weight column (repeatable)")
    cmd.add_argument("--memory-limit", metavar="SIZE", help="e.g. 1GB")
    cmd.add_argument("--storage-option", action="append", default=[], type=_storage_option,
                     metavar="KEY=VALUE", help="for object storage, beyond the cloud's "
                     "environment variables, e.g. aws_endpoint_url=http://127.0.0.1:9000 "
                     "(repeatable)")
    cmd.add_argument("--version", "--as-of", dest="as_of", metavar="N",
                     help="a Delta table's version or an Iceberg snapshot id (or an ISO "
                          "timestamp: the version then); default: the current one")


def _add_thresholds(cmd: argparse.ArgumentParser, thresholds_help: str, bins_help: str) -> None:
    """``--thresholds T,T,...`` or ``--bins N`` (thresholds 0, 1/N, ..., 1), not both."""
    sweep = cmd.add_mutually_exclusive_group()
    _add_param(sweep, "thresholds", thresholds_help)
    _add_param(sweep, "bins", bins_help)


def _add_param(cmd: argparse._ActionsContainer, name: str, help: str | None = None) -> None:
    """The flag of a parameter of :mod:`mleval_sql.params` (``--max-fpr X``), its type, choices,
    default and help from the parameter's declaration (``help``: in this command's words)."""
    param = PARAMS.get(name) or CURVE_PARAMS[name]
    text = help or _described(param)
    if param.default is not None or param.kind == "choice":
        text += f" (default: {_spelled(param.default)})"
    options: dict[str, Any] = {"default": param.default, "help": text,
                               "metavar": param.metavar}
    if param.kind == "choice":
        spelled = {_spelled(c): c for c in param.choices}
        options.update(type=lambda t: spelled.get(t, t), choices=param.choices,
                       metavar="{" + ",".join(spelled) + "}")
    else:
        options["type"] = {"number": float, "whole": int, "numbers": _floats}[param.kind]
    cmd.add_argument(param.flag, **options)


def _described(param: Param) -> str:
    """A parameter's help, led by the metrics that use it: ``"the k of top_k_accuracy,
    precision_at_k and recall_at_k: how many top-scored labels count"``."""
    users = [name for name, metric in METRICS.items() if param.name in metric.params]
    if not users:
        return param.help
    named = users[0] if len(users) == 1 else f"{', '.join(users[:-1])} and {users[-1]}"
    return f"the {param.name} of {named}: {param.help}"


def params_markdown() -> str:
    """The parameters as a Markdown table (the README's)."""
    rows = ["| parameter | flag | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{p.name}` | `{p.flag}` | `{_spelled(p.default)}` | {_described(p)} |"
             for p in PARAMS.values()]
    return "\n".join(rows) + "\n"


def _spelled(value: object) -> str:
    """A parameter's value as the command line writes it: 0.5, 1, null, arithmetic."""
    return "null" if value is None else f"{value:g}" if isinstance(value, float) else str(value)


def _add_output(cmd: argparse.ArgumentParser) -> None:
    cmd.add_argument("--format", choices=FORMATS,
                     help="default: from the extension of -o, else table")
    cmd.add_argument("-o", "--output", type=Path, metavar="FILE", help="default: stdout")


def _column(text: str) -> tuple[str, str | None]:
    role, sep, name = text.partition("=")
    if not sep or not role:
        raise argparse.ArgumentTypeError(f"expected ROLE=NAME, got {text!r}")
    return role.strip(), name.strip() or None


def _storage_option(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _floats(text: str) -> list[float]:
    """Comma-separated finite numbers: ``"0,0.25, 0.5"`` -> ``[0.0, 0.25, 0.5]``."""
    try:
        values = [float(part) for part in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated finite numbers such as "
                                         f"0,0.25,0.5, got {text!r}")
    return values


def run_evaluate(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    _check_outputs(args, args.output)
    emit(evaluate(args), fmt, args.output)
    return 0


def run_check(args: argparse.Namespace) -> int:
    task = _noting(me.check, list(args.inputs), **_source_options(args))
    sys.stdout.write(f"ok: {task}\n")
    return 0


def run_curve(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    if args.kind == "sweep" and args.thresholds is None and args.bins is None:
        raise UsageError("--kind sweep needs --thresholds T,T,... or --bins N")
    if args.plot is not None:
        check_target(args.plot)  # before the scan: a missing matplotlib should not cost one
    _check_outputs(args, args.output, args.plot)
    result = curve(args)
    if args.plot is None or args.output is not None or args.format is not None:
        emit(result, fmt, args.output)
    if args.plot is not None:
        plot_curve(result, args.kind, args.plot, by=_source_options(args)["by"],
                   areas=not (args.kind == "pr" and args.drop_intermediate))
        if args.output is None and args.format is None:  # the plot instead of a long table
            keys = [*_source_options(args)["by"], "label"]
            sys.stdout.write(f"wrote {args.plot}: {result.select(keys).n_unique()} curve(s), "
                             f"{result.height} points (-o FILE or --format for the table)\n")
    return 0


def _check_outputs(args: argparse.Namespace, *outputs: Path | None) -> None:
    """Before any work: every output can be written and is none of the inputs."""
    for output in outputs:
        if output is not None:
            check_output(output, inputs=args.inputs)


def emit(frame: pl.DataFrame, fmt: str, output: Path | None) -> None:
    """Write ``frame`` in ``fmt`` to ``output``, or to stdout when it is None."""
    if output is None:
        sys.stdout.write(render(frame, fmt))
    else:
        write(frame, fmt, output)


def output_format(fmt: str | None, output: Path | None) -> str:
    """The format asked for, else the one the output's extension names, else ``table``."""
    if output is not None and fmt is None:
        fmt = EXTENSIONS.get(output.suffix.lower())
        if fmt is None:
            raise UsageError(f"cannot tell the format of {str(output)!r} from its extension "
                             f"({', '.join(EXTENSIONS)}); pass --format")
    fmt = fmt or "table"
    if fmt == "parquet" and output is None:
        raise UsageError("--format parquet needs -o FILE")
    return fmt


def evaluate(args: argparse.Namespace) -> pl.DataFrame:
    """``mleval_sql.evaluate`` with the command line's arguments, its warnings shown as notes."""
    options: dict[str, Any] = {
        **_source_options(args), **{name: getattr(args, name) for name in PARAMS},
        "average": args.average, "wide": args.wide,
    }
    metrics = [name.strip() for arg in args.metric for name in arg.split(",") if name.strip()]
    if metrics:
        options["metrics"] = metrics
    return _noting(me.evaluate, list(args.inputs), **options)


def curve(args: argparse.Namespace) -> pl.DataFrame:
    """``mleval_sql.curve`` with the command line's arguments, its warnings shown as notes."""
    return _noting(me.curve, list(args.inputs), args.kind, **_source_options(args),
                   thresholds=args.thresholds, bins=args.bins, n_bins=args.n_bins,
                   drop_intermediate=args.drop_intermediate)


def _source_options(args: argparse.Namespace) -> dict[str, Any]:
    by = [name.strip() for arg in args.by for name in arg.split(",") if name.strip()]
    options = {"by": by, "task": args.task, "engine": args.engine,
               "columns": dict(args.column), "memory_limit": args.memory_limit}
    if args.storage_option:  # only where given: object storage and tables take them
        options["storage_options"] = dict(args.storage_option)
    if args.as_of is not None:
        options["as_of"] = args.as_of
    return options


def _noting(run: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``run(*args, **kwargs)``, printing each distinct warning it raised as a note."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return run(*args, **kwargs)
        finally:
            for message in dict.fromkeys(str(w.message) for w in caught):
                _say("note", message)


def render(frame: pl.DataFrame, fmt: str) -> str:
    """``frame`` as text in ``fmt`` (table, csv or json), ending with a newline."""
    if fmt == "csv":
        return frame.write_csv()
    text = frame.write_json() if fmt == "json" else table(frame)
    return text + "\n"


def write(frame: pl.DataFrame, fmt: str, path: Path) -> None:
    """Write ``frame`` to ``path`` in ``fmt``, whole or not at all."""
    with atomic_output(path) as part:
        if fmt == "parquet":
            frame.write_parquet(part)
        elif fmt == "csv":
            frame.write_csv(part)
        elif fmt == "json":
            frame.write_json(part)
        else:
            part.write_text(render(frame, fmt), encoding="utf-8")


def table(frame: pl.DataFrame) -> str:
    """Every row and column of ``frame``, aligned by polars."""
    with pl.Config(**TABLE_CONFIG):
        return str(frame)


#: ``mleval metrics`` fits a terminal this wide
METRICS_WIDTH = 100


def run_metrics(args: argparse.Namespace) -> int:
    sys.stdout.write(metrics_text())
    return 0


def metrics_text(width: int = METRICS_WIDTH) -> str:
    """Every metric: its name, then its summary, tasks, averages and parameters wrapped beside
    it.

    >>> print(metrics_text().splitlines()[0])
    tp                               true positives: weight of true labels predicted positive
    """
    indent = " " * (max(map(len, METRICS)) + 2)
    blocks = []
    for m in METRICS.values():
        wrap = textwrap.TextWrapper(width - len(indent), break_on_hyphens=False).wrap
        params = f"; parameters: {', '.join(m.params)}" if m.params else ""
        lines = [*wrap(m.summary),
                 *wrap(f"tasks: {', '.join(_tasks(m))}; averages: {averages_text(m)}{params}")]
        blocks.append("\n".join(f"{(m.name if i == 0 else ''):<{len(indent)}}{line}"
                                for i, line in enumerate(lines)))
    return "\n".join(blocks) + "\n"


def _tasks(metric: Metric) -> list[str]:
    return [t for t in TASKS if t in metric.families]


def averages_text(metric: Metric) -> str:
    """The averages of ``metric``, naming the tasks of those not every task of it has.

    >>> averages_text(METRICS["accuracy"])
    'none, micro, macro, weighted, macro_std (binary, multilabel)'
    """
    tasks = _tasks(metric)
    groups: list[tuple[list[str], list[str]]] = []  # (averages, tasks having them), in order
    for average in AVERAGES:
        having = [t for t in tasks if average in metric.averages(t)]
        if not having:
            continue
        if groups and groups[-1][1] == having:
            groups[-1][0].append(average)
        else:
            groups.append(([average], having))
    parts = [", ".join(names) + ("" if having == tasks else f" ({', '.join(having)})")
             for names, having in groups]
    return "; ".join(parts) or "-"


def _param(text: str) -> tuple[str, object]:
    name, sep, value = text.partition("=")
    if not sep or name not in DEFAULTS:
        raise argparse.ArgumentTypeError(f"expected NAME=VALUE with NAME one of "
                                         f"{', '.join(sorted(DEFAULTS))}, got {text!r}")
    if name == "thresholds":
        return name, [float(v) for v in value.split(",")]
    if value.lower() in ("null", "none"):
        return name, None
    if value.lower() in ("true", "false"):
        return name, value.lower() == "true"
    return name, int(value) if value.lstrip("-").isdigit() else float(value)


def run_sql(args: argparse.Namespace) -> int:
    by = [c for c in args.by.split(",") if c]
    text = me.sql(args.metric or DEFAULT_METRICS, task=args.task, average=args.average,
                  dialect=args.dialect, table=args.table, by=by, columns=dict(args.column),
                  view=args.view, checks=args.checks, curve=args.curve, **dict(args.param))
    sys.stdout.write(text.rstrip("\n") + "\n")
    return 0


def _say(kind: str, message: str) -> None:
    # one line whatever the message: engine errors can span several
    print(f"{PROG}: {kind}: {' '.join(message.split())}", file=sys.stderr)


def _error(message: str) -> int:
    _say("error", message)
    return EXIT_ERROR


def _stopped(signum: int) -> int:
    print(f"{PROG}: stopped by {signal.Signals(signum).name}", file=sys.stderr)
    return STOP_SIGNALS[signal.Signals(signum)]


if __name__ == "__main__":
    sys.exit(main())
