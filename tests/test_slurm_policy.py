"""Slurm drain policy without daemons: scontrol parsing, verdicts, planning, the circuit breaker.

The node tables are real ``scontrol show node`` output recorded from Slurm 22.05.8 (the
test cluster in tests/slurm_cluster.py); the behaviour against live daemons is in
test_slurm_cluster.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_preflight.config.slurm_schema import SlurmConfig, slurm_config
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.integrations.slurm import Breaker, Kind, drain_reason, gate, plan_node
from gpu_preflight.integrations.slurm_ctl import Scontrol, ScontrolError
from gpu_preflight.integrations.slurm_nodes import SlurmNode, parse_nodes
from gpu_preflight.integrations.slurm_result import Verdict, judge, node_results, read_result
from gpu_preflight.model import Finding, Status

from .slurm_reports import cluster_report, listed, report, write

FIXTURES = Path(__file__).parent / "fixtures" / "slurm"
CFG = SlurmConfig()
NOW = datetime(2026, 1, 10, 12, 0, tzinfo=UTC)


def node(name: str = "n1", state: str = "IDLE", reason: str = "", when: datetime | None = None) -> SlurmNode:
    base, *flags = state.split("+")
    return SlurmNode(name, base, frozenset(flags), reason, "root" if reason else None, when)


def fail(*checks: str, when: datetime = NOW) -> Verdict:
    return Verdict("fail", checks, f"FAIL: {', '.join(checks)}", when)


# --- scontrol show node --------------------------------------------------------------------------

def test_parses_recorded_node_table() -> None:
    nodes = {n.name: n for n in parse_nodes((FIXTURES / "show_node_22.05.8.txt").read_text())}
    assert sorted(nodes) == ["node1", "node2", "node3"]
    ours, operator, down = nodes["node1"], nodes["node2"], nodes["node3"]
    assert (ours.base_state, ours.flags, ours.reason) == ("IDLE", {"DRAIN"}, "gpu-preflight: gpu.ecc.errors, gpu.xid")
    assert ours.reason_user == "root"
    assert ours.reason_time == datetime(2026, 11, 26, 0, 6, 48).astimezone()
    assert (ours.hostname, ours.address) == ("node1", "10.250.0.1")
    assert ours.drained_by("gpu-preflight:") and not operator.drained_by("gpu-preflight:")
    assert operator.reason == "hardware ticket 123" and operator.drained and not operator.down
    assert down.state == "DOWN" and down.down and not down.drained and down.reason == "power supply"
    assert all(n.out_of_service for n in nodes.values())


def test_parses_draining_node_with_a_running_job() -> None:
    (n,) = parse_nodes((FIXTURES / "show_node_draining_22.05.8.txt").read_text())
    assert n.state == "ALLOCATED+DRAIN" and n.drained and n.drained_by("gpu-preflight:")


def test_old_style_star_and_multiline_reason_and_no_reason_time() -> None:
    text = ("NodeName=a State=DOWN*+DRAIN\n   Reason=first line [slurm@2026-01-01T10:00:00]\n"
            "          second line\n   Comment=free text with Reason=inside\n\n"
            "NodeName=b State=IDLE\n   Reason=no time\n")
    a, b = parse_nodes(text)
    assert a.base_state == "DOWN" and a.flags == {"DRAIN", "NOT_RESPONDING"}
    assert a.reason == "first line\nsecond line" and a.reason_user == "slurm"
    assert (b.reason, b.reason_time) == ("no time", None)


def test_future_and_powered_down_nodes_do_not_count_as_out() -> None:
    assert not node(state="FUTURE").in_cluster
    assert not node(state="IDLE+CLOUD+POWERED_DOWN").out_of_service
    assert node(state="IDLE+NOT_RESPONDING").out_of_service
    assert node(state="MIXED+DRAIN").out_of_service and not node(state="MIXED").out_of_service


# --- verdicts from reports -----------------------------------------------------------------------

def test_judge_orders_fail_before_error_and_honours_ignores_and_drain_on() -> None:
    findings = [listed("system.services", "ERROR"), listed("gpu.xid", "FAIL"), listed("gpu.thermal", "WARN"),
                listed("system.disk", "PASS")]
    assert judge(findings, CFG, NOW).checks == ("gpu.xid", "system.services")
    assert judge(findings, SlurmConfig(ignore_checks=["system.*"]), NOW).checks == ("gpu.xid",)
    assert judge(findings, SlurmConfig(drain_on="warn"), NOW).checks == ("gpu.xid", "system.services",
                                                                         "gpu.thermal")
    warn_only = [listed("gpu.thermal", "WARN")]
    assert judge(warn_only, CFG, NOW).state == "pass"
    assert judge([listed("gpu.nvml", "SKIP")], CFG, NOW).state == "unknown"


def test_read_result_missing_corrupt_stale_future_and_fresh(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    assert "no result" in read_result(path, CFG, NOW, {"n1"}).detail
    path.write_text("{not json")
    assert read_result(path, CFG, NOW, {"n1"}).state == "unknown"
    write(path, {"hello": 1})
    assert "not a gpu-preflight report" in read_result(path, CFG, NOW, {"n1"}).detail
    write(path, report(when=NOW - timedelta(seconds=3601)))
    stale = read_result(path, CFG, NOW, {"n1"})
    assert (stale.state, stale.detail) == ("unknown", "the result is 3601 s old (limit 3600 s)")
    write(path, report(when=NOW - timedelta(seconds=3599)))
    assert read_result(path, CFG, NOW, {"n1"}).state == "pass"
    write(path, report(when=NOW + timedelta(minutes=6)))
    assert "future" in read_result(path, CFG, NOW, {"n1"}).detail
    write(path, report(findings=(("gpu.ecc.errors", Status.FAIL),), when=NOW))
    assert read_result(path, CFG, NOW, {"n1"}).checks == ("gpu.ecc.errors",)


def test_cluster_report_attributes_findings_to_nodes_by_subject(tmp_path: Path) -> None:
    slow = Finding("cluster.node_link", Status.FAIL, "node2", "slow", "slow link")
    rank = Finding("compute.gemm", Status.ERROR, "node3/rank2", "err", "GEMM failed")
    group = Finding("nccl.collectives", Status.FAIL, "group 0-2", "floor", "below floor")
    data = cluster_report({"node1": (("gpu.xid", Status.PASS),), "node2": (("gpu.xid", Status.PASS),),
                           "node3": (("gpu.xid", Status.PASS),)}, when=NOW, cluster_findings=[slow, rank, group])
    nodes, unattributed = node_results(ClusterReport.of(data))
    verdicts = {n.label: judge(n.findings, CFG, NOW) for n in nodes}
    assert verdicts["node1"].state == "pass"
    assert verdicts["node2"].checks == ("cluster.node_link",)
    assert verdicts["node3"].checks == ("compute.gemm",)
    assert [f.check_id for f in unattributed] == ["nccl.collectives"]
    path = write(tmp_path / "r.json", data)
    assert read_result(path, CFG, NOW, {"node2"}).checks == ("cluster.node_link",)
    assert "no section" in read_result(path, CFG, NOW, {"node9"}).detail


# --- planning ------------------------------------------------------------------------------------

def test_drain_reason_is_prefixed_stable_and_bounded() -> None:
    assert drain_reason(fail("gpu.xid", "gpu.ecc.errors"), "gpu-preflight:") == \
        "gpu-preflight: gpu.xid, gpu.ecc.errors"
    long = drain_reason(fail(*[f"gpu.check_{i:02d}" for i in range(40)]), "gpu-preflight:")
    assert len(long) <= 200 and long.endswith("more") and long.startswith("gpu-preflight: gpu.check_00")
    assert drain_reason(Verdict("unknown", (), "stale"), "p:") == "p: no fresh result"


def test_plan_decision_table() -> None:
    ours = "gpu-preflight: gpu.xid"
    drained_at = NOW - timedelta(minutes=5)
    assert plan_node(node(), fail("gpu.xid"), CFG).kind is Kind.DRAIN
    assert plan_node(node(), fail("gpu.xid"), CFG).args == (
        "update", "NodeName=n1", "State=DRAIN", "Reason=gpu-preflight: gpu.xid")
    assert plan_node(node(state="IDLE+DRAIN", reason=ours), fail("gpu.xid"), CFG).kind is Kind.NONE
    assert plan_node(node(state="IDLE+DRAIN", reason=ours), fail("gpu.pcie"), CFG).kind is Kind.REASON
    operator = node(state="IDLE+DRAIN", reason="bad DIMM, ticket 42", when=drained_at)
    assert plan_node(operator, fail("gpu.xid"), CFG).kind is Kind.LEFT_ALONE
    assert plan_node(operator, Verdict("pass", timestamp=NOW), CFG).kind is Kind.NONE
    assert plan_node(node(state="DOWN", reason="Not responding"), fail("x"), CFG).kind is Kind.LEFT_ALONE
    mine = node(state="IDLE+DRAIN", reason=ours, when=drained_at)
    resume = plan_node(mine, Verdict("pass", timestamp=NOW), CFG)
    assert (resume.kind, resume.args) == (Kind.RESUME, ("update", "NodeName=n1", "State=UNDRAIN"))
    assert plan_node(mine, Verdict("pass", timestamp=NOW), SlurmConfig(resume_state="RESUME")).args[-1] == \
        "State=RESUME"
    before = plan_node(mine, Verdict("pass", timestamp=drained_at), CFG)
    assert before.kind is Kind.NONE and "predates" in before.why
    assert plan_node(mine, Verdict("pass", timestamp=drained_at + timedelta(seconds=1)), CFG).kind is Kind.RESUME
    assert plan_node(mine, Verdict("unknown", (), "stale"), CFG).kind is Kind.NONE  # never resumes
    assert plan_node(node(), Verdict("unknown", (), "stale"), CFG).kind is Kind.NONE
    assert plan_node(node(), Verdict("unknown", (), "stale"), CFG, drain_unknown=True).kind is Kind.DRAIN


def test_custom_prefix_does_not_claim_default_prefixed_drains() -> None:
    other = node(state="IDLE+DRAIN", reason="gpu-preflight: held by hand", when=NOW - timedelta(hours=1))
    cfg = SlurmConfig(reason_prefix="site-hc:")
    assert plan_node(other, Verdict("pass", timestamp=NOW), cfg).kind is Kind.NONE
    assert plan_node(other, fail("gpu.xid"), cfg).kind is Kind.LEFT_ALONE


# --- circuit breaker -----------------------------------------------------------------------------

@pytest.mark.parametrize(("total", "fraction", "minimum", "cap"), [
    (10, 0.2, 1, 2), (10, 0.3, 1, 3),  # 0.3 * 10 is 2.9999999999999996 in floating point
    (8, 0.1, 1, 1), (8, 0.1, 0, 0), (100, 0.05, 1, 5), (3, 0.34, 1, 1), (3, 0.67, 1, 2), (3, 1.0, 1, 3)])
def test_breaker_cap(total: int, fraction: float, minimum: int, cap: int) -> None:
    nodes = [node(f"n{i}") for i in range(total)]
    assert Breaker(nodes, SlurmConfig(max_drain_fraction=fraction, min_drain_nodes=minimum)).cap == cap


def test_breaker_counts_everyone_s_drains_and_admits_up_to_the_cap() -> None:
    nodes = [node("a", "IDLE+DRAIN", "operator"), node("b", "DOWN", "dead"), *(node(f"n{i}") for i in range(8)),
             node("f", "FUTURE")]
    breaker = Breaker(nodes, SlurmConfig(max_drain_fraction=0.3))  # 10 in the cluster, cap 3, 2 out already
    assert breaker.total == 10
    assert breaker.admit("a") is None  # already out: no change in the count
    assert breaker.admit("n0") is None
    refused = breaker.admit("n1")
    assert refused is not None and "3 of 10 nodes" in refused and "cap is 3" in refused


def test_gate_drains_failures_first_then_by_name() -> None:
    nodes = [node(f"n{i}") for i in range(10)]
    actions = [plan_node(nodes[3], Verdict("unknown", (), "stale"), CFG, drain_unknown=True),
               plan_node(nodes[2], fail("gpu.xid"), CFG), plan_node(nodes[1], fail("gpu.xid"), CFG)]
    gated = {a.node: a.kind for a in gate(actions, nodes, SlurmConfig(max_drain_fraction=0.2))}
    assert gated == {"n1": Kind.DRAIN, "n2": Kind.DRAIN, "n3": Kind.REFUSED}


# --- config and scontrol errors ------------------------------------------------------------------

def test_config_problems_and_unregistered_section_defaults() -> None:
    assert SlurmConfig().problems() == []
    bad = SlurmConfig(reason_prefix=" ", max_drain_fraction=1.5, min_drain_nodes=-1, command_timeout_s=0)
    assert len(bad.problems()) == 4
    assert slurm_config(object()) == SlurmConfig()


def test_scontrol_errors_say_why(tmp_path: Path) -> None:
    with pytest.raises(ScontrolError, match="not found: install slurm-client"):
        Scontrol(str(tmp_path / "no-scontrol")).nodes()
    slow = tmp_path / "slow"
    slow.write_text("#!/bin/sh\nexec sleep 5\n")
    slow.chmod(0o755)
    with pytest.raises(ScontrolError, match=r"did not answer within 0.2 s"):
        Scontrol(str(slow), timeout_s=0.2).nodes()
    refusing = tmp_path / "refusing"
    refusing.write_text("#!/bin/sh\necho 'slurm_update error: Invalid node name specified' >&2\nexit 1\n")
    refusing.chmod(0o755)
    with pytest.raises(ScontrolError, match=r"exit 1.*Invalid node name specified"):
        Scontrol(str(refusing)).update(["update", "NodeName=x", "State=UNDRAIN"])


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_preflight.cli.slurm_cmd", *args], capture_output=True,
                          text=True, timeout=120, check=False)


def test_cli_usage_errors(tmp_path: Path) -> None:
    bad = _cli("healthcheck", "--node", "n1", "--max-drain-fraction", "2")
    assert bad.returncode == 3 and "--max-drain-fraction: must be a finite number in [0, 1], got '2'" in bad.stderr
    # an operator's typo in the prolog must not stop every job (Slurm would drain each node)
    prolog = _cli("prolog", "--node", "n1", "--check", "no.such.check")
    assert prolog.returncode == 0 and "no check matches 'no.such.check'" in prolog.stderr
    missing = _cli("drain-report", str(tmp_path / "none.json"))
    assert missing.returncode == 3 and "no such file" in missing.stderr


def test_healthcheck_without_scontrol_reports_the_verdict_and_why(tmp_path: Path) -> None:
    """No scontrol: exit 3 with the verdict and the reason, nothing else attempted."""
    result = write(tmp_path / "r.json", report(findings=(("gpu.xid", Status.FAIL),)))
    env_run = subprocess.run(
        [sys.executable, "-m", "gpu_preflight.cli.slurm_cmd", "healthcheck", "--node", "n1", "--result-file",
         str(result), "--format", "json"], capture_output=True, text=True, timeout=60, check=False,
        env={"PATH": str(tmp_path)})  # no scontrol on PATH
    out = json.loads(env_run.stdout)
    assert env_run.returncode == 3
    assert "fail: FAIL: gpu.xid; cannot act: scontrol not found" in out["notes"][0]


def test_stale_result_keeps_the_known_cause_of_our_drain() -> None:
    mine = node(state="IDLE+DRAIN", reason="gpu-preflight: gpu.xid", when=NOW - timedelta(minutes=5))
    action = plan_node(mine, Verdict("unknown", (), "stale"), CFG, drain_unknown=True)
    assert action.kind is Kind.NONE and "gpu-preflight: gpu.xid" in action.why
