"""Xid events in the kernel log, judged by the Xid policy table."""

from __future__ import annotations

from collections.abc import Iterator
from functools import lru_cache
from typing import TYPE_CHECKING

from ..config.schema import XidConfig
from ..model import Finding, Status
from ..records import GpuFacts, KernelLogFacts
from ..registry import CheckContext, check

if TYPE_CHECKING:
    from ..config.xid_policy import XidPolicy

SEVERITY_STATUS = {"fail": Status.FAIL, "warn": Status.WARN, "info": Status.PASS}


@lru_cache(maxsize=8)
def _policy(path: str | None, overrides: tuple[tuple[str, str], ...]) -> XidPolicy:
    from ..config.xid_policy import load_xid_policy  # parsed only when there is a log to judge

    return load_xid_policy(path, dict(overrides) or None)


def xid_policy(cfg: XidConfig) -> XidPolicy:
    """The configured policy (shipped table, a site file, per-Xid overrides), cached."""
    return _policy(cfg.policy_file, tuple(sorted(cfg.severity_overrides.items())))


@check("gpu.xid", needs=("kernel_log", "gpu"))
def xid_events(ctx: CheckContext) -> Iterator[Finding]:
    """No serious Xid event in the kernel log within the window.

    Reads ``NVRM: Xid`` lines (dmesg, /dev/kmsg, journalctl, or ``--kernel-log FILE``)
    within ``xid.window_hours``, groups them per Xid and GPU, and applies the Xid policy
    table (``data/xid_policy.toml``, replaceable with ``xid.policy_file`` and
    ``xid.severity_overrides``): hardware Xids such as 48, 63/64, 74, 79, 94/95, 119 FAIL
    or WARN with NVIDIA's recommended action; application Xids (13, 31, 43) WARN only
    when repeated. SKIP with the reason when the kernel log cannot be read — an
    unreadable log is never reported as "no Xid errors" — and on a node without usable
    GPUs when the log holds no Xid (Xids found there are still reported).
    """
    log: KernelLogFacts = ctx.fact("kernel_log")
    if not log.available:
        yield Finding("gpu.xid", Status.SKIP, ctx.host, "log_unreadable", log.reason or "kernel log not read",
                      details={"failures": log.failures})
        return
    window = ctx.config.xid.window_hours
    verdicts = xid_policy(ctx.config.xid).judge(log.events, now=log.read_at, window_hours=window)
    from ..parsers.kernel_log import normalize_pci

    gpus: GpuFacts = ctx.fact("gpu")
    by_pci = {normalize_pci(g.pci_bus_id): g.label for g in gpus.gpus if isinstance(g.pci_bus_id, str)}
    shown = 0
    for v in verdicts:
        if v.severity == "ignore":
            continue
        shown += 1
        label = by_pci.get(v.pci or "", f"pci:{v.pci}" if v.pci else "unknown-gpu")
        when = f"{v.first:%Y-%m-%d %H:%M}..{v.last:%H:%M} UTC" if v.first and v.last else "undated"
        yield Finding(
            "gpu.xid", SEVERITY_STATUS[v.severity], f"{ctx.host}/{label}", f"xid_{v.xid}",
            f"Xid {v.xid} ({v.rule.name}) x{v.count} on {label}, {when}: {v.message.strip()[:160]}",
            observed=v.count, expected=f"< {v.rule.count}" if v.rule.count > 1 else 0, unit="events",
            recommendation=v.rule.recommendation,
            details={"xid": v.xid, "pci": v.pci, "cause": v.rule.cause, "action": v.rule.action,
                     "first": v.first, "last": v.last, "undated": v.undated, "source": log.source},
        )
    if not shown and not gpus.available:
        yield Finding("gpu.xid", Status.SKIP, ctx.host, "no_gpus",
                      f"no Xid events, and no GPU to judge: {gpus.reason}", details={"source": log.source})
    elif not shown:
        yield Finding("gpu.xid", Status.PASS, ctx.host, "ok",
                      f"no Xid events needing attention in the last {window:g} h ({log.source})",
                      observed=0, unit="events", details={"source": log.source, "events_read": len(log.events)})
