"""A whole ``run`` as a library call: node checks alone, one rank under a launcher, or self-launched workers.

``run(RunRequest(...))`` is what ``gpu-preflight run`` does, without a command line::

    from gpu_preflight.run import RunRequest, RunSettings, run
    from gpu_preflight.outputs.options import OutputOptions

    result = run(RunRequest(RunSettings(node_only=True, include=("gpu.*",)),
                            OutputOptions(report_dir="out")))
    result.report.cluster_summary.overall_status, result.exit_code   # a ClusterReport

- node-only (``node_only``, a replay, or only node checks selected): this host's checks, no torch;
- under torchrun, srun, mpirun, SageMaker or a PyTorchJob: this process is one rank, and
  rank 0 (or the rank that took over from it) reports;
- otherwise: one worker per GPU (two CPU workers without GPUs), started and supervised here.

The configuration is resolved once per run, after the GPU-model profile is known and with the
expected GPU count in it, and that one :class:`~gpu_preflight.config.Config` scores the
report, judges it against the history and publishes it. Output is printed only through the
``show`` callback (the CLI's renderer); progress and what was written go to stderr.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import msgspec

from .config import Config
from .config.outputs import outputs_config
from .engine import PROBE_TIMEOUT_S, RunOptions, RunSettings, check_node, resolve
from .findings.model import ClusterReport
from .ids import WORKLOADS_ID
from .model import CheckResult, Finding, Status
from .outputs.options import OutputOptions
from .outputs.publish import annotate, publish
from .registry import all_checks, matching
from .report import build as report_build  # its build looked up per call: tests spy on it
from .report.advice import advise
from .report.build import build_cluster_report
from .report.scores import compute_scores
from .safeio import atomic_writer, describe_error, open_dir

if TYPE_CHECKING:
    from .backends.launcher.topology import Topology
    from .outputs.acceptance import LiveLines
    from .progress import StageView

__all__ = ["EXIT_ERROR", "REQUEST_ENV", "LocaliseOptions", "RunRequest", "RunResult", "RunSettings", "RunUsageError",
           "request_from_env", "run", "worker_env", "worker_request"]

EXIT_ERROR = 3  # could not judge (cli.exits.EXIT_ERROR: the same number for every command)
ONE_NODE = "one node: localisation tests nodes against each other"
REQUEST_ENV = "GPU_PREFLIGHT_REQUEST"  # a self-launched worker's request, as JSON (with GPU_PREFLIGHT_LAUNCHER=self)
WORKER_OUTPUT = ("report_dir", "history", "history_db", "cluster_name")  # what of the outputs a worker needs
Show = Callable[["ClusterReport", OutputOptions], None]


class RunUsageError(Exception):
    """The request cannot start (no place in the job, a pattern that matches no check): exit 3, one line."""


class LocaliseOptions(msgspec.Struct, frozen=True):
    """``--localize``: pairwise or group rounds that find bad nodes after the all-node tests."""

    mode: str | None = None  # None (off), "quick", "full" or "group"
    exclude_file: str | None = None
    exclude_style: str = "lines"  # "lines" or "hostlist"

    def __post_init__(self) -> None:
        if self.mode not in (None, "quick", "full", "group"):
            raise ValueError(f"localise mode must be quick, full or group, got {self.mode!r}")
        if self.exclude_style not in ("lines", "hostlist"):
            raise ValueError(f"exclude_style must be lines or hostlist, got {self.exclude_style!r}")


class RunRequest(msgspec.Struct, frozen=True):
    """One run: what to check, where the report goes, whether to localise bad nodes."""

    run: RunSettings = msgspec.field(default_factory=RunSettings)
    output: OutputOptions = msgspec.field(default_factory=OutputOptions)
    localise: LocaliseOptions = msgspec.field(default_factory=LocaliseOptions)


class RunResult(msgspec.Struct, frozen=True):
    """The typed report (None when this rank did not report: rank 0 or a peer did; ``to_dict()``
    is its JSON) and the exit code."""

    report: ClusterReport | None
    exit_code: int


def run(request: RunRequest, *, show: Show | None = None) -> RunResult:
    """Run ``request`` and return the report with the exit code (0 pass, 1 warn, 2 fail, 3 error).

    Raises :class:`RunUsageError` when the run cannot start and
    :class:`~gpu_preflight.config.ConfigError` for bad configuration, before any check runs.
    """
    return _Run(request, show).start()


def worker_request(request: RunRequest) -> RunRequest:
    """The request a self-launched worker runs: this one's settings, and of its outputs only
    where raw artifacts go and whether the history judges the report (workers report to the
    supervisor's scratch directory and print nothing)."""
    kept = {name: getattr(request.output, name) for name in WORKER_OUTPUT}
    return RunRequest(request.run, OutputOptions(**kept))


def worker_env(request: RunRequest) -> dict[str, str]:
    """The environment that hands a self-launched worker its request, typed values as they are
    (:func:`worker_request`, read back by :func:`request_from_env`): nothing is turned back
    into command-line flags for the worker to parse again."""
    rank = worker_request(request)
    output = {name: getattr(rank.output, name) for name in WORKER_OUTPUT}
    return {REQUEST_ENV: json.dumps({"run": msgspec.structs.asdict(rank.run), "output": output})}


def request_from_env(environ: Mapping[str, str]) -> RunRequest | None:
    """A self-launched worker's request from :func:`worker_env`'s variable (None elsewhere:
    only a worker our supervisor started, ``GPU_PREFLIGHT_LAUNCHER=self``, reads it).
    A value that is not such a request is a ``ValueError``, as a bad flag would be."""
    text = environ.get(REQUEST_ENV)
    if text is None or environ.get("GPU_PREFLIGHT_LAUNCHER") != "self":
        return None
    try:
        data = json.loads(text)
        settings: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in data["run"].items()}
        return RunRequest(RunSettings(**settings), OutputOptions(**data["output"]))
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        raise ValueError(f"{REQUEST_ENV} is not a worker's request: {exc}") from None


def collective_limit_s(settings: RunSettings, nodes: int) -> float:
    """Each collective's and store wait's limit (``collective_timeout_s``, else 60 s on one
    node, 180 s across nodes, x3 with the full suite)."""
    if settings.collective_timeout_s is not None:
        return float(settings.collective_timeout_s)
    base = 60.0 if nodes <= 1 else 180.0
    return base * (3 if settings.suite == "full" else 1)


def rank_probe_limit_s(settings: RunSettings) -> float:
    """Each node probe's and check's limit on a rank: the request's, at most
    :data:`~gpu_preflight.engine.PROBE_TIMEOUT_S`, since the node checks run beside the workloads."""
    asked = settings.probe_timeout_s
    return PROBE_TIMEOUT_S if asked is None else min(float(asked), PROBE_TIMEOUT_S)


def run_budget_s(settings: RunSettings, collective_s: float, window_s: float) -> float:
    """The self-launch supervisor's last resort for the whole run (``run_budget_s``, else
    4 x the collective limit + 120 s + the DCGM stress window)."""
    return float(settings.run_budget_s) if settings.run_budget_s is not None else collective_s * 4 + 120 + window_s


class _Run:
    """One run's state: the request, when it started, and the config once resolved."""

    def __init__(self, request: RunRequest, show: Show | None) -> None:
        self.request, self.show = request, show
        self.settings, self.out, self.loc = request.run, request.output, request.localise
        self.started = time.monotonic()  # the run's wall time prices the checks (cluster_summary.cost_benefit)
        self.resolved: Any = None  # the request's configuration, once _validate has built it

    @property
    def config(self) -> Config:
        return self.resolved.config if self.resolved is not None else Config()

    def start(self) -> RunResult:
        self._validate()
        if self.settings.node_only or self.settings.replay or not self._wants_cluster_checks():
            return self.node_only()
        from .backends.launcher.topology import TopologyError, detect  # not needed by node-only runs

        try:
            topo = detect(os.environ)
        except TopologyError as exc:
            raise RunUsageError(f"Cannot tell this process's place in the job: {exc}") from None
        if topo.is_distributed:
            return self.as_rank(topo)
        return self.self_launched()

    # -- configuration -------------------------------------------------------------------

    def _validate(self) -> None:
        """Configuration, profile and check patterns, checked before any worker starts.

        A typo must be a usage error here (exit 3), not an ERROR finding from every worker later.
        The configuration built here (defaults <- the explicit profile, if any <- site file <-
        environment <- ``--set``, with ``expect_gpus``) is the run's: the node checks start from
        it and hand back the one they judged with (:func:`gpu_preflight.engine.check_node`).
        """
        self.resolved = resolve(self._engine_options(None))
        try:
            matching([*self.settings.include, *self.settings.exclude], "node")
        except KeyError as exc:
            raise RunUsageError(str(exc.args[0])) from None

    def _wants_cluster_checks(self) -> bool:
        """``include`` patterns that select only node checks need no workers."""
        include = self.settings.include
        if not include:
            return True
        return any(spec.scope == "cluster" and spec.matches(p) for spec in all_checks() for p in include)

    def _engine_options(self, probe_timeout_s: float | None) -> RunOptions:
        """The engine's view of this request (:class:`~gpu_preflight.engine.RunOptions`): the
        settings as given, where raw artifacts go, and the configuration already resolved."""
        s = self.settings
        values = msgspec.structs.asdict(s)
        return RunOptions(**{**values, "probe_timeout_s": probe_timeout_s}, report_dir=self.out.report_dir,
                          resolved=self.resolved)

    # -- the three kinds of run -------------------------------------------------------------

    def node_only(self, note: str | None = None) -> RunResult:
        node, judged = check_node(self._engine_options(self.settings.probe_timeout_s))
        if note:
            node.results.append(CheckResult(WORKLOADS_ID, "Distributed workloads", [Finding(
                WORKLOADS_ID, Status.SKIP, node.hostname, "not_run", note,
                recommendation="pip install 'gpu-preflight[torch]' to run GEMM, memory, collectives and training.")],
                0.0))
        config = judged.config
        # assess=False: finish() scores it
        report = report_build.build([node], expected_total_gpus=config.gpu.expected_count, assess=False)
        report, code = self.finish(report, config, [node])
        return RunResult(report, code)

    def as_rank(self, topo: Any) -> RunResult:
        """One rank under a launcher (or under our own supervisor).

        Rank 0 reports; if it goes silent, the first rank to notice takes over the gather. The
        verdict is published only once the report is out, and ranks then leave in the order
        :mod:`gpu_preflight.distributed.leave` describes.
        """
        # start-up: a node-only run launches no ranks and gathers nothing
        from .distributed.leave import verdict_text, write_error_file
        from .distributed.runner import run_rank

        s, loc = self.settings, self.loc
        timeout = collective_limit_s(s, topo.num_nodes)
        result_dir = os.environ.get("GPU_PREFLIGHT_RESULT_DIR")
        view = self._progress_view() if topo.rank == 0 and not topo.self_launched else None  # self: the supervisor's
        try:
            outcome = run_rank(self._engine_options(rank_probe_limit_s(s)), topo, config=self.config,
                               collective_timeout_s=timeout, result_dir=result_dir, view=view,
                               on_result=self._live_lines(topo))
        except Exception as exc:  # the job's store cannot be reached: nothing can be reported from here
            if view is not None:
                view.close()
            line = (f"gpu-preflight: rank {topo.rank} on {topo.node_name} could not join the job: "
                    f"{type(exc).__name__}: {exc}")
            print(line, file=sys.stderr)
            write_error_file(" ".join(line.split()), EXIT_ERROR)
            return RunResult(None, EXIT_ERROR)
        localized = (self._localize(topo, outcome, timeout)
                     if loc.mode and topo.num_nodes > 1 and outcome.formed else None)
        if outcome.gathered is None:
            code = outcome.await_verdict()  # None: rank 0 went silent and this rank reports instead
            if code is not None:
                return RunResult(None, int(outcome.leave(code)))
            localized = None
        assert outcome.gathered is not None  # rank 0, or the rank that took over from it
        outcome.mark("report")
        config = outcome.config
        extra, blocks = ([localized[0]], {"localization": localized[1]}) if localized else ([], {})
        report, code = build_cluster_report(outcome.gathered, config, fail_on=s.fail_on, include=list(s.include),
                                            exclude=list(s.exclude), suite=s.suite, timeout_s=timeout,
                                            extra_results=extra, summary_extra=blocks, assess=False)  # finish() scores
        outcome.quiet()
        excluded = True
        if loc.mode and not localized and not topo.self_launched:  # self-launch: the supervisor says it
            excluded = (self._localize_not_run(ONE_NODE, empty_exclude=True) if topo.num_nodes <= 1 else
                        self._localize_not_run("the process group did not form, so no pair of nodes can be tested"))
        if localized and loc.exclude_file:
            # start-up: a node-only run launches no ranks and gathers nothing
            from .localize.report import write_exclude_file

            path = write_exclude_file(loc.exclude_file, localized[1]["exclude_nodes"], loc.exclude_style)
            print(f"gpu-preflight: exclude list written to {path}", file=sys.stderr)
        if topo.self_launched and result_dir:
            # history findings count in the verdict every rank exits with
            report = annotate(report, self.out, config=config, replayed=bool(s.replay)).applied(report)
            code = report.cluster_summary.exit_code
            with atomic_writer(os.path.join(result_dir, "report.json")) as fh:
                json.dump(report.to_dict(), fh)
        else:
            self._acceptance(outcome.gathered)
            report, code = self.finish(report, config, [])
            code = code if excluded else EXIT_ERROR
        outcome.publish(code, verdict_text(report))
        return RunResult(report, int(outcome.leave(code)))

    def self_launched(self) -> RunResult:
        # start-up: a node-only run launches no ranks and gathers nothing
        from .distributed.gpu_window import window_s
        from .distributed.launch import gathered_from_files, local_gpu_count, supervise, torch_available

        if not torch_available():
            return self.node_only(note="distributed workloads not run: torch is not installed")
        gpus = local_gpu_count()
        config = self.config
        workers = gpus or config.workload.cpu_workers
        timeout = collective_limit_s(self.settings, 1)
        budget = run_budget_s(self.settings, timeout, window_s(self.settings, config))  # + DCGM's stress levels
        with _relayed_lines(self.out.verbose) as lines_env:
            sup = supervise(["run"], workers, budget_s=budget, collective_timeout_s=timeout,
                            view=self._progress_view(), extra_env={**worker_env(self.request), **(lines_env or {})})
        topo = {"launcher": "self", "world_size": workers, "num_nodes": 1, "local_world_size": workers,
                "hostname": os.uname().nodename, "hosts": [os.uname().nodename]}
        gathered = gathered_from_files(sup, workers, topo)
        if sup.report is not None:
            report = ClusterReport.from_dict(sup.report)
        else:
            s = self.settings
            report, _ = build_cluster_report(gathered, config, fail_on=s.fail_on, include=list(s.include),
                                             exclude=list(s.exclude), suite=s.suite, timeout_s=timeout, assess=False)
        excluded = not self.loc.mode or self._localize_not_run(ONE_NODE, empty_exclude=True)
        self._acceptance(gathered)
        report, code = self.finish(report, config, [])
        code = code if excluded else EXIT_ERROR
        _keep_worker_logs(sup, self.out.report_dir)
        return RunResult(report, code)

    # -- after the checks ----------------------------------------------------------------------

    def _live_lines(self, topo: Topology) -> LiveLines | None:
        """The acceptance suite's progress lines as each workload finishes (``verbose``): on this
        process's stderr, or for a self-launched worker in the file its supervisor relays."""
        # start-up: only for the acceptance suite of launched workers, not a node-only run
        from .outputs.acceptance import LINES_ENV, LiveLines, file_lines, stderr_line

        if topo.self_launched:
            path = os.environ.get(LINES_ENV)
            return LiveLines(file_lines(path)) if path else None
        return LiveLines(stderr_line) if self.out.verbose else None

    def rescore(self, report: ClusterReport, config: Config) -> ClusterReport:
        """``report`` scored, advised and priced with the run's ``[report]`` settings, over the
        final findings (history, localisation) and the run's whole wall time (a new value)."""
        report = report.with_run(wall_s=round(time.monotonic() - self.started, 3))
        return report.with_assessment(advise(report, config.report, compute_scores(report, config.report)))

    def finish(self, report: ClusterReport, config: Config, nodes: list[Any]) -> tuple[ClusterReport, int]:
        """Judge against history, score, write the report directory (the report compact, or
        indented with ``pretty``), publish, show; return the final report and the exit code.

        Publishing comes before the verdict so that ``[RESULT]`` closes the verdict. A report
        directory that cannot be written (read-only, full, not a directory, refused as unsafe)
        does not hide the verdict: it is shown as always, then one line says what could not be
        written, and the run exits 3 since its report is not where it was asked to be. Nothing
        half-written is left there (:mod:`gpu_preflight.safeio`), and what is published comes
        from this run, never from a stale report left in the directory.
        """
        out, replayed = self.out, bool(self.settings.replay)
        report = annotate(report, out, config=config, replayed=replayed).applied(report)
        report = self.rescore(report, config)
        unwritten = None
        if out.report_dir:
            from .report.write import write  # brings the HTML renderer: only when a directory is asked for

            try:
                written = write(report, nodes, out.report_dir, pretty=out.pretty, name=out.report_name,
                                wait_s=outputs_config(config).report_dir_wait_s)
                report = written.report
                print(f"gpu-preflight: report written to {written.path}", file=sys.stderr)
            except (OSError, ValueError) as exc:
                unwritten = f"could not write the report to {out.report_dir}: {describe_error(exc, out.report_dir)}"
                out = msgspec.structs.replace(out, report_dir=None)
        publish(report, out, nodes, config=config, replayed=replayed)
        if out.verbose:  # the acceptance suite's per-program return codes, before the verdict
            # start-up: only for the acceptance suite of launched workers, not a node-only run
            from .outputs.acceptance import suite_summary

            if line := suite_summary(report):
                print(line, file=sys.stderr)
        if self.show is not None:
            self.show(report, out)
        if unwritten:
            print(f"gpu-preflight: {unwritten}", file=sys.stderr)
            return report, EXIT_ERROR
        return report, report.cluster_summary.exit_code

    def _acceptance(self, gathered: dict[str, Any]) -> None:
        """``ddp_training_result.json``, where a DDP training smoke ran and a report directory was
        asked for (the suite's progress lines were printed as the workloads finished)."""
        if not self.out.report_dir:
            return
        # start-up: a node-only run gathers nothing and runs no acceptance suite
        from .cluster.aggregate import cluster_facts
        from .outputs.acceptance import ddp_training_result, write_ddp_training_result

        facts = cluster_facts(gathered)
        result = ddp_training_result(facts)
        if self.out.report_dir and result is not None:
            try:
                path = write_ddp_training_result(self.out.report_dir, result)
                if self.out.verbose:  # the report's own line says where the directory is
                    print(f"gpu-preflight: DDP training result written to {path}", file=sys.stderr)
            except (OSError, ValueError) as exc:  # finish() names the directory and exits 3 for it
                print(f"gpu-preflight: DDP training result not written: {describe_error(exc, self.out.report_dir)}",
                      file=sys.stderr)

    # -- localisation and progress -----------------------------------------------------------

    def _localize(self, topo: Any, outcome: Any, timeout: float) -> tuple[Any, dict[str, Any]] | None:
        """Pairwise/group localisation rounds (every rank takes part); rank 0 returns result and block."""
        # start-up: a node-only run launches no ranks and gathers nothing
        from .distributed import localize_rounds as rounds

        plan = outcome.plan
        nbytes, iters = (plan.pair_bytes(), plan.iters) if plan else (4 << 20, 3)
        if outcome.gathered is None:
            rounds.follow(outcome.store, topo, nbytes=nbytes, iters=iters, device=outcome.device,
                          budget_s=timeout * 30)
            return None
        outcome.mark("localize")
        # start-up: a node-only run launches no ranks and gathers nothing
        from .cluster.aggregate import node_names
        from .localize.report import localization_block, localization_result

        loc, wall = rounds.lead(outcome.store, topo, outcome.gathered, mode=self.loc.mode or "quick",
                                floor_gbps=outcome.config.perf.node_link_min_gbps, timeout_s=timeout, nbytes=nbytes,
                                iters=iters, device=outcome.device, settings=outcome.config.localize)
        names = node_names(outcome.gathered)
        return localization_result(loc, names, duration_s=wall), localization_block(loc, names, duration_s=wall)

    def _localize_not_run(self, why: str, *, empty_exclude: bool = False) -> bool:
        return localize_not_run(self.loc, why, empty_exclude=empty_exclude)

    def _progress_view(self) -> StageView | None:
        """The view of a distributed run's stages on stderr (:mod:`gpu_preflight.progress`),
        or None with ``quiet`` or ``GPU_PREFLIGHT_PROGRESS=0``."""
        # start-up: only a launched run shows progress
        from .progress import stage_view, view_mode

        quiet = self.out.quiet
        return None if view_mode(quiet=quiet) == "off" else stage_view(quiet=quiet)


def localize_not_run(loc: LocaliseOptions, why: str, *, empty_exclude: bool = False) -> bool:
    """Localisation that was asked for and cannot run says so. With ``empty_exclude`` (one node:
    nothing can be excluded) an asked-for exclude file is written empty, so a job script reading
    it does not find the last run's list. False when that file could not be written (the run then
    exits 3)."""
    note, ok = "", True
    if loc.exclude_file and empty_exclude:
        # start-up: a node-only run launches no ranks and gathers nothing
        from .localize.report import write_exclude_file

        try:
            note = f"; empty exclude list written to {write_exclude_file(loc.exclude_file, [], loc.exclude_style)}"
        except (OSError, ValueError) as exc:
            ok = False
            note = f"; exclude list not written to {loc.exclude_file}: {describe_error(exc, loc.exclude_file)}"
    print(f"gpu-preflight: --localize not run: {why}{note}", file=sys.stderr)
    return ok


@contextlib.contextmanager
def _relayed_lines(verbose: bool) -> Iterator[dict[str, str] | None]:
    """With ``verbose``, the workers' environment that names a lines file, whose lines are copied
    to stderr as the workers append them (their own stderr goes to their logs)."""
    if not verbose:
        yield None
        return
    # start-up: only for the acceptance suite of launched workers, not a node-only run
    import tempfile

    from .outputs.acceptance import LINES_ENV

    fd, path = tempfile.mkstemp(prefix="gpu-preflight-lines-")
    os.close(fd)
    stop = threading.Event()

    def relay() -> None:
        with open(path, "rb") as fh:
            pending = b""
            while True:
                done = stop.is_set()
                pending += fh.read()
                *whole, pending = pending.split(b"\n")
                for line in whole:
                    sys.stderr.write(line.decode(errors="replace") + "\n")
                if whole:
                    sys.stderr.flush()
                if done:
                    return
                stop.wait(0.1)

    thread = threading.Thread(target=relay, name="gp-lines", daemon=True)
    thread.start()
    try:
        yield {LINES_ENV: path}
    finally:
        stop.set()
        thread.join(5.0)
        with contextlib.suppress(OSError):
            os.unlink(path)


def _keep_worker_logs(sup: Any, report_dir: str | None) -> None:
    """Worker logs go beside the report (``artifacts/workers/``); the scratch directory goes.

    A report directory that cannot be opened was already named by :meth:`_Run.finish`; only a
    failure of the copies themselves is reported here.
    """
    try:
        if report_dir:
            with open_dir(report_dir, create=False) as out:
                try:
                    with out.subdir("artifacts/workers") as dest:
                        for rank, log in sup.logs.items():
                            if log.exists():
                                dest.copy_in(f"rank{rank}.log", log)
                except (OSError, ValueError) as exc:
                    print(f"gpu-preflight: worker logs not kept: {describe_error(exc)}", file=sys.stderr)
    except (OSError, ValueError):
        pass
    finally:
        shutil.rmtree(sup.result_dir, ignore_errors=True)
