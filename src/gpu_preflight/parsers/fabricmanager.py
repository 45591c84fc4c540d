"""NVIDIA Fabric Manager's own log (``/var/log/fabricmanager.log``, ``nv-fabricmanager``'s file on NVSwitch systems).

On an HGX/DGX baseboard the fabric manager programs the NVSwitches and registers every GPU with the NVLink
fabric; its log is where it reports what the NVSwitch driver saw. Every line it writes is
``[Mon D YYYY HH:MM:SS] [LEVEL] [tid N] message`` (a message may run onto the following lines, such as the
inband-message payloads of NVLink SHARP multicast team setup), and each start of the service opens with
``Fabric Manager Log initializing at: MM/DD/YYYY HH:MM:SS.mmm``. What this reader keeps:

* the NVSwitch errors it reports, ``detected NVSwitch fatal error 12028 on fid 0 on NVSwitch pci bus id
  00000000:86:00.0 physical id 3 port 61`` (or ``non-fatal``): the SXid the NVSwitch driver logged, with the
  severity the fabric manager gave it;
* every other ``[ERROR]``/``[FATAL]`` line, the fabric manager saying something failed;
* each start of the service (a restart re-registers the GPUs), and the last timestamp (the log's end).

Real texts: leptonai/gpud's fabric-manager test data (an 8-GPU NVSwitch node, Feb 2025; an HGX H100 with
Fabric Manager 535.161.08, Dec 2024), tests/fixtures/field/kernel.
"""

from __future__ import annotations

import re
from datetime import UTC

from ..records.nvswitch import FabricManagerLog, FmMessage
from .detect import parser
from .errors import ParseError
from .kernel_log import civil_time
from .text import prepare

KIND = "fabricmanager-log"

_LINE = re.compile(r"^\s*\[(?P<mon>[A-Z][a-z]{2}) {1,2}(?P<day>\d{1,2}) (?P<year>\d{4}) (?P<time>\d{2}:\d{2}:\d{2})\] "
                   r"\[(?P<level>[A-Z]{4,7})\] \[tid (?P<tid>\d{1,10})\] (?P<msg>.*)$")
_START = re.compile(r"^\s*Fabric Manager Log initializing at: (?P<stamp>\d{1,2}/\d{1,2}/\d{4} \d{2}:\d{2}:\d{2})")
_SWITCH_ERROR = re.compile(r"detected NVSwitch (?P<sev>fatal|non-fatal) error (?P<sxid>\d{1,6}) on fid \d+ on NVSwitch "
                           r"pci bus id (?P<pci>[0-9A-Fa-f:.]{7,16}) physical id (?P<phys>\d+)(?: port (?P<port>\d+))?")


def sniff(text: str) -> int:
    """Two of its log lines, or the line a start of the service opens with (80)."""
    lines = text.splitlines()[:500]
    if any(_START.match(line) for line in lines):
        return 80
    return 80 if sum(1 for line in lines if _LINE.match(line)) >= 2 else 0


@parser(KIND, sniff=sniff, title="NVIDIA Fabric Manager log (fabricmanager.log)")
def parse(text: str) -> FabricManagerLog:
    """The NVSwitch errors, other errors and starts of a fabric manager log; without one of its lines, not one."""
    record = FabricManagerLog()
    for line in prepare(KIND, text):
        if _START.match(line):
            record.starts += 1
            continue
        if (m := _LINE.match(line)) is None:
            continue
        record.lines += 1
        when = civil_time(int(m.group("year")), m.group("mon"), m.group("day"), m.group("time"), UTC)
        stamp = when.isoformat() if when is not None else None
        record.last_timestamp = stamp or record.last_timestamp
        level, message = m.group("level"), m.group("msg").strip()[:300]
        if (e := _SWITCH_ERROR.search(message)) is not None:
            record.switch_errors.append(FmMessage(stamp, message, fatal=e.group("sev") == "fatal",
                                                  sxid=int(e.group("sxid")), switch=e.group("pci").lower(),
                                                  port=int(e.group("port")) if e.group("port") else None))
        elif level in ("ERROR", "FATAL"):
            record.errors.append(FmMessage(stamp, message, fatal=level == "FATAL"))
    if not record.lines:
        raise ParseError(KIND, "no fabric manager log line ('[Mon D YYYY HH:MM:SS] [LEVEL] [tid N] ...')")
    return record
