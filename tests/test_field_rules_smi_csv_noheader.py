"""``nvidia-smi --query-gpu=... --format=csv,noheader``: read when the pasted command names the columns.

Without its header line a CSV row could be anything, so such output was refused (exit 3). The
command line pasted above it names the fields in order: with it the rows are read and judged as
any ``--query-gpu`` CSV; without it the text stays unrecognised.
"""

from __future__ import annotations

import pytest
from msgspec.structs import replace

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.nvidia_smi.command import query_fields

FIELDS = "index,name,driver_version,temperature.gpu,memory.used"
ROWS = ("0, NVIDIA A100-SXM4-80GB, 550.54.15, 34, 1 MiB\n"
        "1, NVIDIA A100-SXM4-80GB, 550.54.15, 96, 1 MiB\n")  # GPU 1 at its shutdown temperature


def pasted(command: str) -> str:
    return command + "\n" + ROWS


@pytest.mark.parametrize(("command", "fields"), [
    (f"$ nvidia-smi --query-gpu={FIELDS} --format=csv,noheader", FIELDS.split(",")),
    (f"root@n1:~# nvidia-smi --format=csv,noheader,nounits --query-gpu={FIELDS}", FIELDS.split(",")),
    (f'$ nvidia-smi --query-gpu="{FIELDS}" --format="csv,noheader"', FIELDS.split(",")),
    (f"$ nvidia-smi --query-gpu={FIELDS} --format=csv", FIELDS.split(",")),  # used only if the header is missing
    (f"nvidia-smi --query-gpu={FIELDS} --format=csv", FIELDS.split(",")),  # the command pasted without a prompt
    ("$ nvidia-smi --format=csv,noheader", None),  # no fields named
])
def test_the_fields_come_from_the_command(command: str, fields: list[str] | None) -> None:
    assert query_fields(pasted(command)) == fields


def test_rows_under_a_command_naming_their_fields_are_judged() -> None:
    text = pasted(f"$ nvidia-smi --query-gpu={FIELDS} --format=csv,noheader")
    assert detect_kind(text) == "nvidia-smi-csv"
    record = parse_text(text)[1]
    assert [(g.index, g.temperature_c) for g in record.gpus] == [(0, 34), (1, 96)]
    config = Config(gpu=replace(Config().gpu, temp_limit_c=92))
    thermal = {(f.subject, f.status) for f in judge_text(text, config, source="n1") if f.check_id == "gpu.thermal"}
    assert ("n1/gpu1", Status.FAIL) in thermal and ("n1/gpu0", Status.FAIL) not in thermal


@pytest.mark.parametrize("command", [f"nvidia-smi --query-gpu={FIELDS} --format=csv",
                                     f"$ nvidia-smi --query-gpu={FIELDS} --format=csv"])
def test_rows_whose_header_line_the_paste_left_out_are_read_by_the_command(command: str) -> None:
    """An article or a thread that quotes ``--format=csv`` output without its header line (the
    Microway nvidia-smi article does): the command still names the columns."""
    record = parse_text(pasted(command))[1]
    assert [(g.index, g.temperature_c) for g in record.gpus] == [(0, 34), (1, 96)]


def test_a_header_under_the_command_names_the_columns_itself() -> None:
    text = "nvidia-smi --query-gpu=index,temperature.gpu --format=csv\ntemperature.gpu, index\n34, 0\n"
    record = parse_text(text)[1]
    assert [(g.index, g.temperature_c) for g in record.gpus] == [(0, 34)]


def test_rows_without_the_command_stay_unrecognised() -> None:
    assert detect_kind(ROWS) is None
    with pytest.raises(ParseError, match="noheader"):
        parse_text(ROWS, kind="nvidia-smi-csv")


def test_rows_that_do_not_fit_the_named_fields_are_refused() -> None:
    text = pasted("$ nvidia-smi --query-gpu=index,name,driver_version --format=csv,noheader")
    with pytest.raises(ParseError):
        parse_text(text, kind="nvidia-smi-csv")
