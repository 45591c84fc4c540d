"""Rules issue 27's field corpus taught the NVLink listing, retired-pages and ibstat judges (in-repository texts).

* ``nvidia-smi nvlink -s`` prints a message under a GPU instead of its links on newer drivers:
  every link inactive FAILs on a GPU whose NVLinks are on its baseboard (SXM/HGX names) or that
  the profile expects links on, WARNs when the listing shows a lone GPU 0 (a one-GPU VM slice?),
  and SKIPs on a card whose NVLink is an optional bridge; "does not support" and MIG mode SKIP.
* ``--query-retired-pages`` CSV is read (one row per page; ``[N/A]`` rows are no page).
* A retirement table at DCGM's limit (63 retired pages; the driver holds 64) FAILs.
* A RoCE/Ethernet port that is down while most of its adapter model's ports are up is a
  missing rail: FAIL, not the unused-NIC WARN.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from msgspec.structs import replace

from gpu_preflight.checks.gpu_memory import RETIRED_PAGES_FULL
from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

FIELD = Path(__file__).parent / "fixtures" / "field"
A100_INACTIVE = (FIELD / "nvidia-smi" / "azhpc-nvlink-s-a100-all-inactive.txt").read_text()
RTX_NO_BRIDGE = (FIELD / "nvidia-smi" / "exporter-nvlink-s-rtx2080s-595.71.05-no-bridge.txt").read_text()
RETIRED_CSV = (FIELD / "nvidia-smi" / "exporter-csv-retired-pages-h100-590.48.01-idle.csv").read_text()
PAGES_Q = (FIELD / "nvidia-smi" / "azhpc-q-page-retirement-8gpu-table-full.txt").read_text()
# An H100 node's ibstat as gpud's captures show it: eight 400G MT4129 rails and four 100G MT4125
# front-end ports, all up (the layout of ../shared/corpus/infiniband/gpud-ibstat-h100-12ca-roce-all-active.txt,
# written out here rather than copied).
CAS = [("mlx5_0", "MT4129", 400), ("mlx5_1", "MT4125", 100), ("mlx5_10", "MT4129", 400), ("mlx5_11", "MT4129", 400),
       ("mlx5_2", "MT4125", 100), ("mlx5_3", "MT4129", 400), ("mlx5_4", "MT4129", 400), ("mlx5_5", "MT4129", 400),
       ("mlx5_6", "MT4129", 400), ("mlx5_7", "MT4125", 100), ("mlx5_8", "MT4125", 100), ("mlx5_9", "MT4129", 400)]
IBSTAT_UP = "".join(
    f"CA '{name}'\n\tCA type: {kind}\n\tNumber of ports: 1\n\tFirmware version: 28.39.1002\n\tHardware version: 0\n"
    f"\tNode GUID: 0x{i:016x}\n\tSystem image GUID: 0x{i:016x}\n\tPort 1:\n\t\tState: Active\n"
    f"\t\tPhysical state: LinkUp\n\t\tRate: {rate}\n\t\tBase lid: 0\n\t\tLMC: 0\n\t\tSM lid: 0\n"
    f"\t\tCapability mask: 0x00010000\n\t\tPort GUID: 0x{i + 100:016x}\n\t\tLink layer: Ethernet\n"
    for i, (name, kind, rate) in enumerate(CAS, 1))


def findings(text: str, config: Config | None = None, check: str | None = None) -> list[tuple[Status, str]]:
    return [(f.status, f.code) for f in judge_text(text, config or Config(), source="n1")
            if check is None or f.check_id == check]


def passes(text: str, config: Config | None = None) -> bool:
    """Nothing worse than SKIP, and a PASS for the GPU the listing shows (what exit 0 needs)."""
    statuses = [f.status for f in judge_text(text, config or Config(), source="n1")]
    return Status.PASS in statuses and Status.worst(statuses) in (Status.PASS, Status.SKIP)


# --------------------------------------------------------------------------- nvlink -s messages

@pytest.mark.parametrize(("line", "note"), [
    ("NVML: Unable to retrieve NVLink information as all links are inactive", "all_inactive"),
    ("NVML: Unable to retrieve Nvlink information as all links are inActive", "all_inactive"),
    ("Device does not have or support Nvlink", "not_supported"),
    ("Nvlink queries are not supported for Devices in MIG mode", "mig_mode"),
])
def test_each_nvlink_message_is_read_as_the_gpus_note(line: str, note: str) -> None:
    text = f"GPU 3: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n{line}\n"
    assert detect_kind(text) == "nvidia-smi-nvlink"
    assert parse_text(text)[1].gpus[0].nvlink_note == note


def test_a_wrapped_all_inactive_message_is_one_note() -> None:
    text = ("GPU 1: Quadro RTX 5000 (UUID: GPU-2)\nNVML: Unable to retrieve Nvlink information as all\n"
            "        links are inActive\n")
    assert parse_text(text, "nvidia-smi-nvlink")[1].gpus[0].nvlink_note == "all_inactive"


def test_all_inactive_fails_on_an_sxm_part() -> None:
    assert findings(A100_INACTIVE, check="gpu.nvlink") == [(Status.FAIL, "nvlink_down")]


def test_all_inactive_skips_on_a_card_whose_nvlink_is_a_bridge() -> None:
    assert findings(RTX_NO_BRIDGE, check="gpu.nvlink") == [(Status.SKIP, "no_bridge")]
    assert passes(RTX_NO_BRIDGE)


def test_a_profile_that_expects_links_makes_any_gpu_an_nvlink_part() -> None:
    config = Config()
    config = replace(config, gpu=replace(config.gpu, nvlink_expected_links=4))
    text = RTX_NO_BRIDGE.replace("GPU 0:", "GPU 2:")
    assert findings(text, config, check="gpu.nvlink") == [(Status.FAIL, "nvlink_down")]


def test_a_profiles_nvswitch_names_count_as_baseboard_names() -> None:
    config = Config()
    config = replace(config, perf=replace(config.perf, allreduce_nvswitch_gpu_names=["RTX 2080"]))
    assert findings(RTX_NO_BRIDGE.replace("GPU 0:", "GPU 5:"), config, check="gpu.nvlink") == \
        [(Status.FAIL, "nvlink_down")]


def test_a_lone_gpu_0_of_an_sxm_part_warns() -> None:
    text = A100_INACTIVE.replace("GPU 6:", "GPU 0:")
    assert findings(text, check="gpu.nvlink") == [(Status.WARN, "nvlink_inactive_single_gpu")]
    two = text + A100_INACTIVE.replace("GPU 6:", "GPU 1:")
    assert findings(two, check="gpu.nvlink") == [(Status.FAIL, "nvlink_down")] * 2


def test_h100_hbm3_is_the_sxm_part_and_h100_pcie_is_a_card() -> None:
    sxm = A100_INACTIVE.replace("NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3")
    pcie = A100_INACTIVE.replace("NVIDIA A100-SXM4-80GB", "NVIDIA H100 PCIe")
    assert findings(sxm, check="gpu.nvlink") == [(Status.FAIL, "nvlink_down")]
    assert findings(pcie, check="gpu.nvlink") == [(Status.SKIP, "no_bridge")]


def test_not_supported_and_mig_mode_are_not_judged() -> None:
    unsupported = "GPU 0: NVIDIA GeForce RTX 4080 SUPER (UUID: GPU-3)\nDevice does not have or support Nvlink\n"
    mig = "GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-4)\nNvlink queries are not supported for Devices in MIG mode\n"
    assert [s for s, _ in findings(unsupported, check="gpu.nvlink")] == [Status.SKIP]
    assert findings(mig, check="gpu.nvlink") == [(Status.SKIP, "mig_mode")]
    assert passes(unsupported) and passes(mig)


# --------------------------------------------------------------------------- retired pages

def test_query_retired_pages_csv_with_na_rows_is_zero_pages() -> None:
    kind, record = parse_text(RETIRED_CSV)
    assert kind == "nvidia-smi-csv"
    [gpu] = record.gpus
    assert (gpu.retired_pages_sbe, gpu.retired_pages_dbe, gpu.retired_pages_pending) == (0, 0, None)
    [(status, code)] = findings(RETIRED_CSV, check="gpu.memory.retired_pages")
    assert (status, code) == (Status.PASS, "ok")
    summary = next(f.summary for f in judge_text(RETIRED_CSV, Config(), source="n1")
                   if f.check_id == "gpu.memory.retired_pages")
    assert "pending retirement not shown" in summary  # never "none pending": the CSV does not say


def _pages_csv(sbe: int, dbe: int) -> str:
    head = "gpu_bus_id, gpu_uuid, retired_pages.address, retired_pages.timestamp, retired_pages.cause\n"
    rows = [f"00000000:07:00.0, GPU-9, 0x{i:08x}, 2020/01/01, Single Bit ECC" for i in range(sbe)]
    rows += [f"00000000:07:00.0, GPU-9, 0x{i + 4096:08x}, 2020/01/01, Double Bit ECC" for i in range(dbe)]
    rows += ["00000000:08:00.0, GPU-8, [N/A], [N/A], Single Bit ECC"]
    return head + "\n".join(rows) + "\n"


def test_query_retired_pages_rows_are_counted_per_gpu_and_cause() -> None:
    record = parse_text(_pages_csv(3, 2))[1]
    assert [(g.pci_bus_id, g.retired_pages_sbe, g.retired_pages_dbe) for g in record.gpus] == \
        [("00000000:07:00.0", 3, 2), ("00000000:08:00.0", 0, 0)]


@pytest.mark.parametrize(("sbe", "dbe", "status", "code"), [
    (RETIRED_PAGES_FULL - 1, 1, Status.FAIL, "retired_pages_full"),  # 63: DCGM's limit
    (RETIRED_PAGES_FULL - 2, 1, Status.WARN, "retired_pages_high"),  # 62: below it, above the site's 10
])
def test_a_full_retirement_table_fails(sbe: int, dbe: int, status: Status, code: str) -> None:
    got = findings(_pages_csv(sbe, dbe), check="gpu.memory.retired_pages")
    assert got[0] == (status, code)


def test_the_azure_table_full_report_fails_on_the_pages() -> None:
    got = findings(PAGES_Q, check="gpu.memory.retired_pages")
    assert got.count((Status.FAIL, "retired_pages_full")) == 4  # 65, 63, 65, 64 pages


# --------------------------------------------------------------------------- ibstat rails

def test_a_down_port_among_active_siblings_is_a_missing_rail() -> None:
    down = _drop_active(IBSTAT_UP, {"mlx5_3", "mlx5_9"})  # 2 of the 8 400G rails
    got = findings(down, check="ib.ports")
    assert got == [(Status.FAIL, "port_down")] * 2
    assert all("a rail is missing" in f.summary for f in judge_text(down, Config(), source="n1")
               if f.check_id == "ib.ports")


def _drop_active(text: str, devices: set[str]) -> str:
    """``text`` with the named CAs' ports shown Down/Disabled."""
    out, current = [], ""
    for line in text.splitlines(keepends=True):
        if line.startswith("CA '"):
            current = line.split("'")[1]
        if current in devices:
            line = line.replace("State: Active", "State: Down").replace("Physical state: LinkUp",
                                                                         "Physical state: Disabled")
        out.append(line)
    return "".join(out)


def test_half_of_a_models_ports_down_is_not_a_rail_set() -> None:
    # the four MT4125 ports (two dual-port front-end cards): two cabled, two not -> the unused-NIC WARN
    text = _drop_active(IBSTAT_UP, {"mlx5_2", "mlx5_8"})
    assert findings(text, check="ib.ports") == [(Status.WARN, "port_down")] * 2


def test_one_of_two_ports_down_is_not_a_rail_set() -> None:
    two = IBSTAT_UP.split("CA 'mlx5_10'")[0]  # mlx5_0 (MT4129) and mlx5_1 (MT4125)
    text = _drop_active(two.replace("MT4125", "MT4129"), {"mlx5_1"})
    assert findings(text, check="ib.ports") == [(Status.WARN, "port_down")]
