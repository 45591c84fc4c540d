"""Machine checks in a saved kernel log (``kernel.mce``), the rule issue 27's third kernel batch taught.

A GPU node froze collecting data; the ``dmesg -wH`` lines just before were the host's machine checks, an
uncorrected memory error on one of its DIMMs (ovro-lwa/lwa-issues#117, quoted below). No GPU line says
anything, yet the node is unfit for a job until the DIMM is replaced. The status an MCE prints says itself
whether it was corrected (``MCi_STATUS`` bit 61, UC); EDAC's counts (``UE``/``CE``) and AMD's decoded
``Error Status:`` say it in words. The texts are the kernel's formats (``mce/core.c``, ``drivers/edac``,
``mce_amd.c``); inputs are built here.
"""

from __future__ import annotations

import pytest

from gpu_preflight.actions import DETAIL_KEY
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.host_log import host_message

# ovro-lwa/lwa-issues#117: status fc00010001010092 has VAL, OVER, UC (bit 61), EN, MISCV and ADDRV set
FROZEN_NODE = """\
[May19 19:57] CMCI storm detected: switching to poll mode
[  +0.000127] mce: [Hardware Error]: Machine check events logged
[  +0.000013] EDAC skx MC3: HANDLING MCE MEMORY ERROR
[  +0.000001] EDAC skx MC3: CPU 10: Machine Check Event: 0 Bank 8: fc00010001010092
[  +0.000002] EDAC skx MC3: PROCESSOR 0:50657 TIME 1653015421 SOCKET 1 APIC 20
"""


def mce(text: str) -> dict[str, tuple[Status, object]]:
    return {f.code: (f.status, f.details.get(DETAIL_KEY))
            for f in judge_text(text, Config(), kind="dmesg", source="n1") if f.check_id == "kernel.mce"}


def test_an_uncorrected_machine_check_fails_the_node_with_isolation() -> None:
    found = mce(FROZEN_NODE)
    assert found["mce_uncorrected"] == (Status.FAIL, "isolate_node")
    assert found["mce_corrected"] == (Status.WARN, "monitor")  # the storm and the notice before it


@pytest.mark.parametrize(("line", "code"), [
    # the same bank's status without the UC bit (0xdc...: VAL, OVER, EN, MISCV, ADDRV): corrected
    ("[  12.0] mce: [Hardware Error]: CPU 3: Machine Check: 0 Bank 5: dc00000000010090", "mce_corrected"),
    ("[  12.0] mce: [Hardware Error]: CPU 3: Machine Check Exception: 5 Bank 4: b200000000070f0f", "mce_uncorrected"),
    ("[  536.6] EDAC MC0: 1 CE single-symbol chipkill ECC on P0_Node0_Channel5_Dimm0 DIMMF1 (node:0 card:5)",
     "mce_corrected"),
    ("[  536.6] EDAC MC3: 1 UE memory read error on CPU_SrcID#1_MC#1_Chan#2_DIMM#0 (channel:2 slot:0)",
     "mce_uncorrected"),
    (" kernel:[Hardware Error]: Error Status: Corrected error, no action required.", "mce_corrected"),
    ("[ 88.1] [Hardware Error]: Error Status: Uncorrected, software restartable error.", "mce_uncorrected"),
    ("[ 90.2] Kernel panic - not syncing: Fatal machine check", "mce_uncorrected"),
])
def test_each_machine_check_form_says_whether_it_was_corrected(line: str, code: str) -> None:
    found = host_message(line)
    assert found is not None and found[0] == code


@pytest.mark.parametrize("line", [
    "[    1.234] EDAC MC: Ver: 3.0.0",
    "[    1.240] EDAC skx: ECC is enabled.",
    "[    2.001] mce: CPU0: Thermal monitoring enabled (TM1)",
    "[    2.002] MCE: In-kernel MCE decoding enabled.",
])
def test_machine_check_setup_lines_at_boot_are_not_errors(line: str) -> None:
    assert host_message(line) is None
    assert mce(line + "\n") == {}
