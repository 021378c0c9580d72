"""Where a default gives another number than scikit-learn's default, a note says so once per
process, as scikit-learn's UndefinedMetricWarning does: a mean over samples, or a macro or
weighted mean over labels, leaves out the values that are 0/0, which scikit-learn's
``zero_division="warn"`` counts as 0."""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl
import pytest
from sklearn.metrics import f1_score, precision_score

import mleval_sql as me
from mleval_sql import errors
from mleval_sql.cli import main

# three samples, two labels: s1 right, s2 with no true and no predicted label (its F1 is 0/0),
# s3 with one of its two labels predicted (F1 2/3)
TRUTH = np.array([[1, 0], [0, 0], [1, 1]])
DECIDED = np.array([[1, 0], [0, 0], [1, 0]])
ROWS = pl.DataFrame({
    "sample": [s for s in ("s1", "s2", "s3") for _ in range(2)],
    "label": ["a", "b"] * 3,
    "score": [0.9 if d else 0.1 for d in DECIDED.ravel()],
    "truth": TRUTH.ravel().astype(bool),
})


@pytest.fixture(autouse=True)
def fresh_notes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(errors, "_NOTED", set())


def _f1(**options: object) -> tuple[float, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        value = me.evaluate(ROWS, "f1", average="samples", task="multilabel",
                            **options)["value"].item()
    return value, [str(w.message) for w in caught if w.category is me.SklearnDefaultWarning]


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_a_skipped_sample_is_noted_once(engine: str):
    value, notes = _f1(engine=engine)
    assert value == pytest.approx((1 + 2 / 3) / 2)  # s2 left out
    assert notes == ["f1 with average='samples': 1 sample with no true and no predicted label "
                     "(0/0) left out of the mean, where scikit-learn's default "
                     "(zero_division='warn') counts them as 0; zero_division=0 gives "
                     "scikit-learn's number"]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        sklearn_default = f1_score(TRUTH, DECIDED, average="samples")
    assert sklearn_default == pytest.approx((1 + 0 + 2 / 3) / 3) != value
    again, notes = _f1(engine=engine)
    assert again == value and notes == []  # once per process


def test_no_note_where_the_numbers_agree():
    value, notes = _f1(zero_division=0)
    assert value == pytest.approx(f1_score(TRUTH, DECIDED, average="samples", zero_division=0))
    assert notes == []
    defined = ROWS.filter(pl.col("sample") != "s2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        me.evaluate(defined, "f1", average="samples", task="multilabel")
    assert not [w for w in caught if w.category is me.SklearnDefaultWarning]


def test_the_command_line_prints_the_note(tmp_path, capsys):
    path = tmp_path / "rows.parquet"
    ROWS.write_parquet(path)
    assert main(["evaluate", str(path), "--metric", "f1", "--average", "samples",
                 "--task", "multilabel"]) == 0
    err = capsys.readouterr().err
    assert err.startswith("mleval: note: f1 with average='samples': 1 sample with no true")


# multiclass, three labels over two segments: c is never predicted in segment x (its precision
# is 0/0 there), every label is predicted in segment y
CLASSES = {"x": (["a", "b", "c", "a", "b", "c"], ["a", "b", "a", "a", "a", "b"]),
           "y": (["a", "b", "c"], ["a", "c", "b"])}
CLASS_ROWS = pl.DataFrame([
    {"seg": seg, "sample": f"{seg}{i}", "label": label, "score": float(label == p),
     "truth": label == t}
    for seg, (truth, decided) in CLASSES.items()
    for i, (t, p) in enumerate(zip(truth, decided, strict=True)) for label in "abc"])


@pytest.mark.parametrize("engine", ["duckdb", "polars"])
def test_a_skipped_label_is_noted_once(engine: str):
    def precision(**options: object) -> tuple[pl.DataFrame, list[str]]:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            rows = me.evaluate(CLASS_ROWS, "precision", average=["macro", "weighted"], by="seg",
                               task="multiclass", engine=engine, **options)
        return rows, [str(w.message) for w in caught if w.category is me.SklearnDefaultWarning]

    rows, notes = precision()
    assert rows.height == 4  # the per-label rows the note reads are not in the result
    x = rows.filter(seg="x", average="macro")["value"].item()
    assert x == pytest.approx((2 / 4 + 1 / 2) / 2)  # a: 2 of 4, b: 1 of 2, c left out
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert precision_score(*CLASSES["x"], average="macro") == pytest.approx(
            (2 / 4 + 1 / 2 + 0) / 3)
    assert notes == [
        f"precision with average={average!r}: 1 label of a segment never predicted there (0/0) "
        "left out of the mean, where scikit-learn's default (zero_division='warn') counts "
        "them as 0; zero_division=0 gives scikit-learn's number"
        for average in ("macro", "weighted")]
    assert precision()[1] == []  # once per process
    errors._NOTED.clear()
    zero, notes = precision(zero_division=0)
    assert notes == []
    for seg, (truth, decided) in CLASSES.items():
        for average in ("macro", "weighted"):
            assert zero.filter(seg=seg, average=average)["value"].item() == pytest.approx(
                precision_score(truth, decided, average=average, zero_division=0))
