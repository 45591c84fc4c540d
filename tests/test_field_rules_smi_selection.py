"""``nvidia-smi -i``/``--id``: a report of the GPUs that were asked for is not a cut report.

``nvidia-smi -i 0 -q`` prints ``Attached GPUs : 4`` and one GPU section (HPE's Nutanix notes,
field corpus). Before, ``nvidia_smi.gpu`` warned "4 attached GPUs but lists 1" although the
pasted command asked for one. The pasted command line is read (:mod:`~gpu_preflight.parsers.
nvidia_smi.command`): the GPUs it selects are the count to meet; one asked for and missing
still WARNs, and a report with no selection shown keeps the WARN.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.nvidia_smi.command import selected_ids, smi_commands


def q_report(command: str, attached: int = 4, sections: int = 1) -> str:
    """A ``-q`` report under ``command`` (a pasted prompt line, or nothing) listing ``sections`` GPUs."""
    gpus = "".join(f"""
GPU 00000000:{0x17 + i:02X}:00.0
    Product Name                          : NVIDIA A16
    Persistence Mode                      : Enabled
    Temperature
        GPU Current Temp                  : 35 C
""" for i in range(sections))
    head = f"{command}\n" if command else ""
    return head + f"""
==============NVSMI LOG==============

Timestamp                                 : Mon Jun 27 10:00:00 2022
Driver Version                            : 580.65.06
CUDA Version                              : 13.0

Attached GPUs                             : {attached}
""" + gpus


def inventory(text: str) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == "nvidia_smi.gpu"]


@pytest.mark.parametrize(("command", "ids"), [
    ("[root@dx01 ~]# nvidia-smi -i 0 -q", ["0"]),
    ("$ nvidia-smi -q -i 0", ["0"]),
    ("user@host:~$ sudo nvidia-smi -q --id=GPU-5e2f0c1a", ["GPU-5e2f0c1a"]),
    ("$ nvidia-smi --id 00000000:17:00.0 -q", ["00000000:17:00.0"]),
    ("$ nvidia-smi -q -i 0,2", ["0", "2"]),
    ("$ nvidia-smi -i0 -q", ["0"]),
    ("$ nvidia-smi -q", None),  # every GPU
    ("$ nvidia-smi --query-gpu=index,name --format=csv", None),  # 'index' is a field, not -i
    ("", None),  # no command pasted
])
def test_the_selection_is_read_from_the_pasted_command(command: str, ids: list[str] | None) -> None:
    assert selected_ids(q_report(command)) == ids


def test_two_commands_select_only_if_both_do() -> None:
    both = "$ nvidia-smi -q -i 0\n$ nvidia-smi -q -i 1\n"
    assert selected_ids(both) == ["0", "1"]
    assert selected_ids("$ nvidia-smi -q -i 0\n$ nvidia-smi -q\n") is None
    assert smi_commands("GPU 0: said nvidia-smi -i 3 once\n") == []  # a mention in output is no command


@pytest.mark.parametrize(("command", "sections", "expected"), [
    ("[root@dx01 ~]# nvidia-smi -i 0 -q", 1, [(Status.PASS, "ok")]),  # one asked for, one listed
    ("$ nvidia-smi -q -i 0,1", 2, [(Status.PASS, "ok")]),
    ("$ nvidia-smi -q -i 0,1", 1, [(Status.WARN, "gpus_not_listed")]),  # GPU 1 asked for and missing
    ("$ nvidia-smi -q", 1, [(Status.WARN, "gpus_not_listed")]),  # no selection: 3 GPUs were not judged
    ("", 1, [(Status.WARN, "gpus_not_listed")]),
])
def test_the_count_is_judged_against_the_selection(command: str, sections: int,
                                                   expected: list[tuple[Status, str]]) -> None:
    assert inventory(q_report(command, sections=sections)) == expected


def test_the_pass_says_the_selection() -> None:
    [finding] = [f for f in judge_text(q_report("$ nvidia-smi -q -i 0"), Config(), source="n1")
                 if f.check_id == "nvidia_smi.gpu"]
    assert "-i 0" in finding.summary and "4 attached" in finding.summary


def test_a_csv_query_with_a_selection() -> None:
    csv = ("$ nvidia-smi -i 2 --query-gpu=index,count,name,driver_version,temperature.gpu --format=csv\n"
           "index, count, name, driver_version, temperature.gpu\n"
           "2, 4, NVIDIA A16, 580.65.06, 35\n")
    assert inventory(csv) == [(Status.PASS, "ok")]
    assert inventory(csv.replace(" -i 2", "")) == [(Status.WARN, "gpus_not_listed")]
