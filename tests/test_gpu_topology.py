"""``nvidia-smi topo -m`` judged on what it states (issue 27; checks/gpu_topology.py, nvidia_smi.topo).

A boundary table over the pure rule: regular NVLink (NVSwitch clique, DGX-1 hybrid cube mesh,
bridged pairs), irregular NVLink (a pair down, a GPU cut off, a pair with fewer links, a missing
bridge), no NVLink, unreadable matrices (asymmetric, unknown token, missing cell, shifted self
cell), the profile's NVLinks per GPU met by the largest pair, met by the sum, one short of either,
and the configured GPU count. Then the real command (``judge FILE``) on small matrices, tab-separated
as nvidia-smi prints them and space-pasted as issue threads show them.
"""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.checks.gpu_topology import TopologyMatrix, judge_topology, read_link
from gpu_preflight.cli.main import main
from gpu_preflight.model import Status

PASS, WARN, FAIL, ERROR, SKIP = Status.PASS, Status.WARN, Status.FAIL, Status.ERROR, Status.SKIP


def grid(text: str, *, links: int | None = None, gpus: int | None = None, nics: int = 0) -> TopologyMatrix:
    """A matrix from rows of cells, one row per line (GPU rows first, then ``nics`` NIC rows), each row
    listing its cells in the column order GPU0.., NIC0.. as nvidia-smi prints them."""
    rows = [line.split() for line in text.strip().splitlines()]
    names = [f"GPU{i}" for i in range(len(rows) - nics)] + [f"NIC{i}" for i in range(nics)]
    cells = {name: dict(zip(names, row, strict=True)) for name, row in zip(names, rows, strict=True)}
    return TopologyMatrix(gpus=tuple(n for n in names if n.startswith("GPU")), cells=cells,
                          nics=tuple(n for n in names if n.startswith("NIC")), expected_links=links, expected_gpus=gpus)


def cut(text: str, shown: int, *, gpus: int | None = None, nics: int = 0) -> TopologyMatrix:
    """``grid(text)`` pasted only down to its row ``shown - 1``: every column, the first ``shown`` rows."""
    whole = grid(text, nics=nics)
    rows = (*whole.gpus, *whole.nics)[:shown]
    return TopologyMatrix(gpus=tuple(r for r in rows if r.startswith("GPU")), cells={r: whole.cells[r] for r in rows},
                          nics=tuple(r for r in rows if r.startswith("NIC")), expected_gpus=gpus)


def clique(n: int, token: str = "NV18", odd: dict[tuple[int, int], str] | None = None) -> str:
    """n GPUs, every pair ``token`` except the pairs in ``odd`` (both cells set)."""
    odd = odd or {}
    cell = {**{(a, b): t for (a, b), t in odd.items()}, **{(b, a): t for (a, b), t in odd.items()}}
    return "\n".join(" ".join("X" if a == b else cell.get((a, b), token) for b in range(n)) for a in range(n))


DGX1V = """
X   NV1 NV1 NV2 NV2 SYS SYS SYS
NV1 X   NV2 NV1 SYS NV2 SYS SYS
NV1 NV2 X   NV2 SYS SYS NV1 SYS
NV2 NV1 NV2 X   SYS SYS SYS NV1
NV2 SYS SYS SYS X   NV1 NV1 NV2
SYS NV2 SYS SYS NV1 X   NV2 NV1
SYS SYS NV1 SYS NV1 NV2 X   NV2
SYS SYS SYS NV1 NV2 NV1 NV2 X
"""
"""The DGX-1 (V100) hybrid cube mesh: every GPU two peers over NV2, two over NV1, three over PCIe."""
PAIRS = """
X   NV4 PHB PHB
NV4 X   PHB PHB
PHB PHB X   NV4
PHB PHB NV4 X
"""
ONE_BRIDGE = """
X   NV4 PHB PHB
NV4 X   PHB PHB
PHB PHB X   PHB
PHB PHB PHB X
"""
"""Two pairs of cards, the second pair's bridge missing: the pair with NVLink is taken as the pattern."""
H100_NV6 = clique(4, "NV6")
PCIE4 = """
X    PIX  NODE SYS
PIX  X    NODE SYS
NODE NODE X    SYS
SYS  SYS  SYS  X
"""
WITH_NICS = """
X    NV18 PIX  SYS
NV18 X    SYS  PIX
PIX  SYS  X    SYS
SYS  PIX  SYS  X
"""

TABLE = [
    # --- no profile expectation: regular NVLink passes, saying what it is
    ("clique", grid(clique(8)), [(PASS, "nvlink_regular")], "8 GPUs, each with NVLink to 7 peers (NV18)"),
    ("hybrid cube mesh", grid(DGX1V), [(PASS, "nvlink_regular")],
     "8 GPUs, each with NVLink to 4 peers (NV2 x2, NV1 x2), the others over PCIe (farthest path SYS)"),
    ("bridged pairs", grid(PAIRS), [(PASS, "nvlink_regular")], "4 GPUs in 2 NVLink-bridged pairs (NV4)"),
    ("one bridged pair", grid("X NV12\nNV12 X"), [(PASS, "nvlink_regular")], "2 GPUs joined by NVLink (NV12)"),
    ("no NVLink", grid(PCIE4), [(PASS, "no_nvlink")],
     "4 GPUs, no NVLink: peers over PCIe, farthest path SYS (across CPU sockets)"),
    ("legacy SOC is SYS", grid("X SOC\nSOC X"), [(PASS, "no_nvlink")], "farthest path SYS"),
    ("NICs stated, not judged", grid(WITH_NICS, nics=2), [(PASS, "nvlink_regular")],
     "2 GPUs joined by NVLink (NV18); 2 NICs, nearest GPU path PIX"),
    # --- irregular NVLink warns, naming the GPUs and pairs
    ("a pair down in a clique", grid(clique(8, odd={(3, 5): "SYS"})), [(WARN, "nvlink_irregular")],
     "GPU3 reaches GPU5 over SYS while every other pair uses NV18: NVLinks down?"),
    ("a pair short of links", grid(clique(4, odd={(0, 1): "NV12"})), [(WARN, "nvlink_irregular")],
     "GPU0 reaches GPU1 over NV12 while every other pair uses NV18"),
    ("a GPU cut off", grid(clique(4, odd={(2, 0): "SYS", (2, 1): "SYS", (2, 3): "SYS"})),
     [(WARN, "nvlink_irregular")],
     "GPU2 has no NVLink while the other 3 GPU(s) each have NVLink to 2 peers (NV18)"),
    ("a missing bridge", grid(ONE_BRIDGE), [(WARN, "nvlink_irregular")],
     "GPU2 has no NVLink; GPU3 has no NVLink while the other 2 GPU(s) each have NVLink to 1 peer (NV4) "
     "(GPU2-GPU3 over PHB)"),
    # --- a matrix that cannot be read is ERROR, naming the cell or pair
    ("asymmetric", grid(clique(4, odd={(0, 3): "NV12"}).replace("NV12 NV18 NV18 X", "SYS NV18 NV18 X")),
     [(ERROR, "asymmetric")], "GPU0->GPU3 reads NV12 but GPU3->GPU0 reads SYS"),
    ("unknown token", grid("X NVX\nNVX X"), [(ERROR, "cell_unreadable")], "cell GPU0->GPU1 reads 'NVX'"),
    ("NV0 is no link count", grid("X NV0\nNV0 X"), [(ERROR, "cell_unreadable")], "reads 'NV0'"),
    ("shifted columns", grid("NV4 X\nX NV4"), [(ERROR, "cell_unreadable")], "GPU0's own cell reads 'NV4'"),
    ("missing cell", TopologyMatrix(gpus=("GPU0", "GPU1"), cells={"GPU0": {"GPU0": "X", "GPU1": "PHB"},
                                                                  "GPU1": {"GPU1": "X"}}),
     [(ERROR, "cell_missing")], "no GPU1->GPU0 cell"),
    ("no GPU row", TopologyMatrix(gpus=(), cells={}), [(ERROR, "no_gpus")], "no GPU row"),
    ("cut after GPU3 of 8", cut(clique(8), 4), [(ERROR, "matrix_cut")],
     "names 8 GPUs in its columns but shows rows for 4 (GPU4, GPU5, GPU6, GPU7 not shown)"),
    ("cut one row short, 8 GPUs expected", cut(clique(8), 7, gpus=8), [(ERROR, "matrix_cut")],
     "shows rows for 7 (GPU7 not shown)"),  # not gpus_missing: the matrix names all 8
    ("cut before its NIC rows only", cut("X NV4 PIX\nNV4 X SYS\nPIX SYS X", 2, nics=1), [(PASS, "nvlink_regular")],
     "2 GPUs"),  # NIC rows are stated, not judged
    ("one GPU", grid("X"), [(SKIP, "single_gpu")], "1 GPU (GPU0), no GPU pair"),
    # --- the profile's NVLinks per GPU (L): met by the largest pair or by the sum, else FAIL
    ("L met by the largest pair", grid(clique(8), links=18), [(PASS, "nvlink_regular")],
     "each meets the profile's 18 NVLinks"),
    ("L one above the largest pair", grid("X NV12\nNV12 X", links=13), [(FAIL, "nvlink_down")],
     "2 of 2 GPUs short of the profile's 13 NVLinks per GPU (GPU0: NVLink to 1 peer (NV12); GPU1:"),
    ("L at the largest pair", grid("X NV12\nNV12 X", links=12), [(PASS, "nvlink_regular")], "meets"),
    ("L met by the sum", grid(H100_NV6, links=18), [(PASS, "nvlink_regular")], "each meets the profile's 18"),
    ("L one above the sum", grid(H100_NV6, links=19), [(FAIL, "nvlink_down")],
     "GPU0: NVLink to 3 peers (NV6), 18 in all"),
    ("L on bridged pairs", grid(PAIRS, links=18), [(FAIL, "nvlink_down")], "4 of 4 GPUs short"),
    ("L with no NVLink", grid(PCIE4, links=18), [(FAIL, "nvlink_down")], "GPU3: no NVLink"),
    ("L on a clique with a GPU cut off", grid(clique(4, odd={(2, 0): "SYS", (2, 1): "SYS", (2, 3): "SYS"}), links=18),
     [(FAIL, "nvlink_down")], "1 of 4 GPUs short of the profile's 18 NVLinks per GPU (GPU2: no NVLink)"),
    ("L met by every GPU, a pair down", grid(clique(8, odd={(3, 5): "SYS"}), links=18), [(WARN, "nvlink_irregular")],
     "GPU3 reaches GPU5 over SYS"),
    ("L met by the sum, a GPU's links down behind NVSwitch",
     grid(clique(4, odd={(2, 0): "NV12", (2, 1): "NV12", (2, 3): "NV12"}), links=18), [(WARN, "nvlink_irregular")],
     "GPU2 has NVLink to 3 peers (NV12) while the other 3 GPU(s) each have NVLink to 3 peers (NV18 x2, NV12 x1)"),
    ("L = 0: none expected", grid(PCIE4, links=0), [(PASS, "no_nvlink")], "no NVLink"),
    ("L on one GPU", grid("X", links=18), [(SKIP, "single_gpu")], "not judged"),
    # --- the configured GPU count, as gpu.inventory.count judges it
    ("one GPU short of the count", grid(clique(4), gpus=5), [(FAIL, "gpus_missing"), (PASS, "nvlink_regular")],
     "shows 4 GPU(s), expected 5"),
    ("the count met", grid(clique(4), gpus=4), [(PASS, "gpu_count"), (PASS, "nvlink_regular")],
     "4 GPU(s), as expected"),
    ("one GPU over the count", grid(clique(4), gpus=3), [(WARN, "gpus_extra"), (PASS, "nvlink_regular")],
     "shows 4 GPUs, expected 3"),
    ("one GPU, count met", grid("X", gpus=1), [(PASS, "gpu_count"), (SKIP, "single_gpu")], "1 GPU(s), as expected"),
]


@pytest.mark.parametrize(("matrix", "outcome", "said"), [case[1:] for case in TABLE], ids=[case[0] for case in TABLE])
def test_the_rule_at_its_boundaries(matrix: TopologyMatrix, outcome: list[tuple[Status, str]], said: str) -> None:
    verdicts = judge_topology(matrix)
    assert [(v.status, v.code) for v in verdicts] == outcome
    assert any(said in v.message for v in verdicts), [v.message for v in verdicts]


def test_the_legend_tokens_are_read() -> None:
    """Every token nvidia-smi's legends print, old and new: NV#, the PCIe paths, SOC read as SYS."""
    assert [read_link(t) and (read_link(t).nvlinks, read_link(t).token)  # type: ignore[union-attr]
            for t in ("NV1", "NV18", "PIX", "PSB", "PXB", "PHB", "NODE", "SYS", "SOC")] == [
        (1, "NV1"), (18, "NV18"), (0, "PIX"), (0, "PSB"), (0, "PXB"), (0, "PHB"), (0, "NODE"), (0, "SYS"), (0, "SYS")]
    assert [read_link(t) for t in ("X", "NV", "NV0", "N/A", "nv4", "")] == [None] * 6


def test_an_irregular_matrix_names_the_odd_gpus_and_the_weak_pairs() -> None:
    """Two pairs down in a clique: the four GPUs and exactly the two pairs, in details as in the message."""
    (verdict,) = judge_topology(grid(clique(8, odd={(1, 2): "SYS", (3, 5): "NODE"})))
    assert verdict.details["odd"] == ["GPU1", "GPU2", "GPU3", "GPU5"]
    assert verdict.details["weak_pairs"] == ["GPU1-GPU2", "GPU3-GPU5"]
    assert "GPU1 reaches GPU2 over SYS; GPU3 reaches GPU5 over NODE while every other pair uses NV18" in verdict.message
    assert verdict.recommendation and "nvidia-smi nvlink -s" in verdict.recommendation


def test_an_old_driver_matrix_with_soc_and_an_mlx_row(tmp_path: Path) -> None:
    """Drivers before R384 print ``SOC`` for ``SYS`` and name NIC rows ``mlx5_0`` (no NIC legend)."""
    text = ("\tGPU0\tGPU1\tmlx5_0\tCPU Affinity\nGPU0\t X \tSOC\tPHB\t0-13\nGPU1\tSOC\t X \tSOC\t14-27\n"
            "mlx5_0\tPHB\tSOC\t X \t\n\nLegend:\n\n  X   = Self\n"
            "  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)\n")
    code, (finding,) = _judge(tmp_path, text)
    assert (code, finding["status"], finding["code"]) == (0, "PASS", "no_nvlink")
    assert finding["summary"] == ("2 GPUs, no NVLink: peers over PCIe, farthest path SYS (across CPU sockets); "
                                  "1 NIC, nearest GPU path PHB")
    assert finding["details"]["affinity"] == {"GPU0": "0-13", "GPU1": "14-27", "mlx5_0": None}


def _judge(tmp_path: Path, text: str, *args: str) -> tuple[int, list[dict[str, Any]]]:
    path = tmp_path / "topo.txt"
    path.write_text(text, encoding="utf-8")
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["judge", str(path), "--format", "json", *args])
    return code, [f for f in json.loads(out.getvalue())["findings"] if f["check_id"] == "nvidia_smi.topo"]


def _printed(rows: str, sep: str) -> str:
    """A matrix as nvidia-smi prints it (``sep`` tab) or as a thread pastes it (runs of spaces)."""
    cells = [line.split() for line in rows.strip().splitlines()]
    names = [f"GPU{i}" for i in range(len(cells))]
    head = sep + sep.join([*names, "CPU Affinity", "NUMA Affinity"])
    body = [sep.join([name, *row, "0-31", "0"]) for name, row in zip(names, cells, strict=True)]
    return "\n".join([head, *body, "", "Legend:", "", "  X    = Self",
                      "  NV#  = Connection traversing a bonded set of # NVLinks", ""])


@pytest.mark.parametrize("sep", ["\t", "    "], ids=["tabs", "spaces"])
@pytest.mark.parametrize(("rows", "args", "code", "status", "said"), [
    (clique(8), (), 0, "PASS", "8 GPUs, each with NVLink to 7 peers (NV18)"),
    (PCIE4, (), 0, "PASS", "4 GPUs, no NVLink"),
    (clique(8, odd={(3, 5): "SYS"}), (), 1, "WARN", "GPU3 reaches GPU5 over SYS"),
    (PAIRS, ("--set", "gpu.nvlink_expected_links=18"), 2, "FAIL", "short of the profile's 18 NVLinks"),
    (clique(4), ("--set", "gpu.expected_count=8"), 2, "FAIL", "shows 4 GPU(s), expected 8"),
    (clique(4, odd={(0, 3): "NV12"}).replace("NV12 NV18 NV18 X", "SYS NV18 NV18 X"), (), 3, "ERROR",
     "GPU0->GPU3 reads NV12 but GPU3->GPU0 reads SYS"),
    ("X", (), 3, "SKIP", "no GPU pair"),
], ids=["clique", "pcie", "pair-down", "profile-short", "count-short", "asymmetric", "one-gpu"])
def test_judge_through_the_command(tmp_path: Path, sep: str, rows: str, args: tuple[str, ...], code: int,
                                   status: str, said: str) -> None:
    """Exit 0 for a healthy matrix alone ([RESULT] SUCCESS), 1 irregular, 2 short of the profile or count,
    3 when it cannot be judged or judges nothing; the same for a paste whose tabs became spaces."""
    exit_code, findings = _judge(tmp_path, _printed(rows, sep), *args)
    assert exit_code == code
    assert status in {f["status"] for f in findings}
    assert any(said in str(f["summary"]) for f in findings), [f["summary"] for f in findings]
