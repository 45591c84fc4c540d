"""Stand-in tools for the diagnostics tests: small scripts in a tmp directory put on PATH.

A script replays a recorded output (a corpus file, read in place, never copied into the
repo), exits with a chosen status, hangs, or records its arguments, so the real runner
(subprocess, timeouts, process-group kill) is exercised end to end.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from msgspec.structs import fields

from gpu_preflight.config import Config
from gpu_preflight.model import Finding
from gpu_preflight.registry import CheckContext, ProbeContext, ProbeState, RunInputs


def tool(bindir: Path, name: str, body: str) -> Path:
    """An executable ``bindir/name`` running the shell ``body``."""
    bindir.mkdir(parents=True, exist_ok=True)
    path = bindir / name
    path.write_text(f"#!/bin/sh\n{body}\n")
    path.chmod(0o755)
    return path


def replay(bindir: Path, name: str, source: Path | None = None, *, rc: int = 0, stderr: str = "",
           argv_log: Path | None = None, before: str = "") -> Path:
    """``name`` prints ``source`` (and ``stderr`` on stderr), logs its arguments, exits ``rc``."""
    lines = [before] if before else []
    if argv_log is not None:
        lines.append(f'echo "$@" >> {shlex.quote(str(argv_log))}')
    if source is not None:
        lines.append(f"cat {shlex.quote(str(source))}")
    if stderr:
        lines.append(f"printf '%s\\n' {shlex.quote(stderr)} >&2")
    lines.append(f"exit {rc}")
    return tool(bindir, name, "\n".join(lines))


def hang(bindir: Path, name: str, pidfile: Path | None = None) -> Path:
    """``name`` prints a line, starts a child that sleeps, and waits for it (a hung tool with a child)."""
    record = f"echo $! > {shlex.quote(str(pidfile))}\n" if pidfile else ""
    return tool(bindir, name, f"echo started\nsleep 300 &\n{record}wait")


def config(evidence: dict[str, Any] | None = None, **diagnostics: Any) -> Config:
    """A config with ``[diagnostics]`` (and ``[evidence]``) values, whether or not the section is registered yet."""
    from gpu_preflight.config.diagnostics import DiagnosticsConfig
    from gpu_preflight.config.evidence import EvidenceConfig

    cfg = Config()
    setattr(cfg, "diagnostics", DiagnosticsConfig(**diagnostics))  # noqa: B010 - may not be a Config field yet
    if evidence:
        cfg.evidence = EvidenceConfig(**evidence)
    return cfg


def context_from(cfg: Config, options: Mapping[str, Any], timeout_s: float) -> ProbeContext:
    """A probe context from a mapping (``{"replay": ..., "kernel_log": ...}`` plus kept objects):
    the run's inputs by name, everything else kept in the run's state, as a monitor keeps it."""
    names = {f.name for f in fields(RunInputs)}
    inputs = RunInputs(**{k: v for k, v in options.items() if k in names and (k != "suite" or v)})
    return ProbeContext(cfg, inputs, timeout_s, ProbeState(kept={k: v for k, v in options.items() if k not in names}))


def probe_ctx(cfg: Config | None = None, *, timeout_s: float = 30.0, **options: Any) -> ProbeContext:
    return context_from(cfg or config(), options, timeout_s)


def check(check_id: str, fact: str, value: Any, cfg: Config | None = None, host: str = "n1") -> list[Finding]:
    """The findings of a registered check over one fact (the engine's binding of the check id included)."""
    from gpu_preflight.registry import get_check

    spec = get_check(check_id)
    return list(spec.fn(CheckContext(host=host, facts={fact: value}, config=cfg or config())))


def statuses(findings: list[Finding]) -> list[tuple[str, str, str]]:
    return [(f.status.value, f.subject, f.code) for f in findings]
