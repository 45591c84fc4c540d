"""nvidia-smi's own failure messages: what it prints when it cannot read a GPU at all.

A GPU that fell off the bus, a driver that is not loaded or a corrupted infoROM do not
show as a bad reading: nvidia-smi prints a sentence instead of (or above) its report, and
people paste that sentence alone. Those sentences are the strongest evidence there is,
so they are a kind of their own (``nvidia-smi-error``) and the table and ``-q`` readers
collect them too (:func:`failures_in`), so a report that lists seven GPUs and cannot
reach the eighth is judged on all eight.

:data:`FAILURES` is the catalogue, most specific first; each entry names the failure
(``code``, the key of the judge's rules in :mod:`gpu_preflight.checks.evidence_gpu`).
"""

from __future__ import annotations

import re

from ...records.smi import NvidiaSmiRecord, SmiFailure
from ..detect import parser
from ..errors import ParseError
from ..text import prepare

KIND = "nvidia-smi-error"

_BUS = r"(?P<gpu>[0-9A-Fa-f]{3,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])"
_HANDLE = rf"Unable to (?:determine|detect) the device handle for GPU\s*{_BUS}\s*:\s*"
# (code, pattern): the first match classifies a line.
FAILURES: tuple[tuple[str, re.Pattern[str]], ...] = (
    # ... or in place of a reading: NVML_ERROR_GPU_IS_LOST's nvmlErrorString in a --query-gpu cell, ``[GPU is lost]``
    ("gpu_lost", re.compile(rf"{_HANDLE}GPU is lost|\bGPU is lost\b.*Reboot the system|\[GPU is lost\]",
                            re.IGNORECASE)),
    ("gpu_requires_reset", re.compile(rf"{_HANDLE}.*requires reset|\bGPU requires reset\b", re.IGNORECASE)),
    ("gpu_unreachable", re.compile(rf"{_HANDLE}(?P<why>.*)", re.IGNORECASE)),
    ("no_devices", re.compile(r"^\W*No devices were found\b", re.IGNORECASE)),
    ("driver_unreachable", re.compile(r"NVIDIA-SMI has failed because it couldn.t communicate with the NVIDIA driver",
                                      re.IGNORECASE)),
    ("nvml_init_failed", re.compile(r"Failed to initialize NVML\s*:\s*(?P<why>.+)", re.IGNORECASE)),
    # nvidia-smi's answer when it cannot load NVML at all (no libnvidia-ml.so on the loader path: a container
    # without the driver's libraries mounted, a broken link after an update): NVML is not initialised either.
    ("nvml_init_failed", re.compile(r"NVIDIA-SMI couldn.t find (?P<why>libnvidia-ml\.so) library", re.IGNORECASE)),
    ("inforom_corrupted", re.compile(rf"infoROM is corrupted at gpu\s*{_BUS}", re.IGNORECASE)),
)


def failures_in(lines: list[str]) -> list[SmiFailure]:
    """Every nvidia-smi failure message in ``lines`` (1-based line numbers), in order."""
    out: list[SmiFailure] = []
    for number, line in enumerate(lines, 1):
        for code, pattern in FAILURES:
            if m := pattern.search(line):
                out.append(SmiFailure(code, line.strip().lstrip("> ").strip()[:300],
                                      m.groupdict().get("gpu"), number))
                break
    return out


def sniff(text: str) -> int:
    """Strong evidence, but a report printed under the message (an infoROM warning above the
    table) is read by the report's own parser, whose sniffers score higher."""
    return 75 if failures_in(text.splitlines()[:400]) else 0


@parser(KIND, sniff=sniff, title="nvidia-smi failure message (GPU unreachable, lost, no devices, driver down)")
def parse(text: str) -> NvidiaSmiRecord:
    """The failures nvidia-smi printed; the record lists no GPU (nvidia-smi could read none)."""
    failures = failures_in(prepare(KIND, text))
    if not failures:
        raise ParseError(KIND, "no nvidia-smi failure message")
    return NvidiaSmiRecord(format="error", failures=failures)
