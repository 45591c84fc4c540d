"""Host-side lines of a kernel log that say a GPU node is not fit for a job, though no GPU driver wrote them.

A node can fail a training job with a clean ``NVRM`` record: the PCIe link to the GPU reports
errors through the kernel's AER driver (``pcieport 0000:00:03.0: AER: Multiple Uncorrected
(Fatal) error received``), the job is killed by the OOM killer (``Out of memory: Killed process
25315 (python3)``), a process hangs in D state inside a driver (``INFO: task nvc:[driver]:5403
blocked for more than 120 seconds``), or the CPUs are clock-throttled by heat (``CPU5: Core
temperature above threshold, cpu clock throttled``). Each such line is recognised here by a
pattern and named by a code (:data:`HOST_MESSAGES`); what a code means, its verdict and its
operator action are the judge's (``checks/evidence_kernel.py``), as for the NIC driver messages
of :mod:`.nic_log`.

The texts are the kernel's own format strings (``drivers/pci/pcie/aer.c``: ``AER: %s%s error
message received from %s`` since 5.10, ``AER: %s%s error received: %s`` before, and the
``PCIe Bus Error: severity=%s`` record each one heads, its severity ``Corrected``/``Uncorrected``
in older kernels and ``Correctable``/``Uncorrectable`` in newer ones; ``mm/oom_kill.c``'s ``Out of
memory: Killed process`` and the older ``Killed process``; ``kernel/hung_task.c``;
``arch/x86/kernel/cpu/mce/therm_throt.c``), so one pattern covers every prefix style the line may carry.

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
)
"""Code, pattern; the first that matches a line names it. An AER line names the device it is about
(``bdf``); an OOM kill and a hung task the process (``process``); a thermal line the CPU."""

HOST_KEYS: tuple[bytes, ...] = (b"AER: ", b"PCIe Bus Error", b"Killed process", b"Kill process",
                                b"blocked for more than", b"temperature above threshold")
"""Words one of these lines must hold: what a streaming reader searches a chunk for before decoding."""
_GATE = re.compile("|".join(re.escape(k.decode()) for k in HOST_KEYS))


def host_message(line: str) -> tuple[str, str | None, str] | None:
    """``(code, subject, text)`` for a host-side kernel message on ``line``, else ``None``.

    ``subject`` is the PCI address (AER), ``process[pid]`` (OOM kill, hung task) or ``cpu<N>``
    (thermal) the line names; ``text`` the message from where the pattern matched.
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
        else:
            subject = f"cpu{groups['cpu']}" if groups.get("cpu") else None
        return code, subject, line[m.start():].strip()[:300]
    return None
