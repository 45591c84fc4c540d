"""Console output on stderr: what a person reads after a run, ending with the ``[RESULT]`` line.

The default view is compact, because a table of every finding does not fit a screen: a
no-GPU node alone skips some thirty checks for one reason. It prints the verdict header;
one line per FAIL/ERROR/WARN finding, worst first (past :data:`MAX_PER_CHECK` of one check,
or :data:`MAX_PROBLEMS` in all, one line counts the rest of a check, so a fault on a
thousand nodes takes two lines, not a thousand); their distinct recommendations; the SKIPs
grouped by cause; the PASSes counted per check family; the ``[RESULT]`` line. ``verbose``
prints every finding with its observed and expected values instead. Both views are built
as plain lines fitted to the width; on a terminal rich only colours the status words (and
honours ``NO_COLOR``), so what a terminal shows and what a CI log keeps are the same text.

Width: ``COLUMNS`` when set, else the terminal's width when the stream is one, else
:data:`DEFAULT_WIDTH` (CI log viewers are wide and a pipe has no width of its own).
Structured values read as ``key=value`` pairs, and text is only ever shortened between
words, never inside a number, path or id.
"""

from __future__ import annotations

import os
import re
import sys
import textwrap
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import IO, Any

import msgspec

from ..actions import Action
from ..findings.canonical import verdict_of
from ..findings.model import ClusterReport, ReportFinding
from ..model import Status
from .reporters import reporter

DEFAULT_WIDTH = 120
MIN_WIDTH = 40
MAX_PROBLEMS = 40  # problem findings listed one per line; the rest are counted per check
MAX_PER_CHECK = 5  # problem findings of one check listed before the rest of it is counted
MAX_FOLDED = 12  # lines that count a check's further problems
MAX_ADVICE = 10  # distinct recommendations printed
ACTIONS = frozenset(a.value for a in Action if a is not Action.NONE)
MAX_SKIP_GROUPS = 12
MAX_LIST_ITEMS = 12  # items of a list value shown in the verbose view
STATUS_W = 8  # "ERROR" and two spaces: the status column of every line
ORDER = {"FAIL": 0, "ERROR": 1, "WARN": 2, "SKIP": 3, "PASS": 4}
PROBLEMS = ("FAIL", "ERROR", "WARN")
STYLE = {"FAIL": "bold red", "ERROR": "bold magenta", "WARN": "yellow", "SKIP": "dim", "PASS": "green"}
_CONTROL = {c: " " for c in (*range(32), 127)}
_ROLLED = re.compile(r"^on \d+ nodes, e\.g\. \S+: ")


class Line(msgspec.Struct, frozen=True):
    """One printed line: its status word (coloured on a terminal; "" for none) and the rest."""

    status: str
    text: str

    def plain(self) -> str:
        return f"{self.status:<{STATUS_W}}{self.text}".rstrip() if self.status else self.text


def render_console(report: ClusterReport, stream: IO[str] | None = None, verbose: bool = False,
                   width: int | None = None) -> None:
    """The compact (or ``verbose``) view of ``report`` on ``stream`` (stderr), ending with the
    ``[RESULT]`` line; header and result line both come from :func:`verdict_of`."""
    stream = stream or sys.stderr
    cols = width_of(stream, width)
    lines = console_lines(report, cols, verbose)
    if stream.isatty():
        _write_rich(lines, stream, cols)
    else:
        stream.write("".join(line.plain() + "\n" for line in lines))
    stream.flush()


@reporter("console", typed=True)
def render_console_text(report: ClusterReport, width: int = 120) -> str:
    """The console view as plain text (``report render --format console`` to a file or pipe)."""
    return "".join(line.plain() + "\n" for line in console_lines(report, width))


def width_of(stream: IO[str], width: int | None = None) -> int:
    """The width to fit: ``width``, else ``COLUMNS``, else the stream's terminal, else 120."""
    if width is None:
        env = os.environ.get("COLUMNS", "")
        if env.isdigit() and int(env) > 0:
            width = int(env)
        elif stream.isatty():
            try:
                width = os.get_terminal_size(stream.fileno()).columns
            except (OSError, ValueError, AttributeError):
                width = DEFAULT_WIDTH
        else:
            width = DEFAULT_WIDTH
    return max(MIN_WIDTH, width)


def console_lines(report: ClusterReport, width: int, verbose: bool = False) -> list[Line]:
    """Every line of the view, header first and ``[RESULT]`` last, each fitted to ``width``
    (from the typed report, or its dict read as one)."""
    typed = report
    verdict = verdict_of(typed)
    summary = typed.cluster_summary
    counts = ", ".join(f"{v} {k}" for k, v in summary.counts.items() if v)
    lines = [Line("", f"gpu-preflight: {verdict.label} ({counts})")]
    findings = typed.findings
    if verbose:
        lines += _verbose(findings, width)
    else:
        problems = sorted((f for f in findings if f.status.value in PROBLEMS), key=_worst_first)
        lines += _problems(problems, width)
        lines += _advice(problems, width)
        unlisted = summary.unlisted or {}
        lines += _skips([f for f in findings if f.status is Status.SKIP], unlisted, width)
        lines += _passes([f for f in findings if f.status is Status.PASS], unlisted, width)
        lines.append(Line("", "(every finding, with observed and expected values: --verbose)"))
    lines += _node_actions(typed, width)
    lines.append(Line("", verdict.line))
    return lines


def _node_actions(report: ClusterReport, width: int) -> list[Line]:
    """One line per operator action a node's findings call for (``summary.operator_action``, what a
    scheduler hook routes on), strongest first, naming its nodes; nothing when no node needs one."""
    nodes: dict[Action, list[str]] = {}
    for name, key in zip(report.nodes.host_names(), report.nodes, strict=True):
        value = (report.nodes.raw(key).get("summary") or {}).get("operator_action")
        if value in ACTIONS:
            nodes.setdefault(Action(value), []).append(name)
    return [Line("", fit(f"action  {action.value}: {', '.join(names)}", width))
            for action, names in sorted(nodes.items(), key=lambda kv: -kv[0].rank)]


def _worst_first(f: ReportFinding) -> tuple[int, str, str]:
    return ORDER.get(f.status.value, 5), f.check_id, f.subject


def clean(text: Any) -> str:
    """One line of text: control characters (newlines, tabs, escapes from logs) become spaces."""
    return " ".join(str(text).translate(_CONTROL).split())


def fit(text: str, room: int, *, more: bool = False) -> str:
    """``text`` in ``room`` characters, shortened at a space with "..." (``more``: say "..."
    even if it fits). A first word longer than the room is kept whole: cutting inside a
    number, path or id would misquote it."""
    if len(text) <= room and not more:
        return text
    if len(text) + 3 <= room:
        return text + "..."
    cut = text.rfind(" ", 0, max(room - 2, 1))
    head = text[:cut].rstrip(" ,;:(-") if cut > 0 else ""
    if not head:
        first = text.split(" ", 1)[0]
        return first if first == text and not more else first + "..."
    return head + "..."


def _wrap(text: str, width: int, first: str, rest: str, max_lines: int | None = None) -> list[str]:
    """``text`` wrapped between words (never inside one) after ``first``, continued after ``rest``."""
    out = textwrap.wrap(text, width=width, initial_indent=first, subsequent_indent=rest,
                        break_long_words=False, break_on_hyphens=False) or [first.rstrip()]
    if max_lines is not None and len(out) > max_lines:
        out = out[:max_lines]
        out[-1] = fit(out[-1], width, more=True)
    return out


def _columns(findings: Iterable[ReportFinding], width: int) -> tuple[int, int]:
    """Check and subject column widths: the longest shown, within a quarter and a sixth of the
    line (a longer id or subject pushes its own line's summary along, never another's)."""
    shown = list(findings)
    check = max((len(f.check_id) for f in shown), default=0)
    subject = max((len(clean(f.subject)) for f in shown), default=0)
    return min(check, 28, width // 4), min(subject, 20, width // 6)


def _problems(problems: list[ReportFinding], width: int) -> list[Line]:
    """One line per problem finding; past :data:`MAX_PER_CHECK` of one check, or
    :data:`MAX_PROBLEMS` in all, the rest of a check is one line that counts them."""
    groups: dict[tuple[str, str], list[ReportFinding]] = {}
    for f in problems:
        groups.setdefault((f.status.value, f.check_id), []).append(f)
    cw, sw = _columns(problems[:MAX_PROBLEMS], width)
    out: list[Line] = []
    listed = folded = hidden = hidden_checks = 0
    for (status, check_id), members in groups.items():
        take = members[:max(0, min(MAX_PER_CHECK, MAX_PROBLEMS - listed))]
        listed += len(take)
        for f in take:
            head = f"{check_id:<{cw}}  {clean(f.subject):<{sw}}  "
            out.append(Line(status, head + fit(clean(f.summary), width - STATUS_W - len(head))))
        rest = members[len(take):]
        if not rest:
            continue
        if folded < MAX_FOLDED:
            folded += 1
            subjects = ", ".join(clean(f.subject) for f in rest[:20])
            more = f"{check_id:<{cw}}  {len(rest)} {'more' if take else 'subjects'}: {subjects}"
            out.append(Line(status, fit(more, width - STATUS_W)))
        else:
            hidden += len(rest)
            hidden_checks += 1
    if hidden:
        out.append(Line("", f"... and {hidden} more in {hidden_checks} more checks (--verbose)"))
    return out


def _advice(problems: list[ReportFinding], width: int) -> list[Line]:
    """Each distinct recommendation once, after the checks that gave it (wrapped, at most 3 lines)."""
    given: dict[str, list[str]] = {}
    for f in problems:
        text = clean(f.recommendation or "")
        if text:
            ids = given.setdefault(text, [])
            if f.check_id not in ids:
                ids.append(f.check_id)
    out = []
    for text, ids in list(given.items())[:MAX_ADVICE]:
        out += [Line("", s) for s in _wrap(f"{', '.join(ids)}: {text}", width, "-> ", "   ", max_lines=3)]
    if len(given) > MAX_ADVICE:
        out.append(Line("", f"-> ... {len(given) - MAX_ADVICE} more recommendations (--verbose)"))
    return out


def causes(summary: str) -> list[str]:
    """What a SKIP summary could share with others: its ``: `` parts, their tails, each tail
    without its closing parenthesis, and a parenthesis inside the text. "no GPU to check: NVML
    library not found" offers "NVML library not found"; so does "no NVIDIA GPU (NVML library
    not found): ...". A closing "(looked in PATH)" is detail, not a cause: it is not offered."""
    parts = summary.split(": ")
    tails = [": ".join(parts[i:]) for i in range(len(parts))]
    found = [*tails, *parts]
    for i, text in enumerate(parts):
        if text.endswith(")") and " (" in text:
            head, _, inner = text[:-1].rpartition(" (")
            found.append(head)
            if i < len(parts) - 1:
                found.append(inner)
    for text in tails[1:]:
        if text.endswith(")") and " (" in text:
            found.append(text[:-1].rpartition(" (")[0])
    return [c for c in dict.fromkeys(found) if len(c) >= 6 and " " in c.strip()]


class SkipGroup(msgspec.Struct):
    """SKIP findings that share a cause, and the unlisted SKIPs of their checks."""

    cause: str
    members: list[ReportFinding]
    unlisted: int = 0

    @property
    def count(self) -> int:
        return len(self.members) + self.unlisted


def skip_groups(skips: list[ReportFinding], unlisted: Mapping[str, Mapping[str, int]]) -> list[SkipGroup]:
    """The SKIPs grouped by the cause most of them share, largest group first.

    Causes are found per distinct summary (nodes mostly skip alike: 10,000 nodes are a
    handful of texts). Each finding joins the cause it shares with the most findings (the
    longer cause on a tie). SKIPs a large cluster's nodes kept to themselves (``unlisted``)
    count with the group holding their check, so the groups add up to the header's count.
    """
    texts = Counter(_skip_text(f) for f in skips)
    shared: Counter[str] = Counter()
    offered = {text: causes(text) for text in texts}
    for text, n in texts.items():
        for cause in offered[text]:
            shared[cause] += n
    chosen = {text: max(offered[text] or [text], key=lambda c: (shared[c], len(c))) for text in texts}
    groups: dict[str, SkipGroup] = {}
    home: dict[str, SkipGroup] = {}
    for f in skips:
        cause = chosen[_skip_text(f)]
        group = groups.setdefault(cause, SkipGroup(cause, []))
        group.members.append(f)
        home.setdefault(f.check_id, group)
    kept = SkipGroup("kept on their nodes (each node's own report lists them)", [])
    for check_id, by in unlisted.items():
        home.get(check_id, kept).unlisted += int(by.get("SKIP", 0))
    out = [g for g in [*groups.values(), kept] if g.count]
    out.sort(key=lambda g: (-g.count, min(f.check_id for f in g.members) if g.members else ""))
    return out


def _skip_text(f: ReportFinding) -> str:
    """A SKIP's summary, without the "on 9998 nodes, e.g. node-7/gpu0: " of a rolled-up one."""
    text = clean(f.summary)
    if f.details.get("rolled_up"):
        text = _ROLLED.sub("", text, count=1)
    return text


def _skips(skips: list[ReportFinding], unlisted: Mapping[str, Mapping[str, int]], width: int) -> list[Line]:
    """One line per SKIP cause ("18 gpu.* checks, system.services: NVML library not found")."""
    groups = skip_groups(skips, unlisted)
    out = []
    for g in groups[:MAX_SKIP_GROUPS]:
        label = _skip_label(g.members, g.unlisted, width - STATUS_W) if g.members else f"{g.count} more"
        out.append(Line("SKIP", fit(f"{label}: {g.cause}", width - STATUS_W)))
    if len(groups) > MAX_SKIP_GROUPS:
        hidden = sum(g.count for g in groups[MAX_SKIP_GROUPS:])
        out.append(Line("SKIP", f"{hidden} more, for {len(groups) - MAX_SKIP_GROUPS} other causes (--verbose)"))
    return out


def _skip_label(members: list[ReportFinding], unlisted: int, room: int) -> str:
    """"18 gpu.* checks, system.services", on how many nodes and, where it differs from the
    checks, how many findings; "19 checks" where the names would crowd out the cause."""
    ids = sorted({f.check_id for f in members})
    families = Counter(i.split(".", 1)[0] for i in ids)
    named = ", ".join(f"{n} {fam}.* checks" if n > 1 else next(i for i in ids if i.split(".", 1)[0] == fam)
                      for fam, n in sorted(families.items(), key=lambda kv: (-kv[1], kv[0])))
    label = named if len(families) <= 3 and len(named) <= room // 2 else f"{len(ids)} checks"
    nodes = max([int(f.details.get("nodes", 1)) for f in members]
                + [len({f.node for f in members if f.node not in (None, "cluster")})])
    found = len(members) + unlisted
    if nodes > 1:
        label += f" on {nodes} nodes"
    if found != len(ids) * nodes:
        label += f" ({found} findings)"
    return label


def pass_counts(passes: list[ReportFinding], unlisted: Mapping[str, Mapping[str, int]]) -> Counter[str]:
    """PASS findings per check family (``gpu``, ``system``...), listed and unlisted alike."""
    by: Counter[str] = Counter(f.check_id.split(".", 1)[0] for f in passes)
    for check_id, counts in unlisted.items():
        if counts.get("PASS"):
            by[check_id.split(".", 1)[0]] += int(counts["PASS"])
    return by


def _passes(passes: list[ReportFinding], unlisted: Mapping[str, Mapping[str, int]], width: int) -> list[Line]:
    """One line (wrapped if need be): ``PASS    gpu 68, train 8, ...``, largest family first."""
    by = pass_counts(passes, unlisted)
    if not by:
        return []
    text = ", ".join(f"{family} {n}" for family, n in sorted(by.items(), key=lambda kv: (-kv[1], kv[0])))
    wrapped = _wrap(text, width - STATUS_W, "", "")
    return [Line("PASS" if i == 0 else "", (" " * STATUS_W if i else "") + s) for i, s in enumerate(wrapped)]


def _verbose(findings: Iterable[ReportFinding], width: int) -> list[Line]:
    """Every finding: status, check, subject and summary, then its values and recommendation."""
    out = []
    indent = " " * STATUS_W
    for f in sorted(findings, key=_worst_first):
        head = f"{f.check_id}  {clean(f.subject)}  {clean(f.summary)}"
        wrapped = _wrap(head, width - STATUS_W, "", "    ")
        out.append(Line(f.status.value, wrapped[0]))
        out += [Line("", indent + s) for s in wrapped[1:]]
        values = []
        if f.observed is not None:
            values.append(f"observed {value_text(f.observed, f.unit)}")
        if f.expected is not None:
            values.append(f"expected {value_text(f.expected, f.unit)}")
        if values:
            out += [Line("", s) for s in _wrap("; ".join(values), width, indent, indent + "    ")]
        if f.recommendation and f.status not in (Status.PASS, Status.SKIP):
            out += [Line("", s) for s in _wrap(clean(f.recommendation), width, indent + "-> ", indent + "   ")]
    return out


def value_text(value: Any, unit: str | None = None) -> str:
    """An observed/expected value for people: numbers with their unit, ``N/A (why)``,
    mappings as ``key=value`` pairs (nested keys dotted), lists comma-separated."""
    if isinstance(value, Mapping):
        if set(value) == {"na"}:
            return f"N/A ({clean(value['na'])})"
        return " ".join(f"{k}={_scalar(v)}" for k, v in _flat(value))
    text = _scalar(value)
    numeric = text.lstrip("<>= ").replace(".", "", 1).lstrip("-").isdigit()
    return f"{text} {unit}" if unit and numeric else text


def _flat(value: Mapping[str, Any], prefix: str = "") -> Iterable[tuple[str, Any]]:
    for key, item in value.items():
        name = f"{prefix}{clean(key)}"
        if isinstance(item, Mapping) and item and set(item) != {"na"}:
            yield from _flat(item, name + ".")
        else:
            yield name, item


def _scalar(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, Mapping):
        return f"N/A ({clean(value['na'])})" if set(value) == {"na"} else "{" + value_text(value) + "}"
    if isinstance(value, (list, tuple)):
        items = [_scalar(v) for v in value[:MAX_LIST_ITEMS]]
        text = ",".join(items) if all(" " not in i for i in items) else "; ".join(items)
        return text + (f" (+{len(value) - MAX_LIST_ITEMS} more)" if len(value) > MAX_LIST_ITEMS else "")
    return clean(value)


def _write_rich(lines: list[Line], stream: IO[str], width: int) -> None:
    """The same lines with the status words coloured (rich decides colour, NO_COLOR included)."""
    from rich.console import Console
    from rich.text import Text

    console = Console(file=stream, width=width, highlight=False, markup=False, emoji=False)
    for i, line in enumerate(lines):
        text = Text(line.plain(), style="bold" if i == 0 else "")
        if line.status:
            text.stylize(STYLE.get(line.status, ""), 0, len(line.status))
        console.print(text, soft_wrap=True)
