"""A port's PortInfo as infiniband-diags dumps it: ``ibportstate`` and ``smpquery portinfo``.

Both ask the subnet management agent for one port's PortInfo and print a header, ``# Port info: Lid 13399 port 1``
(``portid2str``: ``Lid N`` or a directed route, ``DR path slid 0; dlid 0; 0,1``), then one dotted line per field
(libibmad dump.c ``_dump_fields``: ``LinkState:.......................Active``,
``PhysLinkState:...................LinkUp``, ``LinkWidthActive:.................4X``,
``LinkSpeedActive:.................10.0 Gbps``, ``LinkSpeedExtActive:..............53.125 Gbps``). ``ibportstate``
puts ``CA/RT PortInfo:`` or ``Switch PortInfo:`` above it (``Initial ... PortInfo:`` and ``After PortInfo set:``
around a change it made). The state names are libibmad's (``mad_dump_portstate``: Down, Initialize, Armed,
Active; ``mad_dump_physportstate``: Sleep, Polling, Disabled, PortConfigurationTraining, LinkUp,
LinkErrorRecovery, PhyTest); :func:`~.infiniband.canonical_state` reads them as it reads ibstat's (``Active`` is
ACTIVE, ``Initialize`` INIT, ``LinkUp`` LINKUP), so the ``ib.ports`` rules judge the port as they judge ``ibstat``'s.
PortInfo is a subnet-management attribute: the port is an InfiniBand port.

A dump printed twice (``Initial`` and ``After PortInfo set``) is two snapshots of the port: the later one is its
state now. Its failures are ``IBEXIT``'s ``ibportstate: iberror: failed: smp query portinfo failed``
(ibdiag_common.c ibexit): alone, the port was not read, which is no verdict on it (a LID no SMP reaches, a
remote port, an argument refused): the text is read but not judged (ERROR), as ``perfquery``'s own is.
"""

from __future__ import annotations

import re

from ..records.fabric import IbDevice, IbDevicesRecord, IbPort
from .detect import parser
from .errors import ParseError
from .infiniband import canonical_state
from .text import is_noise, prepare

KIND = "ibportstate"

_HEADER = re.compile(r"^# Port info: (?P<dest>[^\n]{1,120}?) port (?P<port>\d{1,3})\s*$")
_FIELD = re.compile(r"^(?P<name>LinkState|PhysLinkState|LinkWidthActive|LinkSpeedActive|LinkSpeedExtActive|Lid|SMLid)"
                    r":\.{2,80}(?P<value>[^\n]{0,80}?)\s*$")
_IBERROR = re.compile(r"^(?:ibportstate|smpquery): iberror: (?:\[pid \d{1,9}\] [\w ]{1,60}: )?failed: .{1,300}$")
_WIDTH = re.compile(r"^(\d{1,2})X$")
_SPEED = re.compile(r"^(\d{1,3}(?:\.\d{1,6})?) Gbps$")
# The extended speeds are signalling rates (libibmad mad_dump_linkspeedext); ibstat's Rate and ibv_devinfo's
# active_speed give the lane's data rate (FDR 14, EDR 25, HDR 50, NDR 100, XDR 200): the rate ib.ports compares.
_DATA_RATE = {"14.0625": 14.0, "25.78125": 25.0, "53.125": 50.0, "106.25": 100.0, "212.5": 200.0}


def sniff(text: str) -> int:
    """The ``# Port info:`` header with a ``LinkState`` line (90), or IBEXIT's line of either tool (80)."""
    lines = [line.strip() for line in text.splitlines()[:300]]
    if any(_HEADER.match(line) for line in lines) and any(line.startswith("LinkState:.") for line in lines):
        return 90
    return 80 if any(_IBERROR.match(line) for line in lines) else 0


def _rate(fields: dict[str, str]) -> float | None:
    """Active width times active speed, the extended speed where one is active (FDR and later); ``None`` where
    either is not shown or not a number (``undefined (N)``)."""
    width = _WIDTH.match(fields.get("LinkWidthActive", ""))
    ext = fields.get("LinkSpeedExtActive", "No Extended Speed")
    speed = _SPEED.match(fields.get("LinkSpeedActive", "") if ext == "No Extended Speed" else ext)
    if not (width and speed):
        return None
    return round(int(width.group(1)) * _DATA_RATE.get(speed.group(1), float(speed.group(1))), 3)


def _port(number: int, fields: dict[str, str]) -> IbPort:
    """A state libibmad prints as ``?(N)`` is kept as printed, one the dump does not show is ``UNKNOWN``: never
    read as up."""
    state = fields.get("LinkState")
    phys = fields.get("PhysLinkState")
    lid = fields.get("Lid", "")
    sm_lid = fields.get("SMLid", "")
    return IbPort(number, state=canonical_state(state) or "UNKNOWN", physical_state=canonical_state(phys),
                  rate_gbps=_rate(fields), link_layer="InfiniBand",
                  lid=int(lid) if lid.isdigit() else None, sm_lid=int(sm_lid) if sm_lid.isdigit() else None)


@parser(KIND, sniff=sniff, title="ibportstate / smpquery portinfo (a port's PortInfo)")
def parse(text: str) -> IbDevicesRecord:
    """Every ``# Port info:`` dump, one device per destination (``Lid 13399``), its last dump of a port kept."""
    record = IbDevicesRecord(format="ibportstate")
    dumps: list[tuple[str, int, dict[str, str]]] = []
    failed: list[str] = []
    for line in prepare(KIND, text):
        line = line.strip()
        if not line or is_noise(line):
            continue
        if m := _HEADER.match(line):
            dumps.append((m.group("dest"), int(m.group("port")), {}))
        elif _IBERROR.match(line):
            failed.append(line)
        elif dumps and (m := _FIELD.match(line)):
            dumps[-1][2].setdefault(m.group("name"), m.group("value"))
    devices: dict[str, IbDevice] = {}
    for dest, number, fields in dumps:
        if "LinkState" not in fields and "PhysLinkState" not in fields:
            continue  # a MLNX ext or Extended dump under the same header shape: no state
        device = devices.get(dest)
        if device is None:
            device = devices[dest] = IbDevice(dest)
            record.devices.append(device)
        device.ports = [p for p in device.ports if p.port != number] + [_port(number, fields)]
    if not record.devices:  # its query failed (a LID no SMP reaches, an argument it refused): nothing was read
        raise ParseError(KIND, failed[0] if failed else "no PortInfo dump with a link state")
    return record
