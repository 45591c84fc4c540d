"""Reading tool transcripts: the conventions every text parser shares.

Saved outputs rarely hold only what the tool printed. People paste the command line
(``$ dcgmi diag -r 2``, ``ubuntu@host:~$ nvidia-smi nvlink -s``), elide the middle
(``...``, ``[...]``), and capture scripts append ``rc=0``. Tools print "not available"
in a dozen spellings (``N/A``, ``[N/A]``, ``Requested functionality has been
deprecated``). These helpers recognise all of that in one place, so each parser only
states what its own format means, and a reading that is not there becomes ``None`` —
never a fake zero.
"""

from __future__ import annotations

import re

from .errors import ParseError

__all__ = [
    "ContentGate", "chunk_lines", "is_elision", "is_noise", "is_not_available", "is_prompt", "prepare", "to_bool",
    "to_float", "to_int",
]

_NOT_AVAILABLE = frozenset({
    "", "n/a", "na", "-", "none", "unknown", "unknown error", "not available", "not supported",
    "not applicable", "requested functionality has been deprecated", "insufficient permissions",
    "gpu is lost", "err!", "<unknown>",
})
_PROMPT = re.compile(r"^\s*(?:[\w.-]+@[\w.-]+:[^\s$#]*)?\$\s+\S")
_RC = re.compile(r"^\s*rc=-?\d+\s*$")
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")
_TRUE = frozenset({"yes", "enabled", "enable", "active", "on", "true", "supported"})
_FALSE = frozenset({"no", "disabled", "disable", "not active", "off", "false"})


def prepare(kind: str, text: str, *, allow_empty: bool = False) -> list[str]:
    """The lines of ``text``, after refusing what no tool prints: binary data, or nothing.

    ``allow_empty`` is for tools whose empty output is an answer (``nvidia-smi nvlink
    -s`` on a GPU without NVLink prints nothing).
    """
    if "\x00" in text:
        raise ParseError(kind, "binary data (NUL bytes), not tool output")
    lines = text.splitlines()
    if not allow_empty and not any(line.strip() and not is_noise(line) for line in lines):
        raise ParseError(kind, "empty input")
    return lines


class ContentGate:
    """:func:`prepare`'s two refusals for a stream: binary data, or no tool output at all.

    Feed every chunk to :meth:`check` (a NUL byte anywhere refuses the input, as in
    :func:`prepare`); lines are only inspected until the first one that is output, so
    the gate costs nothing after the first chunk of a real log.
    """

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.seen = False

    def check(self, chunk: bytes) -> None:
        if b"\x00" in chunk:
            raise ParseError(self.kind, "binary data (NUL bytes), not tool output")
        if not self.seen and chunk.strip():
            self.seen = any(line.strip() and not is_noise(line) for line in chunk_lines(chunk))

    def finish(self) -> None:
        if not self.seen:
            raise ParseError(self.kind, "empty input")


def chunk_lines(chunk: bytes) -> list[str]:
    """The lines of a chunk of whole lines, decoded as :func:`~gpu_preflight.boundedio.read_text` decodes a log."""
    return chunk.decode("utf-8", errors="replace").splitlines()


def is_prompt(line: str) -> bool:
    """A pasted shell command line: ``$ cmd`` or ``user@host:~$ cmd``."""
    return "$" in line and bool(_PROMPT.match(line))


def is_elision(line: str) -> bool:
    """A line an author put in place of omitted output: ``...``, ``[...]``, ``…``."""
    return line.strip() in ("...", "[...]", "…")


def is_noise(line: str) -> bool:
    """A line that is not tool output: a pasted command, an elision, a capture script's ``rc=N``."""
    return is_prompt(line) or is_elision(line) or ("rc=" in line and bool(_RC.match(line)))


def is_not_available(value: str | None) -> bool:
    """Whether a printed value means "no reading" (``N/A``, ``[N/A]``, ``[Not Supported]``...)."""
    if value is None:
        return True
    return value.strip().strip("[]").strip().lower() in _NOT_AVAILABLE


def to_float(value: str | None) -> float | None:
    """The first number in a printed value (``"81559 MiB"`` → 81559.0), ``None`` when not available."""
    if is_not_available(value):
        return None
    assert value is not None
    m = _NUMBER.search(value)
    if m is None:
        return None
    number = float(m.group(0))
    return number if number == number and abs(number) != float("inf") else None


def to_int(value: str | None) -> int | None:
    """The integer in a printed value (``"16x"`` → 16, ``"0x1F"`` → 31); ``None`` when not available."""
    if is_not_available(value):
        return None
    assert value is not None
    text = value.strip()
    if re.fullmatch(r"0[xX][0-9a-fA-F]+", text):
        return int(text, 16)
    number = to_float(text)
    if number is None or number != int(number):
        return None
    return int(number)


def to_bool(value: str | None) -> bool | None:
    """``Yes``/``Enabled``/``Active``/``On`` → True, their opposites → False, anything else → None."""
    if value is None:
        return None
    text = value.strip().strip("[]").strip().lower()
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    return None
