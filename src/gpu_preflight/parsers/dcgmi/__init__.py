"""``dcgmi diag``: one record for the JSON (``-j``) and the text table of every version.

Prefer ``-j``; the table is read too because that is what people save and paste. Both
readers fill :class:`DcgmDiagRecord`: per test its category, a status
(``pass|fail|warn|skip``), the ids of the GPUs that failed or warned, and DCGM's own
messages verbatim (the warning text is the diagnosis). A run that could not happen at all
(``Error: ... Return: (-30)``, plugins missing) is a record too, with ``overall="error"``
and the tool's error lines: it must read as "could not measure", never as a pass.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..detect import parser
from ..text import is_noise

__all__ = [
    "KIND", "STATUSES", "DcgmDiagRecord", "DcgmTest", "gpu_ids_in", "normalize_status", "overall_of", "worst_status",
]

KIND = "dcgmi-diag"
STATUSES = ("pass", "skip", "warn", "fail")  # ascending severity
_ALIASES = {"pass": "pass", "passed": "pass", "fail": "fail", "failed": "fail", "error": "fail",
            "warn": "warn", "warning": "warn", "skip": "skip", "skipped": "skip", "not run": "skip",
            "notrun": "skip", "n/a": "skip"}
_GPU_IN_TEXT = re.compile(r"\bGPU\s*(\d+)\b")


@dataclass
class DcgmTest:
    """One diagnostic test (``PCIe``, ``Targeted Power``, 4.x ``memory``...) and its outcome.

    ``gpus`` lists the GPU ids that failed or warned; ``gpu_status`` every per-GPU status
    the output gave; ``messages`` the warnings/errors, ``info`` the informational lines.
    """

    category: str | None
    name: str
    status: str
    gpus: list[int] = field(default_factory=list)
    gpu_status: dict[str, str] = field(default_factory=dict)
    messages: list[str] = field(default_factory=list)
    info: list[str] = field(default_factory=list)
    error_ids: list[int] = field(default_factory=list)


@dataclass
class DcgmDiagRecord:
    """A whole diagnostic run: versions, tests and the overall outcome.

    ``overall`` is the worst test status, or ``"error"`` when DCGM reported that the run
    itself failed (``errors`` then holds DCGM's lines and ``return_code`` its code).
    """

    format: str
    dcgm_version: str | None = None
    driver_version: str | None = None
    gpu_device_ids: list[str] = field(default_factory=list)
    tests: list[DcgmTest] = field(default_factory=list)
    overall: str = "pass"
    errors: list[str] = field(default_factory=list)
    return_code: int | None = None
    incomplete: list[str] = field(default_factory=list)


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


def sniff(text: str) -> int:
    if re.search(r'"DCGM (?:GPU )?Diagnostic"\s*:', text):
        return 100
    if re.search(r"^\|\s*Diagnostic\s*\|\s*Result\s*\|", text, re.MULTILINE):
        return 95
    if re.search(r"^\|[-=+ ]*(?:Deployment|Integration|Hardware|Stress|Metadata)[-=+ ]*\|", text, re.MULTILINE):
        return 70
    if re.search(r"DCGM GPU Diagnostic returned an error|Unable to (?:complete|run) diagnostic", text):
        return 90
    return 0


@parser(KIND, sniff=sniff, title="dcgmi diag (-j JSON of DCGM 3.x and 4.x, or the text table)")
def parse(text: str) -> DcgmDiagRecord:
    """Parse ``dcgmi diag`` output: JSON when it holds a JSON document, else the table."""
    body = [line for line in text.splitlines() if line.strip() and not is_noise(line)]
    if any(line.lstrip().startswith("{") for line in body[:50]) or re.search(r'"DCGM (?:GPU )?Diagnostic"', text):
        from .json_report import parse_json

        return parse_json(text)
    from .table import parse_table

    return parse_table(text)
