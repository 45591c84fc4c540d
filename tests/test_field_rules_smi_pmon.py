"""``nvidia-smi pmon``: the processes on each GPU, judged by the node's compute-process rule.

Before, a pasted ``pmon`` was no text we read (exit 3). It lists, each interval, a row per process
per GPU (``-`` in every column for a GPU with none), under ``# gpu pid type ...`` and a units
line; ``-s um`` adds ``fb`` (MB), ``-o DT`` puts ``Date``/``Time`` first, newer drivers add
``jpg``/``ofa``. Compute processes (``C``, ``C+G``, MPS ``M``/``M+C``) WARN by ``gpu.busy``, as
in a node run; graphics-only ones do not; an idle listing PASSes.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.text import is_command, is_elision

OLD = ("# gpu        pid  type    sm   mem   enc   dec   command\n"
       "# Idx          #   C/G     %     %     %     %   name\n")
NEW_UM = ("# gpu         pid   type     sm    mem    enc    dec    jpg    ofa     fb   command\n"
          "# Idx           #    C/G      %      %      %      %      %      %     MB   name\n")
DATED = ("#Date       Time        gpu        pid  type    sm   mem   enc   dec   command\n"
         "#YYYYMMDD   HH:MM:SS    Idx          #   C/G     %     %     %     %   name\n")


def busy(text: str) -> list[tuple[str, Status, str]]:
    return [(f.subject, f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == "gpu.busy"]


def test_a_compute_process_warns_on_its_gpu_and_an_idle_gpu_passes() -> None:
    text = ("$ nvidia-smi pmon -c 2\n" + OLD +
            "    0      14835     C    45    15     0     0   python\n"
            "    1          -     -     -     -     -     -   -\n"
            "    0      14835     C    47    15     0     0   python\n"  # the same process, next second
            "    1          -     -     -     -     -     -   -\n")
    assert detect_kind(text) == "nvidia-smi-pmon"
    record = parse_text(text)[1]
    assert [(g.index, [(p.pid, p.name, p.type) for p in g.processes or []]) for g in record.gpus] == [
        (0, [(14835, "python", "C")]), (1, [])]
    assert busy(text) == [("n1/gpu0", Status.WARN, "processes_running"), ("n1/gpu1", Status.PASS, "ok")]


@pytest.mark.parametrize(("header", "row", "expected"), [
    (NEW_UM, "    0     2211     G      3      1      -      -      -      -     40   Xorg", Status.PASS),  # graphics
    (NEW_UM, "    0     9000   C+G     60     20      -      -      -      -  30000   trainer", Status.WARN),
    (NEW_UM, "    0     9001     M     60     20      -      -      -      -  30000   mps worker", Status.WARN),
    (DATED, "20240301   12:00:01      0      14835     C    45    15     0     0   python", Status.WARN),
    (OLD, "    0          -     -     -     -     -     -   -", Status.PASS),
])
def test_columns_are_read_by_their_header(header: str, row: str, expected: Status) -> None:
    [(subject, status, _)] = busy(header + row + "\n")
    assert (subject, status) == ("n1/gpu0", expected)


def test_the_memory_column_and_a_command_with_a_space_are_kept() -> None:
    row = "    0     9001     M     60     20      -      -      -      -  30000   mps worker\n"
    [gpu] = parse_text(NEW_UM + row)[1].gpus
    [process] = gpu.processes or []
    assert (process.used_memory_mib, process.name) == (30000, "mps worker")


@pytest.mark.parametrize("text", [
    OLD,  # a header and no sample
    OLD + "    0      14835     C    45\n",  # a row cut short
])
def test_what_is_not_a_whole_sample_is_refused(text: str) -> None:
    with pytest.raises(ParseError):
        parse_text(text, kind="nvidia-smi-pmon")


def test_dmon_is_not_taken_for_pmon() -> None:
    dmon = ("# gpu   pwr  gtemp  mtemp     sm    mem\n# Idx     W      C      C      %      %\n"
            "    0    60     35     40      0      0\n")
    assert detect_kind(dmon) == "nvidia-smi-dmon"


def test_the_command_pasted_alone_above_its_output_is_read_past() -> None:
    """An article quotes ``nvidia-smi pmon`` on its own line, no prompt, then the samples (the Microway
    nvidia-smi article); a line that only starts with the program's name is still output."""
    text = "nvidia-smi pmon\n\n" + OLD + "    0      14835     C    45    15     0     0   python         \n"
    assert detect_kind(text) == "nvidia-smi-pmon"
    assert busy(text) == [("n1/gpu0", Status.WARN, busy(text)[0][2])]
    assert is_command("nvidia-smi pmon") and is_command("sudo /usr/bin/nvidia-smi -q -i 0")
    assert is_command("dcgmi diag -r 1") and not is_command("nvidia-smi has failed because it couldn't talk")
    assert not is_command("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")


@pytest.mark.parametrize("line", ["[snip]", "<snip>", "   [ snip ]", "...snip...", "[snipped]"])
def test_an_authors_snip_marks_an_elision(line: str) -> None:
    assert is_elision(line) and not is_elision("snippet of the log")


@pytest.mark.parametrize("elision", ["...", "[snip]"])
def test_samples_elided_from_a_paste_make_it_incomplete(elision: str) -> None:
    """Rows cut out may have shown a process on any GPU: a GPU the rows left show idle is not known to be idle
    (the clean-clone run's elided pmon fixture, its compute process cut out, was judged SUCCESS)."""
    text = (NEW_UM + f"{elision}\n"
            "    1          -     -      -      -      -      -      -      -      -   -\n")
    findings = judge_text(text, Config(), source="n1")
    assert [(f.status, f.code) for f in findings if f.check_id == "evidence.complete"] == [(Status.ERROR, "incomplete")]
    whole = NEW_UM + "    1          -     -      -      -      -      -      -      -      -   -\n"
    assert not [f for f in judge_text(whole, Config(), source="n1") if f.check_id == "evidence.complete"]
