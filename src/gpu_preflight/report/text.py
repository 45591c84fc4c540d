"""Text from logs made safe for the formats that embed it.

Findings quote what tools printed (kernel log lines, dcgmi and nccl-tests output): ANSI
colour escapes, stray control bytes and markup characters all occur in real logs. XML 1.0
cannot hold most control characters at all (a parser rejects the whole file), and Markdown
renders HTML and link syntax it is given, so each reporter passes such text through here.
"""

from __future__ import annotations

import re

__all__ = ["markdown_text", "plain_text"]

# ANSI/VT100 escape sequences (CSI ... final byte, OSC ... BEL/ST, and two-byte ESC forms).
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# Characters XML 1.0 forbids, plus the other C0/C1 controls (never meant as text in a report).
_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\ud800-\udfff\ufffe\uffff]")
# Markdown syntax: always for these; "_" only at a word edge (GFM ignores it inside a word, as in check ids).
_MARKDOWN = re.compile(r"([\\`*\[\]~|#]|(?<![0-9A-Za-z])_|_(?![0-9A-Za-z]))")


def plain_text(text: object) -> str:
    """``text`` without ANSI escapes and control characters (tab and newline kept): always valid XML 1.0."""
    return _CONTROL.sub("", _ANSI.sub("", str(text)))


def markdown_text(text: object) -> str:
    """``text`` for a Markdown table cell or list item: plain, on one line, HTML and Markdown syntax escaped."""
    flat = " ".join(plain_text(text).split())
    flat = flat.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return _MARKDOWN.sub(r"\\\1", flat)
