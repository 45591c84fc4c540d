"""nvidia-smi readers (XML, -q text, CSV, table, nvlink, -L, dmon, topo) against the corpus facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.nvidia_smi import query_csv, query_text, table, xml_log
from gpu_preflight.parsers.nvidia_smi.listing import parse_nvlink

from .evidence_facts import check_facts, parsed

CAPTURED = Path(__file__).parent / "fixtures" / "evidence" / "h200-580.159.04"

XML: dict[str, dict[str, Any]] = {
    "netdata-a100-sxm4-mig.xml": {
        "driver_version": "510.47.03", "cuda_version": "11.6", "attached_gpus": 1,
        "gpus.0.pci_bus_id": "00000000:00:04.0", "gpus.0.name": "NVIDIA A100-SXM4-40GB", "gpus.0.mig_mode": "enabled",
        "gpus.0.mig_devices": 2, "gpus.0.utilization_gpu_percent": None, "gpus.0.ecc_mode": True,
        "gpus.0.clocks_event_reasons_active": [], "gpus.0.power_draw_w": 66.92, "gpus.0.power_limit_w": 400.0,
        "gpus.0.memory_total_mib": 40960, "gpus.0.memory_used_mib": 38, "gpus.0.temperature_c": 36},
    "netdata-rtx-2080-win.xml": {
        "driver_version": "516.59", "cuda_version": "11.7", "gpus.0.pci_bus_id": "00000000:0A:00.0",
        "gpus.0.persistence_mode": None, "gpus.0.power_draw_w": 14.5, "gpus.0.power_limit_w": 275.0,
        "gpus.0.utilization_gpu_percent": 2, "gpus.0.clocks_event_reasons_active": ["gpu_idle"],
        "gpus.0.pcie_gen_current": 3, "gpus.0.pcie_width_current": 8, "gpus.0.pcie_width_max": 16,
        "gpus.0.temperature_c": 29},
    "netdata-rtx-3060.xml": {
        "driver_version": "515.65.01", "gpus.0.pci_bus_id": "00000000:01:00.0", "gpus.0.power_draw_w": 8.7,
        "gpus.0.power_limit_w": None, "gpus.0.fan_speed_percent": None,
        "gpus.0.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.temperature_c": 45,
        "gpus.0.memory_total_mib": 6144, "gpus.0.memory_used_mib": 5},
    "netdata-rtx-4090-driver-535.xml": {
        "driver_version": "535.86.05", "cuda_version": "12.2", "gpus.0.pci_bus_id": "00000000:84:00.0",
        "gpus.0.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.power_draw_w": 26.84,
        "gpus.0.power_limit_w": 450.0, "gpus.0.ecc_mode": False, "gpus.0.remapped_rows_correctable": 0,
        "gpus.0.remapped_rows_uncorrectable": 0, "gpus.0.remapped_rows_pending": False,
        "gpus.0.remapped_rows_failure": False, "gpus.0.memory_total_mib": 24564},
    "telegraf-3090-v13.xml": {
        "driver_version": "590.44.01", "cuda_version": "13.1", "attached_gpus": 1,
        "gpus.0.pci_bus_id": "00000000:09:00.0", "gpus.0.temperature_c": 32, "gpus.0.memory_total_mib": 24576,
        "gpus.0.memory_used_mib": 7, "gpus.0.power_draw_w": 35.15, "gpus.0.power_draw_average_w": 35.06,
        "gpus.0.power_limit_w": 350.0, "gpus.0.clocks_event_reasons_active": ["sw_power_cap"],
        "gpus.0.performance_state": "P8", "gpus.0.pcie_gen_current": 1, "gpus.0.pcie_gen_max": 4,
        "gpus.0.pcie_width_current": 16, "gpus.0.pcie_width_max": 16},
    "telegraf-a10g.xml": {
        "attached_gpus": 1, "gpus.0.pci_bus_id": "00000000:00:1E.0", "gpus.0.ecc_mode": True,
        "gpus.0.remapped_rows_correctable": 0, "gpus.0.remapped_rows_uncorrectable": 0,
        "gpus.0.remapped_rows_pending": False, "gpus.0.remapped_rows_failure": False,
        "gpus.0.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.power_draw_w": 25.58,
        "gpus.0.power_limit_w": 300.0, "gpus.0.pcie_gen_current": 1, "gpus.0.pcie_width_current": 8,
        "gpus.0.pcie_gen_max": 4, "gpus.0.pcie_width_max": 16, "gpus.0.processes.0.name": "/usr/lib/xorg/Xorg",
        "gpus.0.processes.0.used_memory_mib": 22, "gpus.0.temperature_c": 17},
    "telegraf-dual_2070-v13.xml": {
        "attached_gpus": 2, "gpus.0.pci_bus_id": "00000000:01:00.0", "gpus.1.pci_bus_id": "00000000:02:00.0",
        "gpus.0.power_draw_w": 9.23, "gpus.1.power_draw_w": 11.82, "gpus.0.power_limit_w": 175.0,
        "gpus.0.power_draw_average_w": None, "gpus.0.clocks_event_reasons_active": ["gpu_idle"],
        "gpus.1.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.temperature_c": 14, "gpus.1.temperature_c": 13,
        "gpus.0.memory_total_mib": 8192},
    "telegraf-dual_a5000-v13.xml": {
        "attached_gpus": 2, "gpus.0.pci_bus_id": "00000000:81:00.0", "gpus.1.pci_bus_id": "00000000:C1:00.0",
        "gpus.0.ecc_mode": False, "gpus.0.memory_used_mib": 22437, "gpus.1.memory_used_mib": 17253,
        "gpus.0.memory_total_mib": 24564, "gpus.0.processes.0.name": "/root/src/llama.cpp/build/bin/llama-server",
        "gpus.0.processes.0.used_memory_mib": 22430, "gpus.1.processes.0.used_memory_mib": 17246,
        "gpus.0.power_draw_w": 6.52, "gpus.1.power_draw_w": 13.59, "gpus.0.power_limit_w": 230.0},
    "telegraf-gtx-1070-ti.xml": {
        "driver_version": None, "attached_gpus": None, "gpus.0.pci_bus_id": "00000000:01:00.0",
        "gpus.0.name": "GeForce GTX 1070 Ti", "gpus.0.clocks_event_reasons_active": None, "gpus.0.temperature_c": 39,
        "gpus.0.fan_speed_percent": 100, "gpus.0.memory_total_mib": 4096, "gpus.0.memory_used_mib": 42,
        "gpus.0.power_draw_w": None, "gpus.0.pcie_gen_current": 1, "gpus.0.pcie_width_current": 16,
        "gpus.0.pcie_gen_max": None, "gpus.0.pcie_width_max": None},
    "telegraf-gtx-1660-ti.xml": {
        "driver_version": "418.43", "cuda_version": "10.1", "attached_gpus": 1, "gpus.0.name": "Graphics Device",
        "gpus.0.pci_bus_id": "00000000:43:00.0", "gpus.0.power_draw_w": 8.93, "gpus.0.power_limit_w": 130.0,
        "gpus.0.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.memory_total_mib": 5912},
    "telegraf-quadro-p2000-v12.xml": {
        "driver_version": "525.125.06", "cuda_version": "12.0", "gpus.0.pci_bus_id": "00000000:17:00.0",
        "gpus.0.power_draw_w": 4.61, "gpus.0.power_limit_w": 75.0, "gpus.0.clocks_event_reasons_active": ["gpu_idle"],
        "gpus.0.temperature_c": 34, "gpus.0.memory_total_mib": 5120},
    "telegraf-quadro-p400.xml": {
        "attached_gpus": 1, "gpus.0.pci_bus_id": "00000000:43:00.0", "gpus.0.power_draw_w": None,
        "gpus.0.power_limit_w": None, "gpus.0.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.temperature_c": 33,
        "gpus.0.memory_total_mib": 1998},
    "telegraf-rtx-3060-v12.xml": {
        "driver_version": "570.124.04", "cuda_version": "12.8", "gpus.0.pci_bus_id": "00000000:2D:00.0",
        "gpus.0.power_draw_w": 11.63, "gpus.0.power_draw_average_w": 11.6, "gpus.0.power_limit_w": 170.0,
        "gpus.0.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.temperature_c": 42,
        "gpus.0.memory_total_mib": 12288, "gpus.0.memory_used_mib": 116},
    "telegraf-rtx-3080-v12.xml": {
        "driver_version": "536.40", "gpus.0.pci_bus_id": "00000000:04:00.0", "gpus.0.power_draw_w": 22.78,
        "gpus.0.power_limit_w": 336.0, "gpus.0.persistence_mode": None, "gpus.0.memory_total_mib": 10240,
        "gpus.0.memory_used_mib": 1128},
    "telegraf-rtx-3080-v13.xml": {
        "driver_version": "595.58.03", "cuda_version": "13.2", "gpus.0.pci_bus_id": "00000000:0C:00.0",
        "gpus.0.serial": "REDACTED", "gpus.0.performance_state": "P2", "gpus.0.utilization_gpu_percent": 65,
        "gpus.0.power_draw_w": 142.33, "gpus.0.power_draw_average_w": 139.62, "gpus.0.power_limit_w": 320.0,
        "gpus.0.memory_used_mib": 9184, "gpus.0.memory_total_mib": 10240, "gpus.0.clocks_event_reasons_active": [],
        "gpus.0.sm_clock_mhz": 1950},
    "telegraf-rtx-3090-v12.xml": {
        "driver_version": "525.147.05", "gpus.0.pci_bus_id": "00000000:00:10.0", "gpus.0.power_draw_w": 27.23,
        "gpus.0.power_limit_w": 200.0, "gpus.0.sm_clock_mhz": 0, "gpus.0.clocks_event_reasons_active": ["gpu_idle"]},
    "telegraf-rtx-4000-sff-ada-v13.xml": {
        "driver_version": "595.84", "gpus.0.pci_bus_id": "00000000:06:00.0", "gpus.0.remapped_rows_correctable": 0,
        "gpus.0.remapped_rows_uncorrectable": 0, "gpus.0.remapped_rows_pending": False,
        "gpus.0.remapped_rows_failure": False, "gpus.0.power_draw_w": 8.44, "gpus.0.power_draw_average_w": 8.81,
        "gpus.0.power_limit_w": 70.0, "gpus.0.clocks_event_reasons_active": ["gpu_idle"]},
    "telegraf-tesla-t4.xml": {
        "attached_gpus": 1, "gpus.0.pci_bus_id": "00000000:00:1E.0", "gpus.0.ecc_mode": True,
        "gpus.0.retired_pages_sbe": 0, "gpus.0.retired_pages_dbe": 0, "gpus.0.retired_pages_pending": False,
        "gpus.0.power_draw_w": 26.78, "gpus.0.power_limit_w": 70.0, "gpus.0.clocks_event_reasons_active": [],
        "gpus.0.processes.1.used_memory_mib": 1005, "gpus.0.pcie_gen_current": 3, "gpus.0.pcie_width_current": 8,
        "gpus.0.pcie_width_max": 16},
    "telegraf-tesla_p4.xml": {
        "driver_version": "513.46", "gpus.0.name": "GRID P4-1Q", "gpus.0.pcie_gen_current": None,
        "gpus.0.pcie_width_current": None, "gpus.0.temperature_c": 0, "gpus.0.vbios": "00.00.00.00.00",
        "gpus.0.power_draw_w": None, "gpus.0.memory_total_mib": 1024, "gpus.0.memory_used_mib": 807},
}


@pytest.mark.parametrize("name", sorted(XML))
def test_xml_corpus_facts(corpus: Path, name: str) -> None:
    check_facts(parsed(corpus, f"nvidia-smi-xml/{name}"), XML[name])


def test_xml_process_lists(corpus: Path) -> None:
    p4 = parsed(corpus, "nvidia-smi-xml/telegraf-tesla_p4.xml")["gpus"][0]["processes"]
    assert len(p4) == 13 and all(p["used_memory_mib"] is None for p in p4)
    assert sum(p["name"] is None for p in p4) == 12  # empty <process_name> reads as None, not ""
    assert len(parsed(corpus, "nvidia-smi-xml/telegraf-rtx-3080-v12.xml")["gpus"][0]["processes"]) == 5


Q: dict[str, dict[str, Any]] = {
    "gpud-a10-535.129.03-q.txt": {
        "driver_version": "535.129.03", "cuda_version": "12.2", "attached_gpus": 1,
        "gpus.0.pci_bus_id": "00000000:07:00.0", "gpus.0.persistence_mode": True, "gpus.0.performance_state": "P8",
        "gpus.0.ecc_mode": True, "gpus.0.memory_total_mib": 23028, "gpus.0.memory_used_mib": 4,
        "gpus.0.temperature_c": 33, "gpus.0.power_draw_w": 43.89, "gpus.0.power_limit_w": 150.0,
        "gpus.0.pcie_gen_max": 4, "gpus.0.pcie_width_max": 16},
    "gpud-h100x8-535.183.01-q.txt": {
        "attached_gpus": 8, "gpus.0.pci_bus_id": "00000000:53:00.0", "gpus.7.pci_bus_id": "00000000:CA:00.0",
        "gpus.0.temperature_c": 36, "gpus.0.power_draw_w": 71.97, "gpus.0.clocks_event_reasons_active": ["gpu_idle"],
        "gpus.2.pci_bus_id": "00000000:75:00.0",
        "gpus.2.clocks_event_reasons_active": ["sw_power_cap", "hw_power_brake_slowdown", "sw_thermal_slowdown"],
        "gpus.0.temp_slowdown_c": None},  # Hopper prints relative T.Limit temperatures: not thresholds
    "gpud-rtx4090x8-535.154.05-q.txt": {
        "attached_gpus": 8, "gpus.0.pci_bus_id": "00000000:01:00.0", "gpus.7.pci_bus_id": "00000000:E1:00.0",
        "gpus.0.power_limit_w": 450.0, "gpus.0.ecc_mode": False, "gpus.0.ecc_volatile_uncorrected": None},
    "gpud-titan-v-560.35.03-q.txt": {
        "driver_version": "560.35.03", "cuda_version": "12.6", "gpus.0.pci_bus_id": "00000000:01:00.0",
        "gpus.0.persistence_mode": False, "gpus.0.performance_state": "P8", "gpus.0.ecc_mode": None,
        "gpus.0.retired_pages_sbe": None, "gpus.0.remapped_rows_pending": None,
        "gpus.0.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.memory_total_mib": 12288,
        "gpus.0.memory_used_mib": 290, "gpus.0.temperature_c": 44, "gpus.0.power_draw_w": 29.02,
        "gpus.0.power_limit_w": 250.0, "gpus.0.pcie_gen_current": 1, "gpus.0.pcie_gen_max": 3,
        "gpus.0.pcie_width_current": 16, "gpus.0.temp_slowdown_c": 97},
    "h100-80gb-hbm3-590.48.01-q-load.txt": {
        "attached_gpus": 1, "gpus.0.pci_bus_id": "00000000:00:09.0", "gpus.0.name": "NVIDIA H100 80GB HBM3",
        "gpus.0.vbios": "96.00.A5.00.01", "gpus.0.pcie_gen_current": 5, "gpus.0.pcie_gen_max": 5,
        "gpus.0.pcie_width_current": 16, "gpus.0.pcie_width_max": 16, "gpus.0.clocks_event_reasons_active": [],
        "gpus.0.memory_total_mib": 81559, "gpus.0.memory_used_mib": 19818, "gpus.0.ecc_mode": True,
        "gpus.0.ecc_volatile_uncorrected": 0, "gpus.0.retired_pages_sbe": None,
        "gpus.0.remapped_rows_correctable": 0, "gpus.0.remapped_rows_uncorrectable": 0,
        "gpus.0.remapped_rows_pending": False, "gpus.0.remapped_rows_failure": False, "gpus.0.temperature_c": 59,
        "gpus.0.power_draw_average_w": 629.45, "gpus.0.power_draw_w": 588.39, "gpus.0.power_limit_w": 700.0},
    "h100-mig-590.48.01-q-idle.txt": {
        "gpus.0.mig_mode": "enabled", "gpus.0.mig_devices": 4, "gpus.0.remapped_rows_pending": None,
        "gpus.0.utilization_gpu_percent": None, "gpus.0.clocks_event_reasons_active": ["gpu_idle"],
        "gpus.0.memory_total_mib": 81559, "gpus.0.memory_used_mib": 59, "gpus.0.temperature_c": 42,
        "gpus.0.power_draw_average_w": 71.27, "gpus.0.ecc_mode": True},
    "stas00-ecc-sram-uncorrectable-excerpt.txt": {
        "gpus.0.pci_bus_id": None, "gpus.0.ecc_volatile_uncorrected": 1, "gpus.0.ecc_volatile_corrected": 0,
        "gpus.0.sram_aggregate_uncorrected": 5, "gpus.0.ecc_aggregate_uncorrected": 5},
    "stas00-retired-pages-pending-excerpt.txt": {
        "gpus.0.retired_pages_sbe": 2, "gpus.0.retired_pages_dbe": 0, "gpus.0.retired_pages_pending": True},
}


@pytest.mark.parametrize("name", sorted(Q))
def test_q_text_corpus_facts(corpus: Path, name: str) -> None:
    check_facts(parsed(corpus, f"nvidia-smi-text/{name}"), Q[name])


def test_q_text_processes(corpus: Path) -> None:
    h100 = parsed(corpus, "nvidia-smi-text/h100-80gb-hbm3-590.48.01-q-load.txt")["gpus"][0]["processes"]
    assert [(p["pid"], p["name"], p["used_memory_mib"]) for p in h100] == [
        (11327, "/root/tools/memhog", 2566), (11328, "/root/tools/memhog", 1542), (11345, "./gpu_burn", 15690)]
    rtx = parsed(corpus, "nvidia-smi-text/gpud-rtx4090x8-535.154.05-q.txt")["gpus"]
    assert sum(len(g["processes"]) for g in rtx) == 7
    assert [g["performance_state"] for g in rtx].count("P2") == 5


CSV: dict[str, dict[str, Any]] = {
    "h100-80gb-hbm3-590.48.01-query-gpu-load.csv": {
        "driver_version": "590.48.01", "attached_gpus": 1, "gpus.0.name": "NVIDIA H100 80GB HBM3",
        "gpus.0.pci_bus_id": "00000000:00:09.0", "gpus.0.pcie_gen_current": 5, "gpus.0.pcie_gen_max": 5,
        "gpus.0.pcie_width_current": 16, "gpus.0.pcie_width_max": 16, "gpus.0.performance_state": "P0",
        "gpus.0.clocks_event_reasons_active": [], "gpus.0.utilization_gpu_percent": 100,
        "gpus.0.memory_used_mib": 19818, "gpus.0.memory_total_mib": 81559, "gpus.0.ecc_volatile_uncorrected": 0,
        "gpus.0.remapped_rows_uncorrectable": 0, "gpus.0.remapped_rows_pending": False,
        "gpus.0.remapped_rows_failure": False, "gpus.0.retired_pages_pending": None, "gpus.0.temperature_c": 59,
        "gpus.0.power_draw_w": 631.95, "gpus.0.power_limit_w": 700.0, "gpus.0.sm_clock_mhz": 1980,
        "gpus.0.mig_mode": "disabled"},
    "h200-590.48.01-query-gpu-idle.csv": {
        "gpus.0.name": "NVIDIA H200", "gpus.0.pci_bus_id": "00000000:83:00.0",
        "gpus.0.clocks_event_reasons_active": ["gpu_idle"], "gpus.0.utilization_gpu_percent": 0,
        "gpus.0.memory_total_mib": 143771, "gpus.0.memory_used_mib": 0, "gpus.0.temperature_c": 28,
        "gpus.0.power_draw_w": 77.71, "gpus.0.power_limit_w": 700.0, "gpus.0.sm_clock_mhz": 345,
        "gpus.0.ecc_volatile_uncorrected": 0, "gpus.0.remapped_rows_uncorrectable": 0},
    "l40s-595.80-query-gpu-load.csv": {
        "driver_version": "595.80", "gpus.0.name": "NVIDIA L40S", "gpus.0.pcie_gen_current": 4,
        "gpus.0.pcie_gen_max": 4, "gpus.0.pcie_width_current": 16, "gpus.0.utilization_gpu_percent": 9,
        "gpus.0.memory_used_mib": 1235, "gpus.0.memory_total_mib": 46068, "gpus.0.temperature_c": 54,
        "gpus.0.power_draw_w": 110.23, "gpus.0.power_limit_w": 350.0, "gpus.0.sm_clock_mhz": 2520,
        "gpus.0.mig_mode": None, "gpus.0.ecc_volatile_uncorrected": 0, "gpus.0.remapped_rows_uncorrectable": 0},
    "netdata-tesla-p100.csv": {
        "gpus.0.name": "Tesla P100-PCIE-16GB", "gpus.0.fan_speed_percent": None, "gpus.0.performance_state": "P0",
        "gpus.0.memory_used_mib": 0, "gpus.0.utilization_gpu_percent": 0, "gpus.0.temperature_c": 37,
        "gpus.0.power_draw_w": 28.16, "gpus.0.sm_clock_mhz": 405},
    "stas00-h100-query-vbios-excerpt.txt": {
        "gpus.0.pci_bus_id": "00000000:04:00.0", "gpus.1.pci_bus_id": "00000000:8B:00.0",
        "gpus.0.vbios": "96.00.89.00.01", "gpus.1.vbios": "96.00.89.00.01", "gpus.1.name": "NVIDIA H100 80GB HBM3"},
}


@pytest.mark.parametrize("name", sorted(CSV))
def test_csv_corpus_facts(corpus: Path, name: str) -> None:
    check_facts(parsed(corpus, f"nvidia-smi-csv/{name}"), CSV[name])


TABLE: dict[str, dict[str, Any]] = {
    "gpud-table-h100x8-550.90.07.txt": {
        "driver_version": "550.90.07", "cuda_version": "12.4", "attached_gpus": 8,
        "timestamp": "Mon Jan 20 10:18:26 2025", "gpus.7.index": 7, "gpus.4.pci_bus_id": "00000000:9B:00.0",
        "gpus.0.persistence_mode": True, "gpus.0.ecc_volatile_uncorrected": 0, "gpus.0.performance_state": "P0",
        "gpus.0.memory_used_mib": 1, "gpus.0.memory_total_mib": 81559, "gpus.0.utilization_gpu_percent": 0,
        "gpus.0.mig_mode": "disabled", "gpus.1.temperature_c": 24, "gpus.5.power_draw_w": 74.0,
        "gpus.0.power_limit_w": 700.0, "gpus.0.processes": []},
    "h100-80gb-hbm3-590.48.01-table-load.txt": {
        "gpus.0.pci_bus_id": "00000000:00:09.0", "gpus.0.ecc_volatile_uncorrected": 0, "gpus.0.temperature_c": 59,
        "gpus.0.power_draw_w": 629.0, "gpus.0.memory_used_mib": 19818, "gpus.0.utilization_gpu_percent": 100,
        "gpus.0.processes.2.name": "./gpu_burn", "gpus.0.processes.2.used_memory_mib": 15690},
    "h100-mig-590.48.01-table-load.txt": {
        "gpus.0.ecc_volatile_uncorrected": None, "gpus.0.ecc_mode": True, "gpus.0.utilization_gpu_percent": None,
        "gpus.0.power_draw_w": 432.0, "gpus.0.memory_used_mib": 11125, "gpus.0.mig_mode": "enabled",
        "gpus.0.mig_devices": 4},
    "h200-590.48.01-table-idle.txt": {
        "gpus.0.name": "NVIDIA H200", "gpus.0.pci_bus_id": "00000000:83:00.0", "gpus.0.temperature_c": 28,
        "gpus.0.power_draw_w": 77.0, "gpus.0.memory_total_mib": 143771, "gpus.0.processes": []},
    "h200-mig-590.48.01-table-load.txt": {
        "gpus.0.ecc_mode": True, "gpus.0.power_draw_w": 295.0, "gpus.0.memory_used_mib": 16959,
        "gpus.0.mig_devices": 5},
    "l40s-595.80-table-load.txt": {
        "gpus.0.persistence_mode": False, "gpus.0.pci_bus_id": "00000000:01:00.0", "gpus.0.temperature_c": 54,
        "gpus.0.power_draw_w": 110.0, "gpus.0.power_limit_w": 350.0, "gpus.0.mig_mode": None,
        "gpus.0.processes.1.used_memory_mib": 681},
    "windows-rtx-2080-super-591.86-table-load.txt": {
        "gpus.0.name": "NVIDIA GeForce RTX 2080 ...", "gpus.0.persistence_mode": None, "gpus.0.fan_speed_percent": 38,
        "gpus.0.temperature_c": 45, "gpus.0.performance_state": "P2", "gpus.0.power_draw_w": 97.0,
        "gpus.0.power_limit_w": 250.0, "gpus.0.memory_used_mib": 1296, "gpus.0.utilization_gpu_percent": 7,
        "gpus.0.ecc_volatile_uncorrected": None, "gpus.0.processes.11.used_memory_mib": None},
}


@pytest.mark.parametrize("name", sorted(TABLE))
def test_table_corpus_facts(corpus: Path, name: str) -> None:
    check_facts(parsed(corpus, f"nvidia-smi-text/{name}"), TABLE[name])


def test_table_temperatures_and_powers_of_eight_gpus(corpus: Path) -> None:
    gpus = parsed(corpus, "nvidia-smi-text/gpud-table-h100x8-550.90.07.txt")["gpus"]
    assert [g["temperature_c"] for g in gpus] == [27, 24, 23, 23, 27, 22, 24, 23]
    assert [g["power_draw_w"] for g in gpus] == [72, 74, 70, 72, 73, 74, 73, 72]


def test_nvlink_listings(corpus: Path) -> None:
    p4de = parsed(corpus, "nvidia-smi-text/awsome-p4de-a100-nvlink-s-gpu0.txt")["gpus"][0]
    assert (p4de["name"], p4de["uuid"]) == ("NVIDIA A100-SXM4-80GB", "GPU-370ec676-e407-3115-836a-8ebcb3c4f62a")
    links = [(x["link"], x["speed_gb_per_s"], x["active"]) for x in p4de["links"]]
    assert links == [(i, 25.0, True) for i in range(12)]
    h100 = parsed(corpus, "nvidia-smi-text/h100-80gb-hbm3-590.48.01-nvlink-s.txt")["gpus"][0]["links"]
    assert len(h100) == 18 and {x["speed_gb_per_s"] for x in h100} == {26.562}
    eight = parsed(corpus, "nvidia-smi-text/gpud-a100x8-nvlink-status.txt")["gpus"]
    assert len(eight) == 8 and sum(len(g["links"]) for g in eight) == 96
    errors = parsed(corpus, "nvidia-smi-text/stas00-h100-nvlink-e-excerpt.txt")
    assert errors["elided"] is True
    assert [x["link"] for x in errors["gpus"][0]["links"]] == [0, 1, 17]
    assert errors["gpus"][0]["links"][2]["errors"] == {"replay": 0, "recovery": 0, "crc": 0}
    status = parsed(corpus, "nvidia-smi-text/stas00-h100-nvlink-status-excerpt.txt")
    assert status["elided"] and [x["link"] for x in status["gpus"][0]["links"]] == [0, 17]


def test_inactive_link_and_empty_nvlink_output() -> None:
    record = parse_nvlink("GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)\n\t Link 0: 26.562 GB/s\n\t Link 1: <inactive>\n")
    assert [(x.link, x.active) for x in record.gpus[0].links] == [(0, True), (1, False)]
    empty = (CAPTURED / "nvidia-smi_nvlink_s.txt").read_text()  # the H200 (no NVLink) printed nothing
    assert parse_nvlink(empty).gpus == []


def test_list_dmon_and_topo(corpus: Path) -> None:
    listing = parsed(corpus, "nvidia-smi-text/h100-mig-590.48.01-L.txt")["gpus"][0]
    assert [(m["profile"], m["index"]) for m in listing["mig_devices"]] == [
        ("3g.40gb", 0), ("2g.20gb", 1), ("1g.10gb", 2), ("1g.10gb", 3)]
    dmon = parsed(corpus, "nvidia-smi-text/h100-80gb-hbm3-590.48.01-dmon-load.txt")
    assert dmon["columns"][:4] == ["gpu", "pwr", "gtemp", "mtemp"] and len(dmon["samples"]) == 5
    assert [s["pwr"] for s in dmon["samples"]] == [631, 634, 633, 634, 636]
    assert {s["sm"] for s in dmon["samples"]} == {100} and {s["pclk"] for s in dmon["samples"]} == {1980}
    topo = parsed(corpus, "nvidia-smi-text/h100-80gb-hbm3-590.48.01-topo-m.txt")["devices"][0]
    assert topo == {"name": "GPU0", "links": {"GPU0": "X"}, "cpu_affinity": "0-19", "numa_affinity": "0",
                    "gpu_numa_id": "N/A"}


def test_captured_h200_outputs_agree_across_formats() -> None:
    """Our own H200 capture, in four formats: the same GPU facts from each."""
    base = CAPTURED
    xml = xml_log.parse((base / "nvidia-smi_q_x.txt").read_text()).gpus[0]
    q = query_text.parse((base / "nvidia-smi_q.txt").read_text()).gpus[0]
    csv = query_csv.parse((base / "nvidia-smi_query-gpu.csv").read_text()).gpus[0]
    tab = table.parse((base / "nvidia-smi_.txt").read_text()).gpus[0]
    for field in ("name", "pci_bus_id", "memory_total_mib", "temperature_c", "pcie_width_max"):
        values = {getattr(g, field) for g in (xml, q, csv, tab) if getattr(g, field) is not None}
        assert len(values) == 1, (field, values)
    assert xml.uuid == q.uuid == csv.uuid == "GPU-86f25c50-ec49-958f-cd74-c318937a339c"


@pytest.mark.parametrize(("parse", "text", "where"), [
    (xml_log.parse, "<nvidia_smi_log><gpu id='1'></nvidia_smi_log>", "malformed XML"),
    (xml_log.parse, '<!DOCTYPE x [<!ENTITY a "aaaa">]><nvidia_smi_log/>', "entity"),
    (xml_log.parse, "<other/>", "no <nvidia_smi_log>"),
    (query_text.parse, "just some words\n", "no GPU section"),
    (query_csv.parse, "1, 2, 3\n", "not a --query-gpu header"),
    (query_csv.parse, "name, pci.bus_id\nA, 1, extra\n", "fields where the header names 2"),
    (table.parse, "+----+\n| hello |\n", "NVIDIA-SMI"),
])
def test_malformed_input_is_a_parse_error(parse: Any, text: str, where: str) -> None:
    with pytest.raises(ParseError, match=where):
        parse(text)
