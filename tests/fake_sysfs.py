"""A fake ``/sys/class/infiniband`` tree, built from real ``ibstat`` facts (a parsed corpus record).

Laid out as the kernel lays it out: ``<dev>/{hca_type,fw_ver,node_guid}``, ``<dev>/device``
→ a PCI device directory whose ``driver`` links to the driver's name, and
``<dev>/ports/<n>/{state,phys_state,rate,link_layer,lid,sm_lid}`` with ``counters/``.
Values are written as the kernel prints them (``4: ACTIVE``, ``400 Gb/sec (4X)``).
"""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.parsers.infiniband import IbDevicesRecord

STATE = {"ACTIVE": "4: ACTIVE", "DOWN": "1: DOWN", "INIT": "2: INIT", "ARMED": "3: ARMED"}
PHYS = {"LINKUP": "5: LinkUp", "DISABLED": "3: Disabled", "POLLING": "2: Polling", "SLEEP": "1: Sleep"}
COUNTERS = ("link_downed", "symbol_error", "link_error_recovery", "port_rcv_errors", "port_xmit_discards",
            "port_rcv_remote_physical_errors", "local_link_integrity_errors", "excessive_buffer_overrun_errors")


def build(root: Path, record: IbDevicesRecord, driver: str = "mlx5_core") -> Path:
    """Write the devices and ports of ``record`` under ``root`` (created); every counter starts at 0."""
    pci = root.parent / "pci-devices"
    drivers = root.parent / "drivers"
    (drivers / driver).mkdir(parents=True, exist_ok=True)
    root.mkdir(parents=True, exist_ok=True)
    for i, device in enumerate(record.devices):
        dev = root / device.name
        dev.mkdir()
        (dev / "hca_type").write_text(f"{device.ca_type or 'MT4129'}\n")
        (dev / "fw_ver").write_text(f"{device.firmware or '28.39.1002'}\n")
        (dev / "node_guid").write_text(f"a088:c203:00{i:02x}:0000\n")
        slot = pci / f"0000:{0x10 + i:02x}:00.0"
        slot.mkdir(parents=True)
        (slot / "driver").symlink_to(drivers / driver)
        (dev / "device").symlink_to(slot)
        for port in device.ports:
            p = dev / "ports" / str(port.port)
            (p / "counters").mkdir(parents=True)
            (p / "state").write_text(f"{STATE.get(port.state or '', '1: DOWN')}\n")
            (p / "phys_state").write_text(f"{PHYS.get(port.physical_state or '', '3: Disabled')}\n")
            (p / "rate").write_text(f"{port.rate_gbps or 0:g} Gb/sec (4X)\n")
            (p / "link_layer").write_text(f"{port.link_layer or 'InfiniBand'}\n")
            (p / "lid").write_text(f"{hex(port.lid or 0)}\n")
            (p / "sm_lid").write_text(f"{hex(port.sm_lid or 0)}\n")
            for name in COUNTERS:
                (p / "counters" / name).write_text("0\n")
    return root


def bump(root: Path, port: str, counter: str, by: int) -> None:
    """Add ``by`` to ``counter`` of ``port`` (``"mlx5_0/1"``)."""
    dev, num = port.split("/")
    path = root / dev / "ports" / num / "counters" / counter
    path.write_text(f"{int(path.read_text()) + by}\n")
