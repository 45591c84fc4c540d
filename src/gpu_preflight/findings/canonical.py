"""The canonical report, assembled as the typed :class:`~.model.ClusterReport` every format
renders from (its ``to_dict`` is ``report.json``; :func:`assemble_report` and :func:`build_report`
are the dict-taking library edges).

The layout keeps the SageMaker cluster health check report (``timestamp``,
``cluster_info``, ``cluster_summary``, ``nodes.node_<i>`` with ``node_info``, ``summary``,
``gpu``, ``system``, ``network``, ``nccl``, ``dcgm``) so users of that tool can switch,
and adds ``schema_version``, structured ``findings`` and ``artifacts`` (raw outputs saved
beside the report and referenced by path).
"""

from __future__ import annotations

import functools
import json
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import msgspec

from .._version import __version__
from ..actions import SUMMARY_KEY, Action, action_of, node_action
from ..ids import RUN_COVERAGE_ID
from ..model import (
    SCHEMA_VERSION,
    CheckResult,
    Finding,
    NodeReport,
    SavedArtifact,
    Status,
    gated_exit_code,
    gating_statuses,
    id_matches,
    verdict,
)
from ..records.topology import topology_summary
from ..registry import cover, generation, test_groups
from .diagnostic_sections import diagnostic_sections

if TYPE_CHECKING:
    from ..config.report_schema import ReportConfig
    from ..safeio import SafeDir
    from .model import (
        Assessment,
        ClusterCheck,
        ClusterReport,
        ClusterSummary,
        GpuEntry,
        NcclSection,
        NodeSection,
        Number,
        ReportFinding,
        SystemSection,
    )

    # Scores and advice for a report (typed or its dict) under the [report] settings (None: the
    # defaults): the report layer's :func:`~.advice.advise`, handed down so the findings never import it.
    Assessor = Callable[[ClusterReport, ReportConfig | None], Assessment]

# cluster_summary.test_results: group name → the check ids counted in it, derived from
# what each check declares (``@check(group=...)``, ``registry.GROUPS`` for the order and
# meaning). A levelled check's (DCGM) finding is matched as ``<check id>@r<level>`` too
# (see group_key), so dcgm_basic and dcgm_extended follow the level that found it.
TEST_GROUPS: Mapping[str, tuple[str, ...]] = test_groups()
READY = "Cluster is ready for distributed training"
MB = 1024 * 1024
_RANK = {s.value: s.rank for s in Status}
GB = 1024**3
# The finding a report gets when nothing in it was judged: it makes the ERROR verdict
# visible in every format (a row, a JUnit <error>, a Prometheus series), not only in the exit code.
COVERAGE_CHECK = RUN_COVERAGE_ID
# The [RESULT] word for each exit code: the line can never say something the exit code does not.
RESULT_WORDS = {0: "SUCCESS", 1: "WARNING", 2: "FAILURE", 3: "ERROR"}


LEVELLED = "dcgm."  # check ids whose findings say which diagnostic level found them (details.level)


def _groups_of(key: str) -> tuple[str, ...]:
    """The test groups a group key belongs to; an id no imported check knows imports the rest
    first (:func:`~gpu_preflight.registry.cover`)."""
    groups = _groups_at(key, generation())
    if not groups and cover(key):
        groups = _groups_at(key, generation())
    return groups


@functools.cache
def _groups_at(key: str, _generation: tuple[int, int]) -> tuple[str, ...]:
    """Cached per key and per state of the registries: one glob match per key, not per finding."""
    return tuple(name for name, pats in TEST_GROUPS.items() if any(id_matches(key, p) for p in pats))


def group_key(check_id: str, details: Mapping[str, Any] | None) -> str:
    """What a finding is matched against in :data:`TEST_GROUPS`: its check id, or for a
    levelled check ``<check id>@r<level>`` (``dcgm.diag@r2``), which ``dcgm.*`` matches too."""
    if not check_id.startswith(LEVELLED) or not details:
        return check_id
    level = details.get("level")
    return f"{check_id}@r{level}" if isinstance(level, int) and not isinstance(level, bool) else check_id


def finding_groups(check_id: str, details: Mapping[str, Any] | None = None) -> tuple[str, ...]:
    """The test groups (``test_results`` keys) a finding counts in."""
    return _groups_of(group_key(check_id, details))


Unlisted = Mapping[str, Mapping[str, int]]  # check id -> status -> findings a node kept to itself


Judged = tuple[str, str, Mapping[str, Any] | None]  # a finding's check id, status and details


class Judgement(Protocol):
    """What the summary reads of a finding: a node's :class:`~gpu_preflight.model.Finding` and a
    report's :class:`~.model.ReportFinding` both are one, so neither is converted to the other
    (or to a dict) to be summarised."""

    @property
    def check_id(self) -> str: ...
    @property
    def status(self) -> Status: ...
    @property
    def subject(self) -> str: ...
    @property
    def summary(self) -> str: ...
    @property
    def recommendation(self) -> str | None: ...
    @property
    def details(self) -> Mapping[str, Any]: ...


def group_statuses(findings: Iterable[Judged], unlisted: Unlisted | None = None) -> dict[str, Status | None]:
    """Each test group's worst judged status; None when nothing in it was judged (all SKIP or not run).

    The one source of ``test_results`` (true only for PASS) and of the Markdown and HTML
    group tables, so a group that only warns reads WARN everywhere and false in the JSON.
    ``findings`` are (check id, status, details) triples: what a finding dict or a typed
    finding gives without copying it (:func:`report_groups`).
    """
    worst: dict[str, Status | None] = dict.fromkeys(TEST_GROUPS)
    pairs = {(check_id if not check_id.startswith(LEVELLED) else group_key(check_id, details), status)
             for check_id, status, details in findings}
    pairs |= {(check_id, status) for check_id, by in (unlisted or {}).items() for status, n in by.items() if n}
    for check_id, value in pairs:
        status = Status(value)
        if status is Status.SKIP:
            continue
        for name in _groups_of(check_id):
            current = worst[name]
            if current is None or status.rank > current.rank:
                worst[name] = status
    return worst


def report_groups(report: ClusterReport) -> dict[str, Status | None]:
    """:func:`group_statuses` of a report's findings and the counts its nodes kept to themselves
    (the Markdown and HTML group tables)."""
    return group_statuses(((f.check_id, f.status, f.details) for f in report.findings),
                          report.cluster_summary.unlisted)


def _test_results(groups: Mapping[str, Status | None]) -> dict[str, bool | None]:
    """True: a PASS and nothing worse than SKIP; False: a WARN or worse, or nothing judged (the
    SageMaker layout's booleans: a group that was not tested did not succeed; why is in
    :func:`untested_notes`)."""
    return {name: status is Status.PASS for name, status in groups.items()}


NOT_RUN = "no check of this group ran in this run (its suite, e.g. --full, or the --check/--skip selection)"


def untested_notes(groups: Mapping[str, Status | None], findings: Iterable[Judgement]) -> dict[str, str]:
    """Why each group that judged nothing is false: the first skip that names a reason, else :data:`NOT_RUN`."""
    untested = [name for name, status in groups.items() if status is None]
    if not untested:
        return {}
    first_skip: dict[str, str] = {}
    for f in findings:
        if f.status == Status.SKIP:
            for name in finding_groups(f.check_id, f.details):
                first_skip.setdefault(name, f"not tested: {f.check_id}: {f.summary}")
    return {name: first_skip.get(name, f"not tested: {NOT_RUN}") for name in untested}


def summarize(findings: Sequence[Judgement], fail_on: str, unlisted: Unlisted | None = None,
              performance_summary: Mapping[str, Any] | None = None) -> ClusterSummary:
    """The ``summary`` block (a node's, or the cluster's before its assessment): overall status,
    test groups, issues, recommendations and figures.

    ``findings`` are typed (a node's own, or a report's). ``unlisted`` counts, per check id
    and status, PASS and SKIP findings that are not in the list (those a node of a large
    cluster keeps to itself, see :func:`node_entry`): they count all the same.
    """
    from .model import ClusterSummary, SummaryClusterInfo

    unlisted = unlisted or {}
    counts = dict.fromkeys((s.value for s in Status), 0)
    for f in findings:  # a Status is its value: the key stays the plain string counts was made with
        counts[f.status] += 1
    for by in unlisted.values():
        for status, n in by.items():
            counts[status] = counts.get(status, 0) + int(n)
    overall = verdict(Status(s) for s, n in counts.items() if n)
    worse = [f for f in findings if _RANK[f.status] >= Status.WARN.rank]  # a dict look-up, not a property call
    worse.sort(key=lambda f: (-_RANK[f.status], f.check_id, f.subject))
    issues = [f"[{f.status.value}] {f.subject} {f.check_id}: {f.summary}" for f in worse]
    recommendations = list(dict.fromkeys(f"{f.subject}: {f.recommendation}" for f in worse if f.recommendation))
    if not any(counts[s.value] for s in gating_statuses(fail_on)) and overall is Status.PASS:
        recommendations.append(READY)
    groups = group_statuses(((f.check_id, f.status, f.details) for f in findings), unlisted)
    return ClusterSummary(overall_status=overall, exit_code=gated_exit_code(overall, fail_on),
                          test_results=_test_results(groups),
                          test_results_notes=untested_notes(groups, findings) or None,
                          cluster_info=SummaryClusterInfo(), performance_summary=dict(performance_summary or {}),
                          issues=issues, recommendations=recommendations, counts=counts)


def _nothing_judged(findings: Sequence[ReportFinding], unlisted: Unlisted) -> ReportFinding | None:
    """The ERROR finding for a report in which no check reached a verdict; None when something did."""
    from .model import ReportFinding

    if any(f.status != Status.SKIP for f in findings):
        return None
    if any(n for by in unlisted.values() for status, n in by.items() if status != Status.SKIP.value):
        return None
    if findings or unlisted:
        example = findings[0] if findings else None
        why = "every check that ran was skipped" + (f" (e.g. {example.check_id}: {example.summary})"
                                                     if example else "")
    else:
        why = "the selection left no check to run (--check/--skip)"
    return ReportFinding(node="cluster", check_id=COVERAGE_CHECK, status=Status.ERROR, subject="cluster",
                         code="nothing_judged", summary=f"no check was run: {why}", observed=None, expected=None,
                         unit=None,
                         recommendation="Select checks that apply to this node (--check, --skip, --expect-gpus): "
                                        "a run that judged nothing is no evidence that the node is fit.",
                         details={})


def _reading(rec: Mapping[str, Any], key: str) -> Number | None:
    """A GPU's numeric reading, None where the probe could not take one (a bool is not a number)."""
    v = rec.get(key)
    return v if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _mb(rec: Mapping[str, Any], key: str) -> int | None:
    """A GPU's byte count in whole MiB (the node section's unit), None where it was not read."""
    v = _reading(rec, key)
    return None if v is None else round(v / MB)


def _gpu_section(facts: dict[str, Any]) -> dict[str, GpuEntry]:
    gpu = facts.get("gpu") or {}
    out: dict[str, GpuEntry] = {}
    for rec in gpu.get("gpus", []):
        out[f"gpu_{rec['index']}"] = {
            "name": rec.get("name") if isinstance(rec.get("name"), str) else None,
            "driver_version": gpu.get("driver_version") if isinstance(gpu.get("driver_version"), str) else None,
            "memory_total_mb": _mb(rec, "memory_total_bytes"),
            "memory_used_mb": _mb(rec, "memory_used_bytes"),
            "memory_free_mb": _mb(rec, "memory_free_bytes"),
            "temperature_c": _reading(rec, "temperature_c"),
            "utilization_percent": _reading(rec, "utilization_gpu_percent"),
            "power_draw_w": _reading(rec, "power_draw_w"),
            "power_limit_w": _reading(rec, "power_limit_w"),
            "slowdown_temperature_c": _reading(rec, "temp_slowdown_c"),
            "uuid": rec.get("uuid") if isinstance(rec.get("uuid"), str) else None,
            "serial": rec.get("serial") if isinstance(rec.get("serial"), str) else None,
            "pci_bus_id": rec.get("pci_bus_id") if isinstance(rec.get("pci_bus_id"), str) else None,
            "vbios": rec.get("vbios") if isinstance(rec.get("vbios"), str) else None,
            "lost": rec.get("lost"),
        }
    return out


def _system_section(facts: dict[str, Any]) -> SystemSection:
    """The section's ``system`` block: the system probe's memory, first disk and CPU, each where read."""
    from .model import CpuInfo, DiskInfo, MemoryInfo, SystemSection

    s = facts.get("system") or {}

    def num(v: Any) -> float | None:
        return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None

    total, avail = num(s.get("memory_total_bytes")), num(s.get("memory_available_bytes"))
    memory = disk = cpu = None
    if total is not None and avail is not None:
        memory = MemoryInfo(total_gb=round(total / GB, 2), available_gb=round(avail / GB, 2),
                            used_percent=round(100 * (total - avail) / total, 2) if total else None)
    disks = s.get("disks") or []
    if disks:
        d = disks[0]
        dt, df = num(d.get("total_bytes")), num(d.get("free_bytes"))
        if dt is not None and df is not None:
            disk = DiskInfo(path=d.get("path"), total_gb=round(dt / GB, 2), free_gb=round(df / GB, 2),
                            used_percent=round(100 * (dt - df) / dt, 2) if dt else None)
    if (count := s.get("cpu_count")) is not None and num(count) is not None:
        cpu = CpuInfo(usage_percent=num(s.get("cpu_percent")), count=count, load_1m=num(s.get("load_1m")))
    return SystemSection(memory=memory, disk=disk, cpu=cpu)


def node_performance(nccl: NcclSection | None) -> dict[str, float]:
    """A node's own figures for its ``summary.performance_summary``: the peak bandwidth of each
    collective it measured (``distributed_all_reduce_bandwidth_gbps``, the SageMaker key) and of
    each local nccl-tests run (``nccl_tests_all_reduce_perf_busbw_gbps``)."""
    out: dict[str, float] = {}
    if nccl is None:
        return out
    for key, test in nccl.communication_tests.items():
        peak = test.peak_bandwidth_gbps
        if peak is not None:
            out[f"{key}_bandwidth_gbps"] = peak
    for name, run in nccl.nccl_tests.items():
        peak = run.peak_busbw_gbps
        if isinstance(peak, (int, float)) and not isinstance(peak, bool):
            out[f"nccl_tests_{name}_busbw_gbps"] = peak
    return out


def node_section(report: NodeReport, node_info: Mapping[str, Any] | None = None, *,
                 inline: bool = True) -> NodeSection:
    """A node's section of the report, typed. Its checks list status and timing; their findings
    live once, in the report's top-level ``findings`` with the node's key.

    ``node_info`` adds to or replaces the node's own ``node_info`` keys (a distributed run's host
    ranks and identity). ``inline=False`` leaves raw outputs out of the section (clusters above
    ``report.detail_max_nodes``: ten thousand copies of DCGM's table are not needed).
    """
    from .model import CheckRow, NodeInfo, NodeSection

    gpus = _gpu_section(report.facts)
    info = {
        "hostname": report.hostname, "current_host": report.hostname, "world_size": 1, "rank": 0, "local_rank": 0,
        "host_rank": 0, "host_count": 1, "gpus_per_host": len(gpus), "profile": report.profile,
        "config_sources": report.config_sources, **(node_info or {}),
    }
    diagnostics = diagnostic_sections(report.facts, report.artifacts, raw=report.raw_artifacts, inline=inline)
    summary = summarize(report.findings, report.fail_on, performance_summary=node_performance(diagnostics.nccl))
    return NodeSection(
        timestamp=report.timestamp, node_info=NodeInfo.from_dict(info),
        summary=msgspec.structs.replace(
            summary, operator_action=_stronger(None, node_action(f.details for f in report.findings))),
        gpu=gpus, system=_system_section(report.facts), network=diagnostics.network, dcgm=diagnostics.dcgm,
        nccl=diagnostics.nccl,
        checks=[CheckRow(check_id=r.check_id, title=r.title, status=r.status.value,
                         duration_s=round(r.duration_s, 6), findings=len(r.findings)) for r in report.results],
        facts=report.facts, duration_s=round(report.duration_s, 4))


def _stronger(current: Action | None, action: Action) -> str | None:
    """A node summary's ``operator_action`` once ``action`` is added: ``action`` where it is
    stronger than the ``current`` one, else that one (None: no key, so a node whose findings
    call for nothing reads as it always did)."""
    if action is not Action.NONE and (current is None or action.rank > current.rank):
        return action.value
    return current.value if current is not None else None


def _raise_action(summary: dict[str, Any], action: Action) -> None:
    """Raise a node summary dict's ``operator_action`` to ``action`` (see :func:`_stronger`)."""
    value = _stronger(action_of(summary), action)
    if value is not None:
        summary[SUMMARY_KEY] = value


def _cluster_actions(sections: Mapping[str, dict[str, Any]], cluster_findings: Iterable[Mapping[str, Any]]) -> None:
    """Raise each node's ``operator_action`` by the cluster findings about it (localisation
    excluding it, a GPU lost under load): a finding belongs to the node its subject starts with,
    the attribution the Slurm and Kubernetes integrations use, so all three name one action."""
    by_host: dict[str, dict[str, Any]] = {}
    for section in sections.values():
        info = section.get("node_info") or {}
        for name in (info.get("hostname"), info.get("current_host")):
            if name:
                by_host[str(name)] = section
    for f in cluster_findings:
        action = action_of(f.get("details"))
        owner = by_host.get(str(f.get("subject", "")).split("/", 1)[0]) if action is not None else None
        if owner is not None and action is not None:
            _raise_action(owner["summary"], action)


def summary_facts(facts: Mapping[str, Any]) -> dict[str, Any]:
    """The facts a cluster report reads (the cluster checks), from a node's full facts.

    The GPU probe's scalar fields (driver, CUDA, NVML) with the GPUs as a list of their
    indices (each GPU's identity, readings and limits are in the section's ``gpu`` block),
    the EFA devices; the node's own report (saved on the node) keeps everything else.
    """
    out: dict[str, Any] = {probe: {k: v for k, v in rec.items() if not isinstance(v, (dict, list))}
                           for probe, rec in facts.items() if probe in ("gpu", "fabric") and isinstance(rec, Mapping)}
    gpus = (facts.get("gpu") or {}).get("gpus")
    if isinstance(gpus, list) and "gpu" in out:
        out["gpu"]["gpus"] = [g.get("index") for g in gpus if isinstance(g, Mapping)]
        out["gpu"]["topology"] = topology_summary(gpus)  # what the all_reduce and PCIe floors follow
    efa = (facts.get("fabric") or {}).get("efa_devices")
    if efa and "fabric" in out:
        out["fabric"]["efa_devices"] = efa
    return out


def node_entry(report: NodeReport, node_key: str, node_info: dict[str, Any] | None = None, *,
               detail: bool = True) -> dict[str, Any]:
    """What a node contributes to a report: its section, its findings, its artifacts.

    Built where the node's checks ran (on the node itself in a distributed run), so rank 0
    only places sections. ``detail=False`` (clusters above ``report.detail_max_nodes``)
    lists only WARN, ERROR and FAIL findings (and the PASSes of levelled checks, see
    :func:`group_key`): PASS and SKIP findings are counted per check
    (``unlisted``; the section's summary counts them too), and the first SKIP of each
    check and cause travels as an example, so rank 0 can say "dcgmi not installed on
    9,998 nodes" once instead of 9,998 times. The node's own report keeps everything.
    """
    unlisted: dict[str, dict[str, int]] = {}  # status -> check id -> count
    skips: dict[str, list[Any]] = {}  # "check|code" -> [subject, summary, recommendation]
    if detail:
        findings = [{"node": node_key, **f.to_dict()} for f in report.findings]
    else:
        findings = []
        for f in report.findings:
            # A levelled check's PASS stays listed too: its level (dcgm_basic, dcgm_extended) is in the finding.
            if f.status.rank >= Status.WARN.rank or (f.status is Status.PASS and f.check_id.startswith(LEVELLED)):
                findings.append({"node": node_key, **f.to_dict()})
                continue
            by = unlisted.setdefault(f.status.value, {})
            by[f.check_id] = by.get(f.check_id, 0) + 1
            if f.status is Status.SKIP:
                skips.setdefault(f"{f.check_id}|{f.code}", [f.subject, f.summary, f.recommendation])
    section = node_section(report, node_info, inline=detail)
    if not detail:
        # Statuses by check id: the titles are in the checks' docs, and 10,000 copies of them are not needed.
        section = msgspec.structs.replace(section, facts=summary_facts(report.facts),
                                          checks={r.check_id: r.status.value for r in report.results})
    # The section as it travels (to rank 0 in a distributed run) and is placed: its JSON object.
    return {"section": section.to_dict(), "findings": findings,
            "artifacts": [dict(a, node=node_key) for a in report.artifacts], "duration_s": report.duration_s,
            # Canonical JSON text: rank 0 counts identical texts by hashing (nodes mostly skip
            # and pass the same checks) and decodes each distinct one once.
            "unlisted": json.dumps(unlisted, sort_keys=True, separators=(",", ":")) if unlisted else "",
            "skip_examples": skips}


def _rolled_skips(entries: list[dict[str, Any]], unlisted: dict[str, dict[str, int]]) -> list[ReportFinding]:
    """One SKIP finding per check and cause for the nodes that kept their skips to themselves.

    Each stands for every node that skipped for that cause (``details.nodes``, with up to
    twelve node keys); it is counted once, and one fewer SKIP stays unlisted, so the
    report's counts still equal the findings the nodes made.
    """
    from .model import ReportFinding

    same: dict[tuple[str, ...], list[int]] = {}  # nodes mostly skip for the same causes: group them first
    for i, e in enumerate(entries):
        if e.get("skip_examples"):
            same.setdefault(tuple(e["skip_examples"]), []).append(i)
    groups: dict[str, list[int]] = {}
    for keys, members in same.items():
        for key in keys:
            groups.setdefault(key, []).extend(members)
    out = []
    for key, members in sorted(groups.items()):
        members.sort()
        subject, summary, recommendation = entries[members[0]]["skip_examples"][key]
        check_id, _, code = key.partition("|")
        node, details = f"node_{members[0]}", {}
        if len(members) > 1:
            node, summary = "cluster", f"on {len(members)} nodes, e.g. {subject}: {summary}"
            subject, details = "cluster", {"rolled_up": True, "nodes": len(members),
                                           "node_keys": [f"node_{i}" for i in members[:12]]}
        unlisted[check_id][Status.SKIP.value] -= 1
        out.append(ReportFinding(node=node, check_id=check_id, status=Status.SKIP, subject=subject, code=code,
                                 summary=summary, observed=None, expected=None, unit=None,
                                 recommendation=recommendation, details=details))
    return out


def build_report(nodes: list[NodeReport], *, node_infos: list[dict[str, Any]] | None = None,
                 **kwargs: Any) -> dict[str, Any]:
    """The whole report's JSON dict for one or more node reports (node_0 ... in the given order);
    ``kwargs`` as for :func:`assemble_report`. The library's edge: the program itself uses
    :func:`assemble` (``gpu_preflight.report.build.build``)."""
    if not nodes:
        raise ValueError("a report needs at least one node")
    infos = node_infos or [{}] * len(nodes)
    entries = [node_entry(n, f"node_{i}", infos[i]) for i, n in enumerate(nodes)]
    return assemble_report(entries, fail_on=nodes[0].fail_on, **kwargs)


def assemble_report(entries: list[dict[str, Any]], *, fail_on: str, **kwargs: Any) -> dict[str, Any]:
    """:func:`assemble`'s report as its JSON dict: the edge for callers that hold dicts (the
    library's ``build_report``, tests); ``kwargs`` as for :func:`assemble`."""
    return assemble(entries, fail_on=fail_on, **kwargs).to_dict()


def assemble(entries: list[dict[str, Any]], *, fail_on: str, expected_total_gpus: int | None = None,
             node_extras: Mapping[int, dict[str, Any]] | None = None,
             cluster_results: list[CheckResult] | None = None, topology: Mapping[str, Any] | None = None,
             missing_nodes: list[str] | None = None, performance_summary: Mapping[str, Any] | None = None,
             summary_blocks: Mapping[str, Any] | None = None, test_parameters: Mapping[str, Any] | None = None,
             assess: Assessor | None = None, config: ReportConfig | None = None) -> ClusterReport:
    """The typed report from node entries (:func:`node_entry`, in node order), scored and
    advised by ``assess`` (under ``config``).

    ``assess`` is the report layer's :func:`~.advice.advise` (scoring is not the findings'
    business, see :mod:`gpu_preflight.report.build`); without it the scores are left out, for a
    caller that adds them once the findings are final (the CLI, after the history's
    findings): scoring twice cost rank 0 of a 10,000-node run a third of a second. It reads
    the whole summary, so every block goes in first.

    A distributed run adds ``cluster_results`` (checks over the gathered workloads, listed
    with ``"node": "cluster"``), per-node sections such as ``nccl`` (``node_extras``), the
    job topology, the nodes that never reported, ``summary_blocks`` (a localisation block,
    the reachability matrix: ``cluster_summary`` keys) and the collectives'
    ``test_parameters`` (``cluster_info``). The entries' sections are placed as the dicts
    they are and typed on first read (:class:`~.model.NodeSections`): at 10,000 nodes
    typing, or copying, every section is what rank 0 cannot afford. Nothing is written;
    :func:`~.write.write_report` is the step that writes files and fills the artifact paths.
    """
    from .model import (
        ClusterCheck,
        ClusterInfo,
        ClusterReport,
        ClusterTopology,
        NodeSections,
        ReportFinding,
        RunInfo,
        Tool,
        merged_section,
    )

    if not entries:
        raise ValueError("a report needs at least one node")
    sections = {f"node_{i}": e["section"] for i, e in enumerate(entries)}
    for index, extra in (node_extras or {}).items():
        sections[f"node_{index}"] = merged_section(sections[f"node_{index}"], extra)
    listed: list[dict[str, Any]] = []
    for e in entries:
        listed.extend(e["findings"])
    checks = [r.to_dict() for r in cluster_results or []]  # each finding serialised once, listed twice
    listed.extend({"node": "cluster", **f} for r in checks for f in r["findings"])
    if len(sections) > 1:  # a one-node report's cluster findings are its node's (Slurm reads them so too)
        _cluster_actions(sections, (f for r in checks for f in r["findings"]))
    elif checks:
        _raise_action(next(iter(sections.values()))["summary"],
                      node_action(f["details"] for r in checks for f in r["findings"]))
    findings = ReportFinding.many_from_dicts(listed)  # one conversion of every finding, validated
    cluster_checks = ClusterCheck.many_from_dicts(checks)
    unlisted: dict[str, dict[str, int]] = defaultdict(lambda: {Status.PASS.value: 0, Status.SKIP.value: 0})
    # Nodes mostly keep the same counts: count identical ones first (C speed), then add each kind once.
    for text, times in Counter(e.get("unlisted") or "" for e in entries).items():
        for status, by in (json.loads(text) if text else {}).items():
            for check_id, n in by.items():
                unlisted[check_id][status] += int(n) * times
    findings.extend(_rolled_skips(entries, unlisted))
    coverage = _nothing_judged(findings, unlisted)
    if coverage is not None:
        findings.append(coverage)
        cluster_checks.append(ClusterCheck(check_id=COVERAGE_CHECK, title="At least one check reached a verdict",
                                           status=Status.ERROR, duration_s=0.0,
                                           findings=[msgspec.structs.replace(coverage, node=None)]))
    summary = msgspec.structs.replace(
        summarize(findings, fail_on, unlisted, performance_summary),
        # where the findings a large cluster's nodes kept to themselves are counted
        unlisted={c: {s: n for s, n in by.items() if n} for c, by in sorted(unlisted.items())} if unlisted else None)
    gpus_per_node = [len(s["gpu"]) for s in sections.values()]
    topo = topology or {}
    missing = missing_nodes or []
    report = ClusterReport(
        schema_version=SCHEMA_VERSION, tool=Tool(name="gpu-preflight", version=__version__),
        timestamp=entries[0]["section"]["timestamp"],
        cluster_info=ClusterInfo(
            data_completeness="complete" if not missing else f"incomplete: missing {', '.join(missing)}",
            note=f"Data from all {len(entries)} nodes" if not missing else
                 f"Data from {len(entries) - len(missing)} of {len(entries)} nodes",
            expected_total_gpus=expected_total_gpus,
            cluster_topology=ClusterTopology(
                total_nodes=topo.get("num_nodes", len(entries)),
                gpus_per_node=max(gpus_per_node) if gpus_per_node else 0,
                processes_per_node=topo.get("local_world_size", 1), world_size=topo.get("world_size", 1),
                launcher=topo.get("launcher", "none")),
            missing_nodes=missing,
            extra={"test_parameters": dict(test_parameters)} if test_parameters is not None else {}),
        cluster_summary=summary, cluster_checks=cluster_checks, nodes=NodeSections(sections), findings=findings,
        artifacts=[a for e in entries for a in e["artifacts"]],
        run=RunInfo(fail_on=fail_on, duration_s=round(max(float(e["duration_s"]) for e in entries), 4)))
    if summary_blocks:
        report = report.with_summary(**summary_blocks)
    if assess is None:
        return report
    return report.with_assessment(assess(report, config))


def save_artifacts(node: NodeReport, out: SafeDir | str | Path, node_key: str) -> list[SavedArtifact]:
    """Write a node's raw outputs under ``out/artifacts/<node_key>/``; return their references."""
    import hashlib  # only when there are artifacts to write (2.7 ms of every run's start-up otherwise)

    from ..safeio import SafeDir, open_dir

    refs: list[SavedArtifact] = []
    if not node.raw_artifacts:
        return refs
    if not isinstance(out, SafeDir):
        with open_dir(out) as opened:
            return save_artifacts(node, opened, node_key)
    with out.subdir(Path("artifacts") / node_key) as directory:
        for name, (filename, content) in sorted(node.raw_artifacts.items()):
            data = content.encode("utf-8")
            directory.write_bytes(filename, data)
            refs.append(SavedArtifact(name=name, node=node_key, path=str(Path("artifacts") / node_key / filename),
                                      bytes=len(data), sha256=hashlib.sha256(data).hexdigest()))
    return refs


def findings_of(report: dict[str, Any]) -> list[Finding]:
    """Findings of a saved report (for re-rendering)."""
    return [Finding.from_dict(f) for f in report.get("findings", [])]


def failed_checks(report: ClusterReport) -> list[str]:
    """Check ids that make the run fail under its ``--fail-on`` policy, worst first."""
    # Status is a StrEnum: the member is its value (``.value`` costs an enum descriptor call per finding)
    fail_on, pairs = report.run.fail_on, [(f.status, f.check_id) for f in report.findings]
    gating = {s.value for s in gating_statuses(fail_on)}
    rank = {s.value: s.rank for s in Status}
    bad = sorted((p for p in pairs if p[0] in gating), key=lambda p: (-rank[p[0]], p[1]))
    return list(dict.fromkeys(check_id for _, check_id in bad))


class Verdict(msgspec.Struct, frozen=True):
    """The run's one verdict, as every format says it.

    ``status`` is the worst judged status (``cluster_summary.overall_status``), ``exit_code``
    that status under ``--fail-on``, ``word`` the ``[RESULT]`` word of the exit code.
    ``checks`` are the ids the word names: WARN ids for WARNING; FAIL ids (and WARN ids when
    ``--fail-on warn`` makes them gate) for FAILURE; ERROR ids for ERROR. ``errors`` are the
    ERROR ids beside a FAILURE (a FAIL outranks them, but they were not measured either).
    """

    status: Status
    exit_code: int
    fail_on: str
    checks: tuple[str, ...] = ()
    errors: tuple[str, ...] = ()

    @property
    def word(self) -> str:
        return RESULT_WORDS[self.exit_code]

    @property
    def gated(self) -> bool:
        """True when ``--fail-on warn`` turned a WARN verdict into a failure."""
        return self.status is Status.WARN and self.exit_code == Status.FAIL.exit_code

    @property
    def label(self) -> str:
        """The status as headers and badges show it: ``WARN``, or ``WARN (gating: --fail-on warn)``."""
        return f"{self.status.value} (gating: --fail-on warn)" if self.gated else self.status.value

    @property
    def line(self) -> str:
        """``[RESULT] SUCCESS``, ``[RESULT] WARNING: [...]``, ``[RESULT] FAILURE: [...]`` (then
        ``; ERROR: [...]`` when checks could not be measured too) or ``[RESULT] ERROR: [...]``."""
        if self.word == "SUCCESS":
            return "[RESULT] SUCCESS"
        text = f"[RESULT] {self.word}: [{', '.join(self.checks)}]"
        if self.errors:
            text += f"; ERROR: [{', '.join(self.errors)}]"
        return text


def _ids(pairs: Iterable[tuple[str, str]], statuses: Iterable[Status]) -> tuple[str, ...]:
    wanted = {s.value: s.rank for s in statuses}
    chosen = sorted((p for p in pairs if p[0] in wanted), key=lambda p: (-wanted[p[0]], p[1]))
    return tuple(dict.fromkeys(check_id for _, check_id in chosen))


def verdict_of(report: ClusterReport) -> Verdict:
    """The verdict of a report: what the console header,
    ``[RESULT]`` line, HTML badge, Markdown, JUnit and Prometheus textfile all say, and the
    exit code the CLI returns.

    Read from ``cluster_summary.overall_status`` and ``run.fail_on`` (recomputed from the
    findings for a report without a summary status), so a re-rendered report says what the run said.
    """
    pairs = [(f.status, f.check_id) for f in report.findings]  # a StrEnum member is its value (no .value call)
    return _verdict(pairs, report.cluster_summary.overall_status.value, report.run.fail_on)


def _verdict(pairs: list[tuple[Any, str]], overall: Any, fail_on: str) -> Verdict:
    try:
        status = Status(overall)
    except ValueError:
        status = verdict(s for s, _ in pairs)
    if status is Status.SKIP:  # a report from before SKIP stopped being a verdict: it judged nothing
        status = Status.ERROR
    code = gated_exit_code(status, fail_on)
    if code == Status.PASS.exit_code:
        return Verdict(status, code, fail_on)
    if code == Status.WARN.exit_code:
        return Verdict(status, code, fail_on, _ids(pairs, [Status.WARN]))
    if code == Status.FAIL.exit_code:
        failing = [Status.FAIL, Status.WARN] if fail_on == "warn" else [Status.FAIL]
        return Verdict(status, code, fail_on, _ids(pairs, failing), _ids(pairs, [Status.ERROR]))
    return Verdict(status, code, fail_on, _ids(pairs, [Status.ERROR]))


def result_line(report: ClusterReport) -> str:
    """The acceptance suite's last line, the same word as the exit code (see :class:`Verdict`)."""
    return verdict_of(report).line


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


def with_findings(report: ClusterReport, findings: Sequence[ReportFinding],
                  checks: Sequence[ClusterCheck] = ()) -> ClusterReport:
    """``report`` with later findings added (the history's judgements: regressions, repeat
    offenders), as a new value: listed in ``findings`` (and their checks in
    ``cluster_checks``), the verdict, exit code, issues, recommendations and counts worked out
    again over every finding. The typed form of :func:`gpu_preflight.history.merge.add_findings`."""
    from msgspec.structs import replace

    every = [*report.findings, *findings]
    fresh = summarize(every, report.run.fail_on, report.cluster_summary.unlisted)
    summary = replace(report.cluster_summary, overall_status=fresh.overall_status, exit_code=fresh.exit_code,
                      issues=fresh.issues, recommendations=fresh.recommendations, counts=fresh.counts)
    return replace(report, findings=every, cluster_checks=[*report.cluster_checks, *checks],
                               cluster_summary=summary)
