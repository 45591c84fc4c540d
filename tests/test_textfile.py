"""The Prometheus textfile: promtool accepts it (no lint issues), it carries the run's statuses and
numbers in base units, and it replaces the .prom file atomically."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from gpu_preflight import build_report, run_checks
from gpu_preflight.findings.model import Assessment, ClusterReport
from gpu_preflight.outputs.textfile import render_textfile, write_textfile
from gpu_preflight.report.scores import compute_scores

from .conftest import H200_DUMP
from .history_data import REMAP_FAILURE, cluster_run, gpus


def promtool() -> str:
    path = shutil.which("promtool")
    if path is None:
        pytest.fail("promtool not found: install Debian's prometheus package (scripts/test.sh does)")
    return path


def check_metrics(text: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=30)


def samples(text: str) -> dict[str, float]:
    return {line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
            if line and not line.startswith("#")}


@pytest.fixture(scope="module")
def failing_cluster() -> dict[str, Any]:
    a = gpus("aa")
    a[1].faults = dict(REMAP_FAILURE)
    return cluster_run({"h0": a, "h1": gpus("bb")}, node_fabric={"h1": 430.0})


def test_a_cluster_report_passes_promtool_with_statuses_and_numbers(failing_cluster: dict[str, Any]) -> None:
    text = render_textfile(ClusterReport.of(failing_cluster), cluster="c1")
    result = check_metrics(text)
    assert result.returncode == 0, result.stdout + result.stderr  # 0: valid and lint-clean (3 would be lint)
    s = samples(text)
    assert s['gpu_preflight_run_status{status="fail"}'] == 1 and s['gpu_preflight_run_status{status="pass"}'] == 0
    assert s['gpu_preflight_check_status{check="gpu.memory.remap",subject="h0/gpu1",status="fail"}'] == 1
    assert s['gpu_preflight_check_status{check="gpu.memory.remap",subject="h0/gpu0",status="pass"}'] == 1
    assert s['gpu_preflight_bus_bandwidth_bytes_per_second{node="h1",scope="intra_node",op="all_reduce",'
             'ranks="2"}'] == 430e9
    uuid = gpus("aa")[0].uuid
    assert s[f'gpu_preflight_gemm_flops_per_second{{node="h0",gpu="0",uuid="{uuid}",dtype="bf16"}}'] == 700e12
    assert s[f'gpu_preflight_memory_bandwidth_bytes_per_second{{node="h0",gpu="0",uuid="{uuid}",'
             'kind="device_copy"}'] == 4000e9
    assert s[f'gpu_preflight_gpu_temperature_celsius{{node="h0",gpu="0",uuid="{uuid}"}}'] == 31
    assert s['gpu_preflight_run_exit_code'] == 2 and s['gpu_preflight_run_nodes'] == 2
    assert s['gpu_preflight_findings{status="fail"}'] == 1
    assert 'gpu_preflight_report_info{' in text and 'cluster="c1"' in text
    assert text.count("# TYPE gpu_preflight_check_status gauge") == 1


def test_a_node_only_report_and_health_scores() -> None:
    typed = ClusterReport.of(build_report([run_checks(replay=str(H200_DUMP), environ={})]))
    scores = compute_scores(typed)
    scores = replace(scores, overall=replace(scores.overall, score=92.5))
    assert scores.components["performance_consistency"].score is None  # a node run measures no spread
    text = render_textfile(typed.with_assessment(Assessment(scores)))
    assert check_metrics(text).returncode == 0
    s = samples(text)
    assert s['gpu_preflight_health_score{component="overall"}'] == 92.5
    assert 'component="performance_consistency"' not in text  # not measured is not a fake number
    assert "gpu_preflight_gemm_flops_per_second" not in text


def test_promtool_really_rejects_what_it_should() -> None:
    assert check_metrics("gpu_preflight_x{a=\"1\"} -bad-\n").returncode == 1  # the gate is not a no-op


def test_the_file_is_replaced_atomically(tmp_path: Path, failing_cluster: dict[str, Any]) -> None:
    target = tmp_path / "textfile" / "gpu_preflight.prom"
    write_textfile(ClusterReport.of(failing_cluster), target)
    first = target.stat().st_ino
    write_textfile(ClusterReport.of(failing_cluster), target)
    assert target.stat().st_ino != first  # a new file renamed over the old one, never rewritten in place
    assert sorted(p.name for p in target.parent.iterdir()) == ["gpu_preflight.prom"]  # no temporary left
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert check_metrics(target.read_text()).returncode == 0
    with pytest.raises(ValueError, match=r"\.prom"):
        write_textfile(ClusterReport.of(failing_cluster), tmp_path / "metrics.txt")


def test_a_failed_write_leaves_the_old_file(tmp_path: Path, failing_cluster: dict[str, Any],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "gpu_preflight.prom"
    target.write_text("old\n")

    def broken(*args: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", broken)
    with pytest.raises(OSError, match="disk full"):
        write_textfile(ClusterReport.of(failing_cluster), target)
    assert target.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["gpu_preflight.prom"]
