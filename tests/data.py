"""Random long-format predictions built to hit the hard cases: heavy ties (scores on a 0.1 grid,
many exactly at the 0.5 threshold), weights with zeros, several segments, a one-class segment, a
one-sample segment, a segment that lacks a label, string or integer ids and labels, and (when
asked) a segment whose weights are all 0."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import polars as pl

from mleval_sql.schema import Task

SEGMENTS = ("north", "south", "one_class", "single")


def make_predictions(task: Task, seed: int, *, n_samples: int = 90, n_labels: int = 4,
                     weighted: bool = True, int_ids: bool = False,
                     complete: bool = False, weightless: bool = False) -> pl.DataFrame:
    """Long rows ``sample, label, score, truth, [weight,] region, model``.

    Segment (``region``) "south" lacks the last label entirely (unless ``complete``, for
    evaluation without segments); "one_class" has only negatives (multiclass: only the first
    class true; regression: a constant truth); "single" holds one sample; with ``weightless``
    (and ``weighted``), "weightless" holds the last three samples, each of weight 0.
    Regression: each label is one output, truth and prediction on a 0.1 grid, both > 0.
    """
    rng = np.random.default_rng(seed)
    n_labels = {"binary": 1, "regression": 2}.get(task, n_labels)
    labels = list(range(n_labels)) if int_ids else [f"lab{j}" for j in range(n_labels)]
    regions = rng.choice(SEGMENTS[:3], size=n_samples).astype(object)
    regions[0] = "single"
    if weightless and weighted:
        regions[-3:] = "weightless"
    rows = []
    for i in range(n_samples):
        region = str(regions[i])
        own = labels[:-1] if region == "south" and n_labels > 1 and not complete else labels
        scores = np.round(rng.integers(0, 11, size=len(own)) / 10, 1)
        if task == "regression":  # truth on a coarse grid (ties); "one_class": constant truth
            # truths and predictions > 0: every regression metric's domain, the deviances' and
            # log errors' too (MAPE's zero truth: tests/test_regression.py)
            true = (np.full(len(own), 3.0) if region == "one_class"
                    else np.round(rng.gamma(2.0, 1.5, size=len(own)), 1) + 0.1)
            scores = np.maximum(np.round(true + rng.normal(0.0, 1.5, size=len(own)), 1), 0.1)
        elif task == "multiclass":
            true = np.zeros(len(own), dtype=bool)
            true[0 if region == "one_class" else rng.integers(len(own))] = True
        else:
            true = rng.random(len(own)) < 0.4
            if region == "one_class":
                true[:] = False
        weight = 1.0 if i < 4 else float(rng.choice([0.0, 0.5, 1.0, 2.5]))
        if region == "weightless":
            weight = 0.0
        model = str(rng.choice(["m1", "m2"]))
        sample = i if int_ids else f"s{i:03d}"
        rows += [(sample, label, float(s), float(t) if task == "regression" else bool(t),
                  weight, region, model)
                 for label, s, t in zip(own, scores, true, strict=True)]
    frame = pl.DataFrame(rows, orient="row", schema=["sample", "label", "score", "truth",
                                                      "weight", "region", "model"])
    return frame if weighted else frame.drop("weight")


def cat_dog_eel(n_samples: int, seed: int, regions: Sequence[str]) -> pl.DataFrame:
    """A small multilabel table: labels cat, dog and eel, about 40% true, weights constant
    within a sample, the samples dealt round ``regions`` (column ``region``)."""
    labels = ("cat", "dog", "eel")
    rng = np.random.default_rng(seed)
    n = n_samples * len(labels)
    sample = np.repeat(np.arange(n_samples), len(labels))
    return pl.DataFrame({
        "sample": sample,
        "label": np.tile(labels, n_samples),
        "score": rng.random(n).round(3),
        "truth": rng.random(n) < 0.4,
        "weight": rng.integers(1, 4, n_samples).astype(float)[sample],
        "region": np.array(regions)[sample % len(regions)],
    })
