"""Judging the GPU container stack's failure sentences (``container-stack``), in other tools' words.

A state the stack names that another tool names too is judged as that tool's is: a driver/library
mismatch, no driver, a lost GPU or no GPU take nvidia-smi's verdict, wording and action
(:data:`~.evidence_gpu.SMI_FAILURES`), and an Xid the device plugin's health checker names is judged by
``gpu.xid`` and the one Xid catalogue, as the kernel log's would be. What only the container stack can say
(no runtime serves the GPUs, the image needs a newer driver, a mount failed) FAILs the node's readiness for
that container, with the fix as the advice and no operator action: the hardware is not in question.
Nothing here PASSes: every form read is a failure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..actions import Action
from ..model import Finding, Status
from ..records.smi import NvidiaSmiRecord
from ..registry import declare
from .evidence import judges
from .evidence_gpu import SMI_FAILURE_ACTIONS, SMI_FAILURES, judge_nvidia_smi, judge_xid_tally

if TYPE_CHECKING:
    from ..config import Config
    from ..records.container import ContainerStackRecord, StackFailure

SHARED = ("nvml_init_failed", "driver_unreachable", "gpu_lost", "no_devices")
"""The states nvidia-smi names too: judged with its verdict, advice and action."""
SHARED_WHAT = {"driver_unreachable": "the NVIDIA driver is not loaded", "no_devices": "no GPU was found"}
"""nvidia-smi's words name nvidia-smi for these two; the state is the same."""
STACK_ONLY: dict[str, tuple[Status, str, str]] = {
    "cuda_driver_too_old": (Status.FAIL, "the node's driver is older than the container's CUDA requires",
                            "Upgrade the node's NVIDIA driver to one that supports the CUDA version named (CUDA's "
                            "release notes list the minimum driver), or run an image built for the node's CUDA "
                            "(nvidia-smi's 'CUDA Version'); schedule such images only on nodes that meet it."),
    "requirement_unsatisfied": (Status.FAIL, "the node does not meet the container's NVIDIA_REQUIRE_* condition",
                                "Run the image on a node whose GPUs meet the condition named (architecture, brand, "
                                "driver), or correct the image's NVIDIA_REQUIRE_* variables."),
    "runtime_missing": (Status.FAIL, "no NVIDIA container runtime serves GPUs on this node",
                        "Install the NVIDIA Container Toolkit and configure the engine (nvidia-ctk runtime configure "
                        "--runtime=docker|containerd|crio, then restart it); for Kubernetes make nvidia the default "
                        "runtime or give the pods its RuntimeClass."),
    "cdi_unresolved": (Status.FAIL, "the container runtime has no CDI specification for the GPUs requested",
                       "Generate the CDI specification (nvidia-ctk cdi generate --output=/etc/cdi/nvidia.yaml) after "
                       "every driver change, or switch the toolkit back to legacy mode."),
    "container_setup_failed": (Status.FAIL, "the NVIDIA container hook could not set up the container",
                               "Read the stage and reason named (mount, ldcache, device, permission): fix the "
                               "toolkit's configuration or the container's options it names, then start it again."),
    "device_unhealthy": (Status.FAIL, "the device plugin marked a GPU unhealthy (it is no longer scheduled)",
                         "Read the node's kernel log (Xid, NVRM) and nvidia-smi -q for the GPU named; reset the GPU "
                         "or reboot the node, then restart the device plugin so it offers the GPU again."),
}
CONTAINER_ACTIONS = {code: SMI_FAILURE_ACTIONS[code] for code in SHARED} | {"device_unhealthy": Action.REBOOT_NODE}
"""nvidia-smi's actions for the states it shares; a GPU the plugin withdrew without an Xid is one NVML could not
reach or watch (health.go marks it when a handle, its events or the event wait fail): gpu_unreachable's reboot.
The stack's configuration failures take no operator action: the node's hardware is not in question."""
CONTAINER_STACK = declare(
    "container.stack", "The GPU container stack can give containers the GPUs",
    """A saved text of the GPU container stack (``nvidia-container-cli``'s ``<stage> error:`` lines as Docker,
    containerd or Kubernetes relay them, Docker's device request, the toolkit's CDI and CSV modes, the Kubernetes
    device plugin's log, the GPU Operator validator's ``error validating ... installation``) states why a GPU
    container cannot start or a GPU left the schedule. FAIL for every form:
    NVML's ``driver/library version mismatch`` and other NVML errors, ``driver not loaded``, ``gpu is lost``, the
    driver's libraries not found, ``No devices found`` take nvidia-smi's verdict and action for the same state
    (``nvidia_smi.failure``); a requirement of a newer driver (``unsatisfied condition: cuda>=12.4``), another
    unmet ``NVIDIA_REQUIRE_*`` condition, no runtime serving ``--gpus`` (``could not select device driver``,
    ``Unknown runtime specified nvidia``, the plugin's ``Incompatible strategy`` or NVML library not found), a CDI
    device no spec names and a mount/ldcache/device/permission failure FAIL with the fix and no operator action;
    a GPU the device plugin marked unhealthy FAILs (reboot_node) unless an Xid line names why, in which case
    ``gpu.xid`` judges that Xid by the catalogue, exactly as in a kernel log. nvidia-smi's own sentences in the
    same text are ``nvidia_smi.failure``'s. Nothing PASSes.""",
    group=(), component="software_stack", actions=CONTAINER_ACTIONS)


@judges("container-stack")
def judge_container_stack(record: ContainerStackRecord, config: Config, source: str) -> Iterator[Finding]:
    """Each failure in the words of the tool that names the same state; the plugin's Xids by ``gpu.xid``."""
    if record.smi_failures:
        yield from judge_nvidia_smi(NvidiaSmiRecord(format="error", failures=record.smi_failures), config, source)
    xids = [f for f in record.failures if f.code == "xid"]
    explained = {f.device for f in xids}  # None: an Xid that sent every device unhealthy (before v0.13)
    for failure in record.failures:
        if failure.code == "xid" or (failure.code == "device_unhealthy" and explained & {failure.device, None}):
            continue  # the Xid says why the plugin withdrew the GPU: judged below, once
        yield _finding(failure, source)
    if xids:
        yield from _xids(xids, config, source)


def _finding(failure: StackFailure, source: str) -> Finding:
    status, what, advice = SMI_FAILURES[failure.code] if failure.code in SHARED else STACK_ONLY[failure.code]
    what = SHARED_WHAT.get(failure.code, what)
    subject = f"{source}/{failure.device}" if failure.device else source
    named = f" ({failure.detail})" if failure.code == "cuda_driver_too_old" and failure.detail else ""
    return Finding("container.stack", status, subject, failure.code, f"{what}{named}: {failure.message}",
                   observed=failure.message, expected="GPUs given to the container", recommendation=advice,
                   details={"line": failure.line, "tool": failure.tool, "device": failure.device,
                            "reason": failure.detail})


def _xids(xids: list[StackFailure], config: Config, source: str) -> Iterator[Finding]:
    """The health checker's Xids as kernel-log events of the GPU it names (undated: klog has no year), judged
    by the registered ``gpu.xid`` check and its catalogue; the device is named by its UUID, not a bus id."""
    from ..records.xid import XidEvent, count_events, xid_window

    events = [XidEvent(f.xid or 0, f.device, None, None, None, f.message, f.message) for f in xids]
    window = xid_window(config.xid.window_hours, saved=True, basis="the device plugin's log")
    for finding in judge_xid_tally(count_events(events, window), None, config, source, "device plugin log"):
        for device in {f.device for f in xids if f.device}:
            named = re.compile(re.escape(f"pci:{device}"), re.IGNORECASE)  # the catalogue keys a bus id, lower-cased
            finding.subject = named.sub(device, finding.subject)
            finding.summary = named.sub(device, finding.summary)
        yield finding
