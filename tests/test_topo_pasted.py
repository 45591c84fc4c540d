"""``nvidia-smi topo -m`` as pasted into issue threads: tabs turned into runs of spaces.

The matrix below is quoted from NVIDIA/nccl#1617 (tests/fixtures/field/nvidia-smi, provenance in its
SOURCES.toml): 4 H100 joined by NV6, one NIC per GPU. Before the parser split space-separated rows it
found "no device rows under the header" and the paste was not recognised at all.
"""

from __future__ import annotations

from gpu_preflight.parsers.nvidia_smi.topo import parse

SPACED = """\
        GPU0    GPU1    GPU2    GPU3    NIC0    NIC1    NIC2    NIC3    CPU Affinity    NUMA Affinity   GPU NUMA ID
GPU0     X      NV6     NV6     NV6     PIX     SYS     SYS     SYS     6,14,22,30      3               N/A
GPU1    NV6      X      NV6     NV6     SYS     PIX     SYS     SYS     4,12,20,28      1               N/A
GPU2    NV6     NV6      X      NV6     SYS     SYS     PIX     SYS     7,15,23,31      7               N/A
GPU3    NV6     NV6     NV6      X      SYS     SYS     SYS     PIX     5,13,21,29      5               N/A
NIC0    PIX     SYS     SYS     SYS      X      SYS     SYS     SYS
NIC1    SYS     PIX     SYS     SYS     SYS      X      SYS     SYS
NIC2    SYS     SYS     PIX     SYS     SYS     SYS      X      SYS
NIC3    SYS     SYS     SYS     PIX     SYS     SYS     SYS      X

NIC Legend:

  NIC0: mlx5_0
"""


def test_a_matrix_whose_tabs_became_spaces_is_read_cell_by_cell() -> None:
    record = parse(SPACED)
    assert [d.name for d in record.devices] == ["GPU0", "GPU1", "GPU2", "GPU3", "NIC0", "NIC1", "NIC2", "NIC3"]
    gpu1 = record.devices[1]
    assert gpu1.links == {"GPU0": "NV6", "GPU1": "X", "GPU2": "NV6", "GPU3": "NV6",
                          "NIC0": "SYS", "NIC1": "PIX", "NIC2": "SYS", "NIC3": "SYS"}
    assert (gpu1.cpu_affinity, gpu1.numa_affinity, gpu1.gpu_numa_id) == ("4,12,20,28", "1", "N/A")
    assert record.devices[4].links["GPU0"] == "PIX" and record.devices[4].cpu_affinity is None
    assert record.nic_names == {"NIC0": "mlx5_0"}


def test_the_tab_separated_matrix_reads_as_before() -> None:
    tabbed = "\tGPU0\tGPU1\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\nGPU0\t X \tPHB\t0-63\t0\t\tN/A\n" \
             "GPU1\tPHB\t X \t0-63\t0\t\tN/A\n"
    record = parse(tabbed)
    assert [(d.name, d.links["GPU1"], d.cpu_affinity, d.gpu_numa_id) for d in record.devices] == [
        ("GPU0", "PHB", "0-63", "N/A"), ("GPU1", "X", "0-63", "N/A")]
