"""One-line-per-port RDMA listings: iproute2's ``rdma link show`` and Mellanox's ``ibdev2netdev``.

Both say, for each RDMA port, which network interface goes with it and whether it is up; both are
what people paste when a job cannot reach the fabric. They land on the ``ibstat`` record
(:class:`~..records.fabric.IbDevicesRecord`), so the ``ib.ports`` rules judge them, but each says
only what it prints:

* ``rdma link show`` (rdma/link.c) prints the port's own state and physical state
  (``link mlx5_7/1 subnet_prefix fe80:... lid 3403 sm_lid 1 lmc 0 state DOWN physical_state POLLING``,
  ``link mlx5_0/1 state ACTIVE physical_state LINK_UP netdev p1p1``); the subnet prefix and LIDs are
  printed for InfiniBand ports only, so a port without them is an Ethernet (RoCE) port. iproute2 v4.13-v5.4
  (Ubuntu 18.04's 4.15, Debian 10's 4.20, RHEL 8.0's 4.18) began the line with the device index instead of ``link``
  (``1/1: mlx5_0/1: subnet_prefix ... state ACTIVE physical_state LINK_UP``; ``%u/%u: %s: ``, rewritten to
  ``link %s/`` in v5.5's b0a688a5); the rest of the line is the same. ``rdma -j link`` (``-jp`` pretty) prints
  the same fields as a JSON array of one object per port (``"ifname":"mlx5_0","port":1,...,"state":"ACTIVE",
  "physical_state":"LINK_UP"``; before v5.5 ``"ifname":"mlx5_0/1"``), read as the lines are.
* ``ibdev2netdev`` prints, after the port, the *netdev's carrier* (``mlx5_0 port 1 ==> ib0 (Up)``:
  ``/sys/class/net/<if>/carrier``, ``Down`` also when the interface is administratively down or
  unconfigured, as an unused IPoIB interface is); only ``-v`` adds the port's own state
  (``0000:08:00.0 mlx5_0 (MT4123 - MCX653105A-HDAT) ConnectX-6 ... fw 20.28.1002 port 1 (ACTIVE) ==>
  ib0 (Up)``). A carrier alone is kept as such (:attr:`IbPort.carrier`), never made a port state.

A port listed twice is two snapshots of it (people re-run the command while a link flaps, or paste the
plain and the ``-v`` listing): one that shows the port's state is kept over a carrier alone, then the
one that is not up, since a link that was down during the capture is not a healthy link. Other
lines of a paste (prompts, ``ip addr``, ``ifconfig``, an ``lspci | grep``) are read past; a text
with no port line is not one of these listings. Neither tool says how many ports it will list, so
a cut listing cannot be told from a whole one.
"""

from __future__ import annotations

import json
import re
from typing import Any

from ..records.fabric import IbDevice, IbDevicesRecord, IbPort
from .detect import parser
from .errors import ParseError
from .text import is_noise, prepare

RDMA_LINK_KIND = "rdma-link"
IBDEV2NETDEV_KIND = "ibdev2netdev"

# Bounded repeats throughout: a 64 KiB line of "link " or "port " must stay linear.
_RDMA_LINK = re.compile(r"^(?:link |\d{1,5}/\d{1,3}: )(?P<dev>[\w.-]{1,64})/(?P<port>\d{1,3})\b"
                        r"(?P<ib>[^\n]{0,200}?\blid \d+)?"
                        r"[^\n]{0,200}?\bstate (?P<state>[A-Z_]{2,16}) physical_state (?P<phys>[A-Z_]{2,24})"
                        r"(?: netdev (?P<netdev>[\w.@-]{1,64}))?")
_IBDEV2NETDEV = re.compile(r"^(?:[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-7]\s+)?(?P<dev>[\w.-]{1,64})\s+"
                           r"(?:\([^\n]{0,300}?\bfw\s+\S{1,40}\s+)?port\s+(?P<port>\d{1,3})\s+"
                           r"(?:\((?P<state>[A-Z_]{2,16})\s*\)\s+)?==>\s+(?P<netdev>\S{1,64})\s+"
                           r"\((?P<carrier>Up|Down|NA)\)")


# rdma -j / -jp: the array's first object names the port (ifname), then its physical state among its fields.
_JSON_START = re.compile(r'\[\s*\{\s*"ifindex"\s*:\s*\d+\s*,[^\]]{0,400}?"physical_state"\s*:')


def _json_ports(text: str) -> list[dict[str, Any]]:
    """The port objects of ``rdma -j link`` (or ``-jp``), from the first array that holds them; none when the text
    has no such array or it is cut (a cut array is not a listing: its last port is not shown)."""
    if '"physical_state"' not in text or not (m := _JSON_START.search(text)):
        return []
    try:
        data, _ = json.JSONDecoder().raw_decode(text[m.start():])
    except json.JSONDecodeError:
        return []
    return [o for o in data if isinstance(o, dict) and isinstance(o.get("ifname"), str)]


def _port_lines(pattern: re.Pattern[str], text: str) -> int:
    return sum(1 for line in text.splitlines()[:500] if pattern.match(line.strip()))


def sniff_rdma_link(text: str) -> int:
    """A ``link <dev>/<port> ... state S physical_state P`` line: only ``rdma link`` prints one."""
    return 85 if _port_lines(_RDMA_LINK, text) or _json_ports(text) else 0


def sniff_ibdev2netdev(text: str) -> int:
    """A ``<dev> port N ==> <netdev> (Up|Down)`` line: only ``ibdev2netdev`` prints one. A netdev's carrier is
    weaker evidence than a tool that reports the port itself: a paste that also holds ``ibstat``, ``ibv_devinfo``
    or perftest's own lines ("Port number 1 state is Down") is read as that tool."""
    return 75 if _port_lines(_IBDEV2NETDEV, text) else 0


def _up(port: IbPort) -> bool:
    if port.state is not None:
        return port.state == "ACTIVE" and port.physical_state in ("LINKUP", None)
    return port.carrier is not False


def _weight(port: IbPort) -> tuple[bool, bool]:
    """Which of two snapshots of a port is kept: one that shows the port's state over a carrier alone (``-v``
    after a plain ``ibdev2netdev``), then one that is not up over one that is."""
    return port.state is not None, not _up(port)


def _read(kind: str, text: str, pattern: re.Pattern[str]) -> IbDevicesRecord:
    """The ports ``pattern`` finds, one device per name in order of appearance, a re-listed port's worst snapshot."""
    record = IbDevicesRecord(format="rdma link" if kind == RDMA_LINK_KIND else kind)
    devices: dict[str, IbDevice] = {}
    for line in prepare(kind, text):
        if is_noise(line) or not (m := pattern.match(line.strip())):
            continue
        _add(record, devices, m.group("dev"), _rdma_link_port(m) if kind == RDMA_LINK_KIND else _ibdev2netdev_port(m))
    if kind == RDMA_LINK_KIND and not record.devices:
        for obj in _json_ports(text):
            _add(record, devices, *_rdma_json_port(obj))
    if not record.devices:
        raise ParseError(kind, "no RDMA port line")
    return record


def _add(record: IbDevicesRecord, devices: dict[str, IbDevice], name: str, port: IbPort) -> None:
    """``port`` under its device (one device per name, in order of appearance); a port listed again keeps the
    snapshot :func:`_weight` ranks first."""
    device = devices.get(name)
    if device is None:
        device = devices[name] = IbDevice(name)
        record.devices.append(device)
    seen = next((i for i, p in enumerate(device.ports) if p.port == port.port), None)
    if seen is None:
        device.ports.append(port)
    elif _weight(port) > _weight(device.ports[seen]):
        device.ports[seen] = port


def _rdma_link_port(m: re.Match[str]) -> IbPort:
    return IbPort(int(m.group("port")), state=m.group("state"), physical_state=m.group("phys").replace("_", ""),
                  link_layer="InfiniBand" if m.group("ib") else "Ethernet", netdev=m.group("netdev"))


def _rdma_json_port(obj: dict[str, Any]) -> tuple[str, IbPort]:
    """One object of ``rdma -j link``: its fields are the line's (a state or physical state it lacks is not read,
    never taken as up); ``ifname`` is ``dev/port`` before v5.5."""
    name, _, port = str(obj["ifname"]).partition("/")
    number = obj.get("port", port)
    state, phys = obj.get("state"), obj.get("physical_state")
    return name, IbPort(int(number) if str(number).isdigit() else 0,
                        state=state if isinstance(state, str) else "UNKNOWN",
                        physical_state=phys.replace("_", "") if isinstance(phys, str) else None,
                        link_layer="InfiniBand" if "lid" in obj else "Ethernet",
                        netdev=obj.get("netdev") if isinstance(obj.get("netdev"), str) else None)


def _ibdev2netdev_port(m: re.Match[str]) -> IbPort:
    """The ``-v`` form's port state when shown; the netdev's carrier always; IPoIB netdevs (``ib*``) are
    InfiniBand ports, the rest's link layer is not shown (a pod's ``net1`` can be either)."""
    netdev = m.group("netdev")
    carrier = {"Up": True, "Down": False}.get(m.group("carrier"))
    return IbPort(int(m.group("port")), state=m.group("state"), netdev=netdev, carrier=carrier,
                  link_layer="InfiniBand" if netdev.startswith("ib") else None)


@parser(RDMA_LINK_KIND, sniff=sniff_rdma_link, title="rdma link show (iproute2)")
def parse_rdma_link(text: str) -> IbDevicesRecord:
    """Every ``link <dev>/<port>`` line: the port's state, physical state and netdev."""
    return _read(RDMA_LINK_KIND, text, _RDMA_LINK)


@parser(IBDEV2NETDEV_KIND, sniff=sniff_ibdev2netdev, title="ibdev2netdev (plain or -v)")
def parse_ibdev2netdev(text: str) -> IbDevicesRecord:
    """Every ``<dev> port N ==> <netdev> (Up|Down)`` line: the netdev's carrier, and with ``-v`` the port state."""
    return _read(IBDEV2NETDEV_KIND, text, _IBDEV2NETDEV)
