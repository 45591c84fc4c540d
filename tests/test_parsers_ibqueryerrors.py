"""``ibqueryerrors`` read as ``perfquery`` totals (issue 27; the real text is openucx/ucx#9590 in
tests/fixtures/field/fabric). Format as infiniband-diags/ibqueryerrors.c prints it: ``Errors for <node>``, then per
port ``   GUID 0x<guid> port <n|ALL>: [<counter> == <value>]`` (a 64-bit counter adds ``(<human>)``), then
``## Summary: N nodes checked, M bad nodes found`` / ``##  N ports checked, M ports have errors beyond threshold``."""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

SWEEP = ('Errors for 0x98039b03009fcfd6 "Quantum Mellanox Technologies"\n'
         "   GUID 0x98039b03009fcfd6 port ALL: [LinkDownedCounter == 25 (25.000)] [PortRcvErrors == 26 (26.000)] "
         "[PortXmitDiscards == 2846 (2.779K)] [PortXmitWait == 14681376621 (13.673G)]\n"
         'Errors for "node-07 HCA-1"\n'
         "   GUID 0xb8599f030022626e port 1: [SymbolErrorCounter == 65535]\n"
         "## Summary: 24 nodes checked, 2 bad nodes found\n"
         "##          48 ports checked, 2 ports have errors beyond threshold\n")
CLEAN = ("## Summary: 24 nodes checked, 0 bad nodes found\n"
         "##          48 ports checked, 0 ports have errors beyond threshold\n")


def verdicts(text: str) -> list[tuple[Status, str, str]]:
    return [(f.status, f.code, f.subject) for f in judge_text(text, Config(), source="x")
            if f.check_id == "ib.counters"]


def test_each_port_line_is_a_block_of_counters_under_sysfs_names() -> None:
    assert detect_kind(SWEEP) == "perfquery"
    _kind, record = parse_text(SWEEP, "perfquery")
    switch, hca = record.blocks
    assert (switch.guid, switch.port, switch.lid) == ("0x98039b03009fcfd6", None, None)
    assert switch.counters == {"link_downed": 25, "port_rcv_errors": 26, "port_xmit_discards": 2846,
                               "port_xmit_wait": 14681376621}
    assert (hca.guid, hca.port, hca.counters) == ("0xb8599f030022626e", 1, {"symbol_error": 65535})
    assert (record.ports_checked, record.ports_over_threshold) == (48, 2)


def test_the_totals_warn_as_perfquerys_do_and_name_the_port_by_guid() -> None:
    """Totals since the last clear: over a limit WARNs, never FAILs; PortXmitWait (congestion) has no limit."""
    found = verdicts(SWEEP)
    assert {(status, code) for status, code, _ in found} == {(Status.WARN, "link_downed"),
                                                             (Status.WARN, "port_rcv_errors"),
                                                             (Status.WARN, "port_xmit_discards"),
                                                             (Status.WARN, "symbol_error")}
    assert "x/guid0x98039b03009fcfd6portALL" in {subject for _, _, subject in found}


def test_a_summary_alone_is_a_clean_fabric_and_a_cut_one_is_an_error() -> None:
    assert detect_kind(CLEAN) == "perfquery"
    assert [(s, c) for s, c, _ in verdicts(CLEAN)] == [(Status.PASS, "ok")]
    cut = CLEAN.replace("0 ports have", "3 ports have")
    assert [(s, c) for s, c, _ in verdicts(cut)] == [(Status.ERROR, "incomplete")]


def test_a_bracketed_line_of_another_tool_is_not_ibqueryerrors() -> None:
    assert detect_kind("GUID 0x1 port 1: [note] nothing counted here\n") != "perfquery"
