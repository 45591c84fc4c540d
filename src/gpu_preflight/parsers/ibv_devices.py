"""``ibv_devices`` (libibverbs): the RDMA devices verbs can see, each with its node GUID.

libibverbs/examples/device_list.c prints a two-line header (``    device          \t   node GUID`` and its
dashes, ``    ------          \t----------------``) and one row per device: its name and its node GUID as
16 hex digits. It says nothing of ports, so a listing tells only which devices exist: an empty one (the
header alone: no provider for the driver, a container without ``/dev/infiniband``, a Soft-RoCE device never
created) is a node without an RDMA device, and a GUID of zeros is a device never given its identity (an SR-IOV
virtual function the operator did not assign one), which RDMA CM and perftest cannot use. A paste may hold
several listings (one per node of a pair): their rows are read in order.

``ibv_devinfo -l`` says the same without GUIDs (libibverbs/examples/devinfo.c: ``%d HCA%s found:`` then each
name on its own tab-indented line): read here as the same fact (format ``ibv_devinfo -l``); ``0 HCAs found:``
is a node without an RDMA device, and fewer names than its count is a cut listing.
"""

from __future__ import annotations

import re

from ..records.fabric import IbDevice, IbDevicesRecord
from .detect import parser
from .errors import ParseError
from .text import is_noise, prepare

KIND = "ibv-devices"

_HEADER = re.compile(r"^\s*device\s+node GUID\s*$")
_RULE = re.compile(r"^\s*-{6}\s+-{16}\s*$")
_ROW = re.compile(r"^\s*(?P<name>[\w.:-]{1,64})\s+(?P<guid>[0-9a-fA-F]{16})\s*$")
_HCAS_FOUND = re.compile(r"^\s*(?P<count>\d+) HCAs? found:\s*$", re.MULTILINE)  # ibv_devinfo -l
_HCA_NAME = re.compile(r"^\s+(?P<name>[\w.:-]{1,64})\s*$")


def sniff(text: str) -> int:
    """``ibv_devinfo -l``'s count line, or ibv_devices' rule of dashes under its header, or over a device row (a
    paste cut above the rule). Weak evidence (50): a paste that also holds ibv_devinfo, ibstat or perftest's lines
    (one session's commands) is read as that tool, which says more than which devices exist."""
    return 50 if _HCAS_FOUND.search(text) or sniff_table(text) else 0


@parser(KIND, sniff=sniff, title="ibv_devices (RDMA devices and their node GUIDs)")
def parse(text: str) -> IbDevicesRecord:
    """Every listed device with its node GUID; a listing with no row is a node verbs sees no device on."""
    if _HCAS_FOUND.search(text) and not sniff_table(text):
        return _parse_hca_list(text)
    record = IbDevicesRecord(format="ibv_devices")
    tables = headed_tables = 0
    headed = in_table = False
    for line in prepare(KIND, text):
        if not line.strip() or is_noise(line):
            continue
        if _HEADER.match(line):
            headed, in_table = True, False
            continue
        if _RULE.match(line):  # its rows follow; a paste may have lost the header above it
            tables, headed_tables = tables + 1, headed_tables + headed
            headed, in_table = False, True
            continue
        headed = False
        if in_table and (m := _ROW.match(line)):
            record.devices.append(IbDevice(m.group("name"), node_guid=m.group("guid")))
            continue
        in_table = False  # anything else ends a listing (a prompt, the next node's heading)
    if not record.devices and not headed_tables:  # rows cut from their header are read; a bare rule is nothing
        raise ParseError(KIND, "no device row and no 'device  node GUID' header over its rule of dashes")
    if not record.devices:
        record.errors.append("ibv_devices lists no device (verbs sees no RDMA device on this node)")
    return record


def sniff_table(text: str) -> bool:
    """ibv_devices' own listing: a rule of dashes under its header or over a device row."""
    lines = text.splitlines()[:400]
    return any(_RULE.match(line) and ((i > 0 and _HEADER.match(lines[i - 1]))
                                      or (i + 1 < len(lines) and _ROW.match(lines[i + 1])))
               for i, line in enumerate(lines))


def _parse_hca_list(text: str) -> IbDevicesRecord:
    """``ibv_devinfo -l``: its count line, then one indented name per device."""
    record = IbDevicesRecord(format="ibv_devinfo -l")
    count: int | None = None
    for line in prepare(KIND, text):
        if count is None:
            if m := _HCAS_FOUND.match(line):
                count = int(m.group("count"))
            continue
        if m := _HCA_NAME.match(line):
            record.devices.append(IbDevice(m.group("name")))
        elif line.strip() and not is_noise(line):
            break  # the listing ends at its blank line; anything else is the next command
    if count == 0:
        record.errors.append("0 HCAs found (verbs sees no RDMA device on this node)")
    elif count is not None and len(record.devices) < count:
        record.incomplete.append(f"{len(record.devices)} of the {count} HCAs it counts are listed")
    return record
