"""A GPU the loaded driver refuses, and a module load that ends with no GPU, FAIL (issue 27, kernel batch).

The driver ignores a GPU that only a legacy branch supports ("... is supported through the NVIDIA 470.xx Legacy
drivers ... will ignore this GPU. Continuing probe..."), one its release does not list, or one without GSP under
the open nvidia.ko (osapi.c: "installed in this system is not supported by open / by the NVIDIA <v> driver
release"); nv.c then ends the load with "No NVIDIA GPU found.", "No NVIDIA devices probed." or "None of the NVIDIA
devices were initialized.". No Xid stands for either: ``[driver.unsupported_gpu]`` and
``[driver.no_adapter_probed]`` FAIL ``gpu.xid`` with ``reboot_node`` (field cases: siderolabs/talos#8764,
NixOS/nixos-hardware#1828, open-gpu-kernel-modules#696 were each judged PASS before).
"""

from __future__ import annotations

import pytest

from gpu_preflight.actions import DETAIL_KEY
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status

LEGACY_ONLY = ("[    4.100000] NVRM: The NVIDIA Quadro K620 GPU installed in this system is\n"
               "               NVRM:  supported through the NVIDIA 470.xx Legacy drivers. Please\n"
               "               NVRM:  visit http://www.nvidia.com/object/unix.html for more\n"
               "               NVRM:  information.  The 550.54.14 NVIDIA driver will ignore\n"
               "               NVRM:  this GPU.  Continuing probe...\n")
OPEN_NO_GSP = ("NVRM: The NVIDIA GPU 0000:3b:00.0 (PCI ID: 10de:1db4)\n"
               "NVRM: installed in this system is not supported by open\n"
               "NVRM: nvidia.ko because it does not include the required GPU\n"
               "NVRM: System Processor (GSP).\n")
OLD_RELEASE = ("[   10.000001] NVRM: The NVIDIA GPU 0000:02:00.0 (PCI ID: 10de:0a65) installed\n"
               "[   10.000002] NVRM: in this system is not supported by the 304.137 NVIDIA Linux\n"
               "[   10.000003] NVRM: graphics driver release.  Please see 'Appendix A -\n")
NO_GPU_FOUND = "Jan  2 03:04:05 n1 kernel: NVRM: No NVIDIA GPU found.\n"
NONE_INITIALISED = "[   12.5] NVRM: None of the NVIDIA devices were initialized.\n"


@pytest.mark.parametrize("text", [LEGACY_ONLY, OPEN_NO_GSP, OLD_RELEASE, NO_GPU_FOUND, NONE_INITIALISED],
                         ids=["legacy-branch", "open-module-no-gsp", "old-release", "no-gpu-found", "none-initialised"])
def test_a_refused_gpu_or_an_empty_load_fails_with_a_reboot(text: str) -> None:
    found = [(f.status, f.details.get(DETAIL_KEY)) for f in judge_text(text, Config(), source="n1")
             if f.check_id == "gpu.xid"]
    assert found and all(status is Status.FAIL for status, _ in found)
    assert {action for _, action in found} == {"reboot_node"}


def test_the_words_outside_a_driver_line_are_not_the_notice() -> None:
    text = ("[  1.0] usb 1-1: new device\n"
            "The GT 710 is supported through the NVIDIA 470.xx Legacy drivers; no NVIDIA GPU found. by the installer\n")
    assert {f.status for f in judge_text(text, Config(), source="n1") if f.check_id == "gpu.xid"} <= {Status.PASS}
