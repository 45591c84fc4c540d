"""Rules issue 27's field corpus taught the perftest reader (in-repository texts only).

* A port that is not up (``Port number 1 state is Down``), the device context perftest then
  cannot get (``Couldn't set the link layer`` / ``Couldn't get context for the device``) and GPU
  memory it cannot register (``Couldn't allocate MR``, GPUDirect without nvidia-peermem) are
  perftest's own failure lines: such a text alone is perftest, and it FAILs ``ib.perftest``
  ("did not measure"), naming the lines.
* Those lines are read when a paste quotes them under a list item (``  > Couldn't ...``), and the
  quote marker is not part of the error text.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

FABRIC = Path(__file__).parent / "fixtures" / "field" / "fabric"
PORT_DOWN = (FABRIC / "perftest-send-lat-port-state-down-no-context-perftest-43.txt").read_text()


def perftest(text: str) -> list[tuple[Status, str]]:
    return [(f.status, f.summary) for f in judge_text(text, Config(), source="n1") if f.check_id == "ib.perftest"]


@pytest.mark.parametrize("text", [
    "Port number 1 state is Down\nCouldn't set the link layer\nCouldn't get context for the device\n",
    "  > Port number 1 state is Init\n  >     Couldn't get context for the device\n",
    "cuMemAlloc() of a 262144 bytes GPU buffer\nCouldn't allocate MR\nfailed to create mr\n",
])
def test_perftest_failure_lines_alone_are_a_failed_perftest(text: str) -> None:
    assert detect_kind(text) == "perftest"
    [(status, summary)] = perftest(text)
    assert status is Status.FAIL and summary.startswith("perftest did not measure: ")


def test_an_active_port_line_is_no_failure() -> None:
    assert detect_kind("Port number 1 state is Active\n") is None


def test_an_indented_quote_is_read_without_its_marker() -> None:
    assert detect_kind(PORT_DOWN) == "perftest"
    _, record = parse_text(PORT_DOWN)
    assert record.errors == ["Port number 1 state is Down", "Couldn't set the link layer",
                             "Couldn't get context for the device"]
