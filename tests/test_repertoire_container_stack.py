"""The GPU container stack's failure texts, derived from their source (issue 27; docs/repertoire/container-stack.md).

Each fixture under ``tests/fixtures/repertoire/container-stack/`` renders one format string of libnvidia-container's
CLI, Docker's device request, the toolkit's CDI or CSV mode, the Kubernetes device plugin or the GPU Operator's
validator (PROVENANCE.md names each).
They say exactly what keeps GPUs from a container; before, all but the validator's were exit 3 (no tool recognised;
the validator's nvidia-smi sentence alone was read). Each is now
read as ``container-stack`` and FAILs with the verdict and operator action this tool gives the same state in
other tools: nvidia-smi's for a driver/library mismatch, no driver, a lost GPU or none, ``gpu.xid``'s catalogue
for an Xid the device plugin names.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.actions import DETAIL_KEY
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers.detect import detect_kind

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "container-stack"
KERNEL_XID = {79: "[ 1204.551020] NVRM: Xid (PCI:0000:41:00): 79, pid=0, GPU has fallen off the bus.\n",
              48: "[ 1204.551020] NVRM: Xid (PCI:0000:41:00): 48, pid=1234, name=python, An uncorrectable double "
                  "bit error (DBE) has been detected on GPU in the framebuffer at partition 0, subpartition 0.\n"}

# (fixture, [(check, code, operator action or None)] in order)
CASES: tuple[tuple[str, list[tuple[str, str, str | None]]], ...] = (
    ("nvc-init-nvml-driver-library-mismatch.txt", [("container.stack", "nvml_init_failed", "reboot_node")]),
    ("nvc-init-load-library-libnvidia-ml.txt", [("container.stack", "nvml_init_failed", "reboot_node")]),
    ("nvc-init-nvml-driver-not-loaded.txt", [("container.stack", "driver_unreachable", "reboot_node")]),
    ("nvc-detection-nvml-gpu-is-lost.txt", [("container.stack", "gpu_lost", "reboot_node")]),
    ("nvc-detection-nvml-unknown-error.txt", [("container.stack", "nvml_init_failed", "reboot_node")]),
    ("nvc-requirement-cuda.txt", [("container.stack", "cuda_driver_too_old", None)]),
    ("nvc-requirement-arch.txt", [("container.stack", "requirement_unsatisfied", None)]),
    ("nvc-mount-error-file-exists.txt", [("container.stack", "container_setup_failed", None)]),
    ("nvc-device-error-unknown-device.txt", [("container.stack", "container_setup_failed", None)]),
    ("docker-could-not-select-device-driver.txt", [("container.stack", "runtime_missing", None)]),
    ("docker-unknown-runtime-nvidia.txt", [("container.stack", "runtime_missing", None)]),
    ("toolkit-cdi-unresolvable.txt", [("container.stack", "cdi_unresolved", None)]),
    ("toolkit-csv-requirements-not-met.txt", [("container.stack", "cuda_driver_too_old", None)]),
    ("plugin-xid-79-unhealthy.txt", [("gpu.xid", "xid_79", "reboot_node")]),
    ("plugin-xid-48-unhealthy.txt", [("gpu.xid", "xid_48", "reset_gpu")]),
    ("plugin-0.12-xid-on-device-will-go-unhealthy.txt", [("gpu.xid", "xid_79", "reboot_node")]),
    ("plugin-beta-xid-all-devices.txt", [("gpu.xid", "xid_48", "reset_gpu")]),
    ("plugin-unhealthy-event-wait.txt", [("container.stack", "device_unhealthy", "reboot_node")] * 2),
    ("plugin-nvml-library-not-found.txt", [("container.stack", "runtime_missing", None)]),
    ("plugin-nvml-driver-not-loaded.txt", [("container.stack", "driver_unreachable", "reboot_node")]),
    ("plugin-no-devices.txt", [("container.stack", "no_devices", "reboot_node")]),
    ("plugin-incompatible-strategy.txt", [("container.stack", "runtime_missing", None)]),
    # the validator's own line, after nvidia-smi's sentence where it printed one (judged as nvidia-smi's)
    ("validator-driver-not-ready.txt", [("nvidia_smi.failure", "driver_unreachable", "reboot_node"),
                                        ("container.stack", "driver_unreachable", "reboot_node")]),
    ("validator-toolkit-not-ready.txt", [("nvidia_smi.failure", "nvml_init_failed", "reboot_node"),
                                         ("container.stack", "runtime_missing", None)]),
    ("validator-plugin-no-gpu-resources.txt", [("container.stack", "no_devices", "reboot_node")]),
)


def _judged(text: str) -> list[Finding]:
    return [f for f in judge_text(text, Config(), source="pod.log") if f.status is not Status.PASS]


@pytest.mark.parametrize(("name", "expected"), CASES)
def test_a_container_stack_form_fails_as_the_state_it_names(name: str,
                                                             expected: list[tuple[str, str, str | None]]) -> None:
    text = (FORMS / name).read_text()
    assert detect_kind(text) == "container-stack"
    findings = _judged(text)
    assert [(f.check_id, f.code, f.details.get(DETAIL_KEY)) for f in findings] == expected
    assert all(f.status is Status.FAIL for f in findings)


@pytest.mark.parametrize("xid", [79, 48])
def test_the_device_plugins_xid_is_judged_as_the_kernel_logs(xid: int) -> None:
    """One catalogue: the Xid the health checker names gets the kernel log's verdict, action and advice, on the
    GPU it names (by UUID); the 'device marked unhealthy' line after it is its consequence, not a second finding."""
    plugin = _judged((FORMS / f"plugin-xid-{xid}-unhealthy.txt").read_text())
    kernel = [f for f in judge_text(KERNEL_XID[xid], Config(), source="dmesg") if f.check_id == "gpu.xid"]
    assert [(f.status, f.code, f.recommendation, f.details.get(DETAIL_KEY)) for f in plugin] == [
        (f.status, f.code, f.recommendation, f.details.get(DETAIL_KEY)) for f in kernel]
    assert plugin[0].subject.startswith("pod.log/GPU-")


def test_shared_states_take_nvidia_smis_advice() -> None:
    """nvidia-container-cli's NVML mismatch is nvidia-smi's 'Failed to initialize NVML: Driver/library version
    mismatch': the same advice and action."""
    ours = _judged((FORMS / "nvc-init-nvml-driver-library-mismatch.txt").read_text())[0]
    smi = _judged("Failed to initialize NVML: Driver/library version mismatch\n")[0]
    assert (ours.code, ours.recommendation, ours.details.get(DETAIL_KEY)) == (
        smi.code, smi.recommendation, smi.details.get(DETAIL_KEY))
    assert "driver/library version mismatch" in ours.summary
    too_old = _judged((FORMS / "nvc-requirement-cuda.txt").read_text())[0]
    assert "(cuda>=12.4)" in too_old.summary and "Upgrade the node's NVIDIA driver" in (too_old.recommendation or "")


def test_nvml_unknown_error_alone_stays_nvidia_smis() -> None:
    """'Failed to initialize NVML: Unknown Error' inside a container (device access lost after a systemd
    daemon-reload) is nvidia-smi's sentence: its reader keeps it; the device plugin's line is ours only with the
    plugin's own hint after it."""
    text = "Failed to initialize NVML: Unknown Error\n"
    assert detect_kind(text) == "nvidia-smi-error"
    assert [(f.check_id, f.code) for f in _judged(text)] == [("nvidia_smi.failure", "nvml_init_failed")]


def test_a_healthy_plugin_log_is_not_recognised() -> None:
    """Nothing here PASSes: a plugin log without a failure sentence is no container-stack text (exit 3)."""
    text = ("I1207 08:05:40.120331       1 main.go:356] Retrieving plugins.\n"
            "I1207 08:05:40.221902       1 server.go:216] Registered device plugin for 'nvidia.com/gpu' with Kubelet\n")
    assert detect_kind(text) is None


def test_every_fixture_is_covered() -> None:
    """A fixture added to the folder without a row here would test nothing."""
    assert {p.name for p in FORMS.glob("*.txt")} == {c[0] for c in CASES}


def test_a_quoted_format_string_is_no_output() -> None:
    """A doc or diff quoting the source (``'%s' device marked unhealthy: %s``) states no GPU's state."""
    text = "| x | server.go:279 `'%s' device marked unhealthy: %s`; health.go `Marking device %v as unhealthy: %v` |\n"
    assert detect_kind(text) is None
