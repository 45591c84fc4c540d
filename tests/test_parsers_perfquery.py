"""``perfquery``: a port's counters, judged as totals since the last clear (issue 27; the real text is
linux-rdma/infiniband-diags#16 in tests/fixtures/field/fabric). Format as perfquery.c prints it: a
``# Port counters: Lid N port M (CapMask: ...)`` header (``extended`` with -x), then ``Name:....value`` lines."""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

EVIDENCE = Path(__file__).parent / "fixtures" / "evidence"
ZERO = ("# Port extended counters: Lid 10 port 1 (CapMask: 0x5300 CapMask2: 0x0000002)\n"
        "PortSelect:......................1\nCounterSelect:...................0x0000\n"
        "PortXmitData:....................0\nSymbolErrorCounter:..............0\n"
        "LinkErrorRecoveryCounter:........0\nLinkDownedCounter:...............0\nPortRcvErrors:...................0\n"
        "PortXmitDiscards:................0\nVL15Dropped:.....................0\n")


def verdicts(text: str) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, Config(), source="x") if f.check_id == "ib.counters"]


def test_counters_are_read_under_their_sysfs_names() -> None:
    text = (EVIDENCE / "perfquery-symbol-errors-link-downed.txt").read_text()
    assert detect_kind(text) == "perfquery"
    _kind, record = parse_text(text, "perfquery")
    [block] = record.blocks
    assert (block.lid, block.port, block.extended) == (17, 1, False)
    assert block.counters["symbol_error"] == 27 and block.counters["link_downed"] == 2
    assert block.counters["port_xmit_data"] == 1402718612
    assert "PortSelect" not in block.counters and "port_select" not in block.counters


def test_totals_over_the_run_limits_warn_and_never_fail() -> None:
    """A total since the last clear cannot say the errors are recent: link_downed over its FAIL limit WARNs."""
    text = (EVIDENCE / "perfquery-symbol-errors-link-downed.txt").read_text()
    assert verdicts(text) == [(Status.WARN, "link_downed"), (Status.WARN, "symbol_error")]


def test_a_clean_port_passes_and_a_block_without_its_header_is_read() -> None:
    assert detect_kind(ZERO) == "perfquery" and verdicts(ZERO) == [(Status.PASS, "ok")]
    headless = "\n".join(ZERO.splitlines()[1:]) + "\n"
    assert detect_kind(headless) == "perfquery"
    _kind, record = parse_text(headless, "perfquery")
    assert [(b.lid, b.port) for b in record.blocks] == [(None, None)]
    assert verdicts(headless) == [(Status.PASS, "ok")]


def test_a_few_dotted_lines_of_another_kind_are_not_perfquery() -> None:
    """ibportstate prints the same dotted column (LinkState:.....Down) but none of perfquery's counters."""
    assert detect_kind("LinkState:.......................Down\nPhysLinkState:...................Polling\n"
                       "Lid:.............................38\n") != "perfquery"
