"""nccl-tests run on the node: fake ``*_perf`` binaries replay real outputs through the real runner."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.config.diagnostics import diagnostics_config
from gpu_preflight.model import Status
from gpu_preflight.probes.nccl_tests import nccl_tests_probe
from gpu_preflight.records.tools import NcclTestsFacts

from .diag_tools import check, config, hang, probe_ctx, replay, statuses
from .test_diag_dcgm import TORCHRUN_ENV

HEALTHY = "nccl-tests/hcdeep-all_reduce-gcp-a3-h100x8-single-node.txt"  # peak busbw 479.93 GB/s, #wrong 0
ABORTED = "nccl-tests/cscs-test-nccl-failure-invalid-usage.txt"


@pytest.fixture
def bindir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "bin"
    path.mkdir()
    monkeypatch.setenv("PATH", f"{path}:{os.environ['PATH']}")
    return path


def both(facts: NcclTestsFacts, cfg: Config | None = None) -> list[tuple[str, str, str]]:
    return statuses(check("nccl_tests.correctness", "nccl_tests", facts, cfg)) + \
        statuses(check("nccl_tests.bandwidth", "nccl_tests", facts, cfg))


def with_wrong_values(source: Path, dest: Path) -> Path:
    """A copy of a real run whose first result row reports 5 wrong values out-of-place."""
    lines = source.read_text().splitlines(keepends=True)
    for i, line in enumerate(lines):
        if re.match(r"^\s+\d+\s+\d+\s+float\s+sum", line):
            tokens = line.split()
            tokens[8] = "5"
            lines[i] = "  ".join(tokens) + "\n"
            break
    dest.write_text("".join(lines))
    return dest


def test_healthy_run_passes_and_gets_the_gpu_count(bindir: Path, tmp_path: Path, corpus: Path) -> None:
    log = tmp_path / "argv"
    replay(bindir, "all_reduce_perf", corpus / HEALTHY, argv_log=log)
    cfg = config(nccl_tests=["all_reduce_perf"], nccl_tests_gpus=8)
    facts = nccl_tests_probe(probe_ctx(cfg))
    assert log.read_text().split() == ["-g", "8", *diagnostics_config(cfg).nccl_tests_args_quick]
    # no profile, no floor: the bandwidth is not judged, and a run so judged is never SUCCESS (issue 27)
    assert both(facts, cfg) == [("PASS", "n1/all_reduce_perf", "ok"), ("WARN", "n1/all_reduce_perf", "no_floor")]
    bw = check("nccl_tests.bandwidth", "nccl_tests", facts, cfg)[0]
    assert bw.observed == 479.93 and bw.details["artifact"] == "all_reduce_perf.txt"


@pytest.mark.parametrize(("floor", "expected"), [(479.93, "PASS"), (479.94, "FAIL"), (400.0, "PASS")])
def test_bandwidth_floor_at_just_above_and_below(bindir: Path, corpus: Path, floor: float, expected: str) -> None:
    replay(bindir, "all_reduce_perf", corpus / HEALTHY)
    cfg = config(evidence={"nccl_busbw_min_gbps": floor}, nccl_tests=["all_reduce_perf"], nccl_tests_gpus=8)
    findings = check("nccl_tests.bandwidth", "nccl_tests", nccl_tests_probe(probe_ctx(cfg)), cfg)
    assert [f.status.value for f in findings] == [expected]


def test_wrong_values_fail(bindir: Path, tmp_path: Path, corpus: Path) -> None:
    replay(bindir, "all_reduce_perf", with_wrong_values(corpus / HEALTHY, tmp_path / "wrong.txt"), rc=1)
    cfg = config(nccl_tests=["all_reduce_perf"], nccl_tests_gpus=8)
    findings = check("nccl_tests.correctness", "nccl_tests", nccl_tests_probe(probe_ctx(cfg)), cfg)
    assert ("FAIL", "n1/all_reduce_perf", "wrong_results") in statuses(findings)
    assert next(f for f in findings if f.code == "wrong_results").observed == 5


def test_aborted_test_fails_with_the_nccl_reason(bindir: Path, corpus: Path) -> None:
    replay(bindir, "all_gather_perf", corpus / ABORTED, rc=1)
    cfg = config(nccl_tests=["all_gather_perf"], nccl_tests_gpus=4)
    findings = check("nccl_tests.correctness", "nccl_tests", nccl_tests_probe(probe_ctx(cfg)), cfg)
    assert [(f.status, f.code) for f in findings] == [(Status.FAIL, "invalid_usage")]
    assert "common.cu:958" in findings[0].summary


def test_every_configured_binary_runs_in_order_from_the_configured_dir(tmp_path: Path, corpus: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    log = tmp_path / "argv"
    build = tmp_path / "nccl-tests" / "build"
    for name in ("all_reduce_perf", "all_gather_perf"):
        replay(build, name, corpus / HEALTHY, argv_log=log, before=f"echo {name} >> {log}")
    cfg = config(nccl_tests_dir=str(build), nccl_tests_gpus=2)
    facts = nccl_tests_probe(probe_ctx(cfg, suite="full"))
    full = " ".join(["-g", "2", *diagnostics_config(cfg).nccl_tests_args_full])
    assert log.read_text().splitlines() == ["all_reduce_perf", full, "all_gather_perf", full]
    assert [r.name for r in facts.runs] == ["all_reduce_perf", "all_gather_perf"] and facts.not_found == []


def test_absent_binaries_are_a_skip_with_the_reason(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    findings = check("nccl_tests.correctness", "nccl_tests", nccl_tests_probe(probe_ctx()))
    assert statuses(findings) == [("SKIP", "n1", "not_run")]
    assert "no nccl-tests binary found (all_reduce_perf, all_gather_perf; looked in PATH)" in findings[0].summary


def test_no_gpu_is_a_skip(bindir: Path, corpus: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    log = tmp_path / "argv"
    replay(bindir, "all_reduce_perf", corpus / HEALTHY, argv_log=log)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    monkeypatch.setattr("gpu_preflight.backends.pci.nvidia_gpus", lambda root="": [])
    findings = check("nccl_tests.bandwidth", "nccl_tests", nccl_tests_probe(probe_ctx(config(nccl_tests=[
        "all_reduce_perf"]))))
    assert statuses(findings) == [("SKIP", "n1", "not_run")] and "no NVIDIA GPU" in findings[0].summary
    assert not log.exists()


def test_gpu_count_from_the_pci_bus_narrowed_by_cuda_visible_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    from gpu_preflight.probes.nccl_tests import local_gpu_count

    monkeypatch.setattr("gpu_preflight.backends.pci.nvidia_gpus", lambda root="": [f"0000:{i:02x}:00.0"
                                                                                  for i in range(8)])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert local_gpu_count() == 8
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    assert local_gpu_count() == 2


def test_not_run_by_one_rank_of_a_launched_job(bindir: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    replay(bindir, "all_reduce_perf", corpus / HEALTHY)
    for key, value in TORCHRUN_ENV.items():
        monkeypatch.setenv(key, value)
    findings = check("nccl_tests.correctness", "nccl_tests",
                     nccl_tests_probe(probe_ctx(config(nccl_tests_gpus=8))))
    assert statuses(findings) == [("SKIP", "n1", "not_run")] and "mpirun/srun" in findings[0].summary


def test_hung_binary_is_an_error_and_stops_the_rest(bindir: Path, corpus: Path, tmp_path: Path) -> None:
    hang(bindir, "all_reduce_perf")
    log = tmp_path / "argv"
    replay(bindir, "all_gather_perf", corpus / HEALTHY, argv_log=log)
    cfg = config(nccl_tests_gpus=8, nccl_tests_timeout_s=1.0)
    findings = check("nccl_tests.correctness", "nccl_tests", nccl_tests_probe(probe_ctx(cfg)), cfg)
    assert statuses(findings) == [("ERROR", "n1/all_reduce_perf", "tool_timeout")]
    assert "all_reduce_perf -g 8" in findings[0].summary and "within 1 s" in findings[0].summary
    assert not log.exists()


def test_non_zero_exit_without_a_reason_is_an_error(bindir: Path, corpus: Path) -> None:
    replay(bindir, "all_reduce_perf", corpus / HEALTHY, rc=3)
    cfg = config(nccl_tests=["all_reduce_perf"], nccl_tests_gpus=8)
    findings = check("nccl_tests.correctness", "nccl_tests", nccl_tests_probe(probe_ctx(cfg)), cfg)
    assert ("ERROR", "n1/all_reduce_perf", "tool_exit") in statuses(findings)
    assert Status.worst(f.status for f in findings) is Status.ERROR
