"""What the GPU container stack says when a GPU job will not start: one record per saved text.

libnvidia-container (``nvidia-container-cli``), the container toolkit and Docker's device request, and the
Kubernetes device plugin each name what is wrong with the node in their own words; the reader
(:mod:`gpu_preflight.parsers.container_stack`) turns each sentence into a :class:`StackFailure` whose
``code`` is the state it states, so the judge words and acts on it as on the same state read elsewhere.
"""

from __future__ import annotations

import msgspec

from .smi import SmiFailure


class StackFailure(msgspec.Struct, frozen=True):
    """One failure sentence: the state it names (``code``), the line as printed (capped), its 1-based line
    number, the device it names (a UUID or bus id) and, for the device plugin's health checker, the Xid."""

    code: str
    message: str
    line: int
    tool: str
    device: str | None = None
    xid: int | None = None
    detail: str | None = None


class ContainerStackRecord(msgspec.Struct):
    """The failures a container-stack text states, in order; it lists no GPU reading. ``smi_failures``: nvidia-smi's
    own failure sentences printed with them (the validator runs nvidia-smi), judged as nvidia-smi's."""

    failures: list[StackFailure]
    smi_failures: list[SmiFailure] = []
