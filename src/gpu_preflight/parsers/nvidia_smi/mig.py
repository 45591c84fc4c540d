"""``nvidia-smi mig``: the MIG subcommand's listings and answers, read for what they say of MIG mode.

``nvidia-smi mig -lgi``/``-lgip``/``-lci``/``-lcip`` print boxed tables (``| GPU instances:``,
``| GPU instance profiles:``, ``| Compute instances:``, ``| Compute instance profiles:``) whose rows
start with the GPU's index (``|   0  MIG 1g.10gb   19   9   2:1   |``; the compute tables put the GPU
instance id between them); ``-cgi``/``-cci``/``-dgi``/``-dci`` answer ``Successfully created GPU
instance ID  1 on GPU  0 using profile ...`` or ``Unable to create a GPU instance on GPU  0 ...: <why>``;
``-lgipp`` one line per GPU instance profile, its possible placements (``GPU  0 Profile ID 19 Placements:
{0,1,2,3,4,5,6}:1``, ``GPU  0 Profile ID  0 Placement : {0}:8``).
nvidia-smi has such answers only for a GPU in MIG mode: on one without it, it prints ``No
MIG-enabled devices found.`` instead. So every GPU a listing or answer names is a GPU whose MIG mode
is enabled, and that is what the record states (``SmiGpu.mig_mode``), to be judged by
``gpu.inventory.mig`` like the ``MIG M.`` column of the table. What the text says of no GPU (``No
MIG-enabled devices found.``, ``No GPU instances found: Not Found``, ``Failed to display compute
instances: Insufficient Permissions``) names no GPU to judge: it is kept in ``stated``, not judged.
"""

from __future__ import annotations

import re

from ...records.smi import NvidiaSmiRecord, SmiGpu
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare

KIND = "nvidia-smi-mig"

_TITLE = re.compile(r"^\|\s*(?P<title>GPU instances|GPU instance profiles|Compute instances|Compute instance profiles):"
                    r"\s*\|$")
_ROW = re.compile(r"^\|\s*(?P<gpu>\d+)\s+(?:\d+\s+)?MIG\s+\S+")  # a listing's row: GPU index, [GI id,] MIG name
_BOX = re.compile(r"^(?:\+[-=+]+\+|\|[=+]+\||\|[^|]*\|)$")  # borders, header rows and continuation rows
_ON_GPU = re.compile(r"^(?:Successfully (?:created|destroyed) (?:GPU|compute) instance ID\s+\d+ (?:on|from) GPU\s+"
                     r"|Unable to (?:create|destroy) an? (?:GPU|compute) instance on GPU\s+)(?P<gpu>\d+)\b",
                     re.IGNORECASE)
_PLACEMENT = re.compile(r"^GPU\s+(?P<gpu>\d+)\s+Profile ID\s+\d+\s+Placements?\s*:\s*\{[\d,\s]*\}:\d+$")  # -lgipp
_NO_GPU = re.compile(r"^(?:No MIG-enabled devices found\.?|No (?:GPU|compute) instances? (?:profiles )?found\b.*"
                     r"|Failed to (?:display|create|destroy) (?:GPU|compute) instances?(?: profiles)?\s*:.*)$",
                     re.IGNORECASE)


def sniff(text: str) -> int:
    """A MIG table's title row, one of the subcommand's answers at the start of a line, or (a pasted
    excerpt) instance rows inside the box borders and nothing else."""
    lines = [line.strip() for line in text.splitlines()[:400]]
    if any(_TITLE.match(line) for line in lines):
        return 85
    if any(_ON_GPU.match(line) or _NO_GPU.match(line) or _PLACEMENT.match(line) for line in lines):
        return 80
    # an excerpt of a listing without its title: instance rows inside the box and nothing else
    boxed = [line for line in lines if line and not is_noise(line)]
    rows = sum(1 for line in boxed if _ROW.match(line))
    return 70 if rows and all(_ROW.match(line) or _BOX.match(line) for line in boxed) else 0


@parser(KIND, sniff=sniff, title="nvidia-smi mig -lgi / -lgip / -lgipp / -lci / -lcip and -cgi/-cci answers")
def parse(text: str) -> NvidiaSmiRecord:
    """The GPUs the text shows in MIG mode (by index, in order), and what it says of none."""
    gpus: dict[int, SmiGpu] = {}
    stated: list[str] = []
    titled = False
    for number, raw in enumerate(prepare(KIND, text), 1):
        line = raw.strip()
        if not line or is_noise(raw):
            continue
        if _TITLE.match(line):
            titled = True
        elif (m := _ROW.match(line)) or (m := _ON_GPU.match(line)) or (m := _PLACEMENT.match(line)):
            index = int(m.group("gpu"))
            gpus.setdefault(index, SmiGpu(index=index, mig_mode="enabled"))
        elif _NO_GPU.match(line):
            stated.append(line)
        elif not _BOX.match(line):
            raise ParseError(KIND, f"unexpected line {line[:60]!r}", number)
    if not gpus and not stated and not titled:
        raise ParseError(KIND, "no MIG listing or answer")
    listed = [gpus[i] for i in sorted(gpus)]
    return NvidiaSmiRecord(format="mig", gpus=listed, fragment=len(listed), stated=stated)
