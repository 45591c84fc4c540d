"""Rules issue 27's kernel + DCGM batch of 2026-12-07 taught the readers (in-repository texts only).

* dcgm-exporter's fatal exit in its logrus forms (``level=fatal msg="..."`` off a terminal, ``FATA[0000] ...`` on
  one), in a log that shows the exporter's own start line: the exporter stopped, nothing was exported: ERROR,
  naming DCGM's message, even with another tool's table header pasted after it. A fatal line of some other program
  is no DCGM text.
* ``dcgmi dmon`` is read (kind ``dcgmi-dmon``: the ``#Entity`` header's short names, a row per entity, blanks for
  fields an entity lacks) and judged as ``nvidia-smi dmon`` is: the GPUs sampled, each GPU's hottest ``TMPTR``/
  ``MMTMP`` and highest ``POWER`` by ``gpu.thermal``; a dmon that could not watch its fields sampled nothing: ERROR.
* nv_peer_mem's ``nv_mem nv_get_p2p_free_callback ... invalid page_table`` (a GPU driver bug its maintainer names) is
  ``kernel.nic`` WARN (monitor; upgrade the driver), bare or on a kernel-log line.
* The host engine's log lines where its Health module failed (``ERROR [...] [[Health]] Error 'API version mismatch'
  while attempting to get entities for group 0 ...``) are a health check that could not run: ``dcgm.health`` ERROR.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.dcgmi.dmon import parse as parse_dmon
from gpu_preflight.parsers.detect import detect_kind

# gpu-monitoring-tools#165 (dcgm-exporter built for DCGM 2.1 against a 2.0.13 host engine), shortened
LOGFMT = (
    'time="2021-03-11T18:34:24+08:00" level=info msg="Starting dcgm-exporter"\n'
    'time="2021-03-11T18:34:25+08:00" level=info msg="DCGM successfully initialized!"\n'
    'time="2021-03-11T18:34:25+08:00" level=fatal msg="Error retrieving DCGM MIG hierarchy: API version mismatch"\n'
)
# the same exit as logrus prints it on a terminal (gpu-monitoring-tools#168's form)
TTY = (
    "INFO[0000] Starting dcgm-exporter                       \n"
    "INFO[0001] DCGM successfully initialized!               \n"
    "FATA[0001] Error retrieving DCGM MIG hierarchy: API version mismatch \n"
)
# nvidia-smi's table header pasted after the exporter's log, cut before any GPU row (gpu-monitoring-tools#165)
SMI_HEADER = (
    "\n# nvidia-smi\n"
    "+-----------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 455.28       Driver Version: 455.28       CUDA Version: 11.1     |\n"
    "|-------------------------------+----------------------+----------------------+\n"
    "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
)


@pytest.mark.parametrize("text", [LOGFMT, TTY, LOGFMT + SMI_HEADER], ids=["logfmt", "tty", "with-smi-header"])
def test_an_exporter_that_exited_fatally_measured_nothing(text: str) -> None:
    assert detect_kind(text) == "dcgmi-diag"
    (finding,) = [f for f in judge_text(text, Config(), source="n1") if f.status is not Status.SKIP]
    assert (finding.check_id, finding.status) == ("dcgm.diag", Status.ERROR)
    assert "dcgm-exporter stopped: Error retrieving DCGM MIG hierarchy: API version mismatch" in finding.summary


def test_a_fatal_line_without_the_exporters_start_is_no_dcgm_text() -> None:
    text = 'time="2021-03-11T18:34:25+08:00" level=fatal msg="listen tcp :8080: bind: address already in use"\n'
    assert detect_kind(text) != "dcgmi-diag"


# dcgmi/DeviceMonitor.cpp's layout: '#Entity' and the short names, then 'ID' and the units, then a row per entity;
# a MIG instance has no temperature or power field, so its row is blank there
DMON = (
    "#Entity    TMPTR        POWER             GRACT\n"
    "ID         C            W\n"
    "GPU 0      44           251.310           0.998\n"
    "GPU-I 1                                   0.500\n"
    "GPU 0      46           N/A               0.997\n"
)
# NVIDIA/DCGM#119 (DCGM 3.1.3, A100): a per-link NVLink profiling field the GPU does not support
DMON_REFUSED = (
    "#Entity   NVL0T                       \n"
    "ID                                    \n"
    "Error setting watches. Result: -6: Feature not supported\n"
)


def test_dcgmi_dmon_rows_are_read_by_the_headers_names_and_columns() -> None:
    assert detect_kind(DMON) == "dcgmi-dmon"
    record = parse_dmon(DMON)
    assert record.fields == ["TMPTR", "POWER", "GRACT"]
    assert [(s.entity, s.index, s.values) for s in record.samples] == [
        ("GPU", 0, {"TMPTR": 44.0, "POWER": 251.31, "GRACT": 0.998}),
        ("GPU-I", 1, {"TMPTR": None, "POWER": None, "GRACT": 0.5}),
        ("GPU", 0, {"TMPTR": 46.0, "POWER": None, "GRACT": 0.997}),
    ]


def test_dcgmi_dmon_is_judged_like_nvidia_smi_dmon() -> None:
    found = {(f.check_id, f.subject.rsplit("/", 1)[-1]): f for f in judge_text(DMON, Config(), source="n1")}
    assert found[("nvidia_smi.gpu", "n1")].status is Status.PASS and found[("nvidia_smi.gpu", "n1")].observed == 1
    thermal = found[("gpu.thermal", "gpu0")]
    assert thermal.status is Status.PASS and thermal.observed == 46  # the hottest sample of GPU 0


def test_a_dcgmi_dmon_that_could_not_watch_its_fields_measured_nothing() -> None:
    assert detect_kind(DMON_REFUSED) == "dcgmi-dmon"
    (finding,) = judge_text(DMON_REFUSED, Config(), source="n1")
    assert (finding.status, finding.code) == (Status.ERROR, "dmon_error")
    assert "Feature not supported" in finding.summary


def test_nvidia_smi_dmon_stays_nvidia_smi() -> None:
    assert detect_kind("# gpu   pwr gtemp mtemp    sm   mem\n# Idx     W     C     C     %     %\n"
                       "    0    62    41     -     0     0\n") == "nvidia-smi-dmon"


# NVIDIA/DCGM#314 (DCGM 4.7.0): the host engine's log while 'dcgmi health' failed
HEALTH_LOG = (
    "2026-09-21 15:58:36.273 INFO  [45265:45271] Loaded module 4 [./dcgmlib/src/DcgmHostEngineHandler.cpp:2775] "
    "[DcgmHostEngineHandler::LoadModule]\n"
    "2026-09-21 15:58:36.273 ERROR [45265:45271] [[Health]] Error 'API version mismatch' while attempting to get "
    "entities for group 0 [/builds/dcgm/dcgm/modules/common/DcgmCoreProxy.cpp:667] [DcgmCoreProxy::GetGroupEntities]\n"
)


def test_the_health_modules_own_error_lines_are_a_check_that_could_not_run() -> None:
    assert detect_kind(HEALTH_LOG) == "dcgmi-health"
    (finding,) = judge_text(HEALTH_LOG, Config(), source="n1")
    assert (finding.check_id, finding.status, finding.code) == ("dcgm.health", Status.ERROR, "health_not_checked")
    assert "API version mismatch" in finding.summary and "DcgmCoreProxy" not in finding.summary


# NVIDIA/dcgm-exporter#507: two GPUs split into two GPU instances each; a third GPU (made up) without MIG
HIERARCHY = (
    "+-------------------+--------------------------------------------------------------------+\n"
    "| Instance Hierarchy                                                                     |\n"
    "+===================+====================================================================+\n"
    "| GPU 0             | GPU GPU-e48e2dd6-5b6f-f75b-9d3b-39d6ac744225 (EntityID: 0)         |\n"
    "| -> I 0/1          | GPU Instance (EntityID: 0)                                         |\n"
    "|    -> CI 0/1/0    | Compute Instance (EntityID: 0)                                     |\n"
    "| -> I 0/2          | GPU Instance (EntityID: 1)                                         |\n"
    "|    -> CI 0/2/0    | Compute Instance (EntityID: 1)                                     |\n"
    "+-------------------+--------------------------------------------------------------------+\n"
    "| GPU 1             | GPU GPU-d5f98c67-e581-45b1-9c08-025b7a08a9c1 (EntityID: 1)         |\n"
    "+-------------------+--------------------------------------------------------------------+\n"
)


def test_discovery_c_shows_which_gpus_are_in_mig_mode() -> None:
    assert detect_kind(HIERARCHY) == "dcgmi-discovery"
    mig = {f.subject.rsplit("/", 1)[-1]: f.status for f in judge_text(HIERARCHY, Config(), source="n1")
           if f.check_id == "gpu.inventory.mig"}
    assert mig["gpu0"] is Status.FAIL and mig.get("gpu1", Status.PASS) is not Status.FAIL


def test_nv_peer_mems_invalid_page_table_is_a_driver_bug_to_upgrade_away() -> None:
    # Mellanox/nv_peer_memory#112, the maintainer's quote: bare, as the module prints it
    text = "nv_mem nv_get_p2p_free_callback:144 nv_get_p2p_free_callback -- invalid page_table \n" * 2
    assert detect_kind(text) == "dmesg"
    (finding,) = [f for f in judge_text(text, Config(), source="n1") if f.check_id == "kernel.nic"]
    assert (finding.status, finding.code) == (Status.WARN, "peermem_invalid_page_table")
    assert finding.observed == 2  # both lines counted on one finding


# dcgmi stats' job box as DCGM's user guide prints it (made up: the Event Stats counts and health are ours)
STATS = (
    "Successfully retrieved statistics for job: 1.\n"
    "+------------------------------------------------------------------------------+\n"
    "| GPU ID: 0                                                                    |\n"
    "+====================================+=========================================+\n"
    "|-----  Execution Stats  ------------+-----------------------------------------|\n"
    "| Start Time *                       | Wed Mar  7 15:07:34 2018                |\n"
    "| No. of Processes *                 | 1                                       |\n"
    "+-----  Event Stats  ----------------+-----------------------------------------+\n"
    "| Single Bit ECC Errors              | 0                                       |\n"
    "| Double Bit ECC Errors              | {dbe}                                       |\n"
    "| PCIe Replay Warnings               | 0                                       |\n"
    "| Critical XID Errors                | 0                                       |\n"
    "+-----  Overall Health  -------------+-----------------------------------------+\n"
    "| Overall Health                     | {health}                                 |\n"
    "+------------------------------------+-----------------------------------------+\n"
)


def test_dcgmi_stats_fails_a_job_that_met_double_bit_ecc_errors() -> None:
    text = STATS.format(dbe=2, health="Failure")
    assert detect_kind(text) == "dcgmi-stats"
    health = [(f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == "dcgm.health"]
    assert health == [(Status.FAIL, "health_failure"), (Status.FAIL, "health_failure")]


def test_dcgmi_stats_of_a_healthy_job_passes_and_performance_rows_are_not_judged() -> None:
    findings = judge_text(STATS.format(dbe=0, health="Healthy"), Config(), source="n1")
    assert {(f.check_id, f.status) for f in findings} == {("nvidia_smi.gpu", Status.PASS), ("dcgm.health", Status.PASS)}


def test_dcgmi_stats_cut_before_a_boxs_overall_health_is_incomplete() -> None:
    """Every box ends with its Overall Health section: a paste cut before it (DCGM#171's excerpt) judged only the
    GPU count, which is no SUCCESS; the rows it kept are still judged (a double-bit count above the cut FAILs)."""
    healthy = STATS.format(dbe=0, health="Healthy")
    cut = healthy[:healthy.index("+-----  Overall Health")]
    findings = judge_text(cut, Config(), source="n1")
    assert [(f.status, f.code) for f in findings if f.check_id == "evidence.complete"] == [(Status.ERROR, "incomplete")]
    assert "GPU 0" in next(f.summary for f in findings if f.check_id == "evidence.complete")
    failing = STATS.format(dbe=2, health="Failure")
    kept = judge_text(failing[:failing.index("+-----  Overall Health")], Config(), source="n1")
    assert (Status.FAIL, "health_failure") in [(f.status, f.code) for f in kept if f.check_id == "dcgm.health"]
    assert not [f for f in judge_text(healthy, Config(), source="n1") if f.check_id == "evidence.complete"]
