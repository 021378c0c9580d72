"""Metrics you declare (mleval_sql/declared.py): a declared F1 is the built-in one on every
engine, the docs' examples equal numpy over scikit-learn's confusion matrix, and every
expression that reaches outside the statistics is refused, naming the metric and the culprit."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date

import numpy as np
import polars as pl
import pytest
import sqlglot
from sklearn.metrics import confusion_matrix, multilabel_confusion_matrix

import mleval_sql as me
from mleval_sql import queries
from mleval_sql.registry import LOWER_IS_BETTER, METRICS
from tests.data import make_predictions

AVERAGES = ["none", "micro", "macro", "weighted", "macro_std"]
F1 = "2 * tp / (2 * tp + fp + fn)"
NET_BENEFIT = "tp / n - fp / n * threshold / (1 - threshold)"
COST = "(5 * fn + fp) / n * 1000"


@pytest.fixture
def declared() -> Iterator[None]:
    """The docs' metrics, declared for one test."""
    me.define("my_f1", F1, doc="F1, declared")
    me.define("net_benefit", NET_BENEFIT, higher_is_better=True)
    me.define("cost", COST, tasks=["binary", "multilabel"], higher_is_better=False)
    try:
        yield
    finally:
        for name in ("my_f1", "net_benefit", "cost"):
            if name in me.defined():
                me.undefine(name)


def _pairs(rows: pl.DataFrame, keys: list[str], ours: str, theirs: str) -> pl.DataFrame:
    wide = rows.pivot(on="metric", index=keys, values="value")
    assert wide.height > 0
    return wide.select(*keys, ours, theirs)


@pytest.mark.usefixtures("declared")
@pytest.mark.parametrize("task", ["binary", "multilabel", "multiclass"])
def test_a_declared_f1_is_the_builtin_f1(engine, task):
    """Per label, micro, macro, weighted and their spread, with weights (zeros among them), in
    every segment: one with one class, one with one sample, one that lacks a label. Multiclass:
    each class one-vs-rest from the argmax, micro over the classes' summed counts."""
    frame = make_predictions(task, seed=11)
    rows = me.evaluate(frame, ["my_f1", "f1"], by="region", average=AVERAGES, task=task,
                       engine=engine)
    pairs = _pairs(rows, ["region", "average", "label"], "my_f1", "f1")
    assert set(pairs["region"]) == {"north", "south", "one_class", "single"}
    if task != "multiclass":  # the one-class segment: no tp, so 0, or null (0/0)
        assert set(pairs.filter(pl.col("region") == "one_class")["f1"]) <= {0.0, None}
    assert pairs["my_f1"].is_null().to_list() == pairs["f1"].is_null().to_list()
    np.testing.assert_allclose(pairs["my_f1"].drop_nulls().to_numpy(),
                               pairs["f1"].drop_nulls().to_numpy(), rtol=1e-12, atol=1e-12)


def _weighted_counts(truth: np.ndarray, score: np.ndarray, weight: np.ndarray,
                     threshold: float) -> tuple[float, float, float, float]:
    tn, fp, fn, tp = confusion_matrix(truth, score >= threshold, labels=[False, True],
                                      sample_weight=weight).ravel()
    return tp, fp, fn, tn


@pytest.mark.usefixtures("declared")
def test_net_benefit_and_cost_equal_numpy_over_sklearn(engine):
    threshold = 0.3
    frame = make_predictions("binary", seed=12, n_samples=120)
    rows = me.evaluate(frame, ["net_benefit", "cost"], by="region", threshold=threshold,
                       engine=engine)
    assert set(rows["threshold"]) == {threshold}
    for region, group in frame.group_by("region"):
        tp, fp, fn, tn = _weighted_counts(group["truth"].to_numpy(), group["score"].to_numpy(),
                                          group["weight"].to_numpy(), threshold)
        n = tp + fp + fn + tn
        want = {"net_benefit": tp / n - fp / n * threshold / (1 - threshold) if n else None,
                "cost": (5 * fn + fp) / n * 1000 if n else None}
        got = rows.filter(pl.col("region") == region[0])
        for metric, value in want.items():
            (found,) = got.filter(pl.col("metric") == metric)["value"].to_list()
            assert found == pytest.approx(value, rel=1e-12), (region, metric)


@pytest.mark.usefixtures("declared")
def test_micro_is_the_expression_over_the_labels_summed_counts(engine):
    threshold = 0.6
    frame = make_predictions("multilabel", seed=13, n_samples=80, complete=True)
    rows = me.evaluate(frame, ["cost", "net_benefit"], average=["micro", "macro"],
                       threshold=threshold, engine=engine)
    wide = frame.pivot(on="label", index="sample", values=["score", "truth", "weight"])
    labels = sorted(frame["label"].unique())
    truth = wide.select(f"truth_{lab}" for lab in labels).to_numpy().astype(bool)
    score = wide.select(f"score_{lab}" for lab in labels).to_numpy()
    weight = wide[f"weight_{labels[0]}"].to_numpy()  # a sample's weight, on each of its rows
    matrices = multilabel_confusion_matrix(truth, score >= threshold, sample_weight=weight)
    (tn, fp), (fn, tp) = matrices.sum(axis=0)
    n = tp + fp + fn + tn
    per_label = [(m[1, 1], m[0, 1], m[1, 0], m[1, 1] + m[0, 1] + m[1, 0] + m[0, 0])
                 for m in matrices]
    want = {("cost", "micro"): (5 * fn + fp) / n * 1000,
            ("cost", "macro"): np.mean([(5 * f + p) / t * 1000 for _, p, f, t in per_label]),
            ("net_benefit", "micro"): tp / n - fp / n * threshold / (1 - threshold)}
    for (metric, average), value in want.items():
        (found,) = rows.filter(pl.col("metric") == metric, pl.col("average") == average)[
            "value"].to_list()
        assert found == pytest.approx(value, rel=1e-12), (metric, average)


def test_a_zero_denominator_gives_null_and_its_reason(engine):
    frame = pl.DataFrame({"sample": [1, 2, 3, 4], "score": [0.9, 0.8, 0.7, 0.1],
                          "truth": [1, 1, 1, 1], "seg": ["a", "a", "b", "b"]})
    with me.defining("npv", "tn / (tn + fn)"):
        rows = me.evaluate(frame, "npv", by="seg", columns={"label": None}, engine=engine)
        assert rows["value"].to_list() == [None, 0.0]  # segment a: nothing predicted negative
        with_ci = me.evaluate(frame, "npv", by="seg", columns={"label": None}, engine=engine,
                              ci=0.9, resamples=10)
    assert with_ci["reason"][0] == "a zero denominator (tn + fn = 0)"


def test_functions_and_conditions_agree_between_engines():
    """Every function and operator allowed, on both engines; ln and sqrt outside their domain
    and a NaN give null (never NaN, never an engine's error)."""
    expression = ("CASE WHEN support > 0 AND NOT fp = 0 THEN ln(tp + 1) + exp(-fn / n) "
                  "+ sqrt(tn) + pow(2, -beta) + abs(fp - fn) + least(tp, fp) + greatest(fn, 1) "
                  "+ coalesce(NULL, threshold) + nullif(tp, 0) / n ELSE -1 END "
                  "+ IF(tp IS NULL, 1, 0) + tp ^ 2 - sqrt(fp - fn - 100) * 0")
    frame = make_predictions("multilabel", seed=14)
    with me.defining("everything", expression):
        got = [me.evaluate(frame, "everything", by="region", average=AVERAGES, engine=e)
               for e in ("polars", "duckdb")]
    # sqrt of a negative: null, so the sum is null wherever fp - fn < 100 (everywhere here)
    assert got[0]["value"].null_count() == got[0].height
    with me.defining("everything", expression.replace(" - sqrt(fp - fn - 100) * 0", "")):
        got = [me.evaluate(frame, "everything", by="region", average=AVERAGES, engine=e)
               for e in ("polars", "duckdb")]
    assert got[0]["value"].drop_nulls().len() > 0
    assert got[0]["value"].is_nan().sum() == 0
    np.testing.assert_allclose(got[0]["value"].fill_null(np.inf).to_numpy(),
                               got[1]["value"].fill_null(np.inf).to_numpy(), rtol=1e-12)


@pytest.mark.usefixtures("declared")
def test_windows_are_segments_for_a_declared_metric(engine):
    frame = make_predictions("binary", seed=15).with_columns(
        day=pl.when(pl.col("region") == "north").then(date(2026, 1, 1))
        .otherwise(date(2026, 1, 2)))
    rows = me.evaluate(frame, ["my_f1", "f1"], window="day:1d", engine=engine)
    pairs = _pairs(rows, ["window_start", "label"], "my_f1", "f1")
    assert pairs.height == 2
    np.testing.assert_allclose(pairs["my_f1"].to_numpy(), pairs["f1"].to_numpy(), rtol=1e-12)


@pytest.mark.usefixtures("declared")
def test_the_registry_holds_a_declared_metric_while_it_is_declared():
    assert METRICS["cost"].undefined == "a zero denominator (n = 0)"
    assert "cost" in LOWER_IS_BETTER and "net_benefit" not in LOWER_IS_BETTER
    assert METRICS["my_f1"].summary == "F1, declared"
    assert list(me.defined()) == ["my_f1", "net_benefit", "cost"]
    me.define("cost", "fp / n")  # declared again: replaced
    assert METRICS["cost"].undefined == "a zero denominator (n = 0)"
    assert "cost" not in LOWER_IS_BETTER
    me.undefine("cost")
    assert "cost" not in METRICS and "cost" not in LOWER_IS_BETTER
    with pytest.raises(me.InputError, match="no declared metric 'cost'"):
        me.undefine("cost")
    with pytest.raises(me.InputError, match=r"unknown metric 'cost'"):
        me.evaluate(make_predictions("binary", seed=1), "cost")


@pytest.mark.usefixtures("declared")
def test_the_sql_is_rendered_from_the_tree_not_the_text():
    with me.defining("shouty", "TP/ ( N )"):
        sql = queries.load("declared_metrics")
    assert "TP/" not in sql and "CAST(tp AS DOUBLE) / NULLIF(" in sql
    assert sqlglot.parse_one(sql, read="duckdb") is not None
    assert sql.splitlines()[0].startswith("-- declared_metrics:")
    assert "shouty" not in queries.load("declared_metrics")


@pytest.mark.usefixtures("declared")
@pytest.mark.parametrize("task", ["binary", "multilabel"])
@pytest.mark.parametrize("sweep", [{"thresholds": [0.2, 0.5, 0.7]}, {"bins": 4}])
def test_a_declared_f1_over_a_sweep_is_the_builtin_f1(engine, task, sweep):
    """One pass over the sweep's counts for both: every threshold, label and average."""
    frame = make_predictions(task, seed=16)
    rows = me.evaluate(frame, ["my_f1", "f1"], by="region", average=["none", "micro", "macro"],
                       engine=engine, **sweep)
    pairs = _pairs(rows, ["region", "average", "label", "threshold"], "my_f1", "f1")
    want = sweep.get("thresholds") or [i / sweep["bins"] for i in range(sweep["bins"] + 1)]
    assert sorted(set(pairs["threshold"])) == want
    assert pairs["my_f1"].is_null().to_list() == pairs["f1"].is_null().to_list()
    np.testing.assert_allclose(pairs["my_f1"].drop_nulls().to_numpy(),
                               pairs["f1"].drop_nulls().to_numpy(), rtol=1e-12, atol=1e-12)


@pytest.mark.usefixtures("declared")
def test_net_benefit_over_a_sweep_reads_each_rows_threshold(engine):
    """``threshold`` in the expression is the sweep's, row by row (numpy over scikit-learn's
    confusion matrix at each one); the threshold= of the request plays no part."""
    thresholds = [0.1, 0.3, 0.5, 0.8]
    frame = make_predictions("binary", seed=17, n_samples=150)
    rows = me.evaluate(frame, ["net_benefit", "cost"], by="region", thresholds=thresholds,
                       threshold=0.9, engine=engine)
    for (region,), group in frame.group_by("region"):
        for threshold in thresholds:
            tp, fp, fn, tn = _weighted_counts(group["truth"].to_numpy(),
                                              group["score"].to_numpy(),
                                              group["weight"].to_numpy(), threshold)
            n = tp + fp + fn + tn
            want = {"net_benefit": tp / n - fp / n * threshold / (1 - threshold) if n else None,
                    "cost": (5 * fn + fp) / n * 1000 if n else None}
            got = rows.filter(pl.col("region") == region, pl.col("threshold") == threshold)
            for metric, value in want.items():
                (found,) = got.filter(pl.col("metric") == metric)["value"].to_list()
                assert found == pytest.approx(value, rel=1e-12), (region, threshold, metric)


@pytest.mark.usefixtures("declared")
def test_a_statement_sweeps_a_declared_metric():
    """me.sql over a sweep: each row's threshold is its segment's key, as evaluate's rows."""
    import duckdb

    frame = make_predictions("binary", seed=18, n_samples=60).drop("weight")
    options = {"task": "binary", "by": "region", "thresholds": [0.25, 0.5, 0.75],
               "columns": {"label": None}}
    statement = me.sql(["net_benefit", "my_f1"], table="preds", no_weight=True, **options)
    con = duckdb.connect()
    con.register("preds", frame)
    got = con.sql(statement).pl()
    want = me.evaluate(frame, ["net_benefit", "my_f1"], **options)
    keys = ["region", "metric", "threshold"]
    joined = want.select(*keys, "value").join(got.select(*keys, "value"), on=keys,
                                              nulls_equal=True)
    assert joined.height == want.height == got.height
    np.testing.assert_allclose(joined["value"].fill_null(np.inf).to_numpy(),
                               joined["value_right"].fill_null(np.inf).to_numpy(), rtol=1e-12)


REGRESSION = {"my_rmse": ("sqrt(squared_error / n)", "rmse"),
              "my_mae": ("absolute_error / n", "mae"),
              "my_mape": ("percentage_error / n", "mape"),
              "my_r2": ("1 - squared_error / squared_deviation", "r2")}


@pytest.fixture
def regression() -> Iterator[None]:
    for name, (expression, _) in REGRESSION.items():
        me.define(name, expression, higher_is_better=name == "my_r2")
    me.define("bias", "error / n")
    me.define("truth_variance", "truth_squared / n - pow(truth / n, 2)")
    try:
        yield
    finally:
        for name in (*REGRESSION, "bias", "truth_variance"):
            me.undefine(name)


@pytest.mark.usefixtures("regression")
def test_declared_regression_metrics_are_the_builtins(engine):
    """Per output and macro, with weights, in every segment (one with a constant truth, where
    R² is null, one with one sample)."""
    frame = make_predictions("regression", seed=19)
    names = [n for pair in REGRESSION.items() for n in (pair[0], pair[1][1])]
    rows = me.evaluate(frame, names, by="region", average=["none", "macro"], engine=engine)
    wide = rows.pivot(on="metric", index=["region", "average", "label"], values="value")
    assert set(wide["region"]) == {"north", "south", "one_class", "single"}
    for ours, (_, theirs) in REGRESSION.items():
        assert wide[ours].is_null().to_list() == wide[theirs].is_null().to_list(), ours
        np.testing.assert_allclose(wide[ours].drop_nulls().to_numpy(),
                                   wide[theirs].drop_nulls().to_numpy(), rtol=1e-9)


@pytest.mark.usefixtures("regression")
def test_regression_sums_and_micro_equal_numpy(engine):
    """``error``, ``truth`` and ``truth_squared`` per output; micro: the expression over the
    outputs' summed sums."""
    frame = make_predictions("regression", seed=20, complete=True)
    rows = me.evaluate(frame, ["bias", "truth_variance", "my_rmse"], average=["none", "micro"],
                       engine=engine)
    def value(metric: str, label: str | None) -> float:
        (found,) = rows.filter(pl.col("metric") == metric, pl.col("label").eq_missing(label))[
            "value"].to_list()
        return found

    w, y, p = (frame[c].to_numpy() for c in ("weight", "truth", "score"))
    for label in frame["label"].unique():
        at = (frame["label"] == label).to_numpy()
        assert value("bias", label) == pytest.approx(np.average(p[at] - y[at], weights=w[at]))
        assert value("truth_variance", label) == pytest.approx(
            np.average(y[at] ** 2, weights=w[at]) - np.average(y[at], weights=w[at]) ** 2)
    assert value("bias", None) == pytest.approx(np.average(p - y, weights=w), rel=1e-12)
    assert value("my_rmse", None) == pytest.approx(
        np.sqrt(np.average((p - y) ** 2, weights=w)), rel=1e-12)


def test_a_statement_computes_a_declared_regression_metric():
    import duckdb

    frame = make_predictions("regression", seed=21, n_samples=30).drop("weight")
    with me.defining("my_rmse", "sqrt(squared_error / n)"):
        statement = me.sql(["my_rmse", "rmse"], task="regression", table="preds",
                           no_weight=True, by="region")
        con = duckdb.connect()
        con.register("preds", frame)
        rows = con.sql(statement).pl()
    wide = rows.pivot(on="metric", index=["region", "label"], values="value")
    assert wide.height > 0
    np.testing.assert_allclose(wide["my_rmse"].to_numpy(), wide["rmse"].to_numpy(), rtol=1e-12)


@pytest.mark.parametrize(("expression", "tasks", "culprit"), [
    ("squared_error / n", ["binary"],
     r"'m': task 'binary' is not served: a regression sum \(squared_error\) in a binary metric"),
    ("tp / n", ["regression"],
     r"'m': task 'regression' is not served: a decision count \(tp\) in a regression metric"),
    ("squared_error / tp", None, r"'m': reads a decision count or parameter \(tp\) and a "
     r"regression sum \(squared_error\)"),
    ("error * threshold", None, r"'m': reads a decision count or parameter \(threshold\)"),
])
def test_a_task_the_expression_cannot_serve_is_refused(expression, tasks, culprit):
    with pytest.raises(me.InputError, match=culprit):
        me.define("m", expression, tasks=tasks)
    assert "m" not in me.defined()


def test_the_default_tasks_are_those_the_names_serve():
    with me.defining("m", "absolute_error / n") as metric:
        assert metric.tasks == ("regression",) and set(METRICS["m"].families) == {"regression"}
    with me.defining("m", "fp / n") as metric:
        assert metric.tasks == ("binary", "multilabel", "multiclass")
    with me.defining("m", "2") as metric:  # no name: the decision counts' tasks, as before
        assert metric.tasks == ("binary", "multilabel", "multiclass")
    with me.defining("m", "tp / n * threshold") as metric:  # multiclass decides by argmax
        assert metric.tasks == ("binary", "multilabel")


def test_a_task_the_counts_do_not_serve_is_refused():
    with pytest.raises(me.InputError, match=r"declared metric 'r': task 'regression' is not"):
        me.define("r", "tp / n", tasks=["regression"])
    with pytest.raises(me.InputError, match=r"declared metric 'r': task 'multiclass' is not "
                       r"served: threshold in a multiclass metric"):
        me.define("r", "tp / n - threshold", tasks=["multiclass"])
    with me.defining("binary_only", "tp / n", tasks=["binary"]), \
            pytest.raises(me.InputError, match="not defined for task 'multilabel'"):
        me.evaluate(make_predictions("multilabel", seed=1), "binary_only", task="multilabel")


@pytest.mark.parametrize(("name", "expression", "culprit"), [
    ("f1", "tp / n", r"declared metric 'f1': the name is taken by a built-in metric"),
    ("value", "tp / n", r"'value': the name is taken by a result column"),
    ("threshold", "tp / n", r"'threshold': the name is taken by a result column"),
    ("Bad Name", "tp / n", r"'Bad Name': a name is lower-case"),
    ("m", "tpp / n", r"'m': unknown name tpp; did you mean 'tp'\?"),
    ("m", "tp / weight", r"'m': unknown name weight"),
    ("m", '"weight"', r"'m': unknown name \"weight\""),
    ("m", "predictions.tp", r"'m': a qualified column predictions.tp is not allowed"),
    ("m", "(SELECT max(score) FROM predictions)", r"'m': a subquery is not allowed"),
    ("m", "tp / (SELECT 1)", r"'m': a subquery is not allowed"),
    ("m", "sum(tp)", r"'m': an aggregate is not allowed: SUM\(tp\)"),
    ("m", "sum(tp) OVER ()", r"'m': a window function is not allowed"),
    ("m", "tp; DROP TABLE predictions", r"'m': ';' is not allowed"),
    ("m", "tp -- hidden", r"'m': comments are not allowed"),
    ("m", "/* hidden */ tp", r"'m': comments are not allowed"),
    ("m", "log(tp)", r"'m': function 'log' is not allowed"),
    ("m", "sqr(tp)", r"'m': unknown function 'sqr'; did you mean 'sqrt'\?"),
    ("m", "read_csv('x')", r"'m': function 'read_csv' is not allowed"),
    ("m", "my_udf(tp)", r"'m': unknown function 'my_udf'"),
    ("m", "CAST(tp AS INT)", r"'m': function 'cast' is not allowed"),
    ("m", "tp % 2", r"'m': mod is not allowed"),
    ("m", "tp IN (1, 2)", r"'m': in is not allowed"),
    ("m", "'text'", r"'m': a text is not allowed"),
    ("m", "$threshold", r"'m': a parameter placeholder is not allowed"),
    ("m", "tp > 0", r"'m': the expression gives a condition, not a number"),
    ("m", "tp + (fp > 0)", r"'m': \(fp > 0\) is a condition, where a number is wanted"),
    ("m", "tp" + " + tp" * 1400, r"'m': the expression has 7002 characters, over 4000"),
    ("m", "(" * 65 + "tp" + ")" * 65, r"'m': the expression is nested deeper than 64"),
    ("m", "abs(" * 65 + "tp" + ")" * 65, r"'m': the expression is nested deeper than 64"),
    ("m", "tp" + " + tp" * 70, r"'m': the expression is nested deeper than 64"),
    ("m", "", r"'m': the expression must be a non-empty text"),
    ("m", "tp +", r"'m': cannot parse the expression"),
])
def test_an_expression_outside_the_statistics_is_refused(name, expression, culprit):
    with pytest.raises(me.InputError, match=culprit) as error:
        me.define(name, expression)
    assert "\n" not in str(error.value)
    assert name not in me.defined() and (name in ("f1",) or name not in METRICS)


@pytest.mark.usefixtures("declared")
def test_a_statement_to_paste_carries_a_declared_metric():
    """me.sql builds from the same steps: a declared metric comes with it (every database:
    test_a_pasted_statement_gives_the_builtin_value)."""
    import duckdb

    statement = me.sql(["my_f1", "f1"], task="binary", table="preds", no_weight=True,
                       columns={"label": None})
    con = duckdb.connect()
    con.register("preds", pl.DataFrame({"sample": [1, 2, 3, 4], "score": [0.9, 0.4, 0.6, 0.2],
                                        "truth": [True, True, False, False]}))
    rows = con.sql(statement).pl()
    assert rows.select("metric", "value").rows() == [("my_f1", 0.5), ("f1", 0.5)]


#: Pasted statements: a declared metric and the built-in it restates, on each database.
PASTED = {
    "decisions": ("multilabel", {"my_f1": F1}, "f1", {"average": ["none", "micro", "macro"]}),
    "multiclass": ("multiclass", {"my_f1": F1}, "f1", {"average": ["none", "micro", "weighted"]}),
    "sweep": ("binary", {"my_f1": F1}, "f1", {"thresholds": [0.25, 0.5, 0.75],
                                               "columns": {"label": None}}),
    "regression": ("regression", {"my_rmse": "sqrt(squared_error / n)"}, "rmse",
                   {"average": ["none", "macro"]}),
}


@pytest.mark.parametrize("kind", ["duckdb", "postgres", "spark"])
@pytest.mark.parametrize("case", list(PASTED))
def test_a_pasted_statement_gives_the_builtin_value(kind, case, request):
    """A declared F1 (at the threshold, one-vs-rest by argmax, over a sweep) and a declared
    RMSE, in the statement ``mleval sql`` prints, pasted into DuckDB, psql and spark.sql:
    the built-in's value on every row, and evaluate's."""
    import duckdb

    from tests.test_portable import load
    from tests.test_statement import psql_rows, spark_rows

    task, declared, builtin, options = PASTED[case]
    (name, expression), = declared.items()
    frame = make_predictions(task, seed=22, n_samples=40)
    if "label" in options.get("columns", {}):
        frame = frame.drop("label")
    options = {"task": task, "by": "region", **options,
               "columns": {"weight": "weight", **options.get("columns", {})}}
    keys = ["region", "average", "label", "threshold"]
    with me.defining(name, expression):
        want = me.evaluate(frame, [name, builtin], **options)
        if kind == "duckdb":
            statement = me.sql([name, builtin], table="preds", **options)
            con = duckdb.connect()
            con.register("preds", frame)
            got = con.sql(statement).pl()
        else:
            con = request.getfixturevalue("pg_connection" if kind == "postgres" else "spark")
            load(kind, con, f"declared_{case}", frame)
            statement = me.sql([name, builtin], table=f"declared_{case}", dialect=kind,
                               connection=con, **options)
            got = (psql_rows(request.getfixturevalue("postgres"), statement)
                   if kind == "postgres" else spark_rows(con, statement))
    keys = [k for k in keys if k in want.columns]
    got = got.with_columns(pl.col("value").cast(pl.Float64), *(
        pl.col(k).cast(want.schema[k]) for k in keys))
    assert got.height == want.height > 0
    pairs = _pairs(got, keys, name, builtin)
    assert pairs[name].is_null().to_list() == pairs[builtin].is_null().to_list()
    assert pairs[name].null_count() < pairs.height
    np.testing.assert_allclose(pairs[name].drop_nulls().to_numpy(),
                               pairs[builtin].drop_nulls().to_numpy(), rtol=1e-9, atol=1e-12)
    joined = want.select(*keys, "metric", "value").join(
        got.select(*keys, "metric", "value"), on=[*keys, "metric"], nulls_equal=True)
    assert joined.height == want.height
    np.testing.assert_allclose(joined["value"].fill_null(np.inf).to_numpy(),
                               joined["value_right"].fill_null(np.inf).to_numpy(), rtol=1e-9)


@pytest.mark.usefixtures("declared")
@pytest.mark.parametrize("task", ["binary", "multilabel", "multiclass"])
@pytest.mark.parametrize("weighted", [True, False])
def test_a_declared_f1s_interval_is_the_builtin_f1s(engine, task, weighted):
    """ci= with the same seed and replicates: the same draws, so the same interval per label
    and average (at the threshold both read the rows ranked once for every replicate; from
    the argmax, multiclass, the declared one reads each replicate's rows)."""
    from mleval_sql.progress import timings

    frame = make_predictions(task, seed=23, n_samples=60, weighted=weighted)
    options = {"task": task, "by": "region", "average": ["none", "micro", "macro"],
               "engine": engine, "ci": 0.9, "resamples": 30, "seed": 3}
    with timings() as seconds:
        ours = me.evaluate(frame, "my_f1", **options).drop("metric")
    ranked = any("bootstrap: ranking" in s for s in seconds)
    assert ranked == (task != "multiclass"), seconds
    theirs = me.evaluate(frame, "f1", **options).drop("metric")
    keys = ["region", "average", "label"]
    joined = ours.join(theirs, on=keys, nulls_equal=True)
    assert joined.height == ours.height == theirs.height > 0
    assert joined["ci_low"].null_count() < joined.height
    for column in ("value", "ci_low", "ci_high"):
        assert joined[column].is_null().to_list() == joined[f"{column}_right"].is_null().to_list()
        np.testing.assert_allclose(joined[column].drop_nulls().to_numpy(),
                                   joined[f"{column}_right"].drop_nulls().to_numpy(),
                                   rtol=1e-12, atol=1e-12)
