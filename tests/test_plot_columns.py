"""The HTML plots' readers (report/plot_data.py) at C speed give what a member-by-member walk gives.

At 10,000 nodes a rolled-up GEMM map is read at C speed when every value is a float, and
by :func:`.measurements.num`'s rules otherwise; both must give the values, extremes and
flagged members that adding the members one by one gives. The node-local band keeps every
node's value per size and the slowest nodes in order.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpu_preflight.findings.canonical import summarize
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.report.measurements import num
from gpu_preflight.report.plot_data import Spread, local_sweeps

SIZES = (1 << 20, 8 << 20, 64 << 20)
VERDICT = summarize([], "fail").to_dict()  # what a report without findings says


def _sweep(values: list[Any], sizes: tuple[Any, ...] = SIZES) -> dict[str, Any]:
    return {"results": [{"size_bytes": s, "busbw_gbps": v} for s, v in zip(sizes, values, strict=True)]}


def test_local_sweeps_slowest_and_band() -> None:
    """Node-local sweeps of many nodes: the band holds every node's value per size, the
    slowest are the lowest peaks (the first node first on a tie)."""
    nodes = {}
    for i, peak in enumerate([5.0, 1.0, 3.0, 1.0, 9.0]):
        entry = {"op": "all_reduce", "test_type": "intra_node", "group": f"node{i}", "success": True,
                 "processes_tested": 8, "error": None, "peak_bandwidth_gbps": peak,
                 **_sweep([peak / 2, peak, peak / 4])}
        nodes[f"node_{i}"] = {"timestamp": "", "node_info": {"current_host": f"h{i}"}, "summary": VERDICT,
                              "gpu": {}, "nccl": {"communication_tests": {"intra_node_all_reduce": entry}}}
    sweeps = local_sweeps(ClusterReport.of({"cluster_summary": VERDICT, "nodes": nodes}), keep=3)["all_reduce"]
    assert sweeps.groups == 5
    assert sweeps.by_size[SIZES[1]] == [5.0, 1.0, 3.0, 1.0, 9.0]
    assert [c.label for c in sweeps.slowest] == ["h1 (node-local)", "h3 (node-local)", "h2 (node-local)"]


def _spread_reference(by_subject: dict[str, Any], status: str) -> Spread:
    """What a member-by-member walk gives."""
    spread = Spread()
    for subject, value in by_subject.items():
        v = value if type(value) is float else num(value)
        if v is not None:
            spread.add(subject, v, status)
    return spread


@pytest.mark.parametrize("values", [[3.0, 1.0, 2.0, 1.0], [3, 1.0, None, "n/a", 7.5], [2.0]])
@pytest.mark.parametrize("status", ["PASS", "WARN"])
def test_add_many_equals_member_by_member(values: list[Any], status: str) -> None:
    by_subject = {f"n{i}/gpu0": v for i, v in enumerate(values)}
    fast, ref = Spread(), _spread_reference(by_subject, status)
    fast.add_many(by_subject, status)
    assert (fast.values, fast.flagged, fast.lowest, fast.highest) == (ref.values, ref.flagged, ref.lowest,
                                                                      ref.highest)
