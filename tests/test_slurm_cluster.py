"""gpu-preflight against a real slurmctld, three slurmd and munged (started here, in namespaces).

These fail, never skip, where Slurm or munge is missing: CI installs them. Each test
starts from three idle nodes (``clean``); the daemons live for the module (about 0.5 s to
start). What an operator would see is checked with Slurm's own tools (``sinfo -R``,
``scontrol show node``), not only through our parser.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.model import Finding, Status

from .conftest import H200_DUMP
from .slurm_cluster import HC_INTERVAL_S, SlurmCluster, cluster
from .slurm_reports import cluster_report, report, write

ECC = (("gpu.ecc.errors", Status.FAIL), ("system.memory", Status.PASS))


@pytest.fixture(scope="module")
def slurm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SlurmCluster]:
    with cluster(tmp_path_factory.mktemp("slurm")) as c:
        yield c


@pytest.fixture
def c(slurm: SlurmCluster) -> SlurmCluster:
    slurm.reset()
    return slurm


def healthcheck(c: SlurmCluster, node: str, result: Path, *extra: str) -> tuple[int, dict[str, Any]]:
    done = c.slurm_cmd("healthcheck", "--node", node, "--result-file", str(result), "--format", "json", *extra)
    assert done.stdout, done.stderr
    return done.returncode, json.loads(done.stdout)


def wait_past_drain(c: SlurmCluster, name: str) -> None:
    """A re-check must start after the drain (reason times have one-second resolution)."""
    drained_at = c.node(name).reason_time
    assert drained_at is not None
    while datetime.now(UTC) < drained_at + timedelta(seconds=1):
        time.sleep(0.05)


def test_failing_check_drains_with_prefixed_reason(c: SlurmCluster, tmp_path: Path) -> None:
    code, out = healthcheck(c, "node2", write(tmp_path / "r.json", report(findings=ECC)), "--apply")
    assert code == 2
    assert out["actions"][0]["action"] == "drain" and out["actions"][0]["done"] is True
    node = c.node("node2")
    assert node.state == "IDLE+DRAIN" and node.reason == "gpu-preflight: gpu.ecc.errors"
    assert c.sinfo_reasons() == {"node2": "gpu-preflight: gpu.ecc.errors"}
    assert "gpu-preflight: gpu.e" in c.run("sinfo", "-R").stdout  # the default, 20-column view
    assert "Reason=gpu-preflight: gpu.ecc.errors [root@" in c.run("scontrol", "show", "node", "node2").stdout
    # failing again with the same checks changes nothing (the reason time stays the drain time)
    code, out = healthcheck(c, "node2", tmp_path / "r.json", "--apply")
    assert (code, out["actions"][0]["action"]) == (2, "none")


def test_passing_recheck_resumes_only_after_the_drain(c: SlurmCluster, tmp_path: Path) -> None:
    result = tmp_path / "r.json"
    old_pass = report(when=datetime.now(UTC))  # taken before the failure below
    healthcheck(c, "node2", write(result, report(findings=ECC)), "--apply")
    assert c.node("node2").drained
    code, out = healthcheck(c, "node2", write(result, old_pass), "--apply")
    assert code == 0 and out["actions"][0]["action"] == "none" and "predates" in out["actions"][0]["why"]
    assert c.node("node2").drained
    wait_past_drain(c, "node2")
    code, out = healthcheck(c, "node2", write(result, report()), "--apply")
    assert (code, out["actions"][0]["action"], out["actions"][0]["done"]) == (0, "resume", True)
    assert not c.node("node2").drained
    # slurmctld re-validates an undrained node (NOT_RESPONDING until its next ping), then it is idle
    c.wait_for(lambda: c.node("node2").state == "IDLE", 10, "node2 back to IDLE")
    assert c.sinfo_reasons() == {}


def test_operator_drain_is_left_alone(c: SlurmCluster, tmp_path: Path) -> None:
    c.operator_drain("node2", "bad DIMM, ticket 42")
    before = c.node("node2")
    code, out = healthcheck(c, "node2", write(tmp_path / "r.json", report(findings=ECC)), "--apply")
    assert code == 2 and out["actions"][0]["action"] == "left-alone"
    time.sleep(1.1)
    code, out = healthcheck(c, "node2", write(tmp_path / "r.json", report()), "--apply")
    assert code == 0 and out["actions"][0]["action"] == "none"
    assert c.node("node2") == before  # same state, reason and reason time: untouched
    # a reason that merely looks like ours is not ours under another prefix
    c.operator_drain("node3", "gpu-preflight: held for RMA")
    code, out = healthcheck(c, "node3", tmp_path / "r.json", "--apply", "--reason-prefix", "site-hc:")
    assert out["actions"][0]["action"] == "none" and c.node("node3").reason == "gpu-preflight: held for RMA"


def test_circuit_breaker_holds(c: SlurmCluster, tmp_path: Path) -> None:
    failing = write(tmp_path / "r.json", report(findings=ECC))
    c.operator_drain("node1", "maintenance")
    code, out = healthcheck(c, "node2", failing, "--apply", "--max-drain-fraction", "0.34")  # cap 1 of 3
    action = out["actions"][0]
    assert code == 2 and action["action"] == "refused" and action["command"] is None
    assert "1 of 3 nodes already drained, down or failed; the cap is 1" in action["why"]
    assert not c.node("node2").drained
    code, out = healthcheck(c, "node2", failing, "--apply", "--max-drain-fraction", "0.67")  # cap 2
    assert out["actions"][0]["action"] == "drain" and c.node("node2").drained
    code, out = healthcheck(c, "node3", failing, "--apply", "--max-drain-fraction", "0.67")
    assert out["actions"][0]["action"] == "refused" and not c.node("node3").drained


def test_drain_report_applies_a_cluster_report_through_one_breaker(c: SlurmCluster, tmp_path: Path) -> None:
    link = Finding("cluster.node_link", Status.FAIL, "node3", "slow", "node3 link at 2 GB/s")
    group = Finding("nccl.collectives", Status.FAIL, "group 0-2", "floor", "all_reduce below floor")
    data = cluster_report({"node1": ECC, "node2": ECC, "node3": (("system.memory", Status.PASS),),
                           "gone": ECC}, cluster_findings=[link, group])
    path = write(tmp_path / "cluster.json", data)
    dry = c.slurm_cmd("drain-report", str(path), "--max-drain-fraction", "0.67")
    assert dry.returncode == 2, dry.stderr
    assert "scontrol update NodeName=node1 State=DRAIN 'Reason=gpu-preflight: gpu.ecc.errors'" in dry.stdout
    assert "[dry run, not run]" in dry.stdout and not any(c.node(n).drained for n in ("node1", "node2", "node3"))
    done = c.slurm_cmd("drain-report", str(path), "--max-drain-fraction", "0.67", "--apply", "--format", "json")
    out = json.loads(done.stdout)
    kinds = {a["node"]: a["action"] for a in out["actions"]}
    assert kinds == {"node1": "drain", "node2": "drain", "node3": "refused", "gone": "unmapped"}
    assert done.returncode == 2
    assert "not attributed to one node (nccl.collectives)" in out["notes"][0]
    assert c.sinfo_reasons() == {"node1": "gpu-preflight: gpu.ecc.errors", "node2": "gpu-preflight: gpu.ecc.errors"}


def test_dry_run_changes_nothing(c: SlurmCluster, tmp_path: Path) -> None:
    before = {n: c.node(n) for n in ("node1", "node2", "node3")}
    done = c.slurm_cmd("healthcheck", "--node", "node2", "--result-file",
                       str(write(tmp_path / "r.json", report(findings=ECC))))
    assert done.returncode == 2
    assert "scontrol update NodeName=node2 State=DRAIN 'Reason=gpu-preflight: gpu.ecc.errors'" in done.stdout
    assert "[dry run, not run]" in done.stdout
    assert {n: c.node(n) for n in before} == before and c.sinfo_reasons() == {}


def test_missing_result_ignored_by_default_or_drained_by_config(c: SlurmCluster, tmp_path: Path) -> None:
    code, out = healthcheck(c, "node2", tmp_path / "none.json", "--apply")
    assert code == 3 and out["actions"][0]["action"] == "none" and "no result at" in out["actions"][0]["why"]
    assert not c.node("node2").drained
    code, out = healthcheck(c, "node2", tmp_path / "none.json", "--apply", "--stale-result", "drain")
    assert out["actions"][0]["action"] == "drain" and c.node("node2").reason == "gpu-preflight: no fresh result"
    wait_past_drain(c, "node2")
    code, out = healthcheck(c, "node2", write(tmp_path / "none.json", report()), "--apply")
    assert out["actions"][0]["action"] == "resume" and not c.node("node2").drained


def test_unknown_node_is_an_error_not_a_guess(c: SlurmCluster, tmp_path: Path) -> None:
    code, out = healthcheck(c, "node9", write(tmp_path / "r.json", report(findings=ECC)), "--apply")
    assert code == 3 and "cannot act" in out["notes"][0] and "node9" in out["notes"][0]


def test_healthcheck_program_drains_and_resumes_within_the_interval(c: SlurmCluster) -> None:
    """slurmd itself runs the HealthCheckProgram (HealthCheckInterval=3) on every node."""
    (c.root / "hc-enabled").touch()
    write(c.results / "node3.json", report(findings=ECC))
    took = c.wait_for(lambda: c.node("node3").drained, HC_INTERVAL_S + 3, "slurmd's health check to drain node3")
    assert took <= HC_INTERVAL_S + 2  # the interval, plus the program's own run on a loaded 2-core VM
    assert c.node("node3").reason == "gpu-preflight: gpu.ecc.errors"
    assert not c.node("node1").drained and not c.node("node2").drained  # no results there: left alone
    wait_past_drain(c, "node3")
    write(c.results / "node3.json", report())
    c.wait_for(lambda: not c.node("node3").drained, HC_INTERVAL_S + 3, "the health check to resume node3")
    log = (c.root / "hc-node3.log").read_text()
    assert "node3: FAIL (gpu.ecc.errors) -> drain" in log and "-> resume" in log


def test_healthcheck_answers_fast_without_running_checks(c: SlurmCluster, tmp_path: Path) -> None:
    result = write(tmp_path / "r.json", report())
    timings = []
    for _ in range(3):
        start = time.monotonic()
        done = c.slurm_cmd("healthcheck", "--node", "node1", "--result-file", str(result), "--apply")
        timings.append(time.monotonic() - start)
        assert done.returncode == 0, done.stderr
    print(f"healthcheck wall time (interpreter start included): {min(timings):.3f} s best of 3")
    assert min(timings) < 2.0
    trace = c.run(sys.executable, "-X", "importtime", "-m", "gpu_preflight.cli.slurm_cmd",
                  "healthcheck", "--node", "node1", "--result-file", str(result))
    assert "gpu_preflight.engine" not in trace.stderr and "gpu_preflight.probes" not in trace.stderr


def squeue_reason(c: SlurmCluster, job: str) -> str:
    return c.run("squeue", "-h", "-j", job, "-o", "%r").stdout.strip()


def test_prolog_failure_drains_with_our_reason_and_requeues(c: SlurmCluster) -> None:
    """The prolog runs the real node checks (an H200 snapshot short of the GPUs we expect)."""
    failing = f"--replay {H200_DUMP} --expect-gpus 16 --check gpu.* --max-drain-fraction 0.67"
    (c.root / "prolog-enabled").write_text(failing)
    done = c.run("srun", "-w", "node2", "-N1", "-t", "1", "true", check=False, timeout=90)
    assert done.returncode != 0 and "Prolog failure on node node2" in done.stderr
    node = c.node("node2")
    # ours, not "Prolog error"
    assert node.drained and node.reason == "gpu-preflight: action=reboot_node gpu.inventory.count"
    saved = json.loads((c.results / "node2.json").read_text())
    assert saved["cluster_summary"]["overall_status"] == "FAIL"  # the result file the health check reads
    assert "node2: FAIL (gpu.inventory.count) -> drain" in (c.root / "prolog-node2.log").read_text()
    job = c.run("sbatch", "--parsable", "-w", "node1", "-o", "/dev/null", "--wrap", "true").stdout.strip()
    c.wait_for(lambda: squeue_reason(c, job) == "launch failed requeued held", 30, "the batch job to be requeued")
    assert c.node("node1").reason == "gpu-preflight: action=reboot_node gpu.inventory.count"


def test_prolog_breaker_lets_the_job_run_and_passing_prolog_is_silent(c: SlurmCluster) -> None:
    c.operator_drain("node1", "maintenance")  # 1 of 3 out: the default cap (1 node)
    (c.root / "prolog-enabled").write_text(f"--replay {H200_DUMP} --expect-gpus 16 --check gpu.*")
    done = c.run("srun", "-w", "node2", "-N1", "-t", "1", "true", check=False, timeout=90)
    assert done.returncode == 0, done.stderr
    assert not c.node("node2").drained
    assert "circuit breaker" in (c.root / "prolog-node2.log").read_text()
    (c.root / "prolog-enabled").write_text(f"--replay {H200_DUMP} --expect-gpus 8 --check gpu.inventory.*")
    ok = c.run("srun", "-w", "node3", "-N1", "-t", "1", "hostname", check=False, timeout=90)
    assert ok.returncode == 0 and ok.stdout.strip() == socket.gethostname(), ok.stderr
    assert not c.node("node3").drained


def test_epilog_failure_drains_after_the_job(c: SlurmCluster) -> None:
    (c.root / "epilog-enabled").write_text(f"--replay {H200_DUMP} --expect-gpus 16 --check gpu.*")
    done = c.run("srun", "-w", "node3", "-N1", "-t", "1", "echo", "ran", check=False, timeout=90)
    assert done.returncode == 0 and "ran" in done.stdout  # the job itself was not affected
    c.wait_for(lambda: c.node("node3").drained, 30, "the epilog to drain node3")
    assert c.node("node3").reason == "gpu-preflight: action=reboot_node gpu.inventory.count"
