"""``nvidia-smi -q`` excerpts whose top-level sections start with "GPU" (issue 27's field corpus).

A ``-q`` pasted without its ``GPU <bus id>`` header has the GPU's sections at its top level; some of
them are named ``GPU Operation Mode``, ``GPU Virtualization Mode``, ``GPU Reset Status``. Only the
header line opens a GPU: those sections are parts of the one GPU the excerpt shows (the cuts of an
A16 vGPU host's ``-q``, HPE's Nutanix notes, read as two GPUs and judged nothing but their count).
And ``CUDA Version : Not Found``, printed where no CUDA driver is installed (a vGPU or ESXi host), is
no version: it is not judged against the CUDA floor.
"""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import parse_text

A16 = (Path(__file__).parent / "fixtures" / "field" / "nvidia-smi" / "hpe-nutanix-ahv-q-i0-a16-470.129.04.txt"
       ).read_text().splitlines()


def test_an_excerpt_below_the_gpu_header_is_one_gpu() -> None:
    start = next(i for i, line in enumerate(A16) if line.strip() == "MIG Mode")
    excerpt = "\n".join(A16[start:]) + "\n"  # from a section under the header to the report's end
    assert sum(line.strip().startswith("GPU ") and not line.strip().startswith("GPU 0") for line in A16[start:]) >= 2
    kind, record = parse_text(excerpt)
    assert kind == "nvidia-smi-q" and len(record.gpus) == 1 and record.fragment
    judged = {f.check_id: f.status for f in judge_text(excerpt, Config(), source="n") if f.status is not Status.SKIP}
    assert "gpu.inventory.count" not in judged  # no GPU count is made up
    assert judged["gpu.pcie"] is Status.FAIL  # the x4-of-x16 link the excerpt shows


def test_cuda_not_found_is_no_cuda_version() -> None:
    record = parse_text("\n".join(A16) + "\n")[1]
    assert record.driver_version == "470.129.04" and record.cuda_version is None
    summaries = [f.summary for f in judge_text("\n".join(A16) + "\n", Config(), source="n")]
    assert not any("Not Found" in s for s in summaries)
