"""Rules issue 27's field corpus taught the nvidia-smi table and dcgmi readers (in-repository texts only).

* nvidia-smi prints ``ERR!`` where the driver failed to return a reading: that is a finding
  (``nvidia_smi.failure`` / ``unreadable_reading``, WARN) naming the GPU and the column, never
  a silently missing value.
* dcgmi result rows pasted without the ``Diagnostic | Result`` header or any category line
  are still recognised by DCGM's own result phrasing (``Fail - All``, ``Pass - GPUs: 1, 2``),
  judged on what they show, and say they are a fragment.
* A dcgmi paste that ends inside its last row (no closing ``|``) is read as far as it goes and
  marked cut, instead of being refused as unreadable; so is one whose cut last row is followed
  only by the author's ``...`` (DCGM#49 pasted a PCIe ``Fail - All`` that way).
* A paste cut down to a test's wrapped warning (a ``Warning`` row and the rows continuing it, in
  dcgmi's 27-character label column) is still ``dcgmi diag``: it is what a failing test printed.
* The diagnostic's refusal to test a GPU in MIG mode ("GPU 0's MIG configuration is incompatible
  with the diagnostic", printed by ``dcgmi diag`` and by nvvs run by hand, mej/nhc#29) is a
  ``dcgmi diag`` text: an ERROR of ``dcgm.diag`` (nothing tested) and, since DCGM states the GPU
  is in MIG mode, ``gpu.inventory.mig`` judges it as on the node (FAIL unless MIG is planned).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.checks.gpu_inventory import InventorySettings
from gpu_preflight.config import Config
from gpu_preflight.config.fields import with_settings
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.errors import ParseError

FIELD = Path(__file__).parent / "fixtures" / "field"
# a driver that could not read the fan prints ERR! in its cell (gpud's 525.125.06 capture shows it):
# here put into a clean RTX 4080 table of the field corpus, the same cell of the same layout
CLEAN_TABLE = (FIELD / "nvidia-smi" / "exporter-table-rtx4080s-595.71.05-load.txt").read_text()
FAN_ERR = CLEAN_TABLE.replace("|  0%   45C", "|ERR!   45C")
DCGM_264 = (FIELD / "dcgm" / "nccltests264-r3-3.3.8-h100x8-cuinit-fail.txt").read_text().splitlines()


def statuses(text: str, config: Config | None = None) -> dict[str, set[Status]]:
    out: dict[str, set[Status]] = {}
    for f in judge_text(text, config or Config(), source="node-1"):
        out.setdefault(f.check_id, set()).add(f.status)
    return out


def test_err_cell_is_an_unreadable_reading_of_that_gpu() -> None:
    kind, record = parse_text(FAN_ERR)
    assert kind == "nvidia-smi-table"
    [failure] = record.failures
    assert (failure.code, failure.gpu) == ("unreadable_reading", "00000000:01:00.0")
    assert "Fan" in failure.message
    assert statuses(FAN_ERR)["nvidia_smi.failure"] == {Status.WARN}


def test_a_table_without_err_has_no_unreadable_reading() -> None:
    clean = FAN_ERR.replace("|ERR!   45C", "|  0%   45C")
    assert parse_text(clean)[1].failures == []
    assert "nvidia_smi.failure" not in statuses(clean)


def test_headerless_dcgmi_rows_are_recognised_and_judged_as_a_fragment() -> None:
    start = next(i for i, line in enumerate(DCGM_264) if line.startswith("| GPU Memory"))
    rows = "\n".join(DCGM_264[start:start + 8])  # the failing test and its first warning, no header, no category
    assert detect_kind(rows) == "dcgmi-diag"
    record = parse_text(rows)[1]
    assert record.fragment == 1 and record.tests[0].status == "fail"
    judged = statuses(rows)
    assert judged["dcgm.diag"] == {Status.FAIL}
    assert judged["evidence.fragment"] == {Status.SKIP}


def test_rows_of_another_tool_saying_pass_are_not_dcgmi() -> None:
    assert detect_kind("| build | Pass |\n| lint  | Fail |\n") is None


@pytest.mark.parametrize(("tail", "notes"), [
    ("\n|                           | t DCGM. Rerun", ("cut before its closing",)),
    # the shape of DCGM#49's paste: a failing test, its wrapped warning cut mid-row, then '...'
    ("\n|                           | t DCGM. Rerun   \n...\n", ("cut before its closing", "elided")),
], ids=["cut-in-last-row", "cut-row-then-elision"])
def test_a_paste_cut_inside_a_row_is_read_and_marked_cut(tail: str, notes: tuple[str, ...]) -> None:
    start = next(i for i, line in enumerate(DCGM_264) if line.startswith("| GPU Memory"))
    cut = "\n".join(DCGM_264[start:start + 3]) + tail
    record = parse_text(cut)[1]
    assert record.tests[0].status == "fail"
    for note in notes:
        assert any(note in m for m in record.incomplete)
    judged = statuses(cut)
    assert judged["dcgm.diag"] == {Status.FAIL} and judged["evidence.complete"] == {Status.ERROR}


def test_a_cut_row_with_table_text_after_it_is_still_refused() -> None:
    # only an elision may follow a cut row: another row after it means the table itself is broken
    start = next(i for i, line in enumerate(DCGM_264) if line.startswith("| GPU Memory"))
    rows = "\n".join(DCGM_264[start:start + 3])
    broken = rows + "\n|                           | t DCGM. Rerun\n...\n| PCIe | Pass |\n"
    with pytest.raises(ParseError, match="without a label and a result cell"):
        parse_text(broken, kind="dcgmi-diag")


# nvvs run by hand on a GPU in MIG mode (its banner and its one-line answer, as mej/nhc#29 pasted them)
NVVS_MIG = ("/usr/share/nvidia-validation-suite/nvvs\n\nDCGM GPU Diagnostic (version 418)\n\n"
            "GPU 0's MIG configuration is incompatible with the diagnostic because it prevents access to the "
            "entire GPU.\n")


def test_a_refusal_for_mig_is_dcgmi_diag_naming_the_gpu() -> None:
    assert detect_kind(NVVS_MIG) == "dcgmi-diag"
    record = parse_text(NVVS_MIG)[1]
    assert record.mig_gpus == [0] and record.overall == "error" and record.tests == []
    judged = statuses(NVVS_MIG)
    assert judged["dcgm.diag"] == {Status.ERROR}
    assert judged["gpu.inventory.mig"] == {Status.FAIL}


def test_a_refusal_for_mig_passes_the_mig_rule_where_mig_is_planned() -> None:
    planned = with_settings(Config(), InventorySettings, mig_mode="enabled")
    judged = statuses(NVVS_MIG, planned)
    assert judged["gpu.inventory.mig"] == {Status.PASS}
    assert judged["dcgm.diag"] == {Status.ERROR}  # still nothing tested


def test_a_diagnostic_error_without_mig_names_no_mig_gpu() -> None:
    refused = "Error: Diagnostic could not be run while the GPUs are in use.\n"
    assert parse_text(refused, kind="dcgmi-diag")[1].mig_gpus == []
    assert "gpu.inventory.mig" not in statuses(refused)


def test_a_wrapped_warning_alone_is_dcgmi_diag() -> None:
    start = next(i for i, line in enumerate(DCGM_264) if line.startswith("| Warning"))
    warning = "\n".join(DCGM_264[start:start + 3]) + "\n"  # the warning row and two continuation rows, nothing else
    assert detect_kind(warning) == "dcgmi-diag"
    assert statuses(warning)["dcgm.diag"] == {Status.FAIL}


def test_a_markdown_warning_row_is_not_dcgmi() -> None:
    assert detect_kind("| Warning | disk almost full |\n|         | on /var           |\n") is None
