"""The field corpus: real tool outputs gathered from public threads and repositories, judged as a user would.

Each family (``nccl-tests``, ``dcgm``, ``kernel``...) is a folder under ``tests/fixtures/field/``
holding the texts as posted and one ``SOURCES.toml`` with a ``[[case]]`` per file: where it came
from (``source``, ``url``, ``provenance``, ``licence``), what the people there concluded
(``concluded``) and the verdict that conclusion calls for (``expect``: the worst status
``gpu-preflight judge FILE`` must give; ``UNRECOGNISED`` is exit 3, "not a text we parse";
``ERROR`` is a text we read but could not judge, e.g. a run cut before its summary), optionally
the check that must carry it (``expect_check``) and the profile to judge with (``expect_profile``).
A held-out case may carry a second, blind label (``expect_rules`` with its ``rules_why``): the
thread's conclusion under the product's documented readiness rules (a persistence mode off that
the text shows WARNs even where the thread saw a healthy node), written without seeing our output,
so that the held-out score can be read twice: against what the thread concluded and against what
our rules call for. A documented rule can change after such a label was written: the case then says
``rules_superseded = "<commit>: <the rule that replaced it>"`` (its labels stay as written: they are
never revised) and its blind rules label is no longer scored, since it measured a rule the product
no longer has; how many are left out is printed beside the rules figure.

Why a held-out quarter: the parsers were built on the corpus they were tested on, so a score
on the same texts says how well they learned those files. A quarter of the *sources* (every
file of one thread or commit falls on one side: a thread's five pastes of one log are one
sample, not five) is put aside by a fixed seed before any parser is changed, and its score
before and after is the figure that says whether the parsers learned the field.
:func:`held_out` is that split; nobody tunes a parser on a held-out case's output (``--show``
lists mismatches of the other cases only).

Each case is judged through the real command (``gpu_preflight.cli.main.main(["judge", ...])``,
in this process: the same path as the ``gpu-preflight`` program, minus the interpreter start).
Prints matched/total and the false-PASS count (a case expected to FAIL, WARN or ERROR that the
command passed, exit 0) per family, per detected kind and per expected verdict, for the held-out
quarter and for the whole corpus, and the held-out score once more with each source one sample
(a page of fifteen pastes weighs what a one-paste thread does: the unit the split draws; the
per-case figure stays the measure). ``tests/test_field_corpus.py`` asserts the same judgement.

    .venv/bin/python bench/bench_field.py [--family nccl-tests] [--show]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import io
import json
import sys
import tomllib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from _selfcheck import fail, require

FIELD = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "field"
SEED = "field-v1:"
VERDICTS = ("PASS", "WARN", "FAIL", "ERROR", "UNRECOGNISED")
NOT_PASSING = frozenset({"WARN", "FAIL", "ERROR"})  # an expected verdict that exit 0 would betray
REQUIRED = ("file", "source", "url", "provenance", "licence", "concluded", "expect")


@dataclass(frozen=True)
class Case:
    """One ``[[case]]`` of a family's ``SOURCES.toml``: the file, where it came from, what it must be judged."""

    family: str
    path: Path
    source: str
    concluded: str
    expect: str
    expect_check: str | None = None
    expect_profile: str | None = None
    inspected: str | None = None  # why a held-out source's outcome was seen: it no longer measures generalisation
    expect_rules: str | None = None  # a held-out case's blind second label: the conclusion under the documented rules
    rules_superseded: str | None = None  # its expect_rules applied a rule replaced since: not scored

    @property
    def held_out(self) -> bool:
        """In the held-out quarter and never looked at: a held-out case whose outcome someone saw (a false PASS
        the suite must fail on, then fixed) says ``inspected = "..."`` and counts with the rest of the corpus."""
        return held_out(self.source) and self.inspected is None

    @property
    def name(self) -> str:
        return f"{self.family}/{self.path.name}"

    def under_rules(self) -> Case:
        """This case expecting its ``expect_rules`` label (its ``expect`` when it has none), so that
        :func:`matched` and :func:`false_pass` score it against the documented rules; ``expect_check``
        names the check that carries ``expect``, so it is kept only where the two labels agree."""
        if self.expect_rules is None or self.expect_rules == self.expect:
            return self
        return replace(self, expect=self.expect_rules, expect_check=None)


@dataclass(frozen=True)
class Outcome:
    """What ``judge`` said of a case: its worst status (or UNRECOGNISED), the exit code, kind and findings."""

    got: str
    exit_code: int
    kind: str
    statuses: dict[str, str]  # check id -> its worst status
    summaries: list[str]


def scored_under_rules(results: Sequence[tuple[Case, Outcome]]) -> list[tuple[Case, Outcome]]:
    """The cases scored against the documented rules: each under its blind label, less those whose label
    applied a rule replaced since (``rules_superseded``)."""
    return [(case.under_rules(), outcome) for case, outcome in results if case.rules_superseded is None]


def held_out(source: str) -> bool:
    """Whether a source is in the held-out quarter: by source, never by file, with a fixed seed."""
    return int(hashlib.sha256((SEED + source).encode()).hexdigest(), 16) % 4 == 0


def load_cases(root: Path = FIELD, families: Sequence[str] = ()) -> list[Case]:
    """Every case of every family (or of ``families``); a malformed manifest raises ``ValueError`` naming it."""
    cases: list[Case] = []
    for manifest in sorted(root.glob("*/SOURCES.toml")):
        family = manifest.parent.name
        if families and family not in families:
            continue
        entries = tomllib.loads(manifest.read_text(encoding="utf-8")).get("case", [])
        for i, entry in enumerate(entries):
            where = f"{manifest}: case {i + 1} ({entry.get('file', '?')})"
            missing = [k for k in REQUIRED if not str(entry.get(k, "")).strip()]
            if missing:
                raise ValueError(f"{where}: missing {', '.join(missing)}")
            if entry["expect"] not in VERDICTS:
                raise ValueError(f"{where}: expect {entry['expect']!r} is not one of {', '.join(VERDICTS)}")
            path = manifest.parent / entry["file"]
            if not path.is_file():
                raise ValueError(f"{where}: no such file {path}")
            if "inspected" in entry and not held_out(entry["source"]):
                raise ValueError(f"{where}: 'inspected' is for a held-out source only")
            _check_rules_label(where, entry)
            cases.append(Case(family, path, entry["source"], entry["concluded"], entry["expect"],
                              entry.get("expect_check"), entry.get("expect_profile"), entry.get("inspected"),
                              entry.get("expect_rules"), entry.get("rules_superseded")))
    return cases


def _check_rules_label(where: str, entry: dict[str, object]) -> None:
    """``expect_rules`` is written blind, so only a case whose outcome nobody has seen may carry it (a held-out
    source, not ``inspected``); it is a verdict, and it comes with ``rules_why`` saying which rule the text shows."""
    if "expect_rules" not in entry:
        for key in ("rules_why", "rules_superseded"):
            if key in entry:
                raise ValueError(f"{where}: '{key}' without 'expect_rules'")
        return
    if not held_out(str(entry["source"])) or "inspected" in entry:
        raise ValueError(f"{where}: 'expect_rules' is for a held-out case only (a held-out source, not inspected)")
    if entry["expect_rules"] not in VERDICTS:
        raise ValueError(f"{where}: expect_rules {entry['expect_rules']!r} is not one of {', '.join(VERDICTS)}")
    if not str(entry.get("rules_why", "")).strip():
        raise ValueError(f"{where}: 'expect_rules' without 'rules_why'")


def judge(case: Case) -> Outcome:
    """Run ``gpu-preflight judge FILE --format json`` in this process and read its report."""
    from gpu_preflight.cli.main import main

    argv = ["judge", str(case.path), "--format", "json"]
    if case.expect_profile:
        argv += ["--profile", case.expect_profile]
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    text = out.getvalue().strip()
    if not text:
        return Outcome("UNRECOGNISED", code, "unrecognised", {}, err.getvalue().strip().splitlines()[-1:])
    from gpu_preflight.model import Status

    findings = json.loads(text)["findings"]
    statuses = {check: Status.worst(f["status"] for f in findings if f["check_id"] == check).value
                for check in dict.fromkeys(f["check_id"] for f in findings)}
    kinds = {f.get("details", {}).get("evidence_kind") for f in findings} - {None}
    summaries = [f"{f['status']} {f['check_id']}: {f['summary']}" for f in findings]
    if set(statuses) == {"evidence.parse"}:
        return Outcome("UNRECOGNISED", code, "unreadable", statuses, summaries)
    got = "PASS" if code == 0 else Status.worst(statuses.values()).value
    return Outcome(got, code, ",".join(sorted(kinds)) or "unknown", statuses, summaries)


def matched(case: Case, outcome: Outcome) -> bool:
    """The command gave the expected worst verdict, carried by ``expect_check`` when one is named."""
    if outcome.got != case.expect:
        return False
    return case.expect_check is None or outcome.statuses.get(case.expect_check) == case.expect


def false_pass(case: Case, outcome: Outcome) -> bool:
    """Expected to FAIL, WARN or ERROR, yet the command exited 0: the failure this corpus exists to catch."""
    return case.expect in NOT_PASSING and outcome.exit_code == 0


def _table(title: str, results: list[tuple[Case, Outcome]]) -> list[str]:
    lines = [f"{title}: {sum(matched(c, o) for c, o in results)}/{len(results)} matched, "
             f"{sum(false_pass(c, o) for c, o in results)} false PASS"]
    for label, key in (("family", lambda c, o: c.family), ("kind", lambda c, o: o.kind),
                       ("expect", lambda c, o: c.expect)):
        groups: dict[str, list[tuple[Case, Outcome]]] = {}
        for case, outcome in results:
            groups.setdefault(key(case, outcome), []).append((case, outcome))
        for name, group in sorted(groups.items()):
            lines.append(f"  {label}={name:24} {sum(matched(c, o) for c, o in group):4}/{len(group):<4} matched  "
                         f"{sum(false_pass(c, o) for c, o in group)} false PASS")
    return lines


def _by_source(results: list[tuple[Case, Outcome]]) -> str:
    """The held-out score with each *source* one sample (the unit the split draws): a page with
    fifteen pastes weighs what a thread with one does. Printed beside the per-case figure, which
    stays the measure; the two differ where misses gather in a few sources."""
    sources: dict[str, list[bool]] = {}
    for case, outcome in results:
        sources.setdefault(case.source, []).append(matched(case, outcome))
    if not sources:
        return "0 sources"
    mean = sum(sum(m) / len(m) for m in sources.values()) / len(sources)
    missed = sum(not all(m) for m in sources.values())
    return f"{len(sources)} sources, mean share matched {100 * mean:.1f} %, {missed} source(s) with a miss"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family", action="append", default=[], help="only this family (repeatable)")
    parser.add_argument("--show", action="store_true",
                        help="list each mismatched case that is not held out, with what judge said")
    args = parser.parse_args(argv)
    require("bench_field", "gpu_preflight.cli.main")
    try:
        cases = load_cases(families=args.family)
    except ValueError as exc:
        fail("bench_field", str(exc))
    if not cases:
        fail("bench_field", f"no case under {FIELD} for {args.family or 'any family'}")
    results = [(case, judge(case)) for case in cases]
    kept = [r for r in results if r[0].held_out]
    print("\n".join(_table("held-out quarter", kept)))
    seen = [c.name for c, _ in results if c.inspected]
    if seen:
        print(f"  ({len(seen)} held-out case(s) inspected and counted with the rest: {', '.join(seen)})")
    ruled = scored_under_rules(kept)
    print(_table("held-out quarter, thread conclusions under the documented rules", ruled)[0])
    withdrawn = Counter(case.rules_superseded for case, _ in kept if case.rules_superseded is not None)
    for why, count in sorted(withdrawn.items()):
        print(f"  ({count} held-out case(s) not scored under the rules: their blind label applied a rule replaced "
              f"since, {why})")
    print(f"held-out quarter by source: threads {_by_source(kept)}; documented rules {_by_source(ruled)}")
    print("\n".join(_table("whole field corpus", results)))
    if args.show:
        for case, outcome in results:
            if not case.held_out and not matched(case, outcome):
                print(f"\n{case.name}: expected {case.expect}{f' on {case.expect_check}' if case.expect_check else ''}"
                      f", got {outcome.got} (exit {outcome.exit_code}); thread: {case.concluded}")
                print("\n".join(f"    {s[:300]}" for s in outcome.summaries))
    return 0


if __name__ == "__main__":
    sys.exit(main())
