"""Every test that takes ``engine`` runs once per engine: one test body, both engines."""

from __future__ import annotations

import pytest

from mleval_sql.engines import ENGINES


@pytest.fixture(params=ENGINES)
def engine(request: pytest.FixtureRequest) -> str:
    return request.param
