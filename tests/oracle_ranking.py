"""Expected rows for the ranking family's metrics (scikit-learn, or hand-worked where it has none).

Each function takes (segment, task, metric, averages) and returns rows (average, label,
predicted, value); see tests/oracle.py for Segment and the per-label helpers.

Ranking across samples is one-vs-rest per label: for multiclass, the columns of the one-hot
truth matrix, as scikit-learn's ``roc_auc_score(multi_class='ovr')`` binarizes them (its
multiclass entry point also wants scores summing to 1, which the test data's are not).
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import combinations

import numpy as np
from sklearn import metrics as skm
from sklearn.metrics._base import _average_multiclass_ovo_score
from sklearn.metrics._ranking import _binary_roc_auc_score

from tests.oracle import ORACLES, Rows, Segment, _nan_average, _quiet, averaged_rows


def break_even(y: np.ndarray, s: np.ndarray, w: np.ndarray) -> float | None:
    """Precision = recall where the predicted weight equals the positive weight P, tp
    interpolated linearly inside the tied block that crosses P (written from the definition,
    independently of the engines: distinct scores descending, cumulative sums)."""
    positives = float(w[y].sum())
    if positives == 0:
        return None
    scores = np.unique(s)[::-1]
    block_pos = np.array([w[(s == v) & y].sum() for v in scores])
    block_all = np.array([w[s == v].sum() for v in scores])
    predicted, hits = np.cumsum(block_all), np.cumsum(block_pos)
    i = min(int(np.searchsorted(predicted, positives, side="left")), len(scores) - 1)
    before, hits_before = (predicted[i - 1], hits[i - 1]) if i else (0.0, 0.0)
    # the share first: block_pos * (positives - before) underflows at weights of 1e-300
    return float(hits_before + block_pos[i] * ((positives - before) / block_all[i])) / positives


def _roc_auc(seg: Segment, y: np.ndarray, s: np.ndarray, w: np.ndarray) -> float | None:
    # one class by weight: scikit-learn gives nan, or raises (max_fpr, zero-weight negatives)
    if w[y].sum() == 0 or w[~y].sum() == 0:
        return None
    return _quiet(skm.roc_auc_score, y, s, sample_weight=w, max_fpr=seg.params.get("max_fpr"))


def _average_precision(seg: Segment, y: np.ndarray, s: np.ndarray, w: np.ndarray) -> float | None:
    # scikit-learn 1.9 gives 0 (with a warning) to a label without positive weight; ours is null
    if w[y].sum() == 0:
        return None
    return _quiet(skm.average_precision_score, y, s, sample_weight=w)


def _break_even(seg: Segment, y: np.ndarray, s: np.ndarray, w: np.ndarray) -> float | None:
    return break_even(y, s, w)


BINARY: dict[str, Callable[[Segment, np.ndarray, np.ndarray, np.ndarray], float | None]] = {
    "roc_auc": _roc_auc, "average_precision": _average_precision, "break_even": _break_even,
}
SKLEARN = {"roc_auc": skm.roc_auc_score, "average_precision": skm.average_precision_score}


def _sklearn_average(seg: Segment, metric: str, average: str,
                     per_label: list[float | None]) -> float | None:
    """scikit-learn's own macro / weighted, where it is defined for every label (it gives nan
    or 0 for a one-class label, where we skip the label): else None, use the nan-mean."""
    if metric not in SKLEARN or len(seg.labels) < 2 or any(v is None for v in per_label):
        return None
    extra = {"max_fpr": seg.params.get("max_fpr")} if metric == "roc_auc" else {}
    return _quiet(SKLEARN[metric], seg.truth.astype(int), seg.score, average=average,
                  sample_weight=seg.weight, **extra)


def _micro(seg: Segment, metric: str) -> float | None:
    """All labels pooled, as scikit-learn's average='micro' (which ravels the matrices)."""
    n_labels = len(seg.labels)
    y, s = seg.truth.ravel(), seg.score.ravel()
    w = np.repeat(seg.weight, n_labels)
    if metric in SKLEARN and n_labels >= 2 and w[y].sum() > 0 and w[~y].sum() > 0:
        extra = {"max_fpr": seg.params.get("max_fpr")} if metric == "roc_auc" else {}
        return _quiet(SKLEARN[metric], seg.truth.astype(int), seg.score, average="micro",
                      sample_weight=seg.weight, **extra)
    return BINARY[metric](seg, y, s, w)


def ranking_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    per_label = [BINARY[metric](seg, seg.truth[:, j], seg.score[:, j], seg.weight)
                 for j in range(len(seg.labels))]
    supports = [float(seg.weight[seg.truth[:, j]].sum()) for j in range(len(seg.labels))]
    return averaged_rows(seg, per_label, supports, averages, micro=lambda: _micro(seg, metric),
                         own=lambda average: _sklearn_average(seg, metric, average, per_label))


def ovo_reference(truth: np.ndarray, score: np.ndarray, weight: np.ndarray,
                  average: str) -> float | None:
    """Hand & Till's one-vs-one AUC with sample weights: scikit-learn's
    ``_average_multiclass_ovo_score`` written again with weights (scikit-learn's ovo takes
    none): each pair's AUCs are scikit-learn's weighted binary AUC on the pair's samples, the
    pair's prevalence is its samples' weight, and pairs undefined (a class without weight) are
    skipped."""
    present = [j for j in range(truth.shape[1]) if truth[:, j].any()]
    values, prevalences = [], []
    for a, b in combinations(present, 2):
        mask = truth[:, a] | truth[:, b]
        if weight[truth[:, a]].sum() == 0 or weight[truth[:, b]].sum() == 0:
            values.append(None)  # scikit-learn raises on all-zero weights or gives nan
        else:
            both = [_quiet(skm.roc_auc_score, truth[mask, c], score[mask, c],
                           sample_weight=weight[mask]) for c in (a, b)]
            values.append((both[0] + both[1]) / 2)
        prevalences.append(float(weight[mask].sum()))
    return _nan_average(values, prevalences if average == "weighted" else [1.0] * len(values))


def ovo_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    rows: Rows = []
    for average in averages:
        if np.all(seg.weight == 1):  # unweighted: scikit-learn's own ovo average
            encoded = seg.truth.argmax(axis=1)
            value = _quiet(_average_multiclass_ovo_score, _binary_roc_auc_score, encoded,
                           seg.score, average=average)
        else:
            value = ovo_reference(seg.truth, seg.score, seg.weight, average)
        rows.append((average, None, None, value))
    return rows


ORACLES.update({"roc_auc": ranking_rows, "average_precision": ranking_rows,
                "break_even": ranking_rows, "roc_auc_ovo": ovo_rows})
