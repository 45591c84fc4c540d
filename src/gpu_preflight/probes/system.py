"""The ``system`` fact: host memory, disks, CPU, limits, NUMA and running services.

A replay judges the recorded node and only it: ``gpu-preflight snapshot`` records these
host facts (and the kernel log's Xid lines) beside the NVML dump under ``"host"``, and a
replay reads them back from there. A snapshot without them (taken by an older version)
yields facts marked ``not_recorded``, so every host check SKIPs saying why instead of
judging the machine the replay happens to run on.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ..model import NA, jsonable
from ..records import DiskUsage, SystemFacts
from ..registry import ProbeContext, probe

NOT_IN_SNAPSHOT = "not in the snapshot (taken without host facts, e.g. by an older gpu-preflight)"
SNAPSHOT_XID_LINES = 10_000  # the newest Xid-shaped lines a snapshot keeps


@probe("system")
def system_probe(ctx: ProbeContext) -> SystemFacts:
    """Read host resources (or a snapshot's); disk paths come from the config plus the report directory."""
    replay = ctx.inputs.replay
    if replay:
        from .gpu import load_dump

        return system_from_dump(load_dump(replay), str(replay))
    from ..backends.system import HOST_SAMPLER, read_system
    from .shared import PROCESS_SCAN

    scan = ctx.state.kept.get(PROCESS_SCAN)  # a monitor's: the process list re-read on a cadence
    refresh_s = ctx.config.system.process_scan_refresh_s
    return read_system(_disk_paths(ctx.config.system.disk_paths, ctx.inputs.report_dir),
                       processes=(lambda: scan.names(refresh_s)) if scan is not None else None,
                       sampler=ctx.state.kept.get(HOST_SAMPLER))


def _disk_paths(configured: Any, report_dir: Any) -> list[str]:
    paths = list(configured)
    if report_dir:
        paths.append(str(report_dir))
    return paths


def replay_hostname(dump: Mapping[str, Any], path: str) -> str:
    """The recorded node's name, else one that names the snapshot (never this machine's)."""
    host = dump.get("host")
    name = host.get("hostname") if isinstance(host, Mapping) else None
    return name if isinstance(name, str) and name else f"replay:{Path(path).name}"


def system_from_dump(dump: Mapping[str, Any], path: str) -> SystemFacts:
    """The host facts a snapshot recorded (``load_dump`` has checked their types)."""
    host = dump.get("host")
    hostname = replay_hostname(dump, path)
    recorded = host.get("system") if isinstance(host, Mapping) else None
    if not isinstance(recorded, Mapping):
        return SystemFacts(hostname=hostname, not_recorded=NOT_IN_SNAPSHOT)
    values: dict[str, Any] = {}
    for name in SystemFacts.__struct_fields__:
        if name in ("hostname", "not_recorded"):
            continue
        if name not in recorded:
            values[name] = NA("not in the snapshot") if name != "disks" else []
        elif name == "disks":
            values["disks"] = [DiskUsage(d["path"], _value(d.get("total_bytes")), _value(d.get("free_bytes")),
                                         _value(d.get("mountpoint"))) for d in recorded["disks"]]
        else:
            values[name] = _value(recorded[name])
    return SystemFacts(hostname=hostname, **values)


def _value(entry: Any) -> Any:
    if isinstance(entry, Mapping) and "na" in entry:
        return NA(str(entry["na"]))
    return NA("not in the snapshot") if entry is None else entry


def snapshot_host(config: Any, report_dir: str | None = None) -> dict[str, Any]:
    """This host's facts and kernel-log Xid lines, in the form a replay reads back."""
    from ..backends.system import read_system

    facts = read_system(_disk_paths(config.system.disk_paths, report_dir))
    system = jsonable(facts)
    system.pop("not_recorded", None)
    return {"hostname": os.uname().nodename, "captured_at": datetime.now(UTC).isoformat(),
            "system": system, "kernel_log": _snapshot_kernel_log()}


def _snapshot_kernel_log() -> dict[str, Any]:
    from ..backends.kernel_log import KernelLogUnavailable, read_kernel_log

    read_at = datetime.now(UTC)
    try:
        log = read_kernel_log()
    except KernelLogUnavailable as exc:
        return {"available": False, "read_at": read_at.isoformat(), "reason": f"cannot read kernel log: {exc}"}
    lines = [line for line in log.text.splitlines() if "Xid" in line or "xid" in line.lower()]
    return {"available": True, "source": log.source, "read_at": read_at.isoformat(),
            "boot_time": log.boot_time.isoformat() if log.boot_time else None,
            "lines": lines[-SNAPSHOT_XID_LINES:], "lines_dropped": max(0, len(lines) - SNAPSHOT_XID_LINES)}
