"""Every file of the shared corpus is detected as its kind, parses, serialises and is judged.

The file list is taken from ``MANIFEST.md`` itself, so a file added to the corpus without
an expected kind here fails this test instead of going untested. Facts per file are
checked in the ``test_parsers_<tool>.py`` modules.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from gpu_preflight.checks.evidence import judge_record, judged_kinds
from gpu_preflight.config import Config
from gpu_preflight.evidence import evidence_config
from gpu_preflight.model import Status, jsonable
from gpu_preflight.parsers.detect import all_kinds, detect_kind, parse_text

KINDS = {
    "dcgm/awsome-dcgmi-diag-r2-3.3.3-p4de-a100-pass.txt": "dcgmi-diag",
    "dcgm/dcgm-issue254-dcgmi-diag-r2-4.4.1-v100-pcie-fail-excerpt.txt": "dcgmi-diag",
    "dcgm/dcgm-issue254-dcgmi-diag-r3-4.4.1-cuda12-plugins-missing.txt": "dcgmi-diag",
    "dcgm/deepops-dcgmi-diag-r1-legacy-blacklist-pass.txt": "dcgmi-diag",
    "dcgm/hcdeep-dcgmi-diag-r3-4.4.0-plugin-load-error.txt": "dcgmi-diag",
    "dcgm/stas00-dcgmi-diag-deployment-row-remap-error-excerpt.txt": "dcgmi-diag",
    "infiniband/deepops-ib_write_bw-roce-cx5-100g.txt": "perftest",
    "infiniband/efalab-ib_send_bw-addr-error.txt": "perftest",
    "infiniband/efalab-ib_send_bw-efa-srd-m6i.txt": "perftest",
    "infiniband/efalab-ib_write_bw-efa-srd-m6i.txt": "perftest",
    "infiniband/gpud-ibstat-a100-9ca-all-active.txt": "ibstat",
    "infiniband/gpud-ibstat-a100-ibpanic-mlx5_8-missing.txt": "ibstat",
    "infiniband/gpud-ibstat-h100-12ca-roce-all-active.txt": "ibstat",
    "infiniband/gpud-ibstat-h100-3-eth-ports-down.txt": "ibstat",
    "infiniband/gpud-ibstat-h100-8x400g-ib-plus-bond.txt": "ibstat",
    "infiniband/gpud-ibstatus-a100-azure-9dev.txt": "ibstatus",
    "infiniband/heioy-ibstat-2x-mlx4-fdr-4ports.txt": "ibstat",
    "infiniband/heioy-ibstatus-mlx4-fdr.txt": "ibstatus",
    "infiniband/heioy-ibv_devinfo-v-mlx4_1-port2.txt": "ibv-devinfo",
    "kernel-xid/gpud-dmesg-decode-iso-xid13-xid43-burst.log": "dmesg",
    "kernel-xid/gpud-dmesg-libnccl-segfault.log": "dmesg",
    "kernel-xid/hcdeep-dmesg-permission-denied-gke.txt": "dmesg",
    "kernel-xid/stas00-xid63-row-remapper.log": "dmesg",
    "libfabric/awscdi-efa_test-fi_pingpong-efa.txt": "fi-pingpong",
    "libfabric/awscdi-fi_info-p-efa-t-rdm-single.txt": "fi-info",
    "libfabric/cscs-fi_info-p-cxi-not-working-61.txt": "fi-info",
    "libfabric/cscs-fi_info-p-cxi-working.txt": "fi-info",
    "libfabric/hpctut-fi_info-p-efa-113.20.txt": "fi-info",
    "libfabric/libfabric-efa-building-fi_info-p-efa.txt": "fi-info",
    "libfabric/libfabric-man-fi_info-v-verbs-rxd-mlx5.txt": "fi-info",
    "libfabric/libfabric-man-fi_info-verbs-dgram-and-tcp.txt": "fi-info",
    "lspci/gpud-lspci-gb200.txt": "lspci",
    "lspci/gpud-lspci-nn-a100x8.txt": "lspci",
    "lspci/stas00-dmesg-pcie-limited-by.txt": "dmesg",
    "nccl-tests/awsome-all_reduce-1x-p5-8gpu-aws-batch.txt": "nccl-tests",
    "nccl-tests/awsome-all_reduce-2x-p4de-16gpu-srun-prefix.txt": "nccl-tests",
    "nccl-tests/awsome-all_reduce-2x-p5-16gpu-srun-prefix.txt": "nccl-tests",
    "nccl-tests/awsome-all_reduce-2x-p5-eks-mpirun-prefix-elided.txt": "nccl-tests",
    "nccl-tests/awsome-all_reduce-p5en-128gpu-elided.txt": "nccl-tests",
    "nccl-tests/coreweave-all_reduce-gb200-nvl72-72rank-graphics-device.txt": "nccl-tests",
    "nccl-tests/coreweave-all_reduce-h100-64gpu-sharp-mpijob-elided.txt": "nccl-tests",
    "nccl-tests/cscs-all_reduce-2.17.1-2x-gh200-8rank-slingshot-healthy.txt": "nccl-tests",
    "nccl-tests/cscs-all_reduce-2.18.2-2x-gh200-2rank-sarus.txt": "nccl-tests",
    "nccl-tests/cscs-test-nccl-failure-invalid-usage.txt": "nccl-tests",
    "nccl-tests/deepops-all_reduce-legacy-error-column-2x-dgxa100-hdr.txt": "nccl-tests",
    "nccl-tests/deepops-all_reduce-legacy-error-column-roce-k8s.txt": "nccl-tests",
    "nccl-tests/gcp-a3mega-all_reduce-2x-h100-16rank.txt": "nccl-tests",
    "nccl-tests/hcdeep-all_reduce-gcp-a3-h100x8-single-node.txt": "nccl-tests",
    "nccl-tests/oci-all_reduce-2.17.9-2x-a100-b4.8-16rank.txt": "nccl-tests",
    "nccl-tests/oci-all_reduce-2x-a100-40gb-16rank-mpijob.txt": "nccl-tests",
    "nvidia-smi-csv/h100-80gb-hbm3-590.48.01-query-gpu-load.csv": "nvidia-smi-csv",
    "nvidia-smi-csv/h200-590.48.01-query-gpu-idle.csv": "nvidia-smi-csv",
    "nvidia-smi-csv/l40s-595.80-query-gpu-load.csv": "nvidia-smi-csv",
    "nvidia-smi-csv/netdata-tesla-p100.csv": "nvidia-smi-csv",
    "nvidia-smi-csv/stas00-h100-query-vbios-excerpt.txt": "nvidia-smi-csv",
    "nvidia-smi-text/awsome-p4de-a100-nvlink-s-gpu0.txt": "nvidia-smi-nvlink",
    "nvidia-smi-text/gpud-a10-535.129.03-q.txt": "nvidia-smi-q",
    "nvidia-smi-text/gpud-a100x8-nvlink-status.txt": "nvidia-smi-nvlink",
    "nvidia-smi-text/gpud-h100x8-535.183.01-q.txt": "nvidia-smi-q",
    "nvidia-smi-text/gpud-rtx4090x8-535.154.05-q.txt": "nvidia-smi-q",
    "nvidia-smi-text/gpud-table-h100x8-550.90.07.txt": "nvidia-smi-table",
    "nvidia-smi-text/gpud-titan-v-560.35.03-q.txt": "nvidia-smi-q",
    "nvidia-smi-text/h100-80gb-hbm3-590.48.01-dmon-load.txt": "nvidia-smi-dmon",
    "nvidia-smi-text/h100-80gb-hbm3-590.48.01-nvlink-s.txt": "nvidia-smi-nvlink",
    "nvidia-smi-text/h100-80gb-hbm3-590.48.01-q-load.txt": "nvidia-smi-q",
    "nvidia-smi-text/h100-80gb-hbm3-590.48.01-table-load.txt": "nvidia-smi-table",
    "nvidia-smi-text/h100-80gb-hbm3-590.48.01-topo-m.txt": "nvidia-smi-topo",
    "nvidia-smi-text/h100-mig-590.48.01-L.txt": "nvidia-smi-list",
    "nvidia-smi-text/h100-mig-590.48.01-q-idle.txt": "nvidia-smi-q",
    "nvidia-smi-text/h100-mig-590.48.01-table-load.txt": "nvidia-smi-table",
    "nvidia-smi-text/h200-590.48.01-table-idle.txt": "nvidia-smi-table",
    "nvidia-smi-text/h200-mig-590.48.01-table-load.txt": "nvidia-smi-table",
    "nvidia-smi-text/l40s-595.80-table-load.txt": "nvidia-smi-table",
    "nvidia-smi-text/stas00-ecc-sram-uncorrectable-excerpt.txt": "nvidia-smi-q",
    "nvidia-smi-text/stas00-h100-nvlink-e-excerpt.txt": "nvidia-smi-nvlink",
    "nvidia-smi-text/stas00-h100-nvlink-status-excerpt.txt": "nvidia-smi-nvlink",
    "nvidia-smi-text/stas00-retired-pages-pending-excerpt.txt": "nvidia-smi-q",
    "nvidia-smi-text/windows-rtx-2080-super-591.86-table-load.txt": "nvidia-smi-table",
    "nvidia-smi-xml/netdata-a100-sxm4-mig.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/netdata-rtx-2080-win.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/netdata-rtx-3060.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/netdata-rtx-4090-driver-535.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-3090-v13.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-a10g.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-dual_2070-v13.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-dual_a5000-v13.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-gtx-1070-ti.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-gtx-1660-ti.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-quadro-p2000-v12.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-quadro-p400.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-rtx-3060-v12.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-rtx-3080-v12.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-rtx-3080-v13.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-rtx-3090-v12.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-rtx-4000-sff-ada-v13.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-tesla-t4.xml": "nvidia-smi-xml",
    "nvidia-smi-xml/telegraf-tesla_p4.xml": "nvidia-smi-xml",
    "torch-distributed/cscs-nccl-info-plugin-not-found-then-warn.txt": "nccl-log",
    "torch-distributed/cscs-nccl-warn-aws-libfabric-not-found.txt": "nccl-log",
    "torch-distributed/hcdeep-nccl-remote-error-peer-pod-deleted.txt": "nccl-log",
    "torch-distributed/stas00-nccl-unhandled-system-error-2.7.8.log": "nccl-log",
    "torch-distributed/stas00-nccl-warn-connect-refused.log": "nccl-log",
    "torch-distributed/stas00-nccl-warn-net-ib-completion-error12.log": "nccl-log",
}


def manifest_files(corpus: Path) -> set[str]:
    table = (corpus / "MANIFEST.md").read_text(encoding="utf-8")
    return set(re.findall(r"^\| `([^`]+)` \(", table, re.MULTILINE))


def read(corpus: Path, name: str) -> str:
    return (corpus / name).read_bytes().decode("utf-8", errors="replace")


def test_every_manifest_file_has_an_expected_kind(corpus: Path) -> None:
    listed = manifest_files(corpus)
    assert len(listed) == 103
    assert listed == set(KINDS)


# Spans the publishers cut before the tool finished (MANIFEST: "excerpt", "NO closing
# border line (truncated by author)", the srun-prefix logs end before nccl-tests' summary).
CUT = {
    "dcgm/dcgm-issue254-dcgmi-diag-r2-4.4.1-v100-pcie-fail-excerpt.txt",
    "dcgm/deepops-dcgmi-diag-r1-legacy-blacklist-pass.txt",
    "dcgm/stas00-dcgmi-diag-deployment-row-remap-error-excerpt.txt",
    "nccl-tests/awsome-all_reduce-2x-p4de-16gpu-srun-prefix.txt",
    "nccl-tests/awsome-all_reduce-2x-p5-16gpu-srun-prefix.txt",
}


@pytest.mark.parametrize("name", sorted(KINDS))
def test_corpus_file_is_detected_parsed_serialised_and_judged(corpus: Path, name: str) -> None:
    text = read(corpus, name)
    assert detect_kind(text) == KINDS[name]
    kind, record = parse_text(text)
    encoded = json.loads(json.dumps({"kind": kind, "record": jsonable(record)}))
    assert encoded["kind"] == KINDS[name]
    findings = judge_record(kind, record, Config(), source="node-1")
    assert findings
    incomplete = [f for f in findings if f.check_id == "evidence.complete"]
    fragment = [f for f in findings if f.check_id == "evidence.fragment"]
    assert not [f for f in findings if f.check_id.startswith("evidence.") and f not in incomplete + fragment], findings
    assert bool(incomplete) == (name in CUT), findings  # a cut span is never judged as complete
    assert all(f.status is Status.ERROR and f.summary.startswith("output incomplete: ") for f in incomplete)
    assert all(f.subject.startswith("node-1") for f in findings)


def test_every_kind_has_a_judge() -> None:
    assert {s.kind for s in all_kinds()} <= set(judged_kinds())


@pytest.mark.parametrize("name", [
    "dcgm/awsome-dcgmi-diag-r2-3.3.3-p4de-a100-pass.txt", "infiniband/gpud-ibstat-a100-9ca-all-active.txt",
    "libfabric/hpctut-fi_info-p-efa-113.20.txt", "nccl-tests/gcp-a3mega-all_reduce-2x-h100-16rank.txt",
    "infiniband/heioy-ibstatus-mlx4-fdr.txt", "libfabric/awscdi-efa_test-fi_pingpong-efa.txt",
])
def test_healthy_corpus_files_judge_without_problems(corpus: Path, name: str) -> None:
    kind, record = parse_text(read(corpus, name))
    config, _ = evidence_config(record)  # as `judge` resolves it: the profile the GPU names match
    statuses = {f.status for f in judge_record(kind, record, config, source="n")}
    assert Status.PASS in statuses
    assert not statuses & {Status.WARN, Status.FAIL, Status.ERROR}


# The issue's minimum record layout per kind: top-level keys, then keys of each list item.
LAYOUT: dict[str, tuple[str, dict[str, set[str]]]] = {
    "nvidia-smi-xml/telegraf-a10g.xml": (
        "driver_version cuda_version attached_gpus gpus",
        {"gpus": {"pci_bus_id", "name", "uuid", "memory_total_mib", "temperature_c", "power_draw_w", "power_limit_w",
                  "ecc_volatile_uncorrected", "remapped_rows_pending", "remapped_rows_failure", "retired_pages_pending",
                  "clocks_event_reasons_active", "pcie_gen_current", "pcie_gen_max", "pcie_width_current",
                  "pcie_width_max", "mig_mode"}}),
    "dcgm/awsome-dcgmi-diag-r2-3.3.3-p4de-a100-pass.txt": (
        "dcgm_version driver_version tests overall", {"tests": {"category", "name", "status", "gpus", "messages"}}),
    "nccl-tests/gcp-a3mega-all_reduce-2x-h100-16rank.txt": (
        "test nranks nccl_version rows avg_busbw_gbps peak_busbw_gbps wrong_total errors",
        {"rows": {"size_bytes", "busbw_gbps", "algbw_gbps", "time_us", "wrong"}}),
    "libfabric/hpctut-fi_info-p-efa-113.20.txt": (
        "providers error_code", {"providers": {"provider", "fabric", "domain"}}),
    "libfabric/awscdi-efa_test-fi_pingpong-efa.txt": ("rows", {"rows": {"size_bytes", "mb_per_s", "usec_per_xfer"}}),
    "infiniband/heioy-ibstat-2x-mlx4-fdr-4ports.txt": ("devices", {"devices": {"name", "ports"}}),
    "infiniband/deepops-ib_write_bw-roce-cx5-100g.txt": (
        "rows", {"rows": {"size_bytes", "bw_peak_gbps", "bw_avg_gbps"}}),
    "kernel-xid/stas00-xid63-row-remapper.log": ("xid_events", {"xid_events": {"pci_bus_id", "xid", "message"}}),
    "lspci/gpud-lspci-gb200.txt": (
        "devices", {"devices": {"address", "name", "cap_speed_gts", "cap_width", "sta_speed_gts", "sta_width",
                                "downgraded"}}),
    "torch-distributed/stas00-nccl-warn-connect-refused.log": ("signatures",
                                                              {"signatures": {"kind", "rank", "detail"}}),
}


@pytest.mark.parametrize("name", sorted(LAYOUT))
def test_record_has_the_issue_layout(corpus: Path, name: str) -> None:
    top, items = LAYOUT[name]
    _, record = parse_text(read(corpus, name))
    data = jsonable(record)
    assert set(top.split()) <= set(data)
    for key, fields in items.items():
        assert data[key], key
        assert all(fields <= set(item) for item in data[key]), key
    ports = data.get("devices", [{}])[0].get("ports")
    if ports is not None:
        assert {"port", "state", "physical_state", "rate_gbps", "link_layer"} <= set(ports[0])
