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
    mleval fairness lake/ --metric demographic_parity_ratio --sensitive sex --by model --ci 0.95
    mleval metrics
    mleval sql --metric f1 --task multilabel --dialect spark --threshold 0.3 -o f1.sql
    mleval sql --metric adjusted_rand
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

import polars as pl

import mleval_sql as me
from mleval_sql.engines import ENGINES, errors_of
from mleval_sql.outputs import atomic_output, check_output
from mleval_sql.params import CURVE_PARAMS, PARAMS, Param
from mleval_sql.plot import CURVE_COLUMNS, INSTALL_HINT, PlotError, check_target, plot_curve
from mleval_sql.registry import AVERAGES, DECLARED_FAMILIES, METRICS, Metric, kept
from mleval_sql.reporting import add_command as add_report_command
from mleval_sql.request import OPTIONS, Action, Option, actions_of, declare_for
from mleval_sql.schema import TASKS

PROG = "mleval"
FORMATS = ("table", "csv", "json", "parquet")
EXTENSIONS = {".csv": "csv", ".json": "json", ".parquet": "parquet", ".txt": "table",
              ".table": "table"}
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
            if isinstance(error, (UsageError, me.InputError, PlotError, OSError)):
                return _error(str(error))
            said = errors_of(error)
            if said is not None:
                # the engines' own complaints are about the input or the machine in practice
                return _error(said.cause_of(error))
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
    """The parser of every subcommand; each sets ``run`` to the function that carries it out.
    The flags of a request are the same on every subcommand that takes one, generated from
    :data:`mleval_sql.request.OPTIONS` and :data:`mleval_sql.params.PARAMS`."""
    parser = _Parser(prog=PROG, description="Evaluate ML predictions stored in long-format "
                     "tables (sample, label, score, truth[, weight]).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {me.__version__}")
    commands = parser.add_subparsers(dest="command", required=True,
                                     metavar="{evaluate,curve,compare,slices,check,drift,"
                                             "fairness,metrics,sql,report,history}")
    for action, help_text, run in REQUESTS:  # the commands that read inputs: one grammar
        cmd = commands.add_parser(action, help=help_text)
        _add_inputs(cmd)
        if action == "slices":
            cmd.add_argument("--metric", dest="slice_metric", default="error_rate",
                             metavar="NAME", help="error_rate, log_loss, brier_score, mse, mae "
                             "(SliceLine's score), or any metric (ranked by its value) "
                             "(default: error_rate)")
        _add_request(cmd, action, skip=("metrics",) if action == "slices" else ())
        if action != "check":
            _add_output(cmd)
        if action == "curve":
            cmd.add_argument("--plot", type=Path, metavar="FILE.png",
                             help=f"also draw the curves with matplotlib ({INSTALL_HINT})")
        cmd.set_defaults(run=run)

    _add_fairness(commands)

    cmd = commands.add_parser("metrics", help="list the metrics, their tasks and averages "
                              "(and the declared ones, MLEVAL_METRICS's and --define's, with "
                              "their expressions)")
    cmd.add_argument("--define", action="append", type=_pair, metavar="NAME=EXPR",
                     help=OPTIONS["define"].help + " (repeatable)")
    cmd.set_defaults(run=run_metrics)

    cmd = commands.add_parser("history", help="the values a report job with a [history] "
                              "has kept, every window's, as a table")
    cmd.add_argument("path", metavar="PATH", help="the history's folder (or delta://LOCATION)")
    _add_output(cmd)
    cmd.set_defaults(run=run_history)

    cmd = commands.add_parser("sql", help="print one statement computing metrics over your "
                              "table, to paste into a BI tool, psql or spark.sql")
    _add_request(cmd, "evaluate", statement=True)
    kinds = cmd.add_mutually_exclusive_group()
    kinds.add_argument("--checks", action="store_true",
                       help="the input checks instead of metrics: one row per problem found")
    kinds.add_argument("--curve", dest="kind", choices=OPTIONS["kind"].choices,
                       help="a curve instead of metrics, the rows of `mleval curve --kind`")
    _add_request(cmd, "curve", statement=True, skip=("kind",))
    _add_request(cmd, "slices", statement=True)  # --over: the weakest slices instead
    kinds.add_argument("--drift", action="store_true", help="the drift of --compared columns "
                       "against --reference instead: a table, or COL=VALUE (the table's own "
                       "rows), the statistics of `mleval drift` without its p-values")
    _add_request(cmd, "drift", statement=True)
    cmd.add_argument("--dialect", default="duckdb",
                     help="any dialect sqlglot writes: duckdb, postgres, spark, trino, ... "
                          "(default: duckdb)")
    cmd.add_argument("--table", default="predictions",
                     help="the table or view to read (default: predictions)")
    cmd.add_argument("--view", metavar="NAME",
                     help="wrap the statement in CREATE OR REPLACE VIEW NAME (a redeploy "
                          "replaces it)")
    cmd.add_argument("-o", "--output", type=Path, metavar="FILE", help="default: stdout")
    cmd.set_defaults(run=run_sql)
    add_report_command(commands)
    return parser


def _add_inputs(cmd: argparse.ArgumentParser) -> None:
    """The inputs of a command that reads predictions."""
    cmd.add_argument("inputs", nargs="+", metavar="INPUT",
                     help="parquet file, glob or hive-partitioned folder, local or s3://, gs://, "
                          "az://...; a Delta or Iceberg table (delta://LOCATION, "
                          "iceberg://CATALOG/NAMESPACE.TABLE, or detected from its folder)")


#: Flags spelled otherwise than their option: one metric or column a flag, repeated.
FLAGS = {"metrics": "--metric", "columns": "--column", "storage_options": "--storage-option"}


def _add_request(cmd: argparse.ArgumentParser, action: Action, *, statement: bool = False,
                 skip: Sequence[str] = ()) -> None:
    """The flags of every option ``action`` takes (``statement``: those ``mleval sql``
    takes), not yet added to ``cmd``: each option's flag, help and kind from its one
    declaration; a list takes the flag repeated or a comma-separated list."""
    present = {a.dest for a in cmd._actions}
    for option in OPTIONS.values():
        if action not in option.command_actions or option.name in present \
                or option.name in skip or not _at_door(option, statement):
            continue
        flag = FLAGS.get(option.name, option.flag)
        if option.name == "drop_intermediate":
            drop = cmd.add_mutually_exclusive_group()
            drop.add_argument("--drop-intermediate", dest="drop_intermediate",
                              action="store_true", default=None,
                              help="drop the points scikit-learn drops (default for roc)")
            drop.add_argument("--keep-intermediate", dest="drop_intermediate",
                              action="store_false",
                              help="keep a point per distinct score (default for pr)")
            continue
        spec: dict[str, Any] = {"dest": option.name, "help": option.help,
                                "metavar": option.metavar}
        if option.arity == "switch":
            spec.update(action="store_true", default=None)
            spec.pop("metavar")
        elif option.arity == "list":
            spec.update(action="append", type=_listed)
            spec["help"] += " (repeatable or comma-separated)"
        elif option.arity == "pairs":
            spec.update(action="append", type=_pair)
            spec["help"] += " (repeatable)"
        elif option.name == "engine":  # the engines the command line offers; none given:
            offered = [name for name, entry in ENGINES.items() if entry.offered]  # chosen
            spec.update(choices=offered, default=None, metavar=None)
        elif option.choices:
            spec.update(choices=option.choices, metavar=None)
        elif option.name in ("threads", "max_level", "top", "quantiles", "max_points"):
            spec.update(type=int)
        elif option.name in ("min_support", "alpha", "fdr"):
            spec.update(type=_number)
        cmd.add_argument(flag, **spec)
    params = [p for p in PARAMS if p not in present and action in actions_of(p)]
    if "thresholds" in params:  # --thresholds T,T,... or --bins N (thresholds 0, 1/N, ..., 1)
        sweep = cmd.add_mutually_exclusive_group()
        _add_param(sweep, "thresholds")
        _add_param(sweep, "bins")
    for name in params:
        if name not in ("thresholds", "bins"):
            _add_param(cmd, name)
    if "bins" in params and "thresholds" not in params:  # drift's: the reference's bins
        cmd.add_argument("--bins", type=int, metavar="N", help="a numeric column's bins: the "
                         "reference's quantiles (default: 10)")


def _add_param(cmd: argparse._ActionsContainer, name: str) -> None:
    """The flag of a parameter of :mod:`mleval_sql.params` (``--max-fpr X``), its type, choices,
    default and help from the parameter's declaration."""
    param = PARAMS[name]
    text = _described(param)
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


#: Options passed on only where given (the others always, at their flag's default).
IF_GIVEN = ("metrics", "storage_options", "as_of", "threads", "ci", "resamples", "seed", "window",
            "labels", "reference", "calibration", "define")


def _at_door(option: Option, statement: bool) -> bool:
    """Whether ``mleval sql`` (``statement``) or a command that runs takes ``option``."""
    return option.statement if statement else not option.only_statement


def request(args: argparse.Namespace, action: Action, *,
            statement: bool = False) -> dict[str, Any]:
    """The options of ``action`` on the command line by name, as the API's keywords (lists
    joined, pairs as a mapping), which build the request."""
    given: dict[str, Any] = {}
    for option in OPTIONS.values():
        if action not in option.command_actions or option.name == "kind" \
                or not _at_door(option, statement):
            continue
        value = getattr(args, option.name, None)
        if value is None and (option.name in IF_GIVEN or option.default not in (None, (), False)):
            continue  # the API's default
        if option.arity == "list":
            value = [v for part in value or () for v in part] or (
                None if option.default is None else [])
        elif option.arity == "pairs":
            value = _pairs(FLAGS.get(option.name, option.flag), value or [])
        elif option.arity == "switch" and value is None and option.default is not None:
            value = option.default
        given[option.name] = value
    for name in PARAMS:
        value = getattr(args, name, None)
        if action in actions_of(name) and not (name in IF_GIVEN and value == PARAMS[name].default):
            given[name] = value
    return given


def _described(param: Param) -> str:
    """A parameter's help, led by the metrics that use it: ``"the k of top_k_accuracy,
    precision_at_k and recall_at_k: how many top-scored labels count"``."""
    users = [name for name, metric in METRICS.items() if param.name in metric.params]
    if not users:
        return param.help
    named = users[0] if len(users) == 1 else f"{', '.join(users[:-1])} and {users[-1]}"
    return f"the {param.name} of {named}: {param.help}"


def params_markdown() -> str:
    """The parameters as a Markdown table (the documentation's parameters page)."""
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


def _pair(text: str) -> tuple[str, str | None]:
    """``KEY=VALUE`` (``--column score=prob``; ``weight=`` is no column)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE (e.g. ROLE=NAME), got {text!r}")
    return key.strip(), value.strip() or None


def _pairs(flag: str, pairs: list[tuple[str, str | None]]) -> dict[str, str | None]:
    """The pairs of a repeated flag as a mapping; a key given twice is an error."""
    out: dict[str, str | None] = {}
    for key, value in pairs:
        if key in out:
            raise UsageError(f"{flag} {key}= is given twice")
        out[key] = value
    return out


def _number(text: str) -> int | float:
    """A whole number where the text is one, else a float: ``10`` -> 10, ``0.05`` -> 0.05."""
    try:
        return int(text) if text.lstrip("-").isdigit() else float(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from error


def _listed(text: str) -> list[str]:
    """A comma-separated list: ``"f1, roc_auc"`` -> ``["f1", "roc_auc"]``."""
    return [part.strip() for part in text.split(",") if part.strip()]


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


def run_compare(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    _check_outputs(args, args.output)
    emit(_noting(me.compare, list(args.inputs), **request(args, "compare")), fmt, args.output)
    return 0


def run_slices(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    _check_outputs(args, args.output)
    options = request(args, "slices")
    options.pop("metrics", None)
    emit(_noting(me.slices, list(args.inputs), args.slice_metric, **options), fmt, args.output)
    return 0


def run_drift(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    _check_outputs(args, args.output)
    options = request(args, "drift")
    emit(_noting(me.drift, list(args.inputs), options.pop("reference", None), **options), fmt,
         args.output)
    return 0


#: The evaluate options ``mleval fairness`` has no use for (its tables are not metric rows).
FAIRNESS_SKIPPED = ("curves", "wide", "reference", "calibration", "max_points")
#: The tables of ``me.fairness``'s result, the one ``mleval fairness`` writes (``--result``).
FAIRNESS_TABLES = ("summary", "groups", "disparities")


def _add_fairness(commands: Any) -> None:
    """``mleval fairness``: the options of ``me.fairness`` (evaluate's, and its own)."""
    from mleval_sql.fairness import AGGS, MAX_GROUPS, METHODS

    cmd = commands.add_parser("fairness", help="fair across groups: each metric per group of "
                              "the sensitive columns, the gap between the groups (difference, "
                              "ratio, fairlearn's disparities), with intervals and p-values")
    _add_inputs(cmd)
    cmd.add_argument("--sensitive", action="append", type=_listed, required=True,
                     metavar="COL", help="the columns whose values (crossed) make the groups "
                     "compared (repeatable or comma-separated)")
    cmd.add_argument("--method", choices=METHODS, default="between_groups",
                     help="between_groups: max - min and min / max; to_overall: each group "
                     "against the overall value")
    cmd.add_argument("--agg", choices=AGGS, default="worst_case",
                     help="equalized odds: the worse of its two rates' gaps, or their mean")
    cmd.add_argument("--min-support", type=_number, default=0, metavar="N",
                     help="groups of fewer samples are listed and left out of the gap")
    cmd.add_argument("--max-groups", type=int, default=MAX_GROUPS, metavar="N",
                     help="the most groups the sensitive columns may cross into")
    cmd.add_argument("--result", choices=FAIRNESS_TABLES, default="summary",
                     help="the table written: the gaps (summary), each group's value "
                     "(groups), or the named disparities")
    _add_request(cmd, "evaluate", skip=FAIRNESS_SKIPPED)
    _add_output(cmd)
    cmd.set_defaults(run=run_fairness)


def fairness(args: argparse.Namespace) -> Any:
    """``mleval_sql.fairness`` with the command line's options, its warnings shown as notes."""
    options = request(args, "evaluate")
    for name in FAIRNESS_SKIPPED:
        options.pop(name, None)
    return _noting(me.fairness, list(args.inputs), options.pop("metrics", None),
                   sensitive=[c for part in args.sensitive for c in part], method=args.method,
                   agg=args.agg, min_support=args.min_support, max_groups=args.max_groups,
                   **options)


def run_fairness(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    _check_outputs(args, args.output)
    table = getattr(fairness(args), args.result)
    if fmt == "csv":  # CSV holds no lists: the groups left out, joined
        table = table.with_columns(pl.col(c).list.join(", ") for c, t in table.schema.items()
                                   if isinstance(t, pl.List))
    emit(table, fmt, args.output)
    return 0


def run_check(args: argparse.Namespace) -> int:
    sys.stdout.write(f"ok: {_noting(me.check, list(args.inputs), **request(args, 'check'))}\n")
    return 0


def run_curve(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    if args.plot is not None:
        check_target(args.plot)  # before the scan: a missing matplotlib should not cost one
    _check_outputs(args, args.output, args.plot)
    result = curve(args)
    if args.plot is None or args.output is not None or args.format is not None:
        emit(result, fmt, args.output)
    if args.plot is not None:
        kind = args.kind or CURVE_PARAMS["kind"].default
        plot_curve(result, kind, args.plot, areas=not (kind == "pr" and args.drop_intermediate))
        if args.output is None and args.format is None:  # the plot instead of a long table
            keys = [c for c in result.columns if c not in CURVE_COLUMNS]
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
    """``mleval_sql.evaluate`` with the command line's options, its warnings shown as notes."""
    return _noting(me.evaluate, list(args.inputs), **request(args, "evaluate"))


def curve(args: argparse.Namespace) -> pl.DataFrame:
    """``mleval_sql.curve`` with the command line's options, its warnings shown as notes."""
    return _noting(me.curve, list(args.inputs), args.kind or CURVE_PARAMS["kind"].default,
                   **request(args, "curve"))


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


def run_history(args: argparse.Namespace) -> int:
    fmt = output_format(args.format, args.output)
    emit(me.history(args.path), fmt, args.output)
    return 0


def run_metrics(args: argparse.Namespace) -> int:
    with kept():  # the call's declarations, listed, then gone (in a process that goes on)
        declare_for(None, _pairs("--define", args.define) if args.define else None)
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
        lines = [*wrap(m.summary), *wrap(declaration(m)),
                 *wrap(f"tasks: {', '.join(_tasks(m))}; averages: {averages_text(m)}{params}"),
                 *wrap(f"equals {m.sklearn}" if m.sklearn else "")]
        blocks.append("\n".join(f"{(m.name if i == 0 else ''):<{len(indent)}}{line}"
                                for i, line in enumerate(lines)))
    return "\n".join(blocks) + "\n"


def declaration(metric: Metric, quote: str = "") -> str:
    """How a declared metric is defined: its expression (within ``quote``) and the file it
    came from; "" for a built-in one.

    >>> declaration(METRICS["f1"])
    ''
    """
    if not any(f in DECLARED_FAMILIES for f in metric.families.values()):
        return ""
    from mleval_sql.declared import DECLARED as declared

    found = declared[metric.name]
    return f"declared: {quote}{found.text}{quote}" + (f" (from {found.origin})"
                                                      if found.origin else "")


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


def run_sql(args: argparse.Namespace) -> int:
    # every option given, whichever statement it is for: one given to the other is an error
    if args.drift:
        options = request(args, "drift", statement=True)
        text = me.sql(dialect=args.dialect, table=args.table, view=args.view, drift=True,
                      **options)
    else:
        options = {**request(args, "slices", statement=True),
                   **request(args, "curve", statement=True),
                   **request(args, "evaluate", statement=True)}
        for name in ("reference", "compared", "statistics", "edges", "epsilon"):
            if getattr(args, name, None) not in (None, OPTIONS[name].default):
                raise UsageError(f"--{name}: an option of the drift statement (--drift)")
        text = me.sql(dialect=args.dialect, table=args.table, view=args.view,
                      checks=args.checks, curve=args.kind, **options)
    text = text.rstrip("\n") + "\n"
    if args.output is None:
        sys.stdout.write(text)
    else:
        check_output(args.output)
        with atomic_output(args.output) as part:
            part.write_text(text, encoding="utf-8")
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



#: The commands that take a request over inputs: the action, its help and what runs it.
REQUESTS: tuple[tuple[Action, str, Callable[[argparse.Namespace], int]], ...] = (
    ("evaluate", "compute metrics of parquet predictions", run_evaluate),
    ("curve", "tabulate (and plot) ROC, PR, sweep or reliability curves per segment and label",
     run_curve),
    ("compare", "is a difference real: models against a baseline on the same samples, or each "
     "segment against the rest, with intervals and p-values", run_compare),
    ("slices", "where the model is weakest: the worst slices (conjunctions of column = value) "
     "by a row-wise error (SliceLine) or any metric", run_slices),
    ("check", "only check the input (as every evaluation does first) and print its task",
     run_check),
    ("drift", "has what the model sees or says moved: each compared column's distribution "
     "against a reference (KS, Wasserstein, PSI, Jensen-Shannon, chi-square) per segment",
     run_drift),
)


if __name__ == "__main__":
    sys.exit(main())
