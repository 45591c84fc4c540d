"""Fragments of ibstat, perftest and dcgmi output, detected by their strongest evidence and judged
on what they show (issue 27). The texts are the field corpus's (real, quoted in public threads,
provenance in ``tests/fixtures/field/*/SOURCES.toml``); before, the ibstat port block and the
perftest error lines were "not a text we parse" and the dcgmi rows pasted without their header
were too.
"""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status, verdict
from gpu_preflight.parsers.detect import detect_kind, parse_text

FIELD = Path(__file__).parent / "fixtures" / "field"
PORT_FRAGMENT = (FIELD / "fabric" / "ibstat-port-fragment-down-azhpc-76.txt").read_text()
DCGM_ROWS = (FIELD / "dcgm" / "headerless-gpu-memory-fail-go-dcgm-52.txt").read_text()
# linux-rdma/perftest PR 228: a client that never reached its server prints only this.
PERFTEST_NO_SERVER = "Couldn't connect to 192.168.125.211:18515\n" \
                     "Unable to open file descriptor for socket connection Unable to init the socket connection\n"


def statuses(text: str) -> dict[str, set[Status]]:
    out: dict[str, set[Status]] = {}
    for f in judge_text(text, Config(), source="n"):
        out.setdefault(f.check_id, set()).add(f.status)
    return out


def test_ibstat_port_block_without_its_ca_is_an_ibstat_fragment() -> None:
    assert detect_kind(PORT_FRAGMENT) == "ibstat"
    _kind, record = parse_text(PORT_FRAGMENT)
    assert record.fragment == 1 and record.incomplete == []  # no link layer line is not a cut in a fragment
    checks = statuses(PORT_FRAGMENT)
    assert checks["ib.ports"] == {Status.FAIL} and checks["evidence.fragment"] == {Status.SKIP}


def test_polling_is_an_ib_port_without_link_whatever_the_link_layer_shown() -> None:
    polling = PORT_FRAGMENT
    disabled = PORT_FRAGMENT.replace("Polling", "Disabled")
    assert statuses(polling)["ib.ports"] == {Status.FAIL}
    assert statuses(disabled)["ib.ports"] == {Status.WARN}  # a RoCE port that is down: maybe unused


def test_a_whole_ibstat_is_not_a_fragment() -> None:
    text = (FIELD / "fabric" / "ibstat-2x100g-roce-active-l2fwd-6.txt").read_text()
    _kind, record = parse_text(text)
    assert record.fragment is None and "evidence.fragment" not in statuses(text)


def test_perftest_failure_lines_alone_are_a_run_that_never_measured() -> None:
    assert detect_kind(PERFTEST_NO_SERVER) == "perftest"
    findings = judge_text(PERFTEST_NO_SERVER, Config(), source="n")
    assert [(f.check_id, f.status) for f in findings] == [("ib.perftest", Status.FAIL)]


def test_dcgmi_rows_without_the_header_are_a_fragment_judged_on_their_tests() -> None:
    assert detect_kind(DCGM_ROWS) == "dcgmi-diag"
    _kind, record = parse_text(DCGM_ROWS)
    assert record.fragment == 1
    assert [(t.name, t.status, t.gpus) for t in record.tests] == [("GPU Memory", "fail", [0])]
    findings = judge_text(DCGM_ROWS, Config(), source="n")
    assert verdict(f.status for f in findings) is Status.FAIL


def test_info_rows_of_a_test_not_pasted_are_not_a_failure() -> None:
    """The same excerpt cut before its Hardware section: only Info rows of an unseen test."""
    rows = DCGM_ROWS.split("+-----  Hardware")[0]
    rows = "\n".join(line for line in rows.splitlines() if line.startswith("| Info") or line.startswith("|   "))
    _kind, record = parse_text(rows, "dcgmi-diag")
    assert record.tests == [] and record.overall != "fail"
