"""The standard library's ``dataclass``, for the one module not yet on :class:`msgspec.Struct`.

Every other class of the program is a ``msgspec.Struct`` (issue 30): creating one costs
microseconds where the standard library compiled generated methods from source text (the
reason this module and its method cache, ``bytecache``, existed). ``report/model.py`` moves
to ``msgspec.Struct`` separately; this name goes when it has.
"""

from dataclasses import dataclass

__all__ = ["dataclass"]
