"""Judging the NVSwitch fabric's own log: the fabric manager's NVSwitch errors (``nvswitch.fabric_manager``).

The fabric manager reports each NVSwitch error the switch driver raised with the severity it gives it
(``detected NVSwitch non-fatal error 12028 on fid 0 on NVSwitch pci bus id ... physical id 3 port 61``): the
same event the kernel log shows as an ``SXid`` line, judged the same way (docs/xids.md, NVSwitch SXids). A fatal
one stalls NVLink traffic through that switch until the switches and GPUs are reset: FAIL (``reboot_node``); a
non-fatal one was contained, but jobs may run slower: WARN (``monitor``). Any other line it logs as ``[ERROR]``
or ``[FATAL]`` is the fabric manager saying something failed (a GPU it could not register, a switch it could
not configure): WARN naming the first (``monitor``), FAIL for ``[FATAL]``. Errors older than the Xid window
(``xid.window_hours`` back from the log's last line) are counted, not judged, as for the kernel log's.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from ..actions import Action
from ..model import Finding, Status
from ..records.xid import xid_window
from ..registry import declare
from .evidence import judges
from .evidence_kernel import in_window

if TYPE_CHECKING:
    from ..config import Config
    from ..records.nvswitch import FabricManagerLog, FmMessage

__all__ = ["judge_fabric_manager_log"]

NVSWITCH_FABRIC_MANAGER = declare(
    "nvswitch.fabric_manager", "The fabric manager reported no NVSwitch error",
    """A saved fabric manager log (``/var/log/fabricmanager.log``): a fatal NVSwitch error it reports
    (``detected NVSwitch fatal error <SXid> on ... NVSwitch pci bus id ...``) FAILs (``reboot_node``: NVLink traffic
    through that switch is stalled until the switches and GPUs are reset); a non-fatal one WARNs (``monitor``),
    as the kernel log's SXid lines do; any other ``[ERROR]`` line WARNs and a ``[FATAL]`` one FAILs. Errors older
    than the Xid window before the log's last line are counted, not judged.""",
    group="gpu_links", component="hardware_health", settings=("xid.window_hours",),
    actions={"nvswitch_fatal": Action.REBOOT_NODE, "fm_fatal": Action.REBOOT_NODE,
             "nvswitch_nonfatal": Action.MONITOR, "fm_error": Action.MONITOR})

_ADVICE = {
    "nvswitch_fatal": "NVLink traffic through this NVSwitch is stalled: drain the node and restart it to reset the "
                      "NVSwitches and GPUs; look the SXid up in the Fabric Manager user guide if it recurs.",
    "nvswitch_nonfatal": "Contained by the NVSwitch driver and jobs continue, but they may run slower: watch the "
                         "count, and look the SXid up in the Fabric Manager user guide if it keeps coming.",
    "fm_fatal": "The fabric manager stopped on this error: GPUs it has not registered cannot run CUDA work "
                "(cudaErrorSystemNotReady); fix the cause it names and restart nvidia-fabricmanager.",
    "fm_error": "Read the line: a GPU or NVSwitch the fabric manager could not set up is not usable over NVLink.",
}


@judges("fabricmanager-log")
def judge_fabric_manager_log(record: FabricManagerLog, config: Config, source: str) -> Iterator[Finding]:
    """NVSwitch errors by SXid, severity and switch; other errors by severity (see :data:`NVSWITCH_FABRIC_MANAGER`)."""
    end = datetime.fromisoformat(record.last_timestamp) if record.last_timestamp else None
    window = xid_window(config.xid.window_hours, log_end=end, saved=True, basis="the log's last line")
    groups: dict[tuple[str, str | None], list[FmMessage]] = {}
    older = 0
    for messages in (record.switch_errors, record.errors):
        recent, old = in_window(messages, window.start)
        older += len(old)
        for m in recent:
            key: tuple[str, str | None]
            if m.sxid is not None:
                code = "nvswitch_fatal" if m.fatal else "nvswitch_nonfatal"
                key = (code, f"{m.switch}/sxid{m.sxid}")
            else:
                key = ("fm_fatal" if m.fatal else "fm_error", None)
            groups.setdefault(key, []).append(m)
    for (code, subject), found in groups.items():
        status = Status.FAIL if code in ("nvswitch_fatal", "fm_fatal") else Status.WARN
        what = (f"{'fatal' if code == 'nvswitch_fatal' else 'non-fatal'} NVSwitch error {found[0].sxid}"
                if found[0].sxid is not None else "the fabric manager logged an error")
        ports = sorted({m.port for m in found if m.port is not None})
        yield Finding("nvswitch.fabric_manager", status, f"{source}/{subject}" if subject else source, code,
                      f"{what} ({len(found)} time(s){', ports ' + ', '.join(map(str, ports)) if ports else ''}): "
                      f"{found[0].message[:160]}", observed=len(found), unit="messages",
                      recommendation=_ADVICE[code],
                      details={"examples": [m.message for m in found[:3]], "window": window.describe(),
                               "service_starts": record.starts})
    if not groups:
        yield Finding("nvswitch.fabric_manager", Status.PASS, source, "ok",
                      f"no NVSwitch or fabric manager error in {window.describe()} ({record.lines} log lines"
                      + (f"; {older} older error(s) counted, not judged" if older else "") + ")",
                      observed=record.lines, unit="lines", details={"service_starts": record.starts})
