"""PCI devices and their links as ``lspci -vvv -nn`` prints them."""

from __future__ import annotations

import msgspec


class PciDevice(msgspec.Struct):
    """One PCI device as ``lspci`` shows it: address, class, name, ids and its link capability (speed, width)."""

    address: str
    device_class: str
    name: str
    class_id: str | None = None
    vendor_id: str | None = None
    device_id: str | None = None
    cap_speed_gts: float | None = None
    cap_width: int | None = None
    sta_speed_gts: float | None = None
    sta_width: int | None = None
    speed_downgraded: bool | None = None
    width_downgraded: bool | None = None
    downgraded: bool | None = None
    port_type: str | None = None  # the Express capability's type: ``Endpoint``, ``Root Port``, ``Downstream Port``...
    # AER (-vv as root): the uncorrectable error bits set in UESta, UEMsk and UESvrt; None when not shown
    ue_status: list[str] | None = None
    ue_masked: list[str] = []
    ue_fatal: list[str] = []
    capabilities_denied: bool = False  # ``Capabilities: <access denied>``: lspci was not run as root
    config_unreadable: bool = False  # ``(rev ff)`` / ``!!! Unknown header type 7f``: config space reads all ones


class LspciRecord(msgspec.Struct):
    """Every device ``lspci`` listed, and whether it ran verbose (with link capabilities)."""

    verbose: bool = False
    devices: list[PciDevice] = []
    fragment: int | None = None  # link lines pasted without their device line: one device, address and class not shown
    warnings: list[str] = []  # pcilib's (and lspci's own) stderr lines pasted with the listing
