"""Intervals: the bootstrap's percentiles equal the oracle's on the same replicate weights (the
hash written again here, from its definition), and do not move with the engine, the order of
the rows or the files they are read from; DeLong's interval is the variance of the placement
values (tests/test_delong.py checks the variance itself); 95% intervals of many synthetic data
sets of a known model cover its true values about 95% of the time."""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
import pytest
from scipy import stats

import mleval_sql as me
from mleval_sql.request import Request
from tests.data import make_predictions
from tests.helpers import close
from tests.oracle import expected
from tests.test_metrics import DEFAULT_PARAMS

M = 2**32


def mix(x: np.ndarray) -> np.ndarray:
    """Mueller's 32-bit hash, as queries/replicates.sql defines it."""
    for last in (False, False, True):
        x = x ^ (x >> 16)
        if not last:
            x = (x * 73244475) % M
    return x


def draws(samples: pl.Series, replicate: int, seed: int) -> dict[object, int]:
    """Each sample's Poisson(1) draw in ``replicate``: its rank among the distinct samples,
    hashed with the replicate and the seed, through Poisson(1)'s inverse CDF."""
    distinct = sorted(samples.unique().to_list())
    ids = np.arange(len(distinct), dtype=np.uint64)
    u = (mix((ids % M * 668265261 + replicate * 374761393 + seed % M * 2654435) % M)
         .astype(np.float64) + 0.5) / M
    drawn = (u[:, None] >= stats.poisson.cdf(np.arange(12), 1)[None, :]).sum(axis=1)
    return dict(zip(distinct, drawn.tolist(), strict=True))


def oracle_intervals(frame: pl.DataFrame, task: str, metric: str, averages: tuple[str, ...],
                     by: list[str], *, level: float, resamples: int, seed: int) -> pl.DataFrame:
    """The bootstrap interval of every row of ``metric`` from the oracle: the metric on each
    replicate's weights, then numpy's percentiles of the defined values."""
    keys = [*by, "metric", "average", "label", "predicted"]
    replicates = []
    for r in range(resamples):
        drawn = draws(frame["sample"], r, seed)
        weighed = frame.with_columns(pl.col("weight") * pl.col("sample").replace_strict(
            drawn, return_dtype=pl.Float64))
        replicates.append(expected(weighed, task, metric, averages, by, DEFAULT_PARAMS)
                          .with_columns(replicate=pl.lit(r)))
    rows = pl.concat(replicates).with_columns(pl.col("value").fill_nan(None))
    out = []
    for key, part in rows.group_by(keys, maintain_order=True):
        values = part["value"].drop_nulls().to_numpy()
        defined = len(values)
        enough = defined >= math.ceil(level * resamples - 1e-9)
        low, high = ((np.percentile(values, 100 * (1 - level) / 2),
                      np.percentile(values, 100 * (1 + level) / 2)) if enough else (None, None))
        out.append((*key, low, high, defined))
    return pl.DataFrame(out, orient="row", schema=[*keys, "ci_low", "ci_high", "ci_resamples"],
                        strict=False)


CASES = [("multilabel", "f1", ("none", "macro", "micro")),
         ("multilabel", "average_precision", ("none", "macro")),
         ("multilabel", "subset_accuracy", ()),
         ("binary", "precision", ("none",)),
         ("multiclass", "accuracy", ()),
         ("multiclass", "log_loss", ()),
         ("regression", "r2", ("none", "macro"))]


@pytest.mark.parametrize(("task", "metric", "averages"), CASES)
def test_bootstrap_intervals_are_the_oracles_percentiles(engine, task, metric, averages):
    frame = make_predictions(task, seed=11, n_samples=40)
    options = {"by": ["region"], "task": task, "ci": 0.9, "resamples": 20, "seed": 5}
    got = me.evaluate(frame, metric, average=list(averages) or None, engine=engine, **options)
    want = oracle_intervals(frame, task, metric, averages or ("none",), ["region"], level=0.9,
                            resamples=20, seed=5)
    keys = ["region", "metric", "average", "label"]
    want = want.drop("predicted").with_columns(pl.col(k).cast(got.schema[k]) for k in keys)
    joined = got.join(want, on=keys, how="full", nulls_equal=True, coalesce=True)
    assert joined.height == got.height == want.height
    assert set(got["ci_method"]) == {"bootstrap"}
    for row in joined.iter_rows(named=True):
        assert row["ci_resamples"] == row["ci_resamples_right"], row
        for c in ("ci_low", "ci_high"):
            assert close(row[c], row[f"{c}_right"], rel=1e-9, abs_=1e-12), (c, row)
    assert joined["ci_low"].null_count() < joined.height  # intervals, not only nulls


def test_the_draws_are_the_oracles():
    """The draws of the rows ranked once (numpy) are those of the replicated plans' hash."""
    from mleval_sql.engines.polars.bootstrap import draws as drawn
    from mleval_sql.engines.polars.bootstrap import hash_starts

    samples = pl.Series(range(3000))
    for seed in (0, 9, 2**40 + 3):
        starts = hash_starts(samples.len(), seed)
        for replicate in (0, 1, 199, 4097):
            want = draws(samples, replicate, seed)
            assert drawn(starts, replicate).tolist() == [want[s] for s in range(3000)]


def test_a_draw_steps_up_where_poissons_cdf_is_reached():
    """Hashes on either side of each step of Poisson(1)'s CDF: u = (h + 1/2) / 2^32 at or above
    CDF(k) draws more than k, below it k (the replicated plans' rule, u >= CDF)."""
    from mleval_sql.engines.polars.bootstrap import draws as drawn

    def unmixed(h: int) -> int:
        inverse = pow(73244475, -1, M)
        h ^= h >> 16
        h = h * inverse % M
        h ^= h >> 16
        h = h * inverse % M
        return h ^ (h >> 16)

    cdf = stats.poisson.cdf(np.arange(12), 1)
    hashes, want = [], []
    for k, c in enumerate(cdf):
        first = math.ceil(c * M - 0.5)  # the first h with (h + 1/2) / 2^32 >= CDF(k)
        assert (first + 0.5) / M >= c > (first - 0.5) / M
        hashes += [first - 1, first]
        want += [k, k + 1]
    assert [int(mix(np.array([unmixed(h)], dtype=np.uint64))[0]) for h in hashes] == hashes
    starts = np.array([(unmixed(h) - 7 * 374761393) % M for h in hashes], dtype=np.uint32)
    assert drawn(starts, 7).tolist() == want


def fractional(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame``'s weights (0, 0.5, 1, 2.5 per sample) times a factor per sample, 1 / 3 times
    1 to 2 in sevenths: weights of full mantissas, a sample's weight the same on its rows,
    zeros kept."""
    factor = (pl.col("sample").rank("dense") % 7 + 7) / 21
    return frame.with_columns(weight=pl.col("weight") * factor)


#: The engines that hand their rows to the kernel that ranks them once for every replicate
RANKING_ENGINES = ("polars", "duckdb")


def replicated_plans(frame: pl.DataFrame, metrics: list[str], **options: object
                     ) -> pl.DataFrame:
    """The intervals of the steps over the replicated rows (queries/replicates.sql on DuckDB,
    every replicate a pass of the SQL): the oracle of the rows ranked once."""
    from mleval_sql.engines.duckdb import DuckDBEngine
    from mleval_sql.progress import timings

    with pytest.MonkeyPatch.context() as patch, timings() as seconds:
        patch.setattr(DuckDBEngine, "ranks_replicates", False)
        got = me.evaluate(frame, metrics, engine="duckdb", **options)
    assert not any("bootstrap: ranking" in s for s in seconds)
    return got


def rows_per_budget(monkeypatch: pytest.MonkeyPatch, rows: int, budget: str = "64MB") -> str:
    """``budget``, with the memory a row is taken to cost, by the steps and by the kernel that
    ranks the rows, set so that it holds ``rows`` rows (DuckDB needs a real budget to run in;
    polars is held to the same batches)."""
    from mleval_sql.engines import memory_bytes

    row_bytes = memory_bytes(budget) // rows
    monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", row_bytes)
    monkeypatch.setattr("mleval_sql.engines.polars.bootstrap.RANKED_ROW_BYTES", row_bytes)
    return budget


def assert_intervals_close(got: pl.DataFrame, want: pl.DataFrame, what: str, *,
                           rel: float = 1e-12) -> None:
    """The same rows, values and intervals within ``rel`` (sums in another order)."""
    assert got.select(pl.exclude("value", "ci_low", "ci_high")).equals(
        want.select(pl.exclude("value", "ci_low", "ci_high"))), what
    for c in ("value", "ci_low", "ci_high"):
        assert all(close(a, b, rel=rel, abs_=1e-15) for a, b in zip(got[c], want[c],
                                                                     strict=True)), (what, c)


def bootstrap_rows(frame: pl.DataFrame) -> pl.DataFrame:
    """The per-label rows whose interval is the bootstrap's: the kernel's own sums, the same
    bits on every engine (averages over labels are summed by the final steps)."""
    return frame.filter(pl.col("ci_method") == "bootstrap", pl.col("average").is_null()).select(
        pl.exclude("value"))


#: Requests whose bootstrap reads only decision counts and average precision per label
RANKED = [
    pytest.param("multilabel", ["f1", "precision", "recall", "accuracy", "average_precision",
                                "roc_auc"],
                 ["none", "macro", "weighted"], {"by": "region"}, id="multilabel"),
    pytest.param("multilabel", ["fbeta", "average_precision"], ["none", "macro"],
                 {"by": ["region", "model"], "threshold": 0.3, "beta": 2.0},
                 id="two-segment-columns-threshold"),
    pytest.param("binary", ["f1", "average_precision", "jaccard"], None, {"by": "region"},
                 id="binary"),
    pytest.param("binary", ["recall", "average_precision"], None, {}, id="no-segment"),
    pytest.param("multilabel", ["roc_auc", "f1"], ["macro"], {"by": "region", "ci": 0.95},
                 id="auc-macro"),
]


@pytest.mark.parametrize(("task", "metrics", "average", "options"), RANKED)
@pytest.mark.parametrize("ties", [True, False], ids=["text-ids-ties", "int-ids-distinct"])
@pytest.mark.parametrize("weighted", [False, True], ids=["whole-counts", "weighted"])
def test_rows_ranked_once_for_every_replicate_give_the_replicated_rows_intervals(
        task, metrics, average, options, ties, weighted, monkeypatch):
    """polars and DuckDB hand their rows to one kernel that ranks them once and runs each
    replicate's draws over them (whole counts, or fractional weights times the draws, with
    zero weights and a segment whose every weight is 0; a segment of one sample, one of
    negatives only, one lacking a label): on both engines, held or a batch of segments at a
    time under a budget, the intervals of the plans over the replicated rows (DuckDB's SQL),
    and the oracle's; each label's bootstrap interval the same bits on both engines. Scores on
    a grid of 11 (blocks of tied scores) or each its own."""
    from mleval_sql.progress import timings

    frame = make_predictions(task, seed=21, n_samples=70, weighted=weighted, int_ids=not ties,
                             weightless=weighted)
    if weighted:
        frame = fractional(frame)
        assert (frame["weight"] == 0).any() and frame["weight"].n_unique() > 8
    if not ties:  # every score its own, in the same order as before where they differ
        frame = frame.with_columns(score=pl.col("score") * 0.9
                                   + pl.int_range(pl.len()).shuffle(seed=4) / (20 * pl.len()))
        assert frame["score"].n_unique() == frame.height
    if task == "binary":
        frame = frame.drop("label")
    common = {"task": task, "average": average, "ci": 0.9, "resamples": 25, "seed": 3,
              **options}
    level = common["ci"]
    want = replicated_plans(frame, metrics, **common)
    assert want["ci_low"].null_count() < want.height
    ranked = {}
    for engine in RANKING_ENGINES:
        with timings() as seconds:
            got = ranked[engine] = me.evaluate(frame, metrics, engine=engine, **common)
        assert any("bootstrap: ranking" in s for s in seconds), engine  # the rows ranked once
        assert_intervals_close(got, want, engine)
        if not options.get("by"):
            continue
        # under a budget of half the rows: a batch of segments at a time
        with monkeypatch.context() as patch:
            budget = rows_per_budget(patch, frame.height // 2)
            with timings() as seconds:
                read = me.evaluate(frame, metrics, engine=engine, memory_limit=budget, **common)
        assert any(s.endswith("ranking, by batch > reading") for s in seconds), list(seconds)
        assert_intervals_close(read, got, f"{engine} under a budget")
        assert bootstrap_rows(read).equals(bootstrap_rows(got)), engine
    # DuckDB's intervals are polars', each label's bit for bit
    assert bootstrap_rows(ranked["duckdb"]).equals(bootstrap_rows(ranked["polars"]))
    got = ranked["duckdb"]
    by = [options["by"]] if isinstance(options.get("by"), str) else options.get("by", [])
    if len(by) == 1 and average is not None:  # the oracle's own replicates
        weighed = frame if weighted else frame.with_columns(weight=pl.lit(1.0))
        for metric in {"f1", "average_precision"} & set(metrics):
            oracle = oracle_intervals(weighed, task, metric, tuple(average), by, level=level,
                                      resamples=25, seed=3)
            keys = [*by, "metric", "average", "label"]
            oracle = oracle.drop("predicted").with_columns(pl.col(k).cast(got.schema[k])
                                                           for k in keys)
            mine = got.filter(metric=metric).join(oracle, on=keys, how="full",
                                                  nulls_equal=True)
            assert mine.height == oracle.height
            for row in mine.iter_rows(named=True):
                for c in ("ci_low", "ci_high"):
                    assert close(row[c], row[f"{c}_right"], rel=1e-9, abs_=1e-12), (c, row)


@pytest.mark.parametrize("engine", RANKING_ENGINES)
@pytest.mark.parametrize("weight", [None, "weight"], ids=["whole-counts", "weighted"])
def test_replicates_come_all_at_once_only_where_the_rows_are_ranked_once(
        engine, weight, monkeypatch):
    """polars and DuckDB take every replicate in one run where the rows ranked once give the
    metrics asked (whole counts or weighted); another ranking metric (break_even), or a
    segment larger than the budget holds in memory, is a plan over replicated rows, which
    runs as many replicates at a time as the budget holds."""
    from mleval_sql import uncertainty
    from mleval_sql.engines import make_engine
    from mleval_sql.params import DEFAULTS
    from mleval_sql.schema import Columns
    from mleval_sql.sources import as_source

    frame = make_predictions("multilabel", seed=3, n_samples=60, weighted=weight is not None)
    # 4,000 replicated rows a run in a budget DuckDB runs in
    monkeypatch.setattr(uncertainty, "REPLICATED_ROW_BYTES", 64_000_000 // 4_000)
    steps = ["sample_ids", "replicates", "threshold_counts", "decision_metrics",
             "ranking_metrics"]
    params = {**DEFAULTS, "resamples": 200, "micro": False}
    in_turn = math.ceil(200 / (4_000 // frame.height))
    for row_bytes, asked, runs in ((None, ["average_precision", "roc_auc"], 1),
                                   (None, ["break_even"], in_turn),
                                   (10**9, ["average_precision", "roc_auc"], in_turn)):
        if row_bytes is not None:  # every segment larger than the budget, ranked or not
            monkeypatch.setattr("mleval_sql.engines.segments.ROW_BYTES", row_bytes)
            monkeypatch.setattr("mleval_sql.engines.polars.bootstrap.RANKED_ROW_BYTES",
                                row_bytes)
        runner = make_engine(engine, as_source(frame), Columns(), weight, ["region"],
                             memory_limit="64MB")
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # polars: it streams a segment over the budget
            runner.summary()
        keep = {"decision_metrics": (["f1"], ["none"]), "ranking_metrics": (asked, ["none"])}
        chunks = runner.replicate_chunks(steps, params, rows=frame.height, keep=keep)
        assert len(chunks) == runs and [r for c in chunks for r in c] == list(range(200))
        runner.close()


@pytest.mark.parametrize("weighted", [True, False], ids=["weighted", "whole-counts"])
def test_intervals_do_not_move_with_engine_order_or_files(tmp_path, weighted):
    """The same intervals on every engine, rows shuffled, split in files, under a budget
    (polars ranks the rows once for every replicate, whole counts or weighted)."""
    frame = make_predictions("multilabel", seed=3, n_samples=60, weighted=weighted)
    metrics = ["f1", "average_precision", "hamming_loss"]
    options = {"by": "region", "average": ["none", "macro"], "ci": 0.95, "resamples": 30,
               "seed": 9}
    want = me.evaluate(frame, metrics, engine="duckdb", **options)
    shuffled = frame.sample(fraction=1.0, shuffle=True, seed=1)
    for part, rows in enumerate(np.array_split(np.arange(shuffled.height), 3)):
        shuffled[rows].write_parquet(tmp_path / f"part-{part}.parquet")
    runs = {"polars": me.evaluate(frame, metrics, engine="polars", **options),
            "shuffled": me.evaluate(shuffled, metrics, **options),
            "three files": me.evaluate(tmp_path, metrics, **options),
            # chunks of replicates (a budget of 4,000 replicated rows a run)
            "memory budget": me.evaluate(frame, metrics, engine="polars", memory_limit="1MB",
                                         **options)}
    for name, got in runs.items():
        assert got.select(pl.exclude("value", "ci_low", "ci_high")).equals(
            want.select(pl.exclude("value", "ci_low", "ci_high"))), name
        for c in ("value", "ci_low", "ci_high"):
            assert all(close(a, b, rel=1e-12) for a, b in zip(got[c], want[c], strict=True)), \
                (name, c)
    other = me.evaluate(frame, metrics, **{**options, "seed": 10})
    assert not other["ci_low"].equals(want["ci_low"])  # the seed is what draws them


def test_a_value_undefined_in_too_many_replicates_has_no_interval():
    # one positive among 12 samples: a replicate drops it about a third of the time, and
    # recall is then undefined
    frame = pl.DataFrame({"sample": range(12), "score": np.linspace(0, 1, 12),
                          "truth": [i == 11 for i in range(12)]})
    got = me.evaluate(frame, ["recall", "accuracy"], ci=0.95, resamples=50, seed=1)
    recall = got.filter(metric="recall").row(0, named=True)
    assert recall["ci_resamples"] < 48 and recall["ci_low"] is None
    assert recall["reason"] == (f"defined in {recall['ci_resamples']} of 50 resamples (fewer "
                                "than 48)")
    accuracy = got.filter(metric="accuracy").row(0, named=True)
    assert accuracy["ci_resamples"] == 50 and accuracy["reason"] is None
    undefined = me.evaluate(frame.with_columns(truth=False), "recall", ci=0.95, resamples=20)
    assert undefined["reason"].to_list() == ["no positives (tp + fn = 0)"]


@pytest.mark.parametrize(("given", "message"), [
    ({"ci": 1.0}, r"ci must be a finite number in \(0, 1\)"),
    ({"resamples": 50}, "resamples= and seed= are the bootstrap's: they go with ci="),
    ({"ci": 0.9, "resamples": 5}, "resamples must be a finite whole number >= 10"),
])
def test_bad_interval_options_are_named(given, message):
    with pytest.raises(me.InputError, match=message):
        Request.build("evaluate", **given)


def test_curves_and_clustering_take_no_interval():
    with pytest.raises(me.InputError, match="ci does not apply to curve"):
        Request.build("curve", ci=0.95)
    clusters = pl.DataFrame({"sample": [1, 2, 3], "truth": [0, 1, 1], "cluster": [1, 1, 0]})
    with pytest.raises(me.InputError, match="no intervals for clustering"):
        me.evaluate(clusters, "adjusted_rand", ci=0.95)


# -- comparisons --------------------------------------------------------------------------------

def two_models(seed: int, n: int = 80) -> pl.DataFrame:
    """Models a and b scoring the same samples (ties on a grid, weights with zeros), two
    regions; b's scores carry more of the truth."""
    rng = np.random.default_rng(seed)
    truth = rng.random(n) < 0.4
    weight = rng.choice([0.0, 1.0, 1.0, 2.5], n)
    region = rng.choice(["eu", "us"], n)
    frames = [pl.DataFrame({"sample": [f"s{i:03d}" for i in range(n)],
                            "score": np.round(np.clip(rng.normal(0.5, 0.25, n) + skill * truth,
                                                      0, 1) * 10) / 10,
                            "truth": truth, "weight": weight, "region": region, "model": m})
              for m, skill in (("a", 0.1), ("b", 0.3))]
    return pl.concat(frames)


def placements(truth: np.ndarray, score: np.ndarray, weight: np.ndarray) -> np.ndarray:
    """Each row's placement from every (positive, negative) pair (ties one half)."""
    psi = (score[:, None] > score[None, :]) + 0.5 * (score[:, None] == score[None, :])
    pos, neg = weight * truth, weight * ~truth
    return np.where(truth, psi @ neg / neg.sum(), (pos @ psi) / pos.sum())


def paired_delong(part: pl.DataFrame, level: float) -> tuple[float, float, float, float]:
    """The difference of b's AUC over a's, its interval and p-value, from the placements'
    covariance computed directly."""
    a, b = (part.filter(model=m).sort("sample") for m in ("a", "b"))
    truth, weight = a["truth"].to_numpy(), a["weight"].to_numpy()
    va = placements(truth, a["score"].to_numpy(), weight)
    vb = placements(truth, b["score"].to_numpy(), weight)
    variance, aucs = 0.0, []
    for side in (truth, ~truth):
        w, total = weight[side], weight[side].sum()
        da, db = va[side] - (w @ va[side]) / total, vb[side] - (w @ vb[side]) / total
        variance += (w @ (db - da) ** 2) / (total - 1) / total
        aucs.append((w @ vb[side] - w @ va[side]) / total)
    difference, se = aucs[0], math.sqrt(variance)
    z = stats.norm.ppf(1 - (1 - level) / 2)
    return difference, difference - z * se, difference + z * se, 2 * stats.norm.sf(
        abs(difference) / se)


def test_paired_delong_is_the_placements_covariance(engine):
    frame = two_models(4)
    got = me.compare(frame, "roc_auc", model="model", baseline="a", by="region", engine=engine,
                     ci=0.9)
    assert got["ci_method"].to_list() == ["delong", "delong"]
    for row in got.iter_rows(named=True):
        want = paired_delong(frame.filter(region=row["region"]), 0.9)
        assert close(row["value"], want[0], rel=1e-9), row
        for got_value, wanted in zip((row["ci_low"], row["ci_high"], row["p_value"]), want[1:],
                                     strict=True):
            assert close(got_value, wanted, rel=1e-9, abs_=1e-12), row


def test_paired_bootstrap_is_the_oracles(engine):
    frame = two_models(5).rename({"weight": "w"}).with_columns(weight=pl.col("w")).drop("w")
    frame = frame.with_columns(label=pl.lit("y"))
    options = {"by": ["region"], "task": "binary", "ci": 0.9, "resamples": 20, "seed": 2}
    got = me.compare(frame, ["f1", "accuracy"], model="model", baseline="a", engine=engine,
                     **{k: v for k, v in options.items() if k != "by"}, by="region")
    for metric in ("f1",):
        rows = {}
        for r in range(20):
            drawn = draws(frame["sample"], r, 2)
            weighed = frame.with_columns(pl.col("weight") * pl.col("sample").replace_strict(
                drawn, return_dtype=pl.Float64))
            values = {m: expected(weighed.filter(model=m), "binary", metric, ("none",),
                                  ["region"], DEFAULT_PARAMS) for m in ("a", "b")}
            joined = values["b"].join(values["a"], on=["region", "label"], suffix="_a")
            for region, value, base in joined.select("region", "value", "value_a").rows():
                rows.setdefault(region, []).append(value - base)
        for region, differences in rows.items():
            d = np.array(differences)
            row = got.filter(region=region, metric=metric).row(0, named=True)
            assert close(row["ci_low"], np.percentile(d, 5), rel=1e-9)
            assert close(row["ci_high"], np.percentile(d, 95), rel=1e-9)
            p = min(1.0, 2 * min(((d <= 0).sum() + 1) / 21, ((d >= 0).sum() + 1) / 21))
            assert close(row["p_value"], p), (row, p)


def test_a_segment_against_the_rest():
    frame = two_models(6).filter(model="a").drop("model")
    got = me.compare(frame, ["roc_auc", "accuracy"], against="rest", by="region",
                     task="binary", resamples=50)
    assert got.columns[:2] == ["region", "metric"]
    for row in got.filter(metric="roc_auc").iter_rows(named=True):
        inside = frame.filter(region=row["region"])
        outside = frame.filter(pl.col("region") != row["region"])
        aucs = [me.evaluate(part, "roc_auc", ci=0.95).row(0, named=True)
                for part in (inside, outside)]
        assert close(row["value"], aucs[0]["value"] - aucs[1]["value"], rel=1e-12)
        se = [(a["ci_high"] - a["ci_low"]) / 2 for a in aucs]  # unclipped here
        half = (row["ci_high"] - row["ci_low"]) / 2
        assert close(half, math.hypot(*se), rel=1e-9)
    assert set(got.filter(metric="accuracy")["ci_method"]) == {"bootstrap"}


@pytest.mark.parametrize(("change", "message"), [
    (lambda f: f.filter(~((pl.col("model") == "b") & (pl.col("sample") == "s007"))),
     "sample 's007' is scored by 1 of the 2 models in column 'model'"),
    (lambda f: f.with_columns(truth=pl.when((pl.col("model") == "b")
                                            & (pl.col("sample") == "s003"))
                              .then(~pl.col("truth")).otherwise(pl.col("truth"))),
     "sample 's003' has another truth under model 'b'"),
])
def test_a_comparison_needs_the_same_samples(change, message):
    with pytest.raises(me.InputError, match=message):
        me.compare(change(two_models(7)), "roc_auc", model="model", baseline="a")


def test_comparison_options_are_named():
    frame = two_models(8)
    with pytest.raises(me.InputError, match="baseline 'c' is not a model of column 'model'"):
        me.compare(frame, "f1", model="model", baseline="c", resamples=20)
    with pytest.raises(me.InputError, match=r"give model= \(the column naming the models\)"):
        me.compare(frame, "f1", model="model")
    with pytest.raises(me.InputError, match="not both"):
        me.compare(frame, "f1", model="model", baseline="a", against="rest", by="region")
    with pytest.raises(me.InputError, match="compares segments: name them with by="):
        me.compare(frame, "f1", against="rest")


# -- coverage ------------------------------------------------------------------------------------

#: 200 data sets of a known binormal model: negatives' scores N(0, 1), positives' N(MU, 1),
#: prevalence PI, 300 samples each, scores as probabilities through the logistic function
MU, PI, N_SETS, N_SAMPLES = 1.0, 0.4, 200, 300


def _truths() -> dict[str, float]:
    """The model's true AUC, F1 at 0.5 (the population's counts) and log loss."""
    tpr, fpr = stats.norm.sf(-MU), 0.5  # score >= 0.5: x >= 0
    f1 = 2 * PI * tpr / (2 * PI * tpr + (1 - PI) * fpr + PI * (1 - tpr))
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    weights = weights / weights.sum()
    def loss(x: np.ndarray) -> np.ndarray:  # -log(sigmoid(x)), stably
        return np.logaddexp(0, -x)
    log_loss = PI * weights @ loss(nodes + MU) + (1 - PI) * weights @ loss(-nodes)
    return {"roc_auc": stats.norm.cdf(MU / math.sqrt(2)), "f1": f1, "log_loss": log_loss}


def test_intervals_cover_the_true_values_about_95_percent_of_the_time(engine):
    rng = np.random.default_rng(20261125)
    truth = rng.random((N_SETS, N_SAMPLES)) < PI
    x = rng.normal(size=(N_SETS, N_SAMPLES)) + MU * truth
    frame = pl.DataFrame({"dataset": np.repeat(np.arange(N_SETS), N_SAMPLES),
                          "sample": np.tile(np.arange(N_SAMPLES), N_SETS),
                          "score": 1 / (1 + np.exp(-x.ravel())), "truth": truth.ravel()})
    got = me.evaluate(frame, ["roc_auc", "f1", "log_loss"], by="dataset", ci=0.95,
                      engine=engine)
    for metric, true in _truths().items():
        true = float(true)
        rows = got.filter(metric=metric)
        assert rows.height == N_SETS and rows["ci_low"].null_count() == 0
        covered = ((rows["ci_low"] <= true) & (true <= rows["ci_high"])).sum()
        # 95% of 200 is 190; a binomial(200, 0.95) count lies in [180, 198] with
        # probability 0.9995
        assert 180 <= covered <= 198, (metric, covered)


def test_intervals_are_the_same_in_postgres_and_on_spark(pg_connection, spark):
    """The bootstrap's steps rendered for PostgreSQL and Spark draw the same weights (the hash
    is integer arithmetic every dialect computes alike), and DeLong's step runs there too."""
    from tests.test_portable import load

    frame = make_predictions("multilabel", seed=2, n_samples=30)
    metrics = ["f1", "roc_auc", "average_precision"]
    options = {"by": "region", "average": ["none", "macro"], "ci": 0.9, "resamples": 12,
               "seed": 3, "task": "multilabel"}
    want = me.evaluate(frame, metrics, **options)
    load("postgres", pg_connection, "boot_input", frame)
    load("spark", spark, "boot_input", frame)
    runs = {"postgres": me.evaluate("boot_input", metrics, engine="sql",
                                    connection=pg_connection, **options),
            "spark sql": me.evaluate("boot_input", metrics, engine="sql", connection=spark,
                                     **options),
            "spark": me.evaluate(frame, metrics, engine="spark", **options)}
    keys = ["region", "metric", "average", "label"]
    for name, got in runs.items():
        joined = got.join(want, on=keys, how="full", nulls_equal=True, coalesce=True)
        assert joined.height == want.height == got.height, name
        assert (joined["ci_method"] == joined["ci_method_right"]).all(), name
        for c in ("ci_low", "ci_high"):
            assert all(close(a, b, rel=1e-9, abs_=1e-12)
                       for a, b in zip(joined[c], joined[f"{c}_right"], strict=True)), (name, c)
