"""Judging evidence: each rule at, just below and just above its threshold, on real and hand-built records."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest

from gpu_preflight.checks.evidence import JUDGES, judge_record, judges
from gpu_preflight.checks.evidence_nccl import ADVICE
from gpu_preflight.config import Config, build_config, find_profile
from gpu_preflight.config.evidence import EvidenceConfig, evidence_config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Finding, Status
from gpu_preflight.parsers.detect import parse_text
from gpu_preflight.parsers.nccl_log import (
    CUDA_ERROR_KINDS,
    CUDA_TEXT,
    NCCL_RESULT_KINDS,
    NCCL_RESULT_TEXTS,
    PROXY_RESULT,
    RESULT_TEXT,
    SIGNATURES,
    TRANSPORT_KINDS,
)

from .test_parsers_dcgmi import SPEC_WARNING

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"


def config(**evidence: Any) -> Config:
    """A config with an ``[evidence]`` section, as it is once the section is registered in ``Config``."""
    cfg = Config()
    setattr(cfg, "evidence", EvidenceConfig(**evidence))  # noqa: B010 - the section is not registered yet
    return cfg


def judge(text: str, cfg: Config | None = None, kind: str | None = None) -> list[Finding]:
    return judge_text(text, cfg or Config(), kind=kind, source="n1")


def corpus_judge(corpus: Path, name: str, cfg: Config | None = None) -> list[Finding]:
    return judge((corpus / name).read_bytes().decode("utf-8", errors="replace"), cfg)


def worst(findings: list[Finding], check_id: str) -> Status:
    return Status.worst(f.status for f in findings if f.check_id == check_id)


def only(findings: list[Finding], check_id: str) -> Finding:
    matching = [f for f in findings if f.check_id == check_id]
    assert len(matching) == 1, findings
    return matching[0]


# --- DCGM ---------------------------------------------------------------------------------


def test_spec_dcgm_failure_is_a_fail_naming_gpu_1_with_the_warning_text() -> None:
    findings = judge((FIXTURES / "spec-dcgmi-diag-r3-targeted-power-fail.txt").read_text())
    fail = [f for f in findings if f.status is Status.FAIL]
    assert len(fail) == 1
    assert (fail[0].check_id, fail[0].subject, fail[0].code) == ("dcgm.diag", "n1/gpu1", "targeted_power")
    assert "GPU 1" in fail[0].summary and SPEC_WARNING in fail[0].summary
    assert fail[0].details["gpu_status"]["1"] == "fail" and fail[0].recommendation
    assert {f.status for f in findings} == {Status.FAIL, Status.PASS, Status.SKIP}  # EUD Test skipped


def test_dcgm_ignored_test_is_skip() -> None:
    text = (FIXTURES / "spec-dcgmi-diag-r3-targeted-power-fail.txt").read_text()
    findings = judge(text, config(dcgm_ignore_tests=["targeted power"]))
    assert Status.FAIL not in {f.status for f in findings}
    ignored = [f for f in findings if "ignored" in f.summary]
    assert [(f.status, f.code) for f in ignored] == [(Status.SKIP, "targeted_power")]


@pytest.mark.parametrize(("name", "status", "subject"), [
    ("dcgm/dcgm-issue254-dcgmi-diag-r3-4.4.1-cuda12-plugins-missing.txt", Status.ERROR, "n1"),
    ("dcgm/stas00-dcgmi-diag-deployment-row-remap-error-excerpt.txt", Status.FAIL, "n1/gpu3"),
    ("dcgm/dcgm-issue254-dcgmi-diag-r2-4.4.1-v100-pcie-fail-excerpt.txt", Status.FAIL, "n1"),
    ("dcgm/awsome-dcgmi-diag-r2-3.3.3-p4de-a100-pass.txt", Status.PASS, "n1"),
])
def test_dcgm_corpus_verdicts(corpus: Path, name: str, status: Status, subject: str) -> None:
    findings = corpus_judge(corpus, name)
    assert worst(findings, "dcgm.diag") is status
    assert any(f.subject == subject and f.status is status for f in findings)


@pytest.mark.parametrize(("name", "subject", "text"), [
    ("dcgmi-diag-3.x-fail.json", "n1/gpu1", "row remapping failed"),
    ("dcgmi-diag-4.x-fail.json", "n1/gpu1", "PCIe replay count violation"),
])
def test_dcgm_json_failures(name: str, subject: str, text: str) -> None:
    fail = [f for f in judge((FIXTURES / name).read_text()) if f.status is Status.FAIL]
    assert [f.subject for f in fail] == [subject] and text in fail[0].summary


# --- nccl-tests ---------------------------------------------------------------------------

GCP = "nccl-tests/gcp-a3mega-all_reduce-2x-h100-16rank.txt"  # peak out-of-place busbw 338.82


@pytest.mark.parametrize(("floor", "status"), [(None, Status.WARN), (338.82, Status.PASS), (338.83, Status.FAIL),
                                               (338.81, Status.PASS)])
def test_busbw_floor_boundaries(corpus: Path, floor: float | None, status: Status) -> None:
    finding = only(corpus_judge(corpus, GCP, config(nccl_busbw_min_gbps=floor)), "nccl_tests.bandwidth")
    assert finding.status is status and finding.observed == 338.82


def rows(wrong: str = "0", error_column: bool = False) -> str:
    """One nccl-tests row: ``wrong`` in the out-of-place #wrong (or legacy error) column."""
    if error_column:
        header = "#  size  count  type  redop  time  algbw  busbw  error  time  algbw  busbw  error"
        return f"{header}\n  1048576  262144  float  sum  20.1  52.17  97.82  {wrong}  20.0  52.43  98.3  1e-07\n"
    header = "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong"
    return f"{header}\n  1048576  262144  float  sum  -1  20.10  52.17  97.82  {wrong}  20.00  52.43  98.30  0\n"


@pytest.mark.parametrize(("wrong", "status"), [("0", Status.PASS), ("1", Status.FAIL), ("N/A", Status.SKIP)])
def test_wrong_values(wrong: str, status: Status) -> None:
    text = rows(wrong).replace("  0\n", "  N/A\n") if wrong == "N/A" else rows(wrong)
    assert worst(judge(text), "nccl_tests.correctness") is status


@pytest.mark.parametrize(("error", "status"), [("1e-02", Status.PASS), ("2e-02", Status.FAIL), ("9e-03", Status.PASS)])
def test_legacy_error_column_limit(error: str, status: Status) -> None:
    assert worst(judge(rows(error, error_column=True), config(nccl_max_error=1e-2)), "nccl_tests.correctness") is status


def test_aborted_test_is_classified(corpus: Path) -> None:
    findings = corpus_judge(corpus, "nccl-tests/cscs-test-nccl-failure-invalid-usage.txt")
    finding = only(findings, "nccl_tests.correctness")
    assert (finding.status, finding.code, finding.subject) == (Status.FAIL, "invalid_usage", "n1/nid006352")
    assert finding.recommendation == ADVICE["invalid_usage"].recommendation


# --- fabric -------------------------------------------------------------------------------


@pytest.mark.parametrize(("minimum", "status"), [(2, Status.PASS), (3, Status.FAIL), (1, Status.PASS)])
def test_fi_info_entry_count(corpus: Path, minimum: int, status: Status) -> None:
    findings = corpus_judge(corpus, "libfabric/hpctut-fi_info-p-efa-113.20.txt", config(fi_info_min_entries=minimum))
    assert only(findings, "fabric.fi_info").status is status


def test_fi_info_61_is_a_fail(corpus: Path) -> None:
    finding = only(corpus_judge(corpus, "libfabric/cscs-fi_info-p-cxi-not-working-61.txt"), "fabric.fi_info")
    assert (finding.status, finding.code) == (Status.FAIL, "no_provider") and "-61" in finding.summary


@pytest.mark.parametrize(("floor", "status"), [(None, Status.PASS), (2359.0, Status.PASS), (2359.1, Status.FAIL)])
def test_pingpong_floor(corpus: Path, floor: float | None, status: Status) -> None:
    name = "libfabric/awscdi-efa_test-fi_pingpong-efa.txt"  # 2359.00 MB/s at 1 MiB
    findings = corpus_judge(corpus, name, config(pingpong_min_mb_per_s=floor))
    assert only(findings, "fabric.pingpong").status is status


def test_pingpong_that_never_ran() -> None:
    text = "bytes   #sent   #ack     total       time     MB/sec    usec/xfer   Mxfers/sec\n" \
           "fi_getinfo(): common/shared.c:1204, ret=-61 (No data available) error\n"
    assert only(judge(text, kind="fi-pingpong"), "fabric.pingpong").status is Status.FAIL


@pytest.mark.parametrize(("rate", "warned"), [(40.0, 0), (40.1, 1), (200.0, 1), (200.1, 9)])
def test_ib_min_rate(corpus: Path, rate: float, warned: int) -> None:
    findings = corpus_judge(corpus, "infiniband/gpud-ibstatus-a100-azure-9dev.txt", config(ib_min_rate_gbps=rate))
    assert sum(f.code == "rate_low" for f in findings) == warned


def test_ib_expected_ports_boundary(corpus: Path) -> None:
    name = "infiniband/gpud-ibstatus-a100-azure-9dev.txt"  # 9 active ports
    assert worst(corpus_judge(corpus, name, config(ib_expected_ports=9)), "ib.ports") is Status.PASS
    assert worst(corpus_judge(corpus, name, config(ib_expected_ports=10)), "ib.ports") is Status.FAIL


def test_ib_down_ports(corpus: Path) -> None:
    eth = corpus_judge(corpus, "infiniband/gpud-ibstat-h100-3-eth-ports-down.txt")
    assert sorted(f.subject for f in eth if f.code == "port_down") == [
        "n1/mlx5_2/port1", "n1/mlx5_7/port1", "n1/mlx5_8/port1"]
    assert worst(eth, "ib.ports") is Status.WARN  # Ethernet ports may be unused NICs
    ib = only(corpus_judge(corpus, "infiniband/heioy-ibv_devinfo-v-mlx4_1-port2.txt"), "ib.ports")
    assert (ib.status, ib.subject, ib.observed) == (Status.FAIL, "n1/mlx4_1/port2", "DOWN/POLLING")
    panic = corpus_judge(corpus, "infiniband/gpud-ibstat-a100-ibpanic-mlx5_8-missing.txt")
    assert [f.code for f in panic if f.status is Status.FAIL] == ["device_error"]


@pytest.mark.parametrize(("floor", "status"), [(None, Status.SKIP), (92.4, Status.PASS), (92.41, Status.FAIL)])
def test_perftest_floor(corpus: Path, floor: float | None, status: Status) -> None:
    findings = corpus_judge(corpus, "infiniband/deepops-ib_write_bw-roce-cx5-100g.txt",
                            config(perftest_min_bw_gbps=floor))
    assert only(findings, "ib.perftest").status is status


def test_perftest_connection_failure(corpus: Path) -> None:
    finding = only(corpus_judge(corpus, "infiniband/efalab-ib_send_bw-addr-error.txt"), "ib.perftest")
    assert (finding.status, finding.code) == (Status.FAIL, "perftest_failed") and "ADDR_ERROR" in finding.summary


def test_lspci_links() -> None:
    findings = judge((FIXTURES / "lspci-vvv-gpu-nic.txt").read_text())
    by_subject = {f.subject: f for f in findings}
    assert by_subject["n1/43:00.0"].status is Status.FAIL and by_subject["n1/43:00.0"].code == "width_downgraded"
    assert by_subject["n1/ca:00.0"].status is Status.WARN and by_subject["n1/ca:00.0"].code == "speed_downgraded"
    assert "n1/52:00.0" not in by_subject  # an idle GPU at 2.5 GT/s is not judged
    assert len(findings) == 2


def test_plain_lspci_is_skip(corpus: Path) -> None:
    finding = only(corpus_judge(corpus, "lspci/gpud-lspci-nn-a100x8.txt"), "pcie.lnksta")
    assert finding.status is Status.SKIP and "lspci -vvv" in finding.summary


# --- kernel log ---------------------------------------------------------------------------


def test_kernel_log_verdicts(corpus: Path) -> None:
    burst = corpus_judge(corpus, "kernel-xid/gpud-dmesg-decode-iso-xid13-xid43-burst.log")
    assert {f.code for f in burst if f.check_id == "gpu.xid"} == {"xid_13", "xid_43"}
    assert all(f.subject == "n1/pci:0000:38:00" for f in burst)
    denied = only(corpus_judge(corpus, "kernel-xid/hcdeep-dmesg-permission-denied-gke.txt"), "gpu.xid")
    assert (denied.status, denied.code) == (Status.ERROR, "log_unreadable")
    limited = corpus_judge(corpus, "lspci/stas00-dmesg-pcie-limited-by.txt")
    assert [(f.status, f.subject) for f in limited if f.check_id == "pcie.limited_by"] == [
        (Status.WARN, "n1/0000:04:00.0"), (Status.WARN, "n1/0000:8b:00.0")]
    segv = only(corpus_judge(corpus, "kernel-xid/gpud-dmesg-libnccl-segfault.log"), "kernel.segfault")
    assert segv.status is Status.WARN and "libnccl.so.2" in segv.summary  # two identical lines, one finding


def test_xid_policy_overrides_apply_to_evidence(corpus: Path) -> None:
    cfg = Config()
    cfg.xid = msgspec.structs.replace(cfg.xid, severity_overrides={"63": "ignore"})
    findings = corpus_judge(corpus, "kernel-xid/stas00-xid63-row-remapper.log", cfg)
    assert [(f.status, f.code) for f in findings] == [(Status.PASS, "ok")]


# --- NCCL job logs ------------------------------------------------------------------------


def test_every_signature_has_advice() -> None:
    """Every kind a log line can be classified as has its advice; the placeholders are never one (the proxy's
    ncclResult_t code, or a framework's ncclGetErrorString words, names the kind), every kind a code names is a
    signature's and every such word names a code."""
    kinds = {k for k, _ in SIGNATURES} - {PROXY_RESULT, RESULT_TEXT, CUDA_TEXT}
    assert kinds | {"rank_exited", *TRANSPORT_KINDS, *CUDA_ERROR_KINDS.values()} == set(ADVICE)
    assert {*NCCL_RESULT_KINDS.values(), "internal_error"} <= kinds
    assert set(NCCL_RESULT_TEXTS.values()) <= set(NCCL_RESULT_KINDS)


@pytest.mark.parametrize(("name", "codes"), [
    ("torch-distributed/cscs-nccl-info-plugin-not-found-then-warn.txt",
     {("net_plugin_fallback", Status.WARN), ("net_plugin_missing", Status.FAIL)}),
    ("torch-distributed/hcdeep-nccl-remote-error-peer-pod-deleted.txt",
     {("remote_error", Status.FAIL), ("segfault", Status.FAIL)}),
    ("torch-distributed/stas00-nccl-warn-net-ib-completion-error12.log", {("ib_completion_error", Status.FAIL)}),
    ("torch-distributed/stas00-nccl-warn-connect-refused.log", {("connection_refused", Status.FAIL)}),
    ("torch-distributed/stas00-nccl-unhandled-system-error-2.7.8.log", {("system_error", Status.FAIL)}),
])
def test_nccl_log_triage(corpus: Path, name: str, codes: set[tuple[str, Status]]) -> None:
    findings = corpus_judge(corpus, name)
    assert {(f.code, f.status) for f in findings} == codes
    assert all(f.recommendation == ADVICE[f.code].recommendation for f in findings)


def test_remote_error_names_rank_0(corpus: Path) -> None:
    findings = corpus_judge(corpus, "torch-distributed/hcdeep-nccl-remote-error-peer-pod-deleted.txt")
    remote = next(f for f in findings if f.code == "remote_error")
    assert remote.subject == "n1/rank0" and "rank 0" in remote.summary


def test_duplicate_gpu_capture() -> None:
    findings = judge((FIXTURES / "nccl-duplicate-gpu-error.txt").read_text())
    codes = {f.code: f for f in findings}
    assert {"duplicate_gpu", "invalid_usage", "rank_exited"} <= set(codes)
    assert codes["rank_exited"].subject == "n1/rank1"
    assert "both on CUDA device 60" in codes["duplicate_gpu"].summary


def test_log_without_signature_is_skip() -> None:
    """No failure and no finished init: nothing the log states is evidence the job ran (a finished init is:
    tests/test_nccl_log_generalise.py)."""
    finding = judge("host:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n")[0]
    assert (finding.check_id, finding.status, finding.code) == ("nccl_log.triage", Status.SKIP, "no_signature")


# --- nvidia-smi: the node checks' rules ---------------------------------------------------


def test_nvidia_smi_reuses_the_gpu_checks(corpus: Path) -> None:
    ecc = corpus_judge(corpus, "nvidia-smi-text/stas00-ecc-sram-uncorrectable-excerpt.txt")
    assert only([f for f in ecc if f.status is Status.FAIL], "gpu.ecc.errors").code == "ecc_volatile_uncorrectable"
    h100 = corpus_judge(corpus, "nvidia-smi-text/gpud-h100x8-535.183.01-q.txt")
    brake = [f for f in h100 if f.check_id == "gpu.clocks" and f.status is Status.FAIL]
    assert [(f.subject, f.code) for f in brake] == [("n1/gpu2", "hw_power_brake_slowdown")]
    retired = corpus_judge(corpus, "nvidia-smi-text/stas00-retired-pages-pending-excerpt.txt")
    assert any(f.code == "retirement_pending" and f.status is Status.WARN for f in retired)
    a10 = corpus_judge(corpus, "nvidia-smi-text/gpud-a10-535.129.03-q.txt")
    assert any(f.check_id == "gpu.memory.remap" and f.code == "remap_pending" for f in a10)
    assert not any(f.check_id in ("gpu.nvml", "gpu.nvlink") for f in h100)


def test_graphics_processes_do_not_make_a_gpu_busy(corpus: Path) -> None:
    t4 = corpus_judge(corpus, "nvidia-smi-xml/telegraf-tesla-t4.xml")  # Xorg (G) and python (C)
    busy = only([f for f in t4 if f.status is Status.WARN], "gpu.busy")
    assert busy.observed == 1


def test_profile_thresholds_apply(corpus: Path) -> None:
    text = (corpus / "nvidia-smi-text/gpud-h100x8-535.183.01-q.txt").read_text()
    _, record = parse_text(text)
    cfg, _ = build_config(profile=find_profile("h100-sxm"))
    driver = [f for f in judge_record("nvidia-smi-q", record, cfg, source="n1") if f.check_id == "gpu.inventory.driver"]
    assert driver[0].expected == ">= 525.60"


def test_listing_judgements(corpus: Path) -> None:
    mig = corpus_judge(corpus, "nvidia-smi-text/h100-mig-590.48.01-L.txt")
    assert only([f for f in mig if f.status is Status.FAIL], "gpu.inventory.mig").subject == "n1/gpu0"
    cfg = Config()
    cfg.gpu = msgspec.structs.replace(cfg.gpu, nvlink_expected_links=18)
    elided = corpus_judge(corpus, "nvidia-smi-text/stas00-h100-nvlink-status-excerpt.txt", cfg)
    assert worst(elided, "gpu.nvlink") is Status.PASS  # 2 of 18 links shown: cut out, not missing
    full = corpus_judge(corpus, "nvidia-smi-text/awsome-p4de-a100-nvlink-s-gpu0.txt", cfg)
    assert worst(full, "gpu.nvlink") is Status.FAIL  # 12 links listed, 18 expected
    down = judge("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n")
    assert only([f for f in down if f.check_id == "gpu.nvlink"], "gpu.nvlink").code == "nvlink_down"
    errors = judge("GPU 0: X (UUID: GPU-1)\n  Link 0: Replay Errors: 0\n  Link 0: Recovery Errors: 3\n"
                   "  Link 0: CRC Errors: 0\n")
    assert {f.code for f in errors if f.check_id == "gpu.nvlink"} == {"nvlink_recovery"}


def test_gpus_not_listed_and_no_gpus() -> None:
    xml = ("<?xml version='1.0'?><nvidia_smi_log><driver_version>550.1</driver_version>"
           "<attached_gpus>2</attached_gpus><gpu id='00000000:01:00.0'><product_name>X</product_name></gpu>"
           "</nvidia_smi_log>")
    assert only(judge(xml), "nvidia_smi.gpu").status is Status.WARN
    none = judge("<nvidia_smi_log><driver_version>550.1</driver_version></nvidia_smi_log>")
    assert [(f.check_id, f.status) for f in none] == [("nvidia_smi.gpu", Status.ERROR)]


def test_dmon_and_topo(corpus: Path) -> None:
    dmon = corpus_judge(corpus, "nvidia-smi-text/h100-80gb-hbm3-590.48.01-dmon-load.txt")
    thermal = only(dmon, "gpu.thermal")
    assert (thermal.status, thermal.observed) == (Status.PASS, 65)
    topo = only(corpus_judge(corpus, "nvidia-smi-text/h100-80gb-hbm3-590.48.01-topo-m.txt"), "nvidia_smi.topo")
    assert (topo.status, topo.code) == (Status.SKIP, "single_gpu")  # one GPU: no pair to judge


# --- the machinery ------------------------------------------------------------------------


def test_unknown_kind_and_crashing_judge_are_errors() -> None:
    finding = judge_record("no-such-kind", object(), Config(), source="n1")[0]
    assert (finding.check_id, finding.status, finding.code) == ("evidence.judge", Status.ERROR, "no_judge")

    with JUDGES.scoped():
        @judges("test-crash-kind")
        def crash(record: Any, cfg: Config, source: str) -> list[Finding]:
            raise RuntimeError("boom")

        crashed = judge_record("test-crash-kind", object(), Config(), source="n1")[0]
    assert "test-crash-kind" not in JUDGES
    assert (crashed.status, crashed.code) == (Status.ERROR, "judge_crashed") and "boom" in crashed.summary


def test_evidence_config_defaults_without_registration() -> None:
    assert evidence_config(Config()) == EvidenceConfig()
    assert evidence_config(config(nccl_busbw_min_gbps=1.0)).nccl_busbw_min_gbps == 1.0


def test_every_finding_names_its_evidence_kind(corpus: Path) -> None:
    findings = corpus_judge(corpus, GCP)
    assert {f.details["evidence_kind"] for f in findings} == {"nccl-tests"}


def test_dcgm_errors_beside_a_partial_table_are_an_error() -> None:
    text = (FIXTURES / "spec-dcgmi-diag-r3-targeted-power-fail.txt").read_text()
    findings = judge(text + "Error: Unable to complete diagnostic for group 2. Return: (-30)\n")
    assert any(f.status is Status.ERROR and f.code == "diag_errors" for f in findings)
    assert any(f.status is Status.FAIL and f.subject == "n1/gpu1" for f in findings)
