"""The canonical JSON report: every other format renders from this dict.

The layout keeps the SageMaker cluster health check report (``timestamp``,
``cluster_info``, ``cluster_summary``, ``nodes.node_<i>`` with ``node_info``, ``summary``,
``gpu``, ``system``, ``network``, ``nccl``, ``dcgm``) so users of that tool can switch,
and adds ``schema_version``, structured ``findings`` and ``artifacts`` (raw outputs saved
beside the report and referenced by path).
"""

from __future__ import annotations

import fnmatch
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from .. import __version__
from ..model import SCHEMA_VERSION, CheckResult, Finding, NodeReport, Status, gated_exit_code, gating_statuses, verdict
from .diagnostic_sections import diagnostic_sections

# cluster_summary.test_results: group name → check-id globs. A group is true when it
# has a PASS and nothing worse than SKIP, false when anything WARNs or worse, and null
# when every check in it was skipped (not tested is not the same as passed).
TEST_GROUPS: dict[str, tuple[str, ...]] = {
    "gpu_detection": ("gpu.nvml", "gpu.inventory.*"),
    "gpu_health": ("gpu.ecc.*", "gpu.memory.*", "gpu.recovery_action", "gpu.thermal", "gpu.clocks",
                   "gpu.power", "gpu.busy", "gpu.xid"),
    "gpu_links": ("gpu.pcie", "gpu.nvlink"),
    "system_resources": ("system.*",),
    "nccl_communication": ("nccl.*", "nccl_tests.*", "cluster.completeness"),
    "efa_network": ("fabric.*", "ib.*"),
    "dcgm_diagnostics": ("dcgm.*",),
    "compute": ("compute.*", "memory.*"),
    "training": ("train.*", "stack.*"),
}
READY = "Cluster is ready for distributed training"
MB = 1024 * 1024
GB = 1024**3


@functools.cache
def _groups_of(check_id: str) -> tuple[str, ...]:
    """The test groups a check id belongs to (cached: one glob match per id, not per finding)."""
    return tuple(name for name, pats in TEST_GROUPS.items() if any(fnmatch.fnmatchcase(check_id, p) for p in pats))


def _test_results(findings: list[Finding]) -> dict[str, bool | None]:
    """True: a PASS and nothing worse than SKIP; False: a WARN or worse; None: all skipped."""
    seen: dict[str, set[Status]] = {name: set() for name in TEST_GROUPS}
    for f in findings:
        for name in _groups_of(f.check_id):
            seen[name].add(f.status)
    out: dict[str, bool | None] = {}
    for name, statuses in seen.items():
        if not statuses or statuses == {Status.SKIP}:
            out[name] = None
        else:
            out[name] = Status.worst(statuses).rank <= Status.SKIP.rank
    return out


def summarize(findings: list[Finding], fail_on: str) -> dict[str, Any]:
    """The ``summary`` block: overall status, test groups, issues and recommendations."""
    overall = verdict(f.status for f in findings)
    ordered = sorted((f for f in findings if f.status.rank >= Status.WARN.rank),
                     key=lambda f: (-f.status.rank, f.check_id, f.subject))
    issues = [f"[{f.status.value}] {f.subject} {f.check_id}: {f.summary}" for f in ordered]
    recommendations = list(dict.fromkeys(
        f"{f.subject}: {f.recommendation}" for f in ordered if f.recommendation))
    if not gating_statuses(fail_on) & {f.status for f in findings} and overall is Status.PASS:
        recommendations.append(READY)
    return {
        "overall_status": overall.value,
        "exit_code": gated_exit_code(overall, fail_on),
        "test_results": _test_results(findings),
        "cluster_info": {},
        "performance_summary": {},
        "issues": issues,
        "recommendations": recommendations,
        "counts": {s.value: sum(1 for f in findings if f.status is s) for s in Status},
    }


def _gpu_section(facts: dict[str, Any]) -> dict[str, Any]:
    gpu = facts.get("gpu") or {}
    out: dict[str, Any] = {}
    for rec in gpu.get("gpus", []):

        def num(key: str, scale: float = 1.0, _rec: dict[str, Any] = rec) -> Any:
            v = _rec.get(key)
            if not isinstance(v, (int, float)) or isinstance(v, bool):
                return None
            return round(v / scale) if scale != 1.0 else v

        out[f"gpu_{rec['index']}"] = {
            "name": rec.get("name") if isinstance(rec.get("name"), str) else None,
            "driver_version": gpu.get("driver_version") if isinstance(gpu.get("driver_version"), str) else None,
            "memory_total_mb": num("memory_total_bytes", MB),
            "memory_used_mb": num("memory_used_bytes", MB),
            "memory_free_mb": num("memory_free_bytes", MB),
            "temperature_c": num("temperature_c"),
            "utilization_percent": num("utilization_gpu_percent"),
            "power_draw_w": num("power_draw_w"),
            "uuid": rec.get("uuid") if isinstance(rec.get("uuid"), str) else None,
            "serial": rec.get("serial") if isinstance(rec.get("serial"), str) else None,
            "pci_bus_id": rec.get("pci_bus_id") if isinstance(rec.get("pci_bus_id"), str) else None,
            "vbios": rec.get("vbios") if isinstance(rec.get("vbios"), str) else None,
            "lost": rec.get("lost"),
        }
    return out


def _system_section(facts: dict[str, Any]) -> dict[str, Any]:
    s = facts.get("system") or {}

    def num(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    total, avail = num(s.get("memory_total_bytes")), num(s.get("memory_available_bytes"))
    section: dict[str, Any] = {}
    if total is not None and avail is not None:
        section["memory"] = {"total_gb": round(total / GB, 2), "available_gb": round(avail / GB, 2),
                             "used_percent": round(100 * (total - avail) / total, 2) if total else None}
    disks = s.get("disks") or []
    if disks:
        d = disks[0]
        dt, df = num(d.get("total_bytes")), num(d.get("free_bytes"))
        if dt is not None and df is not None:
            section["disk"] = {"path": d.get("path"), "total_gb": round(dt / GB, 2), "free_gb": round(df / GB, 2),
                               "used_percent": round(100 * (dt - df) / dt, 2) if dt else None}
    if num(s.get("cpu_count")) is not None:
        section["cpu"] = {"usage_percent": num(s.get("cpu_percent")), "count": s.get("cpu_count"),
                          "load_1m": num(s.get("load_1m"))}
    return section


def node_section(report: NodeReport, node_info: dict[str, Any] | None = None) -> dict[str, Any]:
    gpus = _gpu_section(report.facts)
    info = {
        "hostname": report.hostname, "world_size": 1, "rank": 0, "local_rank": 0, "host_rank": 0,
        "host_count": 1, "gpus_per_host": len(gpus), "profile": report.profile,
        "config_sources": report.config_sources,
    }
    info.update(node_info or {})
    return {
        "timestamp": report.timestamp,
        "node_info": info,
        "summary": summarize(report.findings, report.fail_on),
        "gpu": gpus,
        "system": _system_section(report.facts),
        **diagnostic_sections(report.facts, report.artifacts),
        "checks": [r.to_dict() for r in report.results],
        "facts": report.facts,
        "duration_s": round(report.duration_s, 4),
    }


def build_report(nodes: list[NodeReport], *, expected_total_gpus: int | None = None,
                 node_infos: list[dict[str, Any]] | None = None, node_extras: list[dict[str, Any]] | None = None,
                 cluster_results: list[CheckResult] | None = None, topology: dict[str, Any] | None = None,
                 missing_nodes: list[str] | None = None,
                 performance_summary: dict[str, Any] | None = None) -> dict[str, Any]:
    """The whole report for one or more node reports (node_0 ... in the given order).

    A distributed run adds ``cluster_results`` (checks over the gathered workloads, listed
    with ``"node": "cluster"``), per-node sections such as ``nccl`` (``node_extras``), the
    job topology and the nodes that never reported.
    """
    if not nodes:
        raise ValueError("a report needs at least one node")
    fail_on = nodes[0].fail_on
    sections = {f"node_{i}": node_section(n, (node_infos or [{}] * len(nodes))[i])
                for i, n in enumerate(nodes)}
    for key, extra in zip(sections, node_extras or [], strict=False):
        for name, value in extra.items():  # extras add to a section (nccl, network), never wipe what the node said
            current = sections[key].get(name)
            sections[key][name] = {**current, **value} if isinstance(current, dict) and isinstance(value, dict) \
                else value
    findings = []
    for key, node in zip(sections, nodes, strict=True):
        for f in node.findings:
            findings.append({"node": key, **f.to_dict()})
    cluster_findings = [f for r in cluster_results or [] for f in r.findings]
    findings += [{"node": "cluster", **f.to_dict()} for f in cluster_findings]
    all_findings = [f for n in nodes for f in n.findings] + cluster_findings
    gpus_per_node = [len(s["gpu"]) for s in sections.values()]
    topo = topology or {}
    summary = summarize(all_findings, fail_on)
    summary["performance_summary"] = performance_summary or {}
    missing = missing_nodes or []
    report = {
        "schema_version": SCHEMA_VERSION,
        "tool": {"name": "gpu-preflight", "version": __version__},
        "timestamp": nodes[0].timestamp,
        "cluster_info": {
            "data_completeness": "complete" if not missing else f"incomplete: missing {', '.join(missing)}",
            "note": f"Data from all {len(nodes)} nodes" if not missing else
                    f"Data from {len(nodes) - len(missing)} of {len(nodes)} nodes",
            "expected_total_gpus": expected_total_gpus,
            "cluster_topology": {
                "total_nodes": topo.get("num_nodes", len(nodes)),
                "gpus_per_node": max(gpus_per_node) if gpus_per_node else 0,
                "processes_per_node": topo.get("local_world_size", 1),
                "world_size": topo.get("world_size", 1),
                "launcher": topo.get("launcher", "none"),
            },
            "missing_nodes": missing,
        },
        "cluster_summary": summary,
        "cluster_checks": [r.to_dict() for r in cluster_results or []],
        "nodes": sections,
        "findings": findings,
        "artifacts": [dict(a, node=key) for key, node in zip(sections, nodes, strict=True) for a in node.artifacts],
        "run": {"fail_on": fail_on, "duration_s": round(max(n.duration_s for n in nodes), 4)},
    }
    from .advice import add_advice
    from .scores import add_scores

    return add_advice(add_scores(report))


def save_artifacts(node: NodeReport, out: Path, node_key: str) -> list[dict[str, Any]]:
    """Write a node's raw outputs under ``out/artifacts/<node_key>/``; return their references."""
    refs = []
    for name, (filename, content) in sorted(node.raw_artifacts.items()):
        rel = Path("artifacts") / node_key / filename
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        data = content.encode("utf-8")
        (out / rel).write_bytes(data)
        refs.append({"name": name, "node": node_key, "path": str(rel), "bytes": len(data),
                     "sha256": hashlib.sha256(data).hexdigest()})
    return refs


def write_report(report: dict[str, Any], nodes: list[NodeReport], report_dir: str | Path) -> Path:
    """Write ``report.json`` and the raw artifacts beside it; return the report path.

    Artifacts are listed in the report by relative path with size and SHA-256, so the
    report stays small and the raw outputs stay verifiable.
    """
    out = Path(report_dir)
    out.mkdir(parents=True, exist_ok=True)
    artifacts = [a for a in report.get("artifacts", []) if a.get("path")]  # saved on their nodes already
    for i, node in enumerate(nodes):
        artifacts += save_artifacts(node, out, f"node_{i}")
    report["artifacts"] = artifacts
    path = out / "report.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    tmp.replace(path)
    from .html import render_html

    (out / "report.html").write_text(render_html(report), encoding="utf-8")
    return path


def findings_of(report: dict[str, Any]) -> list[Finding]:
    """Findings of a saved report (for re-rendering)."""
    return [Finding.from_dict(f) for f in report.get("findings", [])]


def failed_checks(report: dict[str, Any]) -> list[str]:
    """Check ids that make the run fail under its ``--fail-on`` policy, worst first."""
    gating = {s.value for s in gating_statuses(report.get("run", {}).get("fail_on", "fail"))}
    rank = {s.value: s.rank for s in Status}
    bad = sorted((f for f in report.get("findings", []) if f["status"] in gating),
                 key=lambda f: (-rank[f["status"]], f["check_id"]))
    return list(dict.fromkeys(f["check_id"] for f in bad))


def result_line(report: dict[str, Any]) -> str:
    """The acceptance suite's last line: ``[RESULT] SUCCESS`` or ``[RESULT] FAILURE: [...]``."""
    failed = failed_checks(report)
    if failed:
        return f"[RESULT] FAILURE: [{', '.join(failed)}]"
    return "[RESULT] SUCCESS"


def display(value: Any, unit: str | None = None) -> str:
    """A compact human form of an observed/expected value."""
    if value is None:
        return ""
    if isinstance(value, dict) and set(value) == {"na"}:
        return f"N/A ({value['na']})"
    if isinstance(value, float):
        value = f"{value:g}"
    elif isinstance(value, (dict, list)):
        value = json.dumps(value, separators=(",", ":"))
        if len(value) > 60:
            value = value[:57] + "..."
    text = str(value)
    numeric = text.lstrip("<>= ").replace(".", "", 1).lstrip("-").isdigit()
    return f"{text} {unit}" if unit and numeric else text
