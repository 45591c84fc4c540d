"""PyNVML helpers of the elastic-training health API (the spec's ``PynvmlMixin``).

Platform questions (is pynvml importable, is this a GB200 tray, which NIC serves which
GPU) answered without a second NVML reader: GPU names come from the node checks' own
NVML read (or a replayed snapshot), through :class:`~.reader.NvmlReader`.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

from ..backends.nvml import NvmlUnavailable, import_pynvml
from ..deadline import Timeout
from ..engine import RunOptions
from ..ids import NVML_ID
from .reader import NVML_LOCK, NvmlReader

log = logging.getLogger(__name__)

__all__ = [
    "GB200_NIC_LAYOUTS", "NVML_LOCK", "PynvmlMixin", "check_pynvml_availability", "get_gb200_static_mapping",
    "gpu_names", "is_gb200_platform",
]

# GPU index -> RDMA device of the ConnectX-7 that serves it on a GB200 NVL72 compute tray
# (two Grace+2-GPU halves, each with two CX7 InfiniBand ports and one BlueField-3 DPU).
# mlx5_N names follow PCI order, so they depend on how many RDMA functions each
# BlueField-3 exposes to the host:
#  1: NVIDIA's nvidia-resiliency-ext / the PyTorch elastic spec (BF3 single function):
#     left CX7 mlx5_0, mlx5_1, left BF3 mlx5_2, right CX7 mlx5_3, mlx5_4, right BF3 mlx5_5.
#  2: NVIDIA Mission Control "North-South Network GB200 Deployment Guide" port table
#     (both BF3 ports exposed): CX7 mlx5_0, mlx5_1 (left bay), mlx5_4, mlx5_5 (right bay);
#     BF3 mlx5_2, mlx5_3, mlx5_6, mlx5_7.
GB200_NIC_LAYOUTS: dict[int, dict[int, str]] = {
    1: {0: "mlx5_0", 1: "mlx5_1", 2: "mlx5_3", 3: "mlx5_4"},
    2: {0: "mlx5_0", 1: "mlx5_1", 2: "mlx5_4", 3: "mlx5_5"},
}
BLUEFIELD_PCI_IDS = frozenset({"0xa2d6", "0xa2dc"})  # BlueField-2, BlueField-3 integrated ConnectX
INFINIBAND_SYSFS = Path("/sys/class/infiniband")
NAME_TIMEOUT_S = 10.0

_reader = NvmlReader("nvml-platform-read")
_gb200_cache: dict[str | None, bool] = {}
_cache_lock = threading.Lock()


def check_pynvml_availability() -> bool:
    """True when pynvml (nvidia-ml-py) can be imported; says nothing about a driver."""
    try:
        import_pynvml()
    except NvmlUnavailable as exc:
        log.warning("pynvml is not available: %s", exc.message)
        return False
    return True


def gpu_names(replay: str | None = None, timeout_s: float = NAME_TIMEOUT_S) -> list[str]:
    """Names NVML reports for this node's GPUs (or the snapshot's); [] when it cannot tell."""
    options = RunOptions(include=[NVML_ID], replay=replay, probe_timeout_s=timeout_s)
    try:
        report = _reader.run(options)
    except Timeout as exc:
        log.warning("cannot read GPU names: %s", exc)
        return []
    gpus = (report.facts.get("gpu") or {}).get("gpus") or []
    return [g["name"] for g in gpus if isinstance(g, dict) and isinstance(g.get("name"), str)]


def is_gb200_platform(replay: str | None = None, timeout_s: float = NAME_TIMEOUT_S) -> bool:
    """Whether GPU 0 is a GB200 (nodes are homogeneous). Cached once an answer was read.

    Matches "GB200" only. The spec's version also matches "B200", which would treat an
    x86 HGX B200 (8 GPUs, other NICs) as a GB200 tray and hand out the wrong NIC mapping.
    """
    with _cache_lock:
        if replay in _gb200_cache:
            return _gb200_cache[replay]
    names = gpu_names(replay, timeout_s)
    if not names:
        return False
    answer = "GB200" in names[0].upper()
    with _cache_lock:
        _gb200_cache[replay] = answer
    return answer


def _bf3_functions(sysfs: Path) -> int | None:
    """RDMA functions each BlueField exposes to the host, from sysfs (None: cannot tell)."""
    try:
        devices = sorted(sysfs.iterdir())
    except OSError:
        return None
    bluefield = 0
    for dev in devices:
        try:
            pci_id = (dev / "device" / "device").read_text().strip().lower()
        except OSError:
            continue
        bluefield += pci_id in BLUEFIELD_PCI_IDS
    return {2: 1, 4: 2}.get(bluefield)


def get_gb200_static_mapping(bf3_functions: int | None = None,
                             sysfs: Path = INFINIBAND_SYSFS) -> dict[int, str]:
    """GPU index → RDMA device (``mlx5_N``) of its ConnectX-7 on a GB200 compute tray.

    ``bf3_functions`` picks the naming layout (see :data:`GB200_NIC_LAYOUTS`); by default
    it is read from sysfs (two BlueField functions → 1 each, four → 2 each) and falls
    back to the spec's layout when sysfs cannot tell.
    """
    layout = bf3_functions or _bf3_functions(sysfs) or 1
    if layout not in GB200_NIC_LAYOUTS:
        raise ValueError(f"bf3_functions must be one of {sorted(GB200_NIC_LAYOUTS)}, not {layout!r}")
    return dict(GB200_NIC_LAYOUTS[layout])


class PynvmlMixin:
    """The spec's mixin: pynvml availability, GB200 detection and its GPU→NIC mapping."""

    pynvml: Any = None
    replay: str | None = None

    def check_pynvml_availability(self) -> bool:
        """Import pynvml into ``self.pynvml``; False (with a warning) when it is missing."""
        if not check_pynvml_availability():
            return False

        self.pynvml = import_pynvml()
        return True

    def is_gb200_platform(self) -> bool:
        return is_gb200_platform(self.replay)

    def get_gb200_static_mapping(self) -> dict[int, str]:
        return get_gb200_static_mapping()
