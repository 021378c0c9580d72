"""Expected rows for the probability family: scikit-learn, or hand-worked where it has none.

Each function takes (segment, task, metric, averages) and returns rows (average, label,
predicted, value); see tests/oracle.py for Segment and the per-label helpers.

log_loss and brier_score come from scikit-learn: per label its binary ``log_loss`` /
``brier_score_loss``, micro from the same functions on every (sample, label) row pooled,
multiclass from its multiclass forms. scikit-learn 1.9 does not renormalise multiclass rows that
do not sum to 1 (it only warns), so its multiclass log loss is ours: the true class's own
clipped probability. Its multiclass Brier score halves with fewer than 3 classes
(``scale_by_half="auto"``); ours is always summed over classes (``scale_by_half=False``).
calibration_error has no scikit-learn function: a plain numpy reference below, bins found by
searching the edges k / n rather than by flooring score * n as the engines do.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn import metrics as skm

from tests.oracle import ORACLES, Rows, Segment, _nan_average


def _quiet(fn, *args, **kwargs) -> float | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "y_prob values do not sum to one"
        return float(fn(*args, **kwargs))


def _binary_log_loss(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float | None:
    if w.sum() == 0:
        return None
    return _quiet(skm.log_loss, y, p, sample_weight=w, labels=[False, True])


def _binary_brier(y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float | None:
    if w.sum() == 0:
        return None
    return _quiet(skm.brier_score_loss, y, p, sample_weight=w, pos_label=True)


def _bins(p: np.ndarray, n_bins: int) -> np.ndarray:
    """Bin b = [b / n, (b + 1) / n), the last one closed at 1."""
    edges = np.arange(n_bins + 1) / n_bins
    return np.minimum(np.searchsorted(edges, p, side="right") - 1, n_bins - 1)


def expected_calibration_error(y: np.ndarray, p: np.ndarray, w: np.ndarray,
                               n_bins: int) -> float | None:
    """sum over non-empty bins of (bin weight / total weight) * |observed rate - mean score|."""
    total = w.sum()
    if total == 0:
        return None
    bins = _bins(p, n_bins)
    ece = 0.0
    for b in np.unique(bins):
        inside = bins == b
        wb = w[inside].sum()
        if wb == 0:
            continue
        rate = (w[inside] * y[inside]).sum() / wb
        mean_score = (w[inside] * p[inside]).sum() / wb
        ece += wb / total * abs(rate - mean_score)
    return float(ece)


LABELWISE = {
    "log_loss": lambda s, y, p, w: _binary_log_loss(y, p, w),
    "brier_score": lambda s, y, p, w: _binary_brier(y, p, w),
    "calibration_error": lambda s, y, p, w: expected_calibration_error(y, p, w,
                                                                       s.params["n_bins"]),
}


def _multiclass(seg: Segment, metric: str) -> float | None:
    if seg.weight.sum() == 0:
        return None
    if metric == "log_loss":
        return _quiet(skm.log_loss, seg.y_true, seg.score, labels=seg.labels,
                      sample_weight=seg.weight)
    return _quiet(skm.brier_score_loss, seg.y_true, seg.score, labels=seg.labels,
                  sample_weight=seg.weight, scale_by_half=False)


def probability_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    if task == "multiclass" and metric != "calibration_error":
        return [(None, None, None, _multiclass(seg, metric))]
    fn = LABELWISE[metric]
    n_labels = len(seg.labels)
    per_label = [fn(seg, seg.truth[:, j], seg.score[:, j], seg.weight) for j in range(n_labels)]
    supports = [float(seg.weight[seg.truth[:, j]].sum()) for j in range(n_labels)]
    values = dict(zip(seg.labels, per_label, strict=True))
    kept = [v for v in per_label if v is not None]
    rows: Rows = []
    for average in averages:
        if average == "none":
            rows += [(None, label, None, values.get(label)) for label in seg.all_labels]
        elif average == "micro":
            pooled = fn(seg, seg.truth.ravel(), seg.score.ravel(), np.repeat(seg.weight, n_labels))
            rows.append(("micro", None, None, pooled))
        elif average == "macro":
            rows.append(("macro", None, None, float(np.mean(kept)) if kept else None))
        elif average == "weighted":
            rows.append(("weighted", None, None, _nan_average(per_label, supports)))
        elif average == "macro_std":
            rows.append(("macro_std", None, None, float(np.std(kept)) if kept else None))
    return rows


ORACLES.update(dict.fromkeys(("log_loss", "brier_score", "calibration_error"), probability_rows))
