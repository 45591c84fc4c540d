"""NVIDIA GPUs as the PCI bus sees them, independent of the driver.

Comparing this list with NVML's tells "no GPU here" apart from "GPUs present but the
driver is not loaded" and catches a GPU that fell off the bus (Xid 79) but still sits
in the slot.
"""

from __future__ import annotations

from pathlib import Path

from ..model import NA

NVIDIA_VENDOR = "0x10de"
DISPLAY_CLASSES = ("0x0300", "0x0302")  # VGA controller, 3D controller


def nvidia_gpus(root: str | Path = "/sys/bus/pci/devices") -> list[str] | NA:
    """Bus ids of NVIDIA display/3D controllers, or NA when sysfs is not readable."""
    base = Path(root)
    try:
        entries = sorted(base.iterdir())
    except OSError as exc:
        return NA(f"cannot list {base}: {exc.strerror or exc}")
    found = []
    for dev in entries:
        try:
            vendor = (dev / "vendor").read_text().strip().lower()
            klass = (dev / "class").read_text().strip().lower()
        except OSError:
            continue
        if vendor == NVIDIA_VENDOR and klass[:6] in DISPLAY_CLASSES:
            found.append(dev.name)
    return found
