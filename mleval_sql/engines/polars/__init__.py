"""Every step of ``mleval_sql.registry.STEPS`` as a polars lazy plan: pure expressions, no UDFs.

Each function takes the relations the step reads (LazyFrames with a ``segment`` key column) and
the step's parameters, and returns a LazyFrame; nothing is collected until the engine collects
all requested results together. One module per family; each lists its steps in ``__all__``.
"""

from mleval_sql.engines.polars.clustering import *  # noqa: F403
from mleval_sql.engines.polars.decisions import decision_metrics, threshold_counts
from mleval_sql.engines.polars.label_ranking import *  # noqa: F403
from mleval_sql.engines.polars.multiclass import (
    argmax_matrix,
    matrix_counts,
    multiclass_metrics,
    top_k_metrics,
    true_ranks,
)
from mleval_sql.engines.polars.probability import *  # noqa: F403
from mleval_sql.engines.polars.ranking import *  # noqa: F403
from mleval_sql.engines.polars.regression import *  # noqa: F403
from mleval_sql.engines.polars.samples import sample_counts, sample_metrics
from mleval_sql.engines.polars.sweeps import *  # noqa: F403
from mleval_sql.engines.polars.validate import validate_summary

__all__ = [
    "argmax_matrix", "decision_metrics", "matrix_counts", "multiclass_metrics", "sample_counts",
    "sample_metrics", "threshold_counts", "top_k_metrics", "true_ranks", "validate_summary",
]
