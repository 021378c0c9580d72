"""The worked examples of ``fixtures/seeds/`` checked on both engines.

Fixtures and expected values live in ``fixtures/seeds/`` (see ``fixtures/README.md``): each case
of ``expected.json`` names a CSV in long format, the arguments of ``mleval_sql.evaluate`` and the
complete list of rows it must give. Values agree to 1e-9 relative; an undefined value must be null
(``None``), never NaN or 0. Case 004's ROC points are checked threshold by threshold as
tpr = recall and fpr = 1 - specificity.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import polars as pl
import pytest

import mleval_sql as me
from mleval_sql.engines import local_engines

SEEDS = Path(__file__).resolve().parent.parent / "fixtures" / "seeds"
EXPECTED = json.loads((SEEDS / "expected.json").read_text(encoding="utf-8"))
NOT_KEYS = ("value", "how")  # every other field of an expected row identifies its result row


def _load(fixture: str) -> pl.DataFrame:
    return pl.read_csv(SEEDS / fixture)


def _case_params() -> list[Any]:
    params = []
    for case in EXPECTED["cases"]:
        for engine in local_engines():
            marks = [pytest.mark.skip(reason=case["later"])] if "later" in case else []
            params.append(pytest.param(case, engine, id=f"{case['id']}-{engine}", marks=marks))
    return params


def _value(result: pl.DataFrame, keys: dict[str, Any]) -> float | None:
    """The value of the one result row whose columns equal ``keys`` (None matches null)."""
    mask = pl.lit(True)
    for column, wanted in keys.items():
        assert column in result.columns, f"no column {column!r} in {result.columns}"
        mask = mask & pl.col(column).eq_missing(pl.lit(wanted))
    rows = result.filter(mask)
    assert rows.height == 1, f"{rows.height} result rows match {keys}:\n{result}"
    return rows["value"].item()


def _check(got: float | None, want: float | None, what: object) -> None:
    if want is None:
        assert got is None, f"{what}: expected null, got {got!r}"
    else:
        assert got is not None and not math.isnan(got), f"{what}: expected {want}, got {got!r}"
        assert got == pytest.approx(want, rel=1e-9), f"{what}: expected {want}, got {got!r}"


@pytest.mark.parametrize(("case", "engine"), _case_params())
def test_seed_example(case: dict[str, Any], engine: str) -> None:
    """Each expected row comes out once with its value, and nothing else comes out."""
    result = me.evaluate(_load(case["fixture"]), engine=engine, **case["evaluate"])
    for row in case["expected"]:
        keys = {k: v for k, v in row.items() if k not in NOT_KEYS}
        _check(_value(result, keys), row["value"], keys)
    assert result.height == len(case["expected"]), f"unexpected rows:\n{result}"


ROC = EXPECTED["roc_points"]


@pytest.mark.parametrize("engine", local_engines())
@pytest.mark.parametrize("threshold", ROC["thresholds"])
def test_seed_004_roc_points(threshold: float, engine: str) -> None:
    """At each of the seed's thresholds: tpr = recall and fpr = 1 - specificity, per model."""
    result = me.evaluate(_load(ROC["fixture"]), metrics=["recall", "specificity"], by=["model"],
                         task="binary", threshold=threshold, engine=engine)
    points = [p for p in ROC["points"] if p["threshold"] == threshold]
    assert {p["model"] for p in points} == {"res_1", "res_2"}
    for point in points:
        keys = {"model": point["model"], "average": None, "label": "positive"}
        recall = _value(result, {**keys, "metric": "recall"})
        specificity = _value(result, {**keys, "metric": "specificity"})
        _check(recall, point["tpr"], ("tpr", point))
        assert specificity is not None, point
        _check(1 - specificity, point["fpr"], ("fpr", point))
    assert result.height == 2 * len(points), f"unexpected rows:\n{result}"
