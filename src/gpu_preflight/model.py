"""Statuses, findings, check results and the node report.

Everything a check produces is a :class:`Finding`; everything a run produces is a
:class:`NodeReport`. Both are plain Structs (``msgspec.Struct``) that serialise to JSON without custom
encoders, so reports can be re-rendered later from the saved file alone.
"""

from __future__ import annotations

import enum
import fnmatch
from collections.abc import Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any, TypedDict

import msgspec

SCHEMA_VERSION = "1.1"


class Status(enum.StrEnum):
    """Outcome of a check for one subject.

    ``ERROR`` means "could not measure": it is never a pass, and by default it gates a
    run like ``FAIL``. The verdict of a set of findings is the one with the highest
    :attr:`rank`; a definite ``FAIL`` outranks ``ERROR`` because it tells the operator
    more (the node is bad, not merely unexamined).
    """

    PASS = "PASS"
    SKIP = "SKIP"
    WARN = "WARN"
    ERROR = "ERROR"
    FAIL = "FAIL"

    @property
    def rank(self) -> int:
        return _RANK[self]

    @property
    def exit_code(self) -> int:
        """Process exit code for a verdict: 0 pass, 1 warn, 2 fail, 3 error."""
        return _EXIT[self]

    @classmethod
    def worst(cls, statuses: Any) -> Status:
        """Worst of an iterable of statuses; ``PASS`` when empty."""
        worst, top = cls.PASS, 0
        for status in statuses:
            rank = _RANK.get(status)  # a plain "FAIL" hashes and compares as Status.FAIL (a str enum)
            if rank is None:
                rank = _RANK[cls(status)]  # not a status: ValueError, as ever
            if rank > top:
                worst, top = cls(status), rank
        return worst


def verdict(statuses: Any) -> Status:
    """Overall status of a run: the worst status, except that skipped checks beside passing
    ones do not turn a pass into "SKIP".

    A run that judged nothing (no finding at all, or only SKIPs: every check excluded or
    none applicable) is ``ERROR``: it is no evidence that the node is fit, and "could not
    judge" is what exit code 3 means to prologs and drain hooks.
    """
    seen = [s if type(s) is Status else Status(s) for s in statuses]  # Status(s) costs a microsecond
    if not any(s is not Status.SKIP for s in seen):
        return Status.ERROR
    worst = Status.worst(seen)
    if worst is Status.SKIP:
        return Status.PASS
    return worst


_RANK = {Status.PASS: 0, Status.SKIP: 1, Status.WARN: 2, Status.ERROR: 3, Status.FAIL: 4}
_EXIT = {Status.PASS: 0, Status.SKIP: 0, Status.WARN: 1, Status.FAIL: 2, Status.ERROR: 3}


class NA(msgspec.Struct, frozen=True):
    """A reading that could not be taken, with the reason.

    Records hold ``NA`` instead of a fake zero so that a check can tell "zero errors"
    from "the driver would not say", and so that the report shows why.
    """

    reason: str

    def __bool__(self) -> bool:  # an NA is never truthy, so `if reading:` stays honest
        return False

    def __str__(self) -> str:
        return f"N/A ({self.reason})"


class Finding(msgspec.Struct):
    """One judged observation: the unit every reporter renders.

    ``check_id`` is the stable dotted id of the check that produced it, ``subject`` names
    what was judged (``host/gpu2``, ``host``), ``code`` is a short cause slug that stays
    stable across releases so alerting can key on it.
    """

    check_id: str
    status: Status
    subject: str
    code: str
    summary: str
    observed: Any = None
    expected: Any = None
    unit: str | None = None
    recommendation: str | None = None
    details: dict[str, Any] = {}

    def to_dict(self) -> dict[str, Any]:
        # Built by hand rather than with a generic deep conversion: reports of thousands of nodes
        # serialise hundreds of thousands of findings, and a deep copy dominated that.
        return {
            "check_id": self.check_id, "status": self.status.value, "subject": self.subject, "code": self.code,
            "summary": self.summary, "observed": jsonable(self.observed), "expected": jsonable(self.expected),
            "unit": self.unit, "recommendation": self.recommendation, "details": jsonable(self.details),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Finding:
        return cls(
            check_id=data["check_id"],
            status=Status(data["status"]),
            subject=data["subject"],
            code=data["code"],
            summary=data["summary"],
            observed=data.get("observed"),
            expected=data.get("expected"),
            unit=data.get("unit"),
            recommendation=data.get("recommendation"),
            details=data.get("details") or {},
        )


class CheckResult(msgspec.Struct):
    """All findings of one check in one run, with its own timing."""

    check_id: str
    title: str
    findings: list[Finding]
    duration_s: float

    @property
    def status(self) -> Status:
        return Status.worst(f.status for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        return {
            "check_id": self.check_id,
            "title": self.title,
            "status": self.status.value,
            "duration_s": round(self.duration_s, 6),
            "findings": [f.to_dict() for f in self.findings],
        }


class SavedArtifact(TypedDict):
    """A raw output saved beside the report (``artifacts/<node>/<file>``), as the node's report and
    the cluster report list it: where it is and what it was, so a reader can check the file is the
    one the run wrote (:func:`gpu_preflight.findings.canonical.save_artifacts` writes them)."""

    name: str
    node: str
    path: str
    bytes: int
    sha256: str


class NodeReport(msgspec.Struct):
    """The result of running the node checks on one host.

    ``facts`` holds the JSON form of every probe's record (the inputs the checks judged),
    ``artifacts`` the paths of raw outputs saved beside the report.
    """

    hostname: str
    timestamp: str
    results: list[CheckResult]
    facts: dict[str, Any] = {}
    profile: str | None = None
    config_sources: list[str] = []
    artifacts: list[SavedArtifact] = []
    duration_s: float = 0.0
    fail_on: str = "fail"
    raw_artifacts: dict[str, tuple[str, str]] = {}

    @property
    def findings(self) -> list[Finding]:
        return [f for r in self.results for f in r.findings]

    @property
    def status(self) -> Status:
        return verdict(f.status for f in self.findings)

    def to_dict(self) -> dict[str, Any]:
        """Transport form (to rank 0): everything but the raw artifacts, which stay on the node."""
        return {"hostname": self.hostname, "timestamp": self.timestamp,
                "results": [r.to_dict() for r in self.results], "facts": self.facts, "profile": self.profile,
                "config_sources": self.config_sources, "duration_s": self.duration_s, "fail_on": self.fail_on,
                "artifacts": self.artifacts}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> NodeReport:
        results = [CheckResult(r["check_id"], r["title"], [Finding.from_dict(f) for f in r["findings"]],
                               r.get("duration_s", 0.0)) for r in data.get("results", [])]
        return cls(data["hostname"], data["timestamp"], results, data.get("facts", {}), data.get("profile"),
                   data.get("config_sources", []), data.get("artifacts", []), data.get("duration_s", 0.0),
                   data.get("fail_on", "fail"))

    @property
    def exit_code(self) -> int:
        return gated_exit_code(self.status, self.fail_on)


def gated_exit_code(status: Status, fail_on: str) -> int:
    """Exit code for a verdict; ``fail_on="warn"`` makes warnings gate like failures."""
    if fail_on == "warn" and status is Status.WARN:
        return Status.FAIL.exit_code
    return status.exit_code


def gating_statuses(fail_on: str) -> frozenset[Status]:
    """Statuses that make a run a failure under the given ``--fail-on`` policy."""
    gating = {Status.FAIL, Status.ERROR}
    if fail_on == "warn":
        gating.add(Status.WARN)
    return frozenset(gating)


def id_matches(check_id: str, pattern: str) -> bool:
    """Glob a check id (``gpu.*``, ``*``, ``system.limits``) as ``fnmatch.fnmatchcase`` does.

    The id patterns in tables and on command lines are nearly all exact ids or ``prefix.*``;
    those are answered without compiling a regular expression (fnmatch compiled some forty
    of them at every start-up, 5 ms of a node run).
    """
    if not any(c in pattern for c in "*?["):
        return check_id == pattern
    if pattern == "*":
        return True
    head = pattern[:-1]
    if pattern.endswith("*") and not any(c in head for c in "*?["):
        return check_id.startswith(head)

    return fnmatch.fnmatchcase(check_id, pattern)


def per_subject(findings: Iterable[Mapping[str, Any]]) -> Iterator[Mapping[str, Any]]:
    """Finding dicts with rolled-up passes expanded back to one per subject.

    At scale a cluster check reports its passes as one finding whose ``details.subjects``
    maps each subject to its observed value (``checks/cluster_rollup.py``); whatever reads values
    per GPU (plots, scores, the history) reads them through here and sees no difference.
    """
    for f in findings:
        details = f.get("details") or {}
        subjects = details.get("subjects") if details.get("rolled_up") else None
        if not isinstance(subjects, Mapping):
            yield f
            continue
        shared = {k: v for k, v in details.items() if k not in ("rolled_up", "subjects")}
        for subject, observed in subjects.items():
            yield {**f, "subject": subject, "observed": observed, "details": shared}


_PLAIN = (str, int, bool, type(None))


class JsonDict(dict):  # type: ignore[type-arg]
    """A dict whose contents are JSON already (values taken from decoded payloads).

    :func:`jsonable` passes it through without walking it: a rolled-up finding holds the
    values of 80,000 GPUs, and converting what needs no conversion was a tenth of the
    aggregation's time.
    """


def jsonable(value: Any) -> Any:
    """Convert records (Structs, NA, enums, tuples) into JSON-ready values."""
    if type(value) in _PLAIN or type(value) is JsonDict:  # the common cases first: already JSON
        return value
    if isinstance(value, NA):
        return {"na": value.reason}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, msgspec.Struct):
        return {k: jsonable(getattr(value, k)) for k in value.__struct_fields__}
    if isinstance(value, float) and value != value:  # NaN is not JSON
        return None
    return value
