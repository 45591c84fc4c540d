"""``gpu-preflight judge`` of saved nccl-tests logs against the shipped all_reduce floors.

Real logs from the corpus and our fixtures, judged through the command line as a user runs
it: the profile comes from the GPU names the log lists (or ``--profile``), the floor from
that profile and the log's hosts and GPUs. Degraded copies (busbw rewritten, GPU names
changed) put each verdict at, just below and just above its boundary.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cli.main import main

from .conftest import FIXTURES

SINGLE_NODE = "nccl-tests/hcdeep-all_reduce-gcp-a3-h100x8-single-node.txt"  # 8 x H100 SXM, peak 479.93
TWO_NODES = "nccl-tests/gcp-a3mega-all_reduce-2x-h100-16rank.txt"  # 2 hosts, peak 338.82
NO_DEVICES = "nccl-tests/awsome-all_reduce-1x-p5-8gpu-aws-batch.txt"  # no '# Using devices' block
OWN = FIXTURES / "evidence" / "nccl-tests-all_reduce-8xh100.txt"
ROW = re.compile(r"^(\s*)(\d+)(\s+\d+\s+\S+\s+\S+\s+-?\d+\s+\S+\s+)(\S+)(\s+)(\S+)(.*)$")


def judged(path: Path, *extra: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, dict[str, Any]]:
    code = main(["judge", str(path), "--format", "json", *extra])
    report = json.loads(capsys.readouterr().out)
    (finding,) = [f for f in report["findings"] if f["check_id"] == "nccl_tests.bandwidth"]
    return code, finding


def rewritten(src: Path, dest: Path, *, busbw: float | None = None, name: str | None = None,
              max_size: int | None = None) -> Path:
    """A copy of a real log: out-of-place busbw (and algbw) of rows of 256 MiB or more set to ``busbw``,
    GPU names replaced by ``name``, rows above ``max_size`` dropped."""
    out = []
    for line in src.read_text().splitlines():
        if name is not None and re.match(r"^#\s*Rank\s+\d+", line):
            line = re.sub(r"(\[[^\]]+\]\s*).*$", rf"\g<1>{name}", line)
        m = ROW.match(line)
        if m and max_size is not None and int(m.group(2)) > max_size:
            continue
        if m and busbw is not None and int(m.group(2)) >= 1 << 28:
            algbw = busbw / (2 * 7 / 8)  # all_reduce over the log's 8 ranks: busbw = algbw * 2(n-1)/n
            line = f"{m.group(1)}{m.group(2)}{m.group(3)}{algbw:.2f}{m.group(5)}{busbw:.2f}{m.group(7)}"
        out.append(line)
    dest.write_text("\n".join(out) + "\n")
    return dest


def test_a_healthy_single_node_log_passes_the_profile_floor(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, f = judged(corpus / SINGLE_NODE, capsys=capsys)
    assert (code, f["status"], f["observed"], f["expected"]) == (0, "PASS", 479.93, ">= 250")
    assert f["details"]["floor_basis"].startswith("NVSwitch") and f["details"]["gpu_names"] == [
        "NVIDIA H100 80GB HBM3"]
    code, f = judged(OWN, capsys=capsys)
    assert (code, f["status"], f["expected"]) == (0, "PASS", ">= 250")


@pytest.mark.parametrize("busbw, status, code", [(250.0, "PASS", 0), (250.01, "PASS", 0), (249.99, "FAIL", 2),
                                                 (60.0, "FAIL", 2)])
def test_nvswitch_floor_boundary(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], busbw: float,
                                 status: str, code: int) -> None:
    log = rewritten(corpus / SINGLE_NODE, tmp_path / "log.txt", busbw=busbw)
    rc, f = judged(log, capsys=capsys)
    assert (rc, f["status"], f["observed"]) == (code, status, busbw)
    if status == "FAIL":
        assert f["code"] == "busbw_low" and "250 GB/s floor" in f["summary"] and f["recommendation"]


@pytest.mark.parametrize("name, busbw, status, expected", [
    ("NVIDIA L40S", 4.0, "PASS", ">= 4"),          # PCIe gen4 profile: the PCIe floor
    ("NVIDIA L40S", 3.99, "FAIL", ">= 4"),
    ("NVIDIA H100 PCIe", 8.0, "PASS", ">= 8"),     # no NVSwitch board for this name
    ("NVIDIA H100 PCIe", 7.99, "FAIL", ">= 8"),
    ("NVIDIA A100 80GB PCIe", 120.0, "PASS", ">= 4"),  # the a100-80gb profile, but not an SXM4 name
    ("NVIDIA A100-SXM4-80GB", 119.99, "FAIL", ">= 120"),
])
def test_the_gpu_names_pick_profile_and_fabric(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               name: str, busbw: float, status: str, expected: str) -> None:
    log = rewritten(corpus / SINGLE_NODE, tmp_path / "log.txt", busbw=busbw, name=name)
    _, f = judged(log, capsys=capsys)
    assert (f["status"], f["expected"]) == (status, expected)


def test_profile_option_for_gpus_no_profile_knows(corpus: Path, tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    log = rewritten(corpus / SINGLE_NODE, tmp_path / "log.txt", busbw=7.0, name="NVIDIA Graphics Device")
    _, f = judged(log, capsys=capsys)
    assert (f["status"], f["code"]) == ("WARN", "no_floor") and "--profile" in f["summary"]
    rc, f = judged(log, "--profile", "h100-sxm", capsys=capsys)  # a name not sold only on NVSwitch boards
    assert (rc, f["status"], f["expected"]) == (2, "FAIL", ">= 8")


def test_a_multi_node_log_is_judged_by_the_network_floor_only(corpus: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    _, f = judged(corpus / TWO_NODES, capsys=capsys)  # the profile's NICs allow more than the node floor
    assert (f["status"], f["expected"]) == ("PASS", ">= 250") and "the network would allow more" in f["summary"]
    assert f["observed"] == 338.82
    _, f = judged(corpus / TWO_NODES, "--set", "perf.network_busbw_min_gbps=338.82", capsys=capsys)
    assert f["status"] == "PASS"
    rc, f = judged(corpus / TWO_NODES, "--set", "perf.network_busbw_min_gbps=338.83", capsys=capsys)
    assert (rc, f["status"]) == (2, "FAIL")


def test_what_cannot_be_judged_says_why(corpus: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, f = judged(corpus / NO_DEVICES, capsys=capsys)
    assert (f["status"], f["code"]) == ("WARN", "no_floor") and "lists no devices" in f["summary"]
    small = rewritten(corpus / SINGLE_NODE, tmp_path / "small.txt", max_size=(1 << 28) - 1)
    _, f = judged(small, capsys=capsys)
    assert f["status"] == "SKIP" and "perf.busbw_floor_min_bytes" in f["summary"]
    gather = tmp_path / "gather.txt"
    gather.write_text("# Collective test starting: all_gather_perf\n" + (corpus / SINGLE_NODE).read_text())
    _, f = judged(gather, capsys=capsys)  # every collective is held to the node floor (issue 27)
    assert (f["status"], f["expected"]) == ("PASS", ">= 250")


def test_a_site_floor_still_judges_any_run(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, f = judged(corpus / NO_DEVICES, "--set", "evidence.nccl_busbw_min_gbps=500", capsys=capsys)
    assert (rc, f["status"], f["expected"]) == (2, "FAIL", ">= 500")
