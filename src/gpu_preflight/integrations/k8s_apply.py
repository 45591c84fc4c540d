"""Send a :class:`~.k8s.LabelPlan` to the API server through the official Python client.

Kept apart from the plan so that the dry run (the default) never imports the client: it
is a large optional extra (``pip install 'gpu-preflight[k8s]'``). Labels and annotations
go in one patch per node. Taints are a list that a patch replaces whole, so the node is
read first, only our key is changed, and the patch carries the node's ``resourceVersion``:
when something else edited the node meanwhile the server answers 409 and the read and
patch are retried, so another controller's taint is never lost.
"""

from __future__ import annotations

from typing import Any

import msgspec

from .k8s import TAINT_KEY, LabelPlan, NodeAction, hold_if_over

CONFLICT = 409
NOT_FOUND = 404
# RFC 7386: lists are replaced whole, which is what the read-modify-write of the taints needs.
MERGE_PATCH = "application/merge-patch+json"


class ClientMissing(RuntimeError):
    """The kubernetes client is not installed."""


class ApplyResult(msgspec.Struct):
    """Nodes patched, nodes that failed (with why), and the plan's notes."""

    patched: list[str] = []
    failed: dict[str, str] = {}


def connect(kubeconfig: str | None = None, context: str | None = None) -> Any:
    """A ``CoreV1Api``: in-cluster service account first, else the kubeconfig."""
    try:
        # optional: kubernetes comes with the [k8s] extra, not with a node-only install
        from kubernetes import client, config  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError as exc:
        raise ClientMissing("the kubernetes client is not installed: pip install 'gpu-preflight[k8s]'") from exc
    if kubeconfig is None and context is None:
        try:
            config.load_incluster_config()  # type: ignore[no-untyped-call, unused-ignore]
        except config.ConfigException:
            config.load_kube_config()  # type: ignore[no-untyped-call, unused-ignore]
    else:
        config.load_kube_config(config_file=kubeconfig, context=context)  # type: ignore[no-untyped-call, unused-ignore]
    return client.CoreV1Api()


def cluster_taints(api: Any) -> tuple[int, set[str]]:
    """How many nodes the cluster has, and which already carry our taint."""
    nodes = api.list_node().items
    tainted = {n.metadata.name for n in nodes if any(t.key == TAINT_KEY for t in (n.spec.taints or []))}
    return len(nodes), tainted


def apply(out: LabelPlan, api: Any, *, max_taint_fraction: float = 0.5, retries: int = 3) -> ApplyResult:
    """Patch every node of the plan; the circuit breaker counts the whole cluster first."""
    total, tainted = cluster_taints(api)
    hold_if_over(out, total_nodes=total, already_tainted=tainted, fraction=max_taint_fraction)
    result = ApplyResult()
    for action in out.actions:
        error = _patch_node(api, action, retries)
        if error is None:
            result.patched.append(action.node)
        else:
            result.failed[action.node] = error
    return result


def _taints(api: Any, node: Any, action: NodeAction) -> list[dict[str, Any]] | None:
    """The node's new taint list, or None when ours is already as the plan wants it."""
    current = list(node.spec.taints or []) if node.spec else []
    ours = [t for t in current if t.key == TAINT_KEY]
    wanted = action.taint
    if wanted is None and not ours:
        return None
    if wanted is not None and len(ours) == 1 and (ours[0].value, ours[0].effect) == (wanted.value, wanted.effect):
        return None
    serialize = api.api_client.sanitize_for_serialization
    kept: list[dict[str, Any]] = [serialize(t) for t in current if t.key != TAINT_KEY]
    if wanted is not None:
        kept.append({"key": wanted.key, "value": wanted.value, "effect": wanted.effect})
    return kept


def _patch_node(api: Any, action: NodeAction, retries: int) -> str | None:
    # optional: kubernetes comes with the [k8s] extra, not with a node-only install
    from kubernetes.client.exceptions import ApiException  # type: ignore[import-not-found, import-untyped, unused-ignore]

    for _attempt in range(max(retries, 1)):
        try:
            node = api.read_node(action.node)
            body: dict[str, Any] = {"metadata": {"labels": action.labels, "annotations": action.annotations}}
            taints = _taints(api, node, action)
            if taints is not None:
                body["metadata"]["resourceVersion"] = node.metadata.resource_version
                body["spec"] = {"taints": taints}
            api.patch_node(action.node, body, _content_type=MERGE_PATCH)
            return None
        except ApiException as exc:
            if exc.status == CONFLICT:
                continue
            if exc.status == NOT_FOUND:
                return f"no node named {action.node!r} in the cluster"
            return f"API error {exc.status}: {exc.reason}"
    return f"node {action.node!r} kept changing under us ({retries} conflicts); try again"
