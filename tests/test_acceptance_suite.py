"""Spec 004, the acceptance suite's interface: ``--report-name``, ``--verbose``'s progress lines,
``ddp_training_result.json`` and the workload-size flags.

The runs are real: two gloo CPU ranks under the self-launch supervisor and under torchrun,
each under an outer timeout.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cli.main import main
from gpu_preflight.cli.run_flags import FLAG_SETTINGS, MAX_BATCH, MAX_STEPS, NUMEL_BYTES, size_overrides
from gpu_preflight.config.fields import setting_fields, value_range
from gpu_preflight.config.schema import WorkloadConfig

from .conftest import REPO
from .torch_extra import needs_torch

BASE_ENV = {k: v for k, v in os.environ.items() if not k.startswith(("GPU_PREFLIGHT_", "RANK", "LOCAL_RANK",
                                                                       "WORLD_SIZE", "MASTER_", "SLURM_", "OMPI_"))}
TORCHRUN = str(Path(sys.executable).with_name("torchrun"))
SUBJECT = f"{os.uname().nodename}/rank"  # a CPU worker's subject
SIZES = ["--iters", "2", "--numel", "1024", "--steps", "10", "--epochs", "2"]


def _range(key: str) -> tuple[float, float]:
    field = {f.name: f for f in setting_fields(WorkloadConfig)}[key.removeprefix("workload.")]
    bounds = value_range(field, int)
    assert bounds is not None
    return bounds.low, bounds.high


def test_the_size_flags_take_exactly_the_ranges_of_the_settings_they_set() -> None:
    """The flags' ranges (checked at parse time below) are the settings': --numel in elements of 4 bytes."""
    assert {_range(k) for k in FLAG_SETTINGS["iters"]} == {(1, 10_000)}
    assert {_range(k) for k in FLAG_SETTINGS["numel"]} == {(1, (64 << 30))}
    assert (64 << 30) // NUMEL_BYTES == 17_179_869_184
    assert _range("workload.train_steps") == (1, MAX_STEPS)
    assert _range("workload.train_batch_size") == (1, MAX_BATCH)


def test_the_size_flags_are_sugar_for_set() -> None:
    assert size_overrides(None, None, None, None) == []
    assert size_overrides(50, 2_000_000, 10, 3) == [
        "workload.collective_iters=50", "workload.collective_iters_cpu=50",
        "workload.collective_max_bytes_quick_gpu=8000000",
        "workload.collective_max_bytes_full_gpu=8000000", "workload.collective_max_bytes_cpu=8000000",
        "workload.collective_scaling=false", "workload.train_steps=30"]
    assert size_overrides(None, None, 7, None) == ["workload.train_steps=7"]
    assert size_overrides(None, None, None, None, 64) == ["workload.train_batch_size=64"]


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--iters", "0"], "argument --iters: must be a whole number in [1, 10000]"),
    (["--iters", "10001"], "argument --iters: must be a whole number in [1, 10000]"),
    (["--numel", "17179869185"], "argument --numel: must be a whole number in [1, 17179869184]"),
    (["--iters", "1.5"], "argument --iters: must be a whole number"),
    (["--numel", "0"], "argument --numel: must be a whole number in [1, 17179869184]"),
    (["--steps", "100001"], "argument --steps: must be a whole number in [1, 100000]"),
    (["--epochs", "-1"], "argument --epochs: must be a whole number"),
    (["--batch-size", "0"], "argument --batch-size: must be a whole number in [1, 65536]"),
    (["--batch-size", "65537"], "argument --batch-size: must be a whole number in [1, 65536]"),
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
    def at(prefix: str) -> int:
        return next(i for i, line in enumerate(lines) if line.startswith(prefix))

    # printed as each rank finishes a workload: in order per rank, ranks interleaved
    assert at("[ENV]") < at(f"[COMPUTE] {SUBJECT}0 ") and at("[DDP] ") < at("[DDP_TRAIN]")
    for rank in (0, 1):
        assert at(f"[COMPUTE] {SUBJECT}{rank} ") < at(f"[TRAIN] {SUBJECT}{rank} ") < at("[DDP] ")
    result = json.loads((report_dir / "ddp_training_result.json").read_text())
    assert {"improved", "start_loss", "end_loss", "world_size", "steps", "backend"} <= set(result)
    assert result["world_size"] == 2 and result["steps"] == 20 and result["backend"] == "gloo"
    assert (result["batch_size"], result["batches_per_epoch"]) == (256, 1)  # the default: a rank's whole share
    assert result["start_loss"] > 0 and result["end_loss"] > 0
    assert result["improved"] == (result["end_loss"] <= result["start_loss"] * 0.8)  # perf.train_min_loss_drop
    ddp_findings = [f for f in report["findings"] if f["subject"] == "cluster" and "ddp" in f["summary"].lower()]
    assert ddp_findings, "the report judges the same DDP smoke"
    all_reduce = report["nodes"]["node_0"]["nccl"]["communication_tests"]["distributed_all_reduce"]
    assert all_reduce["results"][-1]["size_bytes"] == 1024 * 4


@needs_torch
def test_self_launched_run_prints_the_suite_lines_and_writes_its_files(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--format", "json", "--verbose",
                          "--no-history", "--timeout-s", "30", "--report-dir", str(tmp_path),
                          "--report-name", "acceptance.json", *SIZES],
                         capture_output=True, text=True, timeout=300, env=BASE_ENV, cwd=REPO)
    _check_acceptance_outputs(out, tmp_path)


@needs_torch
def test_under_torchrun_rank_0_prints_the_lines_and_writes_the_files(tmp_path: Path) -> None:
    out = subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node", "2", "-m", "gpu_preflight", "run",
                          "--format", "json", "--verbose", "--quiet", "--no-history", "--timeout-s", "30",
                          "--report-dir", str(tmp_path), "--report-name", "acceptance.json", *SIZES],
                         capture_output=True, text=True, timeout=300, env={**BASE_ENV, "OMP_NUM_THREADS": "1"},
                         cwd=REPO)
    _check_acceptance_outputs(out, tmp_path)


def _gathered(*, all_reduce_ok: bool, ddp_loss_end: float) -> dict[str, Any]:
    """Two GPU ranks' payloads as rank 0 gathers them (results still in the payloads)."""
    stack = {"torch_version": "2.5.1", "torch_cuda": "12.4", "nccl_version": "2.21.5", "cuda_available": True,
             "device_count": 2}
    gpu = {"driver_version": "580.95", "gpus": [{"name": "NVIDIA H200"}, {"name": "NVIDIA H200"}]}
    reduce = {"op": "all_reduce", "group": "all", "scope": "distributed", "ranks": [0, 1], "success": all_reduce_ok,
              "wrong": 0 if all_reduce_ok else 3, "error": None,
              "results": [{"size_bytes": 8_000_000, "time_us": 812.5, "busbw_gbps": 9.85}]}
    payloads: dict[int, dict[str, Any]] = {}
    for rank in (0, 1):
        payloads[rank] = {
            "rank": rank, "local_rank": rank, "node_rank": 0, "device": f"cuda:{rank}", "stack": stack,
            "gemm": [{"dtype": "bf16", "n": 8192, "tflops": 701.2345, "correct": True, "rel_error": 1e-3,
                      "error": None}],
            "train": {"loss_start": 2.5, "loss_end": 0.5, "finite": True, "improved": True, "error": None},
            "collectives": [reduce] if rank == 0 else []}
    payloads[0]["ddp"] = {"mode": "ddp", "steps": 40, "loss_start": 2.5, "loss_end": ddp_loss_end,
                          "finite": ddp_loss_end == ddp_loss_end, "improved": False, "params_identical": True,
                          "odd_ranks": [], "error": None}
    payloads[0]["node_entry"] = {"section": {"facts": {"gpu": gpu}}}
    return {"payloads": payloads, "missing": {},
            "topology": {"world_size": 2, "num_nodes": 1, "local_world_size": 2, "hosts": ["gpu-a"]}}


def _told(gathered: dict[str, Any]) -> list[str]:
    """The lines of the gathered ranks' results heard as each rank tells them (``rank.ResultSink``),
    in the order the workloads run, each rank through its own :class:`LiveLines`."""
    from gpu_preflight.backends.launcher.topology import Launcher, Topology
    from gpu_preflight.outputs.acceptance import LiveLines

    payloads, lines = gathered["payloads"], []
    gpu = payloads[0]["node_entry"]["section"]["facts"]["gpu"]
    ranks = {r: (Topology(launcher=Launcher.TORCHRUN, world_size=2, rank=r, local_rank=r, local_world_size=2,
                          node_rank=0, num_nodes=1, hostname="gpu-a"), LiveLines(lines.append))
             for r in sorted(payloads)}
    for name in ("env", "gemm", "train"):
        for r, (topo, live) in ranks.items():
            live(topo, name, {"stack": payloads[r]["stack"], "gpu": gpu} if name == "env" else payloads[r][name])
    for r, (topo, live) in ranks.items():
        for entry in payloads[r]["collectives"]:
            live(topo, "collective", entry)
        if "ddp" in payloads[r]:
            live(topo, "ddp", payloads[r]["ddp"])
    return lines


def test_the_lines_of_a_gpu_job_and_a_failed_all_reduce(tmp_path: Path) -> None:
    from gpu_preflight.cluster.aggregate import cluster_facts
    from gpu_preflight.outputs.acceptance import ddp_training_result, write_ddp_training_result

    gathered = _gathered(all_reduce_ok=False, ddp_loss_end=float("nan"))
    lines = _told(gathered)
    assert len(lines) == 7, lines
    assert lines[0].endswith('world_size=2 nodes=1 driver=580.95 gpus="2x NVIDIA H200"')
    assert lines[1:3] == ["[COMPUTE] gpu-a/gpu0 dtype=bf16 n=8192 GFLOP/s=701234.5 correct=True",
                          "[COMPUTE] gpu-a/gpu1 dtype=bf16 n=8192 GFLOP/s=701234.5 correct=True"]
    assert lines[3] == "[TRAIN] gpu-a/gpu0 start_loss=2.5000 end_loss=0.5000 improved=True"
    assert lines[5] == ("[DDP] all_reduce world_size=2 numel=2000000 time_us=812.5 busbw_gbps=9.85 wrong=3 "
                        "ok=False")
    assert lines[6] == ("[DDP_TRAIN] world_size=2 steps=40 start_loss=2.5000 end_loss=n/a improved=False "
                        "params_identical=True")
    result = ddp_training_result(cluster_facts(gathered))
    assert result is not None and result["end_loss"] is None and result["backend"] == "nccl"
    write_ddp_training_result(str(tmp_path), result)
    assert json.loads((tmp_path / "ddp_training_result.json").read_text())["end_loss"] is None  # valid JSON


def test_the_ddp_result_file_replaces_a_planted_link_instead_of_writing_through_it(tmp_path: Path) -> None:
    from gpu_preflight.outputs.acceptance import write_ddp_training_result

    target = tmp_path / "elsewhere.json"
    target.write_text("keep\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / "ddp_training_result.json").symlink_to(target)
    write_ddp_training_result(str(out), {"improved": True})
    assert target.read_text() == "keep\n"  # the link was replaced, not followed
    assert json.loads((out / "ddp_training_result.json").read_text()) == {"improved": True}
