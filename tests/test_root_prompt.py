"""A root shell's prompt (``#``) or a conda shell's (``(base) user@host:~$``) before a pasted command is
not tool output (issue 27's field corpus).

People paste the command with its output; as root the prompt is ``#``, the character nccl-tests and
``nvidia-smi dmon`` start their own header lines with. HPE's presales notes (field corpus,
``hpe-*``) paste ``# nvidia-smi --list-gpus``, ``# nvidia-smi nvlink -s`` and a ``--query-gpu`` CSV
that way: the prompt line made each an unknown text. A ``#`` line is a prompt only when a command
whose output we read follows it. A conda or virtualenv shell puts the environment's name before the
prompt (pynvml#19 pasted ``(base) bzaitlen@dgx15:~$ nvidia-smi nvlink -g 0``).
"""

from __future__ import annotations

import pytest

from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.text import is_prompt

LISTING = ("GPU 0: NVIDIA A100-PCIE-40GB (UUID: GPU-00000000-0000-0000-0000-000000000001)\n"
           "GPU 1: NVIDIA A100-PCIE-40GB (UUID: GPU-00000000-0000-0000-0000-000000000002)\n")
CSV = ("name, pci.bus_id, temperature.gpu, memory.used [MiB]\n"
       "NVIDIA A100-PCIE-40GB, 00000000:12:00.0, 39, 1 MiB\n")


@pytest.mark.parametrize("line", [
    "# nvidia-smi --list-gpus",
    "# nvidia-smi_-q_-d_PERFORMANCE",
    "root@gpu-7:~# dcgmi diag -r 1",
    "[root@node01 ~]# sudo ibstat",
    "# ./build/all_reduce_perf -b 8 -e 8G -f 2 -g 8",
    "$ nvidia-smi",
    "(base) bzaitlen@dgx15:~$ nvidia-smi nvlink -g 0",
    "(pytorch-2.1) $ nvidia-smi -q",
    "(base) root@gpu-7:~# nvidia-smi topo -m",
])
def test_command_lines_are_prompts(line: str) -> None:
    assert is_prompt(line)


@pytest.mark.parametrize("line", [
    "# nThread 1 nGpus 8 minBytes 8 maxBytes 8589934592 step: 2(factor) warmup iters: 5 iters: 20",
    "#  Rank  0 Group  0 Pid  12345 on node-1 device  0 [0x07] NVIDIA H100 80GB HBM3",
    "# gpu    pwr  gtemp  mtemp     sm    mem    enc    dec    jpg    ofa   mclk   pclk",
    "# Out of bounds values : 0 OK",
    "#Date       Time        gpu     fb   bar1",
])
def test_tool_header_lines_are_not_prompts(line: str) -> None:
    assert not is_prompt(line)


def test_a_listing_after_a_root_prompt_is_still_a_listing() -> None:
    assert detect_kind("# nvidia-smi --list-gpus\n" + LISTING) == detect_kind(LISTING) == "nvidia-smi-list"


def test_a_query_csv_after_a_root_prompt_is_still_a_csv() -> None:
    prompt = "# nvidia-smi --query-gpu name,pci.bus_id,temperature.gpu,memory.used --format csv\n"
    assert detect_kind(prompt + CSV) == detect_kind(CSV) == "nvidia-smi-csv"


def test_a_listing_after_a_conda_prompt_is_still_a_listing() -> None:
    assert detect_kind("(base) user@gpu-7:~$ nvidia-smi -L\n" + LISTING) == "nvidia-smi-list"


@pytest.mark.parametrize("line", ["$", "$ ", "user@gpu-7:~$", "(base) user@gpu-7:~/work$", "[root@node01 ~]#",
                                  "root@gpu-7:~#"])
def test_a_prompt_alone_is_the_shell_waiting(line: str) -> None:
    """go-dcgm#30 pasted ``$ nvidia-smi -L``, the listing, then the next ``$`` with nothing after it."""
    assert is_prompt(line)


@pytest.mark.parametrize("line", ["#", "# ", "[...]", "$5", "cost: 5$"])
def test_a_bare_hash_or_a_dollar_in_text_is_not_a_prompt(line: str) -> None:
    assert not is_prompt(line)


def test_a_listing_ended_by_an_idle_prompt_is_read() -> None:
    from gpu_preflight.parsers.nvidia_smi.listing import parse_list

    text = "$ nvidia-smi -L\n" + LISTING + "$\n"
    assert detect_kind(text) == "nvidia-smi-list"
    assert [g.index for g in parse_list(text).gpus] == [0, 1]
