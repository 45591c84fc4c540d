"""``nvidia-smi pmon``: the processes on each GPU, sampled once a second.

Two ``#`` header lines name the columns and their units (``# gpu  pid  type  sm  mem  enc  dec
command`` / ``# Idx  #  C/G  %  %  %  %  name``); the columns depend on ``-s`` (``u``:
utilization, ``m``: ``fb`` memory in MB) and the driver (``jpg``/``ofa``, ``ccpm`` in newer
ones), and ``-o DT`` puts ``Date``/``Time`` first, so rows are read by the header's names, never
by position. Every GPU gets a row each interval; one with no process prints ``-`` in every
column. ``type`` is ``C`` (compute), ``G`` (graphics), ``C+G``, or ``M``/``M+C`` under MPS.
The command name, last, is what is left of the row.

The record is the one every nvidia-smi reader fills (:class:`~gpu_preflight.records.smi.NvidiaSmiRecord`):
the GPUs sampled, each with the processes seen on it (once each, by pid), so the node checks'
own process rule judges them; nothing else about the GPUs is shown. Samples elided from a paste
(``...``, ``[snip]``) may have shown a process on any GPU, so such a record is incomplete: a GPU
its remaining rows show idle is not known to be idle.
"""

from __future__ import annotations

import re

from ..detect import parser
from ..errors import ParseError
from ..text import is_elision, is_noise, prepare, to_int
from . import NvidiaSmiRecord, SmiGpu, SmiProcess

KIND = "nvidia-smi-pmon"
_HEADER = re.compile(r"^#\s*(?:date\s+time\s+)?gpu\s+pid\s+type\b", re.IGNORECASE)


def sniff(text: str) -> int:
    return 85 if any(_HEADER.match(line.strip()) for line in text.splitlines()[:50]) else 0


@parser(KIND, sniff=sniff, title="nvidia-smi pmon")
def parse(text: str) -> NvidiaSmiRecord:
    """Parse ``nvidia-smi pmon`` output (repeated header blocks are allowed)."""
    columns: list[str] = []
    gpus: dict[int, SmiGpu] = {}
    elided = 0
    for number, raw in enumerate(prepare(KIND, text), 1):
        line = raw.strip()
        if line and is_elision(raw):
            elided += 1
            continue
        if not line or is_noise(raw):
            continue
        if line.startswith("#"):
            if _HEADER.match(line):
                columns = [t.lower() for t in line.lstrip("#").split()]
            continue
        if not columns:
            raise ParseError(KIND, "sample before the '# gpu pid type ...' header", number)
        values = line.split()
        if len(values) < len(columns):
            raise ParseError(KIND, f"{len(values)} values for {len(columns)} columns", number)
        row = dict(zip(columns[:-1], values, strict=False))
        row[columns[-1]] = " ".join(values[len(columns) - 1:])
        index = to_int(row.get("gpu"))
        if index is None:
            raise ParseError(KIND, f"GPU index {row.get('gpu')!r} is not a number", number)
        gpu = gpus.setdefault(index, SmiGpu(index=index, processes=[]))
        pid = to_int(row.get("pid"))
        if pid is not None and gpu.processes is not None and all(p.pid != pid for p in gpu.processes):
            command = row.get("command")
            gpu.processes.append(SmiProcess(pid=pid, name=command if command not in (None, "-") else None,
                                            type=row.get("type"), used_memory_mib=to_int(row.get("fb"))))
    if not columns:
        raise ParseError(KIND, "no '# gpu pid type ...' header line")
    if not gpus:
        raise ParseError(KIND, "a header and no sample")
    return NvidiaSmiRecord(format="pmon", gpus=[gpus[i] for i in sorted(gpus)],
                           incomplete=[f"{elided} elision(s) in the samples: rows cut out may show processes"]
                           if elided else [])
