"""Canonical reports for the Slurm tests, built by the real report builder from chosen findings."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from gpu_preflight.findings.model import ReportFinding
from gpu_preflight.model import CheckResult, Finding, NodeReport, Status
from gpu_preflight.report.build import build_report

PASSING = (("system.memory", Status.PASS), ("gpu.ecc.errors", Status.PASS))


def node_report(host: str, findings: tuple[tuple[str, Status], ...] = PASSING,
                when: datetime | None = None) -> NodeReport:
    stamp = (when or datetime.now(UTC)).isoformat()
    results = [CheckResult(cid, cid, [Finding(cid, status, host, "test", f"{cid} is {status.value}")], 0.0)
               for cid, status in findings]
    return NodeReport(host, stamp, results)


def listed(check_id: str, status: str, subject: str = "vm") -> ReportFinding:
    """A finding as a report lists it (what the Slurm and Kubernetes verdicts read)."""
    return ReportFinding.from_dict({"check_id": check_id, "status": status, "subject": subject, "code": "test",
                                    "summary": f"{check_id} is {status}"})


def report(host: str = "vm", findings: tuple[tuple[str, Status], ...] = PASSING,
           when: datetime | None = None) -> dict[str, Any]:
    """A single-node report (what `gpu-preflight run --report-dir` writes)."""
    return build_report([node_report(host, findings, when)])


def cluster_report(nodes: dict[str, tuple[tuple[str, Status], ...]], when: datetime | None = None,
                   cluster_findings: list[Finding] | None = None) -> dict[str, Any]:
    """A multi-node report as rank 0 writes it under srun (node_info.current_host = Slurm name)."""
    reports = [node_report("vm", f, when) for f in nodes.values()]
    infos = [{"current_host": name} for name in nodes]
    results = [CheckResult("cluster", "cluster", cluster_findings, 0.0)] if cluster_findings else None
    return build_report(reports, node_infos=infos, cluster_results=results)


def write(path: Path, data: dict[str, Any]) -> Path:
    path.write_text(json.dumps(data))
    return path
