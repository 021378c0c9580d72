"""Expected rows for the estimated metrics, computed directly from their definitions.

Each row's probability of being true is its score (``q``), or ``probabilities`` given; per
label, the expected confusion counts at the threshold are sums of ``w q`` and ``w (1 - q)``,
and the expected ROC AUC sums every ordered pair of rows (a row with itself included) as
positive ``w_i q_i`` against negative ``w_j (1 - q_j)``, ties counting half: an O(n^2) double
sum, not the engines' one pass in score order.
"""

from __future__ import annotations

import numpy as np

from tests.oracle import ORACLES, Rows, Segment, averaged_rows


def estimates(q: np.ndarray, score: np.ndarray, w: np.ndarray,
              threshold: float) -> dict[str, float | None]:
    """Every estimated metric of one label."""
    d = score >= threshold
    tp, fp = float((w * q)[d].sum()), float((w * (1 - q))[d].sum())
    fn, tn = float((w * q)[~d].sum()), float((w * (1 - q))[~d].sum())
    p, n = tp + fn, fp + tn
    above = (score[:, None] > score[None, :]) + 0.5 * (score[:, None] == score[None, :])
    pairs = float(((w * q)[:, None] * (w * (1 - q))[None, :] * above).sum())
    return {
        "estimated_accuracy": (tp + tn) / (p + n) if p + n else None,
        "estimated_precision": tp / (tp + fp) if tp + fp else None,
        "estimated_recall": tp / p if p else None,
        "estimated_f1": 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None,
        "estimated_roc_auc": pairs / (p * n) if p > 0 and n > 0 else None,
    }


def estimated_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    per_label, supports = [], []
    for j in range(len(seg.labels)):
        q = seg.score[:, j]
        per_label.append(estimates(q, q, seg.weight, seg.threshold)[metric])
        supports.append(float((seg.weight * q).sum()))
    return averaged_rows(seg, per_label, supports, averages, micro=lambda: None,
                         own=lambda average: None)


ORACLES.update(dict.fromkeys(("estimated_accuracy", "estimated_precision", "estimated_recall",
                              "estimated_f1", "estimated_roc_auc"), estimated_rows))
