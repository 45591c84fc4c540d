"""nvidia-smi's answers to the commands that change a GPU: read for the setting each one states.

``nvidia-smi -pm 1`` answers ``Enabled persistence mode for GPU 00000000:01:00.0.`` (``Enabled Legacy
persistence mode ...`` on recent drivers, ``Persistence mode is already Enabled ...`` when nothing
changed), ``-c 3`` ``Set compute mode to EXCLUSIVE_PROCESS for GPU ...``, ``-mig 1`` ``Enabled MIG Mode
for GPU ...`` (or ``Warning: MIG mode is in pending enable state for GPU ...`` until a reset), ``-e 1``
``Enabled ECC support for GPU ...`` (applied at the next reboot: a pending mode), then ``All done.``.
Those settings are judged by the checks that judge them in a report (``gpu.inventory.persistence``,
``.compute_mode``, ``.mig``, ``gpu.ecc.mode``), each GPU named by its bus id. ``-pl``, ``-ac``/``-lgc``
and their refusals (``Changing power management limit is not supported for GPU: ... Treating as
warning and moving on.``), a setting refused (``Unable to set persistence mode for GPU ...: Insufficient
Permissions``, then ``Terminating early due to previous errors.``) and a reset that worked (``GPU ... was
successfully reset.``) state nothing those checks judge: they are kept in ``stated``. A pending MIG mode and a
refused reset are followed by nvidia-smi's own explanation in prose, which is read past. A reset
nvidia-smi could not do (``The following GPUs could not be reset:`` then ``  GPU <bus id>: <why>``, or
``Unable to reset GPU ...``; before R470 ``GPU <bus id> is currently in use by another process.``) is a
failure (``reset_failed``): the GPU is still in the state that called for the reset.

The answers are read in the order they were given. A MIG mode pending (``... in pending disable state``)
states the current mode too: the other one, which the GPU keeps until its next reset (NVML: the pending
mode is "the target mode following the next activation trigger"). A reset that worked is that trigger:
the GPU's pending MIG mode becomes its mode, and a refusal to reset the same GPU earlier in the text no
longer holds (gpu-operator#118: the reset refused while nvidia-persistenced held the GPU, then done).
"""

from __future__ import annotations

import re

from ...records.smi import NvidiaSmiRecord, SmiFailure, SmiGpu
from ...records.xid import pci_key
from ..detect import parser
from ..errors import ParseError
from ..text import is_noise, prepare
from . import as_compute_mode

KIND = "nvidia-smi-set"

_BUS_ID = r"[0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f]"
_BUS = rf"(?P<gpu>{_BUS_ID})"
_FOR = rf"for GPU:?\s*{_BUS}"
_ANY = rf"for GPU:?\s*{_BUS_ID}"  # the same, captured nowhere: several in one pattern
# (field, value, pattern): the setting a line states, for the GPU the pattern names.
SETTINGS: tuple[tuple[str, object, re.Pattern[str]], ...] = (
    ("persistence_mode", True, re.compile(rf"^Enabled (?:Legacy )?persistence mode {_FOR}", re.I)),
    ("persistence_mode", False, re.compile(rf"^Disabled (?:Legacy )?persistence mode {_FOR}", re.I)),
    ("persistence_mode", None, re.compile(rf"^Persistence mode is already (?P<value>Enabled|Disabled) {_FOR}", re.I)),
    ("compute_mode", None, re.compile(rf"^(?:Set compute mode to|Compute mode is already set to) (?P<value>\w+) {_FOR}",
                                      re.I)),
    ("mig_mode", "enabled", re.compile(rf"^Enabled MIG Mode {_FOR}", re.I)),
    ("mig_mode", "disabled", re.compile(rf"^Disabled MIG Mode {_FOR}", re.I)),
    ("mig_mode_pending", None, re.compile(rf"^Warning: MIG mode is in pending (?P<value>enable|disable) state {_FOR}",
                                          re.I)),
    ("ecc_mode_pending", True, re.compile(rf"^Enabled ECC support {_FOR}", re.I)),
    ("ecc_mode_pending", False, re.compile(rf"^Disabled ECC support {_FOR}", re.I)),
)
# Answers that state something no check judges (a limit or clocks set or refused, a reset done).
_STATED = re.compile(rf"^(?:Power limit {_ANY} was set to .*|Changing power management limit is not supported {_ANY}.*"
                     rf"|Provided power limit .* {_ANY}.*|Applications clocks (?:set to .*|commands have been set to "
                     rf"\w+) {_ANY}.*|GPU clocks set to .* {_ANY}.*|(?:Setting|Changing) .* is not supported {_ANY}.*"
                     # a setting refused, not applied (never 'Unable to determine the device handle': failures.py's)
                     rf"|Unable to (?:set|change|enable|disable|lock|unlock)\b.*\bGPU:?\s*{_BUS_ID}.*)$", re.I)
_DONE = re.compile(r"^(?:All done|Treating as warning and moving on|Reboot required"
                   r"|Terminating early due to previous errors)\.?$", re.I)  # closing words
_RESET_HEAD = re.compile(r"^The following GPUs could not be reset:$", re.I)
_RESET_FAILED = re.compile(rf"^(?:GPU {_BUS}: .+|Unable to reset GPU:?\s*(?P<unable>{_BUS_ID}).*)$", re.I)
_IN_USE = re.compile(rf"^GPU {_BUS} is currently in use by another process\.?$", re.I)  # a refused reset, pre-R470
_RESET_DONE = re.compile(rf"^GPU {_BUS}\s+was successfully reset\.?$", re.I)


def _setting(line: str) -> tuple[str, object, str] | None:
    """(field, value, bus id) of a line that states a setting, or ``None``."""
    for field, value, pattern in SETTINGS:
        if m := pattern.match(line):
            if value is None:
                word = m.group("value").lower()
                value = (as_compute_mode(word) if field == "compute_mode"
                         else word == "enabled" if field == "persistence_mode" else f"{word}d")
            return field, value, m.group("gpu")
    return None


def sniff(text: str) -> int:
    """A setter's answer naming a GPU by bus id at the start of a line."""
    lines = [line.strip() for line in text.splitlines()[:200]]
    strong = any(_setting(line) or _STATED.match(line) or _RESET_HEAD.match(line) or _RESET_DONE.match(line)
                 or _IN_USE.match(line) for line in lines)
    return 80 if strong else 0


@parser(KIND, sniff=sniff, title="nvidia-smi -pm / -c / -mig / -e / -pl / -ac / -lgc / -r answers")
def parse(text: str) -> NvidiaSmiRecord:
    """The settings stated per GPU (in order of first mention), what is stated but not judged, failed resets."""
    gpus: dict[str, SmiGpu] = {}
    stated: list[str] = []
    failures: list[SmiFailure] = []
    in_reset = False
    explaining = False  # after a refused reset or a pending MIG mode nvidia-smi explains itself in prose
    for number, raw in enumerate(prepare(KIND, text), 1):
        line = raw.strip()
        if not line or is_noise(raw):
            continue
        if found := _setting(line):
            field, value, bus = found
            gpu = gpus.setdefault(bus, SmiGpu(index=len(gpus), pci_bus_id=bus))
            setattr(gpu, field, value)
            if field == "mig_mode_pending":
                gpu.mig_mode = gpu.mig_mode or ("disabled" if value == "enabled" else "enabled")
                explaining = True
        elif _RESET_HEAD.match(line):
            in_reset = explaining = True
        elif (m := _RESET_FAILED.match(line)) and (in_reset or line.lower().startswith("unable")):
            failures.append(SmiFailure("reset_failed", line, m.group("gpu") or m.group("unable"), number))
        elif m := _IN_USE.match(line):
            failures.append(SmiFailure("reset_failed", line, m.group("gpu"), number))
            explaining = True
        elif m := _RESET_DONE.match(line):
            _reset_done(m.group("gpu"), gpus, failures)
            stated.append(line)
        elif _STATED.match(line):
            stated.append(line)
        elif not (_DONE.match(line) or explaining):
            raise ParseError(KIND, f"unexpected line {line[:60]!r}", number)
    if not gpus and not stated and not failures:
        raise ParseError(KIND, "no answer of an nvidia-smi setter")
    listed = list(gpus.values())
    return NvidiaSmiRecord(format="set", gpus=listed, fragment=len(listed), stated=stated, failures=failures)


def _reset_done(bus: str, gpus: dict[str, SmiGpu], failures: list[SmiFailure]) -> None:
    """A reset of ``bus`` that worked: its pending MIG mode is applied, an earlier refusal to reset it is over."""
    for key, gpu in gpus.items():
        if pci_key(key) == pci_key(bus) and gpu.mig_mode_pending is not None:
            gpu.mig_mode = gpu.mig_mode_pending
    failures[:] = [f for f in failures if not (f.code == "reset_failed" and pci_key(f.gpu) == pci_key(bus))]

