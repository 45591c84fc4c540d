"""Xid events in the kernel log, judged by the Xid policy table."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import datetime
from functools import lru_cache
from typing import TYPE_CHECKING

from ..actions import BY_NVIDIA_ACTION, with_action
from ..config.schema import XidConfig
from ..model import Finding, Status
from ..records import GpuFacts, KernelLogFacts
from ..registry import CheckContext, check

if TYPE_CHECKING:
    from ..config.xid_policy import XidPolicy

SEVERITY_STATUS = {"fail": Status.FAIL, "warn": Status.WARN, "info": Status.PASS}


@lru_cache(maxsize=8)
def _policy(path: str | None, overrides: tuple[tuple[str, str], ...]) -> XidPolicy:
    from ..config.xid_policy import load_xid_policy  # parsed only when there is an event to judge (~35 ms)

    return load_xid_policy(path, dict(overrides) or None)


def xid_policy(cfg: XidConfig) -> XidPolicy:
    """The configured policy (shipped table, a site file, per-Xid overrides), cached."""
    return _policy(cfg.policy_file, tuple(sorted(cfg.severity_overrides.items())))


def _age(end: datetime | None, last: datetime | None) -> float | None:
    """Hours from an event to the window's end (``None`` when either is unknown)."""
    return None if end is None or last is None else round((end - last).total_seconds() / 3600, 1)


def _hours(age: float | None) -> str:
    if age is None:
        return "of unknown age"
    return f"{age:g} h" if age < 48 else f"{age / 24:.1f} days"


@check("gpu.xid", needs=("kernel_log", "gpu"), group="gpu_health", component="hardware_health")
def xid_events(ctx: CheckContext) -> Iterator[Finding]:
    """No serious Xid event in the kernel log within the window.

    Reads ``NVRM: Xid`` lines (/dev/kmsg, dmesg, journalctl, ``--kernel-log FILE`` or the
    log a replayed snapshot recorded) within ``xid.window_hours``: a live log's window
    ends now, a saved log's at its last timestamp, a snapshot's when it was taken. Every
    finding says which window it covers and how many events fell outside it. Groups
    events per Xid and GPU and applies the Xid catalogue (``data/xid_policy.toml``, every Xid
    NVIDIA publishes with its verdict and operator action, rendered as docs/xids.md; replaceable
    with ``xid.policy_file`` and ``xid.severity_overrides``). An Xid that would FAIL but is older
    than the window still WARNs, naming its age, unless the log shows a driver load, a boot or
    that GPU's recovery after it. A line shaped like an Xid event
    that cannot be read (the number cut off, an unclosed parenthesis) is an ERROR: it may
    have been any Xid. SKIP with the reason when this host's kernel log cannot be read (an
    unreadable log is never reported as "no Xid errors"; containers often deny it); ERROR
    when a saved log the user named (``--kernel-log FILE``) holds nothing readable — empty,
    binary — since the user asked for exactly that file to be judged. SKIP on a node without
    usable GPUs when the log holds no Xid (Xids found there are still reported).
    """
    log: KernelLogFacts = ctx.fact("kernel_log")
    if not log.available or log.tally is None:
        named = log.source.startswith("file:")
        yield ctx.finding(Status.ERROR if named else Status.SKIP, ctx.host,
                          "saved_log_unreadable" if named else "log_unreadable", log.reason or "kernel log not read",
                          details={"failures": log.failures},
                          recommendation="Give a saved kernel log (dmesg -T, journalctl -k) with its lines."
                          if named else None)
        return
    tally = log.tally
    window = tally.window.describe()
    coverage = {**tally.coverage(), "source": log.source}
    outside = f"; {tally.outside} older event(s) left out" if tally.outside else ""
    verdicts = xid_policy(ctx.config.xid).judge_tally(tally) if tally.groups or tally.stale else []
    from ..records.xid import normalize_pci

    gpus: GpuFacts = ctx.fact("gpu")
    by_pci = {}
    for g in gpus.gpus:
        if isinstance(g.pci_bus_id, str):
            with contextlib.suppress(ValueError):
                by_pci[normalize_pci(g.pci_bus_id)] = g.label
    shown = 0
    if tally.unparsed:
        shown += 1
        examples = [u.raw for u in tally.unparsed_examples]
        yield ctx.finding(
            Status.ERROR, ctx.host, "xid_unparsed",
            f"{tally.unparsed} line(s) shaped like an Xid event could not be read in {window}{outside}: "
            f"{tally.unparsed_examples[0].reason}: {examples[0][:120]}",
            observed=tally.unparsed, unit="lines",
            recommendation="Read these lines in the raw kernel log (kernel_log_nvrm.txt): a cut-off Xid "
                           "may be any Xid, including 79 (GPU fallen off the bus).",
            details={**coverage, "examples": examples, "reasons": sorted({u.reason for u in tally.unparsed_examples})},
        )
    for v in verdicts:
        if v.severity == "ignore":
            continue
        shown += 1
        label = by_pci.get(v.pci or "", f"pci:{v.pci}" if v.pci else "unknown-gpu")
        when = f"{v.first:%Y-%m-%d %H:%M}..{v.last:%H:%M} UTC" if v.first and v.last else "undated"
        status = SEVERITY_STATUS[v.severity]
        details = {**coverage, "xid": v.xid, "pci": v.pci, "cause": v.rule.cause, "action": v.rule.action,
                   "first": v.first, "last": v.last, "undated": v.undated, "examples": list(v.examples)}
        if v.kind != "xid":
            details["kind"] = v.kind
        where = f"in {window}{outside}"
        if v.before_window:
            age = _age(tally.window.end, v.last)
            details.update(before_window=True, age_hours=age, resets_in_log=tally.resets)
            where = (f"{_hours(age)} before the end of {window}, with no driver load, boot or recovery of "
                     f"this GPU after it in the log (it FAILs when recent)")
        yield ctx.finding(
            status, f"{ctx.host}/{label}", v.code + ("_before_window" if v.before_window else ""),
            f"{v.what} ({v.rule.name}) x{v.count} on {label}, {when}, {where}: "
            f"{v.message.strip()[:160]}",
            observed=v.count, expected=f"< {v.rule.count}" if v.rule.count > 1 else 0, unit="events",
            recommendation=v.rule.recommendation,
            details=with_action(details, BY_NVIDIA_ACTION.get(v.rule.action) if status is not Status.PASS else None),
        )
    if not shown and not gpus.available:
        yield ctx.finding(Status.SKIP, ctx.host, "no_gpus",
                          f"no Xid events in {window}{outside}, and no GPU to judge: {gpus.reason}", details=coverage)
    elif not shown:
        yield ctx.finding(Status.PASS, ctx.host, "ok",
                          f"no Xid events needing attention in {window} ({log.source}){outside}",
                          observed=0, unit="events", details=coverage)
