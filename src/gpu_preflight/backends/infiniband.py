"""RDMA devices (InfiniBand, RoCE, EFA) as ``/sys/class/infiniband`` lists them.

sysfs is read instead of running ``ibstat`` because it needs no package, no privileges
and no subprocess, and it is where ``ibstat`` itself reads from. Each device directory
holds ``ports/<n>/{state,phys_state,rate,link_layer}`` and the port error counters
(``counters/``: link_downed, symbol_error...; ``hw_counters/``: driver-specific, e.g.
EFA's rx_drops). Values are read as printed (``4: ACTIVE``, ``400 Gb/sec (4X NDR)``)
and put into the same record the ``ibstat`` parser produces, so the port rules judge
sysfs and ``ibstat`` alike.

``root`` is a parameter so tests can build a fake tree from real ``ibstat`` facts.
"""

from __future__ import annotations

import os
from pathlib import Path

import msgspec

from ..records.fabric import EFA_DRIVER as EFA_DRIVER
from ..records.fabric import IbDevice, IbDevicesRecord, IbPort
from ..records.fabric import RdmaDevice as RdmaDevice

__all__ = ["RdmaDevice", "RdmaTree", "read_counters", "read_tree"]

DEFAULT_ROOT = "/sys/class/infiniband"


class RdmaTree(msgspec.Struct):
    """What the tree holds: devices, their ports (as an ibstat-like record), or why it could not be read."""

    root: str
    readable: bool
    reason: str | None = None
    devices: list[RdmaDevice] = []
    ports: IbDevicesRecord = msgspec.field(default_factory=lambda: IbDevicesRecord(format="sysfs"))

    @property
    def efa_devices(self) -> list[str]:
        return [d.name for d in self.devices if d.is_efa]


def _read(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return None


def read_tree(root: str | Path = DEFAULT_ROOT) -> RdmaTree:
    """Devices and port states under ``root``; a missing directory means "no RDMA device"."""
    base = Path(root)
    if not base.exists():
        return RdmaTree(str(base), readable=True, reason=f"{base} does not exist (no RDMA driver loaded)")
    try:
        names = sorted(p.name for p in base.iterdir())
    except OSError as exc:
        return RdmaTree(str(base), readable=False, reason=f"cannot list {base}: {exc.strerror or exc}")
    tree = RdmaTree(str(base), readable=True, reason=None if names else f"{base} lists no device")
    for name in names:
        dev_dir = base / name
        device = RdmaDevice(name, driver=_link_name(dev_dir / "device" / "driver"),
                            hca_type=_read(dev_dir / "hca_type"), firmware=_read(dev_dir / "fw_ver"),
                            node_guid=_read(dev_dir / "node_guid"), pci_address=_link_name(dev_dir / "device"))
        tree.devices.append(device)
        ports = IbDevice(name, ca_type=device.hca_type, firmware=device.firmware)
        ports.ports.extend(_port(port_dir) for port_dir in _ports(dev_dir))
        tree.ports.devices.append(ports)
    return tree


def _port(port_dir: Path) -> IbPort:
    """One port's state, in the words ``ibstat`` uses (the parsers' table: loaded only on a
    node that has an RDMA port, since every live node check reads this tree)."""
    # start-up: the port-state words load with the first RDMA port (tests/test_cli_startup.py)
    from ..parsers.infiniband import canonical_state
    from ..parsers.text import to_float, to_int

    return IbPort(
        port=int(port_dir.name),
        state=canonical_state(_read(port_dir / "state")),
        physical_state=canonical_state(_read(port_dir / "phys_state")),
        rate_gbps=to_float(_read(port_dir / "rate")),
        link_layer=_read(port_dir / "link_layer") or None,
        lid=to_int(_read(port_dir / "lid")),
        sm_lid=to_int(_read(port_dir / "sm_lid")),
    )


def read_counters(root: str | Path = DEFAULT_ROOT) -> dict[str, dict[str, int]]:
    """Every port's error and traffic counters: ``{"mlx5_0/1": {"link_downed": 0, ...}}``.

    ``counters/`` (the IB standard set) and ``hw_counters/`` (driver-specific) are merged;
    a standard name wins. Unreadable or non-numeric files are left out, never zeroed.
    """
    base = Path(root)
    out: dict[str, dict[str, int]] = {}
    try:
        devices = sorted(p for p in base.iterdir())
    except OSError:
        return out
    for dev_dir in devices:
        for port_dir in _ports(dev_dir):
            values: dict[str, int] = {}
            for sub in ("hw_counters", "counters"):
                for name, value in _numbers(port_dir / sub).items():
                    values[name] = value
            out[f"{dev_dir.name}/{port_dir.name}"] = values
    return out


def _ports(dev_dir: Path) -> list[Path]:
    try:
        return sorted((p for p in (dev_dir / "ports").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    except OSError:
        return []


def _numbers(directory: Path) -> dict[str, int]:
    try:
        files = sorted(directory.iterdir())
    except OSError:
        return {}
    values = {}
    for f in files:
        text = _read(f)
        if text is not None and text.isdigit():
            values[f.name] = int(text)
    return values


def _link_name(path: Path) -> str | None:
    """The last component of a symlink's target (``device/driver`` → ``mlx5_core``)."""
    try:
        return Path(os.readlink(path)).name
    except OSError:
        return None
