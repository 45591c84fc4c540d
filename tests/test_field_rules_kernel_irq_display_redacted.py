"""Rules issue 27's second kernel batch taught the kernel-log reader (texts built here; provenance in the comments).

* ``irq <N>: nobody cared`` (``kernel/irq/spurious.c``): the kernel disabled an interrupt line, every
  device on it is deaf until a reboot: ``kernel.irq`` FAILs with ``reboot_node``. Seen in the field on a
  610-driver desktop whose NVIDIA driver then needed a reboot (CachyOS/linux-cachyos#1019).
* The NVIDIA display stack's own errors carry no ``NVRM`` prefix and no Xid: nvidia-drm's
  ``*ERROR* [nvidia-drm] [GPU ID 0x...]`` (``NV_DRM_DEV_LOG_ERR`` through ``DRM_ERROR``, open-gpu-kernel-modules#1170)
  and nvidia-modeset's ``nvidia-modeset: ERROR: GPU:<n>:`` (``nvkms_log``'s error level): ``kernel.display_driver``
  WARNs naming the GPU; its WARNING level is not judged.
* An Xid line whose PCI address the poster redacted (``NVRM: Xid (PCI:...): 145``, NVIDIA/nccl#2241) is the
  event its Xid number names, on no particular GPU, instead of an unreadable line.
"""

from __future__ import annotations

import pytest

from gpu_preflight.actions import DETAIL_KEY
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.host_log import host_message
from gpu_preflight.parsers.kernel_log import UnparsedXid, XidEvent, scan_xid_line

IRQ = ("[ 1503.214870] irq 16: nobody cared (try booting with the \"irqpoll\" option)\n"
       "[ 1503.214877] CPU: 5 UID: 0 PID: 0 Comm: swapper/5 Tainted: G           O        7.2.2-1 #1\n"
       "[ 1503.215010] Disabling IRQ #16\n")
DRM = ("[Fri May 29 13:01:31 2026] [drm:__nv_drm_nvkms_gem_obj_init [nvidia_drm]] *ERROR* [nvidia-drm] "
       "[GPU ID 0x00000200] Failed to get memory pages for NvKmsKapiMemory 0x000000000878c6a2\n")
MODESET = "[  880.512001] nvidia-modeset: ERROR: GPU:1: Failed to allocate display engine core DMA push buffer\n"


def judged(text: str, check: str) -> list[tuple[Status, str, str, object]]:
    return [(f.status, f.code, f.subject, f.details.get(DETAIL_KEY))
            for f in judge_text(text, Config(), source="n1") if f.check_id == check]


def test_a_disabled_interrupt_line_fails_with_a_reboot() -> None:
    assert host_message(IRQ.splitlines()[0])[:2] == ("irq_disabled", "irq16")  # type: ignore[index]
    assert judged(IRQ, "kernel.irq") == [(Status.FAIL, "irq_disabled", "n1/irq16", "reboot_node")]


@pytest.mark.parametrize(("text", "subject"), [(DRM, "n1/gpu_id=0x00000200"), (MODESET, "n1/GPU:1")],
                         ids=["nvidia-drm", "nvidia-modeset"])
def test_a_display_stack_error_warns_naming_the_gpu(text: str, subject: str) -> None:
    (finding,) = judged(text, "kernel.display_driver")
    assert finding[:3] == (Status.WARN, finding[1], subject) and finding[3] == "monitor"
    assert Status.worst(f.status for f in judge_text(text, Config(), source="n1")) is Status.WARN


def test_the_display_stacks_warnings_and_prose_are_not_errors() -> None:
    assert host_message("[  880.5] nvidia-modeset: WARNING: GPU:0: Unable to read EDID for display device "
                        "DP-1") is None
    assert host_message("the nvidia-drm module printed an error") is None


@pytest.mark.parametrize("address", ["PCI:...", "PCI:xxxx:xx:xx", "<redacted>", "PCI:XXXX:XX:XX.X"])
def test_an_xid_line_with_a_redacted_address_is_its_xid_on_no_gpu(address: str) -> None:
    event = scan_xid_line(f"kernel: NVRM: Xid ({address}): 79, pid=1, name=python3, GPU has fallen off the bus.")
    assert isinstance(event, XidEvent) and (event.xid, event.pci, event.pid) == (79, None, 1)


def test_an_address_out_of_form_is_still_unparsed() -> None:
    assert isinstance(scan_xid_line("NVRM: Xid (PCI:0000:zz:00): 79, GPU has fallen off the bus."), UnparsedXid)


def test_a_redacted_fatal_xid_fails_instead_of_erroring() -> None:
    text = "kernel: NVRM: Xid (PCI:...): 79, pid=1, name=python3, GPU has fallen off the bus.\n"
    assert {f.status for f in judge_text(text, Config(), source="n1") if f.check_id == "gpu.xid"} == {Status.FAIL}
