"""Benches refuse to print a figure they did not measure: a Python without the package, or a
subprocess that failed, ends the bench with one "cannot measure" line and exit 2 (``bench/_selfcheck.py``).
A new bench joins ``BENCHES``."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
BENCHES = ["bench_aggregate.py", "bench_allreduce.py", "bench_fuzz.py", "bench_gemm.py", "bench_localize.py",
           "bench_monitor.py", "bench_node_live.py", "bench_node_run.py", "bench_run_vs_torchrun.py",
           "bench_sampler.py", "bench_server.py", "bench_end_of_run.py", "bench_field.py",
           "bench_history_import.py"]
sys.path.insert(0, str(REPO / "bench"))

from _selfcheck import Ran, timed  # noqa: E402
from bench_node_run import judged  # noqa: E402


@pytest.mark.parametrize("bench", BENCHES)
def test_a_python_without_the_package_measures_nothing(bench: str) -> None:
    # -S: no site-packages, so neither gpu_preflight (installed there) nor torch/psutil import.
    proc = subprocess.run([sys.executable, "-S", str(REPO / "bench" / bench)], capture_output=True, text=True,
                          timeout=60, cwd=REPO)
    assert proc.returncode == 2, proc.stderr
    assert proc.stdout == ""
    first = proc.stderr.splitlines()[0]
    assert first.startswith(f"{bench[:-3]}: cannot measure: {sys.executable} cannot import ")
    assert "pip install '.[torch]'" in first


def test_a_failed_subprocess_stops_the_bench(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as stop:
        timed("bench_x", [sys.executable, "-c", "import sys; print('boom', file=sys.stderr); sys.exit(1)"],
              what="the thing")
    assert stop.value.code == 2
    err = capsys.readouterr().err.splitlines()
    assert err[0].startswith("bench_x: cannot measure: the thing failed (exit 1): ") and err[1] == "boom"
    assert timed("bench_x", [sys.executable, "-c", "print(1)"], what="ok").stdout == "1\n"


def test_node_run_bench_accepts_only_a_verdict() -> None:
    assert judged(Ran(1, "", "WARN ...\n[RESULT] WARNING: [system.cpu]\n", 0.1))
    assert not judged(Ran(1, "", "ModuleNotFoundError: No module named 'gpu_preflight'\n", 0.1))
    assert not judged(Ran(3, "", "[RESULT] ERROR: [run.coverage]\n", 0.1))
