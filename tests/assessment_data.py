"""A fixed multi-node report for the assessment tests and golden files.

Four H200 nodes × 2 ranks through the real cluster checks and aggregation
(:func:`tests.report_data.gathered_cluster`), with faults a real cluster has: a slow GPU
on node 3, a slow node-local fabric on node 3, a slow link to node 3, another process
holding 40 GiB of a GPU on node 2 (``gpu.busy``), a hot GPU on node 3, and ``fi_pingpong``
tables for the pairs (0, 1) and (2, 3). ``earlier_scores`` stands for what the history
database held from three earlier runs, so the trends have something to compare with.

``UPDATE_GOLDEN=report .venv/bin/python -m pytest tests/test_markdown_golden.py -q`` rebuilds
``tests/fixtures/assessment/multinode-report.json`` from this (then review ``git diff``).
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

from gpu_preflight.config import Config
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.engine import run_checks
from gpu_preflight.findings.canonical import node_entry
from gpu_preflight.report.advice import add_advice
from gpu_preflight.report.build import build_cluster_report
from gpu_preflight.report.scores import add_scores

from .conftest import H200_DUMP
from .report_data import gathered_cluster, own_uuid

TIMESTAMP = "2026-11-20T06:00:00+00:00"
GIB = 1 << 30
# node -> NVML readings of its GPU 0 that differ from the recorded H200
FAULTS: dict[int, dict[str, Any]] = {
    2: {"nvmlDeviceGetMemoryInfo": {"total": 150754820096, "free": 150754820096 - 40 * GIB, "used": 40 * GIB}},
    3: {"nvmlDeviceGetTemperature": 86},
}
EARLIER = [
    {"run": 1, "timestamp": "2026-11-06T06:00:00+00:00",
     "components": {"network_infrastructure": 90.0, "hardware_health": 100.0, "software_stack": 100.0,
                    "service_reliability": 100.0, "performance_consistency": 70.0, "overall": 92.0}},
    {"run": 2, "timestamp": "2026-11-13T06:00:00+00:00",
     "components": {"network_infrastructure": 88.0, "hardware_health": 95.0, "resource_management": 100.0,
                    "software_stack": 100.0, "service_reliability": 100.0, "performance_consistency": 72.0,
                    "overall": 91.0}},
]


def _table(usec: float) -> str:
    return ("bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n"
            f"64      10      =10      1.2k        0.00s      1.13      {usec:.2f}       0.02\n"
            f"1m      10      =10      20m         0.01s      {1048576 / usec / 40:.2f}   {usec * 40:.2f}      0.00\n")


def _pingpong(pair: int, role: str, peer: int, usec: float) -> dict[str, Any]:
    return {"pair": pair, "test_role": role, "provider": "tcp", "success": True, "peer_node": peer,
            "raw_output": _table(usec)}


def _faulty_entry(node: int, faults: dict[str, Any]) -> dict[str, Any]:
    dump = json.loads(H200_DUMP.read_text())
    for key, value in {"nvmlDeviceGetUUID": own_uuid(node), **faults}.items():
        dump["devices"][0][key] = {"ok": value}
    path = Path(tempfile.mkdtemp()) / f"h{node}.json"
    path.write_text(json.dumps(dump))
    return node_entry(run_checks(replay=str(path), include=["gpu.*"], environ={}), f"node_{node}")


def multinode_report() -> dict[str, Any]:
    """The fixed report, scored and advised as a run would (before the history files it)."""
    gathered = gathered_cluster(4, 2, gemm=[700.0] * 7 + [560.0], node_fabric=[450.0, 450.0, 450.0, 330.0],
                                links=[48.0, 47.0, 21.0])
    payloads = gathered["payloads"]
    for node, faults in FAULTS.items():
        payloads[node * 2]["node_entry"] = _faulty_entry(node, faults)
    payloads[0]["pingpong"] = [_pingpong(0, "server", 1, 31.0)]
    payloads[2]["pingpong"] = [_pingpong(0, "client", 0, 31.0)]
    payloads[4]["pingpong"] = [_pingpong(1, "server", 3, 58.0)]
    payloads[6]["pingpong"] = [_pingpong(1, "client", 2, 58.0)]
    config = Config(perf=PerfConfig(gemm_bf16_tflops=670.0))
    typed, _ = build_cluster_report(gathered, config, fail_on="fail", include=[], exclude=[], suite="quick",
                                    timeout_s=30.0)
    report = typed.to_dict()
    report["timestamp"] = TIMESTAMP
    report.setdefault("run", {})["wall_s"] = 42.0
    for section in report["nodes"].values():
        section.pop("facts", None)  # the assessment reads node_info, gpu and network; facts are large
        section["timestamp"] = TIMESTAMP
    report["cluster_summary"]["earlier_scores"] = EARLIER
    return add_advice(add_scores(report))
