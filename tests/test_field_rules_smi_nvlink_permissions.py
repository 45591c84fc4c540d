"""``nvidia-smi nvlink -g``/``-e`` run as a user where the driver keeps the link counters to administrators.

The driver's ``RmProfilingAdminOnly`` makes nvidia-smi print, under the GPU, ``NVML: Unable to get the
NvLink link utilization counter control for link 0: Insufficient Permissions`` (pynvml#19, field
corpus). That says nothing of the links: the GPU is listed and its NVLink is not judged (a SKIP
saying why), as for a GPU in MIG mode. Before, the message made the whole paste unreadable.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.errors import ParseError

DENIED = ("GPU 0: Tesla V100-SXM2-32GB (UUID: GPU-00000000-0000-0000-0000-000000000000)\n"
          "NVML: Unable to get the NvLink link utilization counter control for link 0: Insufficient Permissions\n")


def test_the_permission_note_is_read_under_its_gpu() -> None:
    assert detect_kind(DENIED) == "nvidia-smi-nvlink"
    [gpu] = parse_text(DENIED)[1].gpus
    assert gpu.nvlink_note == "no_permission" and gpu.links == []


def test_the_links_are_not_judged_and_the_gpu_is_listed() -> None:
    findings = judge_text(DENIED, Config(), source="node-1")
    nvlink = [f for f in findings if f.check_id == "gpu.nvlink"]
    assert [(f.status, f.code) for f in nvlink] == [(Status.SKIP, "no_permission")]
    assert all(f.status in (Status.PASS, Status.SKIP) for f in findings)


def test_another_nvml_message_under_a_gpu_is_still_refused() -> None:
    odd = DENIED.replace("Insufficient Permissions", "Unknown Error")
    with pytest.raises(ParseError, match="unexpected line"):
        parse_text(odd, kind="nvidia-smi-nvlink")
