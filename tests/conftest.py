"""Every test that takes ``engine`` runs once per engine: one test body, both engines.

Hypothesis profiles: ``ci`` (the default) is derandomised, so a failure on CI is the same
failure on any machine, and prints the failing example and its reproduction blob; ``thorough``
(``HYPOTHESIS_PROFILE=thorough``) draws many more random examples and keeps its database.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, Phase, settings

from mleval_sql.engines import local_engines
from mleval_sql.registry import kept

settings.register_profile(
    # no shrinking: an engine call costs up to a second here, and shrinking one failure took
    # over five minutes; the example as drawn is printed, and the thorough profile shrinks
    "ci", max_examples=6, derandomize=True, database=None, print_blob=True, deadline=None,
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.register_profile(
    "thorough", max_examples=150, print_blob=True, deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _registry_kept() -> Iterator[None]:
    """A metric a test declares (me.define, define=, a lake's metrics.toml, a page of the docs)
    is gone after it: tests that walk the registry see the built-in metrics only."""
    with kept():
        yield


@pytest.fixture(params=local_engines())
def engine(request: pytest.FixtureRequest) -> str:
    if request.param == "spark":  # the run's one SparkSession, the one the engine finds active
        request.getfixturevalue("spark")
    return request.param

from tests.servers import (  # noqa: E402, F401  (the servers' fixtures)
    pg_connection,
    postgres,
    spark,
    spark_defaults,
)
