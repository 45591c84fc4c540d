"""The row regex of an nccl-tests header (possessive, for speed) reads exactly the rows the plain
backtracking form reads, cell for cell: the fast path must not take or refuse a row the slow one would not."""

from __future__ import annotations

import random
import re

import pytest

from gpu_preflight.parsers import nccl_tests

HEADERS = [
    "size count type redop root time algbw busbw #wrong time algbw busbw #wrong",
    "size count type redop time algbw busbw error time algbw busbw error",
    "size count type redop root time algbw busbw #wrong time algbw busbw #wrong unalign",
]
PLAIN = {"integral": r"(\d+)", "numeric": r"(\d+\.?\d*|\.\d+)", "other": r"(\S+)"}
CELLS = ["8", "2147483648", "15.31", "0.00", ".5", "5.", "1.2.3", "1e3", "-1", "+3", "N/A", "float", "sum", "12a",
         "\u0661", "7\xa0", ".", "..5", "0", "00.10", "479.77"]
USUAL = {"integral": ["8", "16", "0", "2147483648"], "numeric": ["15.31", "0.00", "479.77", ".5", "5.", "12"],
         "other": ["float", "sum", "-1", "N/A"]}
BLANKS = [" ", "  ", "\t", "      ", " \x1f", "\xa0"]


def _kind(name: str) -> str:
    key = name.lower().lstrip("#")
    return "integral" if key in nccl_tests._INTEGRAL else "numeric" if key in nccl_tests._NUMERIC else "other"


def plain_pattern(columns: list[str]) -> re.Pattern[str]:
    return re.compile(r"\s*" + r"\s+".join(PLAIN[_kind(name)] for name in columns) + r"\s*", re.ASCII)


@pytest.mark.parametrize("header", HEADERS)
def test_the_possessive_row_regex_reads_what_the_plain_one_reads(header: str) -> None:
    columns = header.split()
    fast, slow = nccl_tests._Layout.of(columns).pattern, plain_pattern(columns)
    kinds = [_kind(name) for name in columns]
    rng = random.Random(header)
    matched = 0
    for _ in range(20_000):
        odd = rng.random() / 4  # how often a cell or a blank is out of the ordinary
        count = len(columns) + (rng.choice([-1, 1]) if rng.random() < odd else 0)
        cells = [rng.choice(CELLS) if rng.random() < odd else rng.choice(USUAL[kinds[i % len(kinds)]])
                 for i in range(count)]
        line = rng.choice(["", " ", "   "]) + "".join(
            cell + (rng.choice(BLANKS) if rng.random() < odd else "  ") for cell in cells).rstrip(" ")
        got, want = fast.fullmatch(line), slow.fullmatch(line)
        assert (got and got.groups()) == (want and want.groups()), repr(line)
        matched += want is not None
    assert matched > 100  # the comparison saw rows both forms read, not only refusals
