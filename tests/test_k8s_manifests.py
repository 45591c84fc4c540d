"""deploy/k8s manifests against the Kubernetes API schema, offline.

Core kinds (Job, DaemonSet, RBAC, Namespace) are validated by kubernetes-validate, which
bundles the API's OpenAPI schemas, in strict mode (unknown fields are errors). The
PyTorchJob is a CRD: it is validated against the Kubeflow PyTorchJob structural schema in
tests/fixtures/k8s (its source is in the file), whose pod templates resolve to the same
bundled core schemas. Then the manifests are checked for what gpu-preflight relies on:
probes on /healthz and /readyz of ``serve``, tolerating our own taint, the node name
reaching the report, and RBAC covering the calls the labeller makes.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import referencing
import yaml

from gpu_preflight.cli.serve_cmd import DEFAULT_PORT
from gpu_preflight.integrations.k8s import TAINT_KEY

REPO = Path(__file__).resolve().parents[1]
MANIFESTS = REPO / "deploy" / "k8s"
PYTORCHJOB_SCHEMA = REPO / "tests" / "fixtures" / "k8s" / "pytorchjob-v1.schema.json"
K8S_VERSION = "1.30.0"  # oldest API the manifests must pass; also checked at the newest bundled one


def documents() -> list[tuple[str, dict[str, Any]]]:
    docs = []
    for path in sorted(MANIFESTS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                docs.append((path.name, doc))
    return docs


def by_kind(kind: str) -> dict[str, Any]:
    return next(doc for _, doc in documents() if doc["kind"] == kind)


def pytorchjob_validator() -> jsonschema.protocols.Validator:
    import importlib.resources

    version = kubernetes_validate.latest_version()
    defs_path = importlib.resources.files("kubernetes_validate").joinpath(
        f"kubernetes-json-schema/v{version}-local-strict/_definitions.json")
    defs = json.loads(defs_path.read_text())
    schema = json.loads(PYTORCHJOB_SCHEMA.read_text())
    registry = referencing.Registry().with_resource(defs["$id"], referencing.Resource.from_contents(defs))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def core_docs() -> list[tuple[str, dict[str, Any]]]:
    return [(n, d) for n, d in documents() if d["apiVersion"] != "kubeflow.org/v1"]


def test_every_manifest_is_covered() -> None:
    kinds = sorted(d["kind"] for _, d in documents())
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Job", "Namespace", "PyTorchJob",
                     "ServiceAccount"]


@pytest.mark.parametrize("version", [K8S_VERSION, kubernetes_validate.latest_version()])
@pytest.mark.parametrize(("name", "doc"), core_docs(), ids=[f"{n}:{d['kind']}" for n, d in core_docs()])
def test_core_manifests_match_the_api_schema(name: str, doc: dict[str, Any], version: str) -> None:
    kubernetes_validate.validate(doc, version, strict=True)


def test_a_typo_fails_schema_validation() -> None:
    job = copy.deepcopy(by_kind("Job"))
    job["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # 'resources' misspelt
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(job, K8S_VERSION, strict=True)


def test_pytorchjob_matches_the_kubeflow_schema() -> None:
    pytorchjob_validator().validate(by_kind("PyTorchJob"))


@pytest.mark.parametrize("mutate", [
    lambda d: d["spec"].pop("runPolicy"),
    lambda d: d["spec"]["pytorchReplicaSpecs"].update(Chief=d["spec"]["pytorchReplicaSpecs"]["Worker"]),
    lambda d: d["spec"]["pytorchReplicaSpecs"]["Worker"].update(replicas="2"),
    lambda d: d["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]["containers"][0].update(cmd=["x"]),
    lambda d: d["spec"]["runPolicy"].update(cleanPodPolicy="Sometimes"),
], ids=["no-runPolicy", "unknown-replica-type", "replicas-string", "pod-typo", "bad-enum"])
def test_pytorchjob_schema_rejects_broken_jobs(mutate: Any) -> None:
    job = copy.deepcopy(by_kind("PyTorchJob"))
    mutate(job)
    with pytest.raises(jsonschema.ValidationError):
        pytorchjob_validator().validate(job)


def pod_specs() -> list[tuple[str, dict[str, Any]]]:
    ds, job, ptj = by_kind("DaemonSet"), by_kind("Job"), by_kind("PyTorchJob")
    return [("DaemonSet", ds["spec"]["template"]["spec"]), ("Job", job["spec"]["template"]["spec"]),
            *((f"PyTorchJob/{k}", v["template"]["spec"]) for k, v in ptj["spec"]["pytorchReplicaSpecs"].items())]


@pytest.mark.parametrize(("kind", "pod"), pod_specs(), ids=[k for k, _ in pod_specs()])
def test_pods_tolerate_our_taint_and_use_the_labelling_account(kind: str, pod: dict[str, Any]) -> None:
    """A tainted node must stay re-checkable, or a repaired node would never be cleared."""
    assert any(t["key"] == TAINT_KEY and t["operator"] == "Exists" and "effect" not in t
               for t in pod["tolerations"])
    sa = by_kind("ServiceAccount")["metadata"]
    assert pod["serviceAccountName"] == sa["name"]


def test_daemonset_serves_probes_on_the_health_endpoints() -> None:
    ds = by_kind("DaemonSet")
    server = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "server")
    args = server["args"]
    assert args[:2] == ["gpu-preflight", "serve"] and args[args.index("--host") + 1] == "0.0.0.0"
    port = int(args[args.index("--port") + 1])
    assert port == DEFAULT_PORT == server["ports"][0]["containerPort"]
    assert server["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert server["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert "nvidia.com/gpu" not in json.dumps(server["resources"])  # monitoring must not take GPUs
    labeller = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "labeller")
    assert f"http://127.0.0.1:{port}/status" in labeller["args"][0]


def test_the_serve_arguments_parse() -> None:
    """The DaemonSet's command line is accepted by the real ``serve`` parser."""
    import argparse

    from gpu_preflight.cli import serve_cmd

    ds = by_kind("DaemonSet")
    args = next(c for c in ds["spec"]["template"]["spec"]["containers"] if c["name"] == "server")["args"]
    p = argparse.ArgumentParser()
    serve_cmd.add_commands(p.add_subparsers(dest="command"))
    parsed = p.parse_args(args[1:])
    assert serve_cmd._validate(parsed) is None


@pytest.mark.parametrize("kind", ["Job", "PyTorchJob"])
def test_reports_name_kubernetes_nodes(kind: str) -> None:
    """GPU_PREFLIGHT_NODE_NAME from spec.nodeName makes the report's node names the labeller's targets."""
    doc = by_kind(kind)
    pod = doc["spec"]["template"]["spec"] if kind == "Job" else \
        doc["spec"]["pytorchReplicaSpecs"]["Master"]["template"]["spec"]
    env = {e["name"]: e for e in pod["containers"][0]["env"]}
    assert env["GPU_PREFLIGHT_NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"


def test_pytorchjob_container_is_named_pytorch() -> None:
    for spec in by_kind("PyTorchJob")["spec"]["pytorchReplicaSpecs"].values():
        assert spec["template"]["spec"]["containers"][0]["name"] == "pytorch"


def test_rbac_allows_what_the_labeller_calls() -> None:
    """k8s_apply lists nodes (breaker), reads and patches them; nothing more is granted."""
    rules = by_kind("ClusterRole")["rules"]
    assert rules == [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "list", "patch"]}]
    binding = by_kind("ClusterRoleBinding")
    sa = by_kind("ServiceAccount")["metadata"]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": sa["name"], "namespace": sa["namespace"]}]
    assert binding["roleRef"]["name"] == by_kind("ClusterRole")["metadata"]["name"]
