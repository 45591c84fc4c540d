"""nccl-tests as the field prints it (issue 27): older layouts, the completeness rule on our own fixture,
bandwidth judged for every collective on one node and across nodes, and a named profile used.

Every log here is in the repository (our fixture, or a field-corpus case with its provenance in
``tests/fixtures/field/nccl-tests/SOURCES.toml``), so these run in a clone without ``../shared``.
Degraded copies are made from them by rewriting the rows, as ``test_nccl_tests_floors.py`` does.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.checks.floors import Floor, network_floor
from gpu_preflight.cli.main import main
from gpu_preflight.config import build_config, find_profile
from gpu_preflight.parsers.nccl_tests import parse

from .conftest import FIXTURES

OWN = FIXTURES / "evidence" / "nccl-tests-all_reduce-8xh100.txt"  # 8 x H100 on one host, peak 479.77
FIELD = FIXTURES / "field" / "nccl-tests"
ROW = re.compile(r"^(\s*\d+\s+\d+\s+\S+\s+\S+\s+-?\d+\s+\S+\s+)(\S+)(\s+)(\S+)(.*)$")


def judge(path: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, list[dict[str, Any]]]]:
    code = main(["judge", str(path), "--format", "json", *extra])
    by_check: dict[str, list[dict[str, Any]]] = {}
    for f in json.loads(capsys.readouterr().out)["findings"]:
        by_check.setdefault(f["check_id"], []).append(f)
    return code, by_check


def degraded(dest: Path, *, slower: float = 1.0, keep: re.Pattern[str] | None = None,
             hosts: tuple[str, str] | None = None, test: str | None = None) -> Path:
    """Our fixture with every busbw/algbw divided by ``slower``, only the lines ``keep`` matches, ranks 4-7 moved
    to ``hosts[1]`` and the binary named ``test``."""
    out = [f"# Collective test starting: {test}_perf"] if test else []
    for line in OWN.read_text().splitlines():
        if keep is not None and not keep.search(line):
            continue
        if hosts and (m := re.match(r"^#\s+Rank\s+(\d+)", line)):
            line = line.replace("gpu-node-07", hosts[int(m.group(1)) >= 4])
        if (m := ROW.match(line)) and slower != 1.0:
            algbw, busbw = float(m.group(2)) / slower, float(m.group(4)) / slower
            line = f"{m.group(1)}{algbw:.2f}{m.group(3)}{busbw:.2f}{m.group(5)}"
        out.append(line)
    dest.write_text("\n".join(out) + "\n")
    return dest


def test_our_fixture_without_its_summary_lines_is_incomplete(tmp_path: Path,
                                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The completeness rule, caught by the repository's own fixture: a log cut before its summary never passes."""
    cut = degraded(tmp_path / "cut.txt", keep=re.compile(r"^(?!# (Out of bounds|Avg bus))"))
    code, by_check = judge(cut, capsys=capsys)
    assert code == 3 and [f["status"] for f in by_check["evidence.complete"]] == ["ERROR"]
    assert "no 'Out of bounds values' summary line" in by_check["evidence.complete"][0]["summary"]
    code, by_check = judge(OWN, capsys=capsys)
    assert code == 0 and "evidence.complete" not in by_check


def test_older_device_lines_and_the_legacy_table_are_read() -> None:
    """nccl-tests before 2.x's Group column, the float error column and alltoall's blank redop cells."""
    record = parse((FIELD / "superbench-alltoall-8xa100-legacy.txt").read_text())
    assert record.nranks == 8 and not record.nranks_inferred and record.hosts == ["localhost"]
    assert {g.name for g in record.gpus} == {"A100-SXM4-40GB"} and record.peak_busbw_gbps == 224.31
    assert record.rows[-1].redop is None and record.incomplete == []


def test_a_table_whose_hash_marks_were_lost_is_still_read() -> None:
    """A markdown paste drops every leading '#': the header and device lines are still found by their words."""
    text = "\n".join(line.lstrip("#") for line in OWN.read_text().splitlines())
    record = parse(text)
    assert record.nranks == 8 and record.hosts == ["gpu-node-07"] and record.peak_busbw_gbps == 479.77
    assert record.out_of_bounds == 0 and record.incomplete == []


def test_a_slowed_log_without_devices_is_judged_by_the_named_profile(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27's case: 8 ranks slowed 200x, no '# Using devices': with --profile h100-sxm it FAILs under the
    stated one-node assumption; without a profile it is not judged, and that is never SUCCESS."""
    log = degraded(tmp_path / "slow.txt", slower=200, keep=re.compile(r"^(?!#\s+Rank)"))
    code, by_check = judge(log, "--profile", "h100-sxm", capsys=capsys)
    (bw,) = by_check["nccl_tests.bandwidth"]
    assert (code, bw["status"], bw["expected"]) == (2, "FAIL", ">= 250")
    assert "assumed one node" in bw["summary"] and "8 ranks (inferred from busbw/algbw)" in bw["summary"]
    code, by_check = judge(log, capsys=capsys)
    (bw,) = by_check["nccl_tests.bandwidth"]
    assert (code, bw["status"], bw["code"]) == (1, "WARN", "no_floor") and "--profile" in bw["summary"]


@pytest.mark.parametrize("test", ["all_gather", "reduce_scatter", "alltoall", "broadcast", "reduce", "sendrecv"])
def test_every_collective_on_one_node_is_held_to_the_node_floor(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                                test: str) -> None:
    healthy = degraded(tmp_path / "ok.txt", test=test)
    code, by_check = judge(healthy, capsys=capsys)
    assert (code, by_check["nccl_tests.bandwidth"][0]["status"]) == (0, "PASS")
    slow = degraded(tmp_path / "slow.txt", slower=479.77 / 249.99, test=test)  # just below the 250 floor
    code, by_check = judge(slow, capsys=capsys)
    (bw,) = by_check["nccl_tests.bandwidth"]
    assert (code, bw["status"], bw["observed"]) == (2, "FAIL", 249.99) and "NVSwitch" in bw["details"]["floor_basis"]


def test_a_slow_two_node_all_gather_fails_on_the_network_bound(tmp_path: Path,
                                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 27's case: a two-node all_gather at 2.8 GB/s busbw was SUCCESS; the bound that applied is named."""
    log = degraded(tmp_path / "ag.txt", slower=479.77 / 2.8, hosts=("node-a", "node-b"), test="all_gather")
    code, by_check = judge(log, capsys=capsys)
    (bw,) = by_check["nccl_tests.bandwidth"]
    assert (code, bw["status"], bw["observed"]) == (2, "FAIL", 2.8)
    assert "8 x 400 Gb/s NICs per node" in bw["details"]["floor_basis"] and "2 nodes x 4 GPUs" in bw["summary"]


def test_network_floor_per_collective_at_its_boundary() -> None:
    """Per-GPU share of 8 x 400 Gb/s on an 8-GPU node = 50 GB/s; n=16, k=2, g=8; floor = 0.5 x bound, capped by
    the node-local floor."""
    perf = build_config(profile=find_profile("h100-sxm"))[0].perf
    expected = {"all_reduce": 375.0, "all_gather": 375.0, "reduce_scatter": 375.0, "alltoall": 46.88,
                "broadcast": 200.0, "reduce": 200.0, "sendrecv": 25.0, None: 25.0}
    for collective, value in expected.items():
        floor = network_floor(perf, collective, 16, 2, None)
        assert floor is not None and floor.gbps == value, collective
    capped = network_floor(perf, "all_reduce", 16, 2, Floor(250, "NVSwitch"))
    assert capped is not None and capped.gbps == 250 and "the network would allow more" in capped.basis


def test_a_partial_node_is_credited_only_its_gpus_share_of_the_nics() -> None:
    """kubernetes-sigs/dranet's 1-GPU/1-NIC workers on two B200 nodes: 36.7 GB/s all_gather busbw is a working
    setup, not a FAIL against the whole node's 8 x 400 Gb/s. A job on g < perf.node_gpus GPUs per node gets g
    rails: per-GPU share 50 GB/s whatever g is (4 GPUs: the same 50 GB/s each, not 100)."""
    perf = build_config(profile=find_profile("b200"))[0].perf
    one = network_floor(perf, "all_gather", 2, 2, None)
    assert one is not None and one.gbps == 25.0 and "1/8 share" in one.basis and "2 nodes x 1 GPUs" in one.basis
    four = network_floor(perf, "all_reduce", 8, 2, None)
    assert four is not None and four.gbps == 175.0  # 50 x 7 / 1 x 0.5
    full = network_floor(perf, "all_reduce", 16, 2, None)
    assert full is not None and "share" not in full.basis  # a whole node: the basis reads as before
    assert network_floor(perf, "all_reduce", 8, 1, None) is None  # one node: not a network bound
    assert network_floor(build_config()[0].perf, "all_reduce", 16, 2, None) is None  # no fabric stated
