"""The history, textfile and baseline capture on two reports recorded on a real H200
(tests/fixtures/history): GPU identity from live NVML, GEMM from the real CUDA workload."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.history import HistoryStore, extract, history_findings
from gpu_preflight.history.baseline import capture
from gpu_preflight.model import Status
from gpu_preflight.outputs.textfile import render_textfile

from .conftest import FIXTURES
from .test_textfile import promtool

UUID = "GPU-06204ea9-6c7d-eb40-f7ef-90fdd49ff6e7"


CLOCK = datetime(2026, 12, 1, tzinfo=UTC)  # a fixed clock after the recordings: no test here reads the calendar


def recorded(i: int) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((FIXTURES / "history" / f"h200-run{i}-report.json").read_text())
    return data


def test_cuda_rank_numbers_are_tied_to_the_nvml_uuid() -> None:
    run = extract(ClusterReport.of(recorded(1)))
    assert [(g.slot, g.uuid, g.serial, g.model) for g in run.gpus] == [
        ("gpu0", UUID, "1654924064098", "NVIDIA H200")]
    gemm = {m.metric: m for m in run.measurements if m.metric.startswith("gemm.")}
    assert set(gemm) == {"gemm.bf16", "gemm.fp16", "gemm.tf32", "gemm.fp32"}
    assert gemm["gemm.bf16"].value == pytest.approx(670.1097) and gemm["gemm.bf16"].uuid == UUID
    failed = [(f.check_id, f.uuid) for f in run.findings if f.status == "FAIL"]
    assert failed == [("memory.bandwidth", UUID)]


def test_the_second_run_is_judged_against_the_first(tmp_path: Path) -> None:
    with HistoryStore(tmp_path / "h.sqlite") as store:
        store.record(extract(ClusterReport.of(recorded(1))), "h200", now=CLOCK)
        found = {f.check_id: f for f in history_findings(ClusterReport.of(recorded(2)), store, None, "h200",
                                                          now=CLOCK)}
    assert (found["history.regression"].status, found["history.regression"].observed) == (Status.PASS, 4)
    offender = found["history.repeat_offender"]
    assert (offender.status, offender.subject, offender.code) == (Status.WARN, "vm/gpu0", "failed_before")
    assert "memory.bandwidth FAIL on vm" in offender.summary


def test_textfile_and_capture_of_a_real_gpu_run() -> None:
    text = render_textfile(ClusterReport.of(recorded(2)))
    check = subprocess.run([promtool(), "check", "metrics"], input=text, capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    assert f'gpu_preflight_gemm_flops_per_second{{node="vm",gpu="0",uuid="{UUID}",dtype="bf16"}}' in text
    perf = capture(extract(ClusterReport.of(recorded(1))).measurements, source="h200 run 1").perf
    assert perf == {"gemm_bf16_tflops": 670.1, "gemm_fp16_tflops": 640.8, "gemm_tf32_tflops": 348.7,
                    "gemm_fp32_tflops": 50.93}


def test_the_repeat_offender_window_counts_back_from_the_run_not_from_today(tmp_path: Path) -> None:
    """A report judged long after it ran still sees the failure of the run before it, and a failure more
    than the window (365 days) before a run does not count however the two compare with today: the
    window ends at the run's own timestamp, not at this machine's clock."""
    first = dict(recorded(1), timestamp="2024-01-10T00:00:00+00:00")
    second = recorded(2)  # 2026-11-26: more than a year after the first
    soon = dict(recorded(2), timestamp="2024-06-01T00:00:00+00:00")
    with HistoryStore(tmp_path / "h.sqlite") as store:
        store.record(extract(ClusterReport.of(first)), "h200", now=CLOCK)
        codes = {(name, days): f.code for name, r in (("second", second), ("soon", soon)) for days in (0, 3000)
                 for f in history_findings(ClusterReport.of(r), store, None, "h200", now=CLOCK + timedelta(days=days))
                 if f.check_id == "history.repeat_offender"}
    # judged today and eight years on alike (the old code counted back from the clock: 'soon' was 'ok' on both)
    assert codes == {("second", 0): "ok", ("second", 3000): "ok",
                     ("soon", 0): "failed_before", ("soon", 3000): "failed_before"}
