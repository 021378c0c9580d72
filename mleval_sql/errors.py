"""The one error of bad input, importable from anywhere in the package (``me.InputError``), and
the note given where a default computes another number than scikit-learn's default."""

from __future__ import annotations

import sys
import warnings


class InputError(ValueError):
    """Bad input: the message names the column, value or row count at fault."""


class SklearnDefaultWarning(UserWarning):
    """A value this project's default computes otherwise than scikit-learn's default, in a
    case that occurred in the data (as scikit-learn's ``UndefinedMetricWarning`` says where
    it sets an undefined value). Given once per process and case; ``warnings.filterwarnings(
    "ignore", category=me.SklearnDefaultWarning)`` silences it."""


#: The cases noted so far in this process.
_NOTED: set[str] = set()


def note_sklearn_default(case: str, message: str) -> None:
    """Warn ``message`` with :class:`SklearnDefaultWarning`, the first time ``case`` occurs."""
    if case not in _NOTED:
        _NOTED.add(case)
        warnings.warn(message, SklearnDefaultWarning, stacklevel=3)


def spark_errors() -> tuple[type[BaseException], ...]:
    """What Spark raises when it cannot run a plan (its analysis and runtime errors, the
    JVM's through Py4J), where pyspark is imported; none otherwise."""
    found = []
    errors, protocol = sys.modules.get("pyspark.errors"), sys.modules.get("py4j.protocol")
    if errors is not None:
        found.append(errors.PySparkException)
    if protocol is not None:
        found.append(protocol.Py4JError)
    return tuple(found)


def spark_cause(error: BaseException) -> str:
    """A Spark error in one line: the JVM exception's own (e.g. ``java.lang.OutOfMemoryError:
    Java heap space``) or Spark's message, without the stack trace or the SQL it quotes."""
    java = getattr(error, "java_exception", None)
    text = str(java.toString()) if java is not None else str(error)
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[0] if lines else type(error).__name__
