"""A griffe extension for the API reference: the package's docstrings are written for
``help()`` and doctest (reStructuredText-flavoured text), and this renders them as Markdown
without changing them: doctest examples become Python console blocks, ``Usage::`` blocks code
blocks, and roles such as ``:func:`evaluate``` code spans."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:func|class|data|mod|meth|attr|obj|exc):`~?([^`]+)`")


def markdown(text: str) -> str:
    """``text`` with doctest blocks and literal blocks fenced and roles as code spans."""
    text = _ROLE.sub(lambda m: f"``{m.group(1)}``", text)
    out: list[str] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.lstrip()
        if stripped.startswith(">>>"):
            indent = line[: len(line) - len(stripped)]
            block = []
            while i < len(lines) and lines[i].strip():
                block.append(lines[i].removeprefix(indent))
                i += 1
            out += [f"{indent}```pycon", *(indent + b for b in block), f"{indent}```"]
            continue
        if line.rstrip().endswith("::") and not stripped.startswith(".."):
            out.append(line.rstrip()[:-1])  # "Usage::" -> "Usage:"
            i += 1
            while i < len(lines) and not lines[i].strip():
                i += 1
            block = []
            indent = None
            while i < len(lines) and (not lines[i].strip() or
                                      (indent is not None and lines[i].startswith(indent))
                                      or indent is None):
                if indent is None:
                    indent = lines[i][: len(lines[i]) - len(lines[i].lstrip())]
                    if not indent:
                        break
                block.append(lines[i].removeprefix(indent))
                i += 1
            while block and not block[-1].strip():
                block.pop()
            out += ["", "```text", *block, "```", ""]
            continue
        out.append(line)
        i += 1
    return "\n".join(out)


class Docstrings(griffe.Extension):
    """Every docstring of the package rendered as Markdown when it is loaded."""

    def on_instance(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = markdown(obj.docstring.value)
