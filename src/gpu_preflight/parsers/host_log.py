"""Lines of a kernel log outside the ``NVRM``/Xid stream that say a GPU node is not fit for a job.

A node can fail a training job with a clean ``NVRM`` record: the PCIe link to the GPU reports
errors through the kernel's AER driver (``pcieport 0000:00:03.0: AER: Multiple Uncorrected
(Fatal) error received``), the job is killed by the OOM killer (``Out of memory: Killed process
25315 (python3)``), a process hangs in D state inside a driver (``INFO: task nvc:[driver]:5403
blocked for more than 120 seconds``), or the CPUs are clock-throttled by heat (``CPU5: Core
temperature above threshold, cpu clock throttled``), the kernel disabled an interrupt line that
kept firing with no handler claiming it (``irq 16: nobody cared``: every device on that line, a GPU
among them, stops getting interrupts until the node reboots), or the NVIDIA display stack reports an
error of its own, which is not an ``NVRM`` line and carries no Xid (``*ERROR* [nvidia-drm] [GPU ID
0x00000200] Failed to get memory pages``, ``nvidia-modeset: ERROR: GPU:0: Failed to query display
engine channel state``), or a machine check reports a host memory or CPU error (``EDAC MC3: 1 UE memory
read error``, an ``MCi_STATUS`` with its UC bit set: uncorrected; ``CE`` counts, ``Machine check events
logged``: corrected). Each such line is recognised here by a
pattern and named by a code (:data:`HOST_MESSAGES`); what a code means, its verdict and its
operator action are the judge's (``checks/evidence_kernel.py``), as for the NIC driver messages
of :mod:`.nic_log`.

The texts are the kernel's own format strings (``drivers/pci/pcie/aer.c``: ``AER: %s%s error
message received from %s`` since 5.10, ``AER: %s%s error received: %s`` before, and the
``PCIe Bus Error: severity=%s`` record each one heads, its severity ``Corrected``/``Uncorrected``
in older kernels and ``Correctable``/``Uncorrectable`` in newer ones; ``mm/oom_kill.c``'s ``Out of
memory: Killed process`` and the older ``Killed process``; ``kernel/hung_task.c``;
``arch/x86/kernel/cpu/mce/therm_throt.c``; ``kernel/irq/spurious.c``'s ``irq %d: nobody cared (try
booting with the "irqpoll" option)``; the open kernel modules' ``NV_DRM_DEV_LOG_ERR``, printed through
``DRM_ERROR`` as ``*ERROR* [nvidia-drm] [GPU ID 0x%08x]``, nvidia-modeset's ``ERROR: GPU:%d:``
log level; ``arch/x86/kernel/cpu/mce/core.c``'s ``print_mce`` and ``mce_notify_irq``, ``drivers/edac``'s
``edac_mc_handle_error`` counts and its Intel drivers' ``Machine Check Event`` line, ``mce_amd.c``'s
``Error Status:`` decode), so one pattern covers every prefix style the line may carry.

Pure text in, tuples out; patterns read a bounded line and have no nested quantifiers.
"""

from __future__ import annotations

import re

__all__ = ["HOST_KEYS", "HOST_MESSAGES", "host_message"]

_BDF = r"[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]"
# "<driver> <BDF>: AER: ..." (pcieport, nvidia, nvme...) and the record's severity line.
_AER_DEVICE = rf"(?P<bdf>{_BDF})(?:\s+\S+)?:\s+(?:AER:\s+)?"

HOST_MESSAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("pcie_aer_fatal", re.compile(
        _AER_DEVICE + r"(?:(?:Multiple )?Uncorrect(?:ed|able) \(Fatal\) error (?:message )?received"
        r"|PCIe Bus Error: severity=Uncorrect(?:ed|able) \(Fatal\)|device recovery failed)")),
    ("pcie_aer_nonfatal", re.compile(
        _AER_DEVICE + r"(?:(?:Multiple )?Uncorrect(?:ed|able) \(Non-Fatal\) error (?:message )?received"
        r"|PCIe Bus Error: severity=Uncorrect(?:ed|able) \(Non-Fatal\))")),
    ("pcie_aer_corrected", re.compile(
        _AER_DEVICE + r"(?:(?:Multiple )?Correct(?:ed|able) error (?:message )?received"
        r"|PCIe Bus Error: severity=Correct(?:ed|able))")),
    ("oom_kill", re.compile(
        r"(?:Out of memory(?: \(oom_kill_allocating_task\))?: |Memory cgroup out of memory: |^|\]\s|:\s)"
        r"Kill(?:ed)? process (?P<pid>\d+) \((?P<process>[^)]{1,64})\)")),
    ("hung_task", re.compile(r"INFO: task (?P<process>\S{1,64}):(?P<pid>\d+) blocked for more than \d+ seconds")),
    ("cpu_thermal_throttle", re.compile(
        r"\bCPU(?P<cpu>\d+): (?:Core|Package) temperature above threshold, cpu clock throttled")),
    ("irq_disabled", re.compile(r"\birq (?P<irq>\d+): nobody cared\b")),
    ("nvidia_drm_error", re.compile(r"(?:\[drm:[\w.]{1,80} \[nvidia[_-]drm\]\] )?\*ERROR\* \[nvidia-drm\]"
                                    r"(?: \[GPU ID (?P<gpu_id>0x[0-9a-fA-F]+)\])?")),
    ("nvidia_modeset_error", re.compile(r"nvidia-modeset: ERROR: (?:(?P<gpu>GPU:\d+): )?")),
    # Machine checks: the host's memory or CPU reports a hardware error. An MCi_STATUS value printed with its bank
    # (mce.c's "CPU %d: Machine Check%s: %Lx Bank %d: %016Lx", the EDAC drivers' "CPU %d: Machine Check Event: %Lu
    # Bank %d: %016Lx") says itself whether the error was corrected: bit 61 (UC), the 0x2 bit of its first hex
    # digit. EDAC's per-controller counts ("EDAC MC3: 1 UE memory read error on ...", "... 1 CE ..."), AMD's
    # decoded "Error Status: Uncorrected, ..."/"Corrected error, no action required.", the panic of a fatal check,
    # and the kernel's notices of logged events (mce_notify_irq's "Machine check events logged", the CMCI storm
    # of corrected errors) say it in words.
    ("mce_uncorrected", re.compile(
        r"Machine Check(?: Exception| Event)?: [0-9a-fA-F]+ Bank \d+: (?:0x)?[2367abefABEF][0-9a-fA-F]{15}\b"
        r"|\bEDAC (?P<mc>[\w ]{1,24}): \d+ UE\b|Kernel panic - not syncing: Fatal (?:local )?[Mm]achine check"
        r"|\[Hardware Error\]: (?:Error Status: )?(?:System Fatal error|Uncorrected\b)")),
    ("mce_corrected", re.compile(
        r"Machine Check(?: Exception| Event)?: [0-9a-fA-F]+ Bank \d+: (?:0x)?[014589cdCD][0-9a-fA-F]{15}\b"
        r"|\bEDAC (?P<mc>[\w ]{1,24}): \d+ CE\b|Machine check events logged|CMCI storm detected"
        r"|\[Hardware Error\]: (?:Error Status: )?(?:Corrected error|Deferred error)")),
)
"""Code, pattern; the first that matches a line names it. An AER line names the device it is about
(``bdf``); an OOM kill and a hung task the process (``process``); a thermal line the CPU; a disabled
interrupt line its number; an NVIDIA display-stack error the GPU (nvidia-drm's GPU ID, nvidia-modeset's
GPU index)."""

HOST_KEYS: tuple[bytes, ...] = (b"AER: ", b"PCIe Bus Error", b"Killed process", b"Kill process",
                                b"blocked for more than", b"temperature above threshold", b"nobody cared",
                                b"*ERROR* [nvidia-drm]", b"nvidia-modeset: ERROR", b"achine Check",
                                b"achine check", b"EDAC ", b"[Hardware Error]", b"CMCI storm")
"""Words one of these lines must hold: what a streaming reader searches a chunk for before decoding."""
_GATE = re.compile("|".join(re.escape(k.decode()) for k in HOST_KEYS))


def host_message(line: str) -> tuple[str, str | None, str] | None:
    """``(code, subject, text)`` for a host-side kernel message on ``line``, else ``None``.

    ``subject`` is the PCI address (AER), ``process[pid]`` (OOM kill, hung task), ``cpu<N>``
    (thermal), ``irq<N>`` (a disabled interrupt line), the GPU (``gpu_id=0x...``, ``GPU:<n>``) or the EDAC
    memory controller (a machine check) the line names; ``text`` the message from where the pattern matched.
    """
    if _GATE.search(line) is None:
        return None
    for code, pattern in HOST_MESSAGES:
        if (m := pattern.search(line)) is None:
            continue
        groups = m.groupdict()
        if groups.get("bdf"):
            subject: str | None = groups["bdf"].lower()
        elif groups.get("process"):
            subject = f"{groups['process']}[{groups['pid']}]"
        elif groups.get("cpu"):
            subject = f"cpu{groups['cpu']}"
        elif groups.get("irq"):
            subject = f"irq{groups['irq']}"
        elif groups.get("gpu_id"):
            subject = f"gpu_id={groups['gpu_id'].lower()}"
        elif groups.get("mc"):
            subject = groups["mc"].strip().replace(" ", "_")
        else:
            subject = groups.get("gpu")
        return code, subject, line[m.start():].strip()[:300]
    return None
