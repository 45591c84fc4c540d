"""Kubernetes manifests rendered for a site: our image, and the pull secret of a private registry.

The manifests in ``deploy/k8s`` name a placeholder image on a public registry. A cluster that
pulls from a private one (a mirror, GHCR with a private package, an air-gapped registry) needs
the image reference changed and an ``imagePullSecrets`` entry in every pod that pulls it; both
are easy to miss by hand in a PyTorchJob's two pod templates and a DaemonSet's sidecar.
:func:`render` does it for every pod template a manifest holds (Pod, Job, CronJob, DaemonSet,
Deployment, StatefulSet, ReplicaSet, Kubeflow PyTorchJob) and for a ServiceAccount (whose pull
secrets the API server adds to every pod that runs under it).

Only gpu-preflight containers get the new image: a container whose image repository ends in
``/gpu-preflight`` (any registry, any tag). Containers of other images are left as they are, so
a site's own sidecars survive a render. Pull secrets are added after those already listed, once.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from typing import Any

import msgspec
import yaml

from ..workloads.stack import IMAGE_VARIABLE

__all__ = ["IMAGE_NAME", "ManifestError", "Rendered", "check_image", "check_secret_name", "dump_documents",
           "load_documents", "pod_specs", "render"]

IMAGE_NAME = "gpu-preflight"  # the last path component of our image's repository
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
_TEMPLATE_KINDS = ("Job", "DaemonSet", "Deployment", "StatefulSet", "ReplicaSet")


class ManifestError(ValueError):
    """A manifest or a value cannot be rendered: one line saying which and why."""


class Rendered(msgspec.Struct):
    """The rendered documents, and how many pod specs and containers were changed."""

    documents: list[Any]
    pod_specs: int = 0
    images: int = 0
    service_accounts: int = 0


def check_secret_name(name: str) -> str:
    """A Secret's name as the API requires it (a DNS-1123 subdomain), else :class:`ManifestError`."""
    if len(name) > 253 or not _DNS_SUBDOMAIN.fullmatch(name):
        raise ManifestError(f"image pull secret {name!r} is not a valid Secret name (lower-case letters, digits, "
                            f"'-' and '.', starting and ending alphanumeric, at most 253 characters)")
    return name


def check_image(image: str) -> str:
    """An image reference (no blanks, not an option), else :class:`ManifestError`."""
    if not image or any(c.isspace() for c in image) or image.startswith(("-", "/")):
        raise ManifestError(f"image {image!r} is not an image reference")
    return image


def _repository(image: str) -> str:
    """``registry/path/name`` of ``registry:port/path/name:tag@digest``."""
    name = image.split("@", 1)[0]
    last = name.rsplit("/", 1)
    if ":" in last[-1]:
        name = name[:name.rindex(":")]
    return name


def _is_ours(image: object) -> bool:
    return isinstance(image, str) and _repository(image).rsplit("/", 1)[-1] == IMAGE_NAME


def _mapping(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ManifestError(f"{where} is not a mapping")
    return value


def pod_specs(doc: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(path, pod spec)`` of every pod template ``doc`` holds (none for other kinds)."""
    kind = doc.get("kind")
    spec = doc.get("spec")
    if kind == "Pod":
        yield "spec", _mapping(spec, "Pod spec")
    elif kind in _TEMPLATE_KINDS:
        yield "spec.template.spec", _mapping(_mapping(_mapping(spec, f"{kind} spec").get("template"),
                                                      f"{kind} spec.template").get("spec"),
                                             f"{kind} spec.template.spec")
    elif kind == "CronJob":
        job = _mapping(_mapping(spec, "CronJob spec").get("jobTemplate"), "CronJob spec.jobTemplate")
        template = _mapping(_mapping(job.get("spec"), "CronJob jobTemplate.spec").get("template"),
                            "CronJob jobTemplate.spec.template")
        yield "spec.jobTemplate.spec.template.spec", _mapping(template.get("spec"), "CronJob pod spec")
    elif kind == "PyTorchJob":
        replicas = _mapping(_mapping(spec, "PyTorchJob spec").get("pytorchReplicaSpecs"),
                            "PyTorchJob spec.pytorchReplicaSpecs")
        for role, replica in replicas.items():
            template = _mapping(_mapping(replica, f"PyTorchJob replica {role}").get("template"),
                                f"PyTorchJob {role}.template")
            yield f"spec.pytorchReplicaSpecs.{role}.template.spec", _mapping(template.get("spec"),
                                                                               f"PyTorchJob {role} pod spec")


def _add_secrets(holder: dict[str, Any], secrets: list[str]) -> None:
    listed = holder.get("imagePullSecrets") or []
    if not isinstance(listed, list):
        raise ManifestError("imagePullSecrets is not a list")
    names = {s.get("name") for s in listed if isinstance(s, dict)}
    holder["imagePullSecrets"] = [*listed, *({"name": s} for s in secrets if s not in names)]


def _set_image_variable(container: dict[str, Any], image: str) -> None:
    """``GPU_PREFLIGHT_IMAGE`` = the image we put in, so every node's report says which image it ran;
    an entry the site wrote itself is kept."""
    env = container.get("env") or []
    if not isinstance(env, list):
        raise ManifestError("a container's env is not a list")
    if not any(isinstance(e, dict) and e.get("name") == IMAGE_VARIABLE for e in env):
        container["env"] = [*env, {"name": IMAGE_VARIABLE, "value": image}]


def render(documents: Iterable[Any], *, image: str | None = None, pull_secrets: Iterable[str] = ()) -> Rendered:
    """Copy-free render: each document changed in place and returned in order.

    ``image`` replaces the image of every gpu-preflight container (init containers too) and sets
    its ``GPU_PREFLIGHT_IMAGE`` (unless the site set it);
    ``pull_secrets`` are appended to every pod spec's and ServiceAccount's
    ``imagePullSecrets``. An ``image`` that matches no container is an error rather than a
    manifest that silently keeps the old image.
    """
    secrets = [check_secret_name(s) for s in dict.fromkeys(pull_secrets)]
    if image is not None:
        check_image(image)
    out = Rendered([])
    for doc in documents:
        out.documents.append(doc)
        if doc is None:
            continue
        doc = _mapping(doc, "a manifest document")
        if doc.get("kind") == "ServiceAccount" and secrets:
            _add_secrets(doc, secrets)
            out.service_accounts += 1
        for _, spec in pod_specs(doc):
            out.pod_specs += 1
            if secrets:
                _add_secrets(spec, secrets)
            if image is None:
                continue
            for key in ("initContainers", "containers"):
                for container in spec.get(key) or []:
                    if isinstance(container, dict) and _is_ours(container.get("image")):
                        container["image"] = image
                        _set_image_variable(container, image)
                        out.images += 1
    if image is not None and out.images == 0:
        raise ManifestError(f"no container of these manifests runs a {IMAGE_NAME} image: --image changed nothing")
    if secrets and out.pod_specs + out.service_accounts == 0:
        raise ManifestError("these manifests hold no pod template or ServiceAccount: the pull secret went nowhere")
    return out


def load_documents(text: str) -> list[Any]:
    """The documents of one YAML text (``---``-separated), or :class:`ManifestError`."""
    try:
        return list(yaml.safe_load_all(text))
    except yaml.YAMLError as exc:
        raise ManifestError(f"not valid YAML: {' '.join(str(exc).split())}") from None


def dump_documents(documents: Iterable[Any]) -> str:
    """YAML of ``documents`` (empty ones dropped), ``---`` between them. Comments are not kept
    (PyYAML reads none); key order is."""
    return str(yaml.safe_dump_all([d for d in documents if d is not None], sort_keys=False,
                                  default_flow_style=False, width=120))
