"""The localisation in the report: ``cluster_summary.localization``, findings, exclude lists.

The block is what a scheduler needs to act on and what a person needs to believe it:
each suspect with the tests that convicted it (partners, figures, the threshold it was
judged against) and a confidence; the Slurm hostlist for ``--exclude`` (python-hostlist's
``collect_hostlist``, the same compression ``scontrol show hostlist`` uses); the
Kubernetes node names to cordon; the healthy nodes a job can start on now; and the pair
matrix for the HTML report.

Only ``node`` suspects are excluded (and nodes left ``unresolved``, because an
unexamined node must never read as healthy). The two ends of a slow *link* are fine with
every other partner: they are reported with a warning and kept out of ``healthy_nodes``,
but not drained — excluding either end would hide the fault, not fix the cable or port.
``undecided`` nodes failed together with no node known good to tell them apart (two
nodes, or a fault they all share): they are listed in ``undecided_nodes`` with a FAIL
finding and excluded from nothing, because one of them may be healthy; the report says
so rather than guessing.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import hostlist

from ..ids import LOCALIZE_SUSPECT_ID
from ..model import CheckResult, Finding, Status
from ..registry import stamp_actions
from ..safeio import write_text
from .model import Observation, Outcome, Suspect

CHECK_ID = LOCALIZE_SUSPECT_ID
MATRIX_LIMIT = 50_000  # pair cells kept in the report; above this only failing cells are kept

RECOMMENDATIONS = {
    "dead": "The node never answered: check power, the host and its network link; drain it "
            "(scontrol update NodeName={node} State=DRAIN Reason=\"gpu-preflight: dead\") and re-run.",
    "timeout": "Tests with this node hang: check its NIC, cable and switch port, and for a stuck GPU "
               "(nvidia-smi, dmesg Xid); drain it and re-run without it.",
    "failed": "Tests with this node fail: check its NIC (ibstat/ethtool), cable, switch port and NCCL/fabric "
              "settings; drain it and re-run without it.",
    "wrong": "Data arrived wrong through this node: silent corruption in a GPU, NVLink or NIC; drain it and "
             "run DCGM diagnostics (dcgmi diag -r 3).",
    "slow": "This node is slow with known-good partners: check its NIC link speed and width, cable, switch "
            "port, PCIe link of the GPU/NIC, and GPU clocks; drain it until fixed.",
    "below_floor": "This node is below the bandwidth floor with known-good partners: check its NIC link speed, "
                   "cable, switch port and PCIe link; drain it until fixed.",
    "latency": "This node adds latency with known-good partners: check its NIC firmware, switch port, and for "
               "CPU/IRQ contention on the host; drain it until fixed.",
    "flaky": "This node fails intermittently with known-good partners (flapping link, marginal cable or NIC): "
             "drain it and check link error counters before returning it to service.",
    "unresolved": "A test with this node failed and the test budget ran out before it was cleared or "
                  "convicted: it is excluded to be safe; re-run the localisation to decide.",
    "undecided": "Pair tests cannot tell which of these nodes is at fault (no node was known good to test "
                 "against): test each with a node known to be good, or check each one's NIC, cable and switch "
                 "port; nothing was excluded.",
    "local": "This node failed with its only partners and no node was known good, so its own node-local "
             "evidence decided: check what it names, and re-test it against a known-good node.",
    "link": "Both nodes are fine with every other partner but slow together: check the path between them "
            "(cables, switch ports, routing); excluding either node avoids it meanwhile.",
    "group": "These nodes are slow only as a whole, and fine in halves and alone: check the fabric between "
             "them (spine/leaf uplinks, routing, congestion control).",
}


def hostlist_of(names: Iterable[str]) -> str:
    """Slurm's compressed form (``node[01-03,07]``); empty for no names."""
    listed = sorted(set(names))
    return str(hostlist.collect_hostlist(listed)) if listed else ""


def write_exclude_file(path: str | Path, names: Iterable[str], style: str = "lines") -> Path:
    """Write the hosts to exclude: one per line (``sbatch --exclude=./FILE``) or one hostlist line.

    Written through a temporary file with a unique name and renamed
    (:mod:`gpu_preflight.safeio`), so a job reading the file never sees half of it and no
    planted symlink is written through.
    """
    listed = sorted(set(names))
    if style == "lines":
        text = "".join(f"{n}\n" for n in listed)
    elif style == "hostlist":
        text = f"{hostlist_of(listed)}\n" if listed else ""
    else:
        raise ValueError("style must be 'lines' or 'hostlist'")

    return write_text(path, text)


def localization_block(outcome: Outcome, names: Sequence[str], *, nics: Mapping[int, str] | None = None,
                       duration_s: float | None = None, matrix_limit: int = MATRIX_LIMIT) -> dict[str, Any]:
    """``cluster_summary.localization`` for an outcome; ``names[i]`` is node i's host name.

    ``nics`` maps a rail (local rank, which drives the GPU of the same index) to its NIC
    name from the topology, so a rail suspect reads ``gpu: 3, rail: mlx5_3``.
    ``duration_s``: the wall time the runner measured (else the simulated/summed rounds).
    """
    if len(names) != outcome.nodes:
        raise ValueError(f"{len(names)} names for {outcome.nodes} nodes")
    excluded = [names[n] for n in outcome.excluded]
    return {
        "mode": outcome.mode,
        "done": outcome.done,
        "rounds": outcome.rounds,
        "tests": outcome.tests,
        "duration_s": round(duration_s if duration_s is not None else outcome.duration_s, 3),
        "suspects": [suspect_dict(s, names, nics, outcome.rails) for s in outcome.suspects],
        "exclude_nodes": excluded,
        "exclude_hostlist": hostlist_of(excluded),
        "kubernetes_nodes": excluded,
        "undecided_nodes": [names[s.node] for s in outcome.suspects if s.kind == "undecided"],
        "healthy_nodes": [names[n] for n in outcome.healthy],
        "healthy_hostlist": hostlist_of(names[n] for n in outcome.healthy),
        "matrix": pair_matrix(outcome, names, matrix_limit),
    }


def suspect_dict(s: Suspect, names: Sequence[str], nics: Mapping[int, str] | None = None,
                 rails: int = 1) -> dict[str, Any]:
    return {
        "node": names[s.node],
        "kind": s.kind,
        "gpu": s.rail,
        "rail": (nics or {}).get(s.rail, s.rail) if s.rail is not None else None,
        "peers": [names[p] for p in s.peers],
        "reason": s.reason.split(":")[0],
        "summary": summary(s, names),
        "confidence": s.confidence,
        "exclude": s.exclude,
        "failures": s.failures,
        "passes": s.passes,
        "evidence": [evidence_dict(o, names, rails) for o in s.evidence],
    }


def evidence_dict(o: Observation, names: Sequence[str], rails: int = 1) -> dict[str, Any]:
    """One test behind a verdict: who took part, what it measured, what it was judged against."""
    d = o.to_dict()
    d["members"] = [names[m] for m in o.members]
    if rails > 1:
        d["gpu"] = o.rail
    return d


def summary(s: Suspect, names: Sequence[str]) -> str:
    """One human line saying what the evidence is."""
    node = names[s.node] + (f"/gpu{s.rail}" if s.rail is not None else "")
    pairs = [o for o in s.evidence if len(o.members) == 2]
    if s.kind == "link":
        figure = next((f" ({o.gbps:.2f} GB/s)" for o in s.evidence if o.gbps is not None and o.positive), "")
        return (f"{node} <-> {names[s.peers[0]]}: failed {s.failures} of {s.failures + s.passes} tests together"
                f"{figure}, fine with every other partner")
    if s.kind == "group":
        return f"{len(s.peers) + 1} nodes incl. {node} slow only as a whole, fine in halves and alone"
    if s.reason.startswith("dead"):
        return f"{node} never answered ({s.reason.partition(': ')[2] or 'no heartbeat'})"
    if s.reason == "unresolved":
        return f"{node}: a test with it failed and the budget ran out before a verdict"
    if s.kind == "undecided":
        others = " and ".join(names[p] for p in s.peers) or "its partners"
        figure = _worst(s)
        return (f"cannot tell whether {node} or {others} is at fault: they failed together{figure} and no node "
                f"was known good to test against; nothing excluded")
    if s.reason.startswith("local"):
        return (f"{node} failed with {partners_of(s, names)}{_worst(s)}, no node was known good, and its own "
                f"node-local evidence breaks the tie: {s.reason.partition(': ')[2]}")
    partners = ", ".join(sorted({names[m] for o in pairs for m in o.members if m != s.node})) or "its groups"
    if s.reason == "flaky":
        return f"{node} failed intermittently: {s.failures} of {s.failures + s.passes} partners ({partners})"
    slow = [o for o in pairs if o.gbps is not None and o.threshold_gbps is not None]
    if s.reason in ("slow", "below_floor") and slow:
        worst = min(slow, key=lambda o: o.gbps or 0.0)
        return (f"{node} slow with {partners}: {worst.gbps:.2f} GB/s against a threshold of "
                f"{worst.threshold_gbps:.2f}")
    words = {"timeout": "timed out", "failed": "failed", "wrong": "delivered wrong data", "latency": "added latency"}
    return f"{node}: tests {words.get(s.reason, s.reason)} with {partners}"


def partners_of(s: Suspect, names: Sequence[str]) -> str:
    return ", ".join(sorted({names[m] for o in s.evidence for m in o.members if m != s.node})) or "its partners"


def _worst(s: Suspect) -> str:
    """`` (0.01 GB/s, threshold 0.05)``: the slowest failing figure behind a suspect, or nothing."""
    slow = [o for o in s.evidence if o.gbps is not None and o.positive]
    if not slow:
        reasons = sorted({o.reason for o in s.evidence if o.positive})
        return f" ({', '.join(reasons)})" if reasons else ""
    worst = min(slow, key=lambda o: o.gbps or 0.0)
    limit = f", threshold {worst.threshold_gbps:.4g}" if worst.threshold_gbps is not None else ""
    return f" ({worst.gbps:.4g} GB/s{limit})"


def localization_findings(outcome: Outcome, names: Sequence[str],
                          nics: Mapping[int, str] | None = None) -> list[Finding]:
    """``localize.suspect`` findings: FAIL per excluded or undecided node, ERROR when unresolved, WARN per link/group.

    An ``undecided`` node FAILs without being excluded: its tests failed (the cluster is
    not fit as it is), only the culprit among the nodes that failed together is unknown.
    """
    out: list[Finding] = []
    done_links: set[tuple[tuple[int, ...], int | None]] = set()
    for s in outcome.suspects:
        reason = s.reason.split(":")[0]
        subject = names[s.node] + (f"/gpu{s.rail}" if s.rail is not None else "")
        details = suspect_dict(s, names, nics, outcome.rails)
        if s.kind in ("link", "group"):
            members = tuple(sorted((s.node, *s.peers)))
            if (members, s.rail) in done_links:
                continue
            done_links.add((members, s.rail))
            subject = ("<->".join(names[m] for m in members) if s.kind == "link"
                       else f"group {hostlist_of(names[m] for m in members)}")
            out.append(Finding(CHECK_ID, Status.WARN, subject, f"{s.kind}_slow", summary(s, names),
                               observed=s.confidence, unit="confidence",
                               recommendation=RECOMMENDATIONS[s.kind], details=details))
            continue
        status = Status.ERROR if reason == "unresolved" else Status.FAIL
        worst = min((o.gbps for o in s.evidence if o.gbps is not None and o.positive), default=None)
        threshold = next((o.threshold_gbps for o in s.evidence if o.threshold_gbps is not None), None)
        out.append(Finding(CHECK_ID, status, subject, reason, summary(s, names),
                           observed=round(worst, 4) if worst is not None else reason,
                           expected=f">= {threshold:.4g}" if threshold is not None and worst is not None else None,
                           unit="GB/s" if worst is not None else None,
                           recommendation=RECOMMENDATIONS.get(reason, RECOMMENDATIONS["failed"]).format(
                               node=names[s.node]), details=details))
    if not out:
        out.append(Finding(CHECK_ID, Status.PASS, "cluster", "ok",
                           f"all {len(outcome.healthy)} node(s) passed pairwise localisation in {outcome.rounds} "
                           f"round(s), {outcome.tests} test(s)", observed=len(outcome.healthy)))
    return stamp_actions(out)  # an excluded node is isolated (checks/report_ids.py)


def localization_result(outcome: Outcome, names: Sequence[str], nics: Mapping[int, str] | None = None,
                        duration_s: float = 0.0) -> CheckResult:
    """The findings as one cluster check result, to sit beside the other cluster checks."""
    return CheckResult(CHECK_ID, "Bad nodes found by pairwise/group localisation",
                       localization_findings(outcome, names, nics), duration_s)


def pair_matrix(outcome: Outcome, names: Sequence[str], limit: int = MATRIX_LIMIT) -> dict[str, Any]:
    """Node x node figures of the pair tests, sparse: ``[i, j, gbps, result]`` per tested pair.

    ``gbps`` is the median over repeats of the slowest rail; ``result`` the worst judged
    outcome. Above ``limit`` cells only the failing ones are kept (``truncated``): a
    full round-robin over thousands of nodes is millions of cells.
    """
    figures: dict[tuple[int, int], dict[int, list[float]]] = defaultdict(lambda: defaultdict(list))
    results: dict[tuple[int, int], set[str]] = defaultdict(set)
    for o in outcome.observations:
        if len(o.members) != 2 or o.kind != "pair":
            continue
        key = (min(o.members), max(o.members))
        if o.gbps is not None:
            figures[key][o.rail].append(o.gbps)
        results[key].add(o.reason)
    order = ("timeout", "wrong", "failed", "below_floor", "slow", "latency", "ok")
    cells = []
    for key in sorted(results):
        per_rail = [statistics.median(v) for v in figures[key].values() if v]
        worst = next(r for r in order if r in results[key])
        cells.append([key[0], key[1], round(min(per_rail), 4) if per_rail else None, worst])
    truncated = len(cells) > limit
    if truncated:
        cells = [c for c in cells if c[3] != "ok"][:limit]
    return {"nodes": list(names), "unit": "GB/s", "cells": cells, "truncated": truncated}
