"""Issue 29, item 15: a private registry's ``imagePullSecret`` in the Kubernetes manifests.

``gpu-preflight k8s manifest`` renders every deploy/k8s manifest with our image replaced and
``imagePullSecrets`` in every pod template and the ServiceAccount; the result still passes the
Kubernetes API schema in strict mode (and the PyTorchJob its Kubeflow schema), and rendering
twice adds nothing twice.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from gpu_preflight.cli.main import main
from gpu_preflight.integrations.k8s_manifest import ManifestError, pod_specs, render

from .test_k8s_manifests import K8S_VERSION, MANIFESTS, pytorchjob_validator

IMAGE = "registry.corp.example:5000/ml/gpu-preflight:1.2.3"
FILES = sorted(MANIFESTS.glob("*.yaml"))


def _render(capsys: pytest.CaptureFixture[str], *argv: str) -> list[dict[str, Any]]:
    assert main(["k8s", "manifest", *argv]) == 0, capsys.readouterr().err
    return [d for d in yaml.safe_load_all(capsys.readouterr().out) if d]


def _images(doc: dict[str, Any]) -> list[str]:
    return [c["image"] for _, spec in pod_specs(doc) for c in spec.get("containers", [])]


def test_every_manifest_renders_with_the_pull_secret_and_stays_valid(capsys: pytest.CaptureFixture[str]) -> None:
    docs = _render(capsys, *map(str, FILES), "--image", IMAGE, "--image-pull-secret", "regcred",
                   "--image-pull-secret", "mirror-pull")
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == ["ClusterRole", "ClusterRoleBinding", "ConfigMap", "DaemonSet", "Job", "Namespace", "PyTorchJob",
                     "ServiceAccount"]
    wanted = [{"name": "regcred"}, {"name": "mirror-pull"}]
    specs = [(d["kind"], path, spec) for d in docs for path, spec in pod_specs(d)]
    assert {k for k, _, _ in specs} == {"DaemonSet", "Job", "PyTorchJob"} and len(specs) == 4  # Master + Worker
    for kind, path, spec in specs:
        assert spec["imagePullSecrets"] == wanted, (kind, path)
        assert {c["image"] for c in spec["containers"]} == {IMAGE}, (kind, path)
        for c in spec["containers"]:  # the report's software stack names the image each node ran
            assert [e["value"] for e in c["env"] if e["name"] == "GPU_PREFLIGHT_IMAGE"] == [IMAGE], (kind, path)
    (account,) = [d for d in docs if d["kind"] == "ServiceAccount"]
    assert account["imagePullSecrets"] == wanted
    for doc in docs:
        if doc["apiVersion"] == "kubeflow.org/v1":
            pytorchjob_validator().validate(doc)
        else:
            kubernetes_validate.validate(doc, K8S_VERSION, strict=True)


def test_rendering_twice_adds_nothing_twice_and_keeps_other_images(tmp_path: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    job = yaml.safe_load((MANIFESTS / "job.yaml").read_text())
    spec = job["spec"]["template"]["spec"]
    spec["imagePullSecrets"] = [{"name": "site-default"}]
    spec["containers"].append({"name": "sidecar", "image": "busybox:1.36"})
    path = tmp_path / "job.yaml"
    path.write_text(yaml.safe_dump(job))
    once = tmp_path / "once.yaml"
    assert main(["k8s", "manifest", str(path), "--image", IMAGE, "--image-pull-secret", "regcred",
                 "-o", str(once)]) == 0
    (twice,) = _render(capsys, str(once), "--image", IMAGE, "--image-pull-secret", "regcred")
    spec = twice["spec"]["template"]["spec"]
    assert spec["imagePullSecrets"] == [{"name": "site-default"}, {"name": "regcred"}]
    assert _images(twice) == [IMAGE, "busybox:1.36"]


def test_the_secret_can_come_from_the_environment(monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("GPU_PREFLIGHT_IMAGE_PULL_SECRET", "regcred, other")
    (job,) = _render(capsys, str(MANIFESTS / "job.yaml"))
    assert job["spec"]["template"]["spec"]["imagePullSecrets"] == [{"name": "regcred"}, {"name": "other"}]
    assert _images(job) == ["ghcr.io/example/gpu-preflight:0.1.0"]  # no --image: the image stays


@pytest.mark.parametrize(("argv", "fragment"), [
    (["--image-pull-secret", "Reg_Cred"], "'Reg_Cred' is not a valid Secret name"),
    (["--image", "my image"], "is not an image reference"),
    (["--image-pull-secret", "regcred", "--image", "x/gpu-preflight:1", "CONFIGMAP"],
     "no container of these manifests runs a gpu-preflight image"),
])
def test_what_cannot_be_rendered_is_one_line_and_exit_3(argv: list[str], fragment: str,
                                                       capsys: pytest.CaptureFixture[str]) -> None:
    files = [str(MANIFESTS / "node-problem-detector.yaml") if a == "CONFIGMAP" else a for a in argv]
    if "CONFIGMAP" not in argv:
        files.insert(0, str(MANIFESTS / "job.yaml"))
    assert main(["k8s", "manifest", *files]) == 3
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith("gpu-preflight: ") and fragment in line


def test_a_pull_secret_with_nowhere_to_go_is_an_error() -> None:
    with pytest.raises(ManifestError, match="no pod template or ServiceAccount"):
        render([{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}], pull_secrets=["regcred"])
