"""Imports every family's oracle module, each adding its metrics to ``tests.oracle.ORACLES``."""

from tests import (  # noqa: F401
    oracle_classification,
    oracle_estimation,
    oracle_label_ranking,
    oracle_operating,
    oracle_probability,
    oracle_ranking,
    oracle_regression,
)

__all__: list[str] = []
