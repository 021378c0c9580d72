"""Expected rows for the label_ranking family's metrics (scikit-learn, or hand-worked where it has
none).

Each function takes (segment, task, metric, averages) and returns rows (average, label,
predicted, value); see tests/oracle.py for Segment and the per-label helpers. Every metric is one
value per segment (average and label None). Multiclass uses the same one-hot truth matrix.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from sklearn import metrics as skm

from tests.oracle import ORACLES, Rows, Segment, _quiet


def _weighted_mean(values: list[float | None], weights: np.ndarray) -> float | None:
    """Mean of the non-None values weighted by sample weight; None when those weights sum to 0."""
    kept = [(v, w) for v, w in zip(values, weights, strict=True) if v is not None]
    total = sum(w for _, w in kept)
    return None if total == 0 else sum(v * w for v, w in kept) / total


def _top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Column indices of the k top scores; ties go to the smaller label (lower column) first.

    A stable sort of the negated scores keeps tied columns in label order, as argmax does.
    """
    return np.argsort(-scores, kind="stable")[:k]


def _one_error(seg: Segment) -> float | None:
    # scikit-learn has no one-error: the top label is numpy's argmax (ties: the first label)
    top = seg.score.argmax(axis=1)
    wrong = [0.0 if seg.truth[i, j] else 1.0 for i, j in enumerate(top)]
    return _weighted_mean(wrong, seg.weight)


def _precision_at_k(seg: Segment) -> float | None:
    # scikit-learn has none for multilabel; a sample with fewer than k labels divides by its own
    # number of labels (our documented choice)
    values = [float(t[_top_k(s, seg.k)].sum()) / min(seg.k, len(t))
              for t, s in zip(seg.truth, seg.score, strict=True)]
    return _weighted_mean(values, seg.weight)


def _recall_at_k(seg: Segment) -> float | None:
    # scikit-learn has none for multilabel; samples without a true label are undefined and skipped
    values = [float(t[_top_k(s, seg.k)].sum()) / t.sum() if t.any() else None
              for t, s in zip(seg.truth, seg.score, strict=True)]
    return _weighted_mean(values, seg.weight)


def _lrap(seg: Segment) -> float | None:
    # scikit-learn divides by sum(sample_weight) without a guard: weights summing to 0 give nan
    if seg.weight.sum() == 0:
        return None
    return _quiet(skm.label_ranking_average_precision_score, seg.truth.astype(int), seg.score,
                  sample_weight=seg.weight)


def _gain(fn: Callable[..., float], seg: Segment, **extra: object) -> float | None:
    # scikit-learn's np.average raises where the weights sum to 0: undefined (null) here
    if seg.weight.sum() == 0:
        return None
    return _quiet(fn, seg.target, seg.score, k=seg.k, sample_weight=seg.weight,
                  ignore_ties=seg.params.get("ignore_ties", False), **extra)


VALUES: dict[str, Callable[[Segment], float | None]] = {
    "dcg": lambda s: _gain(skm.dcg_score, s, log_base=s.params.get("log_base", 2.0)),
    "ndcg": lambda s: _gain(skm.ndcg_score, s),
    "coverage_error": lambda s: _quiet(skm.coverage_error, s.truth.astype(int), s.score,
                                       sample_weight=s.weight),
    "label_ranking_loss": lambda s: _quiet(skm.label_ranking_loss, s.truth.astype(int),
                                           s.score, sample_weight=s.weight),
    "label_ranking_average_precision": _lrap,
    "one_error": _one_error,
    "precision_at_k": _precision_at_k,
    "recall_at_k": _recall_at_k,
}


def _rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    return [(None, None, None, VALUES[metric](seg))]


ORACLES.update(dict.fromkeys(VALUES, _rows))
