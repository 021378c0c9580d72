"""``me.drift``: distribution drift between a reference and current table, every statistic held
to the numpy/scipy oracle of tests/oracle_drift.py on both engines, with the hard cases (ties,
weights, a segment only one side has, single rows, one-value columns, empty bins, unseen
categories, reference={"model": ...}) and the errors of bad input.

Readings of the spec taken here (closest to scipy): the KS p-value is null where scipy's
``ks_2samp(method="asymp")`` gives NaN (en rounds to 0: one row against one); segments and
labels are the union of both sides'; a side with no rows has null null-share; ``bins`` counts
every bin of the group (for chi2 too, not only the non-empty ones), null where a side has no
rows; zero-weight rows count in ``*_rows`` but make no bin and change no value; a binary
table without a label column labels its rows after the score column, as mleval does
elsewhere.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import given
from hypothesis import strategies as st
from polars.testing import assert_frame_equal
from scipy import stats
from scipy.spatial.distance import jensenshannon

import mleval_sql as me
from mleval_sql.errors import InputError
from tests import oracle_drift as oracle

ALL = list(oracle.STATISTICS)
REL, ABS = 1e-9, 1e-12
FLOATS = ("value", "p_value", "reference_weight", "current_weight", "reference_null_share",
          "current_null_share", "epsilon")
INTS = ("reference_rows", "current_rows")
WEIGHTS = np.array([0.5, 1.0, 1.5, 2.0, 2.5, 3.0])  # sums exact in binary floating point
COLOURS = ("red", "green", "blue")


def table(seed: int, regions: dict[str, int], *, labels: tuple[str, ...] | None = ("cat", "dog",
          "eel"), weighted: bool = True, shift: float = 0.0, colours: tuple[str, ...] = COLOURS,
          prefix: str = "s") -> pl.DataFrame:
    """Long rows ``sample, label, score, truth, [weight,] region, age, colour``: ``regions``
    maps a region to its number of samples; scores on a 0.01 grid (ties, many at 0.5), a
    numeric feature ``age`` on an integer grid and a categorical ``colour``, each ~10% null,
    constant within a sample, as is the weight. ``labels=None``: a binary table without a
    label column."""
    rng = np.random.default_rng(seed)
    rows = []
    i = 0
    for region, n in regions.items():
        for _ in range(n):
            w = float(rng.choice(WEIGHTS))
            age = None if rng.random() < 0.1 else float(round(rng.normal(40 + 8 * shift, 10)))
            colour = None if rng.random() < 0.1 else str(rng.choice(colours))
            for label in labels or (None,):
                score = float(np.round(np.clip(rng.beta(2, 3) + shift * 0.2, 0, 1), 2))
                if rng.random() < 0.1:
                    score = 0.5
                truth = bool(rng.random() < 0.4 + 0.2 * shift)
                rows.append({"sample": f"{prefix}{i:04d}", "label": label, "score": score,
                             "truth": truth, "weight": w, "region": region, "age": age,
                             "colour": colour})
            i += 1
    frame = pl.DataFrame(rows, schema={"sample": pl.String, "label": pl.String,
                                       "score": pl.Float64, "truth": pl.Boolean,
                                       "weight": pl.Float64, "region": pl.String,
                                       "age": pl.Float64, "colour": pl.String})
    if labels is None:
        frame = frame.drop("label")
    return frame if weighted else frame.drop("weight")


def keys(by: list[str]) -> list[str]:
    return [*by, "compared", "label", "statistic"]


def assert_matches(got: pl.DataFrame, want: pl.DataFrame, by: list[str], *,
                   order: bool = True, only: tuple[str, ...] | None = None) -> None:
    """Same rows (keys), every column (or those in ``only``) equal to the oracle's (floats to
    REL/ABS, null only where null, NaN never); with ``order``, in the oracle's order."""
    assert set(oracle.COLUMNS) <= set(got.columns), got.columns
    k = keys(by)
    as_text = [pl.col(c).cast(pl.String) for c in k]
    g = got.with_columns(as_text).with_row_index("_got")
    w = want.with_columns(as_text).with_row_index("_want")
    joined = g.join(w, on=k, how="full", nulls_equal=True, suffix="_want", coalesce=True)
    missing = joined.filter(pl.col("_got").is_null())
    extra = joined.filter(pl.col("_want").is_null())
    assert missing.is_empty(), f"rows missing from the result:\n{missing.select(k)}"
    assert extra.is_empty(), f"unexpected rows in the result:\n{extra.select(k)}"
    bad = []
    for row in joined.iter_rows(named=True):
        where = {c: row[c] for c in k}
        for col in (c for c in FLOATS if only is None or c in only):
            a, b = row[col], row[f"{col}_want"]
            ok = (a is None and b is None) if a is None or b is None else (
                not math.isnan(a) and math.isclose(a, b, rel_tol=REL, abs_tol=ABS))
            if not ok:
                bad.append(f"{where} {col}: got {a}, want {b}")
        for col in (c for c in INTS if only is None or c in only):
            if row[col] != row[f"{col}_want"]:
                bad.append(f"{where} {col}: got {row[col]}, want {row[f'{col}_want']}")
        if only is None and row["bins"] != row["bins_want"]:
            bad.append(f"{where} bins: got {row['bins']}, want {row['bins_want']}")
    assert not bad, f"{len(bad)} disagreement(s):\n" + "\n".join(bad[:40])
    if order:
        assert g["_got"].to_list() == joined.sort("_want")["_got"].to_list(), \
            f"row order differs:\n{got.select(k)}\nwant:\n{want.select(k)}"


# -- the oracle against scipy itself (no engine) --------------------------------------------------

def test_oracle_agrees_with_scipy_unweighted_and_with_repeated_rows():
    rng = np.random.default_rng(0)
    for n, m in [(1, 1), (1, 7), (5, 5), (13, 40), (200, 150)]:
        r, c = np.round(rng.random(n), 1), np.round(rng.random(m) + 0.1, 1)
        d, p = oracle.ks(r, np.ones(n), c, np.ones(m))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            want = stats.ks_2samp(r, c)  # unweighted: scipy's own choice of method
        assert math.isclose(d, want.statistic, rel_tol=1e-15)
        assert (p is None and math.isnan(want.pvalue)) or math.isclose(p, want.pvalue,
                                                                       rel_tol=1e-15)
        # integer weights: the values of the repeated rows (not p-values, nor chi2: effective
        # sizes)
        a, b = rng.integers(1, 4, n).astype(float), rng.integers(1, 4, m).astype(float)
        rr, cc = np.repeat(r, a.astype(int)), np.repeat(c, b.astype(int))
        got = oracle.group_statistics("numeric", r, a, c, b, ALL, bins=4)
        rep = oracle.group_statistics("numeric", rr, np.ones(rr.size), cc, np.ones(cc.size),
                                      ALL, bins=4)
        for x, y in zip(got[:-1], rep[:-1], strict=True):  # chi2 (last): scaled counts
            assert math.isclose(x["value"], y["value"], rel_tol=1e-12, abs_tol=1e-15), x
    # dof 0: scipy's chi2_contingency gives statistic 0 and p-value 1
    (row,) = oracle.group_statistics("categorical", ["a"], [1.0], ["a", "a"], [1.0, 1.0],
                                     ["chi2"])
    assert (row["value"], row["p_value"]) == (0.0, 1.0)
    # quantile edges: right-closed bins, F_r(e_i) >= i / bins exactly, duplicates dropped
    assert oracle.quantile_edges(np.array([1.0, 2, 3, 4]), np.ones(4), 4) == [1.0, 2.0, 3.0]
    assert oracle.quantile_edges(np.array([1.0, 1, 1, 4]), np.ones(4), 4) == [1.0]
    assert oracle.quantile_edges(np.array([1.0, 2]), np.array([1.0, 3.0]), 4) == [1.0, 2.0]
    p, q = np.array([0.5, 0.5, 0.0]), np.array([0.25, 0.25, 0.5])
    assert math.isclose(oracle.psi(p, q, 1e-4), 2 * (-0.25 * math.log(0.5))
                        + (0.5 - 1e-4) * math.log(0.5 / 1e-4))
    assert jensenshannon(p, p, base=2) == 0.0


# -- every statistic against the oracle -----------------------------------------------------------

def multilabel_pair(seed: int = 1) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A reference (regions north, south, one: a single sample) and a shifted current table
    with a region (east) the reference lacks and a colour (purple) it never saw."""
    ref = table(seed, {"north": 40, "south": 25, "one": 1})
    cur = table(seed + 100, {"north": 30, "south": 35, "one": 1, "east": 6}, shift=0.5,
                colours=(*COLOURS, "purple"), prefix="t")
    return ref, cur


def test_multilabel_every_statistic_by_region(engine):
    ref, cur = multilabel_pair()
    compared = ["score", "decision", "truth", "age", "colour"]
    got = me.drift(cur, ref, compared, by="region", statistics=ALL, engine=engine)
    want = oracle.expected(ref, cur, compared, by=["region"], statistics=ALL)
    assert_matches(got, want, ["region"])
    assert got.columns[:1] == ["region"]


def test_default_statistics_without_segments(engine):
    ref, cur = multilabel_pair(2)
    compared = ["score", "decision", "truth", "age", "colour"]
    got = me.drift(cur, ref, compared, engine=engine)
    want = oracle.expected(ref, cur, compared)
    assert_matches(got, want, [])
    stats_of = {c: got.filter(pl.col("compared") == c)["statistic"].unique(maintain_order=True)
                .to_list() for c in compared}
    assert stats_of == {"score": ["ks", "wasserstein", "psi"],
                        "decision": ["chi2", "psi", "jensen_shannon"],
                        "truth": ["chi2", "psi", "jensen_shannon"],
                        "age": ["ks", "wasserstein", "psi"],
                        "colour": ["chi2", "psi", "jensen_shannon"]}
    assert got.filter(pl.col("compared").is_in(["age", "colour"]))["label"].null_count() == \
        got.filter(pl.col("compared").is_in(["age", "colour"])).height


def test_statistics_in_the_order_asked(engine):
    ref, cur = multilabel_pair(2)
    asked = ["chi2", "psi", "ks", "total_variation"]
    got = me.drift(cur, ref, ["colour", "age"], statistics=asked, engine=engine)
    assert got.select("compared", "statistic").rows() == [
        ("colour", "chi2"), ("colour", "psi"), ("colour", "total_variation"),
        ("age", "chi2"), ("age", "psi"), ("age", "ks"), ("age", "total_variation")]


def test_binary_unweighted_equals_scipy_directly(engine):
    ref = table(3, {"all": 60}, labels=None, weighted=False)
    cur = table(4, {"all": 45}, labels=None, weighted=False, shift=0.3, prefix="t")
    got = me.drift(cur, ref, ["score"], statistics=["ks", "wasserstein"], engine=engine)
    r, c = ref["score"].to_numpy(), cur["score"].to_numpy()
    want = stats.ks_2samp(r, c)  # scipy's choice: exact, up to 10,000 rows a side
    row = got.filter(pl.col("statistic") == "ks").row(0, named=True)
    assert row["p_value_method"] == "exact"
    assert math.isclose(row["value"], want.statistic, rel_tol=1e-12)
    assert math.isclose(row["p_value"], want.pvalue, rel_tol=1e-9)
    assert row["reference_rows"] == 60 and row["current_rows"] == 45
    assert row["reference_weight"] == 60.0 and row["current_null_share"] == 0.0
    row = got.filter(pl.col("statistic") == "wasserstein").row(0, named=True)
    assert math.isclose(row["value"], stats.wasserstein_distance(r, c), rel_tol=1e-12)
    assert row["p_value"] is None and row["bins"] is None and row["epsilon"] is None
    assert_matches(got, oracle.expected(ref, cur, ["score"], statistics=["ks", "wasserstein"]),
                   [])


def test_binary_weighted_all_statistics_custom_bins_and_threshold(engine):
    ref = table(5, {"a": 50, "b": 3}, labels=None)
    cur = table(6, {"a": 40, "b": 1, "c": 2}, labels=None, shift=-0.4, prefix="t")
    options = {"statistics": ALL, "bins": 4, "threshold": 0.3, "epsilon": 1e-3}
    got = me.drift(cur, ref, ["score", "decision", "truth"], by=["region"], engine=engine,
                   **options)
    want = oracle.expected(ref, cur, ["score", "decision", "truth"], by=["region"], **options)
    assert_matches(got, want, ["region"])


def test_given_edges_with_an_empty_bin(engine):
    ref, cur = multilabel_pair(7)
    edges = [0.2, 0.4, 0.5, 0.50001, 0.6, 0.8]  # (0.5, 0.50001] holds no 0.01-grid score
    got = me.drift(cur, ref, ["score", "colour"], statistics=ALL, edges=edges, epsilon=0.01,
                   engine=engine)
    want = oracle.expected(ref, cur, ["score", "colour"], statistics=ALL, edges=edges,
                           epsilon=0.01)
    assert_matches(got, want, [])
    assert set(got.filter(pl.col("compared") == "score")["bins"].drop_nulls()) == {7}
    assert set(got.filter(pl.col("statistic") == "psi")["epsilon"]) == {0.01}


def test_reference_is_a_model_of_the_source(engine):
    ref, cur = multilabel_pair(8)
    rng = np.random.default_rng(8)
    cur = cur.with_columns(model=pl.Series(rng.choice(["b", "c"], cur.height)))
    # a model is a column of the sample: one per sample, so the features stay per sample
    cur = cur.with_columns(pl.col("model").first().over("sample"))
    source = pl.concat([ref.with_columns(model=pl.lit("a")), cur])
    compared = ["score", "truth", "age", "colour"]
    got = me.drift(source, {"model": "a"}, compared, by="region", statistics=ALL,
                   engine=engine)
    r, c, column = oracle.split(source, {"model": "a"})
    want = oracle.expected(r, c, compared, by=["region"], extra=column, statistics=ALL)
    assert "model" in got.columns and set(got["model"]) == {"b", "c"}
    assert_matches(got, want, ["region", "model"], order=False)


def test_parquet_paths_and_pandas_frames_give_the_same_rows(engine, tmp_path):
    ref, cur = multilabel_pair(16)
    ref.write_parquet(tmp_path / "ref.parquet")
    cur.write_parquet(tmp_path / "cur.parquet")
    options = {"by": "region", "statistics": ALL, "engine": engine}
    frames = me.drift(cur, ref, ["score", "colour"], **options)
    paths = me.drift(str(tmp_path / "cur.parquet"), str(tmp_path / "ref.parquet"),
                     ["score", "colour"], **options)
    pandas = me.drift(cur.to_pandas(), ref.to_pandas(), ["score", "colour"], **options)
    for other in (paths, pandas):
        assert_frame_equal(other, frames, rel_tol=1e-12, abs_tol=1e-15)


def test_a_segment_only_the_reference_has_gives_rows_with_no_current(engine):
    ref = table(9, {"north": 20, "west": 5})
    cur = table(10, {"north": 20}, prefix="t")
    got = me.drift(cur, ref, ["score", "age"], by="region", engine=engine)
    want = oracle.expected(ref, cur, ["score", "age"], by=["region"])
    assert_matches(got, want, ["region"])


def test_one_value_columns(engine):
    ref = table(11, {"x": 12}).with_columns(score=pl.lit(0.25), age=pl.lit(3.0),
                                            colour=pl.lit("red"))
    cur = table(12, {"x": 9, "y": 1}, prefix="t").with_columns(
        score=pl.lit(0.25), age=pl.when(pl.col("region") == "y").then(4.0).otherwise(3.0),
        colour=pl.lit("red"))
    compared = ["score", "decision", "age", "colour"]
    got = me.drift(cur, ref, compared, by="region", statistics=ALL, engine=engine)
    want = oracle.expected(ref, cur, compared, by=["region"], statistics=ALL)
    assert_matches(got, want, ["region"])
    x = got.filter(pl.col("region") == "x")
    assert set(x["value"]) == {0.0}
    assert set(x.filter(pl.col("statistic") == "chi2")["p_value"]) == {1.0}  # dof 0


def test_ks_p_value_rounds_the_effective_size_half_to_even(engine):
    # m = n = 5: en = 2.5, which numpy (so scipy's asymp) rounds to 2 and SQL's ROUND to 3;
    # one row against one: en = 0.5 rounds to 0 and scipy gives NaN (null here)
    # weights of 2 everywhere: effective sizes 5 and 1, and the asymptotic p-value (weighted)
    ref = pl.DataFrame({"sample": [f"r{i}" for i in range(6)], "score": [.1, .2, .3, .4, .5, .9],
                        "truth": [True] * 6, "seg": ["five"] * 5 + ["one"], "weight": 2.0})
    cur = pl.DataFrame({"sample": [f"c{i}" for i in range(6)], "score": [.3, .4, .6, .7, .8, .2],
                        "truth": [False] * 6, "seg": ["five"] * 5 + ["one"], "weight": 2.0})
    got = me.drift(cur, ref, ["score"], by="seg", statistics=["ks"], engine=engine)
    five = got.filter(pl.col("seg") == "five").row(0, named=True)
    want = stats.ks_2samp([.1, .2, .3, .4, .5], [.3, .4, .6, .7, .8], method="asymp")
    assert math.isclose(five["value"], 0.6) and math.isclose(five["value"], want.statistic)
    assert math.isclose(want.pvalue, stats.kstwo.sf(0.6, 2), rel_tol=1e-15)
    assert math.isclose(five["p_value"], want.pvalue, rel_tol=1e-12), (
        five["p_value"], want.pvalue, stats.kstwo.sf(0.6, 3))
    one = got.filter(pl.col("seg") == "one").row(0, named=True)
    assert one["value"] == 1.0 and one["p_value"] is None


def test_zero_weight_rows_change_no_value(engine):
    ref, cur = multilabel_pair(13)
    extra = table(14, {"north": 3}, colours=("ghost",), prefix="z").with_columns(
        weight=pl.lit(0.0), score=pl.lit(0.995))
    got = me.drift(pl.concat([cur, extra]), ref, ["score", "colour"], by="region",
                   statistics=ALL, engine=engine)
    want = oracle.expected(ref, cur, ["score", "colour"], by=["region"], statistics=ALL)
    assert_matches(got, want, ["region"], only=("value", "p_value"))


def test_result_columns_and_types(engine):
    ref, cur = multilabel_pair(15)
    got = me.drift(cur, ref, ["score", "colour"], by="region", engine=engine)
    assert got.columns == ["region", *oracle.COLUMNS]
    types = dict(zip(got.columns, got.dtypes, strict=True))
    assert all(types[c] == pl.String for c in ("region", "compared", "label", "statistic"))
    assert all(types[c] == pl.Float64 for c in FLOATS)
    assert all(types[c].is_integer() for c in (*INTS, "bins"))


# -- property: random tables --------------------------------------------------------------------

@st.composite
def pairs(draw: st.DrawFn) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A reference and a current table of 1 to 25 samples each: scores on a coarse grid (ties,
    one-value sides), a categorical ``colour``, weights or none."""
    def side(prefix: str, colours: list[str]) -> pl.DataFrame:
        n = draw(st.integers(1, 25))
        grid = draw(st.sampled_from([0.1, 0.25, 1.0]))
        scores = draw(st.lists(st.integers(0, 8), min_size=n, max_size=n))
        weights = draw(st.lists(st.sampled_from(list(WEIGHTS)), min_size=n, max_size=n))
        colour = draw(st.lists(st.sampled_from(colours), min_size=n, max_size=n))
        return pl.DataFrame({"sample": [f"{prefix}{i}" for i in range(n)],
                             "score": [s * grid for s in scores], "truth": [True] * n,
                             "weight": weights, "colour": colour})
    ref, cur = side("r", ["a", "b", "c"]), side("c", ["a", "b", "d"])
    if draw(st.booleans()):
        ref, cur = ref.drop("weight"), cur.drop("weight")
    return ref, cur


@given(data=pairs(), bins=st.integers(1, 6))
def test_property_every_statistic(engine, data, bins):
    ref, cur = data
    options = {"statistics": ALL, "bins": bins}
    got = me.drift(cur, ref, ["score", "colour"], engine=engine, **options)
    assert_matches(got, oracle.expected(ref, cur, ["score", "colour"], **options), [])


# -- bad input -------------------------------------------------------------------------------------

def _bad_cases() -> dict[str, tuple]:
    ref, cur = table(20, {"n": 8}), table(21, {"n": 8}, prefix="t")
    varying = cur.with_columns(age=pl.Series(np.arange(cur.height, dtype=float)))
    nan = cur.with_columns(score=pl.when(pl.col("sample") == "t0003").then(float("nan"))
                           .otherwise(pl.col("score")))
    inf = cur.with_columns(age=pl.when(pl.col("sample") == "t0002").then(float("inf"))
                           .otherwise(pl.col("age")))
    return {
        "missing from the reference": (cur, ref.drop("age"), ["age"], {}, "age"),
        "numeric and text": (cur, ref.with_columns(pl.col("age").cast(pl.String)), ["age"], {},
                             "age"),
        "all null": (cur.with_columns(age=pl.lit(None, pl.Float64)),
                     ref.with_columns(age=pl.lit(None, pl.Float64)), ["age"], {}, "age"),
        "edges unsorted": (cur, ref, ["score"], {"edges": [0.5, 0.2]}, "edges"),
        "edges duplicated": (cur, ref, ["score"], {"edges": [0.2, 0.5, 0.5]}, "edges"),
        "nan score": (nan, ref, ["score"], {}, r"(?i)nan"),
        "infinite feature": (inf, ref, ["age"], {}, r"(?i)inf|finite"),
        "feature varying within a sample": (varying, ref, ["age"], {}, "age"),
        "unknown statistic": (cur, ref, ["score"], {"statistics": ["ks", "kss"]}, "kss"),
    }


BAD = _bad_cases()


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input(engine, case):
    source, reference, compared, options, match = BAD[case]
    with pytest.raises(InputError, match=match):
        me.drift(source, reference, compared, engine=engine, **options)


# -- multiclass decisions, a memory budget --------------------------------------------------------

def multiclass(n: int, seed: int) -> pl.DataFrame:
    """``n`` samples x 3 classes, scores on a coarse grid (ties within a sample)."""
    rng = np.random.default_rng(seed)
    scores = np.round(rng.random((n, 3)), 1)
    truth = rng.integers(0, 3, n)
    return pl.DataFrame({"sample": np.repeat(np.arange(n), 3),
                         "label": np.tile(["a", "b", "c"], n), "score": scores.ravel(),
                         "truth": np.repeat(truth, 3) == np.tile([0, 1, 2], n)})


def test_a_multiclass_decision_is_the_top_scored_label(engine):
    """The argmax label's distribution (ties to the smallest label, as numpy's argmax), one
    value per sample: chi2 and total variation against numpy and scipy."""
    ref, cur = multiclass(80, 21), multiclass(120, 22)
    got = me.drift(cur, ref, ["decision"], task="multiclass", engine=engine,
                   statistics=["chi2", "total_variation"])
    counts = [np.bincount(np.argmax(f["score"].to_numpy().reshape(-1, 3), axis=1),
                          minlength=3) for f in (ref, cur)]
    table = np.array(counts)[:, np.array(counts).sum(axis=0) > 0]
    want = stats.chi2_contingency(table)
    chi2 = got.filter(pl.col("statistic") == "chi2").row(0, named=True)
    assert chi2["label"] is None and chi2["reference_rows"] == 80
    assert math.isclose(chi2["value"], want.statistic, rel_tol=1e-12)
    assert math.isclose(chi2["p_value"], want.pvalue, rel_tol=1e-9)
    p, q = counts[0] / 80, counts[1] / 120
    tv = got.filter(pl.col("statistic") == "total_variation")["value"].item()
    assert math.isclose(tv, np.abs(p - q).sum() / 2, rel_tol=1e-12)


def test_a_memory_budget_runs_on_duckdb_with_the_same_rows():
    ref, cur = multilabel_pair(23)
    options = {"by": "region", "statistics": ALL}
    budgeted = me.drift(cur, ref, ["score", "colour"], memory_limit="256MB", **options)
    assert_frame_equal(budgeted, me.drift(cur, ref, ["score", "colour"], engine="polars",
                                          **options), rel_tol=1e-12, check_exact=False)


def test_under_a_budget_the_groups_run_in_batches_with_the_same_rows(monkeypatch):
    """Groups whose rows a budget does not hold at once run a batch at a time (here one or
    two groups a batch): the same rows as in one run."""
    import sys

    drift_module = sys.modules["mleval_sql.drift"]
    ref, cur = multilabel_pair(24)
    options = {"by": "region", "statistics": ALL}
    whole = me.drift(cur, ref, ["score", "colour"], engine="duckdb", **options)
    monkeypatch.setattr(drift_module, "ROW_BYTES", 2**30 // 40)  # a 1 GiB budget: 40 rows
    batches = drift_module._batches
    seen = []
    monkeypatch.setattr(drift_module, "_batches",
                        lambda *a: seen.append(batches(*a)) or seen[-1])
    batched = me.drift(cur, ref, ["score", "colour"], memory_limit="1GB", **options)
    assert seen[0]["batch"].max() >= 3
    assert_frame_equal(batched, whole, rel_tol=1e-12, check_exact=False)


def test_columns_maps_roles_and_compared_names_the_columns_compared():
    ref, cur = multilabel_pair(25)
    with pytest.raises(InputError, match=r"columns: where each role is found.*compared="):
        me.drift(cur, ref, columns=["score"])
