"""Every step of ``mleval_sql.registry.STEPS`` as a polars lazy plan: pure expressions, no UDFs.

Each function takes the relations the step reads (LazyFrames with a ``segment`` key column) and
the step's parameters, and returns a LazyFrame; nothing is collected until the engine collects
all requested results together. The steps live in modules by what they compute (a module may
hold several families' steps: ranking.py also has the one-vs-one AUC, sweeps.py the operating
points); each module lists its steps in ``__all__``, and this package exports them all.
"""

from mleval_sql.engines.polars import (
    averages,
    bootstrap,
    clustering,
    decisions,
    drift,
    estimation,
    label_ranking,
    multiclass,
    probability,
    ranking,
    regression,
    samples,
    sweeps,
    validate,
)
from mleval_sql.engines.polars.averages import *  # noqa: F403
from mleval_sql.engines.polars.bootstrap import *  # noqa: F403
from mleval_sql.engines.polars.clustering import *  # noqa: F403
from mleval_sql.engines.polars.decisions import *  # noqa: F403
from mleval_sql.engines.polars.drift import *  # noqa: F403
from mleval_sql.engines.polars.estimation import *  # noqa: F403
from mleval_sql.engines.polars.label_ranking import *  # noqa: F403
from mleval_sql.engines.polars.multiclass import *  # noqa: F403
from mleval_sql.engines.polars.probability import *  # noqa: F403
from mleval_sql.engines.polars.ranking import *  # noqa: F403
from mleval_sql.engines.polars.regression import *  # noqa: F403
from mleval_sql.engines.polars.samples import *  # noqa: F403
from mleval_sql.engines.polars.sweeps import *  # noqa: F403
from mleval_sql.engines.polars.validate import *  # noqa: F403

__all__ = sorted({name for module in (averages, bootstrap, clustering, decisions, drift,
                                      estimation, label_ranking, multiclass, probability, ranking,
                                      regression, samples, sweeps, validate)
                  for name in module.__all__})
