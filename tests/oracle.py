"""Expected metric rows from scikit-learn (or a hand-worked reference where it has none).

``expected(frame, task, metric, averages, by, params)`` mirrors ``mleval_sql.evaluate``'s rows:
``*by, metric, average, label, [predicted,] value`` with None for undefined values. Every metric
of the registry must have an entry in ORACLES (tests/test_metrics.py checks it).
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import polars as pl
from sklearn import metrics as skm

Rows = list[tuple[str | None, object, object, float | None]]  # average, label, predicted, value


@dataclass
class Segment:
    """One segment as scikit-learn wants it: samples x labels matrices and sample weights."""

    labels: list  # this segment's labels, sorted
    all_labels: list  # every label of the input, sorted
    truth: np.ndarray  # (n_samples, n_labels) bool (regression: see ``target``)
    score: np.ndarray  # (n_samples, n_labels) float
    weight: np.ndarray  # (n_samples,)
    target: np.ndarray  # (n_samples, n_labels) float: the truth column as numbers
    params: dict  # every parameter of the request (threshold, beta, k, max_fpr, n_bins, ...)

    @property
    def threshold(self) -> float:
        return self.params["threshold"]

    @property
    def beta(self) -> float:
        return self.params["beta"]

    @property
    def k(self) -> int:
        return self.params["k"]

    @property
    def zero_division(self) -> float | None:
        return self.params["zero_division"]

    @property
    def zd(self) -> float:
        return np.nan if self.zero_division is None else self.zero_division

    @property
    def decided(self) -> np.ndarray:
        return self.score >= self.threshold

    @property
    def y_true(self) -> np.ndarray:  # multiclass
        return np.asarray(self.labels)[self.truth.argmax(axis=1)]

    @property
    def y_pred(self) -> np.ndarray:  # multiclass argmax: ties to the smallest (first) label
        return np.asarray(self.labels)[self.score.argmax(axis=1)]


def _clean(value: float | None) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _quiet(fn: Callable[..., float], *args: object, **kwargs: object) -> float | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return _clean(fn(*args, **kwargs))
        except ZeroDivisionError:  # np.average over weights summing to 0
            return None
        except ValueError as error:  # scikit-learn refuses weights that are all 0: 0/0
            if "at least one non-zero" in str(error):
                return None
            raise


# -- per-label (one-vs-rest) values, and averages over them --------------------------------------

def _binary_counts(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> tuple[float, ...]:
    if not w.any():  # scikit-learn refuses weights that are all 0
        return 0.0, 0.0, 0.0, 0.0
    tn, fp, fn, tp = skm.confusion_matrix(y, p, labels=[False, True], sample_weight=w).ravel()
    return float(tp), float(fp), float(fn), float(tn)


def _ratio(num: float, den: float, zd: float | None) -> float | None:
    return zd if den == 0 else num / den


LABELWISE: dict[str, Callable[[Segment, np.ndarray, np.ndarray], float | None]] = {
    "tp": lambda s, y, p: _binary_counts(y, p, s.weight)[0],
    "fp": lambda s, y, p: _binary_counts(y, p, s.weight)[1],
    "fn": lambda s, y, p: _binary_counts(y, p, s.weight)[2],
    "tn": lambda s, y, p: _binary_counts(y, p, s.weight)[3],
    "support": lambda s, y, p: float(s.weight[y].sum()),
    "accuracy": lambda s, y, p: _quiet(skm.accuracy_score, y, p, sample_weight=s.weight),
    "precision": lambda s, y, p: _quiet(skm.precision_score, y, p, sample_weight=s.weight,
                                        zero_division=s.zd),
    "recall": lambda s, y, p: _quiet(skm.recall_score, y, p, sample_weight=s.weight,
                                     zero_division=s.zd),
    "f1": lambda s, y, p: _quiet(skm.f1_score, y, p, sample_weight=s.weight, zero_division=s.zd),
    "fbeta": lambda s, y, p: _quiet(skm.fbeta_score, y, p, beta=s.beta, sample_weight=s.weight,
                                    zero_division=s.zd),
    "specificity": lambda s, y, p: _quiet(skm.recall_score, ~y, ~p, sample_weight=s.weight,
                                          zero_division=s.zd),
    "jaccard": lambda s, y, p: _jaccard(s, y, p),
    "mcc": lambda s, y, p: _mcc(y, p, s.weight),
}

def _mcc(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float | None:
    # weights all 0: MCC's denominator is 0, so 0 (the README's rule; scikit-learn raises)
    return _quiet(skm.matthews_corrcoef, y, p, sample_weight=w) if w.any() else 0.0


def _rate(fn: Callable[[Segment, np.ndarray, np.ndarray], float | None],
          ) -> Callable[[Segment, np.ndarray, np.ndarray], float | None]:
    """A ratio of counts: 0/0 (zero_division) where every weight is 0 (scikit-learn raises)."""
    return lambda s, y, p: fn(s, y, p) if s.weight.any() else s.zero_division


def _jaccard(seg: Segment, y: np.ndarray, p: np.ndarray) -> float | None:
    if seg.zero_division is None:  # jaccard_score takes no nan zero_division: count it by hand
        tp, fp, fn, _ = _binary_counts(y, p, seg.weight)
        return _ratio(tp, tp + fp + fn, None)
    return _quiet(skm.jaccard_score, y, p, sample_weight=seg.weight,
                  zero_division=seg.zero_division)


for _name in ("precision", "recall", "f1", "fbeta", "specificity", "jaccard"):
    LABELWISE[_name] = _rate(LABELWISE[_name])

# metrics whose multilabel / multiclass averages scikit-learn computes itself
SKLEARN_AVERAGED = {"precision": skm.precision_score, "recall": skm.recall_score,
                    "f1": skm.f1_score, "fbeta": skm.fbeta_score}


def _columns(seg: Segment, task: str) -> tuple[np.ndarray, np.ndarray]:
    """Per-label truth and decision matrices (multiclass: one-hot of true and argmax labels)."""
    if task == "multiclass":
        labels = np.asarray(seg.labels)
        return seg.y_true[:, None] == labels, seg.y_pred[:, None] == labels
    return seg.truth, seg.decided


def _nan_average(values: list[float | None], weights: list[float], *,
                 unweighted_if_no_weight: bool = True) -> float | None:
    """The weighted mean of the values that are not None; when their weights sum to 0, the
    plain mean (an average over labels: scikit-learn's weighted falls back to macro) or None
    (an average over samples: no weight, no average)."""
    kept = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None]
    if not kept:
        return None
    total = sum(w for _, w in kept)
    if total == 0:
        return float(np.mean([v for v, _ in kept])) if unweighted_if_no_weight else None
    return sum(v * w for v, w in kept) / total


def label_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    truth, decided = _columns(seg, task)
    per_label = [LABELWISE[metric](seg, truth[:, j], decided[:, j])
                 for j in range(len(seg.labels))]
    supports = [float(seg.weight[truth[:, j]].sum()) for j in range(len(seg.labels))]
    return averaged_rows(seg, per_label, supports, averages,
                         micro=lambda: _micro(seg, task, metric, truth, decided),
                         own=lambda average: _sklearn_average(seg, task, metric, average))


def averaged_rows(seg: Segment, per_label: list[float | None], supports: list[float],
                  averages: tuple[str, ...], *, micro: Callable[[], float | None],
                  own: Callable[[str], float | None]) -> Rows:
    """Per-label rows and their averages; ``own(average)`` is scikit-learn's where it has one
    (None: the nan-skipping reference)."""
    rows: Rows = []
    for average in averages:
        if average == "none":
            values = dict(zip(seg.labels, per_label, strict=True))
            rows += [(None, label, None, values.get(label)) for label in seg.all_labels]
        elif average == "micro":
            rows.append(("micro", None, None, micro()))
        elif average in ("macro", "weighted"):
            weights = supports if average == "weighted" else [1.0] * len(per_label)
            value = own(average)
            rows.append((average, None, None,
                         value if value is not None else _nan_average(per_label, weights)))
        elif average == "macro_std":
            kept = [v for v in per_label if v is not None]
            rows.append(("macro_std", None, None, float(np.std(kept)) if kept else None))
    return rows


def _micro(seg: Segment, task: str, metric: str, truth: np.ndarray,
           decided: np.ndarray) -> float | None:
    if task == "multiclass" and metric in SKLEARN_AVERAGED and seg.weight.any():
        # (scikit-learn refuses all-0 weights; the pooled counts below are then all 0, and
        # their ratios 0/0 take zero_division as a label's do)
        return _sklearn_average(seg, task, metric, "micro")
    if metric in ("tp", "fp", "fn", "tn", "support"):
        return sum(LABELWISE[metric](seg, truth[:, j], decided[:, j])
                   for j in range(len(seg.labels)))
    pooled = Segment(**{**seg.__dict__, "weight": np.repeat(seg.weight, len(seg.labels))})
    return LABELWISE[metric](pooled, truth.ravel(), decided.ravel())


def _sklearn_average(seg: Segment, task: str, metric: str, average: str) -> float | None:
    """scikit-learn's own average, where it has one (else None: use the reference)."""
    if metric not in SKLEARN_AVERAGED or len(seg.labels) < 2:
        return None
    extra = {"beta": seg.beta} if metric == "fbeta" else {}
    if task == "multiclass":
        return _quiet(SKLEARN_AVERAGED[metric], seg.y_true, seg.y_pred, labels=seg.labels,
                      average=average, sample_weight=seg.weight, zero_division=seg.zd, **extra)
    return _quiet(SKLEARN_AVERAGED[metric], seg.truth, seg.decided, average=average,
                  sample_weight=seg.weight, zero_division=seg.zd, **extra)


# -- whole-segment metrics -----------------------------------------------------------------------

def _one(value: float | None) -> Rows:
    return [(None, None, None, value)]


def _hamming(seg: Segment, task: str) -> Rows:
    if task == "multiclass":
        return _one(_quiet(skm.hamming_loss, seg.y_true, seg.y_pred, sample_weight=seg.weight))
    return _one(_quiet(skm.hamming_loss, seg.truth.astype(int), seg.decided.astype(int),
                       sample_weight=seg.weight))


def _adjusted(seg: Segment) -> Rows:
    hits = seg.truth[np.arange(len(seg.weight)), seg.score.argmax(axis=1)]
    return _one(_quiet(np.average, hits, weights=seg.weight))


def _confusion(seg: Segment) -> Rows:
    matrix = (skm.confusion_matrix(seg.y_true, seg.y_pred, labels=seg.labels,
                                   sample_weight=seg.weight) if seg.weight.any()
              else np.zeros((len(seg.labels),) * 2))  # scikit-learn refuses all-0 weights
    return [(None, t, p, float(matrix[i, j])) for i, t in enumerate(seg.labels)
            for j, p in enumerate(seg.labels)]


def _samples(seg: Segment, metric: str) -> Rows:
    fn = {**SKLEARN_AVERAGED, "jaccard": skm.jaccard_score}[metric]
    extra = {"beta": seg.beta} if metric == "fbeta" else {}
    if metric == "jaccard" and seg.zero_division is None:
        # scikit-learn 1.9's jaccard_score does not skip nan samples; every average here does
        values = [_ratio(w * (t & p).sum(), w * (t | p).sum(), None)
                  for t, p, w in zip(seg.truth, seg.decided, seg.weight, strict=True)]
        return [("samples", None, None, _nan_average(values, list(seg.weight),
                                                     unweighted_if_no_weight=False))]
    return [("samples", None, None, _quiet(fn, seg.truth, seg.decided, average="samples",
                                            sample_weight=seg.weight, zero_division=seg.zd,
                                            **extra))]


def whole_rows(seg: Segment, task: str, metric: str) -> Rows:
    y, p, w = seg.y_true, seg.y_pred, seg.weight
    if metric == "accuracy":
        return _one(_quiet(skm.accuracy_score, y, p, sample_weight=w))
    if metric == "hamming_loss":
        return _hamming(seg, task)
    if metric == "balanced_accuracy":
        return _one(_quiet(skm.balanced_accuracy_score, y, p, sample_weight=w))
    if metric == "mcc":
        return _one(_mcc(y, p, w))
    if metric == "cohen_kappa":
        return _one(_quiet(skm.cohen_kappa_score, y, p, sample_weight=w))
    if metric == "confusion_matrix":
        return _confusion(seg)
    if metric == "top_k_accuracy":
        if len(seg.labels) <= 2:  # scikit-learn takes two classes as binary: a 0.5 threshold
            return _one(_top_k(seg))
        return _one(_quiet(skm.top_k_accuracy_score, y, seg.score, k=seg.k, labels=seg.labels,
                           sample_weight=w))
    if metric == "subset_accuracy":
        return _one(_quiet(skm.accuracy_score, seg.truth, seg.decided, sample_weight=w))
    if metric == "adjusted_accuracy":
        return _adjusted(seg)
    raise KeyError(metric)


def _top_k(seg: Segment) -> float | None:
    """Top-k accuracy by hand: labels ranked above the true one, ties ranking the larger label
    first (scikit-learn's rule), fewer than k."""
    true = seg.truth.argmax(axis=1)
    own = seg.score[np.arange(len(true)), true][:, None]
    later = np.arange(seg.score.shape[1])[None, :] > true[:, None]
    above = ((seg.score > own) | ((seg.score == own) & later)).sum(axis=1)
    return _quiet(np.average, above < seg.k, weights=seg.weight)


def _decision_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    from mleval_sql.registry import METRICS

    if not METRICS[metric].averages(task):
        return whole_rows(seg, task, metric)
    rows = label_rows(seg, task, metric, tuple(a for a in averages if a != "samples"))
    return rows + (_samples(seg, metric) if "samples" in averages else [])


#: metric -> rows(segment, task, metric, averages); the other families' oracles add theirs.
ORACLES: dict[str, Callable[[Segment, str, str, tuple[str, ...]], Rows]] = {
    m: _decision_rows for m in (*LABELWISE, "hamming_loss", "balanced_accuracy", "cohen_kappa",
                                "confusion_matrix", "top_k_accuracy", "subset_accuracy",
                                "adjusted_accuracy")
}


def expected(frame: pl.DataFrame, task: str, metric: str, averages: tuple[str, ...],
             by: list[str], params: dict) -> pl.DataFrame:
    """The rows ``evaluate(frame, [metric], average=averages, by=by, **params)`` must give."""
    from tests import oracle_families  # noqa: F401  (registers the other families' oracles)

    all_labels = sorted(frame["label"].unique().to_list())
    out = []
    parts = frame.partition_by(by, as_dict=True) if by else {(): frame}
    for key, part in parts.items():
        seg = _segment(part, all_labels, params)
        rows = ORACLES[metric](seg, task, metric, averages)
        out += [(*key, metric, a, lab, pred, v) for a, lab, pred, v in rows]
    return pl.DataFrame(out, orient="row", schema=[*by, "metric", "average", "label", "predicted",
                                                   "value"], strict=False, infer_schema_length=None)


def _segment(part: pl.DataFrame, all_labels: list, params: dict) -> Segment:
    labels = sorted(part["label"].unique().to_list())
    wide = part.pivot(on="label", index="sample", values=["score", "truth"],
                      sort_columns=False).sort("sample")
    score = np.column_stack([wide[f"score_{lab}"].to_numpy() for lab in labels])
    target = np.column_stack([wide[f"truth_{lab}"].cast(pl.Float64).to_numpy()
                              for lab in labels])
    weights = (part.group_by("sample").agg(pl.col("weight").first()).sort("sample")["weight"]
               .to_numpy() if "weight" in part.columns else np.ones(len(wide)))
    return Segment(labels=labels, all_labels=all_labels, truth=target != 0, score=score,
                   weight=weights, target=target, params=params)
