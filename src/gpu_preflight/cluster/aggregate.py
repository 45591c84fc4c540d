"""Turn what rank 0 gathered into the cluster report.

Node reports come from each node's local rank 0; workload results from every rank. A
node whose local rank 0 never reported still gets a section, holding an ``ERROR`` that
names it, so an incomplete run can never read as a healthy one.
"""

from __future__ import annotations

import gc
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import msgspec

from .. import registry
from ..config import Config
from ..config.report_schema import report_config
from ..engine import run_specs
from ..findings.canonical import assemble, finding_groups, node_entry
from ..findings.diagnostic_sections import communication_test
from ..findings.model import ClusterReport, PingpongTest
from ..ids import CLUSTER_NODE_REPORT_ID
from ..model import CheckResult, Finding, NodeReport, Status, gated_exit_code
from ..records import ClusterFacts
from ..records.connectivity import summary as reachability
from ..records.efficiency import gathered_work_per_watt
from ..registry import CheckContext
from .pingpong_tables import client_tables

if TYPE_CHECKING:
    from ..findings.canonical import Assessor


def cluster_facts(gathered: dict[str, Any]) -> ClusterFacts:
    topo = gathered["topology"]
    payloads = gathered["payloads"]
    ranks = list(payloads)
    if not all(type(r) is int for r in ranks[:1]) or ranks != sorted(ranks):  # saved files have string keys
        payloads = dict(sorted((int(r), p) for r, p in payloads.items()))  # checks walk them in rank order
    per_node = max(int(topo.get("local_world_size", 1)), 1)
    num_nodes = int(topo.get("num_nodes", 1))
    names, missing_hosts = _node_names(payloads, gathered.get("names") or {}, topo.get("hosts") or [],
                                       num_nodes, per_node)
    node_facts: dict[int, dict[str, Any]] = {}
    for node in range(num_nodes):  # node entries travel with each node's local rank 0
        p = payloads.get(node * per_node)
        if p is not None and "node_entry" in p:
            node_facts[node] = p["node_entry"]["section"].get("facts") or {}
    return ClusterFacts(int(topo.get("world_size", 1)), num_nodes, per_node, payloads,
                        {int(r): why for r, why in gathered.get("missing", {}).items()}, names, node_facts,
                        list(gathered.get("columns") or []), list(gathered.get("index") or []),
                        list(gathered.get("collectives") or []), missing_hosts,
                        {int(r): (float(lo), float(hi)) for r, (lo, hi) in (gathered.get("clock_skew") or {}).items()})


def _node_names(payloads: dict[int, dict[str, Any]], silent: dict[Any, Any], hosts: list[str], num_nodes: int,
                per_node: int) -> tuple[dict[int, str], list[str]]:
    """Node rank → name, and the job's hosts that no node claimed.

    A node is named by what it said about itself (its leader's identity first, then any of its
    ranks), else by what a rank that fell silent said in its hello; never by its position in the
    launcher's host list, whose order a c10d rendezvous does not follow. The host list only says
    who is missing: where one node is left unnamed and one listed host unclaimed, that host is
    the node; otherwise the node keeps a placeholder (``node<i>``) and the unclaimed hosts are
    returned for the report to name. Nodes that claim one name (two agents on one machine,
    a copied ``GPU_PREFLIGHT_NODE_NAME``) stay apart as ``name#<i>``; ``cluster.consistency``
    reports the clash.
    """
    names: dict[int, str] = {}
    for rank, p in payloads.items():  # rank order: a node's leader speaks first
        node = int(p.get("node_rank", rank // per_node))
        if node not in names and (name := ClusterFacts.claimed_name(p)):
            names[node] = name
    for rank, name in silent.items():  # ranks that fell silent still said hello
        node = int(rank) // per_node
        if node not in names and name:
            names[node] = str(name)
    taken = set(names.values())
    unclaimed = [h for h in hosts if h not in taken]
    unnamed = [n for n in range(num_nodes) if n not in names]
    if len(unnamed) == 1 and len(unclaimed) == 1:
        names[unnamed[0]], unclaimed = unclaimed[0], []
    for node in unnamed:
        names.setdefault(node, f"node{node}")
    seen: dict[str, int] = {}
    for node in sorted(names):
        seen[names[node]] = seen.get(names[node], 0) + 1
    for node in sorted(names):
        if seen[names[node]] > 1:  # nodes sharing a name stay distinct
            names[node] = f"{names[node]}#{node}"
    return names, unclaimed


def node_names(gathered: dict[str, Any]) -> list[str]:
    """Node names in node-rank order (what localisation and exclude lists print)."""
    facts = cluster_facts(gathered)
    return [facts.node_names.get(n, f"node{n}") for n in range(facts.num_nodes)]


def expected_gpus(facts: ClusterFacts, entries: list[dict[str, Any]], per_node: int | None) -> int:
    """``cluster_info.expected_total_gpus``: ``--expect-gpus`` per node x nodes where it was given;
    else the job's GPU ranks (the launcher placed one per GPU); else, with CPU ranks, the most GPUs
    any node's NVML listed x nodes, so a node short of its peers shows against the expected total."""
    if per_node is not None:
        return per_node * facts.num_nodes
    if facts.gpu_ranks:
        return facts.world_size
    return max((len(e["section"].get("gpu") or {}) for e in entries), default=0) * facts.num_nodes


def _node_entries(facts: ClusterFacts, fail_on: str) -> tuple[list[dict[str, Any]], list[str]]:
    """Each node's entry as its leader built it, or one holding an ERROR for a node that sent none."""
    entries, missing = [], []
    for node in range(facts.num_nodes):
        first = node * facts.local_world_size
        payload = facts.payloads.get(first)
        name = facts.node_names.get(node, f"node{node}")
        if payload and "node_entry" in payload:
            entry = payload["node_entry"]
            entry["section"]["node_info"]["current_host"] = name  # rank 0 alone knows the de-duplicated name
        else:
            missing.append(name)
            why = facts.missing.get(first, "its local rank 0 sent no node report")
            report = NodeReport(name, datetime.now(UTC).isoformat(), [CheckResult(
                CLUSTER_NODE_REPORT_ID, "Node report received", [Finding(
                    CLUSTER_NODE_REPORT_ID, Status.ERROR, name, "node_report_missing",
                    f"no node report from {name}: {why}",
                    recommendation="The node was not checked: look at the host and re-run.")], 0.0)],
                fail_on=fail_on)
            entry = node_entry(report, f"node_{node}", node_info(node, facts.num_nodes, facts.world_size,
                                                                  facts.local_world_size, name))
        entries.append(entry)
    return entries, missing


def node_info(node: int, num_nodes: int, world_size: int, local_world_size: int, name: str) -> dict[str, Any]:
    """A node's ``node_info`` in a cluster report (the SageMaker layout's host ranks)."""
    return {"node_rank": node, "host_rank": node, "host_count": num_nodes, "world_size": world_size,
            "rank": node * max(local_world_size, 1), "local_rank": 0, "current_host": name}


def test_key(entry: dict[str, Any]) -> str:
    """``<scope>_<op>`` (``distributed_all_reduce``): a collective's key in ``nccl.communication_tests``."""
    return f"{entry.get('scope') or 'group'}_{entry['op']}"


def _as_test(entry: dict[str, Any]) -> dict[str, Any]:
    """A collective's entry as ``nccl.communication_tests`` lists it (the SageMaker layout's fields:
    success, test_type, group, processes_tested, results, peak_bandwidth_gbps, error).

    The gathered entry itself, with ``test_type`` added: it already holds every other field,
    and copying 60,000 of them at 10,000 nodes cost a fifth of a second.
    """
    entry["test_type"] = entry.get("scope")
    if not entry.keys() >= _TEST_FIELDS:  # the runner's entries have them all; hand-made ones may not
        entry.setdefault("success", False)
        entry.setdefault("processes_tested", len(entry.get("ranks") or ()))
        entry.setdefault("peak_bandwidth_gbps", 0.0)
        entry.setdefault("results", [])
        entry.setdefault("error", None)
    return entry


_TEST_FIELDS = frozenset({"success", "processes_tested", "peak_bandwidth_gbps", "results", "error"})


def _span(entry: dict[str, Any], per_node: int, num_nodes: int) -> range | list[int]:
    """The nodes a collective group's ranks (listed in order) live on; consecutive ranks, as a
    job-wide group's are, give a range without a walk over eighty thousand of them."""
    ranks = entry.get("ranks") or ()
    if not ranks:
        return []
    if ranks[-1] - ranks[0] + 1 == len(ranks):
        return range(ranks[0] // per_node, min(ranks[-1] // per_node + 1, num_nodes))
    return sorted({r // per_node for r in ranks if r // per_node < num_nodes})


_HOME, _ALL, _SOME = "home", "all", "some"  # a group on one node, on every node, on some


def _nccl_sections(facts: ClusterFacts, detail: bool = True) -> tuple[
        dict[int, dict[str, Any]], dict[str, float], dict[str, list[int] | range], dict[int, dict[str, float]]]:
    """Per node ``nccl.communication_tests``, the performance summary (peak busbw per
    scope/op), the nodes of each collective group (by group name) and each node's own
    figures (the peak of every collective it took part in).

    Every member of a group measured the same sweep (its lowest rank reports it). The sweep
    is listed on the node of that rank; with ``detail`` (clusters up to
    ``report.detail_max_nodes``) also on every other node of the group, as each node of the
    SageMaker report lists ``distributed_all_reduce`` — there without the group's rank list,
    one shared copy per sweep. Failures are listed on every node that saw them.

    What this adds to a node (``nccl.communication_tests``, ``network.efa_communication_test``)
    goes into its section as JSON objects, the gathered entries themselves, not as the typed
    :class:`~..findings.model.CollectiveTest` and :class:`~..findings.model.PingpongTest`: rank 0
    places the section dicts the nodes sent and writes them as they are, so a typed value would
    be typed here and turned back into a dict for ``report.json``. At 10,000 nodes (60,000 entries,
    240,000 sizes: bench/bench_aggregate.py's input) typing them took 0.48 s and writing them
    back 0.65 s (medians of 5, 2 shared cores), against nothing for the dicts; a reader types
    them once, on first read (:meth:`~..findings.model.NodeSections.blocks`).
    """
    per_node = max(facts.local_world_size, 1)
    tests: dict[int, dict[str, dict[str, Any]]] = {}
    figures: dict[int, dict[str, float]] = {}  # node -> its figures; a job-wide group's in figures[-1]
    summary: dict[str, float] = {}
    keys: dict[tuple[Any, Any], tuple[str, str]] = {}  # (scope, op) -> key, summary name: few for 60,000 entries
    spans: dict[str, list[int] | range] = {}
    modes: dict[Any, tuple[str, list[int] | range]] = {}  # group -> where its figures go, and its nodes
    everywhere = range(facts.num_nodes)
    sweeps = len(facts.group_entries)
    at_node, on_node, mine = -1, {}, {}
    for i, (rank, entry) in enumerate([*facts.group_entries, *facts.collective_errors]):
        scope = entry.get("scope")
        kind = (scope, entry["op"])
        if kind not in keys:
            keys[kind] = (test_key(entry), f"{test_key(entry)}_bandwidth_gbps")
        key, name = keys[kind]
        home = rank // per_node
        if home >= facts.num_nodes:
            continue
        if home != at_node:  # entries come in rank order: one lookup per node, not per entry
            at_node, on_node, mine = home, tests.setdefault(home, {}), figures.setdefault(home, {})
        test = _as_test(entry)
        if key not in on_node:  # the first result of each scope and collective
            on_node[key] = test
        peak = float(entry.get("peak_bandwidth_gbps") or 0.0)
        if i < sweeps:
            group = entry.get("group")
            where = modes.get(group)
            if where is None:
                nodes = spans[str(group)] = _span(entry, per_node, facts.num_nodes) or [home]
                where = modes[group] = (_HOME if len(nodes) == 1 else _ALL if nodes == everywhere else _SOME, nodes)
            if where[0] is _HOME:
                if name not in mine:
                    mine[name] = peak
            else:
                for node in [-1] if where[0] is _ALL else where[1]:  # one shared entry for every node
                    figures.setdefault(node, {}).setdefault(name, peak)
                if detail:
                    light = {k: v for k, v in test.items() if k != "ranks"}
                    for node in where[1]:
                        if node != home:
                            tests.setdefault(node, {}).setdefault(key, light)
        if scope != "intra_node":
            best = summary.get(name, 0.0)
            summary[name] = peak if peak > best else best
        elif name not in summary or peak < summary[name]:  # the slowest node bounds a job
            summary[name] = peak
    extras: dict[int, dict[str, Any]] = {}
    for node in range(facts.num_nodes):
        extra: dict[str, Any] = {"nccl": {"communication_tests": tests.get(node, {})}}
        pingpong = facts.leaders.get(node, {}).get("pingpong")
        exchange = _pingpong_test(pingpong, node * per_node) if pingpong else None
        if exchange is not None:
            extra["network"] = {"efa_communication_test": exchange.to_dict()}
        extras[node] = extra
    for dtype, col in facts.columns.gemm.items():
        correct = col.correct
        values = sorted(col.tflops if all(correct) else [t for t, ok in zip(col.tflops, correct, strict=True) if ok])
        if not values:
            continue
        summary[f"gemm_{dtype}_tflops_min"] = round(values[0], 4)
        summary[f"gemm_{dtype}_tflops_median"] = round(values[len(values) // 2], 4)
    per_watt: dict[str, list[float]] = {}
    for by_dtype in gathered_work_per_watt(facts).values():  # the GEMM work per watt load.efficiency judges
        for dtype, (tflops, watts, _) in by_dtype.items():
            per_watt.setdefault(dtype, []).append(tflops / watts)
    for dtype, values in sorted(per_watt.items()):
        values.sort()
        summary[f"gemm_{dtype}_tflops_per_watt_min"] = round(values[0], 6)
        summary[f"gemm_{dtype}_tflops_per_watt_median"] = round(values[len(values) // 2], 6)
    return extras, summary, spans, figures


def _pingpong_test(pingpong: Any, rank: int) -> PingpongTest | None:
    """A node leader's ``network.efa_communication_test`` from its fi_pingpong records, or None where
    they do not read as the records a leader writes (a payload's ``pingpong`` is not validated on
    the wire: another version's, a damaged one): the node's section leaves the block out rather
    than rank 0 fail the report, and ``fabric.pingpong`` judges the records as they are."""
    try:
        return communication_test(pingpong, rank)
    except msgspec.ValidationError:
        return None


def _subject_nodes(subject: str, by_name: dict[str, int],
                   spans: dict[str, list[int] | range]) -> list[int] | range | None:
    """The nodes a cluster finding's subject names (``h1/gpu0``, ``h0<->h1``, ``group node1``), or
    ``None`` for the whole job (``cluster``, a job-wide group, anything unrecognised)."""
    if subject.startswith("group "):
        nodes = spans.get(subject[6:])
        return None if nodes is None or (isinstance(nodes, range) and len(nodes) >= len(by_name)) else nodes
    named = [by_name[head] for part in subject.split("<->") if (head := part.split("/", 1)[0]) in by_name]
    return named or None


def _node_summaries(facts: ClusterFacts, entries: list[dict[str, Any]], results: list[CheckResult],
                    spans: dict[str, list[int] | range], figures: dict[int, dict[str, float]],
                    extras: dict[int, dict[str, Any]]) -> None:
    """Each node's ``summary`` as the SageMaker report has it: its own figures
    (``performance_summary``) and ``test_results`` that count the cluster checks concerning
    the node — those whose subject names it, and the job-wide ones — beside its own checks.

    Only ``test_results`` and ``performance_summary`` change: the node's overall status,
    issues and recommendations stay its own checks'.
    """
    by_name = {name: node for node, name in facts.node_names.items()}
    common = figures.get(-1, {})
    everywhere: dict[str, Status] = {}
    per_node: dict[int, dict[str, Status]] = {}
    for result in results:
        for f in result.findings:
            groups = finding_groups(f.check_id, f.details) if f.status is not Status.SKIP else ()
            if not groups:
                continue
            nodes = _subject_nodes(f.subject, by_name, spans)
            targets = [everywhere] if nodes is None else [per_node.setdefault(n, {}) for n in nodes]
            for worst in targets:
                for g in groups:
                    if g not in worst or f.status.rank > worst[g].rank:
                        worst[g] = f.status
    passed = {g: status is Status.PASS for g, status in everywhere.items()}
    for node, entry in enumerate(entries):
        own = entry["section"]["summary"]
        results_of = own.get("test_results") or {}
        here = passed
        if node in per_node:
            worst = dict(everywhere)
            for g, status in per_node[node].items():
                if g not in worst or status.rank > worst[g].rank:
                    worst[g] = status
            here = {g: status is Status.PASS for g, status in worst.items()}
        untested = own.get("test_results_notes") or {}
        merged = {**results_of, **here}
        for g in here:
            if results_of.get(g) is False and g not in untested:  # the node's own checks already said no
                merged[g] = False
        summary: dict[str, Any] = {"test_results": merged, "performance_summary": {
            **own.get("performance_summary", {}), **common, **figures.get(node, {})}}
        if still := {g: why for g, why in untested.items() if g not in here}:
            summary["test_results_notes"] = still
        else:  # every group the node left untested was judged by the cluster checks
            own.pop("test_results_notes", None)
        extras.setdefault(node, {})["summary"] = summary


def _load_sections(facts: ClusterFacts, extras: dict[int, dict[str, Any]], config: Config) -> None:
    """``nodes.<node>.load.<gpu>``: each GPU's under-load summary, on clusters small enough to list
    every GPU (above ``report.detail_max_nodes`` the load findings carry the flagged GPUs' numbers)."""
    if facts.num_nodes > report_config(config).detail_max_nodes:
        return
    per_node = max(facts.local_world_size, 1)
    for rank, payload in sorted(facts.payloads.items()):
        load = payload.get("load")
        node = int(payload.get("node_rank", rank // per_node))
        if isinstance(load, dict) and node in extras:
            label = facts.rank_subject(rank).rsplit("/", 1)[-1]
            extras[node].setdefault("load", {})[label] = load


def build_cluster_report(gathered: dict[str, Any], config: Config, *, fail_on: str, include: list[str],
                         exclude: list[str], suite: str, timeout_s: float,
                         extra_results: list[CheckResult] | None = None,
                         summary_extra: dict[str, Any] | None = None,
                         assess: Assessor | None = None) -> tuple[ClusterReport, int]:
    """The typed report and the process exit code for a gathered distributed run.

    ``assess`` scores and advises it (the report layer's :func:`gpu_preflight.report.build.build_cluster_report`
    passes :func:`~gpu_preflight.report.advice.advise`); without it the report has no scores.

    ``extra_results`` are cluster-level results computed outside the registered checks
    (the localisation rounds); ``summary_extra`` adds blocks to ``cluster_summary``.
    """
    # The gathered payloads (tens of millions of objects at 10,000 nodes) live until the end
    # and hold no cycles, and neither does what the aggregation builds: collections walking
    # them mid-aggregation are pure waste (a quarter of its time at 10,000 nodes, measured
    # with bench/bench_aggregate.py). The collector resumes afterwards.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _build(gathered, config, fail_on=fail_on, include=include, exclude=exclude, suite=suite,
                      timeout_s=timeout_s, extra_results=extra_results, summary_extra=summary_extra, assess=assess)
    finally:
        if enabled:
            gc.enable()


def _build(gathered: dict[str, Any], config: Config, *, fail_on: str, include: list[str], exclude: list[str],
           suite: str, timeout_s: float, extra_results: list[CheckResult] | None,
           summary_extra: dict[str, Any] | None, assess: Assessor | None) -> tuple[ClusterReport, int]:
    facts = cluster_facts(gathered)
    entries, missing = _node_entries(facts, fail_on)
    cluster_patterns = [p for p in include if any(s.matches(p) for s in registry.all_checks()
                                                  if s.scope == "cluster")]
    specs = registry.select(suite, cluster_patterns if include else [], exclude, scope="cluster") \
        if (not include or cluster_patterns) else []

    ctx = CheckContext(host="cluster", facts={"cluster": facts, "pingpong_tables": client_tables(facts)}, config=config)
    results = run_specs(specs, ctx, {}, timeout_s) + list(extra_results or [])
    extras, perf, spans, figures = _nccl_sections(facts, facts.num_nodes <= report_config(config).detail_max_nodes)
    _node_summaries(facts, entries, results, spans, figures, extras)
    _load_sections(facts, extras, config)
    blocks = dict(summary_extra or {})
    reach = reachability(facts, facts.num_nodes <= report_config(config).detail_max_nodes)
    if reach is not None:  # the name-resolution and reachability matrix the report shows
        blocks["reachability"] = reach
    # the collectives' sizes and iterations the job-size table chose
    params = next((p["test_parameters"] for p in facts.leaders.values()
                   if isinstance(p.get("test_parameters"), dict)), None)
    # Scored after the summary's blocks are in: the localisation matrix is the best connectivity source.
    report = assemble(entries, fail_on=fail_on, node_extras=extras, cluster_results=results,
                      topology=gathered["topology"], missing_nodes=missing, performance_summary=perf,
                      expected_total_gpus=expected_gpus(facts, entries, config.gpu.expected_count),
                      summary_blocks=blocks, test_parameters=params, assess=assess)
    return report, gated_exit_code(report.cluster_summary.overall_status, fail_on)
