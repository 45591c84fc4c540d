"""Facts of the external diagnostic tools (dcgmi, nccl-tests, fi_info, ibstat, lspci): what each
tool printed, parsed; never what it means.

Each record keeps the tool run (command, exit status, timing, why it did not run) and
the parsed record of its output, or the parse error. Raw output is not kept here: it is
saved as an artifact (``artifact`` names it, ``artifact_file`` is its file name under
the node's ``artifacts/`` directory), so reports stay small and the raw text can be fed
back to ``gpu-preflight judge``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from .dcgm import DcgmDiagRecord
    from .dmesg import PcieLimit
    from .fabric import IbDevicesRecord, OfiPlugin, RdmaDevice
    from .libfabric import FiInfoRecord
    from .nccl import NcclTestsRecord
    from .pci import LspciRecord


class ToolRun(msgspec.Struct):
    """One tool run as the report keeps it. ``problem`` says why it tells nothing, if so."""

    tool: str
    argv: list[str]
    rc: int | None
    duration_s: float
    timed_out: bool = False
    missing: bool = False
    problem: str | None = None
    stderr_tail: str = ""
    artifact: str | None = None
    artifact_file: str | None = None


class DcgmFacts(msgspec.Struct):
    """``dcgmi diag -r <level> -j``. ``available``: dcgmi is installed; ``reason``: why it did not run.

    A full run records both levels, as the SageMaker health check's report does: this
    record is the run's own level (2 or 3, the extended diagnostic) and ``basic`` the
    level-1 run made before it. ``inline_max_bytes`` is how much of each raw output the
    report shows inline (``diagnostics.dcgm_raw_output_inline_max_bytes``); the whole
    output is the artifact.
    """

    available: bool
    level: int | None = None
    reason: str | None = None
    run: ToolRun | None = None
    record: DcgmDiagRecord | None = None
    parse_error: str | None = None
    basic: DcgmFacts | None = None
    inline_max_bytes: int = 0

    def levels(self) -> list[DcgmFacts]:
        """Every level of the run, lowest first (``basic`` then this one)."""
        return [self.basic, self] if self.basic is not None else [self]


class NcclTestRun(msgspec.Struct):
    """One nccl-tests binary run on this node: its name, how it ran, what it printed parsed, or why that failed."""

    name: str
    run: ToolRun
    record: NcclTestsRecord | None = None
    parse_error: str | None = None


class NcclTestsFacts(msgspec.Struct):
    """Local nccl-tests runs (``-g <gpus>``); ``available`` is whether any binary was found."""

    available: bool
    reason: str | None = None
    gpus: int | None = None
    runs: list[NcclTestRun] = []
    not_found: list[str] = []


class FabricFacts(msgspec.Struct):
    """libfabric's providers (``fi_info -p``), EFA devices, the NCCL net plugin and the fabric environment."""

    provider: str
    reason: str | None = None
    fi_info: ToolRun | None = None
    fi_info_record: FiInfoRecord | None = None
    parse_error: str | None = None
    efa_devices: list[str] = []
    plugin: OfiPlugin | None = None
    env: dict[str, str] = {}


class IbToolRun(msgspec.Struct):
    """One InfiniBand tool run on this node (``ibstat``, ``ibv_devinfo``): how it ran and its parsed record, or why
    not."""

    name: str
    run: ToolRun
    record: IbDevicesRecord | None = None
    parse_error: str | None = None


class InfinibandFacts(msgspec.Struct):
    """RDMA ports from sysfs, port counters read at the start and end of the run, and ibstat/ibv_devinfo."""

    root: str
    readable: bool
    reason: str | None = None
    devices: list[RdmaDevice] = []
    ports: IbDevicesRecord | None = None
    counters_start: dict[str, dict[str, int]] = {}
    counters_end: dict[str, dict[str, int]] = {}
    window_s: float = 0.0
    tools: list[IbToolRun] = []


class PcieFacts(msgspec.Struct):
    """``lspci -vvv -nn`` for NVIDIA GPUs and NICs, and the kernel's PCIe ``limited by`` lines (raw and parsed)."""

    reason: str | None = None
    lspci: ToolRun | None = None
    record: LspciRecord | None = None
    parse_error: str | None = None
    devices_listed: int = 0
    kernel_log_source: str | None = None
    kernel_log_reason: str | None = None
    limited_lines: list[str] = []
    limits: list[PcieLimit] = []  # the limited lines, parsed by the probe
