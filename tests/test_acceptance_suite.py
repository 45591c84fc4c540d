"""Spec 004, the acceptance suite's interface: ``--report-name``, ``--verbose``'s progress lines,
``ddp_training_result.json`` and the workload-size flags.

The runs are real: two gloo CPU ranks under the self-launch supervisor and under torchrun,
each under an outer timeout.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gpu_preflight.cli.main import main
from gpu_preflight.cli.run_flags import FLAG_SETTINGS, MAX_STEPS, NUMEL_BYTES, size_overrides
from gpu_preflight.config.fields import value_range
from gpu_preflight.config.schema import WorkloadConfig

from .conftest import REPO

BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_PREFLIGHT_", "RANK", "LOCAL_RANK",
                                                                       "WORLD_SIZE", "MASTER_", "SLURM_", "OMPI_"))}
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
SIZES = ["--iters", "2", "--numel", "1024", "--steps", "10", "--epochs", "2"]


def _range(key: str) -> tuple[float, float]:
    field = {f.name: f for f in dataclasses.fields(WorkloadConfig)}[key.removeprefix("workload.")]
    bounds = value_range(field, int)
    assert bounds is not None
    return bounds.low, bounds.high


def test_the_size_flags_take_exactly_the_ranges_of_the_settings_they_set() -> None:
    """The flags' ranges (checked at parse time below) are the settings': --numel in elements of 4 bytes."""
    assert _range("workload.collective_iters") == (1, 10_000)
    assert {_range(k) for k in FLAG_SETTINGS["numel"]} == {(1, (64 << 30))}
    assert (64 << 30) // NUMEL_BYTES == 17_179_869_184
    assert _range("workload.train_steps") == (1, MAX_STEPS)


def test_the_size_flags_are_sugar_for_set() -> None:
    assert size_overrides(None, None, None, None) == []
    assert size_overrides(50, 2_000_000, 10, 3) == [
        "workload.collective_iters=50", "workload.collective_max_bytes_quick_gpu=8000000",
        "workload.collective_max_bytes_full_gpu=8000000", "workload.collective_max_bytes_cpu=8000000",
        "workload.train_steps=30"]
    assert size_overrides(None, None, 7, None) == ["workload.train_steps=7"]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--iters", "0"], "argument --iters: must be a whole number in [1, 10000]"),
    (["--iters", "10001"], "argument --iters: must be a whole number in [1, 10000]"),
    (["--numel", "17179869185"], "argument --numel: must be a whole number in [1, 17179869184]"),
    (["--iters", "1.5"], "argument --iters: must be a whole number"),
    (["--numel", "0"], "argument --numel: must be a whole number in [1, 17179869184]"),
    (["--steps", "100001"], "argument --steps: must be a whole number in [1, 100000]"),
    (["--epochs", "-1"], "argument --epochs: must be a whole number"),
    (["--report-name", "../report.json"], "argument --report-name: must be a bare file name"),
    (["--report-name", "sub/r.json"], "argument --report-name: must be a bare file name"),
    (["--report-name", "report.html"], "argument --report-name: 'report.html' is a name the report directory"),
])
def test_bad_values_are_a_one_line_usage_error(argv: list[str], fragment: str,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--node-only", "--no-history", *argv])
    assert exc.value.code == 3
    (line,) = capsys.readouterr().err.splitlines()
    assert fragment in line


@pytest.mark.parametrize(("argv", "line"), [
    (["--epochs", "2"], "gpu-preflight run: error: argument --epochs: needs --steps (the steps of one epoch) "
                        "(see 'gpu-preflight run --help')"),
    (["--steps", "50000", "--epochs", "3"],
     "gpu-preflight run: error: argument --epochs: --steps x --epochs must be at most 100000, got 150000 "
     "(see 'gpu-preflight run --help')"),
])
def test_combinations_the_settings_cannot_hold_are_one_line_too(argv: list[str], line: str,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--node-only", "--no-history", *argv]) == 3
    assert capsys.readouterr().err.splitlines() == [line]


def _check_acceptance_outputs(out: subprocess.CompletedProcess[str], report_dir: Path) -> None:
    assert out.returncode in (0, 1), out.stderr[-3000:]
    report = json.loads(out.stdout)  # stdout holds the JSON alone: the progress lines went to stderr
    assert (report_dir / "acceptance.json").is_file() and not (report_dir / "report.json").exists()
    lines = out.stderr.splitlines()
    env = [line for line in lines if line.startswith("[ENV] ")]
    assert len(env) == 1 and re.search(r"torch=\S+ .*cuda_device_count=0 .*world_size=2 nodes=1", env[0])
    compute = [line for line in lines if line.startswith("[COMPUTE] ")]
    assert len(compute) == 2 and all(re.search(r" dtype=fp32 n=\d+ GFLOP/s=\d+\.\d correct=True$", c)
                                     for c in compute)
    train = [line for line in lines if line.startswith("[TRAIN] ")]
    assert len(train) == 2 and all(re.search(r"start_loss=\d\.\d{4} end_loss=\d\.\d{4} improved=(True|False)", t)
                                   for t in train)
    (ddp,) = [line for line in lines if line.startswith("[DDP] ")]
    assert re.search(r"^\[DDP\] all_reduce world_size=2 numel=1024 .* ok=True$", ddp), ddp  # --numel 1024
    (ddp_train,) = [line for line in lines if line.startswith("[DDP_TRAIN] ")]
    assert "world_size=2 steps=20 " in ddp_train  # --steps 10 --epochs 2
    order = [next(i for i, line in enumerate(lines) if line.startswith(p))
             for p in ("[ENV]", "[COMPUTE]", "[TRAIN]", "[DDP]", "[DDP_TRAIN]")]
    assert order == sorted(order)
    result = json.loads((report_dir / "ddp_training_result.json").read_text())
    assert {"improved", "start_loss", "end_loss", "world_size", "steps", "backend"} <= set(result)
    assert result["world_size"] == 2 and result["steps"] == 20 and result["backend"] == "gloo"
    assert result["start_loss"] > 0 and result["end_loss"] > 0
    assert result["improved"] == (result["end_loss"] <= result["start_loss"] * 0.8)  # perf.train_min_loss_drop
    ddp_findings = [f for f in report["findings"] if f["subject"] == "cluster" and "ddp" in f["summary"].lower()]
    assert ddp_findings, "the report judges the same DDP smoke"
    all_reduce = report["nodes"]["node_0"]["nccl"]["communication_tests"]["distributed_all_reduce"]
    assert all_reduce["results"][-1]["size_bytes"] == 1024 * 4


def test_self_launched_run_prints_the_suite_lines_and_writes_its_files(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--format", "json", "--verbose",
                          "--no-history", "--timeout-s", "30", "--report-dir", str(tmp_path),
                          "--report-name", "acceptance.json", *SIZES],
                         capture_output=True, text=True, timeout=300, env=BASE_ENV, cwd=REPO)
    _check_acceptance_outputs(out, tmp_path)


def test_under_torchrun_rank_0_prints_the_lines_and_writes_the_files(tmp_path: Path) -> None:
    out = subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "gpu_preflight", "run",
                          "--format", "json", "--verbose", "--quiet", "--no-history", "--timeout-s", "30",
                          "--report-dir", str(tmp_path), "--report-name", "acceptance.json", *SIZES],
                         capture_output=True, text=True, timeout=300, env={**BASE_ENV, "OMP_NUM_THREADS": "1"},
                         cwd=REPO)
    _check_acceptance_outputs(out, tmp_path)
