"""Judging the host side of a saved kernel log: PCIe AER errors, OOM kills, hung tasks, CPU thermal throttling,
disabled interrupt lines, the NVIDIA display stack's own errors and machine checks.

A GPU node can be unfit for a job while no GPU driver line says so: the link to the GPU reports
uncorrectable PCIe errors, the job was killed for host memory, a process sits in D state inside
a driver, or the CPUs run clock-throttled. ``parsers/host_log.py`` names each such line by a code;
this module gives each code its report id, verdict, operator action and advice
(:data:`HOST_VERDICTS`), and :func:`judge_kernel_host` turns a log's messages into findings, one per
code and subject (a PCI address, a process, a CPU), counting the repeats.

* ``kernel.pcie_aer``: FAIL for an Uncorrected (Fatal) error or a failed recovery (the device behind
  that link stopped working: a GPU there falls off the bus), WARN for an Uncorrected (Non-Fatal)
  error (a transaction was lost) and for Corrected errors (the link retried: a slot, riser or cable
  to watch).
* ``kernel.oom``: WARN when the OOM killer killed a process (a job died for host memory; the GPUs are
  not at fault).
* ``kernel.hung_task``: WARN when a task was blocked for longer than the kernel's hung-task timeout
  (a process stuck in a driver: nvidia, nvidia_uvm, a file system).
* ``kernel.thermal``: WARN when CPUs were clock-throttled for temperature (the host's cooling).
* ``kernel.irq``: FAIL when the kernel disabled an interrupt line no handler claimed (``irq 16: nobody
  cared``): every device on it, a GPU or a NIC among them, stops getting interrupts until a reboot.
* ``kernel.display_driver``: WARN when the NVIDIA display stack (nvidia-drm, nvidia-modeset) logs an
  error about a GPU: not an Xid, but the driver saying an operation on that GPU failed.
* ``kernel.mce``: FAIL when a machine check reports an uncorrected host memory or CPU error (the node can
  freeze: replace the DIMM or CPU), WARN for corrected ones (a DIMM to watch).

Messages older than the Xid window are counted, not judged, as for ``kernel.nic``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import TYPE_CHECKING, Protocol, TypeVar

from ..actions import Action
from ..model import Finding, Status
from ..registry import declare

if TYPE_CHECKING:
    from ..records.dmesg import DmesgRecord
    from ..records.xid import XidWindow

__all__ = ["HOST_VERDICTS", "in_window", "judge_kernel_host"]


class _Dated(Protocol):
    @property
    def timestamp(self) -> str | None: ...


D = TypeVar("D", bound=_Dated)


# code -> (report id, status, operator action, what it means, what to do)
HOST_VERDICTS: dict[str, tuple[str, Status, Action, str, str]] = {
    "pcie_aer_fatal": ("kernel.pcie_aer", Status.FAIL, Action.REBOOT_NODE,
                       "an Uncorrected (Fatal) PCIe error: the device behind this link stopped responding",
                       "Drain the node and reboot it; if the error returns, reseat or replace the GPU/riser on this "
                       "link (lspci -vvv shows what sits behind the port)."),
    "pcie_aer_nonfatal": ("kernel.pcie_aer", Status.WARN, Action.CHECK_MECHANICALS,
                          "an Uncorrected (Non-Fatal) PCIe error: a transaction on this link was lost",
                          "Check the slot, riser and seating of the device on this link; a job using it may have "
                          "seen a failed transfer."),
    "pcie_aer_corrected": ("kernel.pcie_aer", Status.WARN, Action.MONITOR,
                           "Corrected PCIe errors: the link retried transfers",
                           "Watch the count: a link that keeps correcting errors (BadTLP, Timeout, RxErr) is a slot, "
                           "riser or cable going bad, and a GPU behind it may fall off the bus."),
    "oom_kill": ("kernel.oom", Status.WARN, Action.RESTART_JOB,
                 "the kernel's OOM killer killed a process: host memory ran out",
                 "The job died for host RAM, not for a GPU fault: lower its host memory use (data loader workers, "
                 "pinned buffers) or its cgroup limit, then restart it."),
    "hung_task": ("kernel.hung_task", Status.WARN, Action.MONITOR,
                  "a task was blocked in the kernel longer than the hung-task timeout",
                  "Read its stack in the log: inside nvidia/nvidia_uvm the GPU driver is stuck (reboot if nvidia-smi "
                  "hangs too); inside a file system, the storage is."),
    "cpu_thermal_throttle": ("kernel.thermal", Status.WARN, Action.CHECK_MECHANICALS,
                             "CPUs were clock-throttled for temperature",
                             "Check the host's fans, airflow and heatsinks: a throttled CPU slows the data path that "
                             "feeds the GPUs."),
    "irq_disabled": ("kernel.irq", Status.FAIL, Action.REBOOT_NODE,
                     "the kernel disabled an interrupt line that kept firing with no handler claiming it",
                     "Every device on that line (see /proc/interrupts: a GPU, a NIC) no longer gets interrupts until "
                     "the node reboots: drain and reboot it; if it returns, look for the device raising the storm "
                     "(a driver or firmware fault, an interrupt-routing BIOS setting)."),
    "nvidia_drm_error": ("kernel.display_driver", Status.WARN, Action.MONITOR,
                         "the NVIDIA DRM driver (nvidia-drm) reported an error on a GPU",
                         "Not an Xid: the driver says an operation on this GPU failed (memory for a buffer, a "
                         "mode set). Watch for a repeat; if the GPU then stops responding, reboot the node."),
    "nvidia_modeset_error": ("kernel.display_driver", Status.WARN, Action.MONITOR,
                             "the NVIDIA mode-setting driver (nvidia-modeset) reported an error on a GPU",
                             "Not an Xid: the display engine of this GPU did not answer as expected. Watch for a "
                             "repeat; if the GPU then stops responding, reboot the node."),
    "mce_uncorrected": ("kernel.mce", Status.FAIL, Action.ISOLATE_NODE,
                        "a machine check reported an uncorrected host memory or CPU error",
                        "The host's memory or CPU failed: jobs on this node can crash or freeze it. Drain the node "
                        "and have the DIMM (EDAC names the memory controller and channel) or the CPU replaced."),
    "mce_corrected": ("kernel.mce", Status.WARN, Action.MONITOR,
                      "machine checks reported corrected host memory or CPU errors",
                      "Watch the count (edac-util, rasdaemon): a DIMM that keeps correcting errors, or a CMCI storm, "
                      "tends to turn into an uncorrected error that takes the node down."),
}
"""Uncorrectable link errors take a GPU off the bus (NVIDIA's Xid 79 calls for a reboot); the others
are events a job feels but the node survives: a look, not a drain."""


def _actions(check_id: str) -> dict[str, Action]:
    return {code: action for code, (cid, _, action, _, _) in HOST_VERDICTS.items() if cid == check_id}


KERNEL_PCIE_AER = declare(
    "kernel.pcie_aer", "No PCIe link reported uncorrectable errors",
    """A saved kernel log holds the kernel's PCIe AER reports (``pcieport 0000:00:03.0: AER: ...``,
    ``PCIe Bus Error: severity=...``): FAIL for an Uncorrected (Fatal) error or a failed recovery (the
    device behind the link stopped responding; a GPU there falls off the bus), WARN for an Uncorrected
    (Non-Fatal) error and for Corrected errors (the link retried). Reports older than the Xid window are
    counted, not judged.""",
    group="gpu_links", component="hardware_health", settings=("xid.window_hours",),
    actions=_actions("kernel.pcie_aer"))
KERNEL_OOM = declare(
    "kernel.oom", "No process was killed for host memory",
    """A saved kernel log shows the OOM killer at work (``Out of memory: Killed process 25315
    (python3)``, a cgroup's ``Memory cgroup out of memory``): WARN naming the process, since a job
    died for host RAM. Kills older than the Xid window are counted, not judged.""",
    group="system_resources", component="resource_management", settings=("xid.window_hours",),
    actions=_actions("kernel.oom"))
KERNEL_HUNG_TASK = declare(
    "kernel.hung_task", "No task hung in the kernel",
    """A saved kernel log holds ``INFO: task <name>:<pid> blocked for more than N seconds``: WARN
    naming the task (a process stuck in D state inside a driver or a file system). Reports older than
    the Xid window are counted, not judged.""",
    group="system_resources", component="service_reliability", settings=("xid.window_hours",),
    actions=_actions("kernel.hung_task"))
KERNEL_IRQ = declare(
    "kernel.irq", "No interrupt line was disabled by the kernel",
    """A saved kernel log holds ``irq <N>: nobody cared (try booting with the "irqpoll" option)``, the
    kernel's notice that it disabled an interrupt line after an interrupt storm no handler claimed: FAIL
    (``reboot_node``), since every device on that line stops getting interrupts until the node reboots.
    Reports older than the Xid window are counted, not judged.""",
    group="system_resources", component="hardware_health", settings=("xid.window_hours",),
    actions=_actions("kernel.irq"))
KERNEL_DISPLAY_DRIVER = declare(
    "kernel.display_driver", "The NVIDIA display stack reported no error",
    """A saved kernel log holds an error of the NVIDIA display stack, which writes no ``NVRM`` line and
    no Xid: nvidia-drm's ``*ERROR* [nvidia-drm] [GPU ID 0x...]`` or nvidia-modeset's ``nvidia-modeset:
    ERROR: GPU:<n>: ...``: WARN (``monitor``) naming the GPU. Reports older than the Xid window are
    counted, not judged.""",
    group="gpu_health", component="hardware_health", settings=("xid.window_hours",),
    actions=_actions("kernel.display_driver"))
KERNEL_MCE = declare(
    "kernel.mce", "No machine check reported a host memory or CPU error",
    """A saved kernel log holds machine-check reports of the host: an ``MCi_STATUS`` printed with its bank
    (``Machine Check Event: 0 Bank 8: fc00010001010092``), EDAC's ``EDAC MC3: 1 UE memory read error`` /
    ``1 CE ...`` counts, AMD's ``Error Status:`` decode, ``Machine check events logged``: FAIL
    (``isolate_node``) for an uncorrected error (the status's UC bit, ``UE``, ``Uncorrected``, a fatal
    machine-check panic: the host's memory or CPU failed and the node may freeze), WARN (``monitor``) for
    corrected ones. Reports older than the Xid window are counted, not judged.""",
    group="system_resources", component="hardware_health", settings=("xid.window_hours",),
    actions=_actions("kernel.mce"))
KERNEL_THERMAL = declare(
    "kernel.thermal", "No CPU was throttled for heat",
    """A saved kernel log holds ``CPU<N>: Core/Package temperature above threshold, cpu clock
    throttled``: WARN (the host's cooling). Reports older than the Xid window are counted, not
    judged.""",
    group="system_resources", component="hardware_health", settings=("xid.window_hours",),
    actions=_actions("kernel.thermal"))


def in_window(messages: Iterable[D], start: datetime | None) -> tuple[list[D], list[D]]:
    """``messages`` split into those at or after ``start`` (all of them without one; an undated message
    counts as recent) and the older ones."""
    recent: list[D] = []
    older: list[D] = []
    for m in messages:
        keep = start is None or m.timestamp is None or datetime.fromisoformat(m.timestamp) >= start
        (recent if keep else older).append(m)
    return recent, older


def judge_kernel_host(record: DmesgRecord, window: XidWindow, source: str) -> Iterator[Finding]:
    """``kernel.pcie_aer``, ``kernel.oom``, ``kernel.hung_task``, ``kernel.thermal``, ``kernel.irq``,
    ``kernel.display_driver`` and ``kernel.mce`` findings of a saved kernel log (called by its judge): one per
    code and subject, with the count and the first texts."""
    recent, older = in_window(record.host_messages, window.start)
    groups: dict[tuple[str, str | None], list[str]] = {}
    for message in recent:
        groups.setdefault((message.code, message.subject), []).append(message.message)
    for (code, subject), texts in groups.items():
        check_id, status, _, what, advice = HOST_VERDICTS[code]
        yield Finding(check_id, status, f"{source}/{subject}" if subject else source, code,
                      f"{what}: {texts[0][:160]}" + (f" ({len(texts)} times)" if len(texts) > 1 else ""),
                      observed=len(texts), unit="messages", recommendation=advice,
                      details={"examples": texts[:3], "window": window.describe()})
    counts: dict[str, int] = {}
    for message in older:
        check_id = HOST_VERDICTS[message.code][0]
        counts[check_id] = counts.get(check_id, 0) + 1
    for check_id, count in counts.items():
        yield Finding(check_id, Status.PASS, source, "older",
                      f"{count} message(s) before {window.describe()}: not judged", observed=count)
