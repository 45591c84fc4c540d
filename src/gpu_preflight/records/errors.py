"""The one error every parser raises for input it cannot read.

Callers (``gpu-preflight parse``/``judge``, the runners, the cluster checks reading a table
that was parsed for them) must be able to tell "this tool output is malformed or
truncated" from a bug in gpu-preflight. So a parser never lets an
``IndexError``/``ValueError``/``KeyError`` escape on bad input: it raises
:class:`ParseError` naming the kind it tried, what was wrong and, where known, the line.
It lives with the records because it is an outcome of reading a tool's output that the
pure rules receive and judge, as they receive a record.
"""

from __future__ import annotations

__all__ = ["ParseError"]


class ParseError(ValueError):
    """Input that is not a readable instance of ``kind``.

    ``line`` is 1-based in the text the parser was given, or ``None`` when the problem is
    not tied to one line (empty input, no table at all).
    """

    def __init__(self, kind: str, message: str, line: int | None = None) -> None:
        self.kind, self.message, self.line = kind, message, line
        where = f" (line {line})" if line is not None else ""
        super().__init__(f"{kind}: {message}{where}")
