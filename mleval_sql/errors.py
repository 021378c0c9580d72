"""The one error of bad input, importable from anywhere in the package (``me.InputError``), and
the note given where a default computes another number than scikit-learn's default."""

from __future__ import annotations

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


class DataWarning(UserWarning):
    """Rows of the input that a result leaves out, and why (a window's rows with a null time):
    said once per request, never dropped silently. The command line prints it as a note."""
