"""nvidia-smi's ``GPU Reset Status`` and the ``-q`` blocks people paste alone, read (issue 27, "GPU requires
reset notices").

Drivers 525-550 print, per GPU, ``GPU Reset Status`` with ``Reset Required`` and ``Drain and Reset
Recommended`` (``-q``; ``<gpu_reset_status>`` in ``-q -x``; ``reset_status.*`` in ``--query-gpu``) before
``GPU Recovery Action`` replaced them; nvidia-smi's own help: "Either of these being 'Yes' indicates that an
unrecoverable error has occurred". They were not read: a GPU whose driver asked for a reset passed. They are
now the recovery action NVML's newer field names (``GPU_RESET``, ``DRAIN_AND_RESET``; both ``No``: ``NONE``),
judged by ``gpu.recovery_action`` as a live reading is. And ``-q`` blocks pasted without their GPU header
(``-q -d RESET_STATUS``/``CLOCK``, one ``GPU Link Info`` block of ``PCI``) are known as ``-q``: the link width
a block shows is judged, clocks alone are recognised and judge nothing. Inputs written here in nvidia-smi's
layouts.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind


def statuses(text: str, check_id: str) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == check_id]


def reset_block(required: str, drain: str) -> str:
    return (f"    GPU Reset Status\n        Reset Required                    : {required}\n"
            f"        Drain and Reset Recommended       : {drain}\n")


@pytest.mark.parametrize(("required", "drain", "want"), [
    ("Yes", "No", [(Status.FAIL, "gpu_reset")]),
    ("No", "Yes", [(Status.FAIL, "drain_and_reset")]),
    ("No", "No", [(Status.PASS, "ok")]),
])
def test_a_reset_status_block_pasted_alone_is_judged(required: str, drain: str, want: list[object]) -> None:
    text = reset_block(required, drain)
    assert detect_kind(text) == "nvidia-smi-q"
    assert statuses(text, "gpu.recovery_action") == want


def test_a_reset_status_not_available_is_no_reading() -> None:
    assert [s for s, _ in statuses(reset_block("N/A", "N/A"), "gpu.recovery_action")] in ([], [Status.SKIP])


def test_the_newer_recovery_action_wins_over_the_reset_status() -> None:
    text = ("GPU 00000000:07:00.0\n    Product Name                          : NVIDIA H100 80GB HBM3\n"
            + reset_block("Yes", "No") + "    GPU Recovery Action                   : None\n")
    assert statuses(text, "gpu.recovery_action") == [(Status.PASS, "ok")]


def test_the_reset_status_in_xml_and_csv() -> None:
    xml = ("<?xml version=\"1.0\" ?>\n<nvidia_smi_log>\n<driver_version>535.104.05</driver_version>\n"
           "<attached_gpus>1</attached_gpus>\n<gpu id=\"00000000:07:00.0\">\n"
           "<product_name>NVIDIA A100-SXM4-80GB</product_name>\n<gpu_reset_status>\n"
           "<reset_required>No</reset_required>\n<drain_and_reset_recommended>Yes</drain_and_reset_recommended>\n"
           "</gpu_reset_status>\n</gpu>\n</nvidia_smi_log>\n")
    assert (Status.FAIL, "drain_and_reset") in statuses(xml, "gpu.recovery_action")
    csv = ("index, name, reset_status.reset_required, reset_status.drain_and_reset_recommended\n"
           "0, NVIDIA A100-SXM4-80GB, Yes, No\n1, NVIDIA A100-SXM4-80GB, No, No\n")
    assert statuses(csv, "gpu.recovery_action") == [(Status.FAIL, "gpu_reset"), (Status.PASS, "ok")]


def test_a_link_info_block_pasted_alone_is_judged() -> None:
    text = ("        GPU Link Info\n            PCIe Generation\n                Max                       : 4\n"
            "                Current                   : 4\n            Link Width\n"
            "                Max                       : 16x\n                Current                   : 8x\n")
    assert detect_kind(text) == "nvidia-smi-q"
    assert (Status.FAIL, "link_downtrained") in statuses(text, "gpu.pcie")
