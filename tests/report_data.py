"""Reports for the report tests: real node runs (H200 replay), a real 2-rank CPU run, and a
multi-node run built by the real aggregation code from gathered payloads.

The multi-node payloads are synthetic (this machine has no GPU cluster) but shaped exactly
like what ranks send: H200 node reports, collective sweeps per group, GEMM per GPU and
node-0 link exchanges, so the cluster checks, scores and plots all run on their real path.
"""

from __future__ import annotations

import copy
import functools
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from gpu_preflight import build_report, run_checks
from gpu_preflight.config import Config
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.findings.canonical import node_entry
from gpu_preflight.report.build import build_cluster_report

from .conftest import H200_DUMP, REPO

SIZES = [1 << 20, 4 << 20, 16 << 20, 64 << 20, 256 << 20]


def h200_report(tmp_path: Path | None = None, **faults: Any) -> dict[str, Any]:
    """The real H200 capture judged as one node; ``faults`` edit device 0's NVML readings."""
    dump = json.loads(H200_DUMP.read_text())
    for key, value in faults.items():
        dump["devices"][0][key] = {"ok": value}
    directory = Path(tmp_path or tempfile.mkdtemp())
    path = directory / "dump.json"
    path.write_text(json.dumps(dump))
    return build_report([run_checks(replay=str(path), include=["gpu.*"], environ={})])


@functools.cache
def _node_entry(node: int) -> dict[str, Any]:
    """Node ``node`` of a cluster: the recorded H200 node, its GPU's UUID made its own (node 0
    keeps the recorded one), as each machine of a real cluster has."""
    entry = node_entry(run_checks(replay=str(H200_DUMP), include=["gpu.*"], environ={}), f"node_{node}")
    if node == 0:
        return entry
    return dict(json.loads(json.dumps(entry).replace(RECORDED_UUID, own_uuid(node))))


RECORDED_UUID = "GPU-86f25c50-ec49-958f-cd74-c318937a339c"  # the H200 of H200_DUMP


def own_uuid(node: int) -> str:
    """The UUID node ``node``'s copy of the recorded H200 goes by (node 0: the recorded one)."""
    return RECORDED_UUID if node == 0 else f"GPU-{node:08x}{RECORDED_UUID[12:]}"


def _sweep(peak: float) -> list[dict[str, Any]]:
    half = 8 << 20  # busbw reaches half its peak at 8 MiB, like a real fabric's ramp
    out = []
    for size in SIZES:
        bw = peak * size / (size + half)
        out.append({"size_bytes": size, "busbw_gbps": round(bw, 3), "algbw_gbps": round(bw, 3),
                    "bandwidth_gbps": round(bw, 3), "latency_ms": size / bw / 1e6, "wrong": 0,
                    "time_us": size / bw / 1e3})
    return out


def _collective(op: str, group: str, scope: str, ranks: list[int], peak: float) -> dict[str, Any]:
    return {"op": op, "group": group, "scope": scope, "ranks": ranks, "success": True, "error": None, "wrong": 0,
            "processes_tested": len(ranks), "peak_bandwidth_gbps": round(peak * SIZES[-1] / (SIZES[-1] + (8 << 20)),
                                                                         3),
            "results": _sweep(peak)}


def gathered_cluster(nodes: int = 3, per_node: int = 2, *, gemm: list[float] | None = None,
                     node_fabric: list[float] | None = None, links: list[float] | None = None) -> dict[str, Any]:
    """What rank 0 gathers from ``nodes`` × ``per_node`` H200 ranks, with chosen speeds."""
    world = nodes * per_node
    gemm = gemm or [700.0] * world
    node_fabric = node_fabric or [450.0] * nodes
    links = links if links is not None else [48.0] * (nodes - 1)
    payloads = {}
    for rank in range(world):
        node, local = divmod(rank, per_node)
        p: dict[str, Any] = {
            "rank": rank, "node_rank": node, "local_rank": local, "hostname": f"h{node}", "node_name": f"h{node}",
            "device": f"cuda:{local}", "errors": [], "collectives": [],
            "stack": {"torch_version": "2.13.0", "torch_cuda": "12.8", "nccl_version": "2.27.3", "cudnn_version": 9,
                      "cuda_available": True, "device_count": per_node, "cuda_init_error": None},
            "gemm": [{"dtype": "bf16", "n": 8192, "iters": 10, "tflops": gemm[rank], "rel_error": 1e-3,
                      "correct": True, "error": None}],
            "train": {"mode": "single", "steps": 40, "loss_start": 2.5, "loss_end": 0.5, "finite": True,
                      "improved": True}}
        members = list(range(node * per_node, (node + 1) * per_node))
        for op in ("all_reduce", "all_gather"):
            p["collectives"].append(_collective(op, "all", "distributed", list(range(world)), 40.0))
            p["collectives"].append(_collective(op, f"node{node}", "intra_node", members, node_fabric[node]))
        if local == 0:
            p["node_entry"] = copy.deepcopy(_node_entry(node))
        payloads[rank] = p
    payloads[0]["links"] = [{"pair": [0, n * per_node], "bytes": SIZES[-1], "iters": 10, "gbps": gbps}
                            for n, gbps in zip(range(1, nodes), links, strict=True)]
    return {"payloads": payloads, "missing": {},
            "topology": {"world_size": world, "num_nodes": nodes, "local_world_size": per_node,
                         "hosts": [f"h{i}" for i in range(nodes)], "launcher": "torchrun"}}


def cluster_report(**kwargs: Any) -> dict[str, Any]:
    """A multi-node report through the real cluster checks and aggregation."""
    config = Config(perf=PerfConfig(gemm_bf16_tflops=670.0))
    report, _ = build_cluster_report(gathered_cluster(**kwargs), config, fail_on="fail", include=[], exclude=[],
                                     suite="quick", timeout_s=30.0)
    return report.to_dict()


@functools.cache
def self_launched_report() -> dict[str, Any]:
    """A real ``gpu-preflight run`` with two CPU ranks (gloo), once per test process (~15 s on 2 cores)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO / "src"), os.environ.get("PYTHONPATH")]))}
    proc = subprocess.run([sys.executable, "-m", "gpu_preflight", "run", "--format", "json", "--timeout-s", "30"],
                          capture_output=True, text=True, timeout=300, env=env, cwd=REPO)
    assert proc.returncode in (0, 1) and proc.stdout.strip(), f"rc {proc.returncode}: {proc.stderr[-3000:]}"
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def node_only_report() -> dict[str, Any]:
    """The real H200 capture through the library, every node check (the brief's replay path)."""
    return build_report([run_checks(replay=str(H200_DUMP))])
