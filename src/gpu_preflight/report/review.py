"""The health assessment's per-node views: header facts, infrastructure overview, software
stack, GPU memory and the service-availability matrix.

Pure derivations from the canonical report, shared by the Markdown and HTML renderers (the
user's health-assessment report, spec 002, shows each of them). Nothing here is invented:
a value the report does not hold is ``None``, and each section says *why* it is not
measured (a node-only run reads no torch; no image reference was given; no GPU was read).
Each view lists nodes one by one only up to ``report.detail_max_nodes``; above, it keeps
what stays readable at 10,000 nodes (distinct values with how many nodes hold each, and
counts of nodes per status).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

from ..config.report_schema import ReportConfig
from ..findings.canonical import Judged, group_statuses, report_groups
from ..findings.model import ClusterReport, HealthScores, NetworkSection, ReportFinding
from ..ids import STACK_CUDA_ID
from ..model import Status
from .connectivity import node_names
from .measurements import num
from .scores import component_of

__all__ = ["NodeRows", "gpu_memory", "header_facts", "infrastructure", "service_matrix",
           "software_stack"]

# The variable workloads.stack reads the image from (the report layer may not import workloads;
# tests/test_report_review.py holds the two equal).
IMAGE_VARIABLE = "GPU_PREFLIGHT_IMAGE"
SHOWN = 4  # node names shown beside one value of a stack component or one group's problem nodes
WORKLOAD_GROUPS = ("compute", "nccl_communication", "training")
COMPREHENSIVE_GROUPS = ("gpu_detection", "gpu_health", "system_resources", "dcgm_extended", *WORKLOAD_GROUPS)
LAUNCHERS = {"torchrun": "torchrun (PyTorch elastic launcher)", "slurm": "Slurm (srun)",
             "sagemaker": "Amazon SageMaker training job", "self": "gpu-preflight's own workers on one node",
             "none": "started by hand on one node"}
PURPOSE = ("not recorded: the report does not say what the cluster will run; gpu-preflight judges its fitness "
           "for distributed training")
HEALTH_WORDS = {"PASS": "HEALTHY", "WARN": "WARN", "FAIL": "FAIL", "ERROR": "ERROR (not measured)"}


class NodeRows:
    """Which node a finding belongs to: its node key's name, the node its subject names, the
    node of a ``group node<i>`` subject, or ``cluster`` (a dict lookup each: a 10,000-node
    report has a finding for many of its nodes, and searching the name list each time was
    quadratic). The HTML grid and the service matrix share it, so they agree."""

    def __init__(self, report: ClusterReport) -> None:
        self.names = node_names(report)
        self.by_key: dict[str, str] = dict(zip(map(str, report.nodes), self.names, strict=True))
        self.known = set(self.names)

    def of(self, finding: ReportFinding) -> str:
        name = self.by_key.get(str(finding.node))
        if name is not None:
            return name
        subject = str(finding.subject)
        head = subject.split("/", 1)[0]
        if head in self.known:
            return head
        m = re.fullmatch(r"group node(\d+)", subject)
        if m and int(m.group(1)) < len(self.names):
            return self.names[int(m.group(1))]
        return "cluster"

    def every(self, finding: ReportFinding) -> list[str]:
        """Every node a finding is about: both ends of a node pair (``h0<->h1``), else :meth:`of`'s one."""
        subject = str(finding.subject)
        if "<->" in subject and str(finding.node) not in self.by_key:
            ends = [h for part in subject.split("<->") if (h := part.split("/", 1)[0]) in self.known]
            if ends:
                return ends
        return [self.of(finding)]


def _stamp(text: Any) -> datetime | None:
    try:
        return datetime.fromisoformat(str(text))
    except ValueError:
        return None


def header_facts(report: ClusterReport) -> dict[str, Any]:
    """``generated`` (the run's timestamp), ``updated`` (the newest timestamp the report holds:
    a node section read later than the run started) and the assessment type from the test
    groups the run judged: COMPREHENSIVE when node checks, DCGM's extended diagnostic and
    the GPU workloads all ran; CLUSTER when workloads ran across nodes; NODE otherwise."""
    typed = report
    sections = typed.nodes
    stamps = [(s, t) for s in [typed.timestamp, *(sections.raw(k).get("timestamp") for k in sections)]
              if (t := _stamp(s)) is not None]
    latest = max(stamps, key=lambda st: st[1])[0] if stamps else None
    if latest is not None and typed.timestamp and _stamp(typed.timestamp) == _stamp(latest):
        latest = typed.timestamp
    groups = report_groups(typed)
    judged = [g for g, s in groups.items() if s is not None]
    missing = [g for g, s in groups.items() if s is None]
    nodes = len(typed.nodes)
    if all(groups.get(g) is not None for g in COMPREHENSIVE_GROUPS):
        kind = "COMPREHENSIVE SYSTEM HEALTH CHECK"
    elif nodes > 1 and any(groups.get(g) is not None for g in WORKLOAD_GROUPS):
        kind = "CLUSTER HEALTH CHECK"
    else:
        kind = "NODE HEALTH CHECK"
    return {"generated": typed.timestamp or None, "updated": latest, "assessment_type": kind,
            "groups_judged": judged, "groups_not_tested": missing}


def _models(report: ClusterReport) -> dict[str, int]:
    out: dict[str, int] = {}
    for gpus in report.nodes.blocks("gpu"):
        for g in gpus.values():
            name = g.get("name") or "unnamed GPU"
            out[str(name)] = out.get(str(name), 0) + 1
    return out


def infrastructure(report: ClusterReport, scores: HealthScores | None = None) -> dict[str, str]:
    """Type, nodes, network, management and purpose, each from what the report recorded."""
    typed = report
    info, topo = typed.cluster_info, typed.cluster_info.cluster_topology
    names = node_names(typed)
    models = _models(typed)
    gpus = sum(models.values())
    shape = "GPU cluster" if len(names) > 1 else "single GPU node"
    if not gpus:
        kind = f"{'cluster' if len(names) > 1 else 'node'} with no GPU read (NVML described none)"
    else:
        kind = f"{shape}: " + ", ".join(f"{n} × {m}" for m, n in sorted(models.items()))
    shown = ", ".join(names[:6]) + (f" and {len(names) - 6} more" if len(names) > 6 else "")
    nodes = f"{len(names)} node(s) ({shown}), {gpus} GPU(s)"
    if info.missing_nodes:
        nodes += f"; missing: {', '.join(map(str, info.missing_nodes[:6]))}"
    if info.data_completeness:
        nodes += f"; data {info.data_completeness}"
    sections = typed.nodes
    profiles = sorted({str(p) for k in sections if (p := (sections.raw(k).get("node_info") or {}).get("profile"))})
    launcher = LAUNCHERS.get(topo.launcher or "none", topo.launcher or "none")
    management = f"launched by {launcher}" + (f"; profile {', '.join(profiles)}" if profiles else "")
    return {"type": kind, "nodes": nodes, "network": _network_line(typed, scores), "management": management,
            "purpose": PURPOSE}


def _network_line(report: ClusterReport, scores: HealthScores | None) -> str:
    """The fabric each node reported (libfabric provider, EFA devices, RDMA ports, the aws-ofi-nccl
    plugin) and the node-to-node speeds measured, or why none is known."""
    providers: dict[str, int] = {}
    efa = ports = active = plugin = 0
    rates: set[float] = set()
    for net in report.nodes.blocks("network"):
        if net is None:
            continue
        provider = net.fi_info.provider if net.fi_info is not None else None
        if provider:
            providers[str(provider)] = providers.get(str(provider), 0) + 1
        efa += len(net.efa_devices)
        plugin += net.aws_ofi_nccl_plugin.installed
        for port in net.rdma_ports or []:
            ports += 1
            active += str(port["state"] or "").upper().endswith("ACTIVE")
            if (rate := num(port["rate_gbps"])) is not None:
                rates.add(float(rate))
    parts = []
    if providers:
        parts.append("libfabric " + ", ".join(f"{p} on {n} node(s)" for p, n in sorted(providers.items())))
    if efa:
        parts.append(f"{efa} EFA device(s)")
    if ports:
        speed = "/".join(f"{r:g}" for r in sorted(rates))
        parts.append(f"{active} of {ports} RDMA port(s) active" + (f" at {speed} Gb/s" if speed else ""))
    if plugin:
        parts.append(f"aws-ofi-nccl on {plugin} node(s)")
    conn = scores.connectivity if scores is not None else None
    speeds = sorted(float(gbps) for p in (conn.pairs if conn else []) if (gbps := num(p["gbps"])) is not None)
    if speeds:
        parts.append(f"node pairs measured at {speeds[0]:.3g}-{speeds[-1]:.3g} GB/s (median "
                     f"{speeds[len(speeds) // 2]:.3g}, {len(speeds)} pair(s))")
    elif len(report.nodes) > 1:
        parts.append("node-to-node speed not measured (no node link in this report)")
    return "; ".join(parts) if parts else "not measured: no node recorded a fabric (fi_info, EFA, RDMA ports)"


# The software stack: (key, title, why a value is missing on every node).
STACK = (
    ("driver", "Driver", "no GPU was read through NVML"),
    ("cuda", "CUDA (driver)", "no GPU was read through NVML"),
    ("torch", "torch", "read by the workers (stack.cuda), which this run did not start (a node-only run)"),
    ("torch_cuda", "torch CUDA", "read by the workers (stack.cuda), which this run did not start (a node-only run)"),
    ("nccl", "NCCL", "read by the workers (stack.cuda), which this run did not start (a node-only run)"),
    ("aws_ofi_nccl", "aws-ofi-nccl", "the fabric probe did not run"),
    ("image", "Container image", f"no image recorded (set {IMAGE_VARIABLE} to the image reference or digest "
                                 f"where gpu-preflight runs: docs/reports.md)"),
)
_WORKER_KEYS = {"torch": "torch_version", "torch_cuda": "torch_cuda", "nccl": "nccl_version",
                "image": "container_image"}


def _stack_readings(report: ClusterReport) -> dict[str, dict[str, Any]]:
    """Per node name, what the workers read (``stack.cuda``'s findings; a rolled-up pass holds
    every node's versions in ``details.subjects``; a FAIL for a too-new CUDA names only it)."""
    out: dict[str, dict[str, Any]] = {}
    for f in report.findings:
        if f.check_id != STACK_CUDA_ID or f.status is Status.SKIP:
            continue
        rolled = f.details.get("subjects") if f.details.get("rolled_up") else None
        members = rolled.items() if isinstance(rolled, Mapping) else ((f.subject, f.observed),)
        for subject, observed in members:
            if isinstance(observed, Mapping):
                out[str(subject)] = dict(observed)
            elif isinstance(observed, str):  # cuda_newer_than_driver: observed is torch's CUDA
                out[str(subject)] = {"torch_cuda": observed}
    return out


def _plugin_cell(network: NetworkSection | None) -> str | None:
    if network is None:
        return None
    plugin = network.aws_ofi_nccl_plugin
    if not plugin.installed:
        return "not installed"
    return plugin.version or "installed (version not read)"


def _stack_rows(report: ClusterReport) -> list[dict[str, str | None]]:
    readings = _stack_readings(report)
    stack_ran = bool(readings)
    rows = []
    for name, gpus, facts, network in zip(node_names(report), report.nodes.blocks("gpu"),
                                          report.nodes.blocks("facts"), report.nodes.blocks("network"), strict=True):
        gpu_facts = (facts or {}).get("gpu") or {}
        driver = next((g.get("driver_version") for g in gpus.values() if g.get("driver_version")),
                      gpu_facts.get("driver_version"))
        cuda = gpu_facts.get("cuda_driver_version")
        row: dict[str, str | None] = {"node": name, "driver": driver if isinstance(driver, str) else None,
                                      "cuda": cuda if isinstance(cuda, str) else None}
        read = readings.get(name)
        for key, field in _WORKER_KEYS.items():
            value = (read or {}).get(field)
            row[key] = str(value) if value not in (None, "") else None
        if read and read.get("torch_version"):  # a CPU build has no CUDA and no NCCL: that is the reading
            row["torch_cuda"] = row["torch_cuda"] or "none (CPU build)"
            row["nccl"] = row["nccl"] or "none"
        elif stack_ran and not read:
            row.update(torch=None, torch_cuda=None, nccl=None)
        row["aws_ofi_nccl"] = _plugin_cell(network)
        rows.append(row)
    return rows


def _agreement(key: str, rows: Sequence[Mapping[str, Any]], why: str) -> dict[str, Any]:
    by_value: dict[str, list[str]] = {}
    for r in rows:
        if r[key] is not None:
            by_value.setdefault(str(r[key]), []).append(str(r["node"]))
    known = sum(map(len, by_value.values()))
    if not by_value:
        return {"status": "NOT MEASURED", "values": [], "text": f"not measured: {why}"}
    ordered = sorted(by_value.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    values: list[dict[str, Any]] = [{"value": v, "nodes": len(n), "names": n[:SHOWN]} for v, n in ordered]
    unknown = f"; not read on {len(rows) - known} node(s)" if known < len(rows) else ""
    if len(by_value) == 1:
        return {"status": "AGREE", "values": values,
                "text": f"{values[0]['value']} on {'all ' if not unknown else ''}{known} node(s){unknown}"}
    spread = "; ".join(f"{v} on {len(n)} node(s) ({', '.join(n[:SHOWN])}{', ...' if len(n) > SHOWN else ''})"
                       for v, n in ordered)
    return {"status": "DIFFER", "values": values, "text": f"differs between nodes: {spread}{unknown}"}


def software_stack(report: ClusterReport, cfg: ReportConfig) -> dict[str, Any]:
    """Driver, driver CUDA, torch and its CUDA, NCCL, the aws-ofi-nccl plugin and the container
    image per node (up to ``detail_max_nodes``), and for each whether the nodes agree."""
    typed = report
    rows = _stack_rows(typed)
    skipped = next((f.summary for f in typed.findings if f.check_id == STACK_CUDA_ID and f.status is Status.SKIP),
                   None)
    components = []
    for key, title, why in STACK:
        if key in ("torch", "torch_cuda", "nccl") and skipped:
            why = f"stack.cuda skipped: {skipped}"
        if key == "cuda" and any(r["driver"] for r in rows):
            why = "NVML gave no CUDA driver version (not in the node facts)"
        components.append({"key": key, "title": title, **_agreement(key, rows, why)})
    listed = len(rows) <= cfg.detail_max_nodes
    return {"columns": [(k, t) for k, t, _ in STACK], "nodes": rows if listed else [], "listed": listed,
            "components": components}


def _health(findings: Iterable[ReportFinding]) -> str:
    judged = [f.status for f in findings if f.status is not Status.SKIP
              and component_of(f.check_id) in ("hardware_health", "resource_management")]
    return HEALTH_WORDS[Status.worst(judged).value] if judged else "not tested"


def gpu_memory(report: ClusterReport, specs: Mapping[str, Any],
               scores: HealthScores) -> dict[str, Any]:
    """Per node: GPU memory, the share in use and the GPUs' utilisation when the node was checked
    (NVML, before any workload), the node's GPU and resource health (worst status of its hardware
    and resource findings) and its score; the cluster's totals. ``None`` where NVML gave no reading."""
    typed = report
    rows_of = NodeRows(typed)
    own: dict[str, list[ReportFinding]] = {}
    for f in typed.findings:
        own.setdefault(rows_of.of(f), []).append(f)
    score_of = {n["node"]: n["score"] for n in specs.get("nodes") or []}
    rows = []
    totals = {"total": 0.0, "used": 0.0, "util": 0.0, "util_n": 0, "read": 0}
    listed = bool(specs.get("listed"))
    for name, gpus in zip(rows_of.names, typed.nodes.blocks("gpu"), strict=True):
        total = sum(float(g.get("memory_total_mb") or 0) for g in gpus.values())
        used_values = [num(g.get("memory_used_mb")) for g in gpus.values()]
        used = sum(v for v in used_values if v is not None) if used_values and None not in used_values else None
        utils = [u for g in gpus.values() if (u := num(g.get("utilization_percent"))) is not None]
        totals["total"] += total
        if used is not None and total:
            totals["used"] += used
            totals["read"] += total
        totals["util"] += sum(utils)
        totals["util_n"] += len(utils)
        if listed:
            rows.append({"node": name, "gpus": len(gpus), "memory_gb": round(total / 1024, 2),
                         "used_gb": None if used is None else round(used / 1024, 2),
                         "used_percent": None if used is None or not total else round(100 * used / total, 1),
                         "utilization_percent": round(sum(utils) / len(utils), 1) if utils else None,
                         "health": _health(own.get(name, ())), "score": score_of.get(name)})
    cluster = {"memory_gb": round(totals["total"] / 1024, 2),
               "used_percent": round(100 * totals["used"] / totals["read"], 1) if totals["read"] else None,
               "utilization_percent": round(totals["util"] / totals["util_n"], 1) if totals["util_n"] else None,
               "health": _health(typed.findings), "score": scores.overall.score}
    return {"nodes": rows, "listed": listed, "cluster": cluster}


def service_matrix(report: ClusterReport, columns: int) -> dict[str, Any]:
    """Each test group's status per node (the findings of the node and the cluster checks that
    name it, both ends of a node pair), its status over cluster-wide findings (``cluster``),
    its reliability (the share of nodes where it was judged that PASS) and its status over
    the whole run. Up to ``columns`` nodes one column each; above, nodes counted per status."""
    typed = report
    rows_of = NodeRows(typed)
    own: dict[str, list[Judged]] = {}
    for f in typed.findings:
        entry = (f.check_id, f.status.value, f.details)
        for name in rows_of.every(f):
            own.setdefault(name, []).append(entry)
    per_node = {name: group_statuses(own.get(name, [])) for name in rows_of.names}
    cluster = group_statuses(own.get("cluster", []))
    overall = report_groups(typed)
    rows = []
    for group, status in overall.items():
        if status is None:
            continue
        cells = [per_node[name][group] for name in rows_of.names]
        judged = [c for c in cells if c is not None]
        counts = {s.value: sum(c is s for c in judged) for s in (Status.FAIL, Status.ERROR, Status.WARN, Status.PASS)}
        whole = cluster[group]
        rows.append({"group": group, "status": status.value, "cluster": None if whole is None else whole.value,
                     "cells": [None if c is None else c.value for c in cells] if len(cells) <= columns else None,
                     "counts": counts, "untested_nodes": len(cells) - len(judged),
                     "reliability": round(100 * counts["PASS"] / len(judged), 1) if judged else None,
                     "problem_nodes": [n for n, c in zip(rows_of.names, cells, strict=True)
                                       if c is not None and c is not Status.PASS][:SHOWN]})
    return {"nodes": rows_of.names if len(rows_of.names) <= columns else None, "rows": rows,
            "cluster_column": any(r["cluster"] is not None for r in rows),
            "not_tested": [g for g, s in overall.items() if s is None]}
