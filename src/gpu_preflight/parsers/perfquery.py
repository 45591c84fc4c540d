"""``perfquery`` (infiniband-diags): a port's performance and error counters.

perfquery.c prints one block per port it queried: a header (``# Port counters: Lid 10 port 1 (CapMask:
0x5300)``, ``# Port extended counters: ...`` with ``-x``) and one ``Name:....value`` line per counter of
the PortCounters attribute (IBA 16.1.3.5: ``SymbolErrorCounter``, ``LinkDownedCounter``,
``PortRcvErrors``...; ``-x`` adds the 64-bit data and packet counts). The counters are named here as
sysfs names them (``/sys/class/infiniband/<dev>/ports/<n>/counters/``), which is what the live
``ib.counters`` check reads, so one configuration names a counter for both. The values are totals since
the counters were last cleared (``perfquery -R``, a subnet manager's sweep), not a rate over a known
window. A pasted block without its header is one port of unknown LID.
"""

from __future__ import annotations

import re

from ..records.fabric import PerfqueryRecord, PortCounters
from .detect import parser
from .errors import ParseError
from .text import is_noise, prepare

KIND = "perfquery"

# perfquery's dotted key column ("SymbolErrorCounter:..............0"): bounded, linear on a long line.
_COUNTER = re.compile(r"^(?P<name>[A-Za-z][A-Za-z0-9]{1,60}):\.{2,80}(?P<value>0x[0-9a-fA-F]{1,16}|\d{1,20})\s*$")
_HEADER = re.compile(r"^#\s*Port (?P<ext>extended )?counters:\s*Lid (?P<lid>\d{1,6}) port (?P<port>\d{1,3})",
                     re.IGNORECASE)
# IBA PortCounters names -> sysfs counter names (drivers/infiniband/core/sysfs.c).
SYSFS_NAMES = {
    "SymbolErrorCounter": "symbol_error", "LinkErrorRecoveryCounter": "link_error_recovery",
    "LinkDownedCounter": "link_downed", "PortRcvErrors": "port_rcv_errors",
    "PortRcvRemotePhysicalErrors": "port_rcv_remote_physical_errors",
    "PortRcvSwitchRelayErrors": "port_rcv_switch_relay_errors", "PortXmitDiscards": "port_xmit_discards",
    "PortXmitConstraintErrors": "port_xmit_constraint_errors",
    "PortRcvConstraintErrors": "port_rcv_constraint_errors",
    "LocalLinkIntegrityErrors": "local_link_integrity_errors",
    "ExcessiveBufferOverrunErrors": "excessive_buffer_overrun_errors", "VL15Dropped": "VL15_dropped",
    "PortXmitData": "port_xmit_data", "PortRcvData": "port_rcv_data", "PortXmitPkts": "port_xmit_packets",
    "PortRcvPkts": "port_rcv_packets", "PortXmitWait": "port_xmit_wait",
    "PortUnicastXmitPkts": "unicast_xmit_packets", "PortUnicastRcvPkts": "unicast_rcv_packets",
    "PortMulticastXmitPkts": "multicast_xmit_packets", "PortMulticastRcvPkts": "multicast_rcv_packets",
}
_SELECTORS = frozenset({"PortSelect", "CounterSelect", "CounterSelect2"})  # which counters were read, not counts


def sniff(text: str) -> int:
    """A perfquery header, or (a block pasted without it) three of its dotted error-counter lines."""
    lines = [line.strip() for line in text.splitlines()[:300]]
    if any(_HEADER.match(line) for line in lines):
        return 90
    named = {m.group("name") for line in lines if (m := _COUNTER.match(line)) and m.group("name") in SYSFS_NAMES}
    return 70 if len(named & {"SymbolErrorCounter", "LinkDownedCounter", "PortRcvErrors",
                              "LinkErrorRecoveryCounter", "PortXmitDiscards"}) >= 3 else 0


@parser(KIND, sniff=sniff, title="perfquery (port counters, -x extended)")
def parse(text: str) -> PerfqueryRecord:
    """Every port block: its LID and port from the header, its counters under their sysfs names."""
    record = PerfqueryRecord()
    block: PortCounters | None = None
    for line in prepare(KIND, text):
        line = line.strip()
        if not line or is_noise(line):
            continue
        if m := _HEADER.match(line):
            block = PortCounters(lid=int(m.group("lid")), port=int(m.group("port")), extended=bool(m.group("ext")))
            record.blocks.append(block)
            continue
        if not (m := _COUNTER.match(line)) or m.group("name") in _SELECTORS:
            continue
        if block is None:  # a block pasted without its header
            block = PortCounters()
            record.blocks.append(block)
        name = SYSFS_NAMES.get(m.group("name"), m.group("name"))
        block.counters[name] = int(m.group("value"), 0)
    record.blocks = [b for b in record.blocks if b.counters]
    if not record.blocks:
        raise ParseError(KIND, "no port counter line")
    return record
