"""Issue 29, items 12-14: the acceptance-suite document (spec 004) followed as written.

12. Every command line of the document, with its program replaced by ours
    (``python src/run_all_tests.py`` / ``gpu_tests.py`` -> ``gpu-preflight run``,
    ``torchrun ... src/ddp_tests.py`` -> ``torchrun ... -m gpu_preflight run``), runs: real CPU
    workers under the self-launch supervisor or torchrun, each under an outer timeout.
13. ``--iters`` reaches CPU workers; the ``[ENV]`` line lists the GPUs NVML sees although CUDA
    is not up (torchrun with the stub ``libnvidia-ml.so.1``); the ``[SUMMARY]`` line gives each
    of the suite's programs its return code.
14. ``--expect-gpus 0`` judges the locked-memory limit not applicable (SKIP) and every other
    host check as always, so a GPU-less CI host can exit 0.
"""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

from gpu_preflight.cli.main import build_parser
from gpu_preflight.cli.run_cmd import run_request
from gpu_preflight.config import Config, build_config
from gpu_preflight.distributed.plan import make_plan
from gpu_preflight.model import Status
from gpu_preflight.outputs.acceptance import suite_summary

from .conftest import REPO
from .nvml_stub.stub import stub_env, write_stub_data
from .test_acceptance_suite import BASE_ENV, TORCHRUN
from .test_system_checks import healthy, judge, outcome
from .torch_extra import HAS_TORCH, NO_TORCH, needs_torch

GIB = 1024**3
SUMMARY = re.compile(r"^\[SUMMARY\] gpu_tests rc=(\d|skipped); ddp_tests rc=(\d|skipped); ddp_train rc=(\d|skipped)$")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


# Each command line of the document, as it is written there, and the argv that runs its
# equivalent here: {REPORTS} stands for /app/reports, $(nvidia-smi -L | wc -l) for 2 CPU workers.
DOCUMENT_COMMANDS = [
    ("python src/run_all_tests.py --quick --report-dir /app/reports",
     ["run", "--quick", "--report-dir", "{REPORTS}"]),
    ("python src/run_all_tests.py --report-dir /app/reports",
     ["run", "--full", "--report-dir", "{REPORTS}"]),  # the runner without --quick is its full suite
    ("torchrun --standalone --nproc_per_node=$(nvidia-smi -L | wc -l) src/ddp_tests.py --iters=50 --numel=2000000 "
     "--report-dir /app/reports",
     ["torchrun", "--standalone", "--nproc_per_node=2", "run", "--iters=50", "--numel=2000000",
      "--report-dir", "{REPORTS}"]),
    ("torchrun --standalone --nproc_per_node=$(nvidia-smi -L | wc -l) src/ddp_tests.py --train-smoke --epochs 1 "
     "--steps 10 --report-dir /app/reports",
     ["torchrun", "--standalone", "--nproc_per_node=2", "run", "--train-smoke", "--epochs", "1", "--steps", "10",
      "--report-dir", "{REPORTS}"]),
    ("python /app/src/gpu_tests.py --quick  (srun --container-image; the image's CMD; the Kubernetes Job's "
     'command: ["python", "src/gpu_tests.py", "--quick"])',
     ["run", "--quick"]),
    ("torchrun --standalone --nproc_per_node=$(nvidia-smi -L | wc -l) /app/src/ddp_tests.py --iters=50 "
     "--numel=2000000",
     ["torchrun", "--standalone", "--nproc_per_node=2", "run", "--iters=50", "--numel=2000000"]),
    ("torchrun --nnodes=${NNODES} --nproc_per_node=${GPUS} --rdzv_backend=c10d --rdzv_endpoint=$SLURM_NODELIST:29500 "
     "/app/src/ddp_tests.py --iters=50 --numel=2000000",
     ["torchrun", "--nnodes=1", "--nproc_per_node=2", "--rdzv_backend=c10d", "--rdzv_endpoint=127.0.0.1:{PORT}",
      "run", "--iters=50", "--numel=2000000"]),
    ("Tuning and flags: --verbose, --report-dir, --report-name; --iters, --numel, --train-smoke, --epochs, "
     "--batch-size, --steps",
     ["torchrun", "--standalone", "--nproc_per_node=2", "run", "--verbose", "--report-dir", "{REPORTS}",
      "--report-name", "summary.json", "--iters", "5", "--numel", "4096", "--train-smoke", "--epochs", "2",
      "--batch-size", "64", "--steps", "3"]),
]


def _argv(template: list[str], reports: Path) -> list[str]:
    """The command to run: ``torchrun ... -m gpu_preflight run ...`` or ``python -m gpu_preflight run ...``,
    with the document's flags as written and ours (no history, a bounded run) after them."""
    port = str(_free_port())
    args = [a.replace("{REPORTS}", str(reports)).replace("{PORT}", port) for a in template]
    ours = ["--no-history", "--timeout-s", "60"]
    if args[0] == "torchrun":
        at = args.index("run")
        return [TORCHRUN, *args[1:at], "-m", "gpu_preflight", *args[at:], *ours]
    return [sys.executable, "-m", "gpu_preflight", *args, *ours]


@pytest.mark.parametrize(("document", "template"), DOCUMENT_COMMANDS, ids=[f"line{i}" for i in range(1, 9)])
def test_every_command_of_the_document_runs(document: str, template: list[str], tmp_path: Path) -> None:
    if not HAS_TORCH and template != ["run", "--quick"]:  # all but the node run start torch workers
        pytest.skip(NO_TORCH)
    reports = tmp_path / "reports"
    out = subprocess.run(_argv(template, reports), capture_output=True, text=True, timeout=420, cwd=tmp_path,
                         env={**BASE_ENV, "OMP_NUM_THREADS": "1"})
    assert "unrecognized arguments" not in out.stderr and "error: argument" not in out.stderr, out.stderr[-2000:]
    assert out.returncode in (0, 1, 2), f"{document}\n{out.stderr[-3000:]}"  # a verdict, never a usage error (3)
    assert re.search(r"^\[RESULT\] (SUCCESS|WARNING|FAILURE)", out.stderr, re.M), out.stderr[-2000:]
    if "{REPORTS}" not in template:
        return
    name = template[template.index("--report-name") + 1] if "--report-name" in template else "report.json"
    report = json.loads((reports / name).read_text())
    nodes = report["nodes"]["node_0"]
    reduce = nodes["nccl"]["communication_tests"]["distributed_all_reduce"]
    if "--numel=2000000" in template:
        assert reduce["results"][-1]["size_bytes"] == 2_000_000 * 4
    result = json.loads((reports / "ddp_training_result.json").read_text())
    if "--steps" in template:
        steps = int(template[template.index("--steps") + 1]) * int(template[template.index("--epochs") + 1])
        assert result["steps"] == steps and result["world_size"] == 2
    if "--batch-size" in template:
        assert result["batch_size"] == 64
    if "--verbose" in template:
        (line,) = [x for x in out.stderr.splitlines() if x.startswith("[SUMMARY] ")]
        match = SUMMARY.match(line)
        assert match and "skipped" not in line, line  # two ranks: all three programs ran


def _plan_of(argv: list[str]) -> Any:
    args = build_parser("run").parse_args(["run", *argv])
    request = run_request(args)
    config, _ = build_config(overrides=list(request.run.overrides), environ={})
    return make_plan(config, "quick", cuda=False), make_plan(config, "quick", cuda=True)


def test_iters_reaches_cpu_workers_too() -> None:
    cpu, gpu = _plan_of([])
    assert (cpu.iters, gpu.iters) == (3, 10)  # the defaults
    cpu, gpu = _plan_of(["--iters=50"])
    assert (cpu.iters, gpu.iters) == (50, 50)
    cpu, gpu = _plan_of(["--set", "workload.collective_iters_cpu=7"])
    assert (cpu.iters, gpu.iters) == (7, 10)


@needs_torch
def test_env_line_lists_the_gpus_nvml_sees_when_cuda_is_not_up(stub_lib: Path, tmp_path: Path,
                                                              h200_dump: dict[str, Any]) -> None:
    """CPU torch, NVML (the stub) seeing one H200: the line says so, as ``nvidia-smi -L`` would."""
    write_stub_data(h200_dump, tmp_path / "nvml.txt")
    env = {**stub_env(stub_lib, tmp_path / "nvml.txt"), "OMP_NUM_THREADS": "1"}
    env = {k: v for k, v in env.items() if k in BASE_ENV or k.startswith(("FAKE_NVML", "LD_LIBRARY_PATH", "OMP"))}
    out = subprocess.run([TORCHRUN, "--standalone", "--nproc_per_node=2", "-m", "gpu_preflight", "run", "--verbose",
                          "--quiet", "--no-history", "--timeout-s", "60", "--steps", "5"],
                         capture_output=True, text=True, timeout=420, cwd=tmp_path, env=env)
    (line,) = [x for x in out.stderr.splitlines() if x.startswith("[ENV] ")]
    assert "cuda_available=False cuda_device_count=0" in line
    assert line.endswith('driver=580.159.04 gpus="1x NVIDIA H200"'), line


class _Finding:
    def __init__(self, check_id: str, status: str, subject: str = "n1/gpu0", code: str = "ok",
                 details: dict[str, Any] | None = None) -> None:
        self.check_id, self.status, self.subject, self.code, self.details = check_id, status, subject, code, details


class _Report:
    def __init__(self, findings: list[_Finding], fail_on: str = "fail") -> None:
        self.findings, self.fail_on = findings, fail_on


def test_summary_gives_each_program_its_return_code() -> None:
    base = [_Finding("stack.cuda", "PASS"), _Finding("compute.gemm", "PASS"), _Finding("train.smoke", "PASS"),
            _Finding("nccl.collectives", "PASS"), _Finding("nccl.correctness", "PASS"),
            _Finding("train.smoke", "PASS", "cluster"), _Finding("system.limits", "WARN", "n1")]
    assert suite_summary(_Report(base)) == "[SUMMARY] gpu_tests rc=0; ddp_tests rc=0; ddp_train rc=0"
    bad = [*base, _Finding("train.smoke", "FAIL", "cluster", "ddp_no_progress"),
           _Finding("compute.gemm", "WARN"), _Finding("nccl.correctness", "ERROR", "cluster", "timeout")]
    assert suite_summary(_Report(bad)) == "[SUMMARY] gpu_tests rc=1; ddp_tests rc=3; ddp_train rc=2"
    assert suite_summary(_Report(bad, fail_on="warn")) == "[SUMMARY] gpu_tests rc=2; ddp_tests rc=3; ddp_train rc=2"
    rolled = [_Finding("train.smoke", "PASS", "cluster", details={"rolled_up": True}),  # many GPUs' passes in one
              _Finding("nccl.collectives", "SKIP", "cluster")]
    assert suite_summary(_Report(rolled)) == "[SUMMARY] gpu_tests rc=0; ddp_tests rc=skipped; ddp_train rc=skipped"
    assert suite_summary(_Report([_Finding("system.limits", "WARN", "n1")])) is None  # --node-only: none ran


# --------------------------------------------------------------------------- item 14


@pytest.mark.parametrize(("memlock", "expected_count", "status", "code"), [
    (65536, None, Status.WARN, "memlock_limited"),
    (65536, 8, Status.WARN, "memlock_limited"),
    (65536, 0, Status.SKIP, "memlock_not_applicable"),
    (-1, 0, Status.PASS, "memlock_ok"),
])
def test_memlock_is_not_applicable_on_a_node_declared_gpu_less(memlock: int, expected_count: int | None,
                                                              status: Status, code: str) -> None:
    config = Config()
    config = replace(config, gpu=replace(config.gpu, expected_count=expected_count))
    findings = judge("system.limits", healthy(memlock_soft=memlock, nofile_soft=1024), config)
    assert outcome(findings) == [(status, code), (Status.WARN, "nofile_low")]  # open files: judged as always
    if status is Status.SKIP:
        assert "--expect-gpus 0" in findings[0].summary and findings[0].observed == memlock


def _ci_snapshot(h200_dump: dict[str, Any], path: Path, **system: Any) -> str:
    """A GPU-less CI runner as ``gpu-preflight snapshot`` records one: no GPU, a 64 KiB memlock limit."""
    dump = dict(h200_dump, devices=[], system={**h200_dump["system"], "nvmlDeviceGetCount": {"ok": 0}})
    facts = {"kernel": "6.8.0-1017-azure", "memory_total_bytes": 16 * GIB, "memory_available_bytes": 12 * GIB,
             "cpu_count": 4, "cpu_percent": 5.0, "load_1m": 0.5, "shm_total_bytes": 8 * GIB,
             "disks": [{"path": "/", "total_bytes": 100 * GIB, "free_bytes": 50 * GIB, "mountpoint": "/"}],
             "memlock_soft": 65536, "memlock_hard": 65536, "nofile_soft": 65536, "nofile_hard": 65536,
             "numa_nodes": 1, "processes": ["systemd", "sshd"], **system}
    dump["host"] = {"hostname": "ci-runner", "captured_at": "2025-01-01T00:00:00+00:00", "system": facts,
                    "kernel_log": {"available": True, "source": "test", "read_at": "2025-01-01T00:00:00+00:00",
                                   "boot_time": None, "lines": [], "lines_dropped": 0}}
    path.write_text(json.dumps(dump))
    return str(path)


@pytest.mark.parametrize(("system", "argv", "rc"), [
    ({}, ["--expect-gpus", "0"], 0),                                    # the CI job: a clean exit
    ({}, [], 1),                                                        # not declared GPU-less: no GPU WARNs
    ({"nofile_soft": 1024}, ["--expect-gpus", "0"], 1),                 # a real host problem still WARNs
    ({"shm_total_bytes": 64 << 20}, ["--expect-gpus", "0"], 2),         # and a FAIL still FAILs
])
def test_a_gpu_less_ci_host_can_exit_0_without_hiding_real_problems(h200_dump: dict[str, Any], tmp_path: Path,
                                                                    system: dict[str, Any], argv: list[str],
                                                                    rc: int) -> None:
    snapshot = _ci_snapshot(h200_dump, tmp_path / "ci.json", **system)
    out = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--node-only", "--replay", snapshot,
                          "--no-history", "--format", "json", *argv],
                         capture_output=True, text=True, timeout=120, cwd=REPO, env=BASE_ENV)
    assert out.returncode == rc, out.stderr[-2000:]
    limits = [f for f in json.loads(out.stdout)["findings"] if f["check_id"] == "system.limits"]
    assert limits[0]["code"] == ("memlock_not_applicable" if argv else "memlock_limited")
