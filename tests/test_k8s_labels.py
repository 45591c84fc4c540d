"""Kubernetes labels/taints planned from real reports; the dry run's kubectl commands.

No cluster here: the plan is pure data, and the commands it prints are checked argv by argv.
The API path (official client against an API server) is in test_k8s_apply.py.
"""

from __future__ import annotations

import argparse
import json
import shlex
import threading
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cli import k8s_cmd
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.integrations.k8s import (
    ACTION_LABEL,
    HEALTH_LABEL,
    LAST_RUN_LABEL,
    SUMMARY_ANNOTATION,
    TAINT_KEY,
    LabelPlan,
    ReportSourceError,
    health_of,
    hold_if_over,
    kubectl_commands,
    label_time,
    load_report,
    plan,
    render_commands,
)

from .platform_reports import cluster_report
from .slurm_reports import listed


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="gpu-preflight")
    k8s_cmd.add_commands(p.add_subparsers(dest="command", required=True))
    return p


def cli(argv: list[str]) -> int:
    return k8s_cmd.run(parser().parse_args(["k8s", *argv]))


@pytest.fixture(scope="module")
def two_nodes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return cluster_report(tmp_path_factory.mktemp("two"), {"gpu-a": False, "gpu-b": True})


def by_node(out: LabelPlan) -> dict[str, Any]:
    return {a.node: a for a in out.actions}


def test_failing_node_is_labelled_and_tainted_passing_node_is_cleared(two_nodes: dict[str, Any]) -> None:
    actions = by_node(plan(ClusterReport.of(two_nodes)))
    assert actions["gpu-a"].labels[HEALTH_LABEL] == "pass"
    assert actions["gpu-a"].taint is None
    assert actions["gpu-b"].labels[HEALTH_LABEL] == "fail"
    assert actions["gpu-b"].taint is not None and actions["gpu-b"].taint.spec() == f"{TAINT_KEY}=fail:NoSchedule"
    assert "FAIL gpu.pcie" in actions["gpu-b"].annotations[SUMMARY_ANNOTATION]
    assert actions["gpu-a"].labels[LAST_RUN_LABEL] == label_time(two_nodes["timestamp"])


@pytest.mark.parametrize(("statuses", "health"), [
    (["PASS", "SKIP"], "pass"), (["PASS", "WARN"], "warn"), (["WARN", "ERROR"], "error"),
    (["ERROR", "FAIL", "PASS"], "fail"), (["SKIP", "SKIP"], "unknown"), ([], "unknown"),
])
def test_health_is_the_worst_status_and_nothing_checked_is_unknown(statuses: list[str], health: str) -> None:
    assert health_of(listed("gpu.xid", s) for s in statuses) == health


def test_label_time_is_a_valid_label_value() -> None:
    assert label_time("2025-12-03T17:54:41.475022+00:00") == "20251203T175441Z"
    assert label_time("2025-12-03T18:54:41+01:00") == "20251203T175441Z"
    assert label_time("garbage", now=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)) == "20260102T030405Z"


def test_error_taints_by_default_and_warn_only_when_asked(two_nodes: dict[str, Any]) -> None:
    report = json.loads(json.dumps(two_nodes))
    for f in report["findings"]:
        if f["status"] == "FAIL":
            f["status"] = "WARN"
    assert by_node(plan(ClusterReport.of(report)))["gpu-b"].taint is None
    assert by_node(plan(ClusterReport.of(report), taint_on=["warn"]))["gpu-b"].taint is not None
    with pytest.raises(ValueError, match="cannot taint on"):
        plan(ClusterReport.of(report), taint_on=["broken"])
    with pytest.raises(ValueError, match="effect"):
        plan(ClusterReport.of(report), effect="NoWay")


def test_node_override_only_for_single_node_reports(tmp_path: Path, two_nodes: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="names one node"):
        plan(ClusterReport.of(two_nodes), node="k8s-node-1")
    single = cluster_report(tmp_path, {"pod-xyz": True})
    assert [a.node for a in plan(ClusterReport.of(single), node="k8s-node-1").actions] == ["k8s-node-1"]


def test_circuit_breaker_holds_every_new_taint_but_keeps_labels(tmp_path: Path) -> None:
    report = cluster_report(tmp_path, {"n1": True, "n2": True, "n3": False, "n4": False})
    out = plan(ClusterReport.of(report))
    hold_if_over(out, total_nodes=4, already_tainted=set(), fraction=0.5)
    assert not out.tripped  # 2 of 4 is the limit
    hold_if_over(out, total_nodes=4, already_tainted={"n4"}, fraction=0.5)
    assert not out.tripped  # n4 passes now: its taint goes, so 2 remain
    out = plan(ClusterReport.of(report))
    hold_if_over(out, total_nodes=10, already_tainted={"x1", "x2", "x3", "x4"}, fraction=0.5)
    assert out.held == ["n1", "n2"]
    assert all(a.taint is None for a in out.actions)
    assert {a.labels[HEALTH_LABEL] for a in out.actions if a.node in ("n1", "n2")} == {"fail"}
    assert "circuit breaker" in out.notes[-1]


def test_single_failing_node_may_always_be_tainted(tmp_path: Path) -> None:
    out = plan(ClusterReport.of(cluster_report(tmp_path, {"solo": True})))
    hold_if_over(out, total_nodes=1, already_tainted=set(), fraction=0.1)
    assert not out.tripped and out.actions[0].taint is not None


def test_kubectl_commands_are_exact_and_quoted(two_nodes: dict[str, Any]) -> None:
    cmds = kubectl_commands(plan(ClusterReport.of(two_nodes)))
    when = label_time(two_nodes["timestamp"])
    assert cmds[0] == ["kubectl", "label", "node", "gpu-a", "--overwrite", f"{HEALTH_LABEL}=pass",
                       f"{LAST_RUN_LABEL}={when}", f"{ACTION_LABEL}=none"]  # written every run: none never lingers
    assert cmds[2] == ["kubectl", "taint", "node", "gpu-a", f"{TAINT_KEY}-"]
    assert cmds[5] == ["kubectl", "taint", "node", "gpu-b", "--overwrite", f"{TAINT_KEY}=fail:NoSchedule"]
    text = render_commands(plan(ClusterReport.of(two_nodes)))
    lines = text.splitlines()
    assert lines[2].endswith("2>/dev/null || true")
    annotate = shlex.split(lines[4])  # the summary has spaces: it must survive the shell intact
    assert annotate[:5] == ["kubectl", "annotate", "node", "gpu-b", "--overwrite"]
    assert annotate[5].startswith(f"{SUMMARY_ANNOTATION}=fail at {when}: FAIL gpu.pcie")


def test_cli_dry_run_prints_commands_and_changes_nothing(tmp_path: Path, two_nodes: dict[str, Any],
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(two_nodes))
    assert cli(["label", str(path)]) == 0
    out, err = capsys.readouterr()
    assert out == render_commands(plan(ClusterReport.of(two_nodes)))
    assert "dry run: nothing changed" in err


def test_cli_dry_run_breaker_exit_code(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(cluster_report(tmp_path, {"n1": True, "n2": True, "n3": True, "n4": False})))
    assert cli(["label", str(path)]) == 1
    out, err = capsys.readouterr()
    assert "kubectl taint node n1 --overwrite" not in out and "circuit breaker" in err
    assert cli(["label", str(path), "--max-taint-fraction", "1"]) == 0


@pytest.mark.parametrize("argv", [["label", "/nonexistent/report.json"],
                                  ["label", "REPORT", "--max-taint-fraction", "0"],
                                  ["label", "REPORT", "--taint-on", "bogus"],
                                  ["label", "REPORT", "--taint-effect", "NoWay"]])
def test_cli_usage_errors(tmp_path: Path, two_nodes: dict[str, Any], argv: list[str]) -> None:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(two_nodes))
    assert cli([a.replace("REPORT", str(path)) for a in argv]) == 3


def test_parser_costs_no_import() -> None:
    """Every gpu-preflight command builds this parser; it must not import the integration."""
    import subprocess
    import sys

    code = ("import sys, argparse; from gpu_preflight.cli import k8s_cmd; "
            "k8s_cmd.add_commands(argparse.ArgumentParser().add_subparsers()); "
            "print(sorted(m for m in sys.modules if m.startswith('gpu_preflight.integrations')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_not_a_report_is_refused(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"hello": 1}')
    with pytest.raises(ReportSourceError, match="not a gpu-preflight report"):
        load_report(str(bad))


class _StatusHandler(BaseHTTPRequestHandler):
    body = b""

    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(self.body)

    def log_message(self, *args: Any) -> None:
        pass


def test_status_url_of_the_health_server_is_a_source(tmp_path: Path) -> None:
    """The DaemonSet's labeller reads ``/status``; its report sits under ``"report"``."""
    report = cluster_report(tmp_path, {"gpu-z": True})
    handler = type("H", (_StatusHandler,), {"body": json.dumps({"node": {"ready": False}, "report": report}).encode()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        loaded = load_report(f"http://127.0.0.1:{server.server_address[1]}/status")
        assert loaded.to_dict()["findings"] == report["findings"]
        handler.body = b'{"node": {"ready": false}, "report": null}'
        with pytest.raises(ReportSourceError, match="no report yet"):
            load_report(f"http://127.0.0.1:{server.server_address[1]}/status")
    finally:
        server.shutdown()
        server.server_close()
