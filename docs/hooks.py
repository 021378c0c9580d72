"""MkDocs hooks: the pages made from the package itself, so that they follow it without an edit.

- ``metrics/index.md`` and one page per family of metrics, from the registry
  (``mleval_sql.registry``): every metric with its definition, tasks, averages, parameters, when
  it is undefined and the scikit-learn function it equals;
- ``reference/cli.md``, from the parser of the ``mleval`` command (``mleval_sql.cli``): every
  subcommand with every flag;
- ``reference/parameters.md``, from the declarations of parameters and options
  (``mleval_sql.params``, ``mleval_sql.request``).

The navigation's "Metrics" entry becomes a section with the family pages.
"""

from __future__ import annotations

import argparse
import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

from mleval_sql.cli import _spelled, averages_text, build_parser, declaration, params_markdown
from mleval_sql.params import PARAMS
from mleval_sql.registry import (
    FAMILIES,
    LOWER_IS_BETTER,
    METRICS,
    SAMPLES,
    STEPS,
    Family,
    Metric,
)
from mleval_sql.request import ACTIONS, OPTIONS
from mleval_sql.schema import TASKS

#: Each family's page: its title and what its metrics share. A family missing here still gets
#: a page, titled by its name.
FAMILY_PAGES: dict[str, tuple[str, str]] = {
    "decisions": (
        "Decisions at a threshold",
        "A label is predicted positive when its score is at least `threshold` (multiclass: the "
        "top-scored class, ties to the smallest label, one-vs-rest per class). Every metric "
        "here comes from one table of confusion counts (the weight of tp, fp, fn, tn) per "
        "segment and label. `thresholds=[...]` or `bins=N` give every one of them at several "
        "thresholds in one scan (a sweep: each row carries its `threshold`)."),
    "multiclass": (
        "Multiclass decisions",
        "One value per segment, from the confusion matrix of the true class against the "
        "top-scored class (ties: the smallest label, as numpy's argmax)."),
    "samples": (
        "Per sample (multilabel)",
        "Computed for each sample over its labels, then the weighted mean over samples. "
        "Besides the metrics of this family, precision, recall, f1, fbeta and jaccard take "
        "`average=\"samples\"` here. A sample whose value is 0/0 is left out of the mean "
        "(see [Semantics](../semantics.md#defaults-that-give-another-number))."),
    "top_k": (
        "Top-k (multiclass)",
        "Whether the true class is among the `k` top-scored, from each sample's rank of its "
        "true class; the multiclass hinge loss from the same pass, each sample's margin of its "
        "true class over the others."),
    "ranking": (
        "Ranking across samples",
        "Per label, from one sorted pass over the scores: the exact curve, one point per "
        "distinct score (tied scores are one threshold). `bins=N` puts the scores on the grid "
        "0, 1/N, ..., 1 first: one aggregate instead of a sort, pairs within a bin counted as "
        "ties."),
    "operating": (
        "Operating points",
        "The best value over every distinct score taken as the threshold, read off the same "
        "curve as the ranking metrics; `operating_threshold` says where it was found (ties in "
        "the value go to the highest threshold)."),
    "ovo": (
        "One-vs-one AUC (multiclass)",
        "The ROC AUC of every pair of classes, from the pair counts of a segment."),
    "label_ranking": (
        "Ranking across labels",
        "Per sample, from the ranks of its labels by score, then averaged over samples "
        "(multilabel and multiclass)."),
    "probability": (
        "Probabilistic",
        "The scores read as probabilities (they must lie in [0, 1]), per label (binary and "
        "multilabel), from one table of weighted sums per label; `hinge_loss` reads them as "
        "decision values instead (any real number)."),
    "probability_multiclass": (
        "Probabilistic (multiclass)",
        "The scores read as the probabilities of the classes: one value per segment."),
    "calibration": (
        "Calibration",
        "Scores put in `n_bins` equal-width bins per label; the reliability curve "
        "(`curve(kind=\"reliability\")`) gives the bins themselves."),
    "regression": (
        "Regression",
        "`score` is the prediction and `truth` the target; `label` names the output. Averages "
        "are over outputs."),
    "errors": (
        "Regression errors",
        "`score` is the prediction and `truth` the target; `label` names the output. One pass "
        "of plain sums of the errors: asked alone, these do not pay for the means, logs and "
        "deviances of the [regression](regression.md) metrics (read off that pass where both "
        "are asked). Averages are over outputs."),
    "median": (
        "Median absolute error",
        "The weighted median of each output's absolute errors, exact: one sort of the errors "
        "(scikit-learn's averaged inverted CDF; `np.median` with unit weights). Averages are "
        "over outputs."),
    "quantiles": (
        "Regression quantiles",
        "Metrics that read a weighted quantile of each output's errors or truths (exact, one "
        "sort of each, scikit-learn's averaged inverted CDF). Averages are over outputs."),
    "graded": (
        "Graded relevance",
        "Ranking across labels per sample, against a relevance that may be graded (a number "
        "`>= 0` in the truth column, where only these metrics are asked): each sample's DCG, "
        "tied scores averaged as scikit-learn does, averaged over samples by sample weight."),
    "clustering": (
        "Clustering",
        "One row per sample (`sample, truth, cluster[, weight]`); every metric is a function "
        "of the contingency table (the weight of each class x cluster) of a segment. The names "
        "are scikit-learn's functions without `_score`."),
    "declared": (
        "Declared metrics",
        "The metrics declared where this documentation was built (`me.define`, a team's "
        "`MLEVAL_METRICS` file): each one expression over the decision counts at the threshold, "
        "see [Your own metrics](../guides/own-metrics.md)."),
    "declared_argmax": (
        "Declared metrics, multiclass",
        "The declared metrics on multiclass rows: each one expression over the counts of each "
        "class one-vs-rest from the argmax decision, as `f1` reads them for multiclass, see "
        "[Your own metrics](../guides/own-metrics.md)."),
    "contingency": (
        "Contingency table",
        "The cells of the contingency table themselves, one row per cell of positive weight."),
}


def family_slug(family: Family) -> str:
    return family.name.replace("_", "-")


def family_title(family: Family) -> str:
    return FAMILY_PAGES.get(family.name, (family.name.replace("_", " ").capitalize(), ""))[0]


def family_metrics(family: Family) -> list[Metric]:
    """The metrics some task computes with ``family`` (the samples family: also those that
    take ``average="samples"``), in the registry's order."""
    return [m for m in METRICS.values()
            if any(f is family for f in m.families.values())
            or (family is SAMPLES and m.samples_average)]


def documented_families() -> list[Family]:
    """The families with metrics of their own, each a page (the sweep runs the decision
    metrics at several thresholds: it has none)."""
    return [f for f in FAMILIES if family_metrics(f)]


def _tasks(metric: Metric, family: Family) -> list[str]:
    if family is SAMPLES and metric.samples_average:
        return ["multilabel"]
    return [t for t in TASKS if metric.families.get(t) is family]


#: Metrics whose value is a sum of weights: never null.
SUMS = ("tp", "fp", "fn", "tn", "support", "confusion_matrix")

#: Parameters a step reads that shape every metric of the step (the others belong to the
#: metrics that name them in ``Metric.params``).
_OWNED = {p for m in METRICS.values() for p in m.params}


def _params(metric: Metric, family: Family) -> list[str]:
    read = [p for task in _tasks(metric, family) for step in family.steps(task)
            for p in STEPS[step].params if p in PARAMS and p not in _OWNED]
    if family is SAMPLES:
        read += [p for step in SAMPLES.steps("multilabel") for p in STEPS[step].params
                 if p in PARAMS and p not in _OWNED]
    return list(dict.fromkeys([*metric.params, *read]))


def _param_text(name: str) -> str:
    param = PARAMS[name]
    return f"`{name}` (default `{_spelled(param.default)}`: {param.help})"


def _families(metric: Metric) -> list[Family]:
    """The families that compute ``metric`` for some task (or its samples average)."""
    found = [*metric.families.values(), *([SAMPLES] if metric.samples_average else [])]
    return [f for i, f in enumerate(found) if all(f is not g for g in found[:i])]


def _other_families(metric: Metric, family: Family) -> str:
    others = [f for f in _families(metric) if f is not family]
    return ", ".join(f"[{family_title(f)}]({family_slug(f)}.md#{metric.name}) "
                     f"({', '.join(_tasks(metric, f))})" for f in others)


def metric_section(metric: Metric, family: Family) -> str:
    rows = [("tasks", ", ".join(_tasks(metric, family)))]
    if declaration(metric):  # a declared metric (MLEVAL_METRICS, me.define): its expression
        rows.insert(0, ("declared", declaration(metric, "`").removeprefix("declared: ")))
    averages = averages_text(metric) if family is not SAMPLES or not metric.samples_average \
        else "samples (multilabel)"
    rows.append(("averages", averages))
    params = _params(metric, family)
    rows.append(("parameters", "; ".join(map(_param_text, params)) if params else "none"))
    rows.append(("null when", "never: a sum of weights (0 without weight)"
                 if metric.name in SUMS else "never: 0 where undefined, as scikit-learn"
                 if metric.name == "mcc" else metric.undefined))
    rows.append(("better", "lower" if metric.name in LOWER_IS_BETTER else "higher"))
    if metric.probabilities:
        rows.append(("scores", "read as probabilities: each must lie in [0, 1]"))
    if metric.whole_weights:
        rows.append(("weights", "counts: each must be a whole number"))
    sklearn = metric.sklearn
    if sklearn:
        name, _, rest = sklearn.partition(" ")
        sklearn = f"`{name}`" + (f" {rest}" if rest else "")
        if ":" in name:
            function, _, note = sklearn.partition(":")
            sklearn = f"{function}`:{note.removeprefix('`')}"
    rows.append(("scikit-learn", sklearn or "no function of its own"))
    others = _other_families(metric, family)
    if others:
        rows.append(("also", others))
    table = "\n".join(f"| {key} | {value} |" for key, value in rows)
    return (f"## `{metric.name}` {{#{metric.name}}}\n\n| definition | {metric.summary} |\n"
            f"|---|---|\n{table}\n")


def family_page(family: Family) -> str:
    title, intro = FAMILY_PAGES.get(family.name, (family_title(family), ""))
    metrics = family_metrics(family)
    listing = ", ".join(f"[`{m.name}`](#{m.name})" for m in metrics)
    head = (f"# {title}\n\n{intro}\n\n"
            f"Family `{family.name}`: its final step is `queries/{family.final}.sql` (and the "
            f"polars function of that name). Metrics: {listing}.\n")
    return head + "\n" + "\n".join(metric_section(m, family) for m in metrics)


def _sklearn_functions() -> set[str]:
    """The functions of scikit-learn the metrics equal, by name."""
    return {m.sklearn.split()[0].rstrip(":") for m in METRICS.values()
            if m.sklearn and m.sklearn.startswith("sklearn.metrics.")}


def metrics_index() -> str:
    families = documented_families()
    lines = [
        "# Metrics",
        "",
        "Every metric of the registry (`mleval_sql/registry.py`), by family: the metrics a "
        "family computes share one table of statistics, computed once per request whatever "
        "the number of metrics asked from it. `mleval metrics` lists the same on the command "
        "line. Each metric's page gives its definition, tasks, averages, parameters, when it "
        "is null and the scikit-learn function it equals.",
        "",
        f"{len(METRICS)} metrics; they equal {len(_sklearn_functions())} functions of "
        "`sklearn.metrics` that read predictions (the curves of `me.curve` equal "
        "`roc_curve`, `precision_recall_curve`, `det_curve`, `calibration_curve`, "
        "`confusion_matrix_at_thresholds` and `metric_at_thresholds`).",
        "",
        "| family | metrics |",
        "|---|---|",
    ]
    for family in families:
        names = ", ".join(f"[`{m.name}`]({family_slug(family)}.md#{m.name})"
                          for m in family_metrics(family))
        lines.append(f"| [{family_title(family)}]({family_slug(family)}.md) | {names} |")
    lines += ["", "## Every metric", "", "| metric | definition | tasks |", "|---|---|---|"]
    for metric in METRICS.values():
        family = next(iter(metric.families.values()))
        tasks = ", ".join(t for t in TASKS if t in metric.families)
        lines.append(f"| [`{metric.name}`]({family_slug(family)}.md#{metric.name}) | "
                     f"{metric.summary} | {tasks} |")
    return "\n".join(lines) + "\n"


# -- the command line ----------------------------------------------------------------------------

@contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps its usage to $COLUMNS: a fixed width, whatever the terminal."""
    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    (group,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(group.choices)


def _helps(parser: argparse.ArgumentParser) -> dict[str, str]:
    (group,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {a.dest: a.help or "" for a in group._choices_actions}


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    if action.choices is not None and action.metavar is None:
        return "{" + ",".join(_spelled(c) for c in action.choices) + "}"
    return str(action.metavar or action.dest.upper())


def cli_page() -> str:
    parser = build_parser()
    helps = _helps(parser)
    lines = [
        "# Command line",
        "",
        f"`mleval`: {parser.description} Every subcommand and flag below is read from the "
        "command's own parser; `mleval SUBCOMMAND --help` prints the same.",
        "",
        "Lists (`--metric`, `--by`, `--average`...) take the flag repeated or comma-separated. "
        "Bad input prints one line, `mleval: error: ...`, and exits with status 2; a note "
        "(`mleval: note: ...`) says what the library warned about.",
        "",
    ]
    with _columns(100):
        for name, sub in _subcommands(parser).items():
            first, *rest = sub.format_usage().removeprefix("usage: ").rstrip().splitlines()
            usage = "\n".join([first, *(line[len("usage: "):] for line in rest)])
            lines += [f"## `mleval {name}` {{#{name}}}", "", helps.get(name, "").capitalize()
                      + ".", "", "```text", usage, "```", "",
                      "| argument | value | default | meaning |", "|---|---|---|---|"]
            exclusive = {id(a): group for group in sub._mutually_exclusive_groups
                         for a in group._group_actions}
            formatter = sub._get_formatter()
            for action in sub._actions:
                if isinstance(action, argparse._HelpAction):
                    continue
                flags = ", ".join(f"`{o}`" for o in action.option_strings) or f"`{_value(action)}`"
                value = "" if not action.option_strings else _value(action)
                default = action.default
                shown = "" if default in (None, False, argparse.SUPPRESS) or \
                    action.nargs == 0 else f"`{_spelled(default)}`"
                text = formatter._expand_help(action) if action.help else ""
                group = exclusive.get(id(action))
                if group is not None:
                    rivals = [o for a in group._group_actions if a is not action
                              for o in a.option_strings[:1]]
                    text += f" (not with {', '.join(f'`{r}`' for r in rivals)})"
                if action.required and action.option_strings:
                    text += " (required)"
                lines.append(f"| {flags} | {_cell(f'`{value}`' if value else '')} | "
                             f"{_cell(shown)} | {_cell(text)} |")
            lines.append("")
    return "\n".join(lines)


# -- parameters and options ---------------------------------------------------------------------

def parameters_page() -> str:
    lines = [
        "# Parameters and options",
        "",
        "The same names everywhere: keywords of the Python functions, flags of the command "
        "line (`--max-fpr` for `max_fpr`), keys of a report job. Each is declared once "
        "(`mleval_sql/params.py`, `mleval_sql/request.py`); this page is read from there.",
        "",
        "## Parameters",
        "",
        "What shapes a metric's value. The metrics that use one are named in its meaning; a "
        "parameter shown in the results is a column of the result table.",
        "",
        params_markdown().rstrip("\n"),
        "",
        "## Options",
        "",
        "What to read and how to run it. The requests that take each option: "
        + ", ".join(f"`{a}`" for a in ACTIONS) + ".",
        "",
        "| option | flag | taken by | meaning |",
        "|---|---|---|---|",
    ]
    for option in OPTIONS.values():
        flag = "(Python only)" if option.name == "connection" else f"`{option.flag}`"
        taken = ", ".join(option.actions)
        lines.append(f"| `{option.name}` | {flag} | {taken} | {_cell(option.help)} |")
    return "\n".join(lines) + "\n"


# -- the hooks -------------------------------------------------------------------------------------

def generated_pages() -> dict[str, str]:
    """Every generated page by its path under docs/."""
    pages = {"metrics/index.md": metrics_index(), "reference/cli.md": cli_page(),
             "reference/parameters.md": parameters_page()}
    for family in documented_families():
        pages[f"metrics/{family_slug(family)}.md"] = family_page(family)
    return pages


def on_config(config: Any) -> Any:
    """The "Metrics" entry of the navigation becomes a section: the index, then each family."""
    section = ["metrics/index.md", *({family_title(f): f"metrics/{family_slug(f)}.md"}
                                     for f in documented_families())]
    config["nav"] = [{"Metrics": section} if item == {"Metrics": "metrics/index.md"} else item
                     for item in config["nav"]]
    return config


#: The benchmark's results (``benchmarks/charts.py`` writes them beside its charts).
RESULTS = Path(__file__).resolve().parent / "performance" / "results.json"


def results_table(doc: dict[str, Any]) -> str:
    """The benchmark's results as tables, one per size, with the ratios to scikit-learn."""
    out = [f"Run on {doc['date']}, {doc['machine']}"
           + (f": `python benchmarks/lake.py {doc['command']}`" if doc.get("command") else "")
           + "."]
    for run in sorted(doc["runs"], key=lambda r: r["rows"]):
        rounds = run.get("rounds", 1)
        sklearn = next((r["wall_s"] for r in run["steps"] if r["step"] == "sklearn"), None)
        out += ["", f"**{run['rows']:,} rows** ({run['samples']:,} samples x "
                f"{run['rows'] // run['samples']} labels" + (f", median of {rounds} runs"
                                                              if rounds > 1 else "") + ")", "",
                "| step | wall s | CPU s | peak RSS MiB | scikit-learn / step | "
                "max rel diff to scikit-learn |", "|---|---:|---:|---:|---:|---:|"]
        for r in run["steps"]:
            ratio = f"{sklearn / r['wall_s']:.2f}x" if sklearn and r["wall_s"] else ""
            diff = "" if r.get("max_rel_diff") is None else f"{r['max_rel_diff']:.1e}"
            out.append(f"| {r['step']} | {r['wall_s']:.1f} | {r['cpu_s']:.1f} | "
                       f"{r['peak_rss_mib']:.0f} | {ratio} | {diff} |")
    return "\n".join(out) + "\n"


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    """The performance page's ``<!-- results -->`` becomes the benchmark's results."""
    if page.file.src_uri == "performance.md" and "<!-- results -->" in markdown:
        doc = json.loads(RESULTS.read_text(encoding="utf-8"))
        markdown = markdown.replace("<!-- results -->", results_table(doc))
    return markdown


def on_files(files: Files, config: Any) -> Files:
    for path, text in generated_pages().items():
        files.append(File.generated(config, path, content=text))
    return files
