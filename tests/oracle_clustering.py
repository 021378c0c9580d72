"""Expected rows of the clustering metrics: scikit-learn's functions on each segment's samples,
repeated by their (integer) weights; purity hand-worked from scikit-learn's contingency matrix.

Our documented difference: a segment whose weights are all 0 has no sample, and its metrics are
None (scikit-learn gives 1.0 or 0.0 for empty labelings); its pair confusion cells are 0.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import polars as pl
from sklearn import metrics as skm

Rows = list[tuple[object, object, float | None]]  # truth, cluster, value


def _purity(truth: np.ndarray, cluster: np.ndarray, params: dict) -> float:
    table = skm.cluster.contingency_matrix(truth, cluster)
    return float(table.max(axis=0).sum() / table.sum())


def _contingency(truth: np.ndarray, cluster: np.ndarray, params: dict) -> Rows:
    classes, clusters = np.unique(truth), np.unique(cluster)
    table = skm.cluster.contingency_matrix(truth, cluster)
    return [(classes[i], clusters[j], float(table[i, j]))
            for i, j in zip(*np.nonzero(table), strict=True)]


def _pairs(truth: np.ndarray, cluster: np.ndarray, params: dict) -> Rows:
    matrix = (np.zeros((2, 2)) if len(truth) == 0
              else skm.cluster.pair_confusion_matrix(truth, cluster))
    return [(i, j, float(matrix[i, j])) for i in (0, 1) for j in (0, 1)]


def _method(score: Callable[..., float]) -> Callable[[np.ndarray, np.ndarray, dict], float]:
    return lambda t, c, params: score(t, c, average_method=params.get("average_method",
                                                                      "arithmetic"))


_TABLES: dict[str, Callable[[np.ndarray, np.ndarray, dict], Rows]] = {
    "contingency": _contingency, "pair_confusion_matrix": _pairs}
_VALUES: dict[str, Callable[[np.ndarray, np.ndarray, dict], float]] = {
    "adjusted_rand": lambda t, c, _: skm.adjusted_rand_score(t, c),
    "rand": lambda t, c, _: skm.rand_score(t, c),
    "mutual_info": lambda t, c, _: skm.mutual_info_score(t, c),
    "normalized_mutual_info": _method(skm.normalized_mutual_info_score),
    "adjusted_mutual_info": _method(skm.adjusted_mutual_info_score),
    "homogeneity": lambda t, c, _: skm.homogeneity_score(t, c),
    "completeness": lambda t, c, _: skm.completeness_score(t, c),
    "v_measure": lambda t, c, params: skm.v_measure_score(t, c, beta=params.get("beta", 1.0)),
    "fowlkes_mallows": lambda t, c, _: skm.fowlkes_mallows_score(t, c),
    "purity": _purity,
}
ORACLES = {*_TABLES, *_VALUES}


def oracle_rows(truth: np.ndarray, cluster: np.ndarray, metric: str, params: dict) -> Rows:
    """(truth, cluster, value) rows of ``metric`` for one segment's samples."""
    if metric in _TABLES:
        return _TABLES[metric](truth, cluster, params)
    if len(truth) == 0:
        return [(None, None, None)]
    return [(None, None, float(_VALUES[metric](truth, cluster, params)))]


def expected(frame: pl.DataFrame, metric: str, by: list[str], params: dict) -> dict:
    """{(*segment, metric, truth, cluster): value} from scikit-learn on repeated rows."""
    out = {}
    groups = frame.group_by(by, maintain_order=True) if by else [((), frame)]
    for key, part in groups:
        weight = part["weight"].to_numpy().astype(int) if "weight" in part.columns else 1
        truth = np.repeat(part["truth"].to_numpy(), weight)
        cluster = np.repeat(part["cluster"].to_numpy(), weight)
        for t, c, v in oracle_rows(truth, cluster, metric, params):
            out[(*key, metric, text(t), text(c))] = v
    return out


def text(value: object) -> str | None:
    """A cell key as text, the same for numpy, polars and Python values."""
    return None if value is None else str(value.item() if hasattr(value, "item") else value)
