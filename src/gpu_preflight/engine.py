"""Run the node checks: select → probe (timeouts, isolation) → evaluate → report.

Fail closed at every step: a probe that raises or times out turns every check that
needs it into ``ERROR``; a check that raises, hangs or says nothing is ``ERROR`` too.
Nothing that could not be measured ever reaches the report as ``PASS``.
"""

from __future__ import annotations

import functools
import os
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

import msgspec
from msgspec.structs import replace

from . import registry
from .checks.evidence import judge_record
from .config import Config, Profile, build_config, find_profile, match_profile
from .config.fields import ValueRange, setting_fields, value_range
from .config.loader import ENV_PREFIX
from .config.schema import GpuCountSettings
from .deadline import Job, Overdue, Timeout, call, run_all
from .ids import EVIDENCE_JUDGE_ID
from .model import CheckResult, Finding, NodeReport, Status, jsonable
from .probes.gpu import ReplayError, load_dump
from .probes.system import replay_hostname
from .registry import CheckContext, CheckSpec, ProbeContext, ProbeState, RunInputs

SUITES = ("quick", "full")
FAIL_ON = ("warn", "fail")
PROBE_TIMEOUT_S = 30.0  # each probe and check, unless the request says otherwise
TIMEOUT_RANGE = ValueRange(0.0, 86_400.0, integer=False, low_open=True, unit="s")  # as `--timeout-s` parses


class RunSettings(msgspec.Struct, frozen=True):
    """What is checked and how: the one run request, from the CLI's flags to the engine.

    Every input is checked here, once, with the rule the CLI's flag parses by (a library
    caller gets the same refusal as a command line). Three time limits, each named for what
    it bounds (``--timeout-s``/``$GPU_PREFLIGHT_TIMEOUT_S`` sets the first two, as its help
    says: "time limit per probe, check and collective"):

    - ``probe_timeout_s``: each node probe and each check (None: 30 s; in a distributed run
      never more than 30 s, since the node checks run beside the workloads);
    - ``collective_timeout_s``: each collective and each wait on the job's store (None: 60 s
      on one node, 180 s across nodes, three times that with the full suite);
    - ``run_budget_s``: the self-launch supervisor's last resort for the whole run (None:
      4 x the collective limit + 120 s + the DCGM stress window).

    ``overrides`` are ``SECTION.KEY=VALUE`` strings, as ``--set`` takes them; ``profile``
    ``"auto"`` (or None) matches the GPU model's profile after the GPU probe.
    """

    suite: str = "quick"
    include: Sequence[str] = ()
    exclude: Sequence[str] = ()
    profile: str | None = "auto"
    config_file: str | None = None
    overrides: Sequence[str] = ()
    expect_gpus: int | None = None
    replay: str | None = None
    kernel_log: str | None = None
    probe_timeout_s: float | None = None
    collective_timeout_s: float | None = None
    run_budget_s: float | None = None
    fail_on: str = "fail"
    node_only: bool = False

    def __post_init__(self) -> None:
        if self.suite not in SUITES:
            raise ValueError(f"suite must be one of {', '.join(SUITES)}, got {self.suite!r}")
        if self.fail_on not in FAIL_ON:
            raise ValueError(f"fail_on must be one of {', '.join(FAIL_ON)}, got {self.fail_on!r}")
        if self.expect_gpus is not None and (problem := _expect_gpus_problem(self.expect_gpus)):
            raise ValueError(f"expect_gpus {problem}, got {self.expect_gpus!r}")
        for name in ("probe_timeout_s", "collective_timeout_s", "run_budget_s"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or TIMEOUT_RANGE.problem(value) is not None):
                raise ValueError(f"{name} must be {TIMEOUT_RANGE.describe()}, got {value!r}")

    @property
    def explicit_profile(self) -> str | None:
        """The profile asked for by name or path; None when the GPU model's is matched (``auto``)."""
        return self.profile if self.profile and self.profile != "auto" else None


@functools.cache
def _expected_count_range() -> ValueRange | None:
    return value_range(next(f for f in setting_fields(GpuCountSettings) if f.name == "expected_count"), int)


def _expect_gpus_problem(count: object) -> str | None:
    """``--expect-gpus``' rule: ``gpu.expected_count``'s own range (what ``--set`` would accept)."""
    if isinstance(count, bool) or not isinstance(count, int):
        return "must be a whole number"
    bounds = _expected_count_range()
    return bounds.problem(count) if bounds else None


class Resolved(msgspec.Struct, frozen=True):
    """A run's configuration, the layers it was built from (for the report) and its profile."""

    config: Config
    sources: list[str]
    profile: Profile | None = None


class RunOptions(RunSettings, frozen=True):
    """The engine's view of a run: the request (:class:`RunSettings`) and where it runs.

    ``resolved``: the run's configuration already built from this request (its explicit
    profile or none), which the probes use; None builds it here. ``state``: what outlives
    one run (a monitor's kernel-log follower, tool cache); ``node_name``: the node's name in
    a distributed job (findings are filed under it).
    """

    report_dir: str | None = None
    environ: Mapping[str, str] | None = None
    state: Mapping[str, Any] | None = None
    node_name: str | None = None
    resolved: Resolved | None = None

    @property
    def probe_limit_s(self) -> float:
        """Each probe's and check's time limit."""
        return PROBE_TIMEOUT_S if self.probe_timeout_s is None else float(self.probe_timeout_s)


def with_expected_gpus(config: Config, count: int | None) -> Config:
    """``config`` with ``gpu.expected_count`` set to ``count`` (``--expect-gpus``, checked by
    :class:`RunSettings`), unchanged for None."""
    if count is None or config.gpu.expected_count == count:
        return config
    return replace(config, gpu=replace(config.gpu, expected_count=count))


CONFIG_CACHE = "config_cache"  # RunOptions.state key of a monitor's ConfigCache


SETTLED_S = 2.0  # a file changed more recently than this is read again at every use


def _file_stamp(path: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """What changes when a file is edited or replaced; None (do not keep what was read from it)
    when it cannot be stat'ed or changed under :data:`SETTLED_S` ago: file times tick in
    clock ticks of a few milliseconds, so a second same-size edit within one tick would
    leave the stamp unchanged."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if time.time_ns() - max(st.st_mtime_ns, st.st_ctime_ns) < SETTLED_S * 1e9:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


class ConfigCache:
    """A monitor's resolved configs, each reused while nothing it was built from has changed.

    A 1-second monitor resolved its config twice a tick (before the probes, and with the
    matched GPU profile after them) so that an edited site file applies at the next tick.
    An entry is keyed on everything :func:`build_config` reads: the profile, the site
    file's identity, size and times, the overrides, the ``GPU_PREFLIGHT_`` variables and
    ``--expect-gpus``; and the Xid policy file the config names is stat'ed again at every
    use. A config that does not build is never kept, so its error is reported every tick;
    nor is one read from a file changed in the last :data:`SETTLED_S`.
    """

    MAX_ENTRIES = 8

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._entries: dict[tuple[Any, ...], tuple[Profile | None, Config, list[str], tuple[Any, ...] | None]] = {}

    def resolve(self, options: RunOptions, profile: Profile | None) -> tuple[Config, list[str]]:
        stamp = _file_stamp(options.config_file) if options.config_file is not None else ()
        env = os.environ if options.environ is None else options.environ
        key = (id(profile), options.config_file, stamp, tuple(options.overrides), options.expect_gpus,
               tuple(sorted((k, v) for k, v in env.items() if k.startswith(ENV_PREFIX))))
        with self._lock:
            kept = self._entries.get(key) if stamp is not None else None
        if kept is not None and kept[0] is profile and _policy_stamp(kept[1]) == kept[3]:
            return kept[1], list(kept[2])
        config, sources = _build_config(options, profile)
        policy = _policy_stamp(config)
        if stamp is not None and (policy is None or policy[1] is not None):
            with self._lock:
                if len(self._entries) >= self.MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = (profile, config, list(sources), policy)
        return config, sources


def _policy_stamp(config: Config) -> tuple[Any, ...] | None:
    path = config.xid.policy_file
    return (path, _file_stamp(path)) if path else None


def _resolve_config(options: RunOptions, profile: Profile | None) -> tuple[Config, list[str]]:
    """The node run's config (from a monitor's :class:`ConfigCache` when it keeps one)."""
    cache = options.state.get(CONFIG_CACHE) if options.state is not None else None
    if isinstance(cache, ConfigCache):
        return cache.resolve(options, profile)
    return _build_config(options, profile)


def _build_config(options: RunOptions, profile: Profile | None) -> tuple[Config, list[str]]:
    """The node run's config; ``expect_gpus`` is set last, over every layer, as a command-line value."""
    config, sources = build_config(profile=profile, config_file=options.config_file,
                                   overrides=list(options.overrides), environ=options.environ)
    if options.expect_gpus is None:
        return config, sources
    return with_expected_gpus(config, options.expect_gpus), (
        sources if "command line" in sources else [*sources, "command line"])


def resolve(options: RunOptions, profile: Profile | None = None) -> Resolved:
    """The run's configuration: defaults <- profile (the request's explicit one, else
    ``profile``) <- site file <- environment <- ``--set``, with ``expect_gpus`` over all.

    Raises :class:`~gpu_preflight.config.ConfigError` (an unknown profile, a bad file or value).
    """
    if options.explicit_profile is not None:
        profile = find_profile(options.explicit_profile)
    config, sources = _resolve_config(options, profile)
    return Resolved(config, sources, profile)


def check_node(options: RunOptions) -> tuple[NodeReport, Resolved]:
    """Run the selected node checks; return the node report and the configuration that judged
    it (with the GPU model's profile once the GPU probe matched one).

    The configuration is the request's (``options.resolved``, else built here) until a profile
    is matched; then it is built once more, with that profile, and returned for the caller to
    score and publish the report with. Raises :class:`~gpu_preflight.config.ConfigError` for
    bad configuration and ``KeyError`` for a ``--check``/``--skip`` pattern that matches no check.
    """
    started = time.perf_counter()
    timestamp = datetime.now(UTC).isoformat()
    specs = registry.select(options.suite, options.include, options.exclude)
    resolved = options.resolved or resolve(options)
    limit = options.probe_limit_s

    inputs = RunInputs(replay=options.replay, kernel_log=options.kernel_log, report_dir=options.report_dir,
                       suite=options.suite)
    needed = sorted({n for spec in specs for n in spec.needs})
    probe_ctx = ProbeContext(resolved.config, inputs, limit, ProbeState(kept=dict(options.state or {})))
    facts, probe_errors = _run_probes(needed, probe_ctx, limit)

    if options.explicit_profile is None and "gpu" in facts:
        matched = match_profile(facts["gpu"].names)
        if matched is not None:
            resolved = resolve(options, matched)

    host = options.node_name or (facts["system"].hostname if "system" in facts else _host_name(options.replay))
    ctx = CheckContext(host=host, facts=facts, config=resolved.config)
    results = run_specs(specs, ctx, probe_errors, limit)
    report = NodeReport(
        hostname=host,
        timestamp=timestamp,
        results=results,
        facts={name: jsonable(value) for name, value in facts.items()},
        profile=resolved.profile.name if resolved.profile else None,
        config_sources=resolved.sources,
        duration_s=time.perf_counter() - started,
        fail_on=options.fail_on,
        raw_artifacts=dict(probe_ctx.artifacts),
    )
    return report, resolved


def run_checks(options: RunOptions | None = None, **kwargs: Any) -> NodeReport:
    """Run the selected node checks and return the node report (:func:`check_node` without the config).

    Accepts a :class:`RunOptions` or its fields as keyword arguments, e.g.
    ``run_checks(replay="node.json", include=["gpu.*"])``; ``timeout_s`` is kept as the old
    spelling of ``probe_timeout_s`` (what it always bounded here). Raises ``ValueError`` for a
    value out of range (``expect_gpus=300``), :class:`~gpu_preflight.config.ConfigError` for
    bad configuration and ``KeyError`` for a ``--check``/``--skip`` pattern that matches no check.
    """
    if "timeout_s" in kwargs:
        kwargs["probe_timeout_s"] = kwargs.pop("timeout_s")
    return check_node(options or RunOptions(**kwargs))[0]


def _host_name(replay: str | None) -> str:
    """This machine's name, or on a replay the recorded node's: a replay judges that node only."""
    if not replay:
        return os.uname().nodename

    try:
        return replay_hostname(load_dump(replay), replay)
    except ReplayError:
        return replay_hostname({}, replay)


def _probe_call(name: str, ctx: ProbeContext, timeout_s: float) -> tuple[float, Callable[[], Any]]:
    """A probe's time limit and the call that runs it."""
    spec = registry.get_probe(name)
    limit = max(timeout_s, registry.probe_budget(name, ctx))  # DCGM r2, nccl-tests: minutes, not the run's seconds
    own = ctx if limit == timeout_s else replace(ctx, timeout_s=limit)
    return limit, lambda: spec.fn(own)


def _run_probes(names: list[str], ctx: ProbeContext, timeout_s: float) -> tuple[dict[str, Any], dict[str, str]]:
    """Run the probes side by side (:func:`gpu_preflight.deadline.run_all`); return facts and,
    for failed or overdue probes, the reason.

    Side by side, because much of a probe's time is spent waiting (on ``dmesg``, ``lspci``,
    ``dcgmi``, a CPU-sampling window, a driver call), and no probe need say so. The price is
    CPU: on the 8-GPU stub, warm in one process, a node run's engine took ~29-37 ms of CPU
    where probes one after another (with a protocol for saying "I wait") took ~20-24 ms; the
    wall time of the whole command moved within the loaded VM's noise."""
    calls = [(name, *_probe_call(name, ctx, timeout_s)) for name in names]
    outcomes = run_all([Job(f"probe {name}", fn, limit) for name, limit, fn in calls], side_by_side=True)
    facts: dict[str, Any] = {}
    errors: dict[str, str] = {}
    for (name, _, _), got in zip(calls, outcomes, strict=True):
        if not isinstance(got, BaseException):
            facts[name] = got
        else:
            errors[name] = str(got) if isinstance(got, Timeout) else f"probe {name} failed: {type(got).__name__}: {got}"
    return facts, errors


def _evaluate(spec: CheckSpec, ctx: CheckContext, probe_errors: dict[str, str]) -> CheckResult:
    """One check, in the calling thread: failed probes, crashes and silence become ERROR."""
    t0 = time.perf_counter()
    failed = [probe_errors[n] for n in spec.needs if n in probe_errors]
    if failed:
        findings = [Finding(spec.id, Status.ERROR, ctx.host, "probe_failed",
                            f"could not gather what this check needs: {'; '.join(failed)}",
                            recommendation="Re-run with --verbose; a hung probe often means a GPU or "
                                           "driver in trouble: check dmesg and nvidia-smi.")]
        return CheckResult(spec.id, spec.title, findings, time.perf_counter() - t0)
    findings, _ = registry.fail_closed(lambda: spec.fn(ctx), check_id=spec.id, subject=ctx.host,
                                       crashed="check_crashed", what="check",
                                       recommendation="This is a gpu-preflight bug: please report it with the "
                                                      "snapshot.",
                                       silent_summary="check produced no finding")
    return CheckResult(spec.id, spec.title, findings, time.perf_counter() - t0)


JUDGE_TIMEOUT_S = 30.0  # a run's default per-check limit: judging one saved output is as quick as a check


def judge_evidence(kind: str, record: Any, config: Config, *, source: str = "evidence",
                   timeout_s: float = JUDGE_TIMEOUT_S) -> list[Finding]:
    """Judge a parsed tool output as the engine runs a check: fail closed and under a time limit.

    :func:`~gpu_preflight.checks.evidence.judge_record` gives the judge's crash or silence
    its own ``evidence.judge`` ERROR (``no_judge``, ``judge_crashed``, ``no_result``); a
    judge that does not return within ``timeout_s`` is one more (``judge_timeout``), and the
    command reports it instead of hanging.
    """
    try:
        return call(lambda: judge_record(kind, record, config, source=source), timeout_s, f"judge {kind}")
    except Timeout:
        return [Finding(EVIDENCE_JUDGE_ID, Status.ERROR, source, "judge_timeout",
                        f"judging {kind} did not finish within {timeout_s:g} s",
                        recommendation="This is a gpu-preflight bug: please report it with the input file.",
                        details={"evidence_kind": kind})]


def _timed_out(spec: CheckSpec, ctx: CheckContext, timeout_s: float) -> CheckResult:
    return CheckResult(spec.id, spec.title, [Finding(spec.id, Status.ERROR, ctx.host, "check_timeout",
                                                     f"check {spec.id} did not finish within {timeout_s:g} s")],
                       timeout_s)


def run_specs(specs: list[CheckSpec], ctx: CheckContext, probe_errors: dict[str, str],
              timeout_s: float) -> list[CheckResult]:
    """Run checks in turn (:func:`gpu_preflight.deadline.run_all`), each under ``timeout_s``:
    one that overruns is an ERROR, and the checks behind it are judged all the same."""
    outcomes = run_all([Job(spec.id, functools.partial(_evaluate, spec, ctx, probe_errors), timeout_s)
                        for spec in specs])
    results: list[CheckResult] = []
    for spec, got in zip(specs, outcomes, strict=True):
        if isinstance(got, Overdue):
            results.append(_timed_out(spec, ctx, timeout_s))
        elif isinstance(got, BaseException):
            raise got
        else:
            results.append(got)
    return results
