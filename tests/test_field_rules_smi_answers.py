"""``nvidia-smi mig`` listings and the setters' answers: judged on the settings they state.

Before, both were no text we read (exit 3). ``nvidia-smi mig -lgi``/``-lgip``/``-lci``/``-lcip`` list
GPU and compute instances (or profiles) of GPUs in MIG mode only (a GPU without it makes nvidia-smi
say ``No MIG-enabled devices found.``): each GPU index they show is a GPU with MIG enabled, FAIL by
``gpu.inventory.mig`` as in a node run. The setters' answers (``-pm``, ``-c``, ``-mig``, ``-e``) state
a setting of the GPU they name by bus id, judged by that setting's check; ``-pl``/``-ac``/``-lgc``
answers, their refusals and a reset that worked state nothing a check judges (SKIP, so nothing else
judged is ERROR); a reset nvidia-smi could not do FAILs (``nvidia_smi.failure`` ``reset_failed``).
Inputs are written here in nvidia-smi's layouts (drivers 470-580).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.cli.main import main
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.errors import ParseError

LGI = """+-------------------------------------------------------+
| GPU instances:                                        |
| GPU   Name             Profile  Instance   Placement  |
|                          ID       ID       Start:Size |
|=======================================================|
|   0  MIG 3g.40gb          9        2          4:4     |
+-------------------------------------------------------+
|   2  MIG 1g.10gb         19        9          2:1     |
+-------------------------------------------------------+
"""
LGIP = """+-----------------------------------------------------------------------------+
| GPU instance profiles:                                                      |
| GPU   Name             ID    Instances   Memory     P2P    SM    DEC   ENC  |
|                              Free/Total   GiB              CE    JPEG  OFA  |
|=============================================================================|
|   1  MIG 1g.10gb       19     7/7        9.50       No     14     0     0   |
|                                                             1     0     0   |
+-----------------------------------------------------------------------------+
"""
LCI = """+--------------------------------------------------------------------+
| Compute instances:                                                 |
| GPU     GPU       Name             Profile   Instance   Placement  |
|       Instance                       ID        ID       Start:Size |
|         ID                                                         |
|====================================================================|
|   3      1       MIG 3g.40gb          2         0          0:3     |
+--------------------------------------------------------------------+
"""


def statuses(text: str, check_id: str) -> list[tuple[str, Status, str]]:
    return [(f.subject, f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == check_id]


def judged_nothing(text: str) -> bool:
    """Every finding a SKIP: the run then reports ``run.coverage`` ERROR (exit 3), never SUCCESS."""
    return {f.status for f in judge_text(text, Config(), source="n1")} == {Status.SKIP}


@pytest.mark.parametrize(("text", "gpus"), [
    ("$ sudo nvidia-smi mig -lgi\n" + LGI, [0, 2]),
    (LGIP, [1]),  # profiles are listed for a GPU in MIG mode even with no instance
    (LCI, [3]),  # the compute table puts the GPU instance id between the GPU and the name
    ("Successfully created GPU instance ID  1 on GPU  5 using profile MIG 3g.40gb (ID  9)\n"
     "Successfully created compute instance ID  0 on GPU  5 GPU instance ID  1 using profile MIG 3g.40gb (ID  2)\n",
     [5]),
])
def test_every_gpu_a_mig_listing_or_answer_names_has_mig_enabled(text: str, gpus: list[int]) -> None:
    assert detect_kind(text) == "nvidia-smi-mig"
    assert statuses(text, "gpu.inventory.mig") == [(f"n1/gpu{i}", Status.FAIL, "mig_mismatch") for i in gpus]
    assert statuses(text, "gpu.inventory.count") == []  # a listing of MIG GPUs says nothing of the others


@pytest.mark.parametrize("text", [
    "No MIG-enabled devices found.\n",
    "No GPU instances found: Not Found\n",
    "Failed to display compute instances: Insufficient Permissions\n",
])
def test_a_mig_answer_naming_no_gpu_is_stated_and_judges_nothing(text: str) -> None:
    assert detect_kind(text) == "nvidia-smi-mig"
    assert [s for _, s, _ in statuses(text, "nvidia_smi.answer")] == [Status.SKIP]
    assert judged_nothing(text)


def test_the_setters_settings_are_judged_by_their_checks() -> None:
    text = ("$ sudo nvidia-smi -pm 1\n"
            "Enabled persistence mode for GPU 00000000:01:00.0.\n"
            "Disabled Legacy persistence mode for GPU 00000000:41:00.0.\n"
            "All done.\n"
            "$ sudo nvidia-smi -i 0 -c 2\n"
            "Set compute mode to PROHIBITED for GPU 00000000:01:00.0.\n"
            "All done.\n")
    assert detect_kind(text) == "nvidia-smi-set"
    [first, second] = parse_text(text)[1].gpus
    assert (first.pci_bus_id, first.persistence_mode, first.compute_mode) == ("00000000:01:00.0", True, "prohibited")
    assert (second.pci_bus_id, second.persistence_mode) == ("00000000:41:00.0", False)
    assert statuses(text, "gpu.inventory.persistence") == [("n1/gpu0", Status.PASS, "ok"),
                                                          ("n1/gpu1", Status.WARN, "persistence_off")]
    assert [s for _, s, _ in statuses(text, "gpu.inventory.compute_mode")] == [Status.FAIL, Status.SKIP]


@pytest.mark.parametrize(("line", "status"), [
    ("Enabled MIG Mode for GPU 00000000:07:00.0", Status.FAIL),
    ("Disabled MIG Mode for GPU 00000000:07:00.0", Status.PASS),
])
def test_a_mig_mode_set_is_judged_as_the_mig_column_is(line: str, status: Status) -> None:
    [(_, got, _)] = statuses(line + "\nAll done.\n", "gpu.inventory.mig")
    assert got == status


@pytest.mark.parametrize("text", [
    "Changing power management limit is not supported for GPU: 00000000:01:00.0.\n"
    "Treating as warning and moving on.\nAll done.\n",
    "Power limit for GPU 00000000:05:00.0 was set to 110.00 W from 180.00 W.\nAll done.\n",
    'Applications clocks set to "(MEM 2505, SM 875)" for GPU 0000:00:1E.0\nAll done.\n',
    'GPU clocks set to "(gpuClkMin 1980, gpuClkMax 1980)" for GPU 00000000:06:00.0\nAll done.\n',
    "GPU 00000000:1A:00.0 was successfully reset.\nAll done.\n",
])
def test_an_answer_no_check_judges_is_stated_and_the_text_judges_nothing(text: str) -> None:
    assert detect_kind(text) == "nvidia-smi-set"
    assert [s for _, s, _ in statuses(text, "nvidia_smi.answer")] == [Status.SKIP]
    assert judged_nothing(text)


def test_a_reset_nvidia_smi_could_not_do_fails() -> None:
    text = ("The following GPUs could not be reset:\n"
            "  GPU 00000000:1A:00.0: In use by another client\n\n"
            "1 device is currently being used by one or more other processes (e.g. Fabric\n"
            "Manager, CUDA application, graphics application such as an X server, or a\n"
            "monitoring application such as another instance of nvidia-smi). Please first kill\n"
            "all processes using this device and all compute applications running in the\n"
            "system.\n")
    assert detect_kind(text) == "nvidia-smi-set"
    assert statuses(text, "nvidia_smi.failure") == [("n1/00000000:1A:00.0", Status.FAIL, "reset_failed")]


def test_a_judge_of_an_answer_alone_exits_3(tmp_path: Path) -> None:
    path = tmp_path / "pl.txt"
    path.write_text("Changing power management limit is not supported for GPU: 00000000:01:00.0.\n"
                    "Treating as warning and moving on.\nAll done.\n")
    assert main(["judge", str(path), "--format", "json"]) == 3


def test_an_answer_with_a_line_no_setter_prints_is_refused() -> None:
    with pytest.raises(ParseError):
        parse_text("Enabled persistence mode for GPU 00000000:01:00.0.\nsomething else entirely\n",
                   kind="nvidia-smi-set")
    with pytest.raises(ParseError):
        parse_text(LGI + "| this is no row |x\n", kind="nvidia-smi-mig")


def test_a_listing_excerpt_without_its_title_is_still_read() -> None:
    rows = "\n".join(LGI.splitlines()[5:]) + "\n"  # from the first row on: no title, no column names
    assert detect_kind(rows) == "nvidia-smi-mig"
    assert [s for _, s, _ in statuses(rows, "gpu.inventory.mig")] == [Status.FAIL, Status.FAIL]


def test_a_q_d_temperature_section_without_the_banner_is_q() -> None:
    """``-q -d TEMPERATURE`` pasted from ``Attached GPUs`` on (the banner cut off) is still ``-q``."""
    text = ("Attached GPUs                             : 1\n"
            "GPU 00000000:2D:00.0\n"
            "    Temperature\n"
            "        GPU Current Temp                  : 56 C\n"
            "        GPU Shutdown Temp                 : 102 C\n"
            "        GPU Slowdown Temp                 : 97 C\n")
    assert detect_kind(text) == "nvidia-smi-q"
    assert detect_kind("\n".join(text.splitlines()[2:]) + "\n") == "nvidia-smi-q"  # the section alone


@pytest.mark.parametrize("command", ["nvidia-smi -q -d CLOCK", "$ nvidia-smi -i 0 -q -d CLOCK",
                                     "PS C:\\> nvidia-smi.exe --query --display=CLOCK"])
def test_a_q_section_under_its_own_command_is_q(command: str) -> None:
    """``-q -d <SECTION>`` pasted with its command and a ``GPU <bus id>`` header, any section (here CLOCK, whose
    keys no other -q label names): the command and the header together say which tool printed it."""
    text = (f"{command}\n\nGPU 00000000:18:00.0\n    Clocks\n        Graphics                    : 1230 MHz\n"
            "    Max Clocks\n        Graphics                    : 1380 MHz\n")
    assert detect_kind(text) == "nvidia-smi-q"
    assert detect_kind(text.split("\n", 2)[2]) is None  # the section alone names no tool
    assert detect_kind(text.replace(command, "nvidia-smi --query-gpu=clocks.sm --format=csv")) is None


def test_a_q_section_under_a_gpu_header_without_the_banner_infers_no_count() -> None:
    """A ``GPU <bus id>`` header names a GPU, not how many there are: without ``Driver Version`` or
    ``Attached GPUs`` the text is a fragment, and clocks alone judge nothing (no "1 GPU(s) found" PASS)."""
    text = ("GPU 00000000:3B:00.0\n"
            "    Clocks\n"
            "        Graphics                    : 1000 MHz\n"
            "        SM                          : 1000 MHz\n"
            "    Max Clocks\n"
            "        Graphics                    : 1500 MHz\n"
            "        SM                          : 1500 MHz\n")
    record = parse_text(text, kind="nvidia-smi-q")[1]
    assert record.fragment == 4
    findings = judge_text(text, Config(), source="n1", kind="nvidia-smi-q")
    assert {f.check_id for f in findings if f.status == Status.PASS} == set()
    assert {f.status for f in findings} == {Status.SKIP}


@pytest.mark.parametrize(("text", "expected"), [
    ("gpu_bus_id, remapped_rows.correctable, remapped_rows.uncorrectable, remapped_rows.pending, "
     "remapped_rows.failure\n00000000:07:00.0, 0, 4, Yes, No\n00000000:0F:00.0, 0, 0, No, No\n",
     [("n1/gpu0", Status.WARN), ("n1/gpu1", Status.PASS)]),
    ("$ nvidia-smi --query-remapped-rows=gpu_bus_id,remapped_rows.failure --format=csv,noheader\n"
     "00000000:07:00.0, Yes\n", [("n1/gpu0", Status.FAIL)]),
])
def test_query_remapped_rows_is_judged_as_the_query_gpu_columns_are(
        text: str, expected: list[tuple[str, Status]]) -> None:
    assert detect_kind(text) == "nvidia-smi-csv"
    assert [(s, st) for s, st, _ in statuses(text, "gpu.memory.remap")] == expected


def test_query_compute_apps_lists_processes_under_their_gpu() -> None:
    text = ("$ nvidia-smi --query-compute-apps=gpu_uuid,pid,process_name,used_memory --format=csv\n"
            "gpu_uuid, pid, process_name, used_gpu_memory [MiB]\n"
            "GPU-d0180485-9584-433c-6782-c335d5df2cb3, 4121, python, 10436 MiB\n"
            "GPU-777ead31-954e-837f-590f-6c4974d8e571, 4122, python, 2048 MiB\n"
            "GPU-777ead31-954e-837f-590f-6c4974d8e571, 4123, trainer, 1024 MiB\n")
    assert detect_kind(text) == "nvidia-smi-csv"
    record = parse_text(text)[1]
    assert [(g.uuid, [p.pid for p in g.processes or []]) for g in record.gpus] == [
        ("GPU-d0180485-9584-433c-6782-c335d5df2cb3", [4121]),
        ("GPU-777ead31-954e-837f-590f-6c4974d8e571", [4122, 4123])]
    assert [st for _, st, _ in statuses(text, "gpu.busy")] == [Status.WARN, Status.WARN]
    assert statuses(text, "gpu.inventory.count") == []  # an idle GPU has no row: no count


def test_query_compute_apps_with_no_process_names_no_gpu_and_judges_nothing() -> None:
    text = "pid, process_name, used_gpu_memory [MiB]\n"
    assert detect_kind(text) == "nvidia-smi-csv"
    assert judged_nothing(text)


P2P_LEGEND = ("\nLegend:\n\n  X    = Self\n  OK   = Status Ok\n  CNS  = Chipset not supported\n"
              "  GNS  = GPU not supported\n  TNS  = Topology not supported\n  NS   = Not supported\n"
              "  DR   = Disabled by regkey\n  U    = Unknown\n")


def p2p(command: str, rows: list[str]) -> str:
    names = [f"GPU{i}" for i in range(len(rows))]
    body = "".join(f" {name}\t" + "\t".join(cells.split()) + "\t\n" for name, cells in zip(names, rows, strict=True))
    return command + " \t" + "\t".join(names) + "\t\n" + body + P2P_LEGEND


@pytest.mark.parametrize(("command", "rows", "status", "code"), [
    ("$ nvidia-smi topo -p2p r\n", ["X OK", "OK X"], Status.PASS, "ok"),
    ("$ nvidia-smi topo -p2p w\n", ["X OK CNS", "OK X CNS", "CNS CNS X"], Status.WARN, "p2p_unavailable"),
    ("$ nvidia-smi topo -p2p n\n", ["X NS", "NS X"], Status.SKIP, "not_judged"),  # no NVLink on a PCIe node
    ("", ["X GNS", "GNS X"], Status.SKIP, "not_judged"),  # which capability is not shown
    ("", ["X OK", "OK X"], Status.PASS, "ok"),  # OK whatever was asked
    ("", ["X"], Status.SKIP, "single_gpu"),
])
def test_a_p2p_matrix_is_judged_for_read_and_write(command: str, rows: list[str], status: Status, code: str) -> None:
    text = p2p(command, rows)
    assert detect_kind(text) == "nvidia-smi-p2p"
    [(_, got, got_code)] = statuses(text, "nvidia_smi.p2p")
    assert (got, got_code) == (status, code)


def test_a_p2p_matrix_with_spaces_and_no_legend_is_still_read() -> None:
    text = "        GPU0    GPU1\n GPU0   X       OK\n GPU1   OK      X\n"
    assert detect_kind(text) == "nvidia-smi-p2p"
    assert [st for _, st, _ in statuses(text, "nvidia_smi.p2p")] == [Status.PASS]


@pytest.mark.parametrize("text", [
    " \tGPU0\tGPU1\t\n GPU0\tX\tNV4\t\n GPU1\tNV4\tX\t\n" + P2P_LEGEND,  # a topo -m token is no p2p status
    " \tGPU0\tGPU1\t\n GPU0\tX\tOK\t\n" + P2P_LEGEND,  # a GPU's row is missing
])
def test_a_p2p_matrix_that_is_not_one_is_refused(text: str) -> None:
    with pytest.raises(ParseError):
        parse_text(text, kind="nvidia-smi-p2p")


def test_topo_m_stays_topo_m() -> None:
    text = ("\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\n"
            "GPU0\t X \tPHB\t0-63\t0\nGPU1\tPHB\t X \t0-63\t0\n")
    assert detect_kind(text) == "nvidia-smi-topo"


def test_a_pending_mig_mode_and_its_explanation_are_read() -> None:
    text = ("Warning: MIG mode is in pending enable state for GPU 00000000:07:00.0:In use by another client\n"
            "00000000:07:00.0 is currently being used by one or more other processes (e.g. CUDA application or a "
            "monitoring application such as another instance of nvidia-smi). Please first kill all processes using "
            "the device and retry the command or reboot the system to make MIG mode effective.\n"
            "All done.\n")
    assert detect_kind(text) == "nvidia-smi-set"
    [gpu] = parse_text(text)[1].gpus
    # pending enable: MIG is off until the GPU's next reset (NVML's pending mode is the target of that trigger)
    assert (gpu.pci_bus_id, gpu.mig_mode, gpu.mig_mode_pending) == ("00000000:07:00.0", "disabled", "enabled")
    assert statuses(text, "gpu.inventory.mig") == [("n1/gpu0", Status.WARN, "mig_pending")]


PENDING_DISABLE = ("Warning: MIG mode is in pending disable state for GPU 00000000:C1:00.0:In use by another client\n"
                   "00000000:C1:00.0 is currently being used by one or more other processes (e.g. CUDA application or "
                   "a monitoring application such as another instance of nvidia-smi). Please first kill all processes "
                   "using the device and retry the command or reboot the system to make MIG mode effective.\n"
                   "All done.\n\n")
REFUSED_R450 = ("$ nvidia-smi --gpu-reset\nGPU 00000000:C1:00.0 is currently in use by another process.\n\n"
                "1 device is currently being used by one or more other processes (e.g., Fabric Manager, CUDA "
                "application, graphics application such as an X server, or a monitoring application such as another "
                "instance of nvidia-smi). Please first kill all processes using this device and all compute "
                "applications running in the system.\n\n")


def test_a_pending_disable_states_mig_on_until_a_reset() -> None:
    [gpu] = parse_text(PENDING_DISABLE)[1].gpus
    assert (gpu.mig_mode, gpu.mig_mode_pending) == ("enabled", "disabled")
    assert [st for _, st, _ in statuses(PENDING_DISABLE, "gpu.inventory.mig")] == [Status.FAIL]


def test_a_reset_refused_in_the_older_wording_fails() -> None:
    assert detect_kind(REFUSED_R450) == "nvidia-smi-set"
    assert statuses(REFUSED_R450, "nvidia_smi.failure") == [("n1/00000000:C1:00.0", Status.FAIL, "reset_failed")]


def test_a_reset_that_worked_applies_the_pending_mig_mode_and_ends_an_earlier_refusal() -> None:
    """gpu-operator#118: MIG disable pending, the reset refused while nvidia-persistenced held the GPU,
    persistenced killed, the same GPU reset: MIG is off and no refusal stands."""
    text = PENDING_DISABLE + REFUSED_R450 + "$ killall nvidia-persistenced\n\n$ nvidia-smi --gpu-reset\n" \
        "GPU 00000000:C1:00.0 was successfully reset.\n"
    record = parse_text(text)[1]
    assert record.failures == [] and record.gpus[0].mig_mode == "disabled"
    assert statuses(text, "gpu.inventory.mig") == [("n1/gpu0", Status.PASS, "ok")]
    assert statuses(text, "nvidia_smi.failure") == []
    other = REFUSED_R450 + "GPU 0000:c2:00.0 was successfully reset.\n"  # another GPU's reset: the refusal stands
    assert [st for _, st, _ in statuses(other, "nvidia_smi.failure")] == [Status.FAIL]
    same = REFUSED_R450 + "GPU 0000:c1:00.0 was successfully reset.\n"  # the same address, spelled shorter
    assert statuses(same, "nvidia_smi.failure") == []


def test_a_refused_setting_is_stated_and_two_reset_gpus_too() -> None:
    refused = ("Unable to set persistence mode for GPU 00000000:01:00.0: Insufficient Permissions\n"
               "Terminating early due to previous errors.\n")
    assert detect_kind(refused) == "nvidia-smi-set" and judged_nothing(refused)
    reset = "GPU 00000000:14:00.0  was successfully reset.\nGPU 00000000:15:00.0  was successfully reset.\nAll done.\n"
    assert len(parse_text(reset)[1].stated) == 2 and judged_nothing(reset)


def test_a_gpu_nvidia_smi_cannot_reach_stays_a_failure_not_an_answer() -> None:
    text = "Unable to determine the device handle for GPU 0000:02:00.0: Unknown Error\n"
    assert detect_kind(text) == "nvidia-smi-error"
    assert [st for _, st, _ in statuses(text, "nvidia_smi.failure")] == [Status.FAIL]
