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
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import field, fields, replace
from datetime import UTC, datetime
from typing import Any, TypeVar

from . import registry
from .config import Config, ConfigError, Profile, build_config, find_profile, match_profile
from .fastclass import dataclass
from .ids import EVIDENCE_JUDGE_ID
from .model import CheckResult, Finding, NodeReport, Status, jsonable
from .registry import CheckContext, CheckSpec, ProbeContext, ProbeState, RunInputs
from .waiting import reported_to

T = TypeVar("T")


@dataclass
class RunOptions:
    """Everything that shapes one node run (the CLI's ``run`` flags, as a library API)."""

    suite: str = "quick"
    include: list[str] = field(default_factory=list)
    exclude: list[str] = field(default_factory=list)
    profile: str | None = None
    config_file: str | None = None
    overrides: list[str] = field(default_factory=list)
    expect_gpus: int | None = None
    replay: str | None = None
    kernel_log: str | None = None
    report_dir: str | None = None
    timeout_s: float = 30.0
    fail_on: str = "fail"
    environ: Mapping[str, str] | None = None
    state: Mapping[str, Any] | None = None  # what outlives one run (a monitor's kernel-log follower, tool cache)
    workers: WorkerPool | None = None  # a monitor's long-lived threads: no fresh thread per run
    node_name: str | None = None  # the node's name in a distributed job: findings are filed under it


class Timeout(Exception):
    """A probe or check did not finish within its time limit."""


HANDOVER_S = 0.25  # a probe still running after this long no longer holds up the ones queued behind it


class _Worker:
    """One long-lived daemon thread running the jobs it is given, in turn."""

    def __init__(self, pool: WorkerPool) -> None:
        self.pool = pool
        self.abandoned = False
        self._jobs: deque[Callable[[_Worker], None] | None] = deque()
        self._ready = threading.Semaphore(0)
        threading.Thread(target=self._loop, name=f"{pool.name}-{pool.started}", daemon=True).start()

    def submit(self, job: Callable[[_Worker], None] | None) -> None:
        self._jobs.append(job)
        self._ready.release()

    def _loop(self) -> None:
        while True:
            self._ready.acquire()
            job = self._jobs.popleft()
            if job is None:
                return
            job(self)
            if self.abandoned:  # its caller gave up on a job that overran: it may never come back
                return
            self.pool.give_back(self)


class WorkerPool:
    """Threads that run probes and checks, kept between runs by a long-running caller (the monitor).

    Starting two threads per probe every tick, and running the probes side by side, cost a
    1-second monitor more CPU than the probes themselves (thread start-up and GIL hand-offs
    between six concurrent probes). :func:`run_checks` runs the probes in turn on one kept
    thread of the monitor's pool (a one-shot run's own pool, closed after its probes); a
    job that overruns is cut off at its deadline, its thread abandoned (daemon) and a fresh
    one taken.
    """

    def __init__(self, name: str = "engine-worker") -> None:
        self.name = name
        self.started = 0
        self._idle: list[_Worker] = []
        self._lock = threading.Lock()

    def submit(self, job: Callable[[_Worker], None]) -> _Worker:
        """Run ``job(worker)`` on an idle kept thread (a new one when none is idle); return that worker."""
        with self._lock:
            worker = None
            while self._idle and worker is None:
                worker = self._idle.pop()
                worker = None if worker.abandoned else worker
            if worker is None:
                self.started += 1
        worker = worker or _Worker(self)
        worker.submit(job)
        return worker

    def give_back(self, worker: _Worker) -> None:
        with self._lock:
            if not worker.abandoned:
                self._idle.append(worker)

    def close(self) -> None:
        """Let the idle threads end (an abandoned one ends when its call returns)."""
        with self._lock:
            idle, self._idle = self._idle, []
        for worker in idle:
            worker.submit(None)


def call_with_timeout(fn: Callable[[], T], timeout_s: float, name: str) -> T:
    """Run ``fn`` in a daemon thread; raise :class:`Timeout` if it does not return in time.

    A hung call (NVML on a dying GPU, a blocked /proc read) cannot be killed from
    Python, but a daemon thread lets the run report it and exit instead of hanging.
    """
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    thread.join(timeout_s)
    if thread.is_alive():
        raise Timeout(f"{name} did not finish within {timeout_s:g} s")
    if "error" in box:
        raise box["error"]
    return box["value"]  # type: ignore[no-any-return]


def with_expected_gpus(config: Config, count: int | None) -> Config:
    """``config`` with ``gpu.expected_count`` set to ``count`` (``--expect-gpus``), unchanged for None."""
    if count is None or config.gpu.expected_count == count:
        return config
    from .config.fields import value_range
    from .config.schema import GpuConfig

    bounds = value_range(next(f for f in fields(GpuConfig) if f.name == "expected_count"), int)
    problem = "must be a whole number" if isinstance(count, bool) or not isinstance(count, int) else (
        bounds.problem(count) if bounds else None)
    if problem:
        raise ConfigError(f"{problem}, got {count!r}", source="command line", key="gpu.expected_count")
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
        from .config.loader import ENV_PREFIX

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


def run_checks(options: RunOptions | None = None, **kwargs: Any) -> NodeReport:
    """Run the selected node checks and return the node report.

    Accepts a :class:`RunOptions` or its fields as keyword arguments, e.g.
    ``run_checks(replay="node.json", include=["gpu.*"])``. Raises
    :class:`~gpu_preflight.config.ConfigError` for bad configuration and ``KeyError`` for
    a ``--check``/``--skip`` pattern that matches no check.
    """
    opts = options or RunOptions(**kwargs)
    started = time.perf_counter()
    timestamp = datetime.now(UTC).isoformat()
    specs = registry.select(opts.suite, opts.include, opts.exclude)
    explicit = find_profile(opts.profile) if opts.profile and opts.profile != "auto" else None
    config, sources = _resolve_config(opts, explicit)

    inputs = RunInputs(replay=opts.replay, kernel_log=opts.kernel_log, report_dir=opts.report_dir, suite=opts.suite)
    needed = sorted({n for spec in specs for n in spec.needs})
    probe_ctx = ProbeContext(config, inputs, opts.timeout_s, ProbeState(kept=dict(opts.state or {})))
    facts, probe_errors = _run_probes(needed, probe_ctx, opts.timeout_s, opts.workers)

    profile = explicit
    if profile is None and "gpu" in facts:
        profile = match_profile(facts["gpu"].names)
        if profile is not None:
            config, sources = _resolve_config(opts, profile)

    host = opts.node_name or (facts["system"].hostname if "system" in facts else _host_name(opts.replay))
    ctx = CheckContext(host=host, facts=facts, config=config)
    results = run_specs(specs, ctx, probe_errors, opts.timeout_s, workers=opts.workers)
    return NodeReport(
        hostname=host,
        timestamp=timestamp,
        results=results,
        facts={name: jsonable(value) for name, value in facts.items()},
        profile=profile.name if profile else None,
        config_sources=sources,
        duration_s=time.perf_counter() - started,
        fail_on=opts.fail_on,
        raw_artifacts=dict(probe_ctx.artifacts),
    )


def _host_name(replay: str | None) -> str:
    """This machine's name, or on a replay the recorded node's: a replay judges that node only."""
    if not replay:
        return os.uname().nodename
    from .probes.gpu import ReplayError, load_dump
    from .probes.system import replay_hostname

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


def _run_probes(names: list[str], ctx: ProbeContext, timeout_s: float,
                pool: WorkerPool | None = None) -> tuple[dict[str, Any], dict[str, str]]:
    """Run probes one after another on a kept thread of ``pool`` (a fresh pool, closed after,
    when None); return facts and, for failed or overdue probes, the reason.

    Why in turn: what probes do is mostly Python, and run side by side they traded the GIL
    at every ctypes call and read (on 8 stub GPUs ~12 ms more CPU for a node check, and no
    sooner done). Each probe's deadline counts from the start, as when all start at once,
    so a run ends as late as a concurrent one at worst. The probes not yet started go to
    another kept thread (each probe hands over once) as soon as the running one says it
    waits (:func:`gpu_preflight.waiting.waiting`: a tool it runs, a sampling window, a
    stalled NVML call), else once it has run :data:`HANDOVER_S` (or a tenth of the shortest
    deadline, if less): a slow or hung probe delays the others by that much at most, one
    that overruns its deadline is an error naming it and its thread is abandoned. The lane
    that handed over stops once its probe ends, so one lane at a time takes the queue.
    Probes declared ``waits`` start first, so that their waiting overlaps the others' work.
    """
    if pool is None:
        own = WorkerPool("run-probe")
        try:
            return _run_probes(names, ctx, timeout_s, own)
        finally:
            own.close()
    names = sorted(names, key=lambda name: not registry.get_probe(name).waits)  # stable: given order kept
    calls = [(name, *_probe_call(name, ctx, timeout_s)) for name in names]
    count = len(calls)
    handover_s = min([HANDOVER_S] + [limit / 10 for _, limit, _ in calls])
    t0 = time.monotonic()
    outcome: list[tuple[bool, Any] | None] = [None] * count
    started: list[float | None] = [None] * count
    runner: list[_Worker | None] = [None] * count
    resolved = [False] * count
    waits = [False] * count  # the probe said it is about to wait: hand over now
    cursor = [0]
    changed = threading.Condition()

    def said_waiting(i: int) -> None:
        with changed:
            if not waits[i]:
                waits[i] = True
                changed.notify_all()

    def lane(worker: _Worker) -> None:
        while True:
            with changed:
                while cursor[0] < count and resolved[cursor[0]]:
                    cursor[0] += 1  # given up before it started
                if worker.abandoned or cursor[0] >= count:
                    return
                i = cursor[0]
                cursor[0] += 1
                started[i], runner[i] = time.monotonic(), worker
            try:
                with reported_to(functools.partial(said_waiting, i)):
                    result: tuple[bool, Any] = (True, calls[i][2]())
            except BaseException as exc:  # a probe's crash is its error, whatever it raised
                result = (False, exc)
            with changed:
                outcome[i] = result
                if all(outcome[k] is not None or resolved[k] for k in range(count)):
                    changed.notify_all()  # the caller sleeps until then, a deadline or a hand-over
                if i in relieved:  # another lane took the queue over meanwhile: one lane at a time
                    return

    facts: dict[str, Any] = {}
    errors: dict[str, str] = {}
    handed: set[int] = set()
    relieved: set[int] = set()  # handed over to a new lane: the lane running it stops after it
    pool.submit(lane)
    with changed:
        while not all(resolved):
            now = time.monotonic()
            for i, (name, limit, _) in enumerate(calls):
                if resolved[i]:
                    continue
                done = outcome[i]
                if done is not None:
                    resolved[i] = True
                    ok, got = done
                    if ok:
                        facts[name] = got
                    else:
                        errors[name] = str(got) if isinstance(got, Timeout) else \
                            f"probe {name} failed: {type(got).__name__}: {got}"
                elif now >= t0 + limit:
                    resolved[i] = True
                    errors[name] = f"probe {name} did not finish within {limit:g} s"
                    if (stuck := runner[i]) is not None:
                        stuck.abandoned = True
            stalled = [i for i in range(count) if (since := started[i]) is not None and outcome[i] is None
                       and i not in handed and (now - since >= handover_s or resolved[i] or waits[i])]
            if stalled:
                handed.update(stalled)  # timed once: with nothing left to hand over, watching it again spun
                if cursor[0] < count:
                    relieved.update(stalled)
                    pool.submit(lane)
            wake = [t0 + limit for i, (_, limit, _) in enumerate(calls) if not resolved[i]]
            running = [since + handover_s for i in range(count)
                       if (since := started[i]) is not None and outcome[i] is None and i not in handed]
            if not running and cursor[0] < count:
                running.append(now + handover_s)  # the next probe has not started yet: look again by then
            wake += running
            if wake:
                changed.wait(max(0.0, min(wake) - now))
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
    from .checks.evidence import judge_record

    try:
        return call_with_timeout(lambda: judge_record(kind, record, config, source=source), timeout_s,
                                 f"judge {kind}")
    except Timeout:
        return [Finding(EVIDENCE_JUDGE_ID, Status.ERROR, source, "judge_timeout",
                        f"judging {kind} did not finish within {timeout_s:g} s",
                        recommendation="This is a gpu-preflight bug: please report it with the input file.",
                        details={"evidence_kind": kind})]


def _timed_out(spec: CheckSpec, ctx: CheckContext, timeout_s: float) -> CheckResult:
    return CheckResult(spec.id, spec.title, [Finding(spec.id, Status.ERROR, ctx.host, "check_timeout",
                                                     f"check {spec.id} did not finish within {timeout_s:g} s")],
                       timeout_s)


def run_check(spec: CheckSpec, ctx: CheckContext, probe_errors: dict[str, str], timeout_s: float) -> CheckResult:
    """One check in its own thread, under ``timeout_s``."""
    return run_specs([spec], ctx, probe_errors, timeout_s)[0]


def run_specs(specs: list[CheckSpec], ctx: CheckContext, probe_errors: dict[str, str],
              timeout_s: float, workers: WorkerPool | None = None) -> list[CheckResult]:
    """Run checks in order in one worker thread, each under its own time limit.

    Checks are pure and fast, so one thread for all of them keeps a monitoring loop cheap
    (a kept one of ``workers`` when given); a check that overruns is reported as ERROR,
    its thread is abandoned (daemon) and a fresh worker carries on with the next check.
    """
    results: list[CheckResult] = []
    start = 0
    while start < len(specs):
        batch = specs[start:]
        out: list[CheckResult] = []
        progress = _Progress(time.monotonic())

        def work(_worker: object = None, batch: list[CheckSpec] = batch, out: list[CheckResult] = out,
                 progress: _Progress = progress) -> None:
            for spec in batch:
                result = _evaluate(spec, ctx, probe_errors)
                with progress.changed:
                    out.append(result)
                    progress.since = time.monotonic()
                    if len(out) == len(batch):
                        progress.changed.notify()

        worker = None
        if workers is None:
            threading.Thread(target=work, name="run-checks", daemon=True).start()
        else:
            worker = workers.submit(work)
        with progress.changed:
            while len(out) < len(batch) and (left := progress.since + timeout_s - time.monotonic()) > 0:
                progress.changed.wait(left)
            done = list(out)
        results += done
        if len(done) < len(batch):
            if worker is not None:
                worker.abandoned = True
            results.append(_timed_out(batch[len(done)], ctx, timeout_s))
            start += len(done) + 1
        else:
            start = len(specs)
    return results


class _Progress:
    """How far one thread has got through its checks: the caller waits once for all of them
    (one wake-up, not one per check) and times the check in progress from ``since``."""

    def __init__(self, since: float) -> None:
        self.changed = threading.Condition(threading.Lock())
        self.since = since  # when the check in progress started (the previous one ended)
