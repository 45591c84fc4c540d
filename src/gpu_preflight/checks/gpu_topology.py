"""The rule for a GPU topology matrix (``nvidia-smi topo -m``): what it states about every GPU pair.

A matrix states how each pair of GPUs is connected: ``NV<n>`` (a bonded set of n NVLinks) or a PCIe
path (``PIX``, ``PXB``, ``PHB``, ``NODE``, ``SYS``; ``SOC`` is the pre-R384 name of ``SYS``, ``PSB``
the on-board switch of DCGM's legend). So it is judged on that, as the field's health checks judge
it (AWS's gpu-cluster-healthcheck step 3, Azure's ``check_hw_topology``):

* a cell that is not one of nvidia-smi's legend tokens, a missing cell, a self cell that is not
  ``X`` or a pair whose two cells disagree is ERROR: the matrix was mis-read or mis-pasted, and a
  cell we cannot read is never a pass. A matrix cut before its last GPU row (its columns name GPUs
  it shows no row for) is such a case: the links between the GPUs not shown are not stated, and
  judging the rows shown as the whole node would count fewer GPUs than it has;
* no profile expectation (``gpu.nvlink_expected_links`` unset or 0): no NVLink at all PASSes (PCIe
  peers, the farthest path named); NVLink that is *regular* (every GPU has the same sorted list of
  NVLink counts to its peers: an NVSwitch clique, a DGX-1 hybrid cube mesh, bridged pairs of cards)
  PASSes; NVLink that is irregular WARNs naming the odd GPUs and pairs: a GPU with fewer NVLink
  peers or fewer links to a peer than the others has links down (or a bridge missing);
* a profile's ``gpu.nvlink_expected_links`` = L: a GPU meets it when its largest pair count is at
  least L (through NVSwitch every pair shows all its links) or the sum of its pair counts is
  (a direct mesh splits them among peers); a GPU that meets neither FAILs. The sum is never below
  the largest pair, so the sum decides; a GPU with links down behind an NVSwitch shows fewer links
  to every peer than the others do, which the regularity rule WARNs, L or not;
* a configured GPU count (``gpu.expected_count``, ``--expect-gpus``) that the matrix falls short of
  FAILs as ``gpu.inventory.count`` does; more GPUs than that WARN, as there;
* NICs and CPU/NUMA affinity are stated, not judged: a VM hides PCIe switches, so a NIC at
  ``NODE``/``SYS`` from every GPU is not a fault by itself.

Pure: the caller hands the matrix's cells as printed, and turns each :class:`TopologyVerdict` into
a finding.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import msgspec

from ..model import Status
from .common import GPUS_EXTRA_ADVICE, GPUS_MISSING_ADVICE

PCIE_PATHS: dict[str, tuple[int, str]] = {
    "PIX": (1, "at most one PCIe bridge"),
    "PSB": (1, "one on-board PCIe switch"),
    "PXB": (2, "several PCIe bridges below the host bridge"),
    "PHB": (3, "through the PCIe host bridge, the CPU"),
    "NODE": (4, "across PCIe host bridges within a NUMA node"),
    "SYS": (5, "across CPU sockets"),
}
"""nvidia-smi's PCIe path tokens, nearest first, with what its legend says each traverses."""
LEGACY_TOKENS = {"SOC": "SYS"}
"""Older drivers' names for a path: ``SOC`` ("the SMP link between CPU sockets") became ``SYS``."""
SELF = "X"
_NVLINK = re.compile(r"NV(\d{1,3})")
NVLINK_ADVICE = ("Run `nvidia-smi nvlink -s` on the GPUs named; reset them (links retrain on a reset); if links stay "
                 "down, drain the node and check the NVSwitch tray / fabric manager logs (on PCIe cards: the "
                 "NVLink bridges).")
"""The advice ``gpu.nvlink`` gives for a down link, for the GPUs a matrix shows short of links."""
PASTE_WHOLE = "Paste the whole `nvidia-smi topo -m` output as printed (tabs kept)."


class Link(msgspec.Struct, frozen=True):
    """One GPU pair's cell, read: its NVLink count (0 over PCIe) and the token as the legend names it."""

    nvlinks: int
    token: str


class TopologyMatrix(msgspec.Struct, frozen=True):
    """What the rule reads: GPU and NIC names in the matrix's order, each row's cells as printed
    (``cells[row][column]``), and the expectations: the profile's NVLinks per GPU, the GPU count."""

    gpus: tuple[str, ...]
    cells: Mapping[str, Mapping[str, str]]
    nics: tuple[str, ...] = ()
    expected_links: int | None = None
    expected_gpus: int | None = None


class TopologyVerdict(msgspec.Struct, frozen=True):
    """One judgement of the matrix: a finding's status, code, message and what backs it."""

    status: Status
    code: str
    message: str
    observed: Any = None
    expected: Any = None
    unit: str | None = None
    recommendation: str | None = None
    details: dict[str, Any] = {}


class _Unreadable(Exception):
    """A cell the rule cannot read (``cell_missing``, ``cell_unreadable``) or a pair whose cells disagree
    (``asymmetric``); its message names the cell or pair."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code


def read_link(token: str) -> Link | None:
    """A GPU pair's cell as a :class:`Link`; None for a token nvidia-smi's legend does not name."""
    token = LEGACY_TOKENS.get(token, token)
    if m := _NVLINK.fullmatch(token):
        return Link(int(m.group(1)), token) if int(m.group(1)) > 0 else None
    return Link(0, token) if token in PCIE_PATHS else None


def judge_topology(matrix: TopologyMatrix) -> list[TopologyVerdict]:
    """The matrix's verdicts: an ERROR alone when it cannot be read, else the GPU count against the
    configured one (when there is one) and the links (see the module's docstring)."""
    if not matrix.gpus:
        return [TopologyVerdict(Status.ERROR, "no_gpus", "the topology matrix has no GPU row: nothing to judge")]
    named = list(dict.fromkeys(c for row in matrix.gpus for c in matrix.cells.get(row, {}) if c.startswith("GPU")))
    if cut := [c for c in named if c not in matrix.gpus]:
        return [TopologyVerdict(Status.ERROR, "matrix_cut",
                                f"the topology matrix names {len(named)} GPUs in its columns but shows rows for "
                                f"{len(matrix.gpus)} ({', '.join(cut)} not shown): it was cut, so their links are "
                                "not stated", observed=len(matrix.gpus), expected=len(named), unit="GPU rows",
                                recommendation=PASTE_WHOLE)]
    try:
        pairs = _pairs(matrix)
    except _Unreadable as exc:
        return [TopologyVerdict(Status.ERROR, exc.code, str(exc), recommendation=PASTE_WHOLE)]
    verdicts = [v for v in (_count(matrix),) if v is not None]
    verdicts.append(_links(matrix, pairs))
    return verdicts


def _pairs(matrix: TopologyMatrix) -> dict[tuple[str, str], Link]:
    """Every GPU pair (in matrix order) read from both of its cells, which must agree; self cells ``X``."""
    def cell(row: str, column: str) -> str:
        token = matrix.cells.get(row, {}).get(column)
        if token is None:
            raise _Unreadable("cell_missing",
                              f"the topology matrix has no {row}->{column} cell: it cannot be judged")
        return token.strip()

    pairs: dict[tuple[str, str], Link] = {}
    for i, a in enumerate(matrix.gpus):
        if (own := cell(a, a)) != SELF:
            raise _Unreadable("cell_unreadable",
                              f"{a}'s own cell reads {own!r}, not {SELF!r}: the matrix's columns are shifted")
        for b in matrix.gpus[i + 1:]:
            there, back = cell(a, b), cell(b, a)
            links = []
            for row, column, token in ((a, b, there), (b, a, back)):
                if (link := read_link(token)) is None:
                    raise _Unreadable("cell_unreadable",
                                      f"cell {row}->{column} reads {token!r}, not a connection nvidia-smi's legend "
                                      "names (X, NV#, PIX, PXB, PHB, NODE, SYS, SOC): the matrix cannot be judged")
                links.append(link)
            if links[0] != links[1]:
                raise _Unreadable("asymmetric", f"{a}->{b} reads {there} but {b}->{a} reads {back}: a matrix whose "
                                  "GPU part is not symmetric cannot be judged")
            pairs[a, b] = links[0]
    return pairs


def _count(matrix: TopologyMatrix) -> TopologyVerdict | None:
    """The GPU count against ``gpu.expected_count``, worded and acted on as ``gpu.inventory.count``."""
    expected, found = matrix.expected_gpus, len(matrix.gpus)
    if expected is None:
        return None
    if found < expected:
        return TopologyVerdict(Status.FAIL, "gpus_missing", f"the topology matrix shows {found} GPU(s), expected "
                               f"{expected}", found, expected, "GPUs", GPUS_MISSING_ADVICE)
    if found > expected:
        return TopologyVerdict(Status.WARN, "gpus_extra", f"the topology matrix shows {found} GPUs, expected "
                               f"{expected}", found, expected, "GPUs", GPUS_EXTRA_ADVICE)
    return TopologyVerdict(Status.PASS, "gpu_count", f"{found} GPU(s), as expected", found, expected, "GPUs")


def _links(matrix: TopologyMatrix, pairs: Mapping[tuple[str, str], Link]) -> TopologyVerdict:
    """The NVLink verdict: against the profile's L when set, else regular/irregular/none."""
    gpus, wanted = matrix.gpus, matrix.expected_links or 0
    counts = {g: sorted((link.nvlinks for (a, b), link in pairs.items() if g in (a, b) and link.nvlinks),
                        reverse=True) for g in gpus}
    details: dict[str, Any] = {
        "gpu_pairs": {f"{a}-{b}": link.token for (a, b), link in pairs.items()},
        "nvlink_peers": {g: {"peers": len(c), "links": sum(c)} for g, c in counts.items()},
        "nic_nearest_gpu_path": _nic_nearest(matrix),
    }
    if wanted:
        details["expected_links"] = wanted
    nics = _nic_summary(details["nic_nearest_gpu_path"])
    if len(gpus) == 1:
        why = f"the profile's {wanted} NVLinks connect GPUs of one node, so they are not judged" if wanted else \
            "nothing between GPUs to judge"
        return TopologyVerdict(Status.SKIP, "single_gpu", f"1 GPU ({gpus[0]}), no GPU pair: {why}{nics}",
                               details=details)
    # met by the largest pair (NVSwitch) or by the sum (direct mesh); the sum is never below the largest pair
    short = [g for g, c in counts.items() if wanted and sum(c) < wanted]
    if short:
        shown = "; ".join(f"{g}: {_shape(counts[g])}" + (f", {sum(counts[g])} in all" if len(counts[g]) > 1 else "")
                          for g in short)
        return TopologyVerdict(Status.FAIL, "nvlink_down", f"{len(short)} of {len(gpus)} GPUs short of the profile's "
                               f"{wanted} NVLinks per GPU ({shown}){nics}",
                               {g: sum(counts[g]) for g in short}, wanted, "links", NVLINK_ADVICE,
                               details | {"short": short})
    far = max((link.token for link in pairs.values() if not link.nvlinks), key=lambda t: PCIE_PATHS[t][0],
              default="")
    if not any(counts.values()):
        return TopologyVerdict(Status.PASS, "no_nvlink", f"{len(gpus)} GPUs, no NVLink: peers over PCIe, farthest "
                               f"path {far} ({PCIE_PATHS[far][1]}){nics}", details=details)
    shapes = {g: tuple(c) for g, c in counts.items()}
    tally = Counter(shapes.values())
    common = max(tally, key=lambda shape: (tally[shape], sum(shape)))
    odd = [g for g in gpus if shapes[g] != common]
    if odd:
        return _irregular(gpus, pairs, shapes, common, odd, details, nics)
    met = f"; each meets the profile's {wanted} NVLinks" if wanted else ""
    return TopologyVerdict(Status.PASS, "nvlink_regular", _regular(gpus, list(common), far) + met + nics,
                           details=details)


def _regular(gpus: Sequence[str], shape: list[int], far: str) -> str:
    """A regular NVLink topology in words: a pair, bridged pairs, or each GPU's peers."""
    if len(gpus) == 2:
        return f"2 GPUs joined by NVLink (NV{shape[0]})"
    if len(shape) == 1:
        return f"{len(gpus)} GPUs in {len(gpus) // 2} NVLink-bridged pairs (NV{shape[0]}), farthest path {far}"
    rest = f", the others over PCIe (farthest path {far})" if far else ""
    return f"{len(gpus)} GPUs, each with {_shape(shape)}{rest}"


def _irregular(gpus: Sequence[str], pairs: Mapping[tuple[str, str], Link], shapes: Mapping[str, tuple[int, ...]],
               common: tuple[int, ...], odd: list[str], details: dict[str, Any], nics: str) -> TopologyVerdict:
    """WARN naming the GPUs whose NVLinks differ from the most common pattern and the pairs between them that
    carry fewer links than that pattern's best: where links are down (or a bridge is missing)."""
    best = common[0] if common else 0
    weak = [(a, b) for (a, b), link in pairs.items() if a in odd and b in odd and link.nvlinks < best]
    others = {link.token for pair, link in pairs.items() if pair not in weak}
    if weak and len(others) == 1:
        said = "; ".join(f"{a} reaches {b} over {pairs[a, b].token}" for a, b in weak) + \
            f" while every other pair uses {others.pop()}"
    else:
        rest = len(gpus) - len(odd)
        said = "; ".join(f"{g} has {_shape(list(shapes[g]))}" for g in odd) + \
            f" while the other {rest} GPU(s) each have {_shape(list(common))}"
        if weak:
            said += " (" + ", ".join(f"{a}-{b} over {pairs[a, b].token}" for a, b in weak) + ")"
    return TopologyVerdict(Status.WARN, "nvlink_irregular", f"{len(gpus)} GPUs, NVLink irregular: {said}: NVLinks "
                           f"down?{nics}", len(odd), unit="GPUs", recommendation=NVLINK_ADVICE,
                           details=details | {"odd": odd, "weak_pairs": [f"{a}-{b}" for a, b in weak],
                                              "common_pattern": [f"NV{n}" for n in common]})


def _shape(counts: list[int]) -> str:
    """A GPU's NVLink counts to its peers in words: "NVLink to 7 peers (NV18)", "... (NV2 x2, NV1 x2)"."""
    if not counts:
        return "no NVLink"
    tally = Counter(counts)
    each = f"NV{counts[0]}" if len(tally) == 1 else ", ".join(f"NV{n} x{k}" for n, k in sorted(tally.items(),
                                                                                            reverse=True))
    return f"NVLink to {len(counts)} peer{'s' if len(counts) > 1 else ''} ({each})"


def _nic_nearest(matrix: TopologyMatrix) -> dict[str, str]:
    """Each NIC's nearest path to any GPU, from its row or the GPUs' column for it; unread cells are left out."""
    nearest: dict[str, str] = {}
    for nic in matrix.nics:
        tokens = [LEGACY_TOKENS.get(t, t) for g in matrix.gpus
                  if (t := (matrix.cells.get(nic, {}).get(g) or matrix.cells.get(g, {}).get(nic) or "").strip())]
        known = [t for t in tokens if t in PCIE_PATHS]
        if known:
            nearest[nic] = min(known, key=lambda t: PCIE_PATHS[t][0])
    return nearest


def _nic_summary(nearest: Mapping[str, str]) -> str:
    """The NICs in the message: stated, not judged ("; 8 NICs, nearest GPU path PIX")."""
    if not nearest:
        return ""
    tally = Counter(nearest.values())
    nics = f"{len(nearest)} NIC{'s' if len(nearest) > 1 else ''}"
    if len(tally) == 1:
        return f"; {nics}, nearest GPU path {next(iter(tally))}"
    paths = ", ".join(f"{t} for {k}" for t, k in sorted(tally.items(), key=lambda tk: PCIE_PATHS[tk[0]][0]))
    return f"; {nics}, nearest GPU path {paths}"
