"""Every metric named once: which family computes it for each task, its averages and parameters.

A *step* turns one or more relations into another. Statistics steps read ``predictions`` (or
another statistics table) and give a small table such as ``confusion_counts``; a family's final
step derives tidy metric rows from statistics. Each step exists twice under one name: the SQL
file ``queries/<name>.sql`` and the polars function ``mleval_sql.engines.polars.<name>``. A final
step marked ``averaged`` gives one row per label (and its pooled micro rows); every engine then
runs :data:`AVERAGING` on those rows, which adds the grid of labels and the averages over them.

>>> METRICS["f1"].family("multiclass").name
'decisions'
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, ParamSpec, TypeVar

from mleval_sql.schema import InputError, Task


@dataclass(frozen=True)
class Step:
    """One query: ``queries/<name>.sql`` and the polars function of the same name."""

    name: str
    reads: tuple[str, ...]
    gives: str | None = None  # the statistics table it produces; None for metric rows
    params: tuple[str, ...] = ()
    averaged: bool = False  # its rows are per label: AVERAGING adds the grid and averages
    whole: bool = False  # a statistic of the whole input, computed once, not batch by batch


STEPS: dict[str, Step] = {s.name: s for s in (
    Step("validate_summary", ("predictions",)),
    Step("threshold_counts", ("predictions",), "confusion_counts", ("threshold",)),
    Step("argmax_matrix", ("predictions",), "confusion_matrix"),
    Step("matrix_counts", ("confusion_matrix",), "confusion_counts"),
    Step("decision_metrics", ("confusion_counts",), None, ("beta", "zero_division"),
         averaged=True),
    # the metrics declared with me.define (mleval_sql/declared.py), from the same counts
    Step("declared_metrics", ("confusion_counts",), None, ("threshold", "beta"),
         averaged=True),
    # ... and from a sweep's counts, each row at the threshold its segment carries
    Step("declared_sweep", ("confusion_counts",), None, ("beta",), averaged=True),
    # ... and from each class's counts one-vs-rest by argmax: no threshold decides there
    Step("declared_argmax", ("confusion_counts",), None, ("beta",), averaged=True),
    Step("multiclass_metrics", ("confusion_matrix", "confusion_counts")),
    Step("sample_counts", ("predictions",), "sample_counts", ("threshold",)),
    Step("sample_metrics", ("sample_counts",), None, ("beta", "zero_division")),
    Step("true_ranks", ("predictions",), "true_ranks"),
    Step("top_k_metrics", ("true_ranks",), None, ("k",)),
    # ranking across samples, per label: the curve from one sorted pass (ranked_points)
    Step("ranked_points", ("predictions",), "curve_points", ("bins",)),
    Step("curve_counts", ("curve_points",), "confusion_counts", ("threshold",)),
    # the ranking metrics from one sorted pass over the predictions, or off the curve table
    # where the request makes it anyway (FUSED)
    Step("ranking_metrics", ("predictions",), None,
         ("bins", "max_fpr", "micro", "unit_weights", "class_counts", "label_totals"),
         averaged=True),
    Step("curve_metrics", ("curve_points",), None, ("max_fpr", "micro", "unit_weights"),
         averaged=True),
    Step("operating_points", ("curve_points",), None, ("min_recall", "min_precision")),
    Step("curve_rates", ("curve_points",), None, ("kind", "drop_intermediate", "max_points")),
    # DeLong's variance of the AUC, and each row's placement (a paired test's term)
    Step("block_placements", ("curve_points",), "block_placements"),
    Step("delong", ("block_placements",)),
    Step("placements", ("predictions", "block_placements"), None, ("bins",)),
    # threshold sweeps: one scan into at most T + 1 buckets per label, then running sums
    Step("threshold_buckets", ("predictions",), "threshold_buckets", ("thresholds", "bins")),
    Step("listed_points", ("threshold_buckets",), "sweep_points", ("thresholds",)),
    Step("sweep_counts", ("sweep_points",), "confusion_counts"),
    Step("pair_counts", ("predictions",), "pair_counts"),
    Step("ovo_metrics", ("pair_counts",)),
    # ranking across labels, per sample
    Step("sample_ranks", ("predictions",), "sample_ranks", ("k",)),
    Step("label_ranking_metrics", ("sample_ranks",)),
    # ... and by graded relevance (the truth as a number >= 0): DCG and NDCG per sample
    Step("sample_gains", ("predictions",), "sample_gains", ("k", "log_base", "ignore_ties")),
    Step("gain_metrics", ("sample_gains",)),
    # every distinct score's counts as confusion counts (a curve of kind "thresholds")
    Step("point_counts", ("curve_points",), "confusion_counts"),
    # the detection error tradeoff curve, as scikit-learn's det_curve
    Step("det_rates", ("curve_points",), None, ("drop_intermediate",)),
    # probabilistic
    Step("probability_sums", ("predictions",), "probability_sums"),
    Step("probability_metrics", ("probability_sums",), averaged=True),
    Step("multiclass_probability_metrics", ("probability_sums",)),
    Step("calibration_bins", ("predictions",), "calibration_bins", ("n_bins",)),
    Step("calibration_metrics", ("calibration_bins",), averaged=True),
    Step("reliability_table", ("calibration_bins",)),
    # regression
    Step("regression_sums", ("predictions",), "regression_sums", ("pinball_alpha", "power")),
    Step("regression_metrics", ("regression_sums",)),
    # ... mse, rmse, mae, mape and max_error alone: one pass of their own sums; with a metric of
    # the full sums asked, off those (FUSED)
    Step("regression_errors", ("predictions",), averaged=True),
    Step("regression_sum_errors", ("regression_sums",), averaged=True),
    # ... and the weighted quantiles (one sort of each output's errors and truths), with the
    # sums: the median absolute error and the D² of the pinball losses
    Step("regression_quantiles", ("predictions",), "regression_quantiles", ("pinball_alpha",)),
    # ... or the median absolute error alone: one sort of each output's errors, no sums; with
    # the quantiles' D² asked, off their pass (FUSED)
    Step("regression_medians", ("predictions",), averaged=True),
    Step("regression_quantile_medians", ("regression_sums", "regression_quantiles"),
         averaged=True),
    Step("quantile_metrics", ("regression_sums", "regression_quantiles")),
    Step("declared_regression", ("regression_sums",), averaged=True),  # me.define's
    # clustering: one row per sample (sample, truth, cluster, weight, segment)
    Step("cluster_summary", ("predictions",)),
    Step("contingency", ("predictions",), "contingency"),
    Step("clustering_metrics", ("contingency",), None, ("beta", "average_method", "adjusted")),
    Step("contingency_cells", ("contingency",)),
    # drift: the rows of both sides tagged (drift_rows); the numeric values merged by value and
    # read once in order (the bins, with the exact statistics' parts in each), or the
    # categories counted; the statistics from the bins
    Step("drift_sizes", ("drift_rows",), "drift_sizes"),
    Step("drift_points", ("drift_rows",), "drift_points"),
    Step("drift_histogram", ("drift_points", "drift_sizes"), "drift_bins", ("bins",)),
    Step("drift_categories", ("drift_rows",), "drift_bins"),
    Step("drift_ecdf", ("drift_bins",)),
    Step("drift_binned", ("drift_bins", "drift_sizes"), None, ("epsilon",)),
    # performance estimated without the truth: expected outcomes from each row's probability
    Step("expected_points", ("predictions",), "expected_points"),
    Step("estimated_counts", ("expected_points",), "estimated_counts", ("threshold",)),
    Step("estimated_metrics", ("estimated_counts",), averaged=True),
    Step("estimated_variance", ("expected_points", "estimated_counts")),
    # the rows of every averaged final step, read as label_values: the grid and the averages
    Step("label_averages", ("label_values",)),
    # the bootstrap: every sample's id, then the predictions once per replicate, weighed by the
    # sample's draw, with (segment, replicate) as their segment (the steps after read these)
    Step("sample_ids", ("predictions",), "sample_ids", whole=True),
    Step("replicates", ("predictions", "sample_ids"), "predictions", ("replicates", "seed")),
)}

#: The step every engine runs on the rows of an ``averaged`` final step (read as its one
#: relation); its rows are then that final step's result.
AVERAGING = STEPS["label_averages"]

#: Every relation a step reads or gives: the names each engine gives a prefix of its run.
RELATIONS = tuple(dict.fromkeys(r for s in STEPS.values() for r in (*s.reads, s.gives) if r))

#: Averages over labels, as scikit-learn names them; "none" means one value per label and
#: "macro_std" is the population standard deviation of the per-label values.
LABEL_AVERAGES = ("none", "micro", "macro", "weighted", "macro_std")
AVERAGES = (*LABEL_AVERAGES, "samples", "variance_weighted")


@dataclass(frozen=True)
class Family:
    """Metrics derived by one final step from the statistics that ``stats`` computes per task."""

    name: str
    final: str
    stats: Mapping[Task, tuple[str, ...]]
    averages: tuple[str, ...] = ()  # () : one value per segment, not per label

    def steps(self, task: Task) -> tuple[str, ...]:
        return (*self.stats[task], self.final)


_THRESHOLD_COUNTS: Mapping[Task, tuple[str, ...]] = {"binary": ("threshold_counts",),
                                                     "multilabel": ("threshold_counts",)}
DECISIONS = Family("decisions", "decision_metrics", {
    **_THRESHOLD_COUNTS,
    "multiclass": ("argmax_matrix", "matrix_counts"),
}, LABEL_AVERAGES)
MULTICLASS = Family("multiclass", "multiclass_metrics",
                    {"multiclass": ("argmax_matrix", "matrix_counts")})
SAMPLES = Family("samples", "sample_metrics", {"multilabel": ("sample_counts",)})
TOP_K = Family("top_k", "top_k_metrics", {"multiclass": ("true_ranks",)})
_CURVE = ("ranked_points",)
_SCORED = ("binary", "multilabel", "multiclass")
RANKING = Family("ranking", "ranking_metrics", dict.fromkeys(_SCORED, ()), LABEL_AVERAGES)
OPERATING = Family("operating", "operating_points", dict.fromkeys(_SCORED, _CURVE),
                   ("none", "macro"))
#: Decision metrics at several thresholds: one scan into buckets between the thresholds, then
#: counts at each threshold, each (segment, threshold) becoming one segment for decision_metrics.
SWEEP = Family("sweep", "decision_metrics",
               dict.fromkeys(("binary", "multilabel"),
                             ("threshold_buckets", "listed_points", "sweep_counts")),
               LABEL_AVERAGES)
OVO = Family("ovo", "ovo_metrics", {"multiclass": ("pair_counts",)}, ("macro", "weighted"))
LABEL_RANKING = Family("label_ranking", "label_ranking_metrics",
                       dict.fromkeys(("multilabel", "multiclass"), ("sample_ranks",)))
#: DCG and NDCG: the truth read as graded relevance (a number >= 0) where only they are asked.
GRADED = Family("graded", "gain_metrics", dict.fromkeys(("multilabel", "multiclass"),
                                                        ("sample_gains",)))
#: Decision metrics at every distinct score (a curve of kind "thresholds"): the curve's sorted
#: pass, each (segment, score) one segment for decision_metrics.
THRESHOLDS = Family("thresholds", "decision_metrics",
                    dict.fromkeys(_SCORED, ("ranked_points", "point_counts")), LABEL_AVERAGES)
PROBABILITY = Family("probability", "probability_metrics",
                     dict.fromkeys(("binary", "multilabel"), ("probability_sums",)),
                     LABEL_AVERAGES)
PROBABILITY_MULTICLASS = Family("probability_multiclass", "multiclass_probability_metrics",
                                {"multiclass": ("probability_sums",)})
CALIBRATION = Family("calibration", "calibration_metrics",
                     dict.fromkeys(_SCORED, ("calibration_bins",)), LABEL_AVERAGES)
REGRESSION = Family("regression", "regression_metrics", {"regression": ("regression_sums",)},
                    ("none", "macro", "variance_weighted"))
#: ... of which mse, rmse, mae, mape and max_error need only one pass of plain sums: alone,
#: they do not pay for the means, logs and deviances of the others (FUSED when both are asked).
ERRORS = Family("errors", "regression_errors", {"regression": ()}, ("none", "macro"))
#: Regression metrics that need a quantile of each output's errors or truths: a sort of their own.
QUANTILES = Family("quantiles", "quantile_metrics",
                   {"regression": ("regression_sums", "regression_quantiles")}, ("none", "macro"))
#: The median absolute error: one sort of each output's errors (its truths and sums not read,
#: unless the quantiles' D² are asked too: then off their pass, FUSED).
MEDIAN = Family("median", "regression_medians", {"regression": ()}, ("none", "macro"))
#: Clustering: every metric from the contingency table (weight per class x cluster) of a segment.
CLUSTERING = Family("clustering", "clustering_metrics", {"clustering": ("contingency",)})
CONTINGENCY = Family("contingency", "contingency_cells", {"clustering": ("contingency",)})
#: Performance estimated without the truth, per label (multiclass: one-vs-rest), from each
#: row's probability of being true (mleval_sql/estimation.py makes it the truth column).
ESTIMATED = Family("estimated", "estimated_metrics",
                   dict.fromkeys(_SCORED, ("expected_points", "estimated_counts")),
                   ("none", "macro", "weighted", "macro_std"))
#: Metrics declared as one expression over the decision counts at the threshold
#: (mleval_sql/declared.py): no metric of its own until one is declared.
DECLARED = Family("declared", "declared_metrics", _THRESHOLD_COUNTS, LABEL_AVERAGES)
#: ... and over each class's counts one-vs-rest from the argmax, the counts DECISIONS reads
#: for multiclass (so micro and macro mean what they mean for f1); a family of its own, as no
#: threshold decides there (none is bound, none shown on its rows).
DECLARED_ARGMAX = Family("declared_argmax", "declared_argmax",
                         {"multiclass": DECISIONS.stats["multiclass"]}, LABEL_AVERAGES)
#: ... and over every threshold of a sweep: the sweep's counts, one pass with the built-ins.
DECLARED_SWEEP = Family("declared_sweep", "declared_sweep", SWEEP.stats, LABEL_AVERAGES)
#: ... and over the regression sums of each output (micro: over the outputs' summed sums).
DECLARED_REGRESSION = Family("declared_regression", "declared_regression",
                             REGRESSION.stats, ("none", "micro", "macro"))
#: The families whose rows come from a sweep's counts: each (segment, threshold) one segment.
SWEPT = (SWEEP, DECLARED_SWEEP, THRESHOLDS)
#: The families of declared metrics: their final steps' SQL holds the expressions declared now.
DECLARED_FAMILIES = (DECLARED, DECLARED_ARGMAX, DECLARED_SWEEP, DECLARED_REGRESSION)
#: Where a team keeps its declared metrics: the file this environment variable names, and a
#: file of this name in a lake's folder (mleval_sql/declared.py reads them).
SHARED_METRICS, SHARED_FILE = "MLEVAL_METRICS", "metrics.toml"
FAMILIES = (DECISIONS, MULTICLASS, SAMPLES, TOP_K, RANKING, OPERATING, SWEEP, OVO,
            LABEL_RANKING, GRADED, THRESHOLDS, PROBABILITY, PROBABILITY_MULTICLASS, CALIBRATION,
            REGRESSION, ERRORS,
            QUANTILES, MEDIAN, CLUSTERING, CONTINGENCY, ESTIMATED, *DECLARED_FAMILIES)

#: Steps read off another family's statistics when both are asked: with the curve in a
#: request, the decision counts at the threshold and the ranking metrics come from its sorted
#: pass, not from a scan or a sort of their own; with a metric of the full regression sums,
#: the plain error metrics come off those; with a D² of the quantiles, the median absolute
#: error comes from their sort of the errors.
FUSED: dict[str, tuple[str, ...]] = {"threshold_counts": ("ranked_points", "curve_counts"),
                                     "ranking_metrics": ("ranked_points", "curve_metrics"),
                                     "regression_errors": ("regression_sums",
                                                           "regression_sum_errors"),
                                     "regression_medians": ("regression_quantiles",
                                                            "regression_sums",
                                                            "regression_quantile_medians")}

#: Curves (``me.curve``): the steps of each kind; "sweep" is decision metrics at thresholds.
CURVES: dict[str, tuple[str, ...]] = {
    "roc": (*_CURVE, "curve_rates"),
    "pr": (*_CURVE, "curve_rates"),
    "reliability": ("calibration_bins", "reliability_table"),
    "det": (*_CURVE, "det_rates"),
    "thresholds": THRESHOLDS.steps("binary"),
}

_CLASSIFICATION = ("binary", "multiclass", "multilabel")
_ALL = dict.fromkeys(_CLASSIFICATION, DECISIONS)
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
    only_averages: tuple[str, ...] | None = None  # a subset of its family's averages
    probabilities: bool = False  # reads scores as probabilities: they must lie in [0, 1]
    whole_weights: bool = False  # reads weights as counts: they must be whole numbers
    undefined: str = "no weight (every weight is 0)"  # why a value is null, where it can be
    #: the scikit-learn function whose value it equals (``sklearn.metrics.<name>`` and how it
    #: is called where that is not plain); None where scikit-learn has none
    sklearn: str | None = None

    def family(self, task: Task, average: str | None = None) -> Family:
        if average == "samples" and self.samples_average and task == "multilabel":
            return SAMPLES
        if task not in self.families:
            raise InputError(f"metric {self.name!r} is not defined for task {task!r}; "
                             f"it is for {sorted(self.families)}")
        return self.families[task]

    def averages(self, task: Task) -> tuple[str, ...]:
        own = self.families[task].averages if task in self.families and self.per_label else ()
        if self.only_averages is not None:
            own = tuple(a for a in own if a in self.only_averages)
        return (*own, "samples") if self.samples_average and task == "multilabel" else own


def _metrics(*metrics: Metric) -> dict[str, Metric]:
    return {m.name: m for m in metrics}


METRICS: dict[str, Metric] = _metrics(
    Metric("tp", "true positives: weight of true labels predicted positive", _ALL,
           sklearn="sklearn.metrics.multilabel_confusion_matrix (its per-label matrices' cells)"),
    Metric("fp", "false positives: weight of false labels predicted positive", _ALL,
           sklearn="sklearn.metrics.multilabel_confusion_matrix (its per-label matrices' cells)"),
    Metric("fn", "false negatives: weight of true labels predicted negative", _ALL,
           sklearn="sklearn.metrics.multilabel_confusion_matrix (its per-label matrices' cells)"),
    Metric("tn", "true negatives: weight of false labels predicted negative", _ALL,
           sklearn="sklearn.metrics.multilabel_confusion_matrix (its per-label matrices' cells)"),
    Metric("support", "weight of true labels (tp + fn)", _ALL,
           sklearn="sklearn.metrics.precision_recall_fscore_support (its support)"),
    Metric("accuracy", "share of right decisions; multiclass: argmax equals the true label "
           "(multilabel per label; its exact match is subset_accuracy)",
           {**_THRESHOLDED, "multiclass": MULTICLASS},
           sklearn="sklearn.metrics.accuracy_score"),
    Metric("precision", "tp / (tp + fp)", _ALL, samples_average=True,
           undefined="nothing predicted positive (tp + fp = 0)",
           sklearn="sklearn.metrics.precision_score"),
    Metric("recall", "tp / (tp + fn), also called sensitivity or true positive rate", _ALL,
           samples_average=True,
           undefined="no positives (tp + fn = 0)",
           sklearn="sklearn.metrics.recall_score"),
    Metric("f1", "harmonic mean of precision and recall", _ALL, samples_average=True,
           undefined="no positives and nothing predicted positive",
           sklearn="sklearn.metrics.f1_score"),
    Metric("fbeta", "F-beta: recall weighted beta times as much as precision", _ALL,
           params=("beta",), samples_average=True,
           undefined="no positives and nothing predicted positive",
           sklearn="sklearn.metrics.fbeta_score"),
    Metric("specificity", "tn / (tn + fp), the true negative rate", _ALL,
           undefined="no negatives (tn + fp = 0)",
           sklearn="sklearn.metrics.recall_score of the negated truth and decisions"),
    Metric("jaccard", "tp / (tp + fp + fn), intersection over union", _ALL,
           samples_average=True,
           undefined="no positives and nothing predicted positive",
           sklearn="sklearn.metrics.jaccard_score"),
    # scikit-learn's class_likelihood_ratios, one metric per ratio; binary only, as there
    Metric("positive_likelihood_ratio", "LR+ = recall / (1 - specificity) = (tp / (tp + fn)) / "
           "(fp / (fp + tn)), from the counts at the threshold", {"binary": DECISIONS},
           undefined="no false positives (fp = 0), or no positives (tp + fn = 0)",
           sklearn="sklearn.metrics.class_likelihood_ratios (its first value, LR+)"),
    Metric("negative_likelihood_ratio", "LR- = (1 - recall) / specificity = (fn / (tp + fn)) / "
           "(tn / (fp + tn)), from the counts at the threshold", {"binary": DECISIONS},
           undefined="no true negatives (tn = 0), or no positives (tp + fn = 0)",
           sklearn="sklearn.metrics.class_likelihood_ratios (its second value, LR-)"),
    Metric("mcc", "Matthews correlation coefficient (multiclass: Gorodkin's R_K); 0 when "
           "undefined, as scikit-learn", {**_THRESHOLDED, "multiclass": MULTICLASS},
           sklearn="sklearn.metrics.matthews_corrcoef"),
    Metric("hamming_loss", "share of wrong label decisions (multiclass: 1 - accuracy)",
           {**_THRESHOLDED, "multiclass": MULTICLASS}, per_label=False,
           sklearn="sklearn.metrics.hamming_loss"),
    Metric("zero_one_loss", "share of samples decided wrong: 1 - accuracy (multilabel: 1 - "
           "subset_accuracy, a sample wrong unless every label is right)",
           {"binary": DECISIONS, "multiclass": MULTICLASS, "multilabel": SAMPLES},
           per_label=False, sklearn="sklearn.metrics.zero_one_loss"),
    Metric("subset_accuracy", "share of samples with every label decided right (exact match)",
           {"multilabel": SAMPLES},
           sklearn="sklearn.metrics.accuracy_score of the label indicator matrices"),
    Metric("adjusted_accuracy", "share of samples whose top-scored label is a true one",
           {"multilabel": SAMPLES}),
    Metric("balanced_accuracy", "mean recall over the classes that have true samples",
           {"multiclass": MULTICLASS},
           undefined="no class has positives",
           sklearn="sklearn.metrics.balanced_accuracy_score"),
    Metric("cohen_kappa", "Cohen's kappa between true and argmax labels",
           {"multiclass": MULTICLASS},
           undefined="agreement by chance is complete",
           sklearn="sklearn.metrics.cohen_kappa_score"),
    Metric("confusion_matrix", "weight of samples per (true label, predicted label)",
           {"multiclass": MULTICLASS},
           sklearn="sklearn.metrics.confusion_matrix"),
    Metric("top_k_accuracy", "share of samples whose true label is among the k top-scored",
           {"multiclass": TOP_K}, params=("k",),
           sklearn="sklearn.metrics.top_k_accuracy_score"),
    # ranking across samples, per label (multiclass: one-vs-rest)
    Metric("roc_auc", "area under the ROC curve; with max_fpr, McClish-corrected partial AUC",
           dict.fromkeys(_SCORED, RANKING), params=("max_fpr",),
           undefined="one class only: no positives or no negatives",
           sklearn="sklearn.metrics.roc_auc_score"),
    Metric("average_precision", "step-wise area under the precision-recall curve (no "
           "interpolation); its macro average is mean AP", dict.fromkeys(_SCORED, RANKING),
           undefined="no positives",
           sklearn="sklearn.metrics.average_precision_score"),
    Metric("break_even", "precision = recall point of the PR curve: R-precision when the "
           "positives' weight can be cut exactly, interpolated across tied scores otherwise",
           dict.fromkeys(_SCORED, RANKING),
           undefined="no positives"),
    Metric("roc_auc_ovo", "multiclass one-vs-one ROC AUC (Hand & Till)", {"multiclass": OVO},
           undefined="fewer than two classes",
           sklearn="sklearn.metrics.roc_auc_score with multi_class='ovo'"),
    Metric("max_f1", "the best F1 over all thresholds, at the threshold that reaches it",
           dict.fromkeys(_SCORED, OPERATING),
           undefined="no positives",
           sklearn="sklearn.metrics.precision_recall_curve: the best F1 over its points"),
    Metric("precision_at_recall", "the best precision among thresholds with recall >= "
           "min_recall, at that threshold", dict.fromkeys(_SCORED, OPERATING),
           params=("min_recall",),
           undefined="no positives, or no threshold reaches min_recall",
           sklearn="sklearn.metrics.precision_recall_curve: its best precision at "
                   "recall >= min_recall"),
    Metric("recall_at_precision", "the best recall among thresholds with precision >= "
           "min_precision, at that threshold", dict.fromkeys(_SCORED, OPERATING),
           params=("min_precision",),
           undefined="no positives, or no threshold reaches min_precision",
           sklearn="sklearn.metrics.precision_recall_curve: its best recall at "
                   "precision >= min_precision"),
    # ranking across labels, per sample
    Metric("coverage_error", "how far down a sample's ranking to go to cover all its true "
           "labels, averaged over samples", dict.fromkeys(("multilabel", "multiclass"),
                                                          LABEL_RANKING),
           sklearn="sklearn.metrics.coverage_error"),
    Metric("label_ranking_loss", "share of (true, false) label pairs of a sample ranked in the "
           "wrong order (ties count as wrong)", dict.fromkeys(("multilabel", "multiclass"),
                                                               LABEL_RANKING),
           sklearn="sklearn.metrics.label_ranking_loss"),
    Metric("label_ranking_average_precision", "LRAP: for each true label, the share of true "
           "labels among those ranked at or above it", dict.fromkeys(("multilabel",
                                                                       "multiclass"),
                                                                      LABEL_RANKING),
           sklearn="sklearn.metrics.label_ranking_average_precision_score"),
    Metric("one_error", "share of samples whose top-scored label (ties: the smallest) is false",
           dict.fromkeys(("multilabel", "multiclass"), LABEL_RANKING)),
    Metric("precision_at_k", "share of true labels among a sample's k top-scored (ties: the "
           "smallest label first), averaged over samples",
           dict.fromkeys(("multilabel", "multiclass"), LABEL_RANKING), params=("k",)),
    Metric("recall_at_k", "share of a sample's true labels among its k top-scored, averaged "
           "over samples that have true labels",
           dict.fromkeys(("multilabel", "multiclass"), LABEL_RANKING), params=("k",),
           undefined="no sample has a true label"),
    Metric("dcg", "discounted cumulative gain of each sample's labels ranked by score, its "
           "truth read as graded relevance (>= 0), discount 1 / log_base(position + 1) to "
           "position k, tied scores averaged (ignore_ties: not); averaged over samples",
           dict.fromkeys(("multilabel", "multiclass"), GRADED),
           params=("k", "log_base", "ignore_ties"),
           sklearn="sklearn.metrics.dcg_score (k: its k; scikit-learn's default k=None is k "
                   ">= the number of labels)"),
    Metric("ndcg", "normalized DCG: each sample's DCG over the DCG of its ideal ranking (0 "
           "where that is 0), averaged over samples", dict.fromkeys(("multilabel",
                                                                      "multiclass"), GRADED),
           params=("k", "ignore_ties"),
           sklearn="sklearn.metrics.ndcg_score (k: its k; scikit-learn's default k=None is k "
                   ">= the number of labels)"),
    # probabilistic
    Metric("log_loss", "cross-entropy of the scores as probabilities (clipped as scikit-learn); "
           "multilabel: per label", {"binary": PROBABILITY, "multilabel": PROBABILITY,
                                     "multiclass": PROBABILITY_MULTICLASS}, probabilities=True,
           sklearn="sklearn.metrics.log_loss"),
    Metric("brier_score", "mean squared difference between score and truth (multiclass: summed "
           "over classes)", {"binary": PROBABILITY, "multilabel": PROBABILITY,
                             "multiclass": PROBABILITY_MULTICLASS}, probabilities=True,
           sklearn="sklearn.metrics.brier_score_loss"),
    Metric("d2_log_loss", "D²: 1 - log loss / log loss of the weighted class prevalence "
           "(a model predicting each class's share of the weight scores 0)",
           {"binary": PROBABILITY, "multilabel": PROBABILITY,
            "multiclass": PROBABILITY_MULTICLASS}, probabilities=True,
           undefined="the truth is constant: one class holds all the weight (also with one "
                     "sample, or no weight)",
           sklearn="sklearn.metrics.d2_log_loss_score"),
    Metric("d2_brier", "D², the Brier skill score: 1 - Brier score / Brier score of the "
           "weighted class prevalence", {"binary": PROBABILITY, "multilabel": PROBABILITY,
                                         "multiclass": PROBABILITY_MULTICLASS},
           probabilities=True,
           undefined="the truth is constant: one class holds all the weight (also with one "
                     "sample, or no weight)",
           sklearn="sklearn.metrics.d2_brier_score"),
    Metric("hinge_loss", "mean max(0, 1 - margin), the score read as a decision value (not a "
           "probability): binary margin score for a true row, -score for a false one; "
           "multiclass (Crammer-Singer) the true class's score minus the largest other score",
           {"binary": PROBABILITY, "multiclass": TOP_K},
           sklearn="sklearn.metrics.hinge_loss"),
    Metric("calibration_error", "expected calibration error: weighted mean |observed rate - "
           "mean score| over n_bins equal-width bins", dict.fromkeys(_SCORED, CALIBRATION),
           params=("n_bins",), probabilities=True),
    # estimated without the truth (confidence-based estimation): each row's probability of
    # being true is its score, or its score through a calibration map learnt on labelled rows
    Metric("estimated_accuracy", "expected share of right decisions at the threshold, each "
           "row's outcome drawn with its probability (per label)",
           dict.fromkeys(_SCORED, ESTIMATED), probabilities=True,
           undefined="no weight (every weight is 0)"),
    Metric("estimated_precision", "expected tp / expected (tp + fp) at the threshold",
           dict.fromkeys(_SCORED, ESTIMATED), probabilities=True,
           undefined="nothing predicted positive"),
    Metric("estimated_recall", "expected tp / expected positive weight at the threshold",
           dict.fromkeys(_SCORED, ESTIMATED), probabilities=True,
           undefined="no expected positive weight (every probability is 0)"),
    Metric("estimated_f1", "2 expected tp / (2 expected tp + expected fp + expected fn)",
           dict.fromkeys(_SCORED, ESTIMATED), probabilities=True,
           undefined="no expected positive weight and nothing predicted positive"),
    Metric("estimated_roc_auc", "ROC AUC of the expected outcomes: each row a positive of its "
           "probability's weight and a negative of the rest",
           dict.fromkeys(_SCORED, ESTIMATED), probabilities=True,
           undefined="no expected positive or no expected negative weight"),
    # regression
    Metric("mse", "mean squared error", {"regression": ERRORS},
           only_averages=("none", "macro"),
           sklearn="sklearn.metrics.mean_squared_error"),
    Metric("rmse", "root mean squared error", {"regression": ERRORS},
           only_averages=("none", "macro"),
           sklearn="sklearn.metrics.root_mean_squared_error"),
    Metric("mae", "mean absolute error", {"regression": ERRORS},
           only_averages=("none", "macro"),
           sklearn="sklearn.metrics.mean_absolute_error"),
    Metric("mape", "mean absolute percentage error, |error| / max(|truth|, eps)",
           {"regression": ERRORS}, only_averages=("none", "macro"),
           sklearn="sklearn.metrics.mean_absolute_percentage_error"),
    Metric("r2", "coefficient of determination; null when the truth is constant",
           {"regression": REGRESSION},
           undefined="the truth is constant",
           sklearn="sklearn.metrics.r2_score"),
    Metric("explained_variance", "1 - variance of the error / variance of the truth; null when "
           "the truth is constant", {"regression": REGRESSION},
           undefined="the truth is constant",
           sklearn="sklearn.metrics.explained_variance_score"),
    Metric("max_error", "the largest |error| among the rows of positive weight",
           {"regression": ERRORS}, only_averages=("none", "macro"),
           sklearn="sklearn.metrics.max_error (per output, over the rows of positive weight)"),
    Metric("median_absolute_error", "weighted median of |error| (scikit-learn's averaged "
           "inverted CDF: the mean of the two middle values where the weight splits evenly)",
           {"regression": MEDIAN},
           sklearn="sklearn.metrics.median_absolute_error"),
    Metric("mean_squared_log_error", "mean of (ln(1 + prediction) - ln(1 + truth))²; values "
           "<= -1 refused", {"regression": REGRESSION}, only_averages=("none", "macro"),
           sklearn="sklearn.metrics.mean_squared_log_error"),
    Metric("root_mean_squared_log_error", "square root of mean_squared_log_error",
           {"regression": REGRESSION}, only_averages=("none", "macro"),
           sklearn="sklearn.metrics.root_mean_squared_log_error"),
    Metric("mean_pinball_loss", "mean pinball (quantile) loss at the quantile pinball_alpha",
           {"regression": REGRESSION}, params=("pinball_alpha",), only_averages=("none", "macro"),
           sklearn="sklearn.metrics.mean_pinball_loss (alpha: pinball_alpha)"),
    Metric("mean_poisson_deviance", "mean Poisson deviance (truth >= 0, prediction > 0)",
           {"regression": REGRESSION}, only_averages=("none", "macro"),
           sklearn="sklearn.metrics.mean_poisson_deviance"),
    Metric("mean_gamma_deviance", "mean gamma deviance (truth and prediction > 0)",
           {"regression": REGRESSION}, only_averages=("none", "macro"),
           sklearn="sklearn.metrics.mean_gamma_deviance"),
    Metric("mean_tweedie_deviance", "mean Tweedie deviance of power (0: the squared error)",
           {"regression": REGRESSION}, params=("power",), only_averages=("none", "macro"),
           sklearn="sklearn.metrics.mean_tweedie_deviance"),
    Metric("d2_absolute_error", "1 - absolute error / absolute deviation from the truth's "
           "weighted median; null when the truth is constant", {"regression": QUANTILES},
           undefined="the truth is constant",
           sklearn="sklearn.metrics.d2_absolute_error_score"),
    Metric("d2_pinball", "1 - pinball loss / pinball loss of the truth's weighted quantile;"
           " null when the truth is constant", {"regression": QUANTILES}, params=("pinball_alpha",),
           undefined="the truth is constant",
           sklearn="sklearn.metrics.d2_pinball_score (alpha: pinball_alpha)"),
    Metric("d2_tweedie", "1 - Tweedie deviance / deviance of the truth's weighted mean (power); "
           "null when the truth is constant", {"regression": REGRESSION}, params=("power",),
           only_averages=("none", "macro"), undefined="the truth is constant",
           sklearn="sklearn.metrics.d2_tweedie_score"),
    # clustering: scikit-learn's functions of the same name (without _score)
    Metric("adjusted_rand", "Rand index adjusted for chance (Hubert & Arabie)",
           {"clustering": CLUSTERING},
           sklearn="sklearn.metrics.adjusted_rand_score"),
    Metric("rand", "share of sample pairs on which classes and clusters agree (together or "
           "apart)", {"clustering": CLUSTERING},
           sklearn="sklearn.metrics.rand_score"),
    Metric("mutual_info", "mutual information between classes and clusters, in nats",
           {"clustering": CLUSTERING},
           sklearn="sklearn.metrics.mutual_info_score"),
    Metric("normalized_mutual_info", "mutual information over a mean (average_method) of the "
           "two entropies", {"clustering": CLUSTERING}, params=("average_method",),
           sklearn="sklearn.metrics.normalized_mutual_info_score"),
    Metric("adjusted_mutual_info", "mutual information adjusted for chance: (MI - E[MI]) / "
           "(mean entropy - E[MI]), E[MI] under the hypergeometric model",
           {"clustering": CLUSTERING}, params=("average_method",), whole_weights=True,
           sklearn="sklearn.metrics.adjusted_mutual_info_score"),
    Metric("homogeneity", "1 - H(class | cluster) / H(class): each cluster holds one class",
           {"clustering": CLUSTERING},
           sklearn="sklearn.metrics.homogeneity_score"),
    Metric("completeness", "1 - H(cluster | class) / H(cluster): each class is in one cluster",
           {"clustering": CLUSTERING},
           sklearn="sklearn.metrics.completeness_score"),
    Metric("v_measure", "weighted harmonic mean of homogeneity and completeness (beta)",
           {"clustering": CLUSTERING}, params=("beta",),
           sklearn="sklearn.metrics.v_measure_score"),
    Metric("fowlkes_mallows", "geometric mean of pairwise precision and recall",
           {"clustering": CLUSTERING},
           sklearn="sklearn.metrics.fowlkes_mallows_score"),
    Metric("purity", "share of the weight in its cluster's largest class",
           {"clustering": CLUSTERING}),
    Metric("pair_confusion_matrix", "ordered sample pairs by whether they share a class "
           "(truth 1) and a cluster (cluster 1), as scikit-learn's 2 x 2 matrix",
           {"clustering": CLUSTERING},
           sklearn="sklearn.metrics.cluster.pair_confusion_matrix"),
    Metric("contingency", "weight of samples per (class, cluster): rows truth, cluster, value",
           {"clustering": CONTINGENCY},
           sklearn="sklearn.metrics.cluster.contingency_matrix"),
)

#: Metrics where a smaller value is the better one (rankings and deltas turn round for them);
#: a set, as a declared metric (mleval_sql/declared.py) says which way it goes.
LOWER_IS_BETTER: set[str] = {
    "fp", "fn", "hamming_loss", "zero_one_loss", "negative_likelihood_ratio", "hinge_loss",
    "coverage_error", "label_ranking_loss", "one_error",
    "log_loss", "brier_score", "calibration_error", "mse", "rmse", "mae", "mape",
    "max_error", "median_absolute_error", "mean_squared_log_error", "root_mean_squared_log_error",
    "mean_pinball_loss", "mean_poisson_deviance", "mean_gamma_deviance", "mean_tweedie_deviance",
}


P = ParamSpec("P")
R = TypeVar("R")

#: The metrics declared now (``mleval_sql.declared.Declared`` by name; each also in
#: :data:`METRICS`): ``me.define``'s for the process, a call's ``define=`` and the files a
#: lake or team keeps for that call (:func:`kept`).
DECLARED_METRICS: dict[str, Any] = {}


@contextmanager
def kept() -> Iterator[None]:
    """The registry as it is now, put back after the block: what the block declares
    (``define=``, a lake's ``metrics.toml``...) or removes does not outlive it. Every door
    that takes declarations runs in one, so they hold for that call.

    >>> with kept():
    ...     METRICS["cost"] = METRICS["fp"]
    >>> "cost" in METRICS
    False
    """
    declared, metrics, lower = dict(DECLARED_METRICS), dict(METRICS), set(LOWER_IS_BETTER)
    try:
        yield
    finally:
        DECLARED_METRICS.clear()
        DECLARED_METRICS.update(declared)
        METRICS.clear()
        METRICS.update(metrics)
        LOWER_IS_BETTER.clear()
        LOWER_IS_BETTER.update(lower)


def scoped(door: Callable[P, R]) -> Callable[P, R]:
    """``door`` (a function that takes ``define=`` or reads a lake's or team's declared
    metrics) run in :func:`kept`: what it declares holds for the call; ``me.define``'s for
    the process."""
    @functools.wraps(door)
    def call(*args: P.args, **kwargs: P.kwargs) -> R:
        with kept():
            return door(*args, **kwargs)
    return call


def metrics_of(family: Family) -> tuple[str, ...]:
    """The metrics some task computes with ``family``, in the registry's order: the names a
    polars plan gives (the SQL files write theirs out; tests/test_registry.py compares them).

    >>> metrics_of(RANKING)
    ('roc_auc', 'average_precision', 'break_even')
    """
    return tuple(m.name for m in METRICS.values()
                 if any(f is family for f in m.families.values()))


def default_averages(task: Task) -> tuple[str, ...]:
    """Per label for binary and regression (usually one label), the macro average otherwise
    (clustering metrics have no averages)."""
    return ("none",) if task in ("binary", "regression", "clustering") else ("macro",)
