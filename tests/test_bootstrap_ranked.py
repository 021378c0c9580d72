"""The bootstrap's rows ranked once for every replicate (engines/polars/bootstrap.py, the kernel
polars and DuckDB hand their rows to), with weights: each replicate's statistics equal
scikit-learn's on the weights times the draws, and the intervals keep their bits on either
engine, whatever the rows' order, files or batches, and whatever power of two scales the
weights (tests/test_uncertainty.py holds them equal to DuckDB's replicated plans and to the
oracle's intervals)."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import average_precision_score, roc_auc_score

import mleval_sql as me
from mleval_sql.engines.polars import bootstrap
from tests.data import make_predictions
from tests.helpers import close
from tests.test_uncertainty import RANKING_ENGINES, fractional, rows_per_budget


def canonical_rows(seed: int) -> pl.DataFrame:
    """Canonical rows (segment, sample, label, score, truth, weight): three segments of 40
    samples x 3 labels, scores on a grid of 11 (ties), fractional weights with zeros; segment
    "neg" has no positive of label "b", segment "zero" weighs 0 on every row."""
    rng = np.random.default_rng(seed)
    parts = []
    for segment in ("a", "neg", "zero"):
        samples = [f"{segment}{i:02d}" for i in range(40)]
        weight = rng.choice([0.0, 0.3, 1.0, 2.7], 40) * rng.uniform(0.5, 1.5, 40)
        if segment == "zero":
            weight[:] = 0.0
        for label in ("a", "b", "c"):
            truth = rng.random(40) < 0.4
            if segment == "neg" and label == "b":
                truth[:] = False
            parts.append(pl.DataFrame({
                "segment": segment, "sample": samples, "label": label,
                "score": np.round(rng.integers(0, 11, 40) / 10, 1), "truth": truth,
                "weight": weight}))
    return pl.concat(parts)


@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "whole-counts"])
def test_each_replicates_statistics_are_scikit_learns_on_weights_times_draws(weighted):
    """tp, fp, fn, tn at the threshold, average precision (ap_sum / P) and ROC AUC
    (1 - discordant) of every (segment, label) and replicate: those of the rows weighed by
    their weight times their sample's draw, a run with no positive and a run of zero weights
    included (their undefined values aside)."""
    rows = canonical_rows(3)
    if not weighted:
        rows = rows.with_columns(weight=pl.lit(1.0))
    ids = bootstrap.sample_ids(rows.lazy()).collect()
    starts = bootstrap.hash_starts(ids.height, 7)
    replicates = [0, 1, 5, 31]
    got = bootstrap.replicated(rows.sample(fraction=1.0, shuffle=True, seed=1), ids, starts,
                               replicates, threshold=0.5, weighted=weighted)
    assert got.height == 9 * len(replicates)
    with_ids = rows.join(ids, on="sample")
    checked = 0
    for r in replicates:
        drawn = bootstrap.draws(starts, r).astype(np.float64)
        weighed = with_ids.with_columns(w=pl.col("weight") * drawn[with_ids["id"].to_numpy()])
        for (segment, label), part in weighed.group_by("segment", "label"):
            row = got.filter(segment=segment, label=label, replicate=r).row(0, named=True)
            y, s, w = (part[c].to_numpy() for c in ("truth", "score", "w"))
            decided = s >= 0.5
            for name, mask in (("tp", y & decided), ("fp", ~y & decided),
                               ("fn", y & ~decided), ("tn", ~y & ~decided)):
                assert close(row[name], w[mask].sum(), rel=1e-13, abs_=1e-300), (name, row)
            p, n = w[y].sum(), w[~y].sum()
            if p > 0:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    want = average_precision_score(y, s, sample_weight=w)
                assert close(row["ap_sum"] / p, want, rel=1e-12), row
            if p > 0 and n > 0:
                want = roc_auc_score(y, s, sample_weight=w)
                assert close(1 - row["discordant"], want, rel=1e-12, abs_=1e-15), row
                checked += 1
    assert checked > 4 * len(replicates)  # most runs have both classes


def _bootstrapped(frame: pl.DataFrame | str, engine: str = "polars", *, batches: bool = False,
                  **options: object) -> pl.DataFrame:
    """The per-label rows whose interval is the bootstrap's, sorted; ``batches``: the rows
    read a batch of segments at a time."""
    from mleval_sql.progress import timings

    with timings() as seconds:
        got = me.evaluate(frame, ["f1", "average_precision", "roc_auc"], engine=engine,
                          by="region", average=["none", "macro"], ci=0.9, resamples=30, seed=4,
                          **options)
    assert any("bootstrap: ranking" in s for s in seconds), engine  # the rows ranked once
    assert not batches or any(s.endswith("ranking, by batch > reading") for s in seconds)
    keys = ["region", "metric", "average", "label"]
    return (got.filter(pl.col("ci_method") == "bootstrap", pl.col("average").is_null())
            .select(*keys, "ci_low", "ci_high", "ci_resamples").sort(keys, nulls_last=True))


@pytest.mark.parametrize("engine", RANKING_ENGINES)
@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "whole-counts"])
def test_the_same_bits_whatever_the_rows_order_files_or_batches(tmp_path, monkeypatch,
                                                                 weighted, engine):
    """Every label's running sums are taken in a stated order (by score, ties by sample id)
    and from that label's rows alone: on either engine, a rerun, the rows shuffled, in three
    files, in batches of the rows held (no budget) or a batch of segments at a time under a
    budget give each label's interval bit for bit, polars' held rows' (averages over labels
    are summed by the final steps, as on every path, to within rounding:
    tests/test_uncertainty.py)."""
    frame = make_predictions("multilabel", seed=8, n_samples=150, weighted=weighted,
                             weightless=weighted)
    if weighted:
        frame = fractional(frame)
    want = _bootstrapped(frame)
    assert want.height > 20 and want["ci_low"].null_count() < want.height
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=2)
    for part, rows in enumerate(np.array_split(np.arange(shuffled.height), 3)):
        shuffled[rows].write_parquet(tmp_path / f"part-{part}.parquet")
    runs = {"rerun": _bootstrapped(frame, engine), "shuffled": _bootstrapped(shuffled, engine),
            "three files": _bootstrapped(str(tmp_path), engine)}
    with monkeypatch.context() as patch:  # batches of whole segments of at most half the rows
        patch.setattr("mleval_sql.engines.polars.collect.HELD_BATCH_ROWS", frame.height // 2)
        # polars slices the rows it holds; DuckDB reads a batch at a time
        runs["held in batches"] = _bootstrapped(frame, engine, batches=engine == "duckdb")
    with monkeypatch.context() as patch:
        runs["budget"] = _bootstrapped(frame, engine, batches=True,
                                       memory_limit=rows_per_budget(patch, frame.height // 2))
    for name, got in runs.items():
        assert got.equals(want), name


@pytest.mark.parametrize("engine", RANKING_ENGINES)
@pytest.mark.parametrize("scale", [2.0**1000, 2.0**-1000])
def test_weights_scaled_by_a_power_of_two_give_the_same_intervals(scale, engine):
    """No product of weight sums over- or underflows (P and N scaled by powers of two near
    their inverses, as the plans scale them): weights of about 1e301 or 1e-301 give each
    label's interval of the weights themselves, bit for bit."""
    frame = fractional(make_predictions("multilabel", seed=9, n_samples=120, weightless=True))
    want = _bootstrapped(frame)
    got = _bootstrapped(frame.with_columns(weight=pl.col("weight") * scale), engine)
    assert got.equals(want)


def test_running_sums_restart_at_each_stretch():
    """Each stretch's running sums from its own 0, in a slot of its own."""
    values = np.array([1.0, 2.0, 3.0, 1e300, 0.5, 0.25])
    sums = bootstrap._running_by_run(values, np.array([2, 0, 1, 3]))
    assert sums.tolist() == [0.0, 1.0, 3.0, 0.0, 0.0, 3.0, 0.0, 1e300, 1e300, 1e300]
    small = bootstrap._running_by_run(np.array([1e300, 0.5, 0.25]), np.array([1, 2]))
    assert small.tolist() == [0.0, 1e300, 0.0, 0.5, 0.75]  # not 1e300's rounding


def test_a_truth_of_zeros_and_ones_ranks_as_booleans(engine):
    """A 0/1 integer truth (as a click log holds it) takes the ranked path as a boolean one."""
    frame = make_predictions("binary", seed=31, n_samples=40)
    options = {"by": "region", "ci": 0.9, "resamples": 20, "seed": 2, "engine": engine}
    whole = me.evaluate(frame.with_columns(pl.col("truth").cast(pl.Int64)), ["f1", "roc_auc"],
                        **options)
    assert whole.equals(me.evaluate(frame, ["f1", "roc_auc"], **options))
