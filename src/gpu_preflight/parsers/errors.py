"""The one error every parser raises for input it cannot read (defined in :mod:`gpu_preflight.records.errors`).

Callers (``gpu-preflight parse``/``judge``, the runners) must be able to tell "this tool
output is malformed or truncated" from a bug in gpu-preflight. So a parser never lets an
``IndexError``/``ValueError``/``KeyError`` escape on bad input: it raises
:class:`ParseError` naming the kind it tried, what was wrong and, where known, the line.
"""

from __future__ import annotations

from ..records.errors import ParseError

__all__ = ["ParseError"]
