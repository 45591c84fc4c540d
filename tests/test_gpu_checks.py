"""Every GPU check at, just below and just above its thresholds, on every status path.

Two complementary styles (DESIGN.md, "Testing without GPUs", item 2):

* pure: records built from the real H200 NVML dump (``facts_from_dump``) and edited, then
  judged by the registered check function alone (:func:`judge`);
* end-to-end: the H200 dump edited as a fault injection, written to disk and replayed through
  ``gpu_preflight.run_checks`` (:func:`replay`), then the finding asserted (:func:`expect`).

The replayed H200 dump is matched to the shipped ``h200`` profile (min driver 550.54, PCIe
gen5 x16); the pure tests use the typed defaults unless a test changes a threshold.
"""

from __future__ import annotations

import copy
import json
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from msgspec.structs import replace

import gpu_preflight
from gpu_preflight.config import Config
from gpu_preflight.model import NA, Finding, NodeReport, Status
from gpu_preflight.probes.gpu import facts_from_dump
from gpu_preflight.records import GpuFacts, GpuProcess, GpuRecord, NvLink, SystemFacts
from gpu_preflight.registry import CheckContext, all_checks, get_check

Dump = dict[str, Any]
Edit = Callable[[Dump], None]

MIB = 1024**2
GIB = 1024**3
PASS, SKIP, WARN, ERROR, FAIL = Status.PASS, Status.SKIP, Status.WARN, Status.ERROR, Status.FAIL

COVERED_ELSEWHERE = ("gpu.xid",)  # needs the kernel log: tests/test_xid_check.py


# Derived from the registry, so a new GPU check is held to every rule below without being listed here.
GPU_CHECKS = tuple(sorted(s.id for s in all_checks("node")
                          if s.id.startswith("gpu.") and s.id not in COVERED_ELSEWHERE))

NOT_SUPPORTED = {"error": "NVMLError_NotSupported", "value": 3, "str": "Not Supported"}
NO_PERMISSION = {"error": "NVMLError_NoPermission", "value": 4, "str": "Insufficient Permissions"}
GPU_LOST = {"error": "NVMLError_GPUIsLost", "value": 15, "str": "GPU is lost"}


# --------------------------------------------------------------------------- helpers: pure


def gpu_config(**changes: Any) -> Config:
    """Typed defaults with some GPU thresholds changed."""
    return Config(gpu=replace(Config().gpu, **changes))


def judge(check_id: str, facts: GpuFacts, config: Config | None = None) -> list[Finding]:
    """Call the registered check function directly on hand-edited facts."""
    ctx = CheckContext(host="n1", facts={"gpu": facts, "system": SystemFacts(hostname="n1")},
                       config=config or Config())
    findings = list(get_check(check_id).fn(ctx))
    assert all(f.check_id == check_id for f in findings)
    return findings


def _judges_each_gpu(check_id: str) -> bool:
    """A per-GPU check names the GPU in every finding it makes on a node of one unread GPU (a
    host-level one names the host)."""
    one_gpu = GpuFacts(source="test", available=True, driver_version="580.159.04",
                       gpus=[GpuRecord(index=0, name="NVIDIA H200", uuid="GPU-1")])
    return all(f.subject == "n1/gpu0" for f in judge(check_id, one_gpu))


PER_GPU_CHECKS = tuple(c for c in GPU_CHECKS if _judges_each_gpu(c))
HOST_LEVEL = tuple(c for c in GPU_CHECKS if c not in PER_GPU_CHECKS)


def outcome(findings: Sequence[Finding]) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in findings]


def edited(facts: GpuFacts, **changes: Any) -> GpuFacts:
    """The facts with the first GPU's record changed."""
    return replace(facts, gpus=[replace(facts.gpus[0], **changes), *facts.gpus[1:]])


def assert_advice(findings: Sequence[Finding]) -> None:
    """Every WARN/ERROR/FAIL tells the operator what to do."""
    for f in findings:
        if f.status not in (PASS, SKIP):
            assert f.recommendation, f


@pytest.fixture
def facts(h200_dump: Dump) -> GpuFacts:
    return facts_from_dump(h200_dump, source="replay:test")


# --------------------------------------------------------------------------- helpers: end-to-end


def dev(dump: Dump, index: int = 0) -> dict[str, Any]:
    device: dict[str, Any] = dump["devices"][index]
    return device


def call(name: str, value: Any) -> Edit:
    """Edit: NVML call ``name`` of GPU 0 returned ``value``."""
    def edit(dump: Dump) -> None:
        dev(dump)[name] = {"ok": value}
    return edit


def refuse(name: str, error: Mapping[str, Any] = NOT_SUPPORTED) -> Edit:
    """Edit: NVML call ``name`` of GPU 0 failed with ``error``."""
    def edit(dump: Dump) -> None:
        dev(dump)[name] = dict(error)
    return edit


def nested(group: str, key: str, value: Any) -> Edit:
    """Edit: a grouped reading (``ecc_total``, ``temp_thresholds``...) of GPU 0."""
    def edit(dump: Dump) -> None:
        dev(dump).setdefault(group, {})[key] = {"ok": value}
    return edit


def field(name: str, value: Any) -> Edit:
    """Edit: NVML field value ``name`` of GPU 0 (``None``: not supported)."""
    def edit(dump: Dump) -> None:
        dev(dump)["field_values"][name] = {"nvmlReturn": 3} if value is None else {"id": 0, "valueType": 1,
                                                                                     "value": value}
    return edit


def driver(version: str) -> Edit:
    def edit(dump: Dump) -> None:
        dump["system"]["nvmlSystemGetDriverVersion"] = {"ok": version}
    return edit


def both(*edits: Edit) -> Edit:
    def edit(dump: Dump) -> None:
        for e in edits:
            e(dump)
    return edit


def add_gpu(dump: Dump, **calls: Any) -> dict[str, Any]:
    """Append a second, distinct copy of GPU 0 (own index, UUID, serial, bus id); ``calls`` override."""
    second = copy.deepcopy(dev(dump))
    second["nvmlDeviceGetIndex"] = {"ok": len(dump["devices"])}
    second["nvmlDeviceGetUUID"] = {"ok": "GPU-00000000-0000-0000-0000-000000000001"}
    second["nvmlDeviceGetSerial"] = {"ok": "1654024070001"}
    for key in ("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v3"):
        second[key]["ok"]["busId"] = "00000000:00:07.0"
    for name, value in calls.items():
        second[name] = {"ok": value}
    dump["devices"].append(second)
    dump["system"]["nvmlDeviceGetCount"] = {"ok": len(dump["devices"])}
    return second


def replay(tmp_path: Path, dump: Dump, edit: Edit | None = None, **options: Any) -> NodeReport:
    """Apply ``edit`` to the dump, write it, and run every gpu.* check on the replay."""
    if edit is not None:
        edit(dump)
    path = tmp_path / "nvml_dump.json"
    path.write_text(json.dumps(dump))
    return gpu_preflight.run_checks(replay=str(path), include=["gpu.*"], **options)


def findings_of(report: NodeReport, check_id: str, gpu: int | None = 0) -> list[Finding]:
    """Findings of one check about GPU ``gpu`` (``None``: about the host)."""
    subject = report.hostname if gpu is None else f"{report.hostname}/gpu{gpu}"
    return [f for f in report.findings if f.check_id == check_id and f.subject == subject]


def expect(report: NodeReport, check_id: str, status: Status, code: str, gpu: int | None = 0) -> Finding:
    """Exactly one finding with this status and code, and it is the worst for that subject."""
    mine = findings_of(report, check_id, gpu)
    hits = [f for f in mine if f.status is status and f.code == code]
    got = [(f.status.value, f.code, f.summary) for f in mine]
    assert len(hits) == 1, f"{check_id}: wanted {status.value} {code}, got {got}"
    assert Status.worst(f.status for f in mine) is status, [(f.status.value, f.code) for f in mine]
    if status not in (PASS, SKIP):
        assert hits[0].recommendation, hits[0]
    return hits[0]


def nvlink_entry(states: Sequence[int], errors: Mapping[int, Mapping[str, int]] | None = None) -> dict[str, Any]:
    """A dump's ``nvlink`` group: links 0..n-1 with the given states, then one NotSupported link."""
    errors = errors or {}
    links: dict[str, Any] = {}
    for i, state in enumerate(states):
        links[str(i)] = {
            "state": {"ok": state}, "version": {"ok": 4},
            "remote_pci": {"ok": {"busId": f"00000000:{0x40 + i:02x}:00.0"}},
            "errors": {str(c): {"ok": errors.get(i, {}).get(str(c), 0)} for c in range(5)},
        }
    links[str(len(states))] = dict(NOT_SUPPORTED)
    return links


def nvlink(states: Sequence[int], errors: Mapping[int, Mapping[str, int]] | None = None) -> Edit:
    def edit(dump: Dump) -> None:
        dev(dump)["nvlink"] = nvlink_entry(states, errors)
    return edit


def links(n: int, *, down: Sequence[int] = (), **errors: int) -> list[NvLink]:
    """``n`` NvLink records; ``errors`` (e.g. crc_flit=5) are put on link 0."""
    counters = {"replay": 0, "recovery": 0, "crc_flit": 0, "crc_data": 0, "ecc_data": 0}
    return [NvLink(link=i, active=i not in down, version=4,
                   errors={**counters, **(errors if i == 0 else {})}) for i in range(n)]


# --------------------------------------------------------------------------- the registry and the baseline


def test_the_derived_lists_hold_the_known_checks() -> None:
    """The lists come from the registry; these ids anchor them (they cannot come out empty or
    put a check in the wrong kind unnoticed), and every GPU check is named by some test."""
    assert {"gpu.thermal", "gpu.ecc.errors", "gpu.pcie", "gpu.busy"} <= set(PER_GPU_CHECKS)
    assert {"gpu.nvml", "gpu.inventory.count", "gpu.inventory.driver"} <= set(HOST_LEVEL)
    named = "".join(p.read_text(encoding="utf-8") for p in Path(__file__).parent.glob("test_*.py"))
    assert [c for c in GPU_CHECKS + COVERED_ELSEWHERE if f'"{c}"' not in named] == []


def test_unedited_h200_dump_gives_only_pass_or_skip(tmp_path: Path, h200_dump: Dump) -> None:
    report = replay(tmp_path, h200_dump)
    assert report.profile == "h200"
    assert sorted(r.check_id for r in report.results) == sorted(GPU_CHECKS + COVERED_ELSEWHERE)
    for result in report.results:
        assert result.findings, result.check_id
        assert result.status in (PASS, SKIP), [(f.status.value, f.code, f.summary) for f in result.findings]
    # NotSupported readings of this H200 are SKIPs with the reason, never a PASS
    assert expect(report, "gpu.memory.retired_pages", SKIP, "not_available").summary.endswith("not supported")
    assert "no NVLink" in expect(report, "gpu.nvlink", SKIP, "not_available").summary


def test_pure_baseline_matches_replay(facts: GpuFacts) -> None:
    for check_id in GPU_CHECKS:
        for f in judge(check_id, facts):
            assert f.status in (PASS, SKIP), (check_id, f)


# --------------------------------------------------------------------------- gpu.nvml


def test_nvml_pass_names_gpu_count(facts: GpuFacts) -> None:
    [f] = judge("gpu.nvml", facts)
    assert (f.status, f.code, f.subject, f.observed) == (PASS, "ok", "n1", 1)


def test_nvml_unavailable_without_pci_gpus_skips() -> None:
    for pci in (NA("not read"), []):
        facts = GpuFacts(source="live", available=False, reason="NVML library not found", pci_gpus=pci)
        [f] = judge("gpu.nvml", facts)
        assert (f.status, f.code) == (SKIP, "no_nvml")
        assert "NVML library not found" in f.summary


def test_nvml_unavailable_with_pci_gpus_fails() -> None:
    facts = GpuFacts(source="live", available=False, reason="driver not loaded",
                     nvml_error="NVMLError_DriverNotLoaded: Driver Not Loaded",
                     pci_gpus=["0000:17:00.0", "0000:2a:00.0"])
    [f] = judge("gpu.nvml", facts)
    assert (f.status, f.code) == (FAIL, "driver_unusable")
    assert "2 NVIDIA GPU(s)" in f.summary and "driver not loaded" in f.summary
    assert f.details == {"pci_gpus": ["0000:17:00.0", "0000:2a:00.0"], "operator_action": "reboot_node"}
    assert_advice([f])


def test_nvml_lost_gpu_fails(facts: GpuFacts) -> None:
    findings = judge("gpu.nvml", edited(facts, lost="GPU is lost (nvmlDeviceGetTemperature)"))
    assert outcome(findings) == [(FAIL, "gpu_lost")]
    assert findings[0].subject == "n1/gpu0"
    assert_advice(findings)


def test_nvml_refused_readings_are_error(facts: GpuFacts) -> None:
    findings = judge("gpu.nvml", edited(facts, call_errors={"nvmlDeviceGetTemperature": "NoPermission"}))
    assert outcome(findings) == [(ERROR, "nvml_errors")]
    assert_advice(findings)


def test_nvml_lost_gpu_e2e_two_gpus(tmp_path: Path, h200_dump: Dump) -> None:
    """A lost GPU FAILs gpu.nvml; the other GPU is still judged by every other check."""
    baseline = replay(tmp_path, copy.deepcopy(h200_dump))
    h200_dump["devices"].append({"handle": dict(GPU_LOST)})
    h200_dump["system"]["nvmlDeviceGetCount"] = {"ok": 2}
    report = replay(tmp_path, h200_dump, expect_gpus=2)

    lost = expect(report, "gpu.nvml", FAIL, "gpu_lost", gpu=1)
    assert "GPU is lost" in lost.summary
    assert findings_of(report, "gpu.nvml", gpu=0) == []  # the healthy GPU is not reported by gpu.nvml
    expect(report, "gpu.inventory.count", FAIL, "gpus_missing", gpu=None)
    for check_id in PER_GPU_CHECKS:
        expect(report, check_id, SKIP, "gpu_lost", gpu=1)
        healthy = outcome(findings_of(report, check_id, gpu=0))
        assert healthy == outcome(findings_of(baseline, check_id, gpu=0)), check_id
        assert all(code != "gpu_lost" for _, code in healthy)


def test_nvml_lost_first_gpu_e2e(tmp_path: Path, h200_dump: Dump) -> None:
    """GPU 0 lost (no handle): the survivor keeps its NVML index 1."""
    healthy = copy.deepcopy(dev(h200_dump))
    healthy["nvmlDeviceGetIndex"] = {"ok": 1}
    h200_dump["devices"] = [{"handle": dict(GPU_LOST)}, healthy]
    h200_dump["system"]["nvmlDeviceGetCount"] = {"ok": 2}
    report = replay(tmp_path, h200_dump)
    expect(report, "gpu.nvml", FAIL, "gpu_lost", gpu=0)
    expect(report, "gpu.thermal", SKIP, "gpu_lost", gpu=0)
    expect(report, "gpu.thermal", PASS, "ok", gpu=1)


def test_nvml_timed_out_device_fails(tmp_path: Path, h200_dump: Dump) -> None:
    dev(h200_dump)["timed_out"] = {"call": "nvmlDeviceGetTemperature", "after_s": 8.0}
    report = replay(tmp_path, h200_dump)
    f = expect(report, "gpu.nvml", FAIL, "gpu_lost")
    assert "nvmlDeviceGetTemperature" in f.summary and "8.0" in f.summary
    for check_id in PER_GPU_CHECKS:
        expect(report, check_id, SKIP, "gpu_lost")


def test_nvml_refusal_is_error_and_reading_skips(tmp_path: Path, h200_dump: Dump) -> None:
    report = replay(tmp_path, h200_dump, refuse("nvmlDeviceGetTemperature", NO_PERMISSION))
    f = expect(report, "gpu.nvml", ERROR, "nvml_errors")
    assert "nvmlDeviceGetTemperature" in f.observed
    assert "Insufficient Permissions" in expect(report, "gpu.thermal", SKIP, "not_available").summary
    assert findings_of(report, "gpu.nvml", gpu=None) == []  # no host-level PASS beside the ERROR


@pytest.mark.parametrize("code", [3, 2, 13])
def test_nvml_benign_refusal_is_not_an_error(tmp_path: Path, h200_dump: Dump, code: int) -> None:
    """NotSupported, InvalidArgument and FunctionNotFound mean "no such reading": SKIP, not ERROR."""
    error = {"error": "NVMLError_X", "value": code, "str": "x"}
    report = replay(tmp_path, h200_dump, refuse("nvmlDeviceGetTemperature", error))
    expect(report, "gpu.nvml", PASS, "ok", gpu=None)
    assert "not supported" in expect(report, "gpu.thermal", SKIP, "not_available").summary


def test_nvml_refused_field_value_is_error(tmp_path: Path, h200_dump: Dump) -> None:
    dev(h200_dump)["field_values"][RECOVERY] = {"nvmlReturn": 4}
    report = replay(tmp_path, h200_dump)
    expect(report, "gpu.recovery_action", SKIP, "not_available")
    expect(report, "gpu.nvml", ERROR, "nvml_errors")


def test_nvml_lost_during_field_values_fails(tmp_path: Path, h200_dump: Dump) -> None:
    dev(h200_dump)["field_values"] = dict(GPU_LOST)
    expect(replay(tmp_path, h200_dump), "gpu.nvml", FAIL, "gpu_lost")


# --------------------------------------------------------------------------- no NVML at all


UNAVAILABLE = GpuFacts(source="live", available=False, reason="NVML library not found")


@pytest.mark.parametrize("check_id", [c for c in GPU_CHECKS if c != "gpu.inventory.count"])
def test_unavailable_nvml_skips_every_check_with_reason(check_id: str) -> None:
    findings = judge(check_id, UNAVAILABLE)
    assert [f.status for f in findings] == [SKIP]
    assert "NVML library not found" in findings[0].summary


@pytest.mark.parametrize(("expected", "status", "code"), [
    (None, WARN, "no_gpus"),
    (0, PASS, "ok"),
    (2, FAIL, "gpus_missing"),
])
def test_unavailable_nvml_count(expected: int | None, status: Status, code: str) -> None:
    findings = judge("gpu.inventory.count", UNAVAILABLE, gpu_config(expected_count=expected))
    assert outcome(findings) == [(status, code)]
    assert findings[0].observed == 0
    if status is not PASS:
        assert "NVML library not found" in findings[0].summary
    assert_advice(findings)


# --------------------------------------------------------------------------- gpu.inventory.count


@pytest.mark.parametrize(("expected", "status", "code"), [
    (None, PASS, "ok"),
    (0, WARN, "gpus_extra"),   # below the found count
    (1, PASS, "ok"),           # at
    (2, FAIL, "gpus_missing"),  # above
])
def test_count_against_expected(facts: GpuFacts, expected: int | None, status: Status, code: str) -> None:
    findings = judge("gpu.inventory.count", facts, gpu_config(expected_count=expected))
    assert outcome(findings) == [(status, code)]
    assert_advice(findings)


def test_count_zero_gpus_from_nvml_warns() -> None:
    findings = judge("gpu.inventory.count", GpuFacts(source="live", available=True))
    assert outcome(findings) == [(WARN, "no_gpus")]


def test_count_ignores_lost_gpus(facts: GpuFacts) -> None:
    lost = replace(facts.gpus[0], index=1, lost="GPU is lost")
    two = replace(facts, gpus=[facts.gpus[0], lost])
    assert outcome(judge("gpu.inventory.count", two, gpu_config(expected_count=2))) == [(FAIL, "gpus_missing")]
    assert outcome(judge("gpu.inventory.count", two, gpu_config(expected_count=1))) == [(PASS, "ok")]


@pytest.mark.parametrize(("pci", "extra"), [
    (["0000:00:06.0"], []),
    (["0000:00:06.0", "0000:00:07.0"], [(FAIL, "gpu_not_in_nvml")]),
])
def test_count_pci_gpus_missing_from_nvml(facts: GpuFacts, pci: list[str], extra: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.inventory.count", replace(facts, pci_gpus=pci))
    assert outcome(findings) == [(PASS, "ok"), *extra]
    assert_advice(findings)


@pytest.mark.parametrize(("model", "extra"), [
    (None, []),
    ("H200", []),
    ("h200", []),  # case-insensitive substring
    ("H100", [(FAIL, "wrong_model")]),
])
def test_count_expected_model(facts: GpuFacts, model: str | None, extra: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.inventory.count", facts, gpu_config(expected_model=model))
    assert outcome(findings) == [(PASS, "ok"), *extra]
    assert_advice(findings)


def test_count_mixed_models_warn(facts: GpuFacts) -> None:
    other = replace(facts.gpus[0], index=1, name="NVIDIA H100 80GB HBM3")
    findings = judge("gpu.inventory.count", replace(facts, gpus=[facts.gpus[0], other]))
    assert outcome(findings) == [(PASS, "ok"), (WARN, "mixed_models")]
    assert_advice(findings)


@pytest.mark.parametrize(("expect_gpus", "status", "code"), [
    (None, PASS, "ok"), (1, PASS, "ok"), (2, FAIL, "gpus_missing"), (0, WARN, "gpus_extra"),
])
def test_count_e2e_expect_gpus(tmp_path: Path, h200_dump: Dump, expect_gpus: int | None, status: Status,
                               code: str) -> None:
    report = replay(tmp_path, h200_dump, expect_gpus=expect_gpus)
    expect(report, "gpu.inventory.count", status, code, gpu=None)


def test_count_e2e_mixed_models(tmp_path: Path, h200_dump: Dump) -> None:
    add_gpu(h200_dump, nvmlDeviceGetName="NVIDIA H100 80GB HBM3")
    report = replay(tmp_path, h200_dump)
    expect(report, "gpu.inventory.count", WARN, "mixed_models", gpu=None)


def test_count_e2e_expected_model_mismatch(tmp_path: Path, h200_dump: Dump) -> None:
    report = replay(tmp_path, h200_dump, overrides=["gpu.expected_model=H100"])
    f = expect(report, "gpu.inventory.count", FAIL, "wrong_model", gpu=None)
    assert f.observed == ["NVIDIA H200"]


# --------------------------------------------------------------------------- gpu.inventory.driver


@pytest.mark.parametrize(("version", "minimum", "status", "code"), [
    ("534.183.01", "535.0", FAIL, "driver_too_old"),  # default minimum: below
    ("535.0", "535.0", PASS, "ok"),                   # at
    ("535.0.1", "535.0", PASS, "ok"),                 # above
    ("550.53.99", "550.54", FAIL, "driver_too_old"),  # changed minimum (the H200 profile's)
    ("550.54", "550.54", PASS, "ok"),
    ("550.54.14", "550.54", PASS, "ok"),
])
def test_driver_version_boundary(facts: GpuFacts, version: str, minimum: str, status: Status, code: str) -> None:
    findings = judge("gpu.inventory.driver", replace(facts, driver_version=version),
                     gpu_config(min_driver_version=minimum))
    assert outcome(findings) == [(status, code), (PASS, "ok")]  # then the CUDA version (13.0)
    assert_advice(findings)


@pytest.mark.parametrize(("cuda", "minimum", "status", "code"), [
    ("11.8", "12.0", FAIL, "cuda_too_old"),
    ("12.0", "12.0", PASS, "ok"),
    ("12.1", "12.0", PASS, "ok"),
    ("12.3", "12.4", FAIL, "cuda_too_old"),
    ("12.4", "12.4", PASS, "ok"),
    ("12.10", "12.4", PASS, "ok"),  # numeric, not lexical, comparison
])
def test_cuda_version_boundary(facts: GpuFacts, cuda: str, minimum: str, status: Status, code: str) -> None:
    findings = judge("gpu.inventory.driver", replace(facts, cuda_driver_version=cuda),
                     gpu_config(min_cuda_driver_version=minimum))
    assert outcome(findings) == [(PASS, "ok"), (status, code)]


def test_driver_unreadable_skips(facts: GpuFacts) -> None:
    findings = judge("gpu.inventory.driver", replace(facts, driver_version=NA("not supported")))
    assert outcome(findings) == [(SKIP, "not_available"), (PASS, "ok")]
    assert "not supported" in findings[0].summary


def test_driver_e2e_old_driver_fails_h200_profile(tmp_path: Path, h200_dump: Dump) -> None:
    report = replay(tmp_path, h200_dump, driver("535.104.05"))
    f = expect(report, "gpu.inventory.driver", FAIL, "driver_too_old", gpu=None)
    assert f.expected == ">= 550.54"


def test_driver_e2e_old_cuda_fails(tmp_path: Path, h200_dump: Dump) -> None:
    h200_dump["system"]["nvmlSystemGetCudaDriverVersion_v2"] = {"ok": 11080}
    report = replay(tmp_path, h200_dump)
    assert expect(report, "gpu.inventory.driver", FAIL, "cuda_too_old", gpu=None).observed == "11.8"


# --------------------------------------------------------------------------- gpu.inventory.identity


def test_identity_pass_reports_ids(facts: GpuFacts) -> None:
    [f] = judge("gpu.inventory.identity", facts)
    assert (f.status, f.code) == (PASS, "ok")
    assert f.observed["uuid"] == "GPU-86f25c50-ec49-958f-cd74-c318937a339c"
    assert f.observed["vbios"] == "96.00.A5.00.1A"


def test_identity_duplicate_uuid_fails(facts: GpuFacts) -> None:
    twin = replace(facts.gpus[0], index=1)
    findings = judge("gpu.inventory.identity", replace(facts, gpus=[facts.gpus[0], twin]))
    assert outcome(findings) == [(FAIL, "duplicate_uuid"), (FAIL, "duplicate_uuid")]
    assert_advice(findings)


def test_identity_unreadable_uuid_skips(facts: GpuFacts) -> None:
    findings = judge("gpu.inventory.identity", edited(facts, uuid=NA("not supported")))
    assert outcome(findings) == [(SKIP, "not_available")]


def test_identity_vbios_mismatch_same_model_warns(facts: GpuFacts) -> None:
    other = replace(facts.gpus[0], index=1, uuid="GPU-2", serial="2", pci_bus_id="00000000:00:07.0",
                    vbios="96.00.A5.00.1B")
    findings = judge("gpu.inventory.identity", replace(facts, gpus=[facts.gpus[0], other]))
    assert outcome(findings) == [(PASS, "ok"), (PASS, "ok"), (WARN, "vbios_mismatch")]
    assert findings[-1].subject == "n1"
    assert_advice(findings)


def test_identity_vbios_differs_across_models_is_fine(facts: GpuFacts) -> None:
    other = replace(facts.gpus[0], index=1, uuid="GPU-2", serial="2", pci_bus_id="00000000:00:07.0",
                    name="NVIDIA H100 80GB HBM3", vbios="96.00.99.00.01")
    findings = judge("gpu.inventory.identity", replace(facts, gpus=[facts.gpus[0], other]))
    assert outcome(findings) == [(PASS, "ok"), (PASS, "ok")]


def test_identity_e2e_vbios_mismatch(tmp_path: Path, h200_dump: Dump) -> None:
    add_gpu(h200_dump, nvmlDeviceGetVbiosVersion="96.00.A5.00.1B")
    report = replay(tmp_path, h200_dump)
    f = expect(report, "gpu.inventory.identity", WARN, "vbios_mismatch", gpu=None)
    assert f.observed == ["96.00.A5.00.1A", "96.00.A5.00.1B"]
    expect(report, "gpu.inventory.identity", PASS, "ok", gpu=0)
    expect(report, "gpu.inventory.identity", PASS, "ok", gpu=1)


# --------------------------------------------------------------------------- gpu.inventory.persistence


@pytest.mark.parametrize(("mode", "expected_on", "status", "code"), [
    (True, True, PASS, "ok"),
    (False, True, WARN, "persistence_off"),
    (False, False, PASS, "ok"),
    (True, False, PASS, "ok"),
    (NA("not supported"), True, SKIP, "not_available"),
])
def test_persistence(facts: GpuFacts, mode: bool | NA, expected_on: bool, status: Status, code: str) -> None:
    findings = judge("gpu.inventory.persistence", edited(facts, persistence_mode=mode),
                     gpu_config(expect_persistence_mode=expected_on))
    assert outcome(findings) == [(status, code)]
    assert_advice(findings)


@pytest.mark.parametrize(("edit", "status", "code"), [
    (call("nvmlDeviceGetPersistenceMode", 0), WARN, "persistence_off"),
    (call("nvmlDeviceGetPersistenceMode", 1), PASS, "ok"),
    (refuse("nvmlDeviceGetPersistenceMode"), SKIP, "not_available"),
])
def test_persistence_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, status: Status, code: str) -> None:
    expect(replay(tmp_path, h200_dump, edit), "gpu.inventory.persistence", status, code)


# --------------------------------------------------------------------------- gpu.inventory.mig


@pytest.mark.parametrize(("current", "pending", "want", "status", "code"), [
    (False, False, "disabled", PASS, "ok"),
    (True, True, "disabled", FAIL, "mig_mismatch"),
    (False, True, "disabled", WARN, "mig_pending"),
    (True, True, "enabled", PASS, "ok"),
    (False, False, "enabled", FAIL, "mig_mismatch"),
    (True, False, "enabled", WARN, "mig_pending"),
    (True, True, "any", PASS, "ok"),
    (False, True, "any", WARN, "mig_pending"),
    (False, NA("not supported"), "disabled", PASS, "ok"),
    (NA("not supported"), NA("not supported"), "disabled", SKIP, "not_available"),
])
def test_mig(facts: GpuFacts, current: bool | NA, pending: bool | NA, want: str, status: Status,
             code: str) -> None:
    findings = judge("gpu.inventory.mig", edited(facts, mig_current=current, mig_pending=pending),
                     gpu_config(mig_mode=want))
    assert outcome(findings) == [(status, code)]
    assert_advice(findings)


@pytest.mark.parametrize(("edit", "status", "code"), [
    (call("nvmlDeviceGetMigMode", [1, 1]), FAIL, "mig_mismatch"),
    (call("nvmlDeviceGetMigMode", [0, 1]), WARN, "mig_pending"),
    (call("nvmlDeviceGetMigMode", [0, 0]), PASS, "ok"),
    (refuse("nvmlDeviceGetMigMode"), SKIP, "not_available"),
])
def test_mig_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, status: Status, code: str) -> None:
    expect(replay(tmp_path, h200_dump, edit), "gpu.inventory.mig", status, code)


# --------------------------------------------------------------------------- gpu.inventory.compute_mode


@pytest.mark.parametrize(("mode", "allowed", "status", "code"), [
    ("default", None, PASS, "ok"),
    ("exclusive_process", None, PASS, "ok"),
    ("prohibited", None, FAIL, "compute_mode"),
    ("exclusive_thread", None, FAIL, "compute_mode"),
    ("unknown(9)", None, FAIL, "compute_mode"),
    ("exclusive_process", ["default"], FAIL, "compute_mode"),
    ("prohibited", ["default", "prohibited"], PASS, "ok"),
    (NA("not supported"), None, SKIP, "not_available"),
])
def test_compute_mode(facts: GpuFacts, mode: str | NA, allowed: list[str] | None, status: Status,
                      code: str) -> None:
    config = gpu_config(allowed_compute_modes=allowed) if allowed is not None else Config()
    findings = judge("gpu.inventory.compute_mode", edited(facts, compute_mode=mode), config)
    assert outcome(findings) == [(status, code)]
    assert_advice(findings)


@pytest.mark.parametrize(("mode", "status", "code"), [
    (0, PASS, "ok"), (1, FAIL, "compute_mode"), (2, FAIL, "compute_mode"), (3, PASS, "ok"),
])
def test_compute_mode_e2e(tmp_path: Path, h200_dump: Dump, mode: int, status: Status, code: str) -> None:
    expect(replay(tmp_path, h200_dump, call("nvmlDeviceGetComputeMode", mode)), "gpu.inventory.compute_mode",
           status, code)


# --------------------------------------------------------------------------- gpu.ecc.mode


@pytest.mark.parametrize(("current", "pending", "want", "status", "code"), [
    (True, True, "enabled", PASS, "ok"),
    (False, False, "enabled", WARN, "ecc_mode"),
    (True, False, "enabled", WARN, "ecc_pending"),
    (False, False, "disabled", PASS, "ok"),
    (True, True, "disabled", WARN, "ecc_mode"),
    (False, True, "any", WARN, "ecc_pending"),
    (False, False, "any", PASS, "ok"),
    (True, NA("not supported"), "enabled", PASS, "ok"),
    (NA("not supported"), NA("not supported"), "enabled", SKIP, "not_available"),
])
def test_ecc_mode(facts: GpuFacts, current: bool | NA, pending: bool | NA, want: str, status: Status,
                  code: str) -> None:
    findings = judge("gpu.ecc.mode", edited(facts, ecc_current=current, ecc_pending=pending),
                     gpu_config(ecc_mode=want))
    assert outcome(findings) == [(status, code)]
    assert_advice(findings)


@pytest.mark.parametrize(("edit", "overrides", "status", "code"), [
    (call("nvmlDeviceGetEccMode", [0, 0]), [], WARN, "ecc_mode"),
    (call("nvmlDeviceGetEccMode", [1, 0]), [], WARN, "ecc_pending"),
    (call("nvmlDeviceGetEccMode", [0, 0]), ["gpu.ecc_mode=disabled"], PASS, "ok"),
    (refuse("nvmlDeviceGetEccMode"), [], SKIP, "not_available"),
])
def test_ecc_mode_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, overrides: list[str], status: Status,
                      code: str) -> None:
    expect(replay(tmp_path, h200_dump, edit, overrides=overrides), "gpu.ecc.mode", status, code)


# --------------------------------------------------------------------------- gpu.ecc.errors

ECC_RULES = [  # record attribute, config field, default limit, status, code
    ("ecc_volatile_uncorrected", "ecc_volatile_uncorrected_fail", 0, FAIL, "ecc_volatile_uncorrectable"),
    ("ecc_aggregate_uncorrected", "ecc_aggregate_uncorrected_warn", 0, WARN, "ecc_aggregate_uncorrectable"),
    ("ecc_aggregate_corrected", "ecc_aggregate_corrected_warn", 20_000_000, WARN, "ecc_aggregate_correctable"),
    ("sram_aggregate_uncorrected", "sram_uncorrected_warn", 0, WARN, "sram_uncorrectable"),
    ("sram_aggregate_corrected", "sram_corrected_warn", 10_000, WARN, "sram_correctable"),
]


@pytest.mark.parametrize(("attr", "setting", "limit", "status", "code"), ECC_RULES)
@pytest.mark.parametrize("changed", [False, True], ids=["default", "changed"])
def test_ecc_errors_boundary(facts: GpuFacts, attr: str, setting: str, limit: int, status: Status, code: str,
                             changed: bool) -> None:
    config = Config()
    if changed:
        limit += 7
        config = gpu_config(**{setting: limit})
    assert outcome(judge("gpu.ecc.errors", edited(facts, **{attr: limit}), config)) == [(PASS, "ok")]
    if limit > 0:
        assert outcome(judge("gpu.ecc.errors", edited(facts, **{attr: limit - 1}), config)) == [(PASS, "ok")]
    above = judge("gpu.ecc.errors", edited(facts, **{attr: limit + 1}), config)
    assert outcome(above) == [(status, code)]
    assert above[0].observed == limit + 1
    assert_advice(above)


def test_ecc_errors_volatile_corrected_is_not_judged(facts: GpuFacts) -> None:
    assert outcome(judge("gpu.ecc.errors", edited(facts, ecc_volatile_corrected=10**9))) == [(PASS, "ok")]


def test_ecc_errors_several_rules_fire_together(facts: GpuFacts) -> None:
    findings = judge("gpu.ecc.errors", edited(facts, ecc_volatile_uncorrected=2, ecc_aggregate_uncorrected=3))
    assert outcome(findings) == [(FAIL, "ecc_volatile_uncorrectable"), (WARN, "ecc_aggregate_uncorrectable")]


def test_ecc_errors_unsupported_counters_skip(facts: GpuFacts) -> None:
    na = NA("not supported")
    findings = judge("gpu.ecc.errors", edited(facts, ecc_volatile_corrected=na, ecc_volatile_uncorrected=na,
                                              ecc_aggregate_corrected=na, ecc_aggregate_uncorrected=na))
    assert outcome(findings) == [(SKIP, "not_available")]
    assert "not supported" in findings[0].summary


def test_ecc_errors_skip_when_ecc_is_off(facts: GpuFacts) -> None:
    findings = judge("gpu.ecc.errors", edited(facts, ecc_current=False, ecc_pending=False))
    assert [f.status for f in findings] == [SKIP]


@pytest.mark.parametrize(("edit", "status", "code"), [
    (nested("ecc_total", "volatile_uncorrected", 1), FAIL, "ecc_volatile_uncorrectable"),
    (nested("ecc_total", "volatile_uncorrected", 0), PASS, "ok"),
    (nested("ecc_total", "aggregate_uncorrected", 1), WARN, "ecc_aggregate_uncorrectable"),
    (nested("ecc_total", "aggregate_corrected", 20_000_001), WARN, "ecc_aggregate_correctable"),
    (nested("ecc_total", "aggregate_corrected", 20_000_000), PASS, "ok"),
])
def test_ecc_errors_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, status: Status, code: str) -> None:
    expect(replay(tmp_path, h200_dump, edit), "gpu.ecc.errors", status, code)


@pytest.mark.parametrize(("key", "count", "status", "code"), [
    ("aggregate_uncorrected", 1, WARN, "sram_uncorrectable"),
    ("aggregate_corrected", 10_001, WARN, "sram_correctable"),
    ("aggregate_corrected", 10_000, PASS, "ok"),
])
def test_ecc_errors_e2e_sram(tmp_path: Path, h200_dump: Dump, key: str, count: int, status: Status,
                             code: str) -> None:
    dev(h200_dump)["memory_errors"] = {"sram": {"aggregate_corrected": {"ok": 0}, "aggregate_uncorrected": {"ok": 0},
                                                key: {"ok": count}}}
    expect(replay(tmp_path, h200_dump), "gpu.ecc.errors", status, code)


def test_ecc_errors_e2e_unsupported_skips(tmp_path: Path, h200_dump: Dump) -> None:
    dev(h200_dump)["ecc_total"] = {k: dict(NOT_SUPPORTED) for k in dev(h200_dump)["ecc_total"]}
    expect(replay(tmp_path, h200_dump), "gpu.ecc.errors", SKIP, "not_available")


# --------------------------------------------------------------------------- gpu.memory.remap


@pytest.mark.parametrize(("unc", "limit", "status", "code"), [
    (511, 512, PASS, "ok"), (512, 512, PASS, "ok"), (513, 512, WARN, "remapped_rows_high"),
    (9, 10, PASS, "ok"), (10, 10, PASS, "ok"), (11, 10, WARN, "remapped_rows_high"),
])
def test_remap_uncorrectable_rows_boundary(facts: GpuFacts, unc: int, limit: int, status: Status,
                                           code: str) -> None:
    findings = judge("gpu.memory.remap", edited(facts, remapped_rows_uncorrectable=unc),
                     gpu_config(remapped_uncorrectable_rows_warn=limit))
    assert outcome(findings) == [(status, code)]
    assert_advice(findings)


@pytest.mark.parametrize(("pending", "failure", "expected"), [
    (False, False, [(PASS, "ok")]),
    (True, False, [(WARN, "remap_pending")]),
    (False, True, [(FAIL, "remap_failure")]),
    (True, True, [(FAIL, "remap_failure"), (WARN, "remap_pending")]),
    (NA("not supported"), False, [(SKIP, "not_available")]),
    (False, NA("not supported"), [(SKIP, "not_available")]),
])
def test_remap_flags(facts: GpuFacts, pending: bool | NA, failure: bool | NA,
                     expected: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.memory.remap", edited(facts, remap_pending=pending, remap_failure=failure))
    assert outcome(findings) == expected
    assert_advice(findings)


@pytest.mark.parametrize(("rows", "status", "code"), [
    ([0, 2, 1, 0], WARN, "remap_pending"),
    ([0, 2, 0, 1], FAIL, "remap_failure"),
    ([0, 512, 0, 0], PASS, "ok"),
    ([0, 513, 0, 0], WARN, "remapped_rows_high"),
    ([3, 0, 0, 0], PASS, "ok"),
])
def test_remap_e2e(tmp_path: Path, h200_dump: Dump, rows: list[int], status: Status, code: str) -> None:
    expect(replay(tmp_path, h200_dump, call("nvmlDeviceGetRemappedRows", rows)), "gpu.memory.remap", status, code)


def test_remap_e2e_unsupported_skips(tmp_path: Path, h200_dump: Dump) -> None:
    report = replay(tmp_path, h200_dump, refuse("nvmlDeviceGetRemappedRows"))
    assert "not supported" in expect(report, "gpu.memory.remap", SKIP, "not_available").summary


# --------------------------------------------------------------------------- gpu.memory.retired_pages


@pytest.mark.parametrize(("sbe", "dbe", "limit", "status", "code"), [
    (5, 5, 10, PASS, "ok"),
    (4, 5, 10, PASS, "ok"),
    (6, 5, 10, WARN, "retired_pages_high"),
    (3, NA("not supported"), 3, PASS, "ok"),
    (4, NA("not supported"), 3, WARN, "retired_pages_high"),
])
def test_retired_pages_count_boundary(facts: GpuFacts, sbe: int, dbe: int | NA, limit: int, status: Status,
                                      code: str) -> None:
    findings = judge("gpu.memory.retired_pages",
                     edited(facts, retired_pages_sbe=sbe, retired_pages_dbe=dbe, retired_pages_pending=False),
                     gpu_config(retired_pages_warn=limit))
    assert outcome(findings) == [(status, code)]
    assert_advice(findings)


def test_retired_pages_pending_warns(facts: GpuFacts) -> None:
    findings = judge("gpu.memory.retired_pages", edited(facts, retired_pages_pending=True))
    assert outcome(findings) == [(WARN, "retirement_pending")]
    findings = judge("gpu.memory.retired_pages", edited(facts, retired_pages_pending=True, retired_pages_sbe=11,
                                                        retired_pages_dbe=0))
    assert outcome(findings) == [(WARN, "retirement_pending"), (WARN, "retired_pages_high")]


def test_retired_pages_unsupported_skips(facts: GpuFacts) -> None:
    [f] = judge("gpu.memory.retired_pages", facts)  # the H200 uses row remapping
    assert (f.status, f.code) == (SKIP, "not_available")


@pytest.mark.parametrize(("edit", "status", "code"), [
    (call("nvmlDeviceGetRetiredPagesPendingStatus", 1), WARN, "retirement_pending"),
    (call("nvmlDeviceGetRetiredPagesPendingStatus", 0), PASS, "ok"),
    (both(nested("retired_pages", "sbe", list(range(6))), nested("retired_pages", "dbe", list(range(5)))),
     WARN, "retired_pages_high"),
    (both(nested("retired_pages", "sbe", list(range(5))), nested("retired_pages", "dbe", list(range(5)))),
     PASS, "ok"),
])
def test_retired_pages_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, status: Status, code: str) -> None:
    expect(replay(tmp_path, h200_dump, edit), "gpu.memory.retired_pages", status, code)


# --------------------------------------------------------------------------- gpu.recovery_action

RECOVERY = "NVML_FI_DEV_GET_GPU_RECOVERY_ACTION"


@pytest.mark.parametrize(("value", "status", "code"), [
    (0, PASS, "ok"),
    (1, FAIL, "gpu_reset"),
    (2, FAIL, "node_reboot"),
    (3, WARN, "drain_p2p"),
    (4, FAIL, "drain_and_reset"),
    (5, FAIL, "recover_imex_domain"),
    (6, FAIL, "bus_reset"),
    (7, FAIL, "system_reboot"),
    (99, WARN, "unknown(99)"),
])
def test_recovery_action_e2e(tmp_path: Path, h200_dump: Dump, value: int, status: Status, code: str) -> None:
    f = expect(replay(tmp_path, h200_dump, field(RECOVERY, value)), "gpu.recovery_action", status, code)
    assert f.expected == "NONE"
    if status is PASS:
        assert f.recommendation is None


@pytest.mark.parametrize("absent", [True, False], ids=["field-absent", "field-unsupported"])
def test_recovery_action_old_driver_skips_naming_r570(tmp_path: Path, h200_dump: Dump, absent: bool) -> None:
    fields = dev(h200_dump)["field_values"]
    if absent:
        del fields[RECOVERY]
    else:
        fields[RECOVERY] = {"nvmlReturn": 3}
    report = replay(tmp_path, h200_dump, driver("535.104.05"))
    f = expect(report, "gpu.recovery_action", SKIP, "not_available")
    assert "535.104.05" in f.summary and "r570" in f.summary


def test_recovery_action_unsupported_on_new_driver_skips(tmp_path: Path, h200_dump: Dump) -> None:
    f = expect(replay(tmp_path, h200_dump, field(RECOVERY, None)), "gpu.recovery_action", SKIP, "not_available")
    assert "not supported" in f.summary and "r570" not in f.summary


def test_recovery_action_pure(facts: GpuFacts) -> None:
    assert outcome(judge("gpu.recovery_action", edited(facts, recovery_action=1))) == [(FAIL, "gpu_reset")]
    assert outcome(judge("gpu.recovery_action", edited(facts, recovery_action=NA("x")))) == [
        (SKIP, "not_available")]


# --------------------------------------------------------------------------- gpu.thermal
# The H200 reports slowdown 89 C, GPU max operating 87 C, HBM max 95 C.


@pytest.mark.parametrize(("temp", "changes", "status", "code"), [
    (83, {}, PASS, "ok"),
    (84, {}, WARN, "temp_high"),        # slowdown - margin (5)
    (87, {}, WARN, "temp_high"),        # GPU max operating temperature
    (88, {}, WARN, "temp_high"),
    (89, {}, FAIL, "temp_slowdown"),    # slowdown
    (90, {}, FAIL, "temp_slowdown"),
    (78, {"temp_margin_c": 11.0}, WARN, "temp_high"),
    (79, {"temp_margin_c": 10.0}, WARN, "temp_high"),
    (78, {"temp_margin_c": 10.0}, PASS, "ok"),
    (69, {"temp_warn_c": 70.0}, PASS, "ok"),
    (70, {"temp_warn_c": 70.0}, WARN, "temp_high"),
    (71, {"temp_warn_c": 70.0}, WARN, "temp_high"),
])
def test_thermal_boundary(facts: GpuFacts, temp: int, changes: dict[str, float], status: Status,
                          code: str) -> None:
    findings = judge("gpu.thermal", edited(facts, temperature_c=temp), gpu_config(**changes))
    assert outcome(findings) == [(status, code)]
    assert findings[0].observed == temp
    assert_advice(findings)


@pytest.mark.parametrize(("temp", "status", "code"), [(86, PASS, "ok"), (87, WARN, "temp_high"),
                                                       (95, WARN, "temp_high")])
def test_thermal_without_slowdown_threshold(facts: GpuFacts, temp: int, status: Status, code: str) -> None:
    """With the slowdown temperature unknown, only the GPU max operating temperature applies (no FAIL)."""
    findings = judge("gpu.thermal", edited(facts, temperature_c=temp, temp_slowdown_c=NA("not supported")))
    assert outcome(findings) == [(status, code)]


def test_thermal_unsupported_temperature_skips(facts: GpuFacts) -> None:
    findings = judge("gpu.thermal", edited(facts, temperature_c=NA("not supported")))
    assert outcome(findings) == [(SKIP, "not_available")]
    assert "not supported" in findings[0].summary


@pytest.mark.parametrize(("mem", "margin", "extra"), [
    (89, 5.0, []),
    (90, 5.0, [(WARN, "memory_temp_high")]),   # HBM max (95) - margin
    (94, 5.0, [(WARN, "memory_temp_high")]),
    (95, 5.0, [(FAIL, "memory_temp_limit")]),  # HBM max
    (92, 2.0, []),
    (93, 2.0, [(WARN, "memory_temp_high")]),
    (0, 5.0, []),                              # 0: not reported
])
def test_thermal_memory_boundary(facts: GpuFacts, mem: int, margin: float, extra: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.thermal", edited(facts, memory_temperature_c=mem),
                     gpu_config(memory_temp_margin_c=margin))
    assert outcome(findings) == [(PASS, "ok"), *extra]
    assert_advice(findings)


@pytest.mark.parametrize(("edit", "status", "code"), [
    (call("nvmlDeviceGetTemperature", 89), FAIL, "temp_slowdown"),
    (call("nvmlDeviceGetTemperature", 84), WARN, "temp_high"),
    (call("nvmlDeviceGetTemperature", 83), PASS, "ok"),
    (both(call("nvmlDeviceGetTemperature", 84), nested("temp_thresholds", "1", 84)), FAIL, "temp_slowdown"),
    (both(call("nvmlDeviceGetTemperature", 79), nested("temp_thresholds", "1", 84)), WARN, "temp_high"),
    (field("NVML_FI_DEV_MEMORY_TEMP", 95), FAIL, "memory_temp_limit"),
    (field("NVML_FI_DEV_MEMORY_TEMP", 90), WARN, "memory_temp_high"),
    (refuse("nvmlDeviceGetTemperature"), SKIP, "not_available"),
])
def test_thermal_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, status: Status, code: str) -> None:
    expect(replay(tmp_path, h200_dump, edit), "gpu.thermal", status, code)


def test_thermal_e2e_changed_margin(tmp_path: Path, h200_dump: Dump) -> None:
    report = replay(tmp_path, h200_dump, call("nvmlDeviceGetTemperature", 80), overrides=["gpu.temp_margin_c=9"])
    expect(report, "gpu.thermal", WARN, "temp_high")


# --------------------------------------------------------------------------- gpu.clocks


@pytest.mark.parametrize(("mask", "expected"), [
    (0x0, [(PASS, "ok")]),
    (0x1, [(PASS, "ok")]),
    (0x2, [(PASS, "ok")]),
    (0x4, [(PASS, "ok")]),
    (0x10, [(PASS, "ok")]),
    (0x100, [(PASS, "ok")]),
    (0x8, [(FAIL, "hw_slowdown")]),
    (0x20, [(WARN, "sw_thermal_slowdown")]),
    (0x40, [(FAIL, "hw_thermal_slowdown")]),
    (0x80, [(FAIL, "hw_power_brake_slowdown")]),
    (0x8 | 0x20 | 0x4, [(FAIL, "hw_slowdown"), (WARN, "sw_thermal_slowdown")]),
])
def test_clocks_reasons(facts: GpuFacts, mask: int, expected: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.clocks", edited(facts, clock_event_reasons=mask))
    assert outcome(findings) == expected
    assert_advice(findings)


def test_clocks_unknown_bit_is_named(facts: GpuFacts) -> None:
    [f] = judge("gpu.clocks", edited(facts, clock_event_reasons=0x1 | 0x400))
    assert (f.status, f.observed) == (PASS, ["gpu_idle", "unknown_0x400"])


def test_clocks_unsupported_skips(facts: GpuFacts) -> None:
    assert outcome(judge("gpu.clocks", edited(facts, clock_event_reasons=NA("not supported")))) == [
        (SKIP, "not_available")]


@pytest.mark.parametrize(("mask", "status", "code"), [
    (8, FAIL, "hw_slowdown"),
    (0x40, FAIL, "hw_thermal_slowdown"),
    (0x80, FAIL, "hw_power_brake_slowdown"),
    (0x20, WARN, "sw_thermal_slowdown"),
    (0x4, PASS, "ok"),
    (0x1, PASS, "ok"),
])
def test_clocks_e2e(tmp_path: Path, h200_dump: Dump, mask: int, status: Status, code: str) -> None:
    report = replay(tmp_path, h200_dump, call("nvmlDeviceGetCurrentClocksEventReasons", mask))
    expect(report, "gpu.clocks", status, code)


def test_clocks_e2e_falls_back_to_throttle_reasons(tmp_path: Path, h200_dump: Dump) -> None:
    edit = both(refuse("nvmlDeviceGetCurrentClocksEventReasons"), call("nvmlDeviceGetCurrentClocksThrottleReasons", 8))
    expect(replay(tmp_path, h200_dump, edit), "gpu.clocks", FAIL, "hw_slowdown")


def test_clocks_e2e_unsupported_skips(tmp_path: Path, h200_dump: Dump) -> None:
    edit = both(refuse("nvmlDeviceGetCurrentClocksEventReasons"), refuse("nvmlDeviceGetCurrentClocksThrottleReasons"))
    expect(replay(tmp_path, h200_dump, edit), "gpu.clocks", SKIP, "not_available")


# --------------------------------------------------------------------------- gpu.power


@pytest.mark.parametrize(("limit", "fraction", "status", "code"), [
    (700.0, 1.0, PASS, "ok"),
    (699.0, 1.0, WARN, "power_capped"),
    (600.0, 1.0, WARN, "power_capped"),
    (560.0, 0.8, PASS, "ok"),
    (559.0, 0.8, WARN, "power_capped"),
    (561.0, 0.8, PASS, "ok"),
])
def test_power_boundary(facts: GpuFacts, limit: float, fraction: float, status: Status, code: str) -> None:
    findings = judge("gpu.power", edited(facts, power_limit_w=limit), gpu_config(power_limit_min_fraction=fraction))
    assert outcome(findings) == [(status, code)]
    assert findings[0].observed == limit
    assert_advice(findings)


@pytest.mark.parametrize("attr", ["power_limit_w", "power_default_limit_w"])
def test_power_unsupported_skips(facts: GpuFacts, attr: str) -> None:
    findings = judge("gpu.power", edited(facts, **{attr: NA("not supported")}))
    assert outcome(findings) == [(SKIP, "not_available")]
    assert "not supported" in findings[0].summary


@pytest.mark.parametrize(("edit", "overrides", "status", "code"), [
    (call("nvmlDeviceGetEnforcedPowerLimit", 600000), [], WARN, "power_capped"),
    (call("nvmlDeviceGetEnforcedPowerLimit", 700000), [], PASS, "ok"),
    (call("nvmlDeviceGetEnforcedPowerLimit", 600000), ["gpu.power_limit_min_fraction=0.8"], PASS, "ok"),
    (call("nvmlDeviceGetEnforcedPowerLimit", 559000), ["gpu.power_limit_min_fraction=0.8"], WARN, "power_capped"),
    (refuse("nvmlDeviceGetEnforcedPowerLimit"), [], SKIP, "not_available"),
])
def test_power_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, overrides: list[str], status: Status,
                   code: str) -> None:
    f = expect(replay(tmp_path, h200_dump, edit, overrides=overrides), "gpu.power", status, code)
    if status is WARN:
        assert "-pl 700" in (f.recommendation or "")


# --------------------------------------------------------------------------- gpu.pcie


@pytest.mark.parametrize(("changes", "config", "expected"), [
    ({}, {}, [(PASS, "ok")]),
    ({"pcie_width_current": 8}, {}, [(FAIL, "link_downtrained")]),
    ({"pcie_width_current": 15}, {}, [(FAIL, "link_downtrained")]),
    ({"pcie_gen_current": 1}, {"pcie_expected_gen": 5}, [(PASS, "ok")]),  # idle gen1 is not judged
    ({"pcie_gen_max": 4}, {}, [(PASS, "ok")]),                           # no expectation
    ({"pcie_gen_max": 4}, {"pcie_expected_gen": 5}, [(WARN, "link_gen_limited")]),
    ({"pcie_gen_max": 5}, {"pcie_expected_gen": 5}, [(PASS, "ok")]),
    ({"pcie_gen_max": 5}, {"pcie_expected_gen": 4}, [(PASS, "ok")]),
    ({"pcie_gen_max": NA("not supported")}, {"pcie_expected_gen": 5}, [(PASS, "ok")]),
    ({"pcie_width_current": 8, "pcie_width_max": 8}, {"pcie_expected_width": 16}, [(WARN, "link_narrow")]),
    ({"pcie_width_current": 8, "pcie_width_max": 8}, {"pcie_expected_width": 8}, [(PASS, "ok")]),
    ({"pcie_width_current": 8}, {"pcie_expected_width": 16}, [(FAIL, "link_downtrained")]),
    ({"pcie_replay_counter": 1000}, {}, [(PASS, "ok")]),
    ({"pcie_replay_counter": 999}, {}, [(PASS, "ok")]),
    ({"pcie_replay_counter": 1001}, {}, [(WARN, "replays_high")]),
    ({"pcie_replay_counter": 50}, {"pcie_replay_warn": 50}, [(PASS, "ok")]),
    ({"pcie_replay_counter": 51}, {"pcie_replay_warn": 50}, [(WARN, "replays_high")]),
    ({"pcie_width_current": 8, "pcie_gen_max": 3, "pcie_replay_counter": 5000}, {"pcie_expected_gen": 5},
     [(FAIL, "link_downtrained"), (WARN, "link_gen_limited"), (WARN, "replays_high")]),
    ({"pcie_width_current": NA("not supported")}, {}, [(SKIP, "not_available")]),
    ({"pcie_width_max": NA("not supported")}, {}, [(SKIP, "not_available")]),
])
def test_pcie(facts: GpuFacts, changes: dict[str, Any], config: dict[str, Any],
              expected: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.pcie", edited(facts, **changes), gpu_config(**config))
    assert outcome(findings) == expected
    assert_advice(findings)


@pytest.mark.parametrize(("edit", "status", "code"), [
    (call("nvmlDeviceGetCurrPcieLinkWidth", 8), FAIL, "link_downtrained"),
    (call("nvmlDeviceGetCurrPcieLinkGeneration", 1), PASS, "ok"),
    (call("nvmlDeviceGetMaxPcieLinkGeneration", 4), WARN, "link_gen_limited"),  # the H200 profile expects gen5
    (call("nvmlDeviceGetPcieReplayCounter", 1001), WARN, "replays_high"),
    (call("nvmlDeviceGetPcieReplayCounter", 1000), PASS, "ok"),
    (both(call("nvmlDeviceGetCurrPcieLinkWidth", 8), call("nvmlDeviceGetMaxPcieLinkWidth", 8)), WARN, "link_narrow"),
    (refuse("nvmlDeviceGetCurrPcieLinkWidth"), SKIP, "not_available"),
])
def test_pcie_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, status: Status, code: str) -> None:
    expect(replay(tmp_path, h200_dump, edit), "gpu.pcie", status, code)


def test_pcie_e2e_changed_replay_threshold(tmp_path: Path, h200_dump: Dump) -> None:
    report = replay(tmp_path, h200_dump, call("nvmlDeviceGetPcieReplayCounter", 11),
                    overrides=["gpu.pcie_replay_warn=10"])
    expect(report, "gpu.pcie", WARN, "replays_high")


# --------------------------------------------------------------------------- gpu.nvlink


@pytest.mark.parametrize(("nvlinks", "config", "expected"), [
    (links(4), {}, [(PASS, "ok")]),
    (links(4, down=[2]), {}, [(FAIL, "nvlink_down")]),
    (links(4), {"nvlink_expected_links": 4}, [(PASS, "ok")]),
    (links(4), {"nvlink_expected_links": 5}, [(FAIL, "nvlink_down")]),
    (links(18), {"nvlink_expected_links": 18}, [(PASS, "ok")]),
    (links(4, crc_flit=60, crc_data=40), {}, [(PASS, "ok")]),   # CRC = 100 = limit
    (links(4, crc_flit=60, crc_data=41), {}, [(WARN, "nvlink_crc_errors")]),
    (links(4, crc_flit=99), {}, [(PASS, "ok")]),
    (links(4, crc_flit=10), {"nvlink_crc_errors_warn": 10}, [(PASS, "ok")]),
    (links(4, crc_flit=11), {"nvlink_crc_errors_warn": 10}, [(WARN, "nvlink_crc_errors")]),
    (links(4, recovery=1), {}, [(WARN, "nvlink_recovery")]),
    (links(4, recovery=3), {"nvlink_recovery_errors_warn": 3}, [(PASS, "ok")]),
    (links(4, recovery=4), {"nvlink_recovery_errors_warn": 3}, [(WARN, "nvlink_recovery")]),
    (links(4, replay=10**6, ecc_data=10**6), {}, [(PASS, "ok")]),  # not judged
    (links(4, down=[0], crc_data=500, recovery=2), {},
     [(FAIL, "nvlink_down"), (WARN, "nvlink_crc_errors"), (WARN, "nvlink_recovery")]),
    (NA("GPU has no NVLink"), {}, [(SKIP, "not_available")]),
    (NA("GPU has no NVLink"), {"nvlink_expected_links": 18}, [(SKIP, "single_gpu")]),  # the node's only GPU
])
def test_nvlink(facts: GpuFacts, nvlinks: list[NvLink] | NA, config: dict[str, Any],
                expected: list[tuple[Status, str]]) -> None:
    findings = judge("gpu.nvlink", edited(facts, nvlinks=nvlinks), gpu_config(**config))
    assert outcome(findings) == expected
    assert_advice(findings)


BRIDGED = links(18, down=[4, 5, 10, 11, 16, 17])  # two H100 PCIe joined by three bridges: 12 of 18 ports


@pytest.mark.parametrize(("name", "nvlinks", "config", "expected"), [
    ("NVIDIA H100 PCIe", BRIDGED, {}, [(PASS, "bridged_pcie")]),  # the ports no bridge joins
    ("NVIDIA A100-PCIE-40GB", links(12, down=list(range(4, 12))), {}, [(PASS, "bridged_pcie")]),
    ("NVIDIA RTX A6000", links(4, down=[1, 2, 3]), {}, [(PASS, "bridged_pcie")]),  # one active beside three
    ("NVIDIA H100 NVL", BRIDGED, {}, [(PASS, "bridged_pcie")]),
    ("NVIDIA H100 PCIe", links(18, down=list(range(18))), {}, [(SKIP, "no_bridge")]),  # no bridge: no NVLink
    ("NVIDIA H100 PCIe", links(18), {}, [(PASS, "ok")]),  # every port joined: nothing down to explain
    ("NVIDIA H100 PCIe", BRIDGED, {"nvlink_expected_links": 12}, [(PASS, "bridged_pcie")]),  # as the profile says
    ("NVIDIA H100 PCIe", BRIDGED, {"nvlink_expected_links": 18}, [(FAIL, "nvlink_down")]),
    ("NVIDIA H100 PCIe", links(18, down=list(range(18))), {"nvlink_expected_links": 12}, [(FAIL, "nvlink_down")]),
    ("NVIDIA H100 PCIe", links(18, down=[4], crc_flit=500), {}, [(WARN, "nvlink_crc_errors")]),  # errors still count
    ("NVIDIA H100 80GB HBM3", BRIDGED, {}, [(FAIL, "nvlink_down")]),  # SXM5 module: links on the baseboard
    ("NVIDIA A100-SXM4-80GB", links(12, down=list(range(12))), {}, [(FAIL, "nvlink_down")]),
    ("NVIDIA A40", links(4, down=[1]), {}, [(FAIL, "nvlink_down")]),  # the name does not say PCIe: today's rule
    (NA("not listed"), links(4, down=[1]), {}, [(FAIL, "nvlink_down")]),  # unknown form factor: today's rule
])
def test_nvlink_on_a_bridged_pcie_card(facts: GpuFacts, name: str | NA, nvlinks: list[NvLink],
                                      config: dict[str, Any], expected: list[tuple[Status, str]]) -> None:
    """Inactive links beside active ones are what an NVLink bridge gives a PCIe card; SXM or an
    unknown form factor keeps the FAIL."""
    findings = judge("gpu.nvlink", edited(facts, name=name, nvlinks=nvlinks), gpu_config(**config))
    assert outcome(findings) == expected
    assert_advice(findings)
    if expected == [(PASS, "bridged_pcie")]:
        active = sum(link.active for link in nvlinks)
        assert f"{active} of {len(nvlinks)} links active (bridged PCIe card)" in findings[0].summary


def test_nvlink_missing_beside_a_peer_fails(facts: GpuFacts) -> None:
    """With two GPUs on the node, NVLink has work to do: links expected and none reported is a FAIL."""
    one = replace(facts.gpus[0], nvlinks=NA("GPU has no NVLink"))
    two = replace(facts, gpus=[one, replace(one, index=1)])
    findings = judge("gpu.nvlink", two, gpu_config(nvlink_expected_links=18))
    assert outcome(findings) == [(FAIL, "nvlink_missing"), (FAIL, "nvlink_missing")]
    assert_advice(findings)


def test_nvlink_unsupported_error_counters_are_not_summed(facts: GpuFacts) -> None:
    nv = [NvLink(link=i, active=True, errors={"crc_flit": NA("not supported")}) for i in range(2)]
    [f] = judge("gpu.nvlink", edited(facts, nvlinks=nv))
    assert (f.status, f.details["errors"]["crc_flit"]) == (PASS, 0)


@pytest.mark.parametrize(("edit", "overrides", "status", "code"), [
    (nvlink([1, 1, 1, 1]), [], PASS, "ok"),
    (nvlink([1, 1, 0, 1]), [], FAIL, "nvlink_down"),
    (nvlink([1, 1, 1, 1]), ["gpu.nvlink_expected_links=18"], FAIL, "nvlink_down"),
    (nvlink([1, 1, 1, 1]), ["gpu.nvlink_expected_links=4"], PASS, "ok"),
    (nvlink([1, 1, 1, 1], {1: {"2": 101}}), [], WARN, "nvlink_crc_errors"),
    (nvlink([1, 1, 1, 1], {1: {"1": 1}}), [], WARN, "nvlink_recovery"),
    (None, [], SKIP, "not_available"),                                  # the H200 as captured: no NVLink
    (None, ["gpu.nvlink_expected_links=18"], SKIP, "single_gpu"),       # ... and it is the node's only GPU
])
def test_nvlink_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit | None, overrides: list[str], status: Status,
                    code: str) -> None:
    f = expect(replay(tmp_path, h200_dump, edit, overrides=overrides), "gpu.nvlink", status, code)
    if edit is not None and status is PASS:
        assert f.observed == 4 and f.details["links"] == 4  # link 4 (NotSupported) is not a link


# --------------------------------------------------------------------------- gpu.busy


@pytest.mark.parametrize(("used_mib", "limit", "status", "code"), [
    (2047, 2048, PASS, "ok"),
    (2048, 2048, PASS, "ok"),
    (2049, 2048, WARN, "memory_in_use"),
    (3 * 1024, 2048, WARN, "memory_in_use"),
    (100, 100, PASS, "ok"),
    (101, 100, WARN, "memory_in_use"),
])
def test_busy_memory_boundary(facts: GpuFacts, used_mib: int, limit: int, status: Status, code: str) -> None:
    findings = judge("gpu.busy", edited(facts, memory_used_bytes=used_mib * MIB),
                     gpu_config(busy_memory_used_mib_warn=limit))
    assert outcome(findings) == [(status, code)]
    assert findings[0].observed == used_mib
    assert_advice(findings)


def test_busy_processes_warn(facts: GpuFacts) -> None:
    findings = judge("gpu.busy", edited(facts, processes=[GpuProcess(4242, 1000), GpuProcess(4243, NA("x"))]))
    assert outcome(findings) == [(WARN, "processes_running")]
    assert findings[0].details["processes"] == [4242, 4243]
    assert_advice(findings)


def test_busy_ignores_own_process_only_when_live(facts: GpuFacts) -> None:
    replayed = edited(facts, processes=[GpuProcess(os.getpid(), 1000)])
    assert outcome(judge("gpu.busy", replayed)) == [(WARN, "processes_running")]  # the pid is another host's
    replayed.source = "live"
    assert outcome(judge("gpu.busy", replayed)) == [(PASS, "ok")]


def test_busy_unreadable_skips(facts: GpuFacts) -> None:
    na = NA("not supported")
    assert outcome(judge("gpu.busy", edited(facts, memory_used_bytes=na, processes=na))) == [
        (SKIP, "not_available")]
    # one of the two readings is enough to judge
    assert outcome(judge("gpu.busy", edited(facts, memory_used_bytes=na))) == [(PASS, "ok")]
    assert outcome(judge("gpu.busy", edited(facts, processes=na, memory_used_bytes=3 * GIB))) == [
        (WARN, "memory_in_use")]


def _memory(used: int) -> Edit:
    def edit(dump: Dump) -> None:
        info = dev(dump)["nvmlDeviceGetMemoryInfo"]["ok"]
        info["used"], info["free"] = used, info["total"] - used
    return edit


@pytest.mark.parametrize(("edit", "overrides", "status", "code"), [
    (call("nvmlDeviceGetComputeRunningProcesses", [{"pid": 4242, "usedGpuMemory": 1000}]), [], WARN,
     "processes_running"),
    (call("nvmlDeviceGetComputeRunningProcesses", [{"pid": 4242, "usedGpuMemory": None}]), [], WARN,
     "processes_running"),
    (_memory(3 * GIB), [], WARN, "memory_in_use"),
    (_memory(2048 * MIB), [], PASS, "ok"),
    (_memory(3 * GIB), ["gpu.busy_memory_used_mib_warn=4096"], PASS, "ok"),
    (both(refuse("nvmlDeviceGetMemoryInfo"), refuse("nvmlDeviceGetComputeRunningProcesses")), [], SKIP,
     "not_available"),
])
def test_busy_e2e(tmp_path: Path, h200_dump: Dump, edit: Edit, overrides: list[str], status: Status,
                  code: str) -> None:
    expect(replay(tmp_path, h200_dump, edit, overrides=overrides), "gpu.busy", status, code)


# --------------------------------------------------------------------------- direct GpuRecord (no dump)


def test_minimal_record_built_by_hand_skips_unread_values() -> None:
    """A record with nothing read (all NA) gets SKIPs, never a PASS, from every per-GPU check."""
    facts = GpuFacts(source="test", available=True, driver_version="580.159.04",
                     gpus=[GpuRecord(index=0, name="NVIDIA H200", uuid="GPU-1")])
    for check_id in PER_GPU_CHECKS:
        statuses = [f.status for f in judge(check_id, facts)]
        if check_id == "gpu.inventory.identity":
            assert statuses == [PASS]  # the UUID is all it needs
        else:
            assert statuses == [SKIP], check_id


def test_pcie_narrow_at_idle_warns_only_for_models_that_do_it(facts: GpuFacts) -> None:
    narrow_idle = edited(facts, pcie_width_current=8, pcie_width_max=16, clock_event_reasons=0x1)
    assert outcome(judge("gpu.pcie", narrow_idle)) == [(FAIL, "link_downtrained")]
    a10g = gpu_config(pcie_width_drops_at_idle=True)
    assert outcome(judge("gpu.pcie", narrow_idle, a10g)) == [(WARN, "link_narrow_at_idle")]
    busy = edited(facts, pcie_width_current=8, pcie_width_max=16, clock_event_reasons=0x0)
    assert outcome(judge("gpu.pcie", busy, a10g)) == [(FAIL, "link_downtrained")]
