"""``mlxlink`` (Mellanox/mstflint, NVIDIA MFT): one port's physical link, as the adapter's firmware reports it.

mlxlink prints titled sections (``Operational Info`` over a dashed line of its length; mlxlink_cmd_print.cpp
``operator<<``) of ``key : value`` records, the key padded to 37 columns (mlxlink_record.cpp ``operator<<``,
``PDDR_LINE_LEN``). ``Operational Info`` (mlxlink_commander.cpp operatingInfoPage) gives the link:

* ``State`` is the PHY manager's state (mlxlink_maps.cpp ``_pmFsmState``): ``Active`` is a link up; every other
  (``Disable``, ``Polling``, ``Port PLL Down``, ``Close port``, ``Physical LinkUp``, ``Sleep``, ``Rx disable``,
  ``Signal detect``, ``Training``...) is a link that is not up, so the port is down whatever its protocol.
* ``Physical state`` is the InfiniBand PHY's (``_ibPhyFsmState``: ``LinkUp``, ``Config Test``...) or Ethernet's
  auto-negotiation state (``_ethANFsmState``: ``ETH_AN_FSM_ENABLE``...), which says which protocol the port runs.
* ``Speed`` (``IB-HDR``, ``IB-NDR``; ``100G``, ``400G_4X`` for Ethernet) and ``Width`` print ``N/A`` unless the
  link is up (``setPrintVal``'s ``valid``).

The port lands on the ``ibstat`` record so the ``ib.ports`` rules judge it: a link not up is a port down (FAIL for
InfiniBand or Polling, WARN for Ethernet, as ibstat's). A link up is the physical link only: for InfiniBand the
port's logical state (Init until a subnet manager brings it Active) is not shown, so it is not a pass (its port
state is left unknown; ``ib.ports`` SKIPs it); for Ethernet (RoCE) the link up is the port up (ACTIVE).
``Troubleshooting Info`` (``Status Opcode``, ``Recommendation``: free text the firmware writes) is not judged.
mlxlink prints neither the device nor the port it was asked for
(``-d``, ``-p``): the port is named ``mlxlink`` port 1.
"""

from __future__ import annotations

import re

from ..records.fabric import IbDevice, IbDevicesRecord, IbPort
from .detect import parser
from .errors import ParseError
from .infiniband import canonical_state
from .text import is_noise, prepare

KIND = "mlxlink"
DEVICE = "mlxlink"  # the device is not printed

_TITLE = re.compile(r"^[A-Z][A-Za-z0-9 /()&-]{2,60}$")
_DASHES = re.compile(r"^-{3,80}$")
_RECORD = re.compile(r"^(?P<key>[A-Za-z][^:\n]{0,60}?)\s*: (?P<value>[^\n]{0,300})$")
_ETH_SPEED = re.compile(r"^\d{1,4}[GM](?:bE|_|$)|BASE")
_IB_SPEEDS = frozenset({"SDR", "DDR", "QDR", "FDR10", "FDR", "EDR", "HDR", "NDR", "XDR"})
_IB_PHY = frozenset({"LinkUp", "Initializing", "Recover Config", "Config Test", "Wait Remote Test",
                     "Wait Config Enhanced", "Config Idle"})


def _sections(lines: list[str]) -> dict[str, dict[str, str]]:
    """``{title: {key: value}}`` for every titled section; a record before any title is under ``""``."""
    sections: dict[str, dict[str, str]] = {}
    current = ""
    for i, line in enumerate(lines):
        if _TITLE.match(line) and i + 1 < len(lines) and _DASHES.match(lines[i + 1]) \
                and len(lines[i + 1]) == len(line):
            current = line
            sections.setdefault(current, {})
        elif m := _RECORD.match(line):
            sections.setdefault(current, {}).setdefault(m.group("key").strip(), m.group("value").strip())
    return sections


def sniff(text: str) -> int:
    """``Operational Info`` over its dashed line, with a ``State`` record: only mlxlink prints that section."""
    lines = [line.strip() for line in text.splitlines()[:400]]
    return 90 if "State" in _sections(lines).get("Operational Info", {}) else 0


def _link_layer(speed: str, phys: str, enabled: str) -> str | None:
    """InfiniBand for an ``IB-`` speed or an IB PHY state, Ethernet for an Ethernet speed or an
    auto-negotiation state; where the link is down and both are ``N/A``, the protocol whose speeds ``Supported
    Info``'s ``Enabled Link Speed`` names (``0x000000f8 (HDR,EDR,FDR,FDR10,QDR)``; ``(400G_4X,...)``)."""
    if speed.startswith("IB-") or phys in _IB_PHY - {"LinkUp"}:
        return "InfiniBand"
    if _ETH_SPEED.search(speed) or phys.startswith("ETH_AN_FSM"):
        return "Ethernet"
    names = set(enabled[enabled.find("(") + 1:enabled.rfind(")")].split(",")) if "(" in enabled else set()
    if names & _IB_SPEEDS:
        return "InfiniBand"
    return "Ethernet" if any(_ETH_SPEED.search(n) for n in names) else None


@parser(KIND, sniff=sniff, title="mlxlink (MFT/mstflint: a port's physical link)")
def parse(text: str) -> IbDevicesRecord:
    """The ``Operational Info`` section as one port; a text without it is not mlxlink's."""
    lines = [line.strip() for line in prepare(KIND, text) if line.strip() and not is_noise(line)]
    sections = _sections(lines)
    info = sections.get("Operational Info", {})
    state = info.get("State")
    if not state:
        raise ParseError(KIND, "no Operational Info State record")
    speed, phys = info.get("Speed", "N/A"), info.get("Physical state", "N/A")
    supported = sections.get("Supported Info", {})
    enabled = supported.get("Enabled Link Speed", supported.get("Enabled Link Speed (Ext.)", ""))
    layer = _link_layer(speed, phys, enabled)
    if state == "Active":
        port = IbPort(1, state="ACTIVE" if layer == "Ethernet" else None, physical_state="LINKUP", link_layer=layer)
    else:  # the PHY is not up: the port cannot be (its logical state is Down)
        port = IbPort(1, state="DOWN", physical_state=canonical_state(state), link_layer=layer)
    return IbDevicesRecord(format="mlxlink", devices=[IbDevice(DEVICE, ports=[port])])
