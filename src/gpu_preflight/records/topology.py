"""A node's GPU topology in the few numbers the bandwidth floors follow.

A record, not a rule: the checks' floors (:mod:`gpu_preflight.checks.floors`) read it, the
report's node summary carries it, and a node sends it to rank 0 at scale, where the per-GPU
records stay on the node.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["topology_summary"]


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def topology_summary(gpus: Sequence[Any]) -> dict[str, Any]:
    """What the floors need from a node's GPU records (JSON form): GPU count, NVSwitch,
    the fewest active NVLinks on any GPU, the lowest PCIe generation any GPU's link can reach.

    A value no GPU reported is None (unknown), never 0.
    """
    records = [g for g in gpus if isinstance(g, Mapping)]
    switch = [_int(g.get("nvswitch_links")) for g in records]
    links: list[int] = []
    for g in records:
        nvlinks = g.get("nvlinks")
        if isinstance(nvlinks, list):
            links.append(sum(1 for link in nvlinks if isinstance(link, Mapping) and link.get("active") is True))
        elif isinstance(nvlinks, Mapping) and "na" in nvlinks and "no NVLink" in str(nvlinks["na"]):
            links.append(0)
    gens = [g for g in (_int(r.get("pcie_gen_max")) for r in records) if g]
    known_switch = [s for s in switch if s is not None]
    return {"gpus": len(records),
            "nvswitch": (all(s > 0 for s in known_switch) if len(known_switch) == len(records) and records
                         else None),
            "nvlinks_min": min(links) if len(links) == len(records) and records else None,
            "pcie_gen_max": min(gens) if gens else None}
