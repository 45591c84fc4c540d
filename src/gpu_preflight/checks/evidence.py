"""Judging external evidence: a parsed tool output (a record) → findings.

``gpu-preflight judge FILE`` and the tool runners share these functions (the text is parsed by
:func:`gpu_preflight.evidence.judge_text`, outside this pure layer). Each evidence
kind has one judge, registered with :func:`judges` in a ``checks/evidence_*.py`` theme
module (found by import, so adding a kind touches one module). Judges are pure: the
record and the thresholds in, findings out. They are deliberately *not* ``@check``\\ s:
a node run has no probe that produces these records.

Where the node checks already judge the same facts (nvidia-smi's GPU fields, kernel-log
Xids), the evidence is converted into their records and *their* rules run, so a GPU is
judged the same way whether NVML or a saved ``nvidia-smi -q`` described it.

Subjects are ``<source>`` or ``<source>/<part>`` (``dcgm.txt/gpu1``), where ``source``
names the evidence (a file name, or a host when the runner knows it).

A parser that sees less than the tool printed (a table without its closing border, an
nccl-tests log without its summary, fewer GPU sections or ports than announced, a value
it cannot read where a reading belongs) lists why in its record's ``incomplete``. Such a
record is never a pass: :func:`judge_record` adds one ``evidence.complete`` ``ERROR``
("output incomplete: ...") beside whatever the judge found in the part that is there, so
a failure still visible stays FAIL and a cut file that lost its failure cannot pass.

A *fragment* is different: a section people paste on purpose (a ``Remapped Rows`` block, one
ibstat port). Its parser reads it and sets the record's ``fragment`` to the number of records
it shows; :func:`judge_record` adds an ``evidence.fragment`` SKIP saying so, and the judges
infer nothing the fragment does not state (no GPU count), so a fragment whose readings
judge nothing ends as "nothing judged", never as a pass.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from ..ids import EVIDENCE_JUDGE_ID
from ..model import Finding, Status
from ..registries import Registry
from ..registry import declare, fail_closed, stamp_actions

if TYPE_CHECKING:
    from ..config import Config

__all__ = ["JUDGES", "JudgeFn", "check_title", "incomplete_parts", "judge_record", "judged_kinds",
           "judges", "parse_error_finding"]

JudgeFn = Callable[[Any, "Config", str], Iterable[Finding]]

EVIDENCE_IDS = (
    declare("evidence.parse", "The evidence could be read",
            """A saved tool output could be read as the kind detected (or given with ``--kind``):
            ERROR with the line where parsing stopped otherwise. Nothing in it was judged.""",
            group=(), component="service_reliability"),
    declare(EVIDENCE_JUDGE_ID, "The evidence could be judged",
            """The evidence's judge ran and said something: ERROR when no judge knows the kind,
            the judge crashed, hung past its time limit or produced no finding.""",
            group=(), component="service_reliability"),
    declare("evidence.complete", "The evidence was complete",
            """The parser saw the whole tool output: ERROR when it lacks a part the tool prints
            (a table's closing border, a summary, announced GPUs or ports), beside whatever was
            judged in the part that is there.""",
            group=(), component="service_reliability"),
    declare("evidence.fragment", "The evidence was judged on what it shows",
            """The text is a pasted fragment of a tool's output (a section without the report's
            header, ports without their adapter): SKIP saying how many records were judged. What
            the fragment does not show (how many GPUs or ports exist) is not inferred, so a
            fragment that shows no reading judges nothing and is never a pass.""",
            group=(), component="service_reliability"),
)


def _discover(scope: str | None = None) -> None:
    """Import the ``checks/evidence_*.py`` modules once (their judges register on import)."""
    if _discovered:
        return
    from .. import checks

    for mod in pkgutil.iter_modules(checks.__path__):
        if mod.name.startswith("evidence_"):
            importlib.import_module(f"{checks.__name__}.{mod.name}")
    _discovered.append(True)


_discovered: list[bool] = []
JUDGES: Registry[JudgeFn] = Registry("evidence kind", _discover)


def judges(*kinds: str) -> Callable[[JudgeFn], JudgeFn]:
    """Register ``fn(record, config, source)`` as the judge of the given evidence kinds."""

    def register(fn: JudgeFn) -> JudgeFn:
        for kind in kinds:
            JUDGES.register(kind, fn)
        return fn

    return register


def judged_kinds() -> list[str]:
    return JUDGES.names()


def judge_record(kind: str, record: Any, config: Config, *, source: str = "evidence") -> list[Finding]:
    """Findings for a parsed record of ``kind``.

    Fails closed through the engine's own path (:func:`~gpu_preflight.registry.fail_closed`):
    a kind without a judge, a judge that raises on an odd record or says nothing yields one
    ``ERROR`` finding (could not judge) instead of silence or a crash. A caller outside a
    check (``gpu-preflight judge``) goes through :func:`gpu_preflight.engine.judge_evidence`,
    which adds the time limit.
    """
    judge = JUDGES.find(kind)
    if judge is None:
        return [Finding(EVIDENCE_JUDGE_ID, Status.ERROR, source, "no_judge",
                        f"no judgement rules for evidence kind {kind!r}", details={"kind": kind})]
    findings, answered = fail_closed(lambda: judge(record, config, source), check_id=EVIDENCE_JUDGE_ID,
                                     subject=source, crashed="judge_crashed", what=f"judging {kind}",
                                     recommendation="This is a gpu-preflight bug: please report it with the "
                                                    "input file.",
                                     silent_summary=f"the {kind} judge produced no finding")
    if not answered:
        return findings
    if missing := incomplete_parts(record):
        findings.append(Finding("evidence.complete", Status.ERROR, source, "incomplete",
                                f"output incomplete: {'; '.join(missing)}"[:600], observed=len(missing),
                                recommendation="Save the whole output of the tool (no cut, no elided lines, no "
                                               "edits) and judge it again; the part shown was judged as it is.",
                                details={"missing": missing}))
    if (shown := getattr(record, "fragment", None)) is not None:
        findings.append(Finding("evidence.fragment", Status.SKIP, source, "fragment",
                                f"fragment: judged on {shown} record(s); what it does not show was not assumed",
                                observed=shown, unit="records"))
    findings = stamp_actions(findings)  # the same code -> action tables as the node checks
    for finding in findings:
        finding.details.setdefault("evidence_kind", kind)
    return findings


def incomplete_parts(record: Any) -> list[str]:
    """What a record says it lacks (its ``incomplete`` list); empty for a complete record."""
    missing = getattr(record, "incomplete", None)
    return [str(m) for m in missing] if isinstance(missing, list) else []


def check_title(check_id: str, kind: str) -> str:
    """A report title for ``check_id``: the node check's own title, else the first line of the kind's judge."""
    from ..registry import DECLARED, get_check

    if check_id in DECLARED:
        return DECLARED.get(check_id).title
    try:
        return get_check(check_id).title
    except KeyError:
        pass
    judge = JUDGES.find(kind)
    doc = (judge.__doc__ or "").strip() if judge else ""
    return doc.splitlines()[0].rstrip(".") if doc else check_id


def parse_error_finding(exc: Exception, source: str) -> Finding:
    """The ``ERROR`` finding for evidence that could not be read: nothing was measured."""
    kind = getattr(exc, "kind", "unknown")
    line = getattr(exc, "line", None)
    return Finding("evidence.parse", Status.ERROR, source, "parse_error",
                   f"could not read {source} as {kind}: {getattr(exc, 'message', exc)}"
                   + (f" (line {line})" if line else ""),
                   recommendation="Check that the file is complete tool output; pass --kind if it was misdetected.",
                   details={"kind": kind, "line": line})
