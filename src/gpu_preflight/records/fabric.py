"""The network side of a node as its tools print it: RDMA devices and ports (``ibstat``,
``ibstatus``, ``ibv_devinfo``, sysfs), libfabric providers and ``fi_pingpong``, ``lspci``
links and ``ib_*_bw`` perftest runs, and where NCCL's net plugin was found.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class IbPort:
    port: int
    state: str | None = None
    physical_state: str | None = None
    rate_gbps: float | None = None
    link_layer: str | None = None
    lid: int | None = None
    sm_lid: int | None = None


@dataclass
class IbDevice:
    name: str
    ca_type: str | None = None
    firmware: str | None = None
    ports: list[IbPort] = field(default_factory=list)


@dataclass
class IbDevicesRecord:
    format: str
    devices: list[IbDevice] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    incomplete: list[str] = field(default_factory=list)


@dataclass
class FiProvider:
    provider: str
    fabric: str | None = None
    domain: str | None = None
    version: str | None = None
    type: str | None = None
    protocol: str | None = None


@dataclass
class FiInfoRecord:
    providers: list[FiProvider] = field(default_factory=list)
    error_code: int | None = None
    error: str | None = None


@dataclass
class PingpongRow:
    size_bytes: int
    iterations: int | None
    total_bytes: int | None
    time_s: float | None
    mb_per_s: float | None
    usec_per_xfer: float | None
    mxfers_per_s: float | None


@dataclass
class PingpongRecord:
    rows: list[PingpongRow] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass
class PciDevice:
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


@dataclass
class LspciRecord:
    verbose: bool = False
    devices: list[PciDevice] = field(default_factory=list)


@dataclass
class PerftestRow:
    size_bytes: int
    iterations: int | None
    bw_peak_gbps: float | None
    bw_avg_gbps: float | None
    msg_rate_mpps: float | None


@dataclass
class PerftestRecord:
    test: str | None = None
    device: str | None = None
    transport: str | None = None
    connection_type: str | None = None
    link_layer: str | None = None
    bw_unit: str | None = None
    rows: list[PerftestRow] = field(default_factory=list)
    bw_peak_max_gbps: float | None = None
    bw_avg_max_gbps: float | None = None
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


EFA_DRIVER = "efa"


@dataclass
class RdmaDevice:
    """One RDMA device: its kernel driver (``mlx5_core``, ``efa``...) and identity."""

    name: str
    driver: str | None = None
    hca_type: str | None = None
    firmware: str | None = None
    node_guid: str | None = None
    pci_address: str | None = None

    @property
    def is_efa(self) -> bool:
        return self.driver == EFA_DRIVER or self.name.startswith(("efa_", "rdmap"))


@dataclass
class OfiPlugin:
    """Where the NCCL net plugin was found (``path``), or every place that was searched."""

    installed: bool
    path: str | None = None
    requested: str | None = None
    searched: list[str] = field(default_factory=list)
