"""Hostile-input fuzzing shared by ``tests/test_fuzz_hostile.py`` (a bounded slice) and ``bench/bench_fuzz.py``.

Inputs come from the project's own fixtures (``tests/fixtures``), so no corpus is needed:
each evidence fixture is judged as it is, then mutated the ways real files get damaged —
cut at a line or a byte, lines elided, one value garbled, a header given a suffix — and
judged again. For every case the engine runs detection, every parser and the judge, under
a time budget (SIGALRM) and a memory budget (tracemalloc peak), and classifies it:

- ``crash``: an exception other than the documented one-line errors escaped;
- ``hang``: the case ran past its time budget;
- ``memory``: its peak allocation exceeded the budget;
- ``false_pass``: the fixture is not a pass (FAIL/WARN/ERROR) and the mutated text
  judges PASS — the cut or damage hid the problem;
- ``ok`` otherwise.

The NVML snapshot (``--replay``) and the config loader get the same treatment through
their own loaders.
"""

from __future__ import annotations

import contextlib
import random
import re
import signal
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from types import FrameType
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures"
EVIDENCE = FIXTURES / "evidence"
SNAPSHOTS = sorted(FIXTURES.glob("captured/*/snapshot.json"))
SITE_CONFIG = """\
[gpu]
temp_warn_c = 83
expected_count = 8
allowed_compute_modes = ["default", "exclusive_process"]

[evidence]
nccl_busbw_min_gbps = 180.0
dcgm_ignore_tests = ["eud"]
"""
OUTCOMES = ("ok", "false_pass", "hang", "crash", "memory")


class Hang(Exception):
    """Raised by the alarm when a case runs past its time budget."""


@dataclass(frozen=True)
class Case:
    source: str
    mutation: str
    text: str
    failing: bool


@cache
def evidence_fixtures() -> tuple[tuple[str, str], ...]:
    files = sorted(p for p in EVIDENCE.rglob("*") if p.is_file() and p.suffix != ".md")
    return tuple((str(p.relative_to(EVIDENCE)), p.read_bytes().decode("utf-8", errors="replace")) for p in files)


def verdict_of(text: str) -> str:
    """The overall status ``judge`` gives ``text`` (kind detected), as a string."""
    from gpu_preflight.config import Config
    from gpu_preflight.evidence import judge_text
    from gpu_preflight.model import verdict

    findings = judge_text(text, Config(), source="fuzz")
    return str(verdict(f.status for f in findings).value)


@cache
def baselines() -> dict[str, str]:
    return {name: verdict_of(text) for name, text in evidence_fixtures()}


def _garble(rng: random.Random, line: str, *, values_only: bool) -> str | None:
    """One character of ``line`` replaced; with ``values_only`` only inside the value (after ``:``, or a number)."""
    spans: list[tuple[int, int]] = []
    if values_only:
        if ":" in line and line.split(":", 1)[1].strip():
            start = line.index(":") + 1
            spans.append((start + len(line[start:]) - len(line[start:].lstrip()), len(line.rstrip())))
        spans += [(m.start(), m.end()) for m in _TOKEN.finditer(line) if any(c.isdigit() for c in m.group())]
        for word in ("Fail", "FAIL", "Pass", "Yes", "Down", "DOWN", "Active", "ACTIVE", "FAILED", "Warning"):
            at = line.find(word)
            if at >= 0:
                spans.append((at, at + len(word)))
    elif line.strip():
        spans.append((len(line) - len(line.lstrip()), len(line.rstrip())))
    spans = [s for s in spans if s[1] > s[0]]
    if not spans:
        return None
    lo, hi = rng.choice(spans)
    at = rng.randrange(lo, hi)
    return line[:at] + rng.choice("åxQ#|~") + line[at + 1:]


_TOKEN = re.compile(r"\S+")


def mutations(text: str, rng: random.Random, *, lines_per_cut: int | None = None) -> Iterator[tuple[str, str]]:
    """(description, mutated text): every line cut (or a sample), byte cuts, elisions, garbles, header suffixes."""
    lines = text.splitlines(keepends=True)
    cuts = range(len(lines)) if lines_per_cut is None else sorted(rng.sample(range(len(lines)),
                                                                             min(lines_per_cut, len(lines))))
    for k in cuts:
        yield f"cut after line {k}", "".join(lines[:k])
    for _ in range(3):
        n = rng.randrange(len(text) + 1)
        yield f"cut at byte {n}", text[:n]
    if len(lines) > 4:
        a = rng.randrange(1, len(lines) - 1)
        b = rng.randrange(a, min(len(lines), a + 20))
        yield f"lines {a}-{b} elided", "".join([*lines[:a], "...\n", *lines[b:]])
    for _ in range(6):
        i = rng.randrange(len(lines)) if lines else 0
        if lines and (damaged := _garble(rng, lines[i], values_only=True)) is not None:
            yield f"value garbled on line {i + 1}", "".join([*lines[:i], damaged, *lines[i + 1:]])
    gpu_headers = [i for i, line in enumerate(lines) if line.startswith("GPU 0")]
    if gpu_headers:
        i = rng.choice(gpu_headers)
        yield f"header suffix on line {i + 1}", "".join([*lines[:i], lines[i].rstrip("\n") + " (MIG)\n",
                                                         *lines[i + 1:]])


def key_damage(text: str, rng: random.Random, count: int) -> Iterator[tuple[str, str]]:
    """Garbles anywhere in a line, labels included (the bench's long run; labels are not values)."""
    lines = text.splitlines(keepends=True)
    for _ in range(count):
        i = rng.randrange(len(lines)) if lines else 0
        if lines and (damaged := _garble(rng, lines[i], values_only=False)) is not None:
            yield f"any character garbled on line {i + 1}", "".join([*lines[:i], damaged, *lines[i + 1:]])


def evidence_cases(rng: random.Random, *, lines_per_cut: int | None = None,
                   any_damage: int = 0) -> Iterator[Case]:
    base = baselines()
    for name, text in evidence_fixtures():
        failing = base[name] != "PASS"
        for what, mutated in mutations(text, rng, lines_per_cut=lines_per_cut):
            yield Case(name, what, mutated, failing)
        for what, mutated in key_damage(text, rng, any_damage):
            yield Case(name, what, mutated, failing)


def run_case(case: Case, *, time_s: float, memory_mib: float) -> tuple[str, str]:
    """(outcome, detail) of one evidence case: every parser, detection and the judge."""
    from gpu_preflight.parsers.detect import all_kinds, detect_kind
    from gpu_preflight.parsers.errors import ParseError

    def body() -> str:
        for spec in all_kinds():
            with contextlib.suppress(ParseError):
                spec.parse(case.text)
        detect_kind(case.text)
        return verdict_of(case.text)

    outcome, detail = bounded(body, time_s=time_s, memory_mib=memory_mib + len(case.text) * 40 / 2**20)
    if outcome == "ok" and case.failing and detail == "PASS":
        return "false_pass", "judged PASS"
    return outcome, detail


def bounded(fn: Callable[[], Any], *, time_s: float, memory_mib: float) -> tuple[str, str]:
    """Run ``fn`` under an alarm and tracemalloc; (outcome, detail)."""

    def alarm(_signum: int, _frame: FrameType | None) -> None:
        raise Hang

    previous = signal.signal(signal.SIGALRM, alarm)
    tracemalloc.start()
    signal.setitimer(signal.ITIMER_REAL, time_s)
    try:
        result = fn()
    except Hang:
        return "hang", f"over {time_s:g} s"
    except Exception as exc:
        return "crash", f"{type(exc).__name__}: {exc}"[:300]
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    if peak > memory_mib * 2**20:
        return "memory", f"peak {peak / 2**20:.1f} MiB"
    return "ok", str(result)


def replay_cases(rng: random.Random, count: int) -> Iterator[tuple[str, str]]:
    """(description, text) mutations of the recorded NVML snapshots, deep nesting included."""
    for path in SNAPSHOTS:
        text = path.read_text()
        yield f"{path.parent.name}: deep nesting", "[" * 5000 + "]" * 5000
        for what, mutated in [*mutations(text, rng, lines_per_cut=count), *key_damage(text, rng, count)]:
            yield f"{path.parent.name}: {what}", mutated


def run_replay(text: str, tmp: Path, *, time_s: float, memory_mib: float) -> tuple[str, str]:
    """Load a (mutated) snapshot as ``--replay`` does: facts, or one ReplayError line."""
    from gpu_preflight.probes.gpu import ReplayError, facts_from_dump, load_dump

    target = tmp / "snapshot.json"
    target.write_text(text)

    def body() -> str:
        try:
            facts_from_dump(load_dump(target), source="fuzz")
        except ReplayError as exc:
            assert "\n" not in str(exc), exc
            return "refused"
        return "loaded"

    return bounded(body, time_s=time_s, memory_mib=memory_mib + len(text) * 40 / 2**20)


def config_cases(rng: random.Random, count: int) -> Iterator[tuple[str, bytes]]:
    """(description, bytes) site configs: cut, garbled, deep, UTF-16, binary."""
    yield "utf-16", SITE_CONFIG.encode("utf-16")
    yield "deep array", ("[gpu]\nx = " + "[" * 5000 + "]" * 5000 + "\n").encode()
    yield "binary", bytes(range(256))
    for what, mutated in [*mutations(SITE_CONFIG, rng), *key_damage(SITE_CONFIG, rng, count)]:
        yield what, mutated.encode()


def run_config(data: bytes, tmp: Path, *, time_s: float, memory_mib: float) -> tuple[str, str]:
    from gpu_preflight.config import ConfigError
    from gpu_preflight.config.loader import read_file

    target = tmp / "site.toml"
    target.write_bytes(data)

    def body() -> str:
        try:
            read_file(target)
        except ConfigError as exc:
            assert "\n" not in str(exc), exc
            return "refused"
        return "loaded"

    return bounded(body, time_s=time_s, memory_mib=memory_mib)
