"""The one error of bad input, importable from anywhere in the package (``me.InputError``)."""


class InputError(ValueError):
    """Bad input: the message names the column, value or row count at fault."""
