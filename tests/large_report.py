"""A report of thousands of nodes, made from a real 3-node report by copying its node sections.

Building 10,000 nodes through the cluster checks takes a minute (bench/bench_end_of_run.py
does it); the HTML and JSON writers only read the report's layout, so a real small
report's sections, each renamed and given its own readings, make a large one in a second.
The findings are the real report's cluster findings plus those a test plants; the summary,
scores and advice are computed over them as the run would.
"""

from __future__ import annotations

import copy
from typing import Any

from gpu_preflight.findings.canonical import summarize
from gpu_preflight.findings.model import ReportFinding
from gpu_preflight.report.advice import add_advice
from gpu_preflight.report.scores import add_scores

from .report_data import cluster_report


def name(i: int) -> str:
    return f"n{i:05d}"


def finding(node: int, check_id: str, status: str, subject: str, code: str, observed: Any = None,
            expected: Any = None, unit: str | None = None) -> dict[str, Any]:
    return {"node": f"node_{node}", "check_id": check_id, "status": status, "subject": subject, "code": code,
            "summary": f"{subject}: {code} (observed {observed})", "observed": observed, "expected": expected,
            "unit": unit, "recommendation": f"Look at {check_id} on this node.", "details": {}}


def large_report(nodes: int, *, slow_node: int = 7, planted: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """``nodes`` nodes (the template's GPUs each); ``slow_node``'s node-local fabric at half speed; ``planted``
    findings added (each counted in the summary, scores and advice)."""
    base = cluster_report(nodes=3, per_node=2)
    template = base["nodes"]["node_1"]
    sections = {}
    for i in range(nodes):
        section = dict(template)
        section["node_info"] = {**template["node_info"], "hostname": name(i), "current_host": name(i)}
        section["gpu"] = {key: {**gpu, "temperature_c": 35 + (i * 7 + int(key[-1])) % 40,
                                "power_draw_w": 100.0 + (i % 50)} for key, gpu in template["gpu"].items()}
        tests = {}
        for key, entry in (template.get("nccl") or {}).get("communication_tests", {}).items():
            if entry.get("test_type") == "intra_node":
                factor = 0.5 if i == slow_node else 1.0 - (i % 10) / 100
                entry = {**entry, "group": f"node{i}",
                         "results": [{**r, "busbw_gbps": r["busbw_gbps"] * factor} for r in entry["results"]]}
            tests[key] = entry
        section["nccl"] = {**template["nccl"], "communication_tests": tests}
        sections[f"node_{i}"] = section
    findings = [f for f in base["findings"] if f["node"] == "cluster"] + copy.deepcopy(planted or [])
    report = {**base, "nodes": sections, "findings": findings, "artifacts": []}
    report["cluster_info"] = copy.deepcopy(base["cluster_info"])
    report["cluster_info"]["cluster_topology"].update(total_nodes=nodes, world_size=nodes * 2)
    fresh = summarize(ReportFinding.many_from_dicts(findings), "fail").to_dict()
    for key in ("cluster_info", "performance_summary"):
        fresh.pop(key)
    summary = {**base["cluster_summary"], **fresh}
    for key in ("health_scores", "recommendations_by_urgency", "cost_benefit"):
        summary.pop(key, None)
    report["cluster_summary"] = summary
    return add_advice(add_scores(report))
