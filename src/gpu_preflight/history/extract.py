"""What a run leaves in the history: where each GPU was, what was found, and the numbers.

Everything is read from the report alone (the typed :class:`~gpu_preflight.findings.model.ClusterReport`,
or its JSON dict read into one), so ``history import`` of a report saved months ago files
it exactly as the run itself would have. A GPU is known by
its UUID and board serial, not by the host it sat in: that is what lets a later run
recognise a GPU that failed before and was moved to another host.

Cluster checks name GPUs ``<node>/gpu<local rank>``; the local rank is taken to be the
NVML index of the GPU (true unless ``CUDA_VISIBLE_DEVICES`` reorders the devices).
"""

from __future__ import annotations

import hashlib
import re
from collections import Counter
from collections.abc import Mapping
from typing import Any

import msgspec

from ..findings.model import ClusterReport, GpuEntry, HealthScores, ReportFinding
from ..ids import GEMM_ID, MEMORY_BANDWIDTH_ID
from ..report.measurements import num, scope_op

__all__ = ["FindingSeen", "GpuSeen", "Measurement", "NodeIndex", "RunRecord", "extract", "metric_kind", "run_key"]

_SLOT = re.compile(r"^(?P<node>.+)/(?P<slot>gpu\d+|rank\d+)$")
_NO_SERIAL = {"", "0", "n/a", "[n/a]", "not supported", "[not supported]", "unknown"}
_MEMORY_KEYS = ("device_copy", "h2d", "d2h")


class GpuSeen(msgspec.Struct, frozen=True):
    """One GPU in one run: the slot it occupied and who it is."""

    node: str
    slot: str
    uuid: str | None
    serial: str | None
    model: str | None
    pci_bus_id: str | None


class Measurement(msgspec.Struct, frozen=True):
    """One number of a run. ``node`` is None for cluster-wide numbers, ``slot`` None for node-wide ones."""

    metric: str
    value: float
    unit: str
    subject: str
    node: str | None
    slot: str | None = None
    uuid: str | None = None
    serial: str | None = None
    model: str | None = None


class FindingSeen(msgspec.Struct, frozen=True):
    """A finding, tied to a node and (where its subject is one) to a GPU's identity."""

    check_id: str
    status: str
    subject: str
    code: str
    summary: str
    node: str | None
    slot: str | None = None
    uuid: str | None = None
    serial: str | None = None


class RunRecord(msgspec.Struct):
    """The part of a report the history keeps."""

    key: str
    timestamp: str
    status: str
    num_nodes: int
    world_size: int
    tool_version: str | None
    nodes: list[str]
    gpus: list[GpuSeen] = []
    findings: list[FindingSeen] = []
    measurements: list[Measurement] = []
    scores: dict[str, float | None] = {}

    def gpu(self, node: str | None, slot: str | None) -> GpuSeen | None:
        for g in self.gpus:
            if g.node == node and g.slot == slot:
                return g
        return None


def metric_kind(metric: str) -> str | None:
    """``tflops`` or ``bandwidth`` for judged metrics; None for trend-only ones (temperature, power)."""
    if metric.startswith("gemm."):
        return "tflops"
    if metric.startswith(("busbw.", "memory.")):
        return "bandwidth"
    return None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _serial(value: Any) -> str | None:
    text = _text(value)
    return None if text is None or text.strip().lower() in _NO_SERIAL else text.strip()


class NodeIndex:
    """The report's node sections: names as subjects use them, and each node's GPUs."""

    def __init__(self, report: ClusterReport) -> None:
        self.keys: list[str] = []
        self.index: dict[str, int] = {}
        self.names: list[str] = []
        self.aliases: dict[str, int] = {}
        self.gpus: list[dict[str, GpuSeen]] = []
        sections = list(report.nodes.items())
        hostnames = [section.node_info.hostname for _, section in sections]
        shared = {host for host, n in Counter(hostnames).items() if n > 1}  # one pass: 100,000 nodes stay linear
        for i, (key, section) in enumerate(sections):
            current = section.node_info.current_host or hostnames[i] or key
            # the host name is the machine's identity across jobs; where hosts share one
            # (containers, loopback tests) the launcher's distinct name is used instead
            name = hostnames[i] if hostnames[i] and hostnames[i] not in shared else current
            self.keys.append(key)
            self.index[key] = i
            self.names.append(name)
            for alias in (hostnames[i], name, current):
                if alias:
                    self.aliases.setdefault(alias, i)
            self.aliases[current] = i
            self.gpus.append(self._gpus(name, section.gpu))

    @staticmethod
    def _gpus(node: str, section: Mapping[str, GpuEntry]) -> dict[str, GpuSeen]:
        out = {}
        for key, gpu in section.items():
            index = key.rsplit("_", 1)[-1]
            if not index.isdigit() or not isinstance(gpu, Mapping):
                continue
            slot = f"gpu{index}"
            out[slot] = GpuSeen(node, slot, _text(gpu.get("uuid")), _serial(gpu.get("serial")), _text(gpu.get("name")),
                                _text(gpu.get("pci_bus_id")))
        return out

    def model(self, i: int) -> str | None:
        models = [g.model for g in self.gpus[i].values() if g.model]
        return models[0] if models else None

    def locate(self, subject: str, node_key: str | None) -> tuple[int | None, str | None]:
        """Node index and slot a subject names (``h3/gpu2`` → (3, 'gpu2')); a bare node name → (i, None)."""
        m = _SLOT.match(subject)
        prefix, slot = (m.group("node"), m.group("slot")) if m else (subject, None)
        if node_key is not None and (i := self.index.get(node_key)) is not None:
            return i, slot
        return self.aliases.get(prefix), slot


def run_key(report: ClusterReport) -> str:
    """Identity of a run: the same report imported twice is filed once."""
    typed = report
    hosts = sorted(section.node_info.hostname for section in typed.nodes.values())
    text = f"{typed.timestamp}|{','.join(hosts)}|{typed.cluster_info.cluster_topology.world_size}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def extract(report: ClusterReport) -> RunRecord:
    """The history's view of a report (typed, or its JSON dict)."""
    typed = report
    nodes = NodeIndex(typed)
    topo = typed.cluster_info.cluster_topology
    summary = typed.cluster_summary
    record = RunRecord(run_key(typed), typed.timestamp, summary.overall_status.value,
                       int(topo.total_nodes or len(nodes.names)), int(topo.world_size or 1),
                       _text(typed.tool.version), list(nodes.names))
    for per_node in nodes.gpus:
        record.gpus.extend(per_node.values())
    for f in typed.findings:
        record.findings.append(_finding(nodes, f))
    record.measurements += _gemm_and_memory(nodes, typed)
    record.measurements += _bus_bandwidth(nodes, typed)
    record.measurements += _sensors(nodes, typed)
    record.scores = _scores(summary.health_scores)
    return record


def _scores(health: HealthScores | None) -> dict[str, float | None]:
    """Each component's score and ``overall`` (``None``: not tested), for the trend of later runs."""
    if health is None:
        return {}
    return {name: num(score) for name, score in health.by_name().items()}


def _where(nodes: NodeIndex, subject: str, node_key: str | None) -> dict[str, Any]:
    i, slot = nodes.locate(subject, node_key)
    if i is None:
        return {"node": None, "slot": None}
    gpu = nodes.gpus[i].get(slot or "")
    return {"node": nodes.names[i], "slot": slot, "uuid": gpu.uuid if gpu else None,
            "serial": gpu.serial if gpu else None}


def _finding(nodes: NodeIndex, f: ReportFinding) -> FindingSeen:
    node_key = f.node if f.node != "cluster" else None
    return FindingSeen(f.check_id, f.status.value, f.subject, f.code or "", f.summary or "",
                       **_where(nodes, f.subject, node_key))


def _at(nodes: NodeIndex, subject: str, metric: str, value: float, unit: str) -> Measurement:
    i, slot = nodes.locate(subject, None)
    if i is None:
        return Measurement(metric, value, unit, subject, None, None)
    gpu = nodes.gpus[i].get(slot or "")
    if gpu is None:
        return Measurement(metric, value, unit, subject, nodes.names[i], slot)
    return Measurement(metric, value, unit, subject, nodes.names[i], slot, gpu.uuid, gpu.serial, gpu.model)


def _gemm_and_memory(nodes: NodeIndex, report: ClusterReport) -> list[Measurement]:
    """Per-GPU GEMM TFLOP/s (``compute.gemm``) and memory bandwidth (``memory.bandwidth``)."""
    out = []
    for found in report.findings:
        if found.check_id != GEMM_ID and found.check_id != MEMORY_BANDWIDTH_ID:
            continue
        for f in found.per_subject():
            subject, observed = f.subject, f.observed
            if f.check_id == GEMM_ID and f.unit == "TFLOP/s":
                dtype = f.details.get("dtype")
                value = num(observed)
                if isinstance(dtype, str) and value is not None:
                    out.append(_at(nodes, subject, f"gemm.{dtype}", value, "TFLOP/s"))
            elif f.check_id == MEMORY_BANDWIDTH_ID and _SLOT.match(subject):
                out += _memory(nodes, f)
    return out


def _memory(nodes: NodeIndex, f: ReportFinding) -> list[Measurement]:
    """A GPU's memory bandwidth: each direction of a full finding, or the one a rolled-up pass names."""
    out = []
    subject, observed = f.subject, f.observed
    if isinstance(observed, Mapping):
        for key in _MEMORY_KEYS:
            value = num(observed.get(f"{key}_gbps"))
            if value is not None:
                out.append(_at(nodes, subject, f"memory.{key}", value, "GB/s"))
    elif (key := str(f.details.get("memory_key") or f.code.removesuffix("_slow"))) in _MEMORY_KEYS:
        value = num(observed)
        if value is not None:
            out.append(_at(nodes, subject, f"memory.{key}", value, "GB/s"))
    return out


def _bus_bandwidth(nodes: NodeIndex, report: ClusterReport) -> list[Measurement]:
    """Bus bandwidth at the largest message size, per collective and process group.

    Node-local groups (and, in a one-node report, the world group) belong to their node
    and are named ``busbw.intra_node.*``; groups that cross nodes belong to the cluster.
    So a node's NVLink/PCIe numbers are never compared with a network's. The rank count is
    part of the metric: 16 ranks and 128 ranks are different baselines.
    """
    out, seen = [], set()
    single = len(nodes.names) == 1
    # Read as JSON objects (the faster path, NodeSections.collectives): every entry of every node, on rank 0.
    for i, tests in enumerate(report.nodes.collectives()):
        for key, entry in tests.items():
            scope, op = scope_op(key, entry.get("test_type"))
            group = str(entry.get("group") or key)
            results = [(int(r.get("size_bytes") or 0), busbw) for r in entry.get("results") or []
                       if (busbw := num(r.get("busbw_gbps"))) is not None]
            if (scope, group, op) in seen or not entry.get("success") or not results:
                continue
            seen.add((scope, group, op))
            top = max(results, key=lambda r: r[0])[1]  # the bandwidth at the largest size
            node_local = scope == "intra_node" or single
            label = "intra_node" if node_local else scope  # one node's world group is its node-local fabric
            metric = f"busbw.{label}.{op}@{int(entry.get('processes_tested') or 0)}"
            owner = i
            if scope == "intra_node" and group.startswith("node") and group[4:].isdigit():
                owner = int(group[4:])
            if node_local and owner < len(nodes.names):
                out.append(Measurement(metric, top, "GB/s", nodes.names[owner],
                                       nodes.names[owner], model=nodes.model(owner)))
            elif not node_local:
                out.append(Measurement(metric, top, "GB/s", "cluster", None,
                                       model=nodes.model(0)))
    return out


def _sensors(nodes: NodeIndex, report: ClusterReport) -> list[Measurement]:
    """GPU temperature and power when the node was checked: trends only, never judged."""
    out = []
    for i, section in enumerate(report.nodes.values()):
        for key, gpu in section.gpu.items():
            seen = nodes.gpus[i].get(f"gpu{key.rsplit('_', 1)[-1]}")
            if seen is None:
                continue
            for field_name, metric, unit in (("temperature_c", "temperature", "C"), ("power_draw_w", "power", "W")):
                value = num(gpu.get(field_name))
                if value is not None:
                    out.append(Measurement(metric, value, unit, f"{seen.node}/{seen.slot}", seen.node, seen.slot,
                                           seen.uuid, seen.serial, seen.model))
    return out
