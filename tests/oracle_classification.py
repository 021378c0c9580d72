"""Expected rows for scikit-learn 1.9's classification metrics added in issue 49: zero_one_loss,
the class likelihood ratios, hinge_loss, d2_log_loss and d2_brier (see tests/oracle.py).

Where this project decides otherwise than scikit-learn, the reference says so:

- the D² scores are null where the truth is constant (one class holds all the weight; also one
  sample, or no weight), where scikit-learn gives NaN (fewer than two samples), -inf or NaN
  (d2_brier_score: the prevalence's Brier score is 0) or a huge negative number
  (d2_log_loss_score: the prevalence's log loss is that of a probability clipped to 1 - eps);
- the binary hinge loss reads a true row as +1 and a false one as -1 in every segment, where
  scikit-learn's LabelBinarizer makes every label -1 when y_true holds one class: the reference
  adds a zero-weight sample of the missing class, which changes no value but the encoding;
- the multiclass hinge loss is Crammer-Singer's with two classes too (the true class's score
  minus the other's), where scikit-learn reads two labels as binary and refuses a 2-column
  decision: the reference computes that case by hand.
"""

from __future__ import annotations

import warnings

import numpy as np
from sklearn import metrics as skm

from tests import oracle_probability
from tests.oracle import LABELWISE, ORACLES, Rows, Segment, _decision_rows, _quiet


def _quietly(fn, *args, **kwargs) -> float | None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # UndefinedMetricWarning, rows not summing to 1
        value = float(fn(*args, **kwargs))
    return None if np.isnan(value) else value


# -- decisions -----------------------------------------------------------------------------------

def _likelihood_ratio(which: int):
    def ratio(seg: Segment, y: np.ndarray, p: np.ndarray) -> float | None:
        if not seg.weight.any():  # scikit-learn refuses weights that are all 0
            return None
        return _quietly(lambda: skm.class_likelihood_ratios(
            y, p, labels=[False, True], sample_weight=seg.weight)[which])
    return ratio


LABELWISE["positive_likelihood_ratio"] = _likelihood_ratio(0)
LABELWISE["negative_likelihood_ratio"] = _likelihood_ratio(1)


def zero_one_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    if task == "multiclass":
        y, p = seg.y_true, seg.y_pred
    elif task == "binary":
        y, p = seg.truth[:, 0], seg.decided[:, 0]
    else:  # multilabel: the subset zero-one loss of the indicator matrices
        y, p = seg.truth.astype(int), seg.decided.astype(int)
    return [(None, None, None, _quiet(skm.zero_one_loss, y, p, sample_weight=seg.weight))]


# -- scores as probabilities or decision values ----------------------------------------------------

def _constant(y: np.ndarray, w: np.ndarray) -> bool:
    return w[y].sum() == 0 or w[~y].sum() == 0


def _binary_d2(fn):
    def d2(seg: Segment, y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float | None:
        if _constant(y, w):
            return None
        extra = {"labels": [False, True]} if fn is skm.d2_log_loss_score else {"pos_label": True}
        return _quietly(fn, y, p, sample_weight=w, **extra)
    return d2


def _binary_hinge(seg: Segment, y: np.ndarray, p: np.ndarray, w: np.ndarray) -> float | None:
    if w.sum() == 0:
        return None
    signs = np.where(y, 1, -1)
    if len(np.unique(signs)) == 1:  # the missing class, weightless: LabelBinarizer sees two
        signs, p, w = np.append(signs, -signs[0]), np.append(p, 0.0), np.append(w, 0.0)
    return _quietly(skm.hinge_loss, signs, p, sample_weight=w)


oracle_probability.LABELWISE.update({
    "d2_log_loss": _binary_d2(skm.d2_log_loss_score),
    "d2_brier": _binary_d2(skm.d2_brier_score),
    "hinge_loss": _binary_hinge,
})


def _multiclass_hinge(seg: Segment) -> float | None:
    if seg.weight.sum() == 0:
        return None
    if len(seg.labels) >= 3:
        return _quietly(skm.hinge_loss, seg.y_true, seg.score, labels=seg.labels,
                        sample_weight=seg.weight)
    true = seg.truth.argmax(axis=1)  # two classes (or one): Crammer-Singer by hand
    rows = np.arange(len(true))
    other = np.where(seg.truth, -np.inf, seg.score).max(axis=1)
    margin = seg.score[rows, true] - other
    return float(np.average(np.maximum(1 - margin, 0), weights=seg.weight))


def score_rows(seg: Segment, task: str, metric: str, averages: tuple[str, ...]) -> Rows:
    if task != "multiclass":
        return oracle_probability.probability_rows(seg, task, metric, averages)
    if metric == "hinge_loss":
        return [(None, None, None, _multiclass_hinge(seg))]
    y, w = seg.y_true, seg.weight
    if sum(w[y == label].sum() > 0 for label in seg.labels) < 2:  # the truth is constant
        return [(None, None, None, None)]
    fn = skm.d2_log_loss_score if metric == "d2_log_loss" else skm.d2_brier_score
    return [(None, None, None, _quietly(fn, y, seg.score, sample_weight=w, labels=seg.labels))]


ORACLES.update(dict.fromkeys(("positive_likelihood_ratio", "negative_likelihood_ratio"),
                             _decision_rows))
ORACLES["zero_one_loss"] = zero_one_rows
ORACLES.update(dict.fromkeys(("d2_log_loss", "d2_brier", "hinge_loss"), score_rows))
