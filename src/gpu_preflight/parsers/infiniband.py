"""InfiniBand / RoCE port listings: ``ibstat``, ``ibstatus`` and ``ibv_devinfo``.

Three tools, one record: devices (HCAs) with their ports' state, physical state, rate
and link layer. Each tool spells the same facts differently — ``Active`` / ``4: ACTIVE``
/ ``PORT_ACTIVE (4)``, ``Rate: 200`` / ``200 Gb/sec (4X HDR)`` / width × speed — and all
land on one canonical form (``state="ACTIVE"``, ``physical_state="LINKUP"``,
``rate_gbps=200.0``). Indentation (tabs or spaces), CA order (lexical: ``mlx5_1,
mlx5_10``) and a leading ``#ibstat`` line do not matter. ``ibstat``'s stderr ``ibpanic:``
lines (a CA that vanished while listing, no UMAD, a CA it cannot find) and ``ibv_devinfo``'s ``Failed to open
device`` (a device libibverbs lists but cannot open) are kept as errors, and so is ``ibstatus``'s ``Fatal error:
No devices``: a missing or unusable device is a fact, and those lines alone are their tool's whole answer.

Completeness: ``ibstat`` announces each CA's ``Number of ports`` and ``ibv_devinfo`` its
``phys_port_cnt``; fewer port blocks than announced (unless the pasted command asked for
one port, ``ibv_devinfo -i 2``), or a port block without its state or its link layer
(every tool prints the link layer last), means the
output was cut, and the record lists it in ``incomplete``: a cut listing that lost its
down port must not read as "every port active".

Fragments: port blocks pasted without their device's header (ibstat's ``CA '<name>'``,
ibv_devinfo's ``hca_id:``) belong to a device the text does not name; they are read under
:data:`FRAGMENT_DEVICE`, the record says how many ports it shows, and nothing is assumed of
the ports it does not show.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ..records.fabric import IbDevice as IbDevice
from ..records.fabric import IbDevicesRecord as IbDevicesRecord
from ..records.fabric import IbPort as IbPort
from .detect import parser
from .errors import ParseError
from .text import is_noise, prepare, to_float, to_int

IBSTAT_KIND = "ibstat"
IBSTATUS_KIND = "ibstatus"
DEVINFO_KIND = "ibv-devinfo"

FRAGMENT_DEVICE = "(not pasted)"  # the device of port blocks pasted without their "CA" line
_KEY = re.compile(r"^(?P<key>[A-Za-z](?:[\w.]| +(?=[\w.]))*)\s*:\s*(?P<value>.*)$")
_WIDTH = re.compile(r"(?<!\d)(\d+)X", re.IGNORECASE)


def canonical_state(value: str | None) -> str | None:
    """``Active``, ``4: ACTIVE``, ``PORT_ACTIVE (4)`` → ``ACTIVE``; ``LinkUp``/``5: LinkUp`` and ``ibv_devinfo -v``'s
    ``LINK_UP (5)`` → ``LINKUP``."""
    if value is None:
        return None
    text = re.sub(r"\(\d+\)|^\s*\d+\s*:", "", value).strip().upper()
    text = text.removeprefix("PORT_").replace(" ", "").replace("_", "")
    return {"INITIALIZE": "INIT", "INITIALIZING": "INIT"}.get(text, text) or None


# ibstat's own labels, capitalised as only ibstat prints them (ibstatus and ibv_devinfo print theirs in lower case,
# nvidia-smi -q puts a space before its colon): three of them are a fragment of an ibstat block.
_IBSTAT_LABELS = re.compile(r"^\s*(CA type|Number of ports|Firmware version|Hardware version|Node GUID"
                            r"|System image GUID|Physical state|State|Rate|Base lid|LMC|SM lid|Capability mask"
                            r"|Port GUID|Link layer):", re.MULTILINE)


# ibstat's CA line: "CA '<name>'" over its CA and port blocks (ibstat.c ca_dump), "CA: '<name>'" over the one port
# that ``ibstat <ca> <port>`` asks for (ca_stat: that port's lines follow unindented).
_CA_LINE = re.compile(r"^CA:? '(?P<name>[^']+)'")
# ibstat's own stderr when it cannot list or read a device (ibstat.c main and ca_stat, through libibmad's IBPANIC
# "ibpanic: [pid] func: ...: %m" and IBWARN "ibwarn: [pid] func: ..."): a node whose HCAs ibstat cannot see. Pasted
# alone they are all the run printed.
_IBSTAT_FAILURE = re.compile(r"^\s*(?:ibpanic|ibwarn): \[\d+\] (?:main: (?:can't init UMAD library"
                             r"|can't list IB device names|'[^']+' IB device can't be found|can't list ports"
                             r"|stat of IB device '[^']+' failed)|ca_stat: \S+ '[^']+' has no port number \d+)",
                             re.MULTILINE)


def sniff_ibstat(text: str) -> int:
    """A ``CA '<name>'`` block, or (a pasted fragment) a ``Port N:`` block with ibstat's ``Physical state:``,
    or three of ibstat's labels (a CA's or a port's lines without their header), or ibstat's own failure lines."""
    if re.search(r"^CA:? '[^']+'", text, re.MULTILINE) and "Port " in text:
        return 90
    if _IBSTAT_FAILURE.search(text):
        return 60
    if re.search(r"^\s*Port \d+:\s*$", text, re.MULTILINE) and re.search(r"^\s*Physical state:\s*\w", text, re.M):
        return 60
    return 60 if len(set(_IBSTAT_LABELS.findall(text))) >= 3 else 0


# The ibstatus script's fatal() lines (infiniband-diags/scripts/ibstatus): no /sys/class/infiniband at all, or the
# device asked for has no ports directory. Each is all it prints.
_IBSTATUS_FATAL = re.compile(r"^\s*Fatal error:\s+(?:No devices|device '[^']+': sys files not found \(\S+\))\s*$",
                             re.MULTILINE)


def sniff_ibstatus(text: str) -> int:
    if re.search(r"^Infiniband device '[^']+' port \d+ status:", text, re.MULTILINE) or _IBSTATUS_FATAL.search(text):
        return 90
    return 0


# libibverbs' answer when it finds no device it can open (no provider for the driver, a provider that does not
# support the kernel's ABI, a container without /dev/infiniband): ibv_devinfo prints it instead of any hca_id.
_NO_DEVICES = re.compile(r"^\s*No IB devices found\s*$", re.MULTILINE)
# devinfo.c's line for a device libibverbs lists but ibv_open_device() refuses (a VF not given to this container,
# a device whose driver went away): printed in place of that device's hca_id block, one line per device.
_CANNOT_OPEN = re.compile(r"^\s*Failed to open device\s*$", re.MULTILINE)


# devinfo.c's other stderr lines: the device asked for (-d) not listed, a device or port it cannot query, and
# perror's "Failed to get IB devices list: <errno text>" (no uverbs in the kernel: nothing to list). Each stands
# where the device's block would be; alone they are its whole answer.
_DEVINFO_FAILURE = re.compile(r"^\s*(?:IB device '[^']+' wasn't found|Failed to query (?:device|port \d+) props"
                              r"|Failed to get IB devices list: .+)\s*$", re.MULTILINE)


# ibv_devinfo's own labels (lower case, with underscores, as only it prints them) and its port state's shape.
_DEVINFO_LABELS = re.compile(r"^\s*(transport|fw_ver|node_guid|sys_image_guid|vendor_id|vendor_part_id|hw_ver"
                             r"|board_id|phys_port_cnt|max_mtu|active_mtu|sm_lid|port_lid|port_lmc|link_layer"
                             r"|phys_state|active_width|active_speed):", re.MULTILINE)
_DEVINFO_STATE = re.compile(r"^\s*state:\s*PORT_[A-Z_]+\s*\(\d+\)", re.MULTILINE)
# The labels that start a device's lines or a port's: a fragment's device starts at the first of them.
_DEVINFO_DEVICE_KEYS = frozenset({"transport", "fw_ver", "node_guid", "sys_image_guid", "vendor_id",
                                  "vendor_part_id", "hw_ver", "board_id", "phys_port_cnt", "port"})


# ibv_devinfo -v's port lines people quote when a RoCE GID index is in question: the physical state as only it
# prints it ("phys_state: LINK_UP (5)") and its GID table ("GID[  3]: ::ffff:200.0.209.6, RoCE v2").
_DEVINFO_PHYS = re.compile(r"^\s*phys_state:\s*[A-Z_]+\s*\(\d+\)", re.MULTILINE)
_DEVINFO_GID = re.compile(r"^\s*GID\[\s*\d+\]:\s*\S", re.MULTILINE)


def sniff_devinfo(text: str) -> int:
    """An ``hca_id:`` block (90), or (a pasted fragment) a port state printed as ibv_devinfo prints it
    (``PORT_ACTIVE (4)``) among three of its labels, or ``-v``'s ``phys_state`` with its GID table, or its own
    failure lines (60)."""
    if re.search(r"^hca_id:\s*\S+", text, re.MULTILINE) or _NO_DEVICES.search(text):
        return 90
    if _DEVINFO_STATE.search(text) and len(set(_DEVINFO_LABELS.findall(text))) >= 3:
        return 60
    if _DEVINFO_FAILURE.search(text):
        return 60
    return 60 if _DEVINFO_PHYS.search(text) and _DEVINFO_GID.search(text) else 0


def _lines(kind: str, text: str) -> list[tuple[int, str]]:
    return [(n, line.strip()) for n, line in enumerate(prepare(kind, text), 1)
            if line.strip() and not is_noise(line) and not line.lstrip().startswith("#")]


# Port lines of ibstat and ibstatus: the same facts under slightly different labels.
_PORT_FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "state": ("state", canonical_state),
    "physical state": ("physical_state", canonical_state),
    "phys state": ("physical_state", canonical_state),
    "rate": ("rate_gbps", to_float),
    "link layer": ("link_layer", lambda v: v or None),
    "link_layer": ("link_layer", lambda v: v or None),
    "base lid": ("lid", to_int),
    "sm lid": ("sm_lid", to_int),
}


def _set_port_field(port: IbPort, key: str, value: str) -> None:
    if key in _PORT_FIELDS:
        attr, convert = _PORT_FIELDS[key]
        setattr(port, attr, convert(value))


@parser(IBSTAT_KIND, sniff=sniff_ibstat, title="ibstat")
def parse_ibstat(text: str) -> IbDevicesRecord:
    """Parse ``ibstat`` (every CA, one CA, or ``ibstat <ca> <port>``'s one port), keeping ``ibpanic:`` lines as
    errors."""
    record = IbDevicesRecord(format="ibstat")
    device: IbDevice | None = None
    port: IbPort | None = None
    announced: dict[str, int] = {}
    for number, line in _lines(IBSTAT_KIND, text):
        if line.startswith("ibpanic:") or line.startswith("ibwarn:"):
            record.errors.append(line)
            continue
        if m := _CA_LINE.match(line):
            device, port = IbDevice(m.group("name")), None
            record.devices.append(device)
            continue
        if device is None and re.match(r"^Port \d+:$", line):  # port blocks pasted without their CA
            device = IbDevice(FRAGMENT_DEVICE)
            record.devices.append(device)
        if device is None:
            continue
        if m := re.match(r"^Port (\d+):$", line):
            port = IbPort(int(m.group(1)))
            device.ports.append(port)
            continue
        m = _KEY.match(line)
        if m is None:
            raise ParseError(IBSTAT_KIND, f"unexpected line {line[:60]!r}", number)
        key, value = m.group("key").lower(), m.group("value").strip()
        if port is None:
            if key == "ca type":
                device.ca_type = value or None
            elif key == "firmware version":
                device.firmware = value or None
            elif key == "system image guid":
                device.system_guid = value or None
            elif key == "node guid":
                device.node_guid = value or None
            elif key == "number of ports" and (n := to_int(value)) is not None:
                announced[device.name] = n
        else:
            _set_port_field(port, key, value)
    if not record.devices:
        if record.errors and _IBSTAT_FAILURE.search(text):  # it could not list or read a device: that is the fact
            return record
        raise ParseError(IBSTAT_KIND, "no \"CA '<name>'\" block")
    if record.devices[0].name == FRAGMENT_DEVICE:
        ports = record.devices[0].ports
        if not any(port.state or port.physical_state for port in ports):
            raise ParseError(IBSTAT_KIND, "no \"CA '<name>'\" block, and no port state to judge")
        record.fragment = len(ports)
    _check_ports(record, announced)
    return record


def _check_ports(record: IbDevicesRecord, announced: dict[str, int]) -> None:
    """Name every announced port that is not there and every port block without a state."""
    for device in record.devices:
        want = announced.get(device.name)
        if not device.ports:
            record.incomplete.append(f"{device.name}: no port listed (every device has one)")
        elif want is not None and len(device.ports) < want:
            record.incomplete.append(f"{device.name}: {len(device.ports)} of {want} announced port(s) listed")
        for port in device.ports:
            shown = [("state", port.state), ("link layer", port.link_layer)]
            if device.name == FRAGMENT_DEVICE:  # a fragment is judged on what it shows
                shown = shown[:1]
            lacking = [name for name, value in shown if value is None]
            if lacking:
                record.incomplete.append(f"{device.name} port {port.port}: no {' or '.join(lacking)} line")


@parser(IBSTATUS_KIND, sniff=sniff_ibstatus, title="ibstatus")
def parse_ibstatus(text: str) -> IbDevicesRecord:
    """Parse ``ibstatus``: one block per (device, port)."""
    record = IbDevicesRecord(format="ibstatus")
    port: IbPort | None = None
    for _, line in _lines(IBSTATUS_KIND, text):
        if m := re.match(r"^Infiniband device '(?P<dev>[^']+)' port (?P<port>\d+) status:", line):
            device = next((d for d in record.devices if d.name == m.group("dev")), None)
            if device is None:
                device = IbDevice(m.group("dev"))
                record.devices.append(device)
            port = IbPort(int(m.group("port")))
            device.ports.append(port)
            continue
        if _IBSTATUS_FATAL.match(line):
            record.errors.append(line)
            continue
        if port is None or (m := _KEY.match(line)) is None:
            continue
        _set_port_field(port, m.group("key").lower(), m.group("value").strip())
    for device in record.devices:
        for each in device.ports:
            if each.link_layer == "IB":  # the script's own default where sysfs has no link_layer file (an IB-only
                each.link_layer = "InfiniBand"  # kernel, before RoCE): `... || echo IB`
    if not record.devices and record.errors:  # no device to list: that is the fact
        return record
    if not record.devices:
        raise ParseError(IBSTATUS_KIND, "no \"Infiniband device '<name>' port <n> status:\" block")
    _check_ports(record, {})
    return record


@parser(DEVINFO_KIND, sniff=sniff_devinfo, title="ibv_devinfo (plain or -v)")
def parse_devinfo(text: str) -> IbDevicesRecord:
    """Parse ``ibv_devinfo``; a port's rate is its active width times its active speed."""
    record = IbDevicesRecord(format="ibv_devinfo")
    device: IbDevice | None = None
    port: IbPort | None = None
    width: int | None = None
    announced: dict[str, int] = {}
    one_port = bool(re.search(r"ibv_devinfo\b[^\n]*\s(?:-i|--ib-port)[\s=]*\d", text))
    for _, line in _lines(DEVINFO_KIND, text):
        m = _KEY.match(line)
        if m is None:
            continue
        key, value = m.group("key").lower(), m.group("value").strip()
        if key == "hca_id":
            device, port = IbDevice(value), None
            record.devices.append(device)
            continue
        if device is None and not record.devices and key in _DEVINFO_DEVICE_KEYS:  # lines pasted without hca_id
            device = IbDevice(FRAGMENT_DEVICE)
            record.devices.append(device)
        elif device is None and not record.devices and key in ("state", "phys_state"):  # one port's lines alone
            device, port = IbDevice(FRAGMENT_DEVICE), IbPort(0)  # its "port:" line not pasted: number unknown
            device.ports.append(port)
            record.devices.append(device)
        if device is None:
            continue
        elif key == "port":
            port, width = IbPort(to_int(value) or 0), None
            device.ports.append(port)
        elif port is None:
            if key == "fw_ver":
                device.firmware = value or None
            elif key == "board_id":
                device.ca_type = value or None
            elif key == "sys_image_guid":
                device.system_guid = value or None
            elif key == "node_guid":
                device.node_guid = value or None
            elif key == "phys_port_cnt" and (n := to_int(value)) is not None and not one_port:
                announced[device.name] = n
        elif key == "state":
            port.state = canonical_state(value)
        elif key == "phys_state":
            port.physical_state = canonical_state(value)
        elif key == "link_layer":
            port.link_layer = value or None
        elif key == "port_lid":
            port.lid = to_int(value)
        elif key == "sm_lid":
            port.sm_lid = to_int(value)
        elif key == "active_width" and (w := _WIDTH.search(value)):
            width = int(w.group(1))
        elif key == "active_speed" and width is not None and (speed := to_float(value)) is not None:
            port.rate_gbps = round(width * speed, 3)
    if unopened := len(_CANNOT_OPEN.findall(text)):
        # a device the node lists but verbs cannot open is a device a job that picks it cannot use
        record.errors.append(f"Failed to open device ({unopened} listed device(s) libibverbs cannot open)")
    record.errors.extend(dict.fromkeys(m.group(0).strip() for m in _DEVINFO_FAILURE.finditer(text)))
    if not record.devices:
        if record.errors:
            return record
        if _NO_DEVICES.search(text) is None:
            raise ParseError(DEVINFO_KIND, "no 'hca_id:' line")
        # no device verbs can open: a fact about the node (the judge's device_error), with libibverbs' reason
        why = [line.strip() for line in text.splitlines() if line.lstrip().startswith("libibverbs:")]
        record.errors.append("No IB devices found" + (f" ({why[0]})" if why else ""))
        return record
    if record.devices[0].name == FRAGMENT_DEVICE:
        ports = record.devices[0].ports
        if not any(port.state or port.physical_state for port in ports):
            raise ParseError(DEVINFO_KIND, "no 'hca_id:' line, and no port state to judge")
        record.fragment = len(ports)
    _check_ports(record, announced)
    return record
