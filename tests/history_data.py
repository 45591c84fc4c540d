"""Cluster reports with chosen GPUs on chosen hosts, for the history and output tests.

Node reports are real: the H200 NVML capture, with its one device copied per GPU and
given its own UUID, serial and PCI address, judged by the real node checks (faults are
NVML readings edited in the copy). The gathered workload payloads are synthetic but
shaped like what ranks send, and go through the real cluster checks and aggregation,
so every number the history reads sits where a real run puts it.
"""

from __future__ import annotations

import copy
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gpu_preflight.config import Config
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.engine import run_checks
from gpu_preflight.findings.canonical import node_entry
from gpu_preflight.model import NodeReport
from gpu_preflight.report.build import build_cluster_report

from .conftest import H200_DUMP

TOP = 256 << 20
REMAP_FAILURE = {"nvmlDeviceGetRemappedRows": [0, 2, 0, 1]}  # row remapping failed: gpu.memory.remap FAILs


@dataclass
class Gpu:
    """One GPU of a run: who it is, how fast it computed and moved memory, which NVML faults it shows."""

    uuid: str
    serial: str
    tflops: float = 700.0
    copy_gbps: float = 4000.0
    faults: dict[str, Any] = field(default_factory=dict)


def node_report(host: str, gpus: list[Gpu]) -> NodeReport:
    """A node report of ``host`` with these GPUs, through the real node checks."""
    dump = json.loads(H200_DUMP.read_text())
    base = dump["devices"][0]
    devices = []
    for i, gpu in enumerate(gpus):
        dev = copy.deepcopy(base)
        dev["nvmlDeviceGetUUID"] = {"ok": gpu.uuid}
        dev["nvmlDeviceGetSerial"] = {"ok": gpu.serial}
        dev["nvmlDeviceGetIndex"] = {"ok": i}
        dev["nvmlDeviceGetMinorNumber"] = {"ok": i}
        for key in ("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v3"):
            dev[key]["ok"]["busId"] = f"00000000:{0x18 + i:02X}:00.0"
        for key, value in gpu.faults.items():
            dev[key] = {"ok": value}
        devices.append(dev)
    dump["devices"] = devices
    dump["system"]["nvmlDeviceGetCount"] = {"ok": len(devices)}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{host}.json"
        path.write_text(json.dumps(dump))
        node = run_checks(replay=str(path), include=["gpu.*"], environ={})
    for f in node.findings:  # as if the checks had run on that host (they name subjects by the host name)
        if f.subject == node.hostname or f.subject.startswith(node.hostname + "/"):
            f.subject = host + f.subject[len(node.hostname):]
    node.hostname = host
    return node


def _collective(op: str, group: str, scope: str, ranks: list[int], busbw: float) -> dict[str, Any]:
    sizes = [1 << 20, 16 << 20, TOP]
    results = [{"size_bytes": s, "busbw_gbps": busbw * (0.5 if s < TOP else 1.0), "algbw_gbps": busbw,
                "bandwidth_gbps": busbw, "latency_ms": 1.0, "wrong": 0, "time_us": 1000.0} for s in sizes]
    return {"op": op, "group": group, "scope": scope, "ranks": ranks, "success": True, "error": None, "wrong": 0,
            "peak_bandwidth_gbps": busbw, "results": results}


def gathered_run(hosts: dict[str, list[Gpu]], *, node_fabric: dict[str, float] | None = None,
                 world_busbw: float = 40.0) -> dict[str, Any]:
    """What rank 0 gathers from a run over ``hosts`` (name → GPUs, all nodes with as many GPUs)."""
    names = list(hosts)
    per_node = len(hosts[names[0]])
    world = per_node * len(names)
    fabric = node_fabric or {}
    payloads: dict[int, dict[str, Any]] = {}
    for node, host in enumerate(names):
        members = list(range(node * per_node, (node + 1) * per_node))
        for local, gpu in enumerate(hosts[host]):
            rank = node * per_node + local
            p: dict[str, Any] = {
                "rank": rank, "node_rank": node, "local_rank": local, "hostname": host, "node_name": host,
                "device": f"cuda:{local}", "errors": [],
                "stack": {"torch_version": "2.13.0", "torch_cuda": "12.8", "nccl_version": "2.27.3",
                          "cudnn_version": 9, "cuda_available": True, "device_count": per_node,
                          "cuda_init_error": None},
                "gemm": [{"dtype": "bf16", "n": 8192, "iters": 10, "tflops": gpu.tflops, "rel_error": 1e-3,
                          "correct": True, "error": None}],
                "memory": {"device_copy_gbps": gpu.copy_gbps, "h2d_gbps": 55.0, "d2h_gbps": 52.0,
                           "pattern_bytes": 1 << 30, "pattern_errors": 0, "error": None},
                "train": {"mode": "single", "steps": 40, "loss_start": 2.5, "loss_end": 0.5, "finite": True,
                          "improved": True},
                "collectives": [_collective("all_reduce", "all", "distributed", list(range(world)), world_busbw)],
            }
            if len(names) > 1:  # as the runner lays out groups: node-local ones only across several nodes
                p["collectives"].append(_collective("all_reduce", f"node{node}", "intra_node", members,
                                                    fabric.get(host, 450.0)))
            if local == 0:
                p["node_entry"] = node_entry(node_report(host, hosts[host]), f"node_{node}")
            payloads[rank] = p
    return {"payloads": payloads, "missing": {},
            "topology": {"world_size": world, "num_nodes": len(names), "local_world_size": per_node,
                         "hosts": names, "launcher": "torchrun"}}


def cluster_run(hosts: dict[str, list[Gpu]], *, node_fabric: dict[str, float] | None = None,
                world_busbw: float = 40.0, config: Config | None = None) -> dict[str, Any]:
    """The canonical report of that run, judged by the real cluster checks (default: the H200's
    expected bf16 GEMM of 670 TFLOP/s)."""
    gathered = gathered_run(hosts, node_fabric=node_fabric, world_busbw=world_busbw)
    report, _ = build_cluster_report(gathered, config or Config(perf=PerfConfig(gemm_bf16_tflops=670.0)),
                                     fail_on="fail", include=[], exclude=[], suite="quick", timeout_s=30.0)
    return report.to_dict()


def gpus(prefix: str, n: int = 2, **kwargs: Any) -> list[Gpu]:
    """``n`` GPUs with UUIDs and serials derived from ``prefix``."""
    return [Gpu(f"GPU-{prefix}{i:02d}-0000-0000-0000-000000000000", f"16540{prefix}{i:02d}", **kwargs)
            for i in range(n)]
