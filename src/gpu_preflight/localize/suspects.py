"""From per-rail inference to suspects: whole nodes, single rails, links and groups.

A node bad on every rail is one ``node`` suspect without a rail; a node bad on some
rails only is one suspect per rail, which names the GPU/NIC pair. A pair (or group)
confirmed by repeats is a ``link`` (``group``) suspect for each member. A node in
several confirmed groups (nested halves of one bisection) is reported once, with the
smallest group, and not at all when it is already a link end.
"""

from __future__ import annotations

from collections import defaultdict

from .infer import LaneVerdict, confidence
from .model import Observation, Suspect


def build_suspects(lanes: list[LaneVerdict], dead: dict[int, str],
                   weak: dict[tuple[int, int | None], str]) -> list[Suspect]:
    """Dead nodes, then nodes found bad, then confirmed links and groups."""
    out = [Suspect(n, "node", f"dead: {why}", 0.99) for n, why in sorted(dead.items())]
    out += _node_suspects(lanes, dead, weak)
    out += _repeat_suspects(lanes, {s.node for s in out})
    return out


def unresolved(lanes: list[LaneVerdict], nodes: set[int]) -> list[Suspect]:
    """Nodes still open when the budget ran out: excluded, because unexamined is not healthy."""
    out = []
    for n in sorted(nodes):
        evidence = [o for lane in lanes if n in lane.records for obs in lane.records[n].by_partners.values()
                    for o in obs if o.positive]
        out.append(Suspect(n, "node", "unresolved", 0.5, evidence=evidence[:8],
                           failures=max(len(lane.failing(n)) for lane in lanes),
                           passes=min(len(lane.passing(n)) for lane in lanes)))
    return out


def break_tie(lanes: list[LaneVerdict], stuck: set[int], local: dict[int, str]) -> tuple[list[Suspect], set[int]]:
    """Open nodes when no node is known good: pair tests alone cannot say which member is at fault.

    With two nodes (or a fault every node shares) each failed test has only suspects in it.
    What each node measured on its own (``local`` evidence: its node checks, its node-local
    collectives) breaks the tie when it singles out some of them but not all: those are
    convicted, and a node whose every failure had one of them in it is explained. Otherwise
    every stuck node is ``undecided``: reported, never excluded, because one of them may be
    healthy. Returns the suspects and the nodes the tie-break explained.
    """
    marked = {n for n in stuck if n in local}
    if not marked or marked == stuck:
        marked = set()
    out: list[Suspect] = []
    explained: set[int] = set()
    for n in sorted(stuck):
        votes = [(p, lane.records[n].by_partners[p]) for lane in lanes if n in lane.records for p in lane.failing(n)]
        evidence = sorted((o for _, obs in votes for o in obs if o.positive), key=lambda o: (o.round, o.test_id))
        passes = min(len(lane.passing(n)) for lane in lanes)
        if n in marked:
            out.append(Suspect(n, "node", f"local: {local[n]}",
                               confidence([obs for _, obs in votes], [], passes, n), evidence=evidence[:8],
                               passes=passes, failures=len(votes)))
        elif marked and all(p & marked for p, _ in votes):
            explained.add(n)
        else:
            peers = tuple(sorted({m for p, _ in votes for m in p if m in stuck and m != n}))
            out.append(Suspect(n, "undecided", "undecided", 0.0, peers=peers, evidence=evidence[:8],
                               passes=passes, failures=len(votes)))
    return out, explained


def _node_suspects(lanes: list[LaneVerdict], dead: dict[int, str],
                   weak: dict[tuple[int, int | None], str]) -> list[Suspect]:
    out: list[Suspect] = []
    bad_lanes: dict[int, list[int]] = defaultdict(list)
    for i, lane in enumerate(lanes):
        for n in lane.bad:
            if n not in dead:
                bad_lanes[n].append(i)
    for n, which in sorted(bad_lanes.items()):
        whole = len(which) == len(lanes)
        for rail in ([which[0]] if whole else which):
            lane = lanes[rail]
            rec = lane.records[n]
            failing = [rec.by_partners[p] for p in lane.family.get(n, [])]
            passes = len(lane.passing(n))
            evidence = sorted((o for p in lane.failing(n) for o in rec.by_partners[p] if o.positive),
                              key=lambda o: (len(o.members), o.round))
            out.append(Suspect(n, "node", lane.bad[n], confidence(failing, lane.vouched.get(n, []), passes, n),
                               None if whole else rail, evidence=evidence[:8], passes=passes,
                               failures=len(failing) + ((n, None) in weak or (n, rail) in weak)))
    return out


def _repeat_suspects(lanes: list[LaneVerdict], already: set[int]) -> list[Suspect]:
    confirmed: dict[tuple[int, ...], list[int]] = defaultdict(list)
    for i, lane in enumerate(lanes):
        for members, state in lane.repeats.items():
            if state == "confirmed":
                confirmed[members].append(i)
    smallest: dict[int, tuple[int, ...]] = {}
    for members in sorted(confirmed, key=len):
        for n in members:
            smallest.setdefault(n, members)
    out = []
    for members, which in sorted(confirmed.items()):
        whole = len(which) == len(lanes)
        kind = "link" if len(members) == 2 else "group"
        for rail in ([which[0]] if whole else which):
            obs = lanes[rail].by_members[members]
            fails = sum(o.positive for o in obs)
            conf = _repeat_confidence(obs)
            for n in members:
                if n in already or smallest[n] != members:
                    continue
                out.append(Suspect(n, kind, kind, conf, None if whole else rail,
                                   tuple(m for m in members if m != n), sorted(obs, key=lambda o: o.round),
                                   passes=len(obs) - fails, failures=fails))
    return out


def _repeat_confidence(obs: list[Observation]) -> float:
    chance = 1.0
    for o in obs:
        if o.positive:
            chance *= o.fluke
    return round((1 - chance) * sum(o.positive for o in obs) / len(obs), 4)
