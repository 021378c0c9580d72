"""ndcg / dcg (graded relevance), and the det and thresholds curves: scikit-learn's own
docstring examples and random data with ties, weights, several and degenerate segments, on
every engine."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sklearn import metrics as skm

import mleval_sql as me

DOC_TRUTH = [10, 0, 0, 1, 5]


def _one_sample(truth: list[float], score: list[float]) -> pl.DataFrame:
    return pl.DataFrame({"sample": 1, "label": list("abcde"), "score": score, "truth": truth})


@pytest.mark.parametrize(("metric", "score", "options", "want"), [
    # scikit-learn's docstring examples (dcg_score, ndcg_score), to its shown digits
    ("dcg", [.1, .2, .3, 4, 70], {"k": 5}, 9.49),
    ("dcg", [.1, .2, .3, 4, 70], {"k": 2}, 5.63),
    ("dcg", [1, 0, 0, 0, 1], {"k": 1}, 7.5),
    ("dcg", [1, 0, 0, 0, 1], {"k": 1, "ignore_ties": True}, 5.0),
    ("ndcg", [.1, .2, .3, 4, 70], {"k": 5}, 0.69),
    ("ndcg", [.05, 1.1, 1., .5, .0], {"k": 5}, 0.49),
    ("ndcg", [.05, 1.1, 1., .5, .0], {"k": 4}, 0.35),
    ("ndcg", DOC_TRUTH, {"k": 4}, 1.0),
    ("ndcg", [1, 0, 0, 0, 1], {"k": 1}, 0.75),
    ("ndcg", [1, 0, 0, 0, 1], {"k": 1, "ignore_ties": True}, 0.5),
])
def test_scikit_learn_docstring_examples(engine: str, metric: str, score: list[float],
                                         options: dict, want: float) -> None:
    rows = _one_sample(DOC_TRUTH, [float(s) for s in score])
    got = me.evaluate(rows, [metric], engine=engine, **options)["value"].item()
    assert got == pytest.approx(want, abs=0.01)  # the digits its docstring shows


def _graded(seed: int, *, boolean: bool = False) -> tuple[pl.DataFrame, dict]:
    """Four segments: random graded truth and tied scores with weights, a one-sample
    segment, a segment whose weights are all 0, one with no relevant label."""
    rng = np.random.default_rng(seed)
    labels = [f"l{i}" for i in range(6)]
    parts, mats = [], {}
    for segment, n in (("many", 60), ("one", 1), ("zero", 5), ("none", 8)):
        truth = rng.integers(0, 4, (n, len(labels))).astype(float)
        if boolean:
            truth = (truth >= 2).astype(float)
        if segment == "none":
            truth[:] = 0
        score = rng.integers(0, 5, (n, len(labels))) / 4  # many ties
        weight = np.zeros(n) if segment == "zero" else rng.random(n) + 0.1
        mats[segment] = (truth, score, weight)
        parts.append(pl.DataFrame({
            "part": segment, "sample": np.repeat(np.arange(n), len(labels)),
            "label": np.tile(labels, n), "score": score.ravel(),
            "truth": truth.ravel() if not boolean else truth.ravel() == 1,
            "weight": np.repeat(weight, len(labels))}))
    return pl.concat(parts), mats


@pytest.mark.parametrize("boolean", [False, True])
@pytest.mark.parametrize(("k", "log_base", "ignore_ties"), [(2, 2.0, False), (6, 10.0, False),
                                                            (3, 0.5, False), (4, 2.0, True)])
def test_equal_scikit_learn(engine: str, boolean: bool, k: int, log_base: float,
                            ignore_ties: bool) -> None:
    rows, mats = _graded(7, boolean=boolean)
    if ignore_ties:  # scikit-learn orders ties by its argsort: compared without ties
        rows = rows.with_columns(score=pl.col("score") + pl.int_range(pl.len()) * 1e-6)
        mats = {s: (t, rows.filter(part=s)["score"].to_numpy().reshape(t.shape), w)
                for s, (t, _, w) in mats.items()}
    got = me.evaluate(rows, ["ndcg", "dcg"], by="part", k=k, log_base=log_base,
                      ignore_ties=ignore_ties, engine=engine)
    values = {(r["part"], r["metric"]): r["value"] for r in got.iter_rows(named=True)}
    for segment, (truth, score, weight) in mats.items():
        if segment == "zero":  # no weight: undefined
            assert values[(segment, "ndcg")] is None and values[(segment, "dcg")] is None
            continue
        want_ndcg = skm.ndcg_score(truth, score, k=k, sample_weight=weight,
                                   ignore_ties=ignore_ties) if len(truth) > 1 else \
            float(np.average(skm._ranking._ndcg_sample_scores(truth, score, k, ignore_ties),
                             weights=weight))
        want_dcg = skm.dcg_score(truth, score, k=k, log_base=log_base, sample_weight=weight,
                                 ignore_ties=ignore_ties)
        assert values[(segment, "ndcg")] == pytest.approx(want_ndcg, rel=1e-12, abs=1e-15)
        assert values[(segment, "dcg")] == pytest.approx(want_dcg, rel=1e-12, abs=1e-15)


def test_negative_relevance_is_refused(engine: str) -> None:
    rows, _ = _graded(8)
    bad = rows.with_columns(truth=pl.when((pl.col("sample") == 3) & (pl.col("label") == "l2"))
                            .then(-2.0).otherwise("truth"))
    with pytest.raises(me.InputError, match=r"ndcg reads column 'truth' as graded relevance, "
                                            r"which must be >= 0, but it has -2.*sample 3, "
                                            r"label 'l2'"):
        me.evaluate(bad, ["ndcg"], by="part", engine=engine)


def test_graded_truth_only_for_graded_metrics(engine: str) -> None:
    rows, _ = _graded(9)
    with pytest.raises(me.InputError, match=r"outside \{0, 1\}"):
        me.evaluate(rows, ["ndcg", "coverage_error"], by="part", engine=engine)


def test_statement_reads_graded_relevance() -> None:
    import duckdb

    rows, mats = _graded(10)
    con = duckdb.connect()
    con.register("predictions", rows)
    statement = me.sql(["ndcg", "dcg"], task="multilabel", by=["part"], k=3,
                       columns={"weight": "weight"})
    got = con.sql(statement).pl()
    truth, score, weight = mats["many"]
    value = got.filter(part="many", metric="ndcg")["value"].item()
    assert value == pytest.approx(skm.ndcg_score(truth, score, k=3, sample_weight=weight),
                                  rel=1e-12)


# -- curves ----------------------------------------------------------------------------------

DOC_Y, DOC_S = [0, 0, 1, 1], [0.1, 0.4, 0.35, 0.8]


def test_det_docstring_example(engine: str) -> None:
    rows = pl.DataFrame({"sample": range(4), "score": DOC_S, "truth": DOC_Y})
    det = me.curve(rows, "det", engine=engine)
    assert det["fpr"].to_list() == [0.5, 0.5, 0.0]
    assert det["fnr"].to_list() == [0.0, 0.5, 0.5]
    assert det["threshold"].to_list() == [0.35, 0.4, 0.8]


def test_thresholds_docstring_examples(engine: str) -> None:
    rows = pl.DataFrame({"sample": range(4), "score": DOC_S, "truth": DOC_Y})
    table = me.curve(rows, "thresholds", metrics=["accuracy"], engine=engine)
    assert table["tn"].to_list() == [2, 1, 1, 0]
    assert table["fp"].to_list() == [0, 1, 1, 2]
    assert table["fn"].to_list() == [1, 1, 0, 0]
    assert table["tp"].to_list() == [1, 1, 2, 2]
    assert table["threshold"].to_list() == [0.8, 0.4, 0.35, 0.1]
    assert table["accuracy"].to_list() == [0.75, 0.5, 0.75, 0.5]


def _binary(seed: int) -> pl.DataFrame:
    """Segments: random tied scores with weights (some 0), one row, one class only."""
    rng = np.random.default_rng(seed)
    parts = []
    for segment, n in (("a", 200), ("b", 150), ("one", 1), ("negatives", 20)):
        truth = rng.random(n) < 0.4
        if segment == "negatives":
            truth[:] = False
        weight = rng.random(n).round(1)  # zero weights too
        parts.append(pl.DataFrame({"part": segment, "sample": [f"{segment}{i}" for i in range(n)],
                                   "score": rng.integers(0, 30, n) / 30, "truth": truth,
                                   "weight": weight}))
    return pl.concat(parts)


@pytest.mark.parametrize("drop", [False, True])
def test_det_equals_scikit_learn(engine: str, drop: bool) -> None:
    rows = _binary(3)
    det = me.curve(rows, "det", by="part", drop_intermediate=drop, engine=engine)
    for segment in ("a", "b"):
        part = rows.filter(part=segment)
        fpr, fnr, thresholds = skm.det_curve(part["truth"], part["score"],
                                             sample_weight=part["weight"],
                                             drop_intermediate=drop)
        got = det.filter(part=segment)
        assert got["threshold"].to_list() == thresholds.tolist()
        np.testing.assert_allclose(got["fpr"].to_numpy(), fpr, rtol=1e-12, atol=1e-15)
        np.testing.assert_allclose(got["fnr"].to_numpy(), fnr, rtol=1e-12, atol=1e-15)
    # one class only (scikit-learn refuses the curve): the origin, its undefined rate null
    assert det.filter(part="negatives")["fnr"].to_list() == [None]


def test_thresholds_equal_scikit_learn(engine: str) -> None:
    rows = _binary(4)
    table = me.curve(rows, "thresholds", metrics=["f1", "precision", "mcc"], by="part",
                     zero_division=0, engine=engine)
    for segment in ("a", "b", "one", "negatives"):
        part = rows.filter(part=segment)
        y, s, w = part["truth"].to_numpy(), part["score"].to_numpy(), part["weight"].to_numpy()
        got = table.filter(part=segment)
        if len(np.unique(y)) == 2:
            tns, fps, fns, tps, thresholds = skm.confusion_matrix_at_thresholds(
                y, s, sample_weight=w)
            assert got["threshold"].to_list() == thresholds.tolist()
            for name, want in (("tn", tns), ("fp", fps), ("fn", fns), ("tp", tps)):
                np.testing.assert_allclose(got[name].to_numpy(), want, rtol=1e-12, atol=1e-12)
        for name, fn, params in (("f1", skm.f1_score, {"zero_division": 0}),
                                 ("precision", skm.precision_score, {"zero_division": 0}),
                                 ("mcc", skm.matthews_corrcoef, {})):
            if w.sum() == 0:
                continue
            values, thresholds = skm.metric_at_thresholds(y, s, fn, sample_weight=w,
                                                          metric_params=params)
            assert got["threshold"].to_list() == thresholds.tolist()
            np.testing.assert_allclose(got[name].to_numpy(), values, rtol=1e-12, atol=1e-12)


def test_curve_options_are_checked() -> None:
    rows = pl.DataFrame({"sample": range(4), "score": DOC_S, "truth": DOC_Y})
    with pytest.raises(me.InputError, match="metrics= names the decision metrics"):
        me.curve(rows, "roc", metrics=["f1"])
    with pytest.raises(me.InputError, match="not 'roc_auc'"):
        me.curve(rows, "thresholds", metrics=["roc_auc"])


def test_thresholds_of_each_label_are_its_own_scores(engine: str) -> None:
    """Multilabel: each label's points are scikit-learn's on that label's rows alone."""
    rows = pl.read_parquet("fixtures/lake/**/*.parquet", hive_partitioning=True).filter(
        model="a")
    table = me.curve(rows, "thresholds", metrics=["f1"], task="multilabel",
                     zero_division=0, engine=engine)
    assert table["label"].n_unique() == rows["label"].n_unique() > 1
    for (label,), part in rows.group_by("label"):
        got = table.filter(label=label)
        y, s, w = part["truth"].to_numpy(), part["score"].to_numpy(), part["weight"].to_numpy()
        counts = skm.confusion_matrix_at_thresholds(y, s, sample_weight=w)
        assert got["threshold"].to_list() == counts[-1].tolist()
        for name, want in zip(("tn", "fp", "fn", "tp"), counts[:4], strict=True):
            np.testing.assert_allclose(got[name].to_numpy(), want, rtol=1e-12, atol=1e-12)


def test_a_det_statement_equals_the_curve_and_thresholds_has_none() -> None:
    """The DET curve pasted into DuckDB gives me.curve's rows, in its (ascending) order; the
    thresholds curve has no statement and says so."""
    import duckdb
    from polars.testing import assert_frame_equal

    from tests.data import make_predictions

    frame = make_predictions("multilabel", 3, n_samples=40, complete=True)
    con = duckdb.connect()
    con.register("t", frame)
    options = {"task": "multilabel", "columns": {"weight": "weight"}}
    got = con.sql(me.sql(curve="det", table="t", **options)).pl()
    want = me.curve(frame, "det", **options)
    assert want.height > 0
    assert_frame_equal(got, want, check_dtypes=False, rel_tol=1e-12)
    with pytest.raises(me.InputError, match="curve thresholds: no statement"):
        me.sql(["f1"], curve="thresholds", table="t", task="multilabel")
