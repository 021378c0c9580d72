"""mleval_sql: exact, out-of-core evaluation of ML predictions that live in tables.

>>> import mleval_sql as me
>>> sorted(me.METRICS)[:3]
['accuracy', 'adjusted_accuracy', 'adjusted_mutual_info']
"""

from mleval_sql import plot
from mleval_sql.api import check, curve, evaluate
from mleval_sql.registry import METRICS
from mleval_sql.reporting import report
from mleval_sql.schema import Columns, InputError
from mleval_sql.statement import sql

__all__ = ["METRICS", "Columns", "InputError", "check", "curve", "evaluate", "plot", "report",
           "sql"]
__version__ = "0.1.0"
