"""The ``kernel_log`` fact: Xid events from /dev/kmsg, dmesg, the journal, a saved file or a snapshot.

Every source is counted in a window from :func:`~gpu_preflight.config.xid_window.xid_window`:
a live log's window ends now, a saved file's at its last timestamp, a replayed snapshot's
when the snapshot was taken. Live and snapshot lines go line by line into one
:class:`~gpu_preflight.config.xid_window.XidCounter`; a saved file is streamed once through
the kernel-log parser ``judge`` uses (:func:`gpu_preflight.parsers.dmesg.scan`), which finds
its last timestamp and keeps an exact timeline of its events. Only counts and a few example
lines are kept.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..records import KernelLogFacts
from ..registry import ProbeContext, probe

if TYPE_CHECKING:
    from ..backends.kernel_log import KernelLog

NVRM_ARTIFACT_LINES = 2000  # the newest NVRM lines saved beside the report


@probe("kernel_log")
def kernel_log_probe(ctx: ProbeContext) -> KernelLogFacts:
    """Read the kernel log once and count Xid events in the window; an unreadable log is a fact too.

    ``--kernel-log FILE`` reads a saved log instead (a path that is not a readable regular
    file raises: the run cannot judge what the user asked for). A replayed NVML snapshot
    comes from another host, so its live kernel log would say nothing about it: replay
    uses the log recorded in the snapshot, else records the log as unavailable.
    """
    now = datetime.now(UTC)
    hours = ctx.config.xid.window_hours
    path = ctx.inputs.kernel_log
    if path:
        return saved_log_facts(ctx, str(path), hours, now)
    replay = ctx.inputs.replay
    if replay:
        from .gpu import load_dump

        return snapshot_log_facts(load_dump(replay).get("host"), hours, now)
    from ..backends.kernel_log import KernelLogUnavailable

    try:
        log = live_kernel_log(ctx)
    except KernelLogUnavailable as exc:
        return KernelLogFacts(False, "live", now, reason=f"cannot read kernel log: {exc}")
    from ..config.xid_window import xid_window

    window = xid_window(hours, now=now)
    return _count(ctx, log.source, now, window, log.text.splitlines(), log.boot_time, now, list(log.failures))


def live_kernel_log(ctx: ProbeContext) -> KernelLog:
    """This host's kernel log, read once per run and shared by every probe that needs it.

    Under a monitor the run's options carry a
    :class:`~gpu_preflight.backends.kernel_log.KmsgFollower`, which reads only what the
    kernel wrote since the last tick. Raises ``KernelLogUnavailable`` when no source works.
    """
    from ..backends.kernel_log import read_kernel_log
    from .shared import KERNEL_LOG_FOLLOWER, once

    timeout_s = min(ctx.timeout_s, 10.0)
    follower = ctx.state.kept.get(KERNEL_LOG_FOLLOWER)
    if follower is not None:
        return once(ctx.state, "kernel_log", lambda: follower.poll(timeout_s))  # type: ignore[no-any-return]
    return once(ctx.state, "kernel_log", lambda: read_kernel_log(timeout_s=timeout_s))


def saved_log_facts(ctx: ProbeContext | None, path: str, hours: float, now: datetime) -> KernelLogFacts:
    """A saved log, streamed once through the parser ``judge`` uses; its window ends at its last timestamp."""
    from ..backends.kernel_log import KernelLogUnavailable, SavedKernelLog
    from ..parsers.errors import ParseError

    log = SavedKernelLog(path)
    recent: deque[str] = deque(maxlen=NVRM_ARTIFACT_LINES)
    try:
        record = log.scan(now=now, recent=recent)
    except ParseError as exc:
        return KernelLogFacts(False, log.source, now, reason=f"cannot read kernel log: {path}: {exc.message}")
    if not record.readable:
        return KernelLogFacts(False, log.source, now, reason=f"cannot read kernel log: "
                                                             f"{KernelLogUnavailable(f'{path}: {record.denied}')}")
    window = record.window(hours)
    if recent and ctx is not None:
        ctx.save_artifact("kernel_log_nvrm", "kernel_log_nvrm.txt", "\n".join(recent) + "\n")
    return KernelLogFacts(True, log.source, now, tally=record.xid_tally(window), failures=[])


def snapshot_log_facts(host: Any, hours: float, now: datetime) -> KernelLogFacts:
    """The kernel-log lines a snapshot recorded, judged as of the time the snapshot was taken."""
    from ..config.xid_window import xid_window

    recorded = host.get("kernel_log") if isinstance(host, Mapping) else None
    if not isinstance(recorded, Mapping):
        return KernelLogFacts(False, "snapshot", now, reason="kernel log not in the snapshot "
                                                             "(pass --kernel-log FILE)")
    read_at = _when(recorded.get("read_at")) or now
    if not recorded.get("available"):
        return KernelLogFacts(False, "snapshot", read_at, reason=f"snapshot: {recorded.get('reason')}")
    window = xid_window(hours, log_end=read_at, saved=True, basis="snapshot time")
    lines = [line for line in recorded.get("lines", []) if isinstance(line, str)]
    source = f"snapshot:{recorded.get('source', 'kernel log')}"
    return _count(None, source, read_at, window, lines, _when(recorded.get("boot_time")), read_at, [])


def _count(ctx: ProbeContext | None, source: str, read_at: datetime, window: Any, lines: Iterable[str],
           boot_time: datetime | None, now: datetime, failures: list[str]) -> KernelLogFacts:
    from ..config.xid_window import XidCounter

    counter = XidCounter(window)
    nvrm: deque[str] = deque(maxlen=NVRM_ARTIFACT_LINES)
    read: Callable[[str], Any] | None = None  # the parser and its patterns load only for a log with NVRM/Xid lines
    for line in lines:
        if "Xid" not in line and "xid" not in line and "XID" not in line and "NVRM" not in line \
                and "nvidia-nvswitch" not in line:
            continue
        if read is None:
            from ..parsers.kernel_log import KernelLineReader
            from ..parsers.xid_timeline import reset_mark

            read = KernelLineReader(boot_time=boot_time, now=now).read
        nvrm.append(line[:1024])
        if reset_mark(line):  # the NVIDIA driver (re)loaded: older Xids before it are not left unreset
            counter.add_reset()
        for found in read(line):  # Xid lines, driver messages without an Xid, SXids, named causes
            counter.add(found)
    if nvrm and ctx is not None:
        ctx.save_artifact("kernel_log_nvrm", "kernel_log_nvrm.txt", "\n".join(nvrm) + "\n")
    return KernelLogFacts(True, source, read_at, tally=counter.tally(), failures=failures)


def _when(value: Any) -> datetime | None:
    if not isinstance(value, str):
        return None
    try:
        stamp = datetime.fromisoformat(value)
    except ValueError:
        return None
    return stamp if stamp.utcoffset() is not None else None
