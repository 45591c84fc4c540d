"""Slurm node records, parsed from ``scontrol show node`` (multi-line form).

Why text and not ``--json``: scontrol gained ``--json`` only with the openapi plugins,
and its schema changed between releases (state a string, then a list), while the text
form has kept its shape for many releases. The multi-line form puts ``Reason=`` on a line
of its own, which matters because a reason is free text with spaces, and ``OS=`` (also
free text) likewise, so neither can be confused with the ``Key=value`` pairs around it.

``State=`` is ``BASE[+FLAG...]`` (``IDLE+DRAIN``, ``DOWN+DRAIN+NOT_RESPONDING``,
``MIXED+DRAIN`` while jobs finish); older releases append ``*`` to the base for a node
that does not respond. Times print as ``%Y-%m-%dT%H:%M:%S`` in local time because the
caller runs scontrol with ``SLURM_TIME_FORMAT=standard``.
"""

from __future__ import annotations

import re
from datetime import datetime

import msgspec

__all__ = ["SlurmNode", "parse_nodes"]

# Lines whose value is free text (spaces included) up to the end of the line.
_WHOLE_LINE_KEYS = ("OS", "Comment", "Extra")
_REASON_SUFFIX = re.compile(r"^(?P<text>.*?) \[(?P<user>[^@\[\]]*)@(?P<time>[^\]]*)\]$")
# Flags that take a node out of service whoever set them.
_OUT_FLAGS = frozenset({"DRAIN", "FAIL", "NOT_RESPONDING", "INVALID_REG"})
_OUT_BASES = frozenset({"DOWN", "ERROR", "UNKNOWN"})


class SlurmNode(msgspec.Struct, frozen=True):
    """One node as slurmctld sees it (the fields the drain policy needs)."""

    name: str
    base_state: str
    flags: frozenset[str]
    reason: str = ""
    reason_user: str | None = None
    reason_time: datetime | None = None
    hostname: str | None = None
    address: str | None = None

    @property
    def state(self) -> str:
        """The state as scontrol prints it, e.g. ``IDLE+DRAIN``."""
        return "+".join([self.base_state, *sorted(self.flags)])

    @property
    def drained(self) -> bool:
        """Drained or draining: no new jobs will start here."""
        return "DRAIN" in self.flags

    @property
    def down(self) -> bool:
        return self.base_state in ("DOWN", "ERROR") or "FAIL" in self.flags

    @property
    def in_cluster(self) -> bool:
        """FUTURE nodes are configured but not part of the cluster yet; they count for nothing."""
        return self.base_state != "FUTURE" and "DYNAMIC_FUTURE" not in self.flags

    @property
    def out_of_service(self) -> bool:
        """Counts against the circuit breaker: drained, down, failed or not responding.

        Powered-down cloud nodes are idle capacity, not breakage, so they do not count.
        """
        return self.in_cluster and (self.base_state in _OUT_BASES or bool(self.flags & _OUT_FLAGS))

    def drained_by(self, prefix: str) -> bool:
        """True when *we* drained it: the drain flag is set and the reason carries our prefix."""
        return self.drained and self.reason.startswith(prefix)

    def names(self) -> set[str]:
        """Every name a report may use for this node (Slurm name, host name, address, short forms)."""
        out = {n for n in (self.name, self.hostname, self.address) if n}
        return out | {n.split(".")[0] for n in out if not n[0].isdigit()}


def parse_nodes(text: str) -> list[SlurmNode]:
    """Parse ``scontrol show node`` output; records without ``NodeName=`` are ignored."""
    nodes = []
    for record in re.split(r"\n\s*\n", text.strip()):
        fields = _fields(record)
        if "NodeName" in fields:
            nodes.append(_node(fields))
    return nodes


def _fields(record: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    reason: list[str] = []
    for raw in record.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("Reason="):
            reason = [line[len("Reason="):]]
            continue
        if reason and raw.startswith(" " * 10):  # fields are indented 3, reason continuations 10
            reason.append(line)
            continue
        key = line.split("=", 1)[0]
        if key in _WHOLE_LINE_KEYS:
            fields[key] = line[len(key) + 1:]
            continue
        for token in line.split():
            name, sep, value = token.partition("=")
            if sep:
                fields.setdefault(name, value)
    if reason:
        fields["Reason"] = "\n".join(reason)
    return fields


def _node(fields: dict[str, str]) -> SlurmNode:
    base, *flags = fields.get("State", "UNKNOWN").split("+")
    flag_set = set(flags)
    if base.endswith("*"):  # older releases: DOWN* = down and not responding
        base = base.rstrip("*")
        flag_set.add("NOT_RESPONDING")
    text, user, when = fields.get("Reason", ""), None, None
    first, _, rest = text.partition("\n")
    m = _REASON_SUFFIX.match(first)
    if m:
        text = m.group("text") + (f"\n{rest}" if rest else "")
        user = m.group("user")
        when = _local_time(m.group("time"))
    return SlurmNode(
        name=fields["NodeName"], base_state=base, flags=frozenset(flag_set), reason=text, reason_user=user,
        reason_time=when, hostname=_value(fields.get("NodeHostName")), address=_value(fields.get("NodeAddr")))


def _value(text: str | None) -> str | None:
    return text if text and text not in ("(null)", "N/A") else None


def _local_time(text: str) -> datetime | None:
    """scontrol's local time as an aware datetime; None when it is not the standard format."""
    try:
        return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S").astimezone()
    except ValueError:
        return None
