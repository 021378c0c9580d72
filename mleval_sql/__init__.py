"""mleval_sql: exact, out-of-core evaluation of ML predictions that live in tables.

>>> import mleval_sql as me
>>> sorted(me.METRICS)[:3]
['accuracy', 'adjusted_accuracy', 'adjusted_mutual_info']
"""

from typing import Any

from mleval_sql import plot
from mleval_sql.api import check, curve, evaluate
from mleval_sql.comparison import compare
from mleval_sql.drift import drift
from mleval_sql.errors import SklearnDefaultWarning
from mleval_sql.fairness import fairness
from mleval_sql.history import read as history
from mleval_sql.registry import METRICS
from mleval_sql.schema import Columns, InputError
from mleval_sql.slicing import slices

__all__ = ["METRICS", "Columns", "InputError", "SklearnDefaultWarning", "check", "compare",
           "curve", "define", "defined", "defining", "drift", "evaluate", "fairness", "history",
           "plot", "report", "slices", "sql", "undefine"]
__version__ = "0.1.0"
# drift, fairness and history are functions named as their modules: imported above, not on
# first use (importing a module later puts it in its function's place)


def __getattr__(name: str) -> Any:
    """``sql``, ``report`` and declaring metrics (``define``...) on first use: rendering or
    parsing SQL imports sqlglot and a report its templates, which an evaluation needs neither
    of."""
    if name == "sql":
        from mleval_sql.statement import sql

        return sql
    if name == "report":
        from mleval_sql.reporting import report

        return report
    if name in ("define", "undefine", "defining", "defined"):
        from mleval_sql import declared

        return getattr(declared, name)
    raise AttributeError(f"module 'mleval_sql' has no attribute {name!r}")
