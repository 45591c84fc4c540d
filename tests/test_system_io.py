"""``system.io``: storage throughput and fsync latency of the configured directories (issue 29 item 4).

The thresholds are a boundary table on the pure rule; the measurement is a real one on this
machine's file systems, asserted for what it must always be (a figure, the file gone, never a
PASS without a measurement) and never for a speed, which depends on the machine's load.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_preflight.checks.system_io import judge_io
from gpu_preflight.model import Status
from gpu_preflight.records.storage import IoMeasurement

from .conftest import H200_DUMP

ENV = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
NAN = float("nan")


def _m(write: float = 1000, read: float = 1000, fsync: float = 1.0) -> IoMeasurement:
    return IoMeasurement("/d", 256 << 20, True, write, read, fsync, fsync * 3, 32, False)


@pytest.mark.parametrize(("m", "status", "code"), [
    (_m(), Status.PASS, "ok"),
    (_m(write=500), Status.PASS, "ok"),  # at the warn threshold: not below it
    (_m(write=499.9), Status.WARN, "slow_write"),
    (_m(read=499.9), Status.WARN, "slow_read"),
    (_m(write=100), Status.WARN, "slow_write"),
    (_m(write=99.9), Status.FAIL, "slow_write"),
    (_m(read=99.9, write=400), Status.FAIL, "slow_read"),  # the worse of the two names the code
    (_m(fsync=50), Status.PASS, "ok"),
    (_m(fsync=50.1), Status.WARN, "slow_fsync"),
    (_m(fsync=1000.1), Status.FAIL, "slow_fsync"),
    (_m(fsync=NAN), Status.ERROR, "slow_fsync"),  # no fsync measured before the deadline: never a pass
    (_m(read=NAN), Status.ERROR, "slow_read"),
])
def test_boundaries(m: IoMeasurement, status: Status, code: str) -> None:
    assert judge_io(m, 100, 500, 50, 1000) == (status, code)


def _run(*args: str) -> tuple[int, list[dict[str, object]]]:
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--no-history", "--format", "json", *args],
                         capture_output=True, text=True, timeout=300, env=ENV)
    found = [f for f in json.loads(out.stdout)["findings"] if f["check_id"] == "system.io"]
    return out.returncode, found


def _paths(*paths: Path | str) -> str:
    return "system.io_paths=" + json.dumps([str(p) for p in paths])


def test_a_real_measurement_leaves_nothing_behind(tmp_path: Path) -> None:
    code, found = _run("--check", "system.io", "--set", _paths(tmp_path), "--set", "system.io_size_mib=16")
    assert len(found) == 1, found
    f = found[0]
    assert f["status"] in ("PASS", "WARN", "FAIL") and f["subject"].endswith(f":{tmp_path}")
    d = f["details"]
    assert d["write_mbps"] > 0 and d["read_mbps"] > 0 and d["fsyncs"] == 32 and d["bytes"] == 16 << 20
    assert list(tmp_path.iterdir()) == []  # the measurement file is removed
    assert code == {"PASS": 0, "WARN": 1, "FAIL": 2}[f["status"]]


def test_a_directory_that_cannot_be_measured_is_an_error(tmp_path: Path) -> None:
    code, found = _run("--check", "system.io", "--set", _paths(tmp_path / "missing", tmp_path))
    by_path = {f["subject"].rsplit(":", 1)[1]: f for f in found}
    assert by_path[str(tmp_path / "missing")]["status"] == "ERROR"
    assert "not a directory" in by_path[str(tmp_path / "missing")]["summary"]
    assert code in (2, 3)  # ERROR gates the run; a FAIL elsewhere outranks it, a PASS never does


def test_a_deadline_gives_a_figure_marked_cut_short_or_an_error(tmp_path: Path) -> None:
    _, found = _run("--check", "system.io", "--set", _paths(tmp_path), "--set", "system.io_timeout_s=0.000001")
    f = found[0]
    assert f["status"] == "ERROR" or f["details"]["cut_short"] is True, f
    assert list(tmp_path.iterdir()) == []


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tiny tmpfs needs root")
def test_a_nearly_full_file_system_is_not_filled(tmp_path: Path) -> None:
    small = tmp_path / "small"
    small.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(small)], check=False).returncode:
        pytest.skip("cannot mount tmpfs here")
    try:
        _, found = _run("--check", "system.io", "--set", _paths(small))
        assert found[0]["status"] == "ERROR" and "too little to measure" in found[0]["summary"]
        assert list(small.iterdir()) == []
    finally:
        subprocess.run(["umount", str(small)], check=False)


def test_only_a_full_run_measures_and_a_replay_measures_nothing(tmp_path: Path) -> None:
    _, quick = _run("--replay", str(H200_DUMP), "--check", "system.*")
    assert quick and all(f["status"] == "SKIP" for f in quick)  # named explicitly: runs, and a replay skips
    _, unnamed = _run("--replay", str(H200_DUMP))
    assert unnamed == []  # not in the quick suite
