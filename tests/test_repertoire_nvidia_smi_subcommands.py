"""nvidia-smi's subcommands' output forms (docs/repertoire/nvidia-smi-subcommands.md).

nvidia-smi is closed source: the forms of ``nvlink``, ``dmon``, ``mig`` and ``-L`` come from its help texts
(``dmon -s``: p u c v m e t; ``nvlink -gt d|r``), NVIDIA's MIG user guide and real outputs in public repositories.
The fixtures (tests/fixtures/repertoire/nvidia-smi-subcommands, provenance in its PROVENANCE.md) render those
forms; each test states what ``judge`` must make of one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status, verdict

FORMS = Path(__file__).parent / "fixtures" / "repertoire" / "nvidia-smi-subcommands"


def judged(name: str) -> list[Finding]:
    return judge_text((FORMS / name).read_text(encoding="utf-8"), Config(), source="n1")


def statuses(findings: list[Finding], check_id: str) -> list[tuple[str, Status, str]]:
    return [(f.subject, f.status, f.code) for f in findings if f.check_id == check_id]


def test_the_dmon_temp_column_of_early_drivers_is_the_gpu_temperature() -> None:
    """Drivers before the GPU/memory split print ``# gpu pwr temp ...`` where later ones print ``gtemp mtemp``:
    ``temp`` was not read, every GPU's gpu.thermal SKIPped and a GPU at 106 C PASSed the report."""
    findings = judged("dmon-temp-r3xx-x2-one-hot.txt")
    thermal = statuses(findings, "gpu.thermal")
    assert [(s, st) for s, st, _ in thermal] == [("n1/gpu0", Status.FAIL), ("n1/gpu1", Status.PASS)]
    assert verdict(f.status for f in findings) is Status.FAIL


def test_dmon_s_e_uncorrected_ecc_errors_fail_the_gpu() -> None:
    """``dmon -s pucvmet``'s ``dbecc`` (ECC group ``e``) is the volatile uncorrected count gpu.ecc.errors judges:
    GPU 1's two double-bit errors PASSed (the column was not read)."""
    findings = judged("dmon-pucvmet-temp-x2-dbecc.txt")
    assert statuses(findings, "gpu.ecc.errors") == [
        ("n1/gpu0", Status.PASS, "ok"), ("n1/gpu1", Status.FAIL, "ecc_volatile_uncorrectable")]


def test_dmon_ecc_columns_of_a_gpu_without_ecc_judge_nothing_and_gtemp_still_passes() -> None:
    """``-`` in sbecc/dbecc (ECC off or unsupported) is no reading: gpu.ecc.errors SKIPs; the temperatures judge."""
    findings = judged("dmon-pucvmet-gtemp-x2-ecc-off.txt")
    assert {st for _, st, _ in statuses(findings, "gpu.ecc.errors")} == {Status.SKIP}
    assert {st for _, st, _ in statuses(findings, "gpu.thermal")} == {Status.PASS}
    assert verdict(f.status for f in findings) is Status.PASS


@pytest.mark.parametrize("name", ["dmon-o-dt-puc-h100-x2.txt", "dmon-o-t-e-x2-clean.txt"])
def test_dmon_with_date_and_time_columns_is_recognised(name: str) -> None:
    """``-o DT`` / ``-o T`` put ``#Date Time`` before ``gpu``: not recognised (exit 3); now read by the header's
    names, so the samples judge as without them (the temperatures, or ``-s e``'s ECC counts)."""
    findings = judged(name)
    assert verdict(f.status for f in findings) is Status.PASS
    assert any(f.status is Status.PASS and f.check_id in ("gpu.thermal", "gpu.ecc.errors") for f in findings)


@pytest.mark.parametrize("name", ["dmon-s-u-x2.txt", "dmon-s-c.txt", "dmon-s-v.txt", "dmon-s-m.txt", "dmon-s-t.txt"])
def test_dmon_groups_no_check_judges_are_nothing_judged(name: str) -> None:
    """``-s u`` (utilization), ``c`` (clocks), ``v`` (violations), ``m`` (memory), ``t`` (PCIe throughput) show no
    column a GPU check reads: ``-s u`` PASSed on the GPU count alone, the others were not recognised (exit 3).
    Now recognised, and ERROR ``nothing_judged``, as a ``-q -d`` selection no check reads."""
    findings = judged(name)
    assert [(f.status, f.code) for f in findings if f.check_id == "nvidia_smi.gpu"] == [
        (Status.ERROR, "nothing_judged")]
    assert verdict(f.status for f in findings) is Status.ERROR


@pytest.mark.parametrize("name", ["nvlink-gt-d-h100-x2.txt", "nvlink-gt-r-h100-x2.txt", "nvlink-g0-v100-x2.txt"])
def test_nvlink_traffic_counters_say_nothing_of_the_links_state(name: str) -> None:
    """``nvlink -gt d``/``-gt r`` (``Link 0: Data Tx: 5863784 KiB``) and pre-R450 ``-g 0`` (``Rx0: .. KBytes,
    Tx0: ..``) list each link's traffic: they were read as links up, gpu.nvlink PASS "18 NVLink(s) up". Now SKIP
    ``throughput_only``, as ``--capabilities`` is."""
    nvlink = statuses(judged(name), "gpu.nvlink")
    assert [(s, st, c) for s, st, c in nvlink] == [
        ("n1/gpu0", Status.SKIP, "throughput_only"), ("n1/gpu1", Status.SKIP, "throughput_only")]


def test_nvlink_status_and_error_counters_keep_their_verdicts() -> None:
    """``nvlink -s`` with a link ``<inactive>`` FAILs the GPU; ``nvlink -e`` with CRC and recovery counts over the
    thresholds WARNs (no change: pinned so the forms stay read)."""
    assert statuses(judged("nvlink-s-h100-x2-one-inactive.txt"), "gpu.nvlink") == [
        ("n1/gpu0", Status.FAIL, "nvlink_down"), ("n1/gpu1", Status.PASS, "ok")]
    assert [c for _, _, c in statuses(judged("nvlink-e-h100-x2-crc-recovery.txt"), "gpu.nvlink")] == [
        "ok", "nvlink_crc_errors", "nvlink_recovery"]


def test_mig_lgipp_placements_are_a_gpu_in_mig_mode() -> None:
    """``nvidia-smi mig -lgipp`` (``GPU  0 Profile ID 19 Placements: {0,1,2,3,4,5,6}:1``, ``Placement : {0}:8``)
    answers only for a GPU in MIG mode, as ``-lgip`` does: it was not recognised (exit 3); now the GPU it names
    is judged by gpu.inventory.mig like the ``-lgip`` table's, and no GPU count is inferred."""
    findings = judged("mig-lgipp-h100.txt")
    assert statuses(findings, "gpu.inventory.mig") == [("n1/gpu0", Status.FAIL, "mig_mismatch")]
    assert any(f.check_id == "evidence.fragment" for f in findings)


@pytest.mark.parametrize("name", ["L-mig-r450-a100.txt", "L-mig-r470-h100-x2.txt"])
def test_list_with_mig_devices_shows_mig_mode(name: str) -> None:
    """``-L`` lists a GPU's MIG devices under it (before R470 ``MIG 1g.5gb Device 0: (UUID: MIG-GPU-.../7/0)``,
    later ``MIG 3g.40gb     Device  0: (UUID: MIG-...)``): that GPU is in MIG mode (no change: pinned)."""
    mig = statuses(judged(name), "gpu.inventory.mig")
    assert mig[0][:2] == ("n1/gpu0", Status.FAIL)


def test_nvlink5_recovery_events_are_judged_as_recovery_errors() -> None:
    """GB200/B200 ``nvlink -e`` prints NVML's NVLink5 counters (``Total link recovery events``, ``Link recovery
    successful/failed events``, effective and symbol errors, BER, ``FEC Errors - N``) and no ``Recovery Errors``
    line: a link that had recovered 505 times (the warning sign before an Xid 149 link down) PASSed. The recovery
    events are now gpu.nvlink's recovery count (WARN ``nvlink_recovery``); the other counters are not read."""
    nvlink = statuses(judged("nvlink-e-gb200-x2-recovery-events.txt"), "gpu.nvlink")
    assert nvlink == [("n1/gpu0", Status.WARN, "nvlink_recovery"), ("n1/gpu1", Status.PASS, "ok")]
