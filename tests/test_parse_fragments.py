"""Parsers judge a fragment on what it shows (issue 27, "Detection that survives fragments and versions").

``tests/test_detect_fragments.py`` asks that a cut paste keeps its *kind*; this asks what the
parsers and judges then make of it. Over the same texts (every field case outside the held-out
quarter, never opened here, and the in-repository fixtures), for the same seeded head, tail and
middle cuts:

* the lines that carried the whole text's worst finding are found by deletion: a line is a
  carrier of a worst finding when the text without it, still judged, gives that finding fewer
  times and no other check's finding the whole has not (a failing GPU's rows, a port's state and
  link layer, an Xid line; not a header, whose loss changes how everything under it reads);
* a cut that keeps every carrier of one worst finding is judged at least as severely as the
  whole text (a FAIL stays FAIL, a WARN is WARN or worse, never PASS): the record that failed
  is in the fragment, so the fragment fails, whatever the parser lost around it (a banner, the
  root of a JSON document, the GPU line above a link);
* a cut that keeps none of the lines the whole text's findings rest on (deleting one changes
  a finding) is never PASS for a report-shaped kind, unless its parser says it is a fragment
  and judged it on the N readings it shows (an ECC section of ``-q``);
* a cut of a report-shaped kind never fails where the whole passes: it shows a part of the whole's
  records, so a failure in it is one the parser made up (another command's table read as this one's);
* a cut the parser knows to be a part (a table without its banner, test objects without their
  document) says so: "fragment: judged on N record(s)" or "output incomplete".
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.evidence import evidence_config
from gpu_preflight.model import Finding, Status, verdict
from gpu_preflight.parsers.detect import detect_kind, get_parser
from gpu_preflight.parsers.errors import ParseError

from .test_detect_fragments import DECORATIONS, KNOWN, _cut, _rng

RANK = {"UNRECOGNISED": -1, **{s.value: s.rank for s in Status}}
Key = tuple[str, str, str, str]


def _judged(text: str, kind: str | None = None) -> tuple[str, list[Finding], Any]:
    """The verdict ``judge`` gives ``text`` (its kind detected unless given), its findings and record."""
    kind = kind or detect_kind(text)
    if kind is None:
        return "UNRECOGNISED", [], None
    try:
        record = get_parser(kind).parse(text)
    except ParseError:
        return "ERROR", [], None
    config, _ = evidence_config(record)
    findings = judge_record(kind, record, config)
    return verdict(f.status for f in findings).value, findings, record


def _keys(findings: list[Finding]) -> Counter[Key]:
    return Counter((f.check_id, f.subject, f.code, f.status.value) for f in findings
                   if not f.check_id.startswith("evidence."))


def _carriers(text: str, kind: str) -> tuple[str, list[set[int]], set[int]]:
    """The whole text's verdict, the carrier lines of each of its worst findings (those found), and the
    lines any finding rests on."""
    whole, findings, _ = _judged(text, kind)
    keys = _keys(findings)
    worst = [k for k in keys if k[3] == whole]
    carriers: dict[Key, set[int]] = {k: set() for k in worst}
    resting: set[int] = set()
    lines = text.splitlines()
    for i in range(len(lines)):
        got, less, _ = _judged("\n".join(lines[:i] + lines[i + 1:]) + "\n", kind)
        if got in ("ERROR", "UNRECOGNISED") and not less:
            continue  # the text without it is not read at all: a structural line, not a record
        fewer = _keys(less)
        if fewer != keys:
            resting.add(i)
        changed = (fewer - keys) + (keys - fewer)
        for k in worst:
            # another check's finding changed too, one gained or one lost: the line was structure (a header naming
            # the columns: without it an nccl-tests table's rows fail no floor and pass no correctness check)
            if fewer[k] < keys[k] and all(other[:2] == k[:2] for other in changed):
                carriers[k].add(i)
    return whole, [c for c in carriers.values() if c], resting


def _kept(text: str, fragment: str, how: str) -> range:
    """The whole text's line numbers a cut kept (as :func:`_cut` makes it)."""
    n, m = len(text.splitlines()), len(fragment.splitlines())
    return {"head_cut": range(n - m, n), "tail_cut": range(m), "middle": range(n // 5, n // 5 + m)}[how]


def _cases() -> list[tuple[str, str, str]]:
    return [(name, text, kind) for name, text, kind, _ in KNOWN]


def _shows(record: Any) -> bool:
    """Whether the parser says the text is a fragment with readings in it (judged on what it shows)."""
    return bool(getattr(record, "fragment", None))


CUTS = ("head_cut", "tail_cut", "middle")
# Logs judged by the absence of a failure line: a clean stretch of one is a clean log, not "nothing shown".
LOG_KINDS = frozenset({"dmesg", "fabricmanager-log", "nccl-log", "nccl-tests", "perftest", "fi-pingpong",
                       "nvidia-smi-dmon"})
# Transcripts of commands read in order, where a later answer ends what an earlier one stated (a reset that worked
# ends a refusal to reset that GPU and applies its pending MIG mode): a cut before it shows that earlier state,
# a real one the whole moved past, not a failure the parser made up.
SEQUENCE_KINDS = frozenset({"nvidia-smi-set"})


def test_a_cut_that_keeps_the_failing_record_fails_and_one_that_keeps_no_record_is_not_a_pass() -> None:
    wrong = []
    judged_cuts = 0
    for name, text, kind in _cases():
        whole, carriers, resting = _carriers(text, kind)
        for how in CUTS:
            fragment = _cut(name, text, how)
            if fragment is None:
                continue
            kept = set(_kept(text, fragment, how))
            got, _, record = _judged(fragment)
            if whole in ("FAIL", "WARN") and any(c <= kept for c in carriers):
                judged_cuts += 1
                if RANK[got] < RANK[whole] or (got == "ERROR" and whole == "FAIL"):
                    wrong.append(f"{how} {name}: whole {whole}, the cut keeps its failing record(s) but is {got}")
            elif resting and not resting & kept and kind not in LOG_KINDS and got == "PASS" and not _shows(record):
                wrong.append(f"{how} {name}: no record of the whole's findings kept, judged PASS")
            if kind not in LOG_KINDS | SEQUENCE_KINDS and whole in ("PASS", "SKIP") and got in ("FAIL", "WARN"):
                wrong.append(f"{how} {name}: whole {whole}, the cut is {got}: a failure the whole does not hold")
    assert judged_cuts >= 50, "vacuous: few cuts keep a failing record"
    assert wrong == [], "\n".join(wrong)


# A tag on every line (a date, a host, a launcher's rank, a container): every line of the tool is still there.
TAGS = ("iso_date", "host_tag", "rank_tag", "pod_tag")


@pytest.mark.parametrize("tag", TAGS)
def test_a_tagged_paste_is_judged_as_the_whole(tag: str) -> None:
    """Read past the tag, each parser sees the tool's own lines: the same verdict (a libfabric warning behind
    ``[rank3]:`` is the network failure it is without it)."""
    wrong = []
    for name, text, kind in _cases():
        whole = _judged(text, kind)[0]
        if (got := _judged(DECORATIONS[tag](text, _rng(name, tag)))[0]) != whole:
            wrong.append(f"{name}: {whole} -> {got}")
    assert wrong == []


# Each parser rule the properties above exposed, on a small text of its own (each fails without its rule).

_SMI_HEADER = [
    "| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |",
    "| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |",
    "|                                         |                        |               MIG M. |",
    "|=========================================+========================+======================|",
]
_SMI_GPU = [
    "|   0  NVIDIA H100 80GB HBM3          Off |   00000000:18:00.0 Off |                    0 |",
    "| N/A   33C    P0             71W /  700W |       1MiB /  81559MiB |      0%      Default |",
    "|                                         |                        |             Disabled |",
    "+-----------------------------------------+------------------------+----------------------+",
]


def _lines_text(lines: list[str]) -> str:
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("lost", [0, 1, 4], ids=["no_banner", "no_first_header_row", "no_header"])
def test_an_smi_table_without_its_banner_is_a_fragment_judged_on_its_gpus(lost: int) -> None:
    """The GPU table cut below the banner, below the header's first row, or to its GPU rows alone: the cells
    are read under nvidia-smi's labels (persistence off is read, a WARN), and the record says it is a part."""
    text = _lines_text(_SMI_HEADER[lost:] + _SMI_GPU)
    verdict_, findings, record = _judged(text)
    assert detect_kind(text) == "nvidia-smi-table" and record.fragment == 1
    assert record.driver_version is None and record.gpus[0].pci_bus_id == "00000000:18:00.0"
    assert record.gpus[0].persistence_mode is False and record.gpus[0].memory_total_mib == 81559
    assert verdict_ == "WARN" and "gpu.inventory.count" not in {f.check_id for f in findings}
    assert any(f.summary.startswith("fragment: judged on 1 record(s)") for f in findings)


def test_an_nvlink_listing_cut_above_its_first_gpu_is_judged_on_the_gpus_it_names() -> None:
    text = ("\t Link 16: 26.562 GB/s\n\t Link 17: 26.562 GB/s\n"
            "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n")
    verdict_, findings, record = _judged(text)
    assert record.elided and [g.index for g in record.gpus] == [1]
    assert verdict_ == "FAIL" and any(f.check_id == "gpu.nvlink" and f.status is Status.FAIL for f in findings)


_DCGM_DOC = """{
    "DCGM GPU Diagnostic" : {
        "test_categories" : [ {
            "category" : "Deployment",
            "tests" : [
                { "name" : "Denylist", "results" : [ { "gpu_ids" : "0,1", "status" : "PASS" } ] },
                { "name" : "Persistence Mode", "results" : [ { "gpu_ids" : "0,1", "status" : "FAIL",
                  "warnings" : ["Persistence mode for GPU 1 is currently disabled."] } ] },
                { "name" : "Inforom", "results" : [ { "gpu_ids" : "0,1", "status" : "PASS" } ] }
            ] } ],
        "version" : "1.7"
    }
}
"""


@pytest.mark.parametrize("cut", ["head", "tail"])
def test_a_dcgm_json_document_cut_at_either_end_is_judged_on_its_test_objects(cut: str) -> None:
    lines = _DCGM_DOC.splitlines()
    text = _lines_text(lines[1:] if cut == "head" else lines[:-3])
    verdict_, findings, record = _judged(text, "dcgmi-diag")
    assert record.format == "json-excerpt" and record.fragment == 3 and record.incomplete
    assert verdict_ == "FAIL" and {f.code for f in findings} >= {"fragment", "incomplete"}


def test_a_dcgm_json_document_without_a_whole_test_object_stays_unreadable() -> None:
    with pytest.raises(ParseError, match="malformed JSON"):
        get_parser("dcgmi-diag").parse(_DCGM_DOC[:120])


def test_ibv_devinfo_without_its_hca_id_is_a_fragment_judged_on_its_ports() -> None:
    text = ("\ttransport:\t\t\tInfiniBand (0)\n\tfw_ver:\t\t\t\t28.39.1002\n\tphys_port_cnt:\t\t\t1\n"
            "\t\tport:\t1\n\t\t\tstate:\t\t\tPORT_DOWN (1)\n\t\t\tmax_mtu:\t\t4096 (5)\n"
            "\t\t\tlink_layer:\t\tInfiniBand\n")
    verdict_, findings, record = _judged(text)
    assert detect_kind(text) == "ibv-devinfo" and record.fragment == 1
    assert verdict_ == "FAIL" and any(f.summary.startswith("fragment: judged on 1 record(s)") for f in findings)
    assert detect_kind(text.replace("PORT_DOWN (1)", "down")) is None  # ibv_devinfo's state shape is the evidence


def test_a_libfabric_warning_behind_a_rank_tag_is_the_network_failure() -> None:
    line = ("libfabric:451707:1708520807::efa:cq:efa_rdm_txe_handle_error():737<warn> err: 5, message: Invalid "
            "address (7)\n")
    kinds = {s.kind for s in get_parser("nccl-log").parse(f"[rank3]:     {line}").signatures}
    assert kinds == {s.kind for s in get_parser("nccl-log").parse(line).signatures} == {"net_plugin_error"}


_DCGMI_STATS = """|-----  Execution Stats  ------------+-----------------------------------------|
| Start Time                         | Fri Dec 10 19:40:36 2021                |
| Total Execution Time (sec)         | 47.57                                   |
+-----  Event Stats  ----------------+-----------------------------------------+
| Double Bit ECC Errors              | 0                                       |
| Critical XID Errors                | 0                                       |
+------------------------------------+-----------------------------------------+
"""


def test_a_dcgmi_stats_table_without_a_diag_header_is_no_failed_diagnostic() -> None:
    """Read as dcgmi diag (``--kind``), ``dcgmi stats``' rows are no tests: nothing to judge, not 'Start Time
    failed'. A header-less diag row still is one (its result is a status)."""
    with pytest.raises(ParseError, match="another command's table"):
        get_parser("dcgmi-diag").parse(_DCGMI_STATS)
    diag = _DCGMI_STATS.replace("| Double Bit ECC Errors              | 0      ",
                                "| Memory                            | Fail - GPU: 1")
    tests = get_parser("dcgmi-diag").parse(diag).tests
    assert [(t.name, t.status, t.gpus) for t in tests] == [("Memory", "fail", [1])]
