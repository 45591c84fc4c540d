"""A node's RDMA devices and ports (``ibstat``, ``ibstatus``, ``ibv_devinfo``, sysfs) and
where NCCL's net plugin was found: what every live node check reads.

What only a tool's output holds has its own module, loaded when that output is parsed:
:mod:`.libfabric` (``fi_info``, ``fi_pingpong``), :mod:`.pci` (``lspci``) and
:mod:`.perftest` (``ib_*_bw``).
"""

from __future__ import annotations

import msgspec


class IbPort(msgspec.Struct):
    """One InfiniBand port as ``ibstat`` shows it: state, physical state, rate, link layer and LIDs.

    ``netdev`` is the network interface a listing pairs with the port (``rdma link``, ``ibdev2netdev``) and
    ``carrier`` that interface's carrier as ``ibdev2netdev`` prints it (``Up``/``Down``): the interface's, not
    the port's state, which plain ``ibdev2netdev`` does not show."""

    port: int
    state: str | None = None
    physical_state: str | None = None
    rate_gbps: float | None = None
    link_layer: str | None = None
    lid: int | None = None
    sm_lid: int | None = None
    netdev: str | None = None
    carrier: bool | None = None


class IbDevice(msgspec.Struct):
    """One InfiniBand device (HCA) with its firmware and ports.

    ``system_guid`` (ibstat's ``System image GUID``, ibv_devinfo's ``sys_image_guid``) is the
    physical adapter's: the ports and PCIe functions of one card share it, so it tells a card's
    spare port from another card (a rail). ``node_guid`` is the device's own (ibstat's ``Node GUID``,
    ibv_devinfo's ``node_guid``, ``ibv_devices``' column), as the tool printed it."""

    name: str
    ca_type: str | None = None
    firmware: str | None = None
    ports: list[IbPort] = []
    system_guid: str | None = None
    node_guid: str | None = None


class IbDevicesRecord(msgspec.Struct):
    """Every InfiniBand device ``ibstat``/``ibv_devinfo`` listed, with parse errors and whether the output was cut
    short; ``fragment`` is the number of ports shown when the text is pasted port blocks without their device."""

    format: str
    devices: list[IbDevice] = []
    errors: list[str] = []
    incomplete: list[str] = []
    fragment: int | None = None


EFA_DRIVER = "efa"
EFA_NAMES = ("efa_", "rdmap")  # what the efa driver names its RDMA devices (efa_0; rdmap16s27 on newer kernels)


class RdmaDevice(msgspec.Struct):
    """One RDMA device: its kernel driver (``mlx5_core``, ``efa``...) and identity."""

    name: str
    driver: str | None = None
    hca_type: str | None = None
    firmware: str | None = None
    node_guid: str | None = None
    pci_address: str | None = None

    @property
    def is_efa(self) -> bool:
        return self.driver == EFA_DRIVER or self.name.startswith(EFA_NAMES)


class OfiPlugin(msgspec.Struct):
    """Where the NCCL net plugin was found (``path``), or every place that was searched, and
    the aws-ofi-nccl release the library names (``version``; None when it names none)."""

    installed: bool
    path: str | None = None
    requested: str | None = None
    searched: list[str] = []
    version: str | None = None


class PortCounters(msgspec.Struct):
    """One ``perfquery`` block: the port it names (``# Port counters: Lid 10 port 1``) and its counters, named as
    sysfs names them (``symbol_error``, ``link_downed``...; ``counters/`` under ``/sys/class/infiniband``)."""

    lid: int | None = None
    port: int | None = None  # None with a ``guid``: ibqueryerrors' "port ALL" (a switch's ports summed)
    extended: bool = False
    counters: dict[str, int] = {}
    guid: str | None = None  # the node GUID ibqueryerrors names a port by (it prints no LID)


class PerfqueryRecord(msgspec.Struct):
    """Every port block ``perfquery`` printed (or every port line of ``ibqueryerrors``): lifetime totals since the
    counters were last cleared. ``ports_checked`` / ``ports_over_threshold`` are ibqueryerrors' summary, which a
    clean fabric prints alone (it lists only ports with a counter over its own threshold)."""

    blocks: list[PortCounters] = []
    ports_checked: int | None = None
    ports_over_threshold: int | None = None
    errors: list[str] = []  # the tool's "iberror: failed: ..." lines: counters it could not read


class GidEntry(msgspec.Struct):
    """One row of ``show_gids``: a port's GID table entry, the IPv4 address it maps (if any), its RoCE version
    (``v1``/``v2``; InfiniBand GIDs show as ``v1``) and the netdev it belongs to."""

    device: str
    port: int
    index: int
    gid: str
    ipv4: str | None = None
    version: str | None = None
    netdev: str | None = None


class GidTableRecord(msgspec.Struct):
    """Every GID ``show_gids`` listed, and its closing count (``n_gids_found=N``) when the paste has it; without
    that line the listing may be cut inside its last port, which ``incomplete`` says."""

    entries: list[GidEntry] = []
    found: int | None = None
    incomplete: list[str] = []
