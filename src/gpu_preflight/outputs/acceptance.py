"""The acceptance suite's own outputs (spec 004): its progress lines and ``ddp_training_result.json``.

Teams moving from that suite grep their logs for ``[ENV]``, ``[COMPUTE]``, ``[TRAIN]`` and
``[DDP] ... ok=True``, and their CI reads ``ddp_training_result.json``; both are produced
here, with the suite's wording and field names where our measurements have them (GFLOP/s,
start/end loss, ``improved``), and our own extras after them. The lines come from each
rank as its workloads finish (:class:`LiveLines`), so a hung job has printed what it got
through; the file from the DDP result rank 0 gathered. The lines go to stderr
(``--verbose``), never to stdout, where ``--format json`` output stands alone.
"""

from __future__ import annotations

import json
import math
import os
import platform
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

from ..ids import (
    GEMM_ID,
    MEMORY_BANDWIDTH_ID,
    NCCL_COLLECTIVES_ID,
    NCCL_CORRECTNESS_ID,
    STACK_CUDA_ID,
    TRAIN_SMOKE_ID,
)
from ..model import Status, gated_exit_code
from ..records import ClusterFacts
from ..records.cluster import subject_name
from ..safeio import open_dir

__all__ = ["DDP_RESULT_NAME", "LINES_ENV", "SUITES", "LiveLines", "ddp_training_result", "file_lines", "stderr_line",
           "suite_of", "suite_summary", "write_ddp_training_result"]

LINES_ENV = "GPU_PREFLIGHT_LINES_FILE"  # a self-launched worker appends its progress lines there for the supervisor

DDP_RESULT_NAME = "ddp_training_result.json"


def _num(value: Any, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "n/a"
    return "nan" if isinstance(value, float) and not math.isfinite(value) else f"{value:.{digits}f}"


def _first_payload(facts: ClusterFacts) -> Mapping[str, Any]:
    """The lowest reporting rank's payload (rank 0's unless it never reported): it carries the job's DDP result."""
    return facts.payloads[min(facts.payloads)] if facts.payloads else {}


def env_text(stack: Mapping[str, Any], world_size: Any, nodes: Any, gpu: Any) -> str:
    """The ``[ENV]`` line of a rank's stack and (``gpu``) the NVML driver and GPU names."""
    return (f"[ENV] python={platform.python_version()} torch={stack.get('torch_version', 'n/a')} "
            f"cuda={stack.get('torch_cuda')} cuda_available={stack.get('cuda_available')} "
            f"cuda_device_count={stack.get('device_count', 'n/a')} nccl={stack.get('nccl_version')} "
            f"world_size={world_size} nodes={nodes}{_gpu_listing(gpu)}")


def _gpu_listing(gpu: Any) -> str:
    """What the suite's ``nvidia-smi -L`` shows: driver and GPU models, as NVML sees them whether
    or not CUDA is up (``n/a`` where NVML could not be read, never "no GPU")."""
    if not isinstance(gpu, Mapping):
        return " driver=n/a gpus=n/a"
    names = [g["name"] for g in gpu.get("gpus") or () if isinstance(g, Mapping) and isinstance(g.get("name"), str)]
    listing = ", ".join(f"{n}x {name}" for name, n in Counter(names).items()) or "none"
    driver = gpu.get("driver_version")
    return f" driver={driver if isinstance(driver, str) else 'n/a'} gpus=\"{listing}\""


def compute_text(subject: str, dtype: Any, n: Any, tflops: Any, correct: Any, error: Any) -> str:
    gflops = tflops * 1000 if isinstance(tflops, (int, float)) and not isinstance(tflops, bool) else None
    line = f"[COMPUTE] {subject} dtype={dtype} n={n} GFLOP/s={_num(gflops, 1)} correct={correct}"
    return line + (f" error={error}" if error else "")


def train_text(subject: str, start: Any, end: Any, improved: Any, error: Any) -> str:
    line = f"[TRAIN] {subject} start_loss={_num(start)} end_loss={_num(end)} improved={improved}"
    return line + (f" error={error}" if error else "")


def all_reduce_text(entry: Mapping[str, Any]) -> str:
    """``[DDP] all_reduce ... ok=True``: the all-rank all-reduce at its largest size."""
    results = entry.get("results") or []
    top = results[-1] if results else {}
    size = top.get("size_bytes")
    numel = size // 4 if isinstance(size, int) else "n/a"  # float32 elements, as the suite counts them
    line = (f"[DDP] all_reduce world_size={len(entry.get('ranks') or [])} numel={numel} "
            f"time_us={top.get('time_us', 'n/a')} busbw_gbps={top.get('busbw_gbps', 'n/a')} "
            f"wrong={entry.get('wrong', 0)} ok={bool(entry.get('success'))}")
    return line + (f" error={entry['error']}" if entry.get("error") else "")


def ddp_train_text(result: Mapping[str, Any]) -> str:
    return (f"[DDP_TRAIN] world_size={result['world_size']} steps={result['steps']} "
            f"start_loss={_num(result['start_loss'])} end_loss={_num(result['end_loss'])} "
            f"improved={result['improved']} params_identical={result['params_identical']}"
            + (f" error={result['error']}" if result.get("error") else ""))


def ddp_training_result(facts: ClusterFacts) -> dict[str, Any] | None:
    """The suite's ``ddp_training_result.json`` content; None when no DDP smoke ran (one rank)."""
    payload = _first_payload(facts)
    ddp = payload.get("ddp")
    if not isinstance(ddp, Mapping):
        return None
    return training_result(ddp, str(payload.get("device", "")), facts.world_size, facts.num_nodes)


def training_result(ddp: Mapping[str, Any], device: str, world_size: Any, nodes: Any) -> dict[str, Any]:
    """``ddp_training_result.json`` of one rank's DDP record."""
    return {
        "improved": bool(ddp.get("improved")),
        "start_loss": _finite(ddp.get("loss_start")),
        "end_loss": _finite(ddp.get("loss_end")),
        "world_size": world_size,
        "nodes": nodes,
        "backend": "nccl" if device.startswith("cuda") else "gloo",
        "steps": ddp.get("steps"),
        "batch_size": ddp.get("batch_size"),
        "batches_per_epoch": ddp.get("batches_per_epoch"),
        "finite": ddp.get("finite"),
        "params_identical": ddp.get("params_identical"),
        "odd_ranks": ddp.get("odd_ranks") or [],
        "error": ddp.get("error"),
    }


def _finite(value: Any) -> float | None:
    """A loss for JSON: NaN/inf (a diverged or failed run) become null rather than invalid JSON."""
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def write_ddp_training_result(report_dir: str, result: Mapping[str, Any]) -> str:
    """Write ``ddp_training_result.json`` into ``report_dir`` (atomically, no link followed); return its path."""
    with open_dir(report_dir) as out:
        out.write_text(DDP_RESULT_NAME, json.dumps(result, indent=2, allow_nan=False) + "\n")
    return f"{report_dir.rstrip('/')}/{DDP_RESULT_NAME}"


class LiveLines:
    """The progress lines of one rank, written as each workload finishes (a rank's ``on_result``).

    Rank 0 writes ``[ENV]``, ``[DDP]`` and ``[DDP_TRAIN]`` for the job; every rank writes the
    ``[COMPUTE]`` and ``[TRAIN]`` lines of its own device, as the suite prints one line per GPU.
    ``write`` takes one whole line at a time (stderr, or the file a self-launch supervisor relays).
    """

    def __init__(self, write: Callable[[str], None]) -> None:
        self.write = write
        self.failed_said = False
        self._on_gpu = False

    def __call__(self, topo: Any, name: str, value: Any) -> None:
        for line in self.lines(topo, name, value):
            self.write(line)

    def lines(self, topo: Any, name: str, value: Any) -> list[str]:
        lead = topo.rank == 0
        on_gpu = self._on_gpu
        subject = subject_name(topo.node_name or topo.hostname or "unknown", topo.rank, topo.local_rank, on_gpu)
        if name == "env" and isinstance(value, Mapping):
            stack = value.get("stack") or {}
            self._on_gpu = bool(stack.get("cuda_available")) and int(stack.get("device_count") or 0) > topo.local_rank
            return [env_text(stack, topo.world_size, topo.num_nodes, value.get("gpu"))] if lead else []
        if name == "gemm":
            return [compute_text(subject, g.get("dtype"), g.get("n"), g.get("tflops"), g.get("correct"),
                                 g.get("error")) for g in value or () if isinstance(g, Mapping)]
        if name == "train" and isinstance(value, Mapping):
            return [train_text(subject, value.get("loss_start"), value.get("loss_end"), value.get("improved"),
                               value.get("error"))]
        if not lead or not isinstance(value, Mapping):
            return []
        if name == "collective" and value.get("group") == "all":
            if value.get("op") == "all_reduce":
                return [all_reduce_text(value)]
            if not value.get("results") and not self.failed_said:
                self.failed_said = True
                return [f"[DDP] {value.get('op')} ok=False error={value.get('error')}"]
        if name == "ddp":
            device = "cuda" if on_gpu else "cpu"
            return [ddp_train_text(training_result(value, device, topo.world_size, topo.num_nodes))]
        return []


# The suite's three programs, and the checks that judge what each of them ran here. The
# training smoke check judges both the per-GPU smoke (gpu_tests) and the DDP one (ddp_train).
SUITES: dict[str, tuple[str, ...]] = {
    "gpu_tests": (STACK_CUDA_ID, GEMM_ID, MEMORY_BANDWIDTH_ID, TRAIN_SMOKE_ID),
    "ddp_tests": (NCCL_CORRECTNESS_ID, NCCL_COLLECTIVES_ID),
    "ddp_train": (TRAIN_SMOKE_ID,),
}


def suite_of(finding: Any) -> str | None:
    """Which of the suite's programs a finding belongs to (None: none of them).

    ``train.smoke`` names the job's DDP smoke ``cluster`` with ``ddp_*`` codes (or ``ok``),
    each GPU's smoke by its GPU; a pass rolled up over many GPUs is ``cluster`` too, but
    marked ``rolled_up``.
    """
    check = finding.check_id
    if check == TRAIN_SMOKE_ID:
        ddp = finding.subject == "cluster" and (finding.code.startswith("ddp_")
                                               or not (finding.details or {}).get("rolled_up"))
        return "ddp_train" if ddp else "gpu_tests"
    return next((name for name, checks in SUITES.items() if check in checks), None)


def suite_summary(report: Any) -> str | None:
    """The runner's ``[SUMMARY] gpu_tests rc=0; ddp_tests rc=0; ddp_train rc=skipped`` line.

    Each rc is the exit code our verdict gives the findings of that program's checks (0 pass,
    1 warn, 2 fail, 3 could not measure; a warning is 2 under ``--fail-on warn``), ``skipped``
    where none of them judged anything (no second rank for the DDP programs). None for a run
    without workloads (``--node-only``): none of the programs ran.
    """
    statuses: dict[str, list[Status]] = {name: [] for name in SUITES}
    for f in report.findings:
        name = suite_of(f)
        if name is not None:
            statuses[name].append(Status(f.status))
    if not any(statuses.values()):
        return None
    parts = []
    for name, seen in statuses.items():
        judged = [s for s in seen if s is not Status.SKIP]
        rc = gated_exit_code(Status.worst(judged), report.fail_on) if judged else "skipped"
        parts.append(f"{name} rc={rc}")
    return "[SUMMARY] " + "; ".join(parts)


def stderr_line(line: str) -> None:
    """Write one line to stderr at once (the ranks of a torchrun job share the terminal)."""
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def file_lines(path: str) -> Callable[[str], None]:
    """Append each line to ``path`` in one write (the ranks of a self-launched run share the file)."""

    def write(line: str) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (line + "\n").encode())
        finally:
            os.close(fd)

    return write
