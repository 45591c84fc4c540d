"""``k8s label --apply`` through the official kubernetes client against a small API server.

The client is the real one (the ``k8s`` extra; CI installs it, so its absence fails this
module). The server speaks the slice of the core/v1 nodes API the labeller uses — list,
get, and PATCH with RFC 7386 merge semantics and ``resourceVersion`` optimistic locking
(409 Conflict) — so the tests see the bytes the client sends, and a concurrent edit of a
node (another controller adding a taint) can be staged between our read and our patch.
"""

from __future__ import annotations

import copy
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.integrations.k8s import HEALTH_LABEL, SUMMARY_ANNOTATION, TAINT_KEY, plan
from gpu_preflight.integrations.k8s_apply import MERGE_PATCH, apply

from .platform_reports import cluster_report
from .test_k8s_labels import cli

FOREIGN = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386."""
    if not isinstance(patch, dict):
        return patch
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class FakeApiServer:
    """Nodes in memory; records every request; ``on_get`` may change a node once its copy was read
    (the edit lands before the answer goes out, so the reader's copy is stale whatever the load)."""

    def __init__(self, nodes: dict[str, list[dict[str, str]]]) -> None:
        self.nodes = {name: {"apiVersion": "v1", "kind": "Node",
                             "metadata": {"name": name, "resourceVersion": "1", "labels": {"site": "a"}},
                             "spec": {"taints": copy.deepcopy(taints)}} for name, taints in nodes.items()}
        self.requests: list[tuple[str, str, str | None, Any]] = []
        self.on_get: Callable[[str], None] | None = None
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outer.requests.append(("GET", self.path, None, None))
                if self.path.split("?")[0] == "/api/v1/nodes":
                    with outer.lock:
                        self._send(200, {"apiVersion": "v1", "kind": "NodeList", "metadata": {},
                                         "items": list(outer.nodes.values())})
                    return
                name = self.path.split("?")[0].rsplit("/", 1)[-1]
                with outer.lock:
                    node = copy.deepcopy(outer.nodes.get(name))
                if node is None:
                    self._send(404, {"kind": "Status", "apiVersion": "v1", "status": "Failure",
                                     "reason": "NotFound", "code": 404})
                    return
                if outer.on_get:  # before the answer: the client must not patch before the edit lands
                    outer.on_get(name)
                self._send(200, node)

            def do_PATCH(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                outer.requests.append(("PATCH", self.path, self.headers["Content-Type"], body))
                name = self.path.split("?")[0].rsplit("/", 1)[-1]
                with outer.lock:
                    node = outer.nodes.get(name)
                    if node is None:
                        self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                        return
                    wanted = body.get("metadata", {}).pop("resourceVersion", None)
                    if wanted is not None and wanted != node["metadata"]["resourceVersion"]:
                        self._send(409, {"kind": "Status", "code": 409, "reason": "Conflict"})
                        return
                    node = merge_patch(node, body)
                    node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)
                    outer.nodes[name] = node
                self._send(200, node)

            def _send(self, code: int, data: Any) -> None:
                raw = json.dumps(data).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def api(self) -> Any:
        cfg = kubernetes.client.Configuration()
        cfg.host = self.url
        return kubernetes.client.CoreV1Api(kubernetes.client.ApiClient(cfg))

    def taints(self, name: str) -> list[dict[str, Any]]:
        return list(self.nodes[name]["spec"].get("taints") or [])

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[FakeApiServer]:
    srv = FakeApiServer({"gpu-a": [FOREIGN, {"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"}],
                         "gpu-b": [FOREIGN], "gpu-c": [], "gpu-d": []})
    yield srv
    srv.close()


def test_apply_labels_taints_and_clears_only_our_taint(tmp_path: Path, server: FakeApiServer) -> None:
    report = cluster_report(tmp_path, {"gpu-a": False, "gpu-b": True})
    result = apply(plan(ClusterReport.of(report)), server.api())
    assert result.patched == ["gpu-a", "gpu-b"] and not result.failed
    assert server.taints("gpu-a") == [FOREIGN]  # a pass removes our taint, never the operator's
    assert server.taints("gpu-b") == [FOREIGN, {"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"}]
    labels = server.nodes["gpu-b"]["metadata"]["labels"]
    assert labels[HEALTH_LABEL] == "fail" and labels["site"] == "a"
    assert "gpu.pcie" in server.nodes["gpu-b"]["metadata"]["annotations"][SUMMARY_ANNOTATION]
    patches = [r for r in server.requests if r[0] == "PATCH"]
    assert {r[2] for r in patches} == {MERGE_PATCH}


def test_unchanged_taint_is_not_rewritten(tmp_path: Path, server: FakeApiServer) -> None:
    report = cluster_report(tmp_path, {"gpu-a": True})
    apply(plan(ClusterReport.of(report)), server.api())
    patch = next(r for r in server.requests if r[0] == "PATCH")[3]
    assert "spec" not in patch and "resourceVersion" not in patch["metadata"]


def test_concurrent_edit_is_retried_and_keeps_the_other_taint(tmp_path: Path, server: FakeApiServer) -> None:
    """Another controller taints the node between our read and our patch: 409, re-read, retry."""
    other = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
    seen: list[str] = []

    def meddle(name: str) -> None:
        if name == "gpu-b" and not seen:
            seen.append(name)
            with server.lock:
                node = server.nodes[name]
                node["spec"]["taints"].append(other)
                node["metadata"]["resourceVersion"] = str(int(node["metadata"]["resourceVersion"]) + 1)

    server.on_get = meddle
    result = apply(plan(ClusterReport.of(cluster_report(tmp_path, {"gpu-b": True}))), server.api())
    assert result.patched == ["gpu-b"]
    assert server.taints("gpu-b") == [FOREIGN, other, {"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"}]
    assert sum(1 for r in server.requests if r[0] == "PATCH") == 2


def test_unknown_node_is_reported_not_fatal(tmp_path: Path, server: FakeApiServer) -> None:
    result = apply(plan(ClusterReport.of(cluster_report(tmp_path, {"gpu-a": False, "ghost": True}))), server.api())
    assert result.patched == ["gpu-a"]
    assert "no node named 'ghost'" in result.failed["ghost"]


def test_breaker_counts_the_whole_cluster(tmp_path: Path, server: FakeApiServer) -> None:
    """gpu-a already carries our taint; tainting gpu-b, gpu-c too would be 3 of 4 nodes > 0.5."""
    out = plan(ClusterReport.of(cluster_report(tmp_path, {"gpu-b": True, "gpu-c": True})))
    apply(out, server.api(), max_taint_fraction=0.5)
    assert out.held == ["gpu-b", "gpu-c"]
    assert server.taints("gpu-b") == [FOREIGN] and server.taints("gpu-c") == []
    assert server.nodes["gpu-c"]["metadata"]["labels"][HEALTH_LABEL] == "fail"


def test_cli_apply_through_a_kubeconfig(tmp_path: Path, server: FakeApiServer,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": "fake",
        "clusters": [{"name": "fake", "cluster": {"server": server.url}}],
        "users": [{"name": "u", "user": {"token": "t0ken"}}],
        "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "u"}}]}))
    report = tmp_path / "report.json"
    report.write_text(json.dumps(cluster_report(tmp_path, {"pod-1": True})))
    assert cli(["label", str(report), "--node", "gpu-d", "--apply", "--kubeconfig", str(kubeconfig)]) == 0
    assert server.taints("gpu-d") == [{"key": TAINT_KEY, "value": "fail", "effect": "NoSchedule"}]
    assert "gpu-d: health=fail" in capsys.readouterr().out
    assert cli(["label", str(report), "--node", "nope", "--apply", "--kubeconfig", str(kubeconfig)]) == 3
