"""Expected rows for the operating-point metrics (max_f1, precision_at_recall,
recall_at_precision): hand-worked from every distinct threshold, as scikit-learn has none (its
precision_recall_curve gives the points but no choice among them, nor our tie rule).

Each label is scored one-vs-rest: the confusion counts are summed directly (a samples x
thresholds matrix, no running sums) at every distinct score of the samples with positive weight
(scikit-learn's curves drop zero-weight samples), a label being predicted iff score >= threshold.
The best value wins; ties go to the highest threshold. A label without positive weight, or
without a qualifying threshold, is None. Each function takes (segment, task, metric, averages)
and returns rows (average, label, predicted, value); see tests/oracle.py.
"""

from __future__ import annotations

import numpy as np

from tests.oracle import ORACLES, Rows, Segment


def _curve(seg: Segment, j: int) -> dict[str, np.ndarray]:
    """Thresholds and f1, precision, recall (nan where 0/0) at every distinct weighted score."""
    y, s, w = seg.truth[:, j], seg.score[:, j], seg.weight
    thresholds = np.unique(s[w > 0])
    decided = s[:, None] >= thresholds[None, :]
    tp = (w[:, None] * (decided & y[:, None])).sum(axis=0)
    fp = (w[:, None] * (decided & ~y[:, None])).sum(axis=0)
    fn = (w[:, None] * (~decided & y[:, None])).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        return {"threshold": thresholds,
                "f1": np.where(2 * tp + fp + fn > 0, 2 * tp / (2 * tp + fp + fn), np.nan),
                "precision": np.where(tp + fp > 0, tp / (tp + fp), np.nan),
                "recall": np.where(tp + fn > 0, tp / (tp + fn), np.nan)}


def operating_point(seg: Segment, j: int, metric: str) -> tuple[float | None, float | None]:
    """(threshold, value) of ``metric`` for the segment's j-th label."""
    c = _curve(seg, j)
    if metric == "max_f1":
        value, ok = c["f1"], ~np.isnan(c["recall"])
    elif metric == "precision_at_recall":
        value = c["precision"]
        ok = ~np.isnan(c["recall"]) & (c["recall"] >= seg.params["min_recall"])
    elif metric == "recall_at_precision":
        value = c["recall"]
        ok = ~np.isnan(c["precision"]) & (c["precision"] >= seg.params["min_precision"])
    else:
        raise KeyError(metric)
    ok &= ~np.isnan(value)
    if not ok.any():
        return None, None
    best = value[ok].max()
    return float(c["threshold"][ok & (value == best)].max()), float(best)


def operating_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    values = {label: operating_point(seg, j, metric)[1] for j, label in enumerate(seg.labels)}
    rows: Rows = []
    for average in averages:
        if average == "none":
            rows += [(None, label, None, values.get(label)) for label in seg.all_labels]
        elif average == "macro":
            kept = [v for v in values.values() if v is not None]
            rows.append(("macro", None, None, float(np.mean(kept)) if kept else None))
        else:
            raise KeyError(average)
    return rows


ORACLES.update(dict.fromkeys(("max_f1", "precision_at_recall", "recall_at_precision"),
                             operating_rows))
