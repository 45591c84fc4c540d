"""Storage throughput and fsync latency of the job's checkpoint and data directories (``--full``).

Free space (``system.disk``) says a checkpoint fits; this says how long writing it takes. A
degraded RAID, a throttled network volume or an SSD out of spare blocks keeps its space and
turns every checkpoint into minutes of every rank waiting.
"""

from __future__ import annotations

from collections.abc import Iterator

import msgspec

from ..config.fields import setting, settings_block, settings_of
from ..model import Finding, Status
from ..records.storage import IoMeasurement, StorageFacts
from ..registry import CheckContext, check

SETTINGS = ("system.io_paths", "system.io_size_mib", "system.io_throughput_fail_mbps",
            "system.io_throughput_warn_mbps", "system.io_fsync_warn_ms", "system.io_fsync_fail_ms")


def _grade(value: float, warn: float, fail: float, *, higher_is_better: bool) -> Status:
    """PASS, WARN or FAIL of one figure against its two thresholds (NaN, not measured, is never PASS)."""
    if value != value:  # NaN: the pass did not run before the deadline
        return Status.ERROR
    def worse(limit: float) -> bool:
        return value < limit if higher_is_better else value > limit

    return Status.FAIL if worse(fail) else Status.WARN if worse(warn) else Status.PASS


def judge_io(m: IoMeasurement, fail_mbps: float, warn_mbps: float, warn_ms: float,
             fail_ms: float) -> tuple[Status, str]:
    """The directory's worst status and the code naming what set it (``ok`` when all passed)."""
    graded = [
        (_grade(m.write_mbps, warn_mbps, fail_mbps, higher_is_better=True), "slow_write"),
        (_grade(m.read_mbps, warn_mbps, fail_mbps, higher_is_better=True), "slow_read"),
        (_grade(m.fsync_p50_ms, warn_ms, fail_ms, higher_is_better=False), "slow_fsync"),
    ]
    status, code = max(graded, key=lambda g: g[0].rank)
    return status, code if status is not Status.PASS else "ok"


@settings_block("system", order=70)
class IoSettings(msgspec.Struct):
    """What the storage measurement is judged against (system.io; where and how much it measures is
    the config layer's: ``IoReadSettings``)."""

    io_throughput_fail_mbps: float = setting(
        100, "Sequential write or read slower than this FAILs (checkpoints stall every rank).", "MB/s",
        min=0, max=1e6
    )
    io_throughput_warn_mbps: float = setting(
        500, "Sequential write or read slower than this WARNs.", "MB/s", min=0, max=1e6
    )
    io_fsync_warn_ms: float = setting(
        50, "Median fsync of a small append slower than this WARNs.", "ms", min=0, max=1e6
    )
    io_fsync_fail_ms: float = setting(
        1000, "Median fsync of a small append slower than this FAILs (a checkpoint is not durable until it "
        "returns).", "ms", min=0, max=1e6
    )


@check("system.io", needs=("storage",), suites=("full",), group="system_resources",
       component="resource_management", settings=SETTINGS)
def io(ctx: CheckContext) -> Iterator[Finding]:
    """Checkpoint and data directories write and read fast enough, and fsync returns promptly.

    Each directory of ``system.io_paths`` gets a file of ``system.io_size_mib`` written and read
    back (``O_DIRECT`` where the file system allows it) and 32 small fsyncs: FAIL when sequential
    write or read is below ``system.io_throughput_fail_mbps`` or the median fsync above
    ``system.io_fsync_fail_ms``, WARN against the ``_warn_`` settings. A directory that could not
    be measured (missing, read-only, full) is an ERROR naming why, never a PASS.
    """
    facts: StorageFacts = ctx.fact("storage")
    cfg = settings_of(ctx.config, IoSettings)
    if facts.skipped:
        yield ctx.finding(Status.SKIP, ctx.host, "not_measured", facts.skipped)
        return
    if not facts.results:
        yield ctx.finding(Status.SKIP, ctx.host, "no_paths", "no directories configured (system.io_paths)")
    for r in facts.results:
        subject = f"{ctx.host}:{r.path}"
        m = r.measurement
        if m is None:
            yield ctx.finding(Status.ERROR, subject, "unmeasured", f"{r.path}: could not measure: {r.error}",
                              recommendation="Check that the directory exists, is writable and has free space, "
                                             "or remove it from system.io_paths.")
            continue
        status, code = judge_io(m, cfg.io_throughput_fail_mbps, cfg.io_throughput_warn_mbps,
                                cfg.io_fsync_warn_ms, cfg.io_fsync_fail_ms)
        how = "O_DIRECT" if m.direct else "buffered, page cache dropped"
        cut = ", cut short by system.io_timeout_s" if m.cut_short else ""
        summary = (f"{r.path}: write {m.write_mbps:g} MB/s, read {m.read_mbps:g} MB/s, fsync {m.fsync_p50_ms:g} ms "
                   f"median ({m.fsync_max_ms:g} ms max of {m.fsyncs}); {m.bytes >> 20} MiB, {how}{cut}")
        expected = (f"write/read >= {cfg.io_throughput_warn_mbps:g} MB/s, fsync <= {cfg.io_fsync_warn_ms:g} ms")
        advice = None if status is Status.PASS else (
            f"{r.path} is too slow for checkpoints: check the device's health (smartctl, RAID state), the volume's "
            "provisioned throughput, or point the job's checkpoints at local NVMe.")
        yield ctx.finding(status, subject, code, summary, observed=min(m.write_mbps, m.read_mbps),
                          expected=expected, unit="MB/s", recommendation=advice,
                          details={"write_mbps": m.write_mbps, "read_mbps": m.read_mbps,
                                   "fsync_p50_ms": m.fsync_p50_ms, "fsync_max_ms": m.fsync_max_ms,
                                   "fsyncs": m.fsyncs, "bytes": m.bytes, "direct": m.direct,
                                   "cut_short": m.cut_short})
