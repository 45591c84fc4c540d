"""The acceptance suite's own outputs (spec 004): its progress lines and ``ddp_training_result.json``.

Teams moving from that suite grep their logs for ``[ENV]``, ``[COMPUTE]``, ``[TRAIN]`` and
``[DDP] ... ok=True``, and their CI reads ``ddp_training_result.json``; both are produced
here from the workloads' results as rank 0 gathered them, with the suite's wording and
field names where our measurements have them (GFLOP/s, start/end loss, ``improved``), and
our own extras after them. The lines go to stderr (``--verbose``), never to stdout, where
``--format json`` output stands alone.
"""

from __future__ import annotations

import json
import math
import platform
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

from ..records import ClusterFacts

__all__ = ["DDP_RESULT_NAME", "ddp_training_result", "progress_lines", "write_ddp_training_result"]

DDP_RESULT_NAME = "ddp_training_result.json"


def _num(value: Any, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return "n/a"
    return "nan" if isinstance(value, float) and not math.isfinite(value) else f"{value:.{digits}f}"


def _column(columns: Mapping[str, Any], name: str) -> list[Any]:
    try:
        return list(columns[name])
    except KeyError:
        return []


def _first_payload(facts: ClusterFacts) -> Mapping[str, Any]:
    """The lowest reporting rank's payload (rank 0's unless it never reported): it carries the job's DDP result."""
    return facts.payloads[min(facts.payloads)] if facts.payloads else {}


def env_line(facts: ClusterFacts) -> str:
    """``[ENV]``: Python, torch, its CUDA and NCCL, ``cuda_device_count``, as the first rank saw them."""
    stack: Mapping[str, Any] = _first_payload(facts).get("stack") or {}
    return (f"[ENV] python={platform.python_version()} torch={stack.get('torch_version', 'n/a')} "
            f"cuda={stack.get('torch_cuda')} cuda_available={stack.get('cuda_available')} "
            f"cuda_device_count={stack.get('device_count', 'n/a')} nccl={stack.get('nccl_version')} "
            f"world_size={facts.world_size} nodes={facts.num_nodes}{_gpu_listing(facts)}")


def _gpu_listing(facts: ClusterFacts) -> str:
    """What the suite's ``nvidia-smi -L`` shows, from the first node's NVML facts: driver and GPU models."""
    gpu = next(iter(facts.node_facts.values()), {}).get("gpu")
    if not isinstance(gpu, Mapping):
        return ""
    names = [g["name"] for g in gpu.get("gpus") or () if isinstance(g, Mapping) and isinstance(g.get("name"), str)]
    listing = ", ".join(f"{n}x {name}" for name, n in Counter(names).items()) or "none"
    driver = gpu.get("driver_version")
    return f" driver={driver if isinstance(driver, str) else 'n/a'} gpus=\"{listing}\""


def compute_lines(facts: ClusterFacts) -> Iterator[str]:
    """``[COMPUTE]`` per GPU (or CPU worker) and precision: GFLOP/s and the test's parameters."""
    for dtype, col in sorted(facts.columns.get("gemm", {}).items()):
        ranks, ns, tflops = _column(col, "rank"), _column(col, "n"), _column(col, "tflops")
        correct, errors = _column(col, "correct"), _column(col, "error")
        for i, rank in enumerate(ranks):
            gflops = tflops[i] * 1000 if isinstance(tflops[i], (int, float)) else None
            line = (f"[COMPUTE] {facts.rank_subject(rank)} dtype={dtype} n={ns[i]} "
                    f"GFLOP/s={_num(gflops, 1)} correct={correct[i]}")
            yield line + (f" error={errors[i]}" if errors[i] else "")


def train_lines(facts: ClusterFacts) -> Iterator[str]:
    """``[TRAIN]`` per device: start and end loss, ``improved=True/False``."""
    col = facts.columns.get("train")  # columns slice on first use: an empty-looking dict is not empty
    if col is None:
        return
    ranks = _column(col, "rank")
    start, end, improved, errors = (_column(col, k) for k in ("loss_start", "loss_end", "improved", "error"))
    for i, rank in enumerate(ranks):
        line = (f"[TRAIN] {facts.rank_subject(rank)} start_loss={_num(start[i])} end_loss={_num(end[i])} "
                f"improved={improved[i]}")
        yield line + (f" error={errors[i]}" if errors[i] else "")


def ddp_lines(facts: ClusterFacts) -> Iterator[str]:
    """``[DDP] ... ok=True`` for the all-reduce of every rank, then the DDP training smoke."""
    for _, entry in facts.group_entries:
        if entry.get("op") != "all_reduce" or entry.get("group") != "all":
            continue
        results = entry.get("results") or []
        top = results[-1] if results else {}
        size = top.get("size_bytes")
        numel = size // 4 if isinstance(size, int) else "n/a"  # float32 elements, as the suite counts them
        line = (f"[DDP] all_reduce world_size={len(entry.get('ranks') or [])} numel={numel} "
                f"time_us={top.get('time_us', 'n/a')} busbw_gbps={top.get('busbw_gbps', 'n/a')} "
                f"wrong={entry.get('wrong', 0)} ok={bool(entry.get('success'))}")
        yield line + (f" error={entry['error']}" if entry.get("error") else "")
    for _, entry in facts.collective_errors:
        if entry.get("group") == "all" and entry.get("op") != "all_reduce" and not entry.get("results"):
            yield f"[DDP] {entry.get('op')} ok=False error={entry.get('error')}"
            break
    result = ddp_training_result(facts)
    if result is not None:
        yield (f"[DDP_TRAIN] world_size={result['world_size']} steps={result['steps']} "
               f"start_loss={_num(result['start_loss'])} end_loss={_num(result['end_loss'])} "
               f"improved={result['improved']} params_identical={result['params_identical']}"
               + (f" error={result['error']}" if result.get("error") else ""))


def progress_lines(facts: ClusterFacts) -> list[str]:
    """Every line, in the order the workloads ran: environment, GEMM, training, collectives, DDP."""
    return [env_line(facts), *compute_lines(facts), *train_lines(facts), *ddp_lines(facts)]


def ddp_training_result(facts: ClusterFacts) -> dict[str, Any] | None:
    """The suite's ``ddp_training_result.json`` content; None when no DDP smoke ran (one rank)."""
    payload = _first_payload(facts)
    ddp = payload.get("ddp")
    if not isinstance(ddp, Mapping):
        return None
    device = str(payload.get("device", ""))
    return {
        "improved": bool(ddp.get("improved")),
        "start_loss": _finite(ddp.get("loss_start")),
        "end_loss": _finite(ddp.get("loss_end")),
        "world_size": facts.world_size,
        "nodes": facts.num_nodes,
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
    from ..safeio import open_dir

    with open_dir(report_dir) as out:
        out.write_text(DDP_RESULT_NAME, json.dumps(result, indent=2, allow_nan=False) + "\n")
    return f"{report_dir.rstrip('/')}/{DDP_RESULT_NAME}"
