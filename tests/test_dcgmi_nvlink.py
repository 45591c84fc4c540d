"""``dcgmi nvlink -s`` / ``-e`` (``parsers/dcgmi/nvlink.py``): detected, read and judged by ``gpu.nvlink``.

The texts are written here in the layout ``dcgmi/Nvlink.cpp`` prints (DisplayNvLinkLinkStatus: one letter
per link slot from nvLinkStateToCharacter; DisplayNvLinkErrorCountsForGpu: the "NVLINK Error Counts" tree
box, or its ``-j`` JSON). Before this reader none of them was recognised (exit 3): a paste showing every
NVLink of a node Down was "not a text we parse" instead of a FAIL.
"""

from __future__ import annotations

import json

import pytest

from gpu_preflight.checks.evidence import judge_record
from gpu_preflight.config import Config
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

BOX = "+----------------------+\n|  NvLink Link Status  |\n+----------------------+\n"
KEY = "\nKey: Up=U, Down=D, Disabled=X, Not Supported=_\n"


def status_text(rows: dict[int, str], switches: dict[int, str] | None = None) -> str:
    gpus = "".join(f"    gpuId {i}:\n        {letters}\n" for i, letters in rows.items())
    if switches:
        nvs = "".join(f"    physicalId {i}:\n        {letters}\n" for i, letters in switches.items())
    else:
        nvs = "    No NvSwitches found.\n"
    return f"{BOX}GPUs:\n{gpus}NvSwitches:\n{nvs}{KEY}"


def worst(text: str, check: str = "gpu.nvlink") -> Status:
    kind, record = parse_text(text)
    assert kind == "dcgmi-nvlink"
    findings = [f for f in judge_record(kind, record, Config()) if f.check_id == check]
    assert findings, [f.summary for f in judge_record(kind, record, Config())]
    return Status.worst(f.status for f in findings)


H800 = " ".join(["U"] * 8 + ["_"] * 10)


def test_all_links_up_with_unsupported_slots_passes() -> None:
    text = status_text({i: H800 for i in range(8)})
    assert detect_kind(text) == "dcgmi-nvlink"
    _, record = parse_text(text)
    assert [len(g.links) for g in record.gpus] == [8] * 8  # '_' slots are no links
    assert worst(text) is Status.PASS


@pytest.mark.parametrize("letter", ["D", "X"])
def test_a_link_down_or_disabled_fails(letter: str) -> None:
    row = " ".join(["U"] * 3 + [letter] + ["U"] * 14)
    assert worst(status_text({0: " ".join(["U"] * 18), 1: row})) is Status.FAIL


def test_every_link_down_fails_not_unrecognised() -> None:
    down = " ".join(["D"] * 18)
    assert worst(status_text({0: down, 1: down})) is Status.FAIL


def test_the_grep_excerpt_without_box_or_key_is_read() -> None:
    excerpt = "\n    gpuId 0:\n        U U U U U U U U U U U U\n    gpuId 1:\n        U U U D U U U U U U U U\n"
    assert detect_kind(excerpt) == "dcgmi-nvlink"
    assert worst(excerpt) is Status.FAIL


def test_a_switch_link_down_fails_on_the_switch() -> None:
    up = " ".join(["U"] * 18)
    text = status_text({0: up}, switches={8: "U U D U"})
    kind, record = parse_text(text)
    failed = [f for f in judge_record(kind, record, Config()) if f.status is Status.FAIL]
    assert [f.subject.rsplit("/", 1)[-1] for f in failed] == ["nvswitch8"]


def test_a_gpu_without_nvlink_is_not_a_link_fault() -> None:
    text = status_text({0: " ".join(["_"] * 18)})
    assert worst(text) is not Status.FAIL


def error_table(counts: dict[int, dict[str, int]], gpu: int = 0) -> str:
    rule = "+-----------------------------+------------------------------------------------+\n"
    head = f"{rule}| NVLINK Error Counts{' ' * 58}|\n| GPU {gpu}{' ' * (73 - len(str(gpu)))}|\n"
    rows = ""
    for link, counters in counts.items():
        rows += f"| Link {link:<23}|{' ' * 48}|\n"
        rows += "".join(f"| -> {name:<25}| {value:<47}|\n" for name, value in counters.items())
    return head + rule.replace("-", "=") + rows + rule


ZERO = {"CRC FLIT Error": 0, "CRC Data Error": 0, "Replay Error": 0, "Recovery Error": 0}


def test_error_table_zero_counters_pass_and_counters_are_read() -> None:
    text = "> dcgmi nvlink -g 1 -e\n" + error_table({n: ZERO for n in range(8)}, gpu=1)
    assert detect_kind(text) == "dcgmi-nvlink"
    _, record = parse_text(text)
    assert record.gpus[0].index == 1 and len(record.gpus[0].links) == 8
    assert record.gpus[0].links[0].errors == {"crc_flit": 0, "crc_data": 0, "replay": 0, "recovery": 0}
    assert worst(text) is Status.PASS


def test_error_table_many_crc_errors_warn() -> None:
    text = error_table({0: {**ZERO, "CRC Data Error": 5000}, 1: ZERO})
    assert worst(text) is Status.WARN


def test_error_counts_json() -> None:
    body = {f"Link {n}": {"children": {k: {"value": str(v)} for k, v in ZERO.items()}} for n in range(2)}
    body["Link 1"]["children"]["Recovery Error"]["value"] = "7000"
    text = json.dumps({"body": body, "header": ["NVLINK Error Counts", "GPU 3"]}, indent=8)
    assert detect_kind(text) == "dcgmi-nvlink"
    _, record = parse_text(text)
    assert record.gpus[0].index == 3 and record.gpus[0].links[1].errors["recovery"] == 7000
    assert worst(text) is Status.WARN
