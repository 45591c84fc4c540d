"""The Xid policy: which Xids matter, how much, and what to do about them.

Peers hard-code Xid lists and disagree (Azure fails on 63, NVIDIA says ignore it; EKS
users asked for count/window thresholds after Xid 43 floods), so the judgement lives in a
data file, ``data/xid_policy.toml``, that a site can replace or patch per Xid. Its
format and sources are documented in the file's header.

:meth:`XidPolicy.judge_tally` turns a :class:`~gpu_preflight.config.xid_window.XidTally`
(events counted against the one window :func:`~gpu_preflight.config.xid_window.xid_window`
decides) into one :class:`XidVerdict` per (Xid, GPU): events older than the window are
left out and counted, events without a timestamp are kept and flagged (we cannot prove
they are old), the same event read twice is counted once, and a rule's ``count`` decides
whether a few application faults are still only "info". Severities stay plain strings; mapping them
onto check statuses is the check's business.

The shipped file is also the catalogue of every Xid NVIDIA publishes (``[catalogue]`` names the
edition and the range): ``docs/xids.md`` is rendered from it by :mod:`.xid_docs`. A fatal Xid
never vanishes by age alone: one older than the window that no driver load, boot or GPU
recovery follows in the log (the tally's ``stale`` groups) still gets a warning naming its age.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import msgspec
from msgspec.structs import replace

from ..records.xid import XidEvent, XidGroup, XidTally, count_events, xid_window
from .loader import ConfigError, parse_toml, read_config_text, toml_lines

__all__ = [
    "ACTIONS", "CAUSES", "SEVERITIES", "SHIPPED_POLICY", "Catalogue", "XidPolicy", "XidRule", "XidVerdict",
    "load_xid_policy",
]

SHIPPED_POLICY = Path(__file__).resolve().parents[1] / "data" / "xid_policy.toml"
SEVERITIES = ("ignore", "info", "warn", "fail")
CAUSES = ("hardware", "application", "driver", "nvlink", "memory", "thermal-power", "unknown")
ACTIONS = ("NONE", "MONITOR", "RESTART_APP", "RESET_GPU", "REBOOT", "POWER_CYCLE", "CHECK_MECHANICALS",
           "ISOLATE", "CONTACT_SUPPORT")
OVERRIDES_SOURCE = "xid severity overrides"
SOLO_XID = 45  # preemptive cleanup: judged by the Xid that caused it, or on its own when there is none

_CHOICES = {"severity": SEVERITIES, "cause": CAUSES, "action": ACTIONS}
_REQUIRED = ("name", "severity", "cause", "action", "recommendation")
_FIELDS = (*_REQUIRED, "count", "nvidia_action", "nvidia_investigation", "mnemonic")
_TABLES = ("catalogue", "default", "xid", "driver", "sxid")
_CATALOGUE = {"edition": str, "first": int, "last": int}
# Xid 154's named recovery action (NVIDIA: "None", "Drain P2P", "Drain and Reset", "GPU Reset Required",
# "Node Reboot Required"; 590-series drivers also print "PF FLR"), as the line's own severity and action.
# R595 adds "Recover IMEX Domain" (gpu.c: fabric memory allocation disabled): judged as NVML's RECOVER_IMEX_DOMAIN
# is by gpu.recovery_action, FAIL and isolate the node until its NVLink domain is recovered.
RECOVERY_ACTIONS = {
    "none": ("info", "NONE"), "drain_p2p": ("warn", "RESTART_APP"), "drain_and_reset": ("fail", "RESET_GPU"),
    "gpu_reset_required": ("fail", "RESET_GPU"), "pf_flr": ("fail", "RESET_GPU"),
    "node_reboot_required": ("fail", "REBOOT"), "recover_imex_domain": ("fail", "ISOLATE"),
}


class XidRule(msgspec.Struct, frozen=True):
    """How one Xid is judged; ``xid`` is ``None`` for the ``[default]`` rule."""

    xid: int | None
    name: str
    severity: str
    cause: str
    action: str
    recommendation: str
    count: int = 1
    nvidia_action: str | None = None
    nvidia_investigation: str | None = None
    mnemonic: str | None = None

    def severity_for(self, count: int) -> str:
        """The severity for ``count`` events: one level lower below the rule's threshold."""
        if count >= self.count:
            return self.severity
        return SEVERITIES[max(SEVERITIES.index(self.severity) - 1, 0)]


class XidVerdict(msgspec.Struct, frozen=True):
    """All in-window events of one Xid on one GPU, judged together.

    ``pci`` is normalised (``0000:38:00``) so it matches NVML's bus id after
    :func:`~gpu_preflight.parsers.kernel_log.normalize_pci`; ``first``/``last`` span the
    dated events only; ``undated`` says some events had no timestamp and were kept.
    """

    xid: int
    pci: str | None
    count: int
    first: datetime | None
    last: datetime | None
    severity: str
    rule: XidRule
    message: str
    undated: bool
    examples: tuple[str, ...] = ()
    kind: str = "xid"  # as XidEvent.kind: an Xid line, a driver message, an SXid, a named cause
    # older than the window with no reset evidence after it: reported as a warning (``rule`` keeps its verdict)
    before_window: bool = False

    @property
    def what(self) -> str:
        """How the finding names the event: ``Xid 79``, ``SXid 20034``, or the driver message and its Xid."""
        if self.kind.startswith("sxid"):
            return f"SXid {self.xid}"
        if self.kind.startswith("nvrm:"):  # 0: a driver message no Xid stands for (no GPU probed at all)
            return f"NVRM message (as Xid {self.xid})" if self.xid else "NVRM message"
        if self.kind == "cause":
            return f"Xid {self.xid} (named as a cause)"
        return f"Xid {self.xid}"

    @property
    def code(self) -> str:
        """The finding's stable code: ``xid_79``, ``sxid_20034``, ``nvrm_fallen_off_bus``."""
        if self.kind.startswith("sxid"):
            return f"sxid_{self.xid}"
        if self.kind.startswith("nvrm:"):
            return "nvrm_" + self.kind[5:]
        return f"xid_{self.xid}"


class Catalogue(msgspec.Struct, frozen=True):
    """Which edition of NVIDIA's Xid catalogue a policy transcribes, and its published range ``first..last``."""

    edition: str
    first: int
    last: int


class XidPolicy(msgspec.Struct, frozen=True):
    """The rule table plus the fallback for Xids it does not list."""

    rules: Mapping[int, XidRule]
    default: XidRule
    source: str
    drivers: Mapping[str, XidRule] = {}  # [driver.<id>]: messages without an Xid number
    sxids: Mapping[str, XidRule] = {}  # [sxid.fatal|nonfatal|unknown]: NVSwitch SXids
    catalogue: Catalogue | None = None  # [catalogue]: the edition transcribed (a site policy may have none)

    def rule(self, xid: int) -> XidRule:
        """The rule for ``xid``, or the default rule (``xid is None``) when unlisted."""
        return self.rules.get(xid, self.default)

    def rule_for(self, xid: int, kind: str = "xid") -> XidRule:
        """The rule for an event of ``kind`` (see :attr:`~gpu_preflight.records.xid.XidEvent.kind`).

        A driver message takes its ``[driver.<id>]`` rule (the Xid it stands for when the table has
        none); an SXid its ``[sxid.<fatal|nonfatal|unknown>]`` rule; an Xid line that states its own
        severity (NVLink5) or recovery action (Xid 154) is judged by what it states.
        """
        if kind.startswith("nvrm:"):
            return self.drivers.get(kind[5:]) or self.rule(xid)
        if kind.startswith("sxid"):
            return self.sxids.get(kind[5:] or "unknown") or self.default
        base = self.rule(xid)
        if kind == "xid:fatal" or (kind == "cause" and base.nvidia_action == "WORKFLOW_NVLINK5_ERR"):
            # an NVLink5 error that tore a job down (it is named by that job's Xid 45) is a fatal one
            return replace(base, severity="fail", action="RESET_GPU" if base.action == "NONE" else base.action)
        if kind == "xid:nonfatal":
            return replace(base, severity="info", action="NONE")
        if kind.startswith("xid:recovery="):
            named = RECOVERY_ACTIONS.get(kind.partition("=")[2])
            return replace(base, severity=named[0], action=named[1]) if named else base
        return base

    def with_overrides(self, overrides: Mapping[str, str]) -> XidPolicy:
        """A copy with per-Xid severities replaced; ``"default"`` targets the fallback."""
        rules = dict(self.rules)
        default = self.default
        for key, severity in overrides.items():
            dotted = f"xid.severity_overrides.{key}"
            _check_override_severity(severity, dotted)
            if str(key).strip() == "default":
                default = replace(default, severity=severity)
                continue
            xid = _xid_number(str(key), dotted, OVERRIDES_SOURCE, None)
            base = rules.get(xid) or replace(default, xid=xid)
            rules[xid] = replace(base, severity=severity)
        return replace(self, rules=MappingProxyType(rules), default=default)

    def judge(self, events: Sequence[XidEvent], *, now: datetime,
              window_hours: float) -> list[XidVerdict]:
        """One verdict per (Xid, GPU) for the events inside ``window_hours`` before ``now``.

        The window includes its start; events stamped after ``now`` (clock skew) count as
        recent. Verdicts come worst first, then by Xid and PCI address.
        """
        return self.judge_tally(count_events(events, xid_window(window_hours, now=now)))

    def judge_tally(self, tally: XidTally) -> list[XidVerdict]:
        """One verdict per counted (Xid, GPU) group, worst first, then by Xid and PCI address.

        Xid 45 (a job's channels torn down) follows the Xid that caused it; NVIDIA's workflow for it
        says "not solo: ignore, solo: restart the application and report": so a GPU whose only events
        in the window are Xid 45 gets the rule's ``count`` severity one level up (at least a warning).

        A group older than the window (``tally.stale``: no driver load, boot or recovery of its GPU
        after it) whose rule FAILs is a warning with ``before_window`` set: the GPU may still be in
        the state the Xid left it in, and a window must not make that vanish.
        """
        others = {g.pci for g in tally.groups if not (g.xid == SOLO_XID and g.kind == "xid")}
        logged = {(g.xid, g.pci) for g in (*tally.groups, *tally.stale) if g.kind.partition(":")[0] == "xid"}
        verdicts = [self._verdict(group, solo=group.xid == SOLO_XID and group.kind == "xid"
                                  and group.pci not in others) for group in tally.groups
                    if not _restates(group, logged)]
        judged = {(v.xid, v.pci, v.kind) for v in verdicts}
        for group in tally.stale:
            if (group.xid, group.pci, group.kind) in judged or _restates(group, logged):
                continue
            old = self._verdict(group)
            if old.severity == "fail":
                verdicts.append(replace(old, severity="warn", before_window=True))
        return sorted(verdicts, key=lambda v: (-SEVERITIES.index(v.severity), v.xid, v.pci or ""))

    def _verdict(self, group: XidGroup, *, solo: bool = False) -> XidVerdict:
        rule = self.rule_for(group.xid, group.kind)
        if solo and SEVERITIES.index(rule.severity) < SEVERITIES.index("warn"):
            rule = replace(rule, severity="warn", action="RESTART_APP")
        return XidVerdict(
            xid=group.xid, pci=group.pci, count=group.count, first=group.first, last=group.last,
            severity=rule.severity_for(group.count), rule=rule, message=group.message,
            undated=group.undated > 0, examples=group.examples, kind=group.kind,
        )


def _restates(group: XidGroup, logged: set[tuple[int, str | None]]) -> bool:
    """A driver message or a named cause that an Xid line of the same number on the same GPU already
    reports (``Xid 79`` is followed by ``GPU has fallen off the bus``): judged once, by the Xid line."""
    return (group.kind == "cause" or group.kind.startswith("nvrm:")) and (group.xid, group.pci) in logged


def load_xid_policy(path: str | Path | None = None,
                    overrides: Mapping[str, str] | None = None) -> XidPolicy:
    """The policy from ``path`` (the shipped table by default), with severity overrides.

    Every mistake raises :class:`ConfigError` naming the file, the dotted key
    (``xid.13.severity``) and the line, so a typo cannot silently fall back to a default.
    """
    source = Path(path) if path is not None else SHIPPED_POLICY
    text = read_config_text(source, "Xid policy")
    data = parse_toml(text, str(source))
    policy = _build(data, toml_lines(text), str(source))
    return policy.with_overrides(overrides) if overrides else policy


def _build(data: Mapping[str, Any], lines: Mapping[str, int], source: str) -> XidPolicy:
    for key in data:
        if key not in _TABLES:
            raise ConfigError(f"unknown table{_suggest(key, _TABLES)}", source=source, key=key,
                              line=_line(lines, key))
    if "default" not in data:
        raise ConfigError("missing [default] table (the rule for Xids not listed)", source=source,
                          key="default")
    default = _rule(None, data["default"], "default", lines, source)
    xids = data.get("xid", {})
    if not isinstance(xids, Mapping):
        raise ConfigError("must be a table of [xid.<number>] tables", source=source, key="xid",
                          line=_line(lines, "xid"))
    rules = {}
    for key, table in xids.items():
        dotted = f"xid.{key}"
        xid = _xid_number(key, dotted, source, _line(lines, dotted))
        rules[xid] = _rule(xid, table, dotted, lines, source)
    named = {name: {key: _rule(None, table, f"{name}.{key}", lines, source)
                    for key, table in _tables(data, name, lines, source).items()} for name in ("driver", "sxid")}
    return XidPolicy(MappingProxyType(rules), default, source, MappingProxyType(named["driver"]),
                     MappingProxyType(named["sxid"]), _catalogue(data.get("catalogue"), lines, source))


def _catalogue(table: Any, lines: Mapping[str, int], source: str) -> Catalogue | None:
    """The optional ``[catalogue]`` table: every key required, ``first <= last``."""
    if table is None:
        return None
    if not isinstance(table, Mapping):
        raise ConfigError("must be a table", source=source, key="catalogue", line=_line(lines, "catalogue"))
    for key, kind in _CATALOGUE.items():
        value = table.get(key)
        empty = isinstance(value, str) and not value.strip()
        if not isinstance(value, kind) or isinstance(value, bool) or empty:
            raise ConfigError(f"expected {'a non-empty string' if kind is str else 'an integer'}, got {value!r}",
                              source=source, key=f"catalogue.{key}", line=_line(lines, f"catalogue.{key}"))
    for key in table:
        if key not in _CATALOGUE:
            raise ConfigError(f"unknown field{_suggest(key, tuple(_CATALOGUE))}", source=source,
                              key=f"catalogue.{key}", line=_line(lines, f"catalogue.{key}"))
    if not 0 <= table["first"] <= table["last"]:
        raise ConfigError(f"expected 0 <= first <= last, got {table['first']}..{table['last']}", source=source,
                          key="catalogue", line=_line(lines, "catalogue"))
    return Catalogue(table["edition"], table["first"], table["last"])


def _tables(data: Mapping[str, Any], name: str, lines: Mapping[str, int], source: str) -> Mapping[str, Any]:
    """The ``[<name>.<key>]`` tables of an optional section (a site policy may leave it out)."""
    tables = data.get(name, {})
    if not isinstance(tables, Mapping):
        raise ConfigError(f"must be a table of [{name}.<name>] tables", source=source, key=name,
                          line=_line(lines, name))
    return tables


def _rule(xid: int | None, table: Any, where: str, lines: Mapping[str, int], source: str) -> XidRule:
    if not isinstance(table, Mapping):
        raise ConfigError("must be a table of rule fields", source=source, key=where,
                          line=_line(lines, where))
    for key in table:
        if key not in _FIELDS:
            raise ConfigError(f"unknown field{_suggest(key, _FIELDS)}", source=source,
                              key=f"{where}.{key}", line=_line(lines, f"{where}.{key}"))
    for key in _REQUIRED:
        if key not in table:
            raise ConfigError(f"missing required field '{key}'", source=source,
                              key=f"{where}.{key}", line=_line(lines, where))
    values = {key: _field(key, table[key], f"{where}.{key}", lines, source) for key in table}
    return XidRule(xid=xid, **values)


def _field(key: str, value: Any, dotted: str, lines: Mapping[str, int], source: str) -> Any:
    problem = _field_problem(key, value)
    if problem:
        raise ConfigError(problem, source=source, key=dotted, line=_line(lines, dotted))
    return value


def _field_problem(key: str, value: Any) -> str | None:
    """Why ``value`` is not valid for rule field ``key``, or ``None`` when it is."""
    if key in _CHOICES:
        if value not in _CHOICES[key]:
            return f"expected one of {', '.join(map(repr, _CHOICES[key]))}, got {value!r}"
    elif key == "count":
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return f"expected an integer >= 1, got {value!r}"
    elif not isinstance(value, str) or not value.strip():
        return f"expected a non-empty string, got {value!r}"
    return None


def _check_override_severity(severity: Any, dotted: str) -> None:
    if severity not in SEVERITIES:
        raise ConfigError(f"expected one of {', '.join(map(repr, SEVERITIES))}, got {severity!r}",
                          source=OVERRIDES_SOURCE, key=dotted)


def _xid_number(key: str, dotted: str, source: str, line: int | None) -> int:
    text = key.strip()
    if not text.isdigit():
        raise ConfigError(f"Xid must be a non-negative integer, got {key!r}", source=source,
                          key=dotted, line=line)
    return int(text)


def _line(lines: Mapping[str, int], dotted: str) -> int | None:
    """Line of ``dotted``, else of its nearest enclosing table (or that table's first entry)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        prefix = ".".join(parts[:end])
        if prefix in lines:
            return lines[prefix]
        nested = [line for key, line in lines.items() if key.startswith(f"{prefix}.")]
        if nested:
            return min(nested)
    return None


def _suggest(name: str, choices: Sequence[str]) -> str:
    import difflib  # only for a name that was not found

    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else f" (known: {', '.join(choices)})"
