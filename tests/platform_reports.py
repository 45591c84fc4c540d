"""Real reports for the platform-integration tests (Kubernetes labels, SageMaker entry).

Each node is judged by the real engine from the captured H200 NVML dump (GPU checks only,
so the host the tests run on does not leak into the verdict); a fault is injected by
editing the dump, as the README describes (a PCIe link downtrained to x8 is a FAIL).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpu_preflight.engine import run_checks
from gpu_preflight.model import NodeReport
from gpu_preflight.report import build_report

from .conftest import H200_DUMP


def dump_file(tmp: Path, name: str, *, downtrained: bool = False) -> Path:
    """A copy of the H200 dump, with the PCIe link of GPU 0 at x8 when ``downtrained``."""
    dump = json.loads(H200_DUMP.read_text())
    if downtrained:
        dump["devices"][0]["nvmlDeviceGetCurrPcieLinkWidth"] = {"ok": 8}
    path = tmp / f"{name}.json"
    path.write_text(json.dumps(dump))
    return path


def node_report(tmp: Path, name: str, *, downtrained: bool = False) -> NodeReport:
    report = run_checks(replay=str(dump_file(tmp, name, downtrained=downtrained)), include=["gpu.*"])
    report.hostname = name
    for f in report.findings:  # subjects name the node as the cluster report does (host/gpuN)
        f.subject = name + f.subject[f.subject.index("/"):] if "/" in f.subject else name
    return report


def cluster_report(tmp: Path, nodes: dict[str, bool]) -> dict[str, Any]:
    """A multi-node report; ``nodes`` maps node name to "has a downtrained link"."""
    reports = [node_report(tmp, name, downtrained=bad) for name, bad in nodes.items()]
    infos = [{"current_host": name, "node_rank": i} for i, name in enumerate(nodes)]
    return build_report(reports, node_infos=infos)
