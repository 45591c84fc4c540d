"""An ``nvidia-smi`` table that stops after its header: read, and judged incomplete (not an unknown text).

nvidia-smi never prints the table's header without a GPU row under it (with no GPU it prints ``No devices
were found`` instead), so a banner and header with no row is output that stopped: cut by the paste, or
nvidia-smi died and the shell said so on the next line. A WSL2 user pasted exactly that (field corpus,
Nevuly/WSL2-Linux-Kernel-Rolling#13: zsh's ``[1]    494 segmentation fault  nvidia-smi`` under the 555
header); it was refused as "the GPU table has no rows" (exit 3). The GPUs' state is not known from it:
``evidence.complete`` ERROR naming what followed the header, never SUCCESS. Input written here in the
555 layout.
"""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import parse_text

HEADER = """Sun May 26 12:43:43 2024
+-----------------------------------------------------------------------------------------+
| NVIDIA-SMI 555.42.03              Driver Version: 555.85         CUDA Version: 12.5     |
|-----------------------------------------+------------------------+----------------------+
| GPU  Name                 Persistence-M | Bus-Id          Disp.A | Volatile Uncorr. ECC |
| Fan  Temp   Perf          Pwr:Usage/Cap |           Memory-Usage | GPU-Util  Compute M. |
|                                         |                        |               MIG M. |
|=========================================+========================+======================|
"""


def test_a_table_cut_after_its_header_is_read_as_incomplete() -> None:
    kind, record = parse_text(HEADER + "Segmentation fault (core dumped)\n")
    assert kind == "nvidia-smi-table" and record.gpus == [] and record.driver_version == "555.85"
    [why] = record.incomplete
    assert "no GPU row" in why and "Segmentation fault (core dumped)" in why
    findings = judge_text(HEADER, Config(), source="n1")
    assert [f.status for f in findings if f.check_id == "evidence.complete"] == [Status.ERROR]
    assert Status.PASS not in {f.status for f in findings}


def test_a_whole_table_is_not_incomplete() -> None:
    row = ("|   0  NVIDIA GeForce RTX 4090        On  |   00000000:01:00.0 Off |                  Off |\n"
           "|  0%   38C    P8             20W /  450W |       1MiB /  24564MiB |      0%      Default |\n"
           "|                                         |                        |                  N/A |\n"
           "+-----------------------------------------+------------------------+----------------------+\n")
    assert parse_text(HEADER + row)[1].incomplete == []
