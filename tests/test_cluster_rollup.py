"""Where a cluster check's passes are rolled up: one decision, by node count, for every check.

Each check judges its subjects the same way at any size; ``checks/cluster_rollup.Passes``
alone turns the passes into one finding per subject (up to ``report.detail_max_nodes``
nodes) or one per (check, group) above it. Failures and warnings never change.
"""

from __future__ import annotations

from typing import Any

import pytest

from gpu_preflight.checks.cluster_rollup import Passes, Series
from gpu_preflight.cluster.aggregate import cluster_facts
from gpu_preflight.config import Config
from gpu_preflight.config.report_schema import ReportConfig
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.model import Finding, Status, per_subject
from gpu_preflight.registry import CheckContext, get_check

from .cluster_golden import gathered

NODES = 4  # cluster_golden's runs
CHECKS = ["compute.gemm", "memory.bandwidth", "train.smoke", "stack.cuda", "nccl.collectives", "load.clocks",
          "load.thermal", "load.power", "load.peers", "load.ecc", "load.efficiency"]


def judge(check_id: str, detail_max_nodes: int, case: str = "faults") -> list[Finding]:
    config = Config(perf=PerfConfig(gemm_bf16_tflops=670.0), report=ReportConfig(detail_max_nodes=detail_max_nodes))
    ctx = CheckContext(host="cluster", facts={"cluster": cluster_facts(gathered(case))}, config=config,
                       check_id=check_id)
    return list(get_check(check_id).fn(ctx))


def _verdicts(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.status.value, f.subject, f.code) for f in findings if f.status is not Status.PASS]


@pytest.mark.parametrize("check_id", CHECKS)
@pytest.mark.parametrize(("detail_max_nodes", "rolled"), [(NODES, False), (NODES - 1, True)])
def test_passes_are_rolled_up_above_detail_max_nodes_and_only_passes(check_id: str, detail_max_nodes: int,
                                                                     rolled: bool) -> None:
    small, got = judge(check_id, 10 * NODES), judge(check_id, detail_max_nodes)
    assert _verdicts(got) == _verdicts(small)  # failures and warnings: the same findings, in the same order
    passes = [f for f in got if f.status is Status.PASS]
    assert passes and all(bool(f.details.get("rolled_up")) is rolled for f in passes)
    expanded = sorted(f["subject"] for f in per_subject([f.to_dict() for f in passes]))
    each = [f.subject for f in small if f.status is Status.PASS]
    if check_id == "memory.bandwidth" and rolled:  # one rolled finding per direction, each naming every GPU
        assert expanded == sorted(each * 3)
    else:
        assert expanded == sorted(each)


def test_a_rolled_up_group_states_count_and_spread_and_keeps_each_value() -> None:
    (gemm_bf16, *_), = [[f for f in judge("compute.gemm", 1, "healthy") if f.details.get("dtype") == "bf16"]]
    values = gemm_bf16.details["subjects"]
    assert gemm_bf16.observed == {"count": 8, "min": 700.0, "median": 703.5, "max": 707.0}
    assert list(values) == [f"h{n}/gpu{g}" for n in range(NODES) for g in range(2)]
    assert gemm_bf16.summary == "8 subject(s) passed bf16 GEMM: min 700, median 703.5, max 707 TFLOP/s"


def _ctx(nodes: int, detail_max_nodes: int) -> tuple[CheckContext, Any]:
    facts = cluster_facts({"payloads": {}, "missing": {}, "topology": {"world_size": nodes, "num_nodes": nodes,
                                                                       "local_world_size": 1}})
    config = Config(report=ReportConfig(detail_max_nodes=detail_max_nodes))
    return CheckContext(host="cluster", facts={}, config=config, check_id="x.y"), facts


def test_a_batch_comes_out_where_it_was_added_on_a_small_cluster_and_once_per_group_at_scale() -> None:
    def made(i: int) -> Finding:
        return Finding("x.y", Status.PASS, f"s{i}", "ok", f"s{i} fine", observed=i)

    for rolled, detail in ((False, 2), (True, 1)):
        ctx, facts = _ctx(2, detail)
        passes = Passes(ctx, facts)
        first = list(passes.add(["s0", "s1"], made, Series("a", [1.0, 3.0], "A", "u"), Series("b", ["x", "y"], "B")))
        second = list(passes.add(["s2"], lambda i: made(2 + i), Series("a", [2.0], "A", "u")))
        rest = list(passes.findings())
        if not rolled:
            assert [f.subject for f in first + second] == ["s0", "s1", "s2"] and rest == []
        else:
            assert first == second == []
            a, b = rest
            assert (a.observed, a.details["subjects"]) == ({"count": 3, "min": 1.0, "median": 2.0, "max": 3.0},
                                                           {"s0": 1.0, "s1": 3.0, "s2": 2.0})
            assert b.observed == {"count": 2} and b.summary == "2 subject(s) passed B"


def test_a_finding_that_is_not_a_pass_is_never_rolled_up() -> None:
    ctx, facts = _ctx(3, 1)
    passes = Passes(ctx, facts)
    warn = Finding("x.y", Status.WARN, "s0", "hot", "s0 hot", observed=91.0)
    assert list(passes.add_finding(warn)) == [warn]
    assert list(passes.add_finding(Finding("x.y", Status.PASS, "s1", "ok", "s1 fine", observed=60.0))) == []
    (rolled,) = passes.findings()
    assert rolled.details["subjects"] == {"s1": 60.0}


@pytest.mark.parametrize("detail_max_nodes", [NODES, 1])
def test_a_rank_that_measured_nothing_is_judged_and_left_out_of_the_passes(detail_max_nodes: int) -> None:
    g = gathered("healthy")
    g["payloads"][3]["train"] = {"mode": "single", "steps": 0, "loss_start": None, "loss_end": None, "finite": False,
                                 "improved": False, "error": "CUDA error: out of memory"}
    config = Config(report=ReportConfig(detail_max_nodes=detail_max_nodes))
    ctx = CheckContext(host="cluster", facts={"cluster": cluster_facts(g)}, config=config, check_id="train.smoke")
    found = list(get_check("train.smoke").fn(ctx))
    assert _verdicts(found) == [("ERROR", "h1/gpu1", "train_error")]
    passed = sorted(f["subject"] for f in per_subject([f.to_dict() for f in found if f.status is Status.PASS]))
    assert passed == sorted(f"h{n}/gpu{k}" for n in range(NODES) for k in range(2) if (n, k) != (1, 1))
