"""The PCI scan a monitor repeats is read again only when the bus's device list changed."""

from __future__ import annotations

import shutil
from pathlib import Path

from gpu_preflight.model import NA
from gpu_preflight.probes.gpu import nvidia_gpus_on_bus


def device(root: Path, bus_id: str, vendor: str = "0x10de", klass: str = "0x030200") -> None:
    d = root / bus_id
    d.mkdir(parents=True)
    (d / "vendor").write_text(vendor + "\n")
    (d / "class").write_text(klass + "\n")


def test_same_listing_reuses_the_answer_and_a_changed_one_reads_again(tmp_path: Path) -> None:
    root = tmp_path / "devices"
    device(root, "0000:18:00.0")
    device(root, "0000:00:1f.0", vendor="0x8086", klass="0x060100")
    assert nvidia_gpus_on_bus(str(root)) == ["0000:18:00.0"]
    (root / "0000:18:00.0" / "vendor").write_text("0x8086\n")  # cannot happen in sysfs: proves no re-read
    assert nvidia_gpus_on_bus(str(root)) == ["0000:18:00.0"]
    device(root, "0000:2a:00.0")  # hot-plugged
    assert nvidia_gpus_on_bus(str(root)) == ["0000:2a:00.0"]
    shutil.rmtree(root / "0000:2a:00.0")  # removed
    assert nvidia_gpus_on_bus(str(root)) == []
    device(root, "0000:2a:00.0")  # and enumerated again
    assert nvidia_gpus_on_bus(str(root)) == ["0000:2a:00.0"]


def test_unreadable_bus_is_na_and_not_kept(tmp_path: Path) -> None:
    root = tmp_path / "devices"
    missing = nvidia_gpus_on_bus(str(root))
    assert isinstance(missing, NA) and "cannot list" in missing.reason
    device(root, "0000:18:00.0")
    assert nvidia_gpus_on_bus(str(root)) == ["0000:18:00.0"]
