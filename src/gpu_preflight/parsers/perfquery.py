"""``perfquery`` (infiniband-diags): a port's performance and error counters.

perfquery.c prints one block per port it queried: a header (``# Port counters: Lid 10 port 1 (CapMask:
0x5300)``, ``# Port extended counters: ...`` with ``-x``) and one ``Name:....value`` line per counter of
the PortCounters attribute (IBA 16.1.3.5: ``SymbolErrorCounter``, ``LinkDownedCounter``,
``PortRcvErrors``...; ``-x`` adds the 64-bit data and packet counts). The counters are named here as
sysfs names them (``/sys/class/infiniband/<dev>/ports/<n>/counters/``), which is what the live
``ib.counters`` check reads, so one configuration names a counter for both. The values are totals since
the counters were last cleared (``perfquery -R``, a subnet manager's sweep), not a rate over a known
window. A pasted block without its header is one port of unknown LID.

``ibqueryerrors`` (the same package) sweeps the fabric and prints, per node with a counter over its threshold,
``Errors for <node>`` and one line per port: ``   GUID 0x... port 1: [LinkDownedCounter == 25]
[PortXmitDiscards == 2846 (2.779K)]`` (``port ALL`` when the switch sums its ports; the bracketed value is
followed by a human-readable one for 64-bit counters), then ``## Summary: N nodes checked, M bad nodes found`` and
``##  N ports checked, M ports have errors beyond threshold``. Its counters are the same PortCounters totals,
named by ibmad as perfquery names them, so each port line is read as a block of this record.

Either tool's ``<prog>: iberror: failed: ...`` line (it could not open its port, resolve the LID, or query the
counters) is kept as an error: the counters it names were not read.
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
# ibqueryerrors (ibqueryerrors.c print_results / print_data_cnts): "GUID 0x<guid> port <n|ALL>:" then
# " [<name> == <value>]" or " [<name> == <value> (<human>)]" per counter over its threshold. Bounded: linear.
_QE_PORT = re.compile(r"^GUID (?P<guid>0x[0-9a-fA-F]{1,16}) port (?P<port>\d{1,3}|ALL):(?P<rest>(?: \[[^\]]{1,120}\])*)"
                      r"\s*$")
_QE_COUNTER = re.compile(r"\[(?P<name>[A-Za-z][A-Za-z0-9]{1,60}) == (?P<value>\d{1,20})(?: \([^()]{0,24}\))?\]")
# infiniband-diags' IBEXIT (ibdiag_common.c ibexit: "%s: iberror: failed: %s", with -d "[pid N] fn: " before
# "failed"): perfquery or ibqueryerrors could not open its port, resolve the LID asked for, or query the counters
# ("perfquery: iberror: failed: can't resolve destination port 12"). The counters were not read.
_IBERROR = re.compile(r"^(?:perfquery|ibqueryerrors): iberror: (?:\[pid \d{1,9}\] [\w ]{1,60}: )?failed: .{1,300}$")
_QE_NODES = re.compile(r"^## Summary: \d{1,9} nodes checked, \d{1,9} bad nodes found")
_QE_PORTS = re.compile(r"^##\s+(?P<checked>\d{1,9}) ports checked, (?P<bad>\d{1,9}) ports have errors beyond "
                       r"threshold")


def sniff(text: str) -> int:
    """A perfquery header, an ibqueryerrors port line or summary, or (a block pasted without its header) three of
    perfquery's dotted error-counter lines."""
    lines = [line.strip() for line in text.splitlines()[:300]]
    if any(_HEADER.match(line) for line in lines):
        return 90
    if any((m := _QE_PORT.match(line)) and _QE_COUNTER.search(m.group("rest")) for line in lines):
        return 90
    if any(_QE_NODES.match(line) or _QE_PORTS.match(line) for line in lines):
        return 85
    if any(_IBERROR.match(line) for line in lines):
        return 80
    named = {m.group("name") for line in lines if (m := _COUNTER.match(line)) and m.group("name") in SYSFS_NAMES}
    return 70 if len(named & {"SymbolErrorCounter", "LinkDownedCounter", "PortRcvErrors",
                              "LinkErrorRecoveryCounter", "PortXmitDiscards"}) >= 3 else 0


@parser(KIND, sniff=sniff, title="perfquery (port counters, -x extended), ibqueryerrors")
def parse(text: str) -> PerfqueryRecord:
    """Every port block: its LID and port from the header (or ibqueryerrors' node GUID and port), its counters
    under their sysfs names."""
    record = PerfqueryRecord()
    block: PortCounters | None = None
    for line in prepare(KIND, text):
        line = line.strip()
        if not line or is_noise(line):
            continue
        if m := _QE_PORT.match(line):
            port = m.group("port")
            record.blocks.append(PortCounters(port=None if port == "ALL" else int(port), guid=m.group("guid"),
                                              counters={SYSFS_NAMES.get(c.group("name"), c.group("name")):
                                                        int(c.group("value"))
                                                        for c in _QE_COUNTER.finditer(m.group("rest"))}))
            block = None
            continue
        if _IBERROR.match(line):
            record.errors.append(line)
            continue
        if m := _QE_PORTS.match(line):
            record.ports_checked, record.ports_over_threshold = int(m.group("checked")), int(m.group("bad"))
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
    if not record.blocks and record.ports_checked is None and not record.errors:
        raise ParseError(KIND, "no port counter line")
    return record
