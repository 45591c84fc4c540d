"""NVRM's "API mismatch" refusal is a node no GPU client can use (issue 27, kernel batch).

nv.c prints it when a client's userspace driver is not the loaded module's version (an upgrade without
a reboot, a DKMS build that did not run), in two wordings ("the client has the version X, but" and, in
newer drivers, "the client '<name>' (pid N)" with the version on the next line), and rsyslog may have
escaped its newlines as ``#012``. No Xid stands for it: ``[driver.api_mismatch]`` FAILs ``gpu.xid`` with
``reboot_node`` (field cases: nvidia-docker#182, negativo17/nvidia-driver#43, nvidia-all#394,
ansible-slurm-appliance#287, dalle-playground#104 were each judged PASS before).
"""

from __future__ import annotations

import pytest

from gpu_preflight.actions import DETAIL_KEY
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status

OLD = ("[ 7386.259769] NVRM: API mismatch: the client has the version 550.54.15, but\n"
       "               NVRM: this kernel module has the version 550.54.14.  Please\n"
       "               NVRM: make sure that this kernel module and all NVIDIA driver\n"
       "               NVRM: components have the same version.\n")
NEW = ("[    9.424670] NVRM: API mismatch: the client 'nvidia-smi' (pid 2211)\n"
       "               NVRM: has the version 580.82.07, but this kernel module has\n"
       "               NVRM: the version 580.65.06.  Please make sure that this\n")
SYSLOG = ("Jun 30 11:07:05 gpu-0 kernel: NVRM: API mismatch: the client has the version 535.54.03, "
          "but#012NVRM: this kernel module has the version 530.30.02.  Please#012\n")


@pytest.mark.parametrize("text", [OLD, NEW, SYSLOG], ids=["old-wording", "client-and-pid", "syslog-#012"])
def test_an_api_mismatch_fails_with_a_reboot(text: str) -> None:
    found = [(f.status, f.details.get(DETAIL_KEY)) for f in judge_text(text, Config(), source="n1")
             if f.check_id == "gpu.xid"]
    assert found and all(status is Status.FAIL for status, _ in found)
    assert {action for _, action in found} == {"reboot_node"}


def test_the_words_in_a_sentence_are_not_the_refusal() -> None:
    text = "[  1.0] usb 1-1: new device\nThe README says an API mismatch between client and module needs a reboot.\n"
    assert {f.status for f in judge_text(text, Config(), source="n1") if f.check_id == "gpu.xid"} <= {Status.PASS}
