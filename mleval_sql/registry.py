"""Every metric named once: which family computes it for each task, its averages and parameters.

A *step* turns one or more relations into another. Statistics steps read ``predictions`` (or
another statistics table) and give a small table such as ``confusion_counts``; a family's final
step derives tidy metric rows from statistics. Each step exists twice under one name: the SQL
file ``queries/<name>.sql`` and the polars function ``mleval_sql.engines.polars.<name>``.

>>> METRICS["f1"].family("multiclass").name
'decisions'
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from mleval_sql.schema import TASKS, InputError, Task


@dataclass(frozen=True)
class Step:
    """One query: ``queries/<name>.sql`` and the polars function of the same name."""

    name: str
    reads: tuple[str, ...]
    gives: str | None = None  # the statistics table it produces; None for metric rows
    params: tuple[str, ...] = ()


STEPS: dict[str, Step] = {s.name: s for s in (
    Step("validate_summary", ("predictions",)),
    Step("threshold_counts", ("predictions",), "confusion_counts", ("threshold",)),
    Step("argmax_matrix", ("predictions",), "confusion_matrix"),
    Step("matrix_counts", ("confusion_matrix",), "confusion_counts"),
    Step("decision_metrics", ("confusion_counts",), None, ("beta", "zero_division")),
    Step("multiclass_metrics", ("confusion_matrix", "confusion_counts")),
    Step("sample_counts", ("predictions",), "sample_counts", ("threshold",)),
    Step("sample_metrics", ("sample_counts",), None, ("beta", "zero_division")),
    Step("true_ranks", ("predictions",), "true_ranks"),
    Step("top_k_metrics", ("true_ranks",), None, ("k",)),
)}

#: Averages over labels, as scikit-learn names them; "none" means one value per label and
#: "macro_std" is the population standard deviation of the per-label values (seed 001).
LABEL_AVERAGES = ("none", "micro", "macro", "weighted", "macro_std")
AVERAGES = (*LABEL_AVERAGES, "samples")


@dataclass(frozen=True)
class Family:
    """Metrics derived by one final step from the statistics that ``stats`` computes per task."""

    name: str
    final: str
    stats: Mapping[Task, tuple[str, ...]]
    averages: tuple[str, ...] = ()  # () : one value per segment, not per label

    def steps(self, task: Task) -> tuple[str, ...]:
        return (*self.stats[task], self.final)


DECISIONS = Family("decisions", "decision_metrics", {
    "binary": ("threshold_counts",),
    "multilabel": ("threshold_counts",),
    "multiclass": ("argmax_matrix", "matrix_counts"),
}, LABEL_AVERAGES)
MULTICLASS = Family("multiclass", "multiclass_metrics",
                    {"multiclass": ("argmax_matrix", "matrix_counts")})
SAMPLES = Family("samples", "sample_metrics", {"multilabel": ("sample_counts",)})
TOP_K = Family("top_k", "top_k_metrics", {"multiclass": ("true_ranks",)})
FAMILIES = (DECISIONS, MULTICLASS, SAMPLES, TOP_K)

_ALL = dict.fromkeys(TASKS, DECISIONS)
_THRESHOLDED = {"binary": DECISIONS, "multilabel": DECISIONS}


@dataclass(frozen=True)
class Metric:
    """A metric's one definition: what it means and where each task gets it from."""

    name: str
    summary: str
    families: Mapping[Task, Family]
    params: tuple[str, ...] = ()  # parameters of its own, shown as result columns
    samples_average: bool = False  # multilabel: also averaged per sample (SAMPLES family)
    per_label: bool = True  # False: one value per segment even from a label-wise family

    def family(self, task: Task, average: str | None = None) -> Family:
        if average == "samples" and self.samples_average and task == "multilabel":
            return SAMPLES
        if task not in self.families:
            raise InputError(f"metric {self.name!r} is not defined for task {task!r}; "
                             f"it is for {sorted(self.families)}")
        return self.families[task]

    def averages(self, task: Task) -> tuple[str, ...]:
        own = self.families[task].averages if task in self.families and self.per_label else ()
        return (*own, "samples") if self.samples_average and task == "multilabel" else own


def _metrics(*metrics: Metric) -> dict[str, Metric]:
    return {m.name: m for m in metrics}


METRICS: dict[str, Metric] = _metrics(
    Metric("tp", "true positives: weight of true labels predicted positive", _ALL),
    Metric("fp", "false positives: weight of false labels predicted positive", _ALL),
    Metric("fn", "false negatives: weight of true labels predicted negative", _ALL),
    Metric("tn", "true negatives: weight of false labels predicted negative", _ALL),
    Metric("support", "weight of true labels (tp + fn)", _ALL),
    Metric("accuracy", "share of right decisions; multiclass: argmax equals the true label "
           "(multilabel per label; its exact match is subset_accuracy)",
           {**_THRESHOLDED, "multiclass": MULTICLASS}),
    Metric("precision", "tp / (tp + fp)", _ALL, samples_average=True),
    Metric("recall", "tp / (tp + fn), also called sensitivity or true positive rate", _ALL,
           samples_average=True),
    Metric("f1", "harmonic mean of precision and recall", _ALL, samples_average=True),
    Metric("fbeta", "F-beta: recall weighted beta times as much as precision", _ALL,
           params=("beta",), samples_average=True),
    Metric("specificity", "tn / (tn + fp), the true negative rate", _ALL),
    Metric("jaccard", "tp / (tp + fp + fn), intersection over union", _ALL,
           samples_average=True),
    Metric("mcc", "Matthews correlation coefficient (multiclass: Gorodkin's R_K); 0 when "
           "undefined, as scikit-learn", {**_THRESHOLDED, "multiclass": MULTICLASS}),
    Metric("hamming_loss", "share of wrong label decisions (multiclass: 1 - accuracy)",
           {**_THRESHOLDED, "multiclass": MULTICLASS}, per_label=False),
    Metric("subset_accuracy", "share of samples with every label decided right (exact match)",
           {"multilabel": SAMPLES}),
    Metric("adjusted_accuracy", "share of samples whose top-scored label is a true one",
           {"multilabel": SAMPLES}),
    Metric("balanced_accuracy", "mean recall over the classes that have true samples",
           {"multiclass": MULTICLASS}),
    Metric("cohen_kappa", "Cohen's kappa between true and argmax labels",
           {"multiclass": MULTICLASS}),
    Metric("confusion_matrix", "weight of samples per (true label, predicted label)",
           {"multiclass": MULTICLASS}),
    Metric("top_k_accuracy", "share of samples whose true label is among the k top-scored",
           {"multiclass": TOP_K}, params=("k",)),
)

DEFAULTS: dict[str, object] = {"threshold": 0.5, "beta": 1.0, "k": 2, "zero_division": None}


def default_averages(task: Task) -> tuple[str, ...]:
    """Per label for binary (one label), the macro average otherwise."""
    return ("none",) if task == "binary" else ("macro",)
