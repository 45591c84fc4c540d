"""The ``kernel_log`` fact: Xid events from dmesg, /dev/kmsg, the journal or a saved file."""

from __future__ import annotations

from datetime import UTC, datetime

from ..records import KernelLogFacts
from ..registry import ProbeContext, probe


@probe("kernel_log")
def kernel_log_probe(ctx: ProbeContext) -> KernelLogFacts:
    """Read the kernel log once and extract Xid events; an unreadable log is a fact too.

    ``--kernel-log FILE`` reads a saved log instead. A replayed NVML snapshot comes from
    another host, so its live kernel log would say nothing about it: without a file,
    replay records the log as unavailable.
    """
    now = datetime.now(UTC)
    path = ctx.options.get("kernel_log")
    if not path and ctx.options.get("replay"):
        return KernelLogFacts(False, "none", now, reason="replayed snapshot: no kernel log given "
                                                         "(pass --kernel-log FILE)")
    from ..backends.kernel_log import KernelLogUnavailable, read_kernel_log, read_kernel_log_file
    from ..parsers.kernel_log import parse_xid_events

    try:
        log = read_kernel_log_file(path) if path else read_kernel_log(timeout_s=min(ctx.timeout_s, 10.0))
    except KernelLogUnavailable as exc:
        return KernelLogFacts(False, str(path or "live"), now, reason=f"cannot read kernel log: {exc}")
    nvrm = "\n".join(line for line in log.text.splitlines() if "NVRM" in line)
    if nvrm:
        ctx.save_artifact("kernel_log_nvrm", "kernel_log_nvrm.txt", nvrm + "\n")
    events = parse_xid_events(log.text, boot_time=log.boot_time, now=now)
    return KernelLogFacts(True, log.source, now, events=events, failures=list(log.failures))
