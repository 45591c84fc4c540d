"""What both ``dcgmi diag`` readers share: status words, severity order, GPU ids in a message.

Kept apart from the package's ``__init__`` so the readers (``json_report``, ``table``) import
it without importing the module that dispatches to them.
"""

from __future__ import annotations

import re

from ...records.dcgm import DcgmDiagRecord

KIND = "dcgmi-diag"
STATUSES = ("pass", "skip", "warn", "fail")  # ascending severity
_ALIASES = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "error": "fail",
            "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip", "not run": "skip",
            "notrun": "skip", "n/a": "skip"}
_GPU_IN_TEXT = re.compile(r"\bGPU\s*(\d+)\b")
# The diagnostic's refusal to run on a GPU split into MIG instances (NVVS, DCGM 2.x-4.x: "GPU 2's MIG
# configuration is incompatible with the diagnostic because it prevents access to the entire GPU."),
# printed by `dcgmi diag` and by nvvs run by hand: nothing was tested, and DCGM says the GPU is in MIG mode.
MIG_REFUSAL = re.compile(r"\bGPU (?P<id>\d+)'s MIG configuration is incompatible with the diagnostic\b[^\n]*")


def normalize_status(text: str) -> str | None:
    """DCGM's status words (``PASS``, ``Pass``, ``SKIPPED``, ``Not Run``) → ours; ``None`` if not one."""
    return _ALIASES.get(text.strip().lower())


def worst_status(statuses: list[str]) -> str:
    """The most severe of ``statuses`` (``pass`` when empty)."""
    return max(statuses, key=STATUSES.index, default="pass")


def gpu_ids_in(text: str) -> list[int]:
    """GPU ids a DCGM message names (``"GPU 1 Max power ..."`` → ``[1]``), in order, once each."""
    return list(dict.fromkeys(int(m.group(1)) for m in _GPU_IN_TEXT.finditer(text)))


def overall_of(record: DcgmDiagRecord) -> str:
    if record.errors and not record.tests:
        return "error"
    statuses = [t.status for t in record.tests]
    if statuses and all(s == "skip" for s in statuses):
        return "skip"
    return worst_status([s for s in statuses if s != "skip"])
