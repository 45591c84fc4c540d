"""A recorded one-GPU NVML dump widened to an 8-GPU node, for the stub library.

The captured H200 is one GPU of an HGX board; node-level costs (a live node check, a
monitor tick) scale with the GPU count, so benches and tests widen it to the board's 8.
Each copy gets its own index, minor number, UUID, serial and PCI bus id, as on a real board; the
module id stays GPU 0's (see ``test_module_id_is_read_per_gpu`` for why).
"""

from __future__ import annotations

import copy
from typing import Any


def widen(dump: dict[str, Any], gpus: int = 8) -> dict[str, Any]:
    """A copy of ``dump`` whose first GPU is repeated ``gpus`` times, each with its own identity."""
    out = copy.deepcopy(dump)
    first = out["devices"][0]
    devices = []
    for i in range(gpus):
        dev = copy.deepcopy(first)
        dev["nvmlDeviceGetIndex"] = dev["nvmlDeviceGetMinorNumber"] = {"ok": i}
        uuid = str(first.get("nvmlDeviceGetUUID", {}).get("ok", "GPU-00000000-0000-0000-0000-000000000000"))
        dev["nvmlDeviceGetUUID"] = {"ok": uuid[:-2] + f"{i:02d}"}
        serial = first.get("nvmlDeviceGetSerial", {}).get("ok")
        if isinstance(serial, str) and serial:
            dev["nvmlDeviceGetSerial"] = {"ok": serial[:-2] + f"{i:02d}"}
        for call in ("nvmlDeviceGetPciInfo_v3", "nvmlDeviceGetPciInfo"):
            pci = dev.get(call)
            if isinstance(pci, dict) and isinstance(pci.get("ok"), dict):
                pci["ok"].update(busId=f"00000000:{i + 1:02x}:00.0", busIdLegacy=f"0000:{i + 1:02x}:00.0",
                                 bus=i + 1, device=0)
        devices.append(dev)
    out["devices"] = devices
    out.setdefault("system", {})["nvmlDeviceGetCount"] = {"ok": gpus}
    return out
