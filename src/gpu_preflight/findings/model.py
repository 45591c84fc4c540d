"""The cluster report as typed, frozen values: what ``report.json`` holds, one class per block.

Every reader used to walk one untyped dict by string key, and a block that one reader
spelled differently from another (or that a later step mutated) made formats disagree.
These classes are the report's one layout: :mod:`.schema` generates the shipped JSON
Schema from them, and ``to_dict`` gives exactly the JSON the report has always had (same
keys, same order, same types), so a report read back with ``from_dict`` and written again
is the same file.

Both directions are written by hand, as :class:`~gpu_preflight.model.Finding`'s are: a
10,000-node report holds tens of thousands of these objects, and ``dataclasses.asdict``'s
deep copy would cost more than the aggregation. Large free-form blocks (a node's facts,
the DCGM/NCCL/network diagnostics, the health scores) stay JSON objects (``JsonObject``)
held by reference; high-volume leaf records (one per GPU, one per check of a node) are ``TypedDict``\\ s, typed
for readers and the schema at no cost at run time.

Field metadata the schema generator reads: ``omit`` (the key is left out of the JSON
when the value is ``None``), ``extra`` (the keys this class does not know, kept in order
after the known ones: a localisation block in the summary, a node's ``load``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import field
from typing import Any, TypedDict

from ..fastclass import dataclass
from ..model import Status

__all__ = ["Assessment", "CheckRow", "ClusterCheck", "ClusterInfo", "ClusterReport", "ClusterSummary",
           "ClusterTopology", "GpuEntry", "JsonObject", "NodeInfo", "NodeSection", "NodeSections", "ReportFinding",
           "RunInfo", "Tool"]

JsonObject = dict[str, Any]

OMIT: Mapping[str, Any] = {"omit": True}
EXTRA: Mapping[str, Any] = {"extra": True}


_STATUSES: dict[str, Status] = {s.value: s for s in Status}


def _status(value: str) -> Status:
    """``Status(value)`` by one dict lookup (the enum call costs microseconds, per node)."""
    return _STATUSES.get(value) or Status(value)


def _extra(data: Mapping[str, Any], known: frozenset[str]) -> JsonObject:
    """The keys of ``data`` a class does not know, in their order (usually none: one set difference)."""
    if data.keys() <= known:
        return {}
    return {k: v for k, v in data.items() if k not in known}


class GpuEntry(TypedDict):
    """One GPU in a node's ``gpu`` block (``gpu_<index>``); readings a probe could not take are null."""

    name: str | None
    driver_version: str | None
    memory_total_mb: int | None
    memory_used_mb: int | None
    memory_free_mb: int | None
    temperature_c: float | None
    utilization_percent: float | None
    power_draw_w: float | None
    power_limit_w: float | None
    slowdown_temperature_c: float | None
    uuid: str | None
    serial: str | None
    pci_bus_id: str | None
    vbios: str | None
    lost: bool | None


@dataclass(frozen=True, slots=True)
class ReportFinding:
    """A finding as the report lists it: the node key it belongs to (``node_3``, ``cluster``)
    and :class:`~gpu_preflight.model.Finding`'s fields. In ``cluster_checks`` the node is
    implied and ``node`` is ``None`` (no key)."""

    node: str | None = field(metadata=OMIT)
    check_id: str
    status: Status
    subject: str
    code: str
    summary: str
    observed: Any = None
    expected: Any = None
    unit: str | None = None
    recommendation: str | None = None
    details: JsonObject = field(default_factory=dict)

    def to_dict(self) -> JsonObject:
        out: JsonObject = {} if self.node is None else {"node": self.node}
        out.update(check_id=self.check_id, status=self.status.value, subject=self.subject, code=self.code,
                   summary=self.summary, observed=self.observed, expected=self.expected, unit=self.unit,
                   recommendation=self.recommendation, details=self.details)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ReportFinding:
        get = data.get
        return cls(get("node"), data["check_id"], _status(data["status"]), data["subject"], data["code"],
                   data["summary"], get("observed"), get("expected"), get("unit"), get("recommendation"),
                   get("details") or {})

    def per_subject(self) -> Iterator[ReportFinding]:
        """This finding, or a rolled-up pass expanded back to one finding per subject.

        The typed form of :func:`gpu_preflight.model.per_subject`: at scale a cluster check
        reports its passes as one finding whose ``details.subjects`` maps each subject to its
        observed value; a reader of per-GPU values sees no difference.
        """
        subjects = self.details.get("subjects") if self.details.get("rolled_up") else None
        if not isinstance(subjects, Mapping):
            yield self
            return
        shared = {k: v for k, v in self.details.items() if k not in ("rolled_up", "subjects")}
        for subject, observed in subjects.items():
            yield ReportFinding(self.node, self.check_id, self.status, subject, self.code, self.summary, observed,
                                self.expected, self.unit, self.recommendation, shared)


class CheckRow(TypedDict):
    """A check of a node, as its section lists it: status, time and how many findings."""

    check_id: str
    title: str
    status: str
    duration_s: float
    findings: int


@dataclass(frozen=True, slots=True)
class ClusterCheck:
    """A cluster-level check (over the gathered workloads) with its findings."""

    check_id: str
    title: str
    status: Status
    duration_s: float
    findings: tuple[ReportFinding, ...]

    def to_dict(self) -> JsonObject:
        return {"check_id": self.check_id, "title": self.title, "status": self.status.value,
                "duration_s": self.duration_s, "findings": [f.to_dict() for f in self.findings]}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterCheck:
        return cls(data["check_id"], data["title"], _status(data["status"]), data["duration_s"],
                   tuple(ReportFinding.from_dict(f) for f in data["findings"]))


@dataclass(frozen=True)  # one per report: no slots (they double the cost of creating the class)
class ClusterSummary:
    """``cluster_summary`` (and each node's ``summary``): the verdict, the SageMaker test
    groups, issues, recommendations and figures; on the cluster also the assessment blocks.

    ``operator_action`` (a node's summary only, and only when there is one) is the strongest
    action the node's findings call for (:func:`gpu_preflight.actions.node_action`): the one
    value a scheduler hook routes the node on (``reset_gpu``, ``isolate_node``...).

    ``unlisted`` counts the PASS/SKIP findings a large cluster's nodes kept to themselves;
    ``earlier_scores`` are the history's (trends); the health scores, recommendations by
    urgency, cost-benefit and assessment are an :class:`Assessment`'s.
    """

    overall_status: Status
    exit_code: int
    test_results: dict[str, bool | None]
    cluster_info: JsonObject
    performance_summary: dict[str, float]
    issues: tuple[str, ...]
    recommendations: tuple[str, ...]
    counts: dict[str, int]
    operator_action: str | None = field(default=None, metadata=OMIT)
    test_results_notes: dict[str, str] | None = field(default=None, metadata=OMIT)  # why a group is false untested
    unlisted: dict[str, dict[str, int]] | None = field(default=None, metadata=OMIT)
    earlier_scores: tuple[JsonObject, ...] | None = field(default=None, metadata=OMIT)
    health_scores: JsonObject | None = field(default=None, metadata=OMIT)
    recommendations_by_urgency: dict[str, list[JsonObject]] | None = field(default=None, metadata=OMIT)
    cost_benefit: JsonObject | None = field(default=None, metadata=OMIT)
    assessment: JsonObject | None = field(default=None, metadata=OMIT)
    extra: JsonObject = field(default_factory=dict, metadata=EXTRA)

    _KNOWN = frozenset({"overall_status", "exit_code", "test_results", "cluster_info", "performance_summary",
                        "issues", "recommendations", "counts", "operator_action", "test_results_notes", "unlisted",
                        "earlier_scores",
                        "health_scores", "recommendations_by_urgency", "cost_benefit", "assessment"})

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"overall_status": self.overall_status.value, "exit_code": self.exit_code,
                           "test_results": self.test_results}
        if self.test_results_notes is not None:
            out["test_results_notes"] = self.test_results_notes
        out |= {"cluster_info": self.cluster_info, "performance_summary": self.performance_summary,
                "issues": list(self.issues), "recommendations": list(self.recommendations), "counts": self.counts}
        if self.operator_action is not None:
            out["operator_action"] = self.operator_action
        if self.unlisted is not None:
            out["unlisted"] = self.unlisted
        if self.extra:  # where a run adds them (a localisation block), before the history and the scores
            out.update(self.extra)
        if self.earlier_scores is not None:
            out["earlier_scores"] = list(self.earlier_scores)
        if self.health_scores is not None:
            out["health_scores"] = self.health_scores
        if self.recommendations_by_urgency is not None:
            out["recommendations_by_urgency"] = self.recommendations_by_urgency
        if self.cost_benefit is not None:
            out["cost_benefit"] = self.cost_benefit
        if self.assessment is not None:
            out["assessment"] = self.assessment
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterSummary:
        get = data.get
        earlier = get("earlier_scores")
        return cls(_status(data["overall_status"]), data["exit_code"], get("test_results") or {},
                   get("cluster_info") or {}, get("performance_summary") or {}, tuple(get("issues") or ()),
                   tuple(get("recommendations") or ()),
                   data["counts"], get("operator_action"), get("test_results_notes"), get("unlisted"),
                   None if earlier is None else tuple(earlier),
                   get("health_scores"),
                   get("recommendations_by_urgency"), get("cost_benefit"), get("assessment"),
                   _extra(data, cls._KNOWN))


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """``node_info``: the SageMaker layout's host ranks, plus profile and config sources."""

    hostname: str
    current_host: str
    world_size: int
    rank: int
    local_rank: int
    host_rank: int
    host_count: int
    gpus_per_host: int
    profile: str | None
    config_sources: tuple[str, ...]
    node_rank: int | None = field(default=None, metadata=OMIT)
    extra: JsonObject = field(default_factory=dict, metadata=EXTRA)

    _KNOWN = frozenset({"hostname", "current_host", "world_size", "rank", "local_rank", "host_rank", "host_count",
                        "gpus_per_host", "profile", "config_sources", "node_rank"})

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"hostname": self.hostname, "current_host": self.current_host,
                           "world_size": self.world_size, "rank": self.rank, "local_rank": self.local_rank,
                           "host_rank": self.host_rank, "host_count": self.host_count,
                           "gpus_per_host": self.gpus_per_host, "profile": self.profile,
                           "config_sources": list(self.config_sources)}
        if self.node_rank is not None:
            out["node_rank"] = self.node_rank
        if self.extra:
            out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeInfo:
        get = data.get
        host = get("hostname") or get("current_host") or ""
        return cls(host, get("current_host") or host, get("world_size", 1), get("rank", 0), get("local_rank", 0),
                   get("host_rank", 0), get("host_count", 1), get("gpus_per_host", 0), get("profile"),
                   tuple(get("config_sources") or ()), get("node_rank"), _extra(data, cls._KNOWN))


@dataclass(frozen=True, slots=True)
class NodeSection:
    """``nodes.node_<i>``: one node's info, summary, GPUs, host, diagnostics (``network``,
    ``dcgm``, ``nccl``), checks and facts. ``checks`` is a list of rows, or on clusters
    above ``report.detail_max_nodes`` a map of check id to status (and no full ``facts``)."""

    timestamp: str
    node_info: NodeInfo
    summary: ClusterSummary
    gpu: dict[str, GpuEntry]
    system: JsonObject
    network: JsonObject | None = field(default=None, metadata=OMIT)
    dcgm: JsonObject | None = field(default=None, metadata=OMIT)
    nccl: JsonObject | None = field(default=None, metadata=OMIT)
    checks: list[CheckRow] | dict[str, str] = field(default_factory=list)
    facts: JsonObject | None = field(default=None, metadata=OMIT)
    duration_s: float = 0.0
    load: JsonObject | None = field(default=None, metadata=OMIT)
    extra: JsonObject = field(default_factory=dict, metadata=EXTRA)

    _KNOWN = frozenset({"timestamp", "node_info", "summary", "gpu", "system", "network", "dcgm", "nccl", "checks",
                        "facts", "duration_s", "load"})

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"timestamp": self.timestamp, "node_info": self.node_info.to_dict(),
                           "summary": self.summary.to_dict(), "gpu": self.gpu, "system": self.system}
        if self.network is not None:
            out["network"] = self.network
        if self.dcgm is not None:
            out["dcgm"] = self.dcgm
        if self.nccl is not None:
            out["nccl"] = self.nccl
        out["checks"] = self.checks
        if self.facts is not None:
            out["facts"] = self.facts
        out["duration_s"] = self.duration_s
        if self.load is not None:
            out["load"] = self.load
        if self.extra:
            out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> NodeSection:
        get = data.get
        return cls(data["timestamp"], NodeInfo.from_dict(data["node_info"]), ClusterSummary.from_dict(data["summary"]),
                   data["gpu"], get("system") or {}, get("network"), get("dcgm"), get("nccl"), get("checks") or [],
                   get("facts"), get("duration_s", 0.0), get("load"), _extra(data, cls._KNOWN))


# NodeSection's free-form JSON blocks, and what an absent one reads as (None: stays None).
BLOCKS: Mapping[str, Any] = {"gpu": dict, "system": dict, "network": None, "dcgm": None, "nccl": None,
                             "facts": None, "load": None}


class NodeSections(Mapping[str, NodeSection]):
    """``nodes``: node key to :class:`NodeSection`, read from the report's dicts on first use.

    A renderer that reads the findings and the summary of a 10,000-node report should not
    pay for typing ten thousand node sections it never looks at; ``to_dict`` gives back the
    very dicts it was read from (``to_dict(from_dict(d)) == d`` holds for each section).
    """

    __slots__ = ("_raw", "_typed")

    def __init__(self, sections: Mapping[str, Mapping[str, Any] | NodeSection]) -> None:
        self._raw = sections
        self._typed: dict[str, NodeSection] = {}

    def __getitem__(self, key: str) -> NodeSection:
        typed = self._typed.get(key)
        if typed is None:
            value = self._raw[key]
            typed = self._typed[key] = value if isinstance(value, NodeSection) else NodeSection.from_dict(value)
        return typed

    def __iter__(self) -> Iterator[str]:
        return iter(self._raw)

    def __len__(self) -> int:
        return len(self._raw)

    def __repr__(self) -> str:
        return f"NodeSections({len(self)} nodes)"

    def to_dict(self) -> dict[str, Mapping[str, Any]]:
        return {k: v.to_dict() if isinstance(v, NodeSection) else v for k, v in self._raw.items()}

    def raw(self, key: str) -> Mapping[str, Any]:
        """Node ``key``'s section as its JSON object (the very dict it was read from, if untyped)."""
        value = self._raw[key]
        return value.to_dict() if isinstance(value, NodeSection) else value

    def blocks(self, name: str) -> Iterator[Any]:
        """Every node's free-form block ``name`` (one of :data:`BLOCKS`: ``gpu``, ``nccl``,
        ``network``, ...) in node order, as :class:`NodeSection` holds it (``{}`` for an absent
        ``gpu``/``system``, None for the others), without typing the sections: the readers that
        walk all 10,000 nodes of a report for one block each (scores, plots) need no more."""
        default = BLOCKS[name]
        typed = self._typed
        for key, value in self._raw.items():
            section = typed.get(key, value)
            if isinstance(section, NodeSection):
                yield getattr(section, name)
            else:
                found = section.get(name)
                yield found if found is not None or default is None else default()

    def host_names(self) -> list[str]:
        """Each node's name as findings' subjects use it (:attr:`NodeInfo.current_host`, else
        ``?``), in node order, without typing the sections."""
        out = []
        for key, value in self._raw.items():
            section = self._typed.get(key, value)
            if isinstance(section, NodeSection):
                out.append(section.node_info.current_host or "?")
            else:
                info = section.get("node_info") or {}
                out.append(info.get("current_host") or info.get("hostname") or "?")
        return out

    def replaced(self, sections: Mapping[str, Mapping[str, Any] | NodeSection]) -> NodeSections:
        """These sections with some replaced (a new value; the others are shared, typed or not)."""
        if not sections:
            return self
        out = NodeSections({**self._raw, **sections})
        out._typed = {k: v for k, v in self._typed.items() if k not in sections}
        return out


@dataclass(frozen=True)  # one per report: no slots (they double the cost of creating the class)
class ClusterTopology:
    """``cluster_info.cluster_topology``: the job's shape and launcher."""

    total_nodes: int
    gpus_per_node: int
    processes_per_node: int
    world_size: int
    launcher: str

    def to_dict(self) -> JsonObject:
        return {"total_nodes": self.total_nodes, "gpus_per_node": self.gpus_per_node,
                "processes_per_node": self.processes_per_node, "world_size": self.world_size,
                "launcher": self.launcher}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterTopology:
        return cls(data["total_nodes"], data["gpus_per_node"], data["processes_per_node"], data["world_size"],
                   data["launcher"])


@dataclass(frozen=True)  # one per report: no slots (they double the cost of creating the class)
class ClusterInfo:
    """``cluster_info``: how complete the data is, the expected GPUs, the topology and the
    nodes that never reported."""

    data_completeness: str
    note: str
    expected_total_gpus: int | None
    cluster_topology: ClusterTopology
    missing_nodes: tuple[str, ...]
    extra: JsonObject = field(default_factory=dict, metadata=EXTRA)

    _KNOWN = frozenset({"data_completeness", "note", "expected_total_gpus", "cluster_topology", "missing_nodes"})

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"data_completeness": self.data_completeness, "note": self.note,
                           "expected_total_gpus": self.expected_total_gpus,
                           "cluster_topology": self.cluster_topology.to_dict(),
                           "missing_nodes": list(self.missing_nodes)}
        if self.extra:
            out.update(self.extra)
        return out

    @classmethod
    def empty(cls) -> ClusterInfo:
        """What a report without ``cluster_info`` (an older or trimmed one) says: nothing known."""
        return cls("unknown", "", None, ClusterTopology(0, 0, 1, 1, "none"), ())

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterInfo:
        return cls(data["data_completeness"], data["note"], data.get("expected_total_gpus"),
                   ClusterTopology.from_dict(data["cluster_topology"]), tuple(data.get("missing_nodes") or ()),
                   _extra(data, cls._KNOWN))


@dataclass(frozen=True)  # one per report: no slots (they double the cost of creating the class)
class Tool:
    """``tool``: which program wrote the report."""

    name: str
    version: str

    def to_dict(self) -> JsonObject:
        return {"name": self.name, "version": self.version}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Tool:
        return cls(data.get("name", "gpu-preflight"), data.get("version", ""))


@dataclass(frozen=True)  # one per report: no slots (they double the cost of creating the class)
class RunInfo:
    """``run``: the ``--fail-on`` policy the verdict was gated by and the run's duration."""

    fail_on: str
    duration_s: float
    extra: JsonObject = field(default_factory=dict, metadata=EXTRA)

    _KNOWN = frozenset({"fail_on", "duration_s"})

    def to_dict(self) -> JsonObject:
        out: JsonObject = {"fail_on": self.fail_on, "duration_s": self.duration_s}
        if self.extra:
            out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunInfo:
        return cls(data.get("fail_on", "fail"), data.get("duration_s", 0.0), _extra(data, cls._KNOWN))


@dataclass(frozen=True)  # one per report: no slots (they double the cost of creating the class)
class Assessment:
    """What scoring and advice conclude about a report, as a value (nothing is mutated):
    the health scores, recommendations by urgency, cost-benefit and the health assessment
    (readiness, trends, targets, schedule)."""

    health_scores: JsonObject
    recommendations_by_urgency: dict[str, list[JsonObject]] | None = None
    cost_benefit: JsonObject | None = None
    assessment: JsonObject | None = None

    def apply(self, summary: dict[str, Any]) -> None:
        """Put the blocks into a ``cluster_summary`` dict (the dict-based callers' step)."""
        summary["health_scores"] = self.health_scores
        if self.recommendations_by_urgency is not None:
            summary["recommendations_by_urgency"] = self.recommendations_by_urgency
        if self.cost_benefit is not None:
            summary["cost_benefit"] = self.cost_benefit
        if self.assessment is not None:
            summary["assessment"] = self.assessment


@dataclass(frozen=True)  # one per report: no slots (they double the cost of creating the class)
class ClusterReport:
    """The whole report (``report.json``): every format renders from this."""

    schema_version: str
    tool: Tool
    timestamp: str
    cluster_info: ClusterInfo
    cluster_summary: ClusterSummary
    cluster_checks: tuple[ClusterCheck, ...]
    nodes: NodeSections
    findings: tuple[ReportFinding, ...]
    artifacts: tuple[JsonObject, ...]
    run: RunInfo
    extra: JsonObject = field(default_factory=dict, metadata=EXTRA)

    _KNOWN = frozenset({"schema_version", "tool", "timestamp", "cluster_info", "cluster_summary", "cluster_checks",
                        "nodes", "findings", "artifacts", "run"})

    def to_dict(self) -> JsonObject:
        out: JsonObject = {
            "schema_version": self.schema_version, "tool": self.tool.to_dict(), "timestamp": self.timestamp,
            "cluster_info": self.cluster_info.to_dict(), "cluster_summary": self.cluster_summary.to_dict(),
            "cluster_checks": [c.to_dict() for c in self.cluster_checks],
            "nodes": self.nodes.to_dict(),
            "findings": [f.to_dict() for f in self.findings], "artifacts": list(self.artifacts),
            "run": self.run.to_dict()}
        if self.extra:
            out.update(self.extra)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ClusterReport:
        """The typed report of a report dict (a saved ``report.json``).

        The verdict is required (``cluster_summary`` with ``overall_status``, ``exit_code``
        and ``counts``): without it ``KeyError``, with a status that is not one ``ValueError``.
        Blocks an older or trimmed report lacks read as empty, so it can still be rendered
        (``to_dict`` then writes them; the schema says what a complete report holds).
        """
        get = data.get
        info = get("cluster_info")
        return cls(get("schema_version", ""), Tool.from_dict(get("tool") or {}), get("timestamp", ""),
                   ClusterInfo.from_dict(info) if info else ClusterInfo.empty(),
                   ClusterSummary.from_dict(data["cluster_summary"]),
                   tuple(ClusterCheck.from_dict(c) for c in get("cluster_checks") or ()),
                   NodeSections(get("nodes") or {}),
                   tuple(ReportFinding.from_dict(f) for f in data.get("findings") or ()),
                   tuple(data.get("artifacts") or ()), RunInfo.from_dict(data.get("run") or {}),
                   _extra(data, cls._KNOWN))

    @classmethod
    def of(cls, report: ClusterReport | Mapping[str, Any]) -> ClusterReport:
        """``report`` typed: itself, or read from its JSON dict."""
        return report if isinstance(report, ClusterReport) else cls.from_dict(report)

    def with_assessment(self, assessment: Assessment) -> ClusterReport:
        """This report with ``assessment``'s blocks in its summary (a new value)."""
        summary = dataclasses.replace(
            self.cluster_summary, health_scores=assessment.health_scores,
            recommendations_by_urgency=assessment.recommendations_by_urgency or
            self.cluster_summary.recommendations_by_urgency,
            cost_benefit=assessment.cost_benefit or self.cluster_summary.cost_benefit,
            assessment=assessment.assessment or self.cluster_summary.assessment)
        return dataclasses.replace(self, cluster_summary=summary)

    def with_summary(self, **blocks: Any) -> ClusterReport:
        """This report with ``cluster_summary`` blocks added or replaced (``earlier_scores``,
        a localisation block: unknown names go to the summary's ``extra``)."""
        known = {k: v for k, v in blocks.items() if k in ClusterSummary._KNOWN}
        extra = {k: v for k, v in blocks.items() if k not in ClusterSummary._KNOWN}
        summary = dataclasses.replace(self.cluster_summary, **known,
                                      extra={**self.cluster_summary.extra, **extra})
        return dataclasses.replace(self, cluster_summary=summary)

    def with_run(self, **blocks: Any) -> ClusterReport:
        """This report with ``run`` blocks added or replaced (``wall_s``, the run's whole wall time)."""
        return dataclasses.replace(self, run=dataclasses.replace(self.run, extra={**self.run.extra, **blocks}))

    def with_artifacts(self, artifacts: Sequence[JsonObject],
                       sections: Mapping[str, Mapping[str, Any] | NodeSection] | None = None) -> ClusterReport:
        """This report listing ``artifacts``, with node ``sections`` replaced (the ones whose
        ``raw_output_artifact`` paths were filled once the files were written): a new value."""
        return dataclasses.replace(self, artifacts=tuple(artifacts), nodes=self.nodes.replaced(sections or {}))

    @property
    def fail_on(self) -> str:
        return self.run.fail_on
