"""One rank of a distributed run: node checks, workloads, the payload sent, and the way out.

Every rank measures its own device and takes part in collectives on the world, its node
and (multi-node) one-rank-per-node groups (:mod:`.plan`). Its result goes to rank 0 as a
:class:`~.payload.RankPayload` through the job's store (:mod:`.store`, :mod:`.gather`), and a
heartbeat in the same store lets rank 0 name a rank that stopped answering within seconds
instead of waiting out every timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
from collections.abc import Callable, Mapping
from datetime import timedelta
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
from msgspec.structs import replace

from ..backends.kernel_log import XidWatch
from ..backends.launcher.identity import NodeIdentity, measure
from ..backends.launcher.topology import SAGEMAKER_RESOURCE_CONFIG, Launcher, Topology, sagemaker_hosts
from ..cluster.aggregate import node_info
from ..config import Config
from ..config.diagnostics import diagnostics_config
from ..config.load import load_config
from ..config.report_schema import report_config
from ..deadline import Later, Timeout, call
from ..diagnostics.window import GpuWindow
from ..engine import RunOptions, check_node
from ..findings.canonical import node_entry, save_artifacts
from ..workloads import sampling
from ..workloads.collectives import CollectiveTimeout, run_collective
from ..workloads.compute import run_gemm
from ..workloads.links import run_star
from ..workloads.memory import run_memory
from ..workloads.stack import read_stack
from ..workloads.training import run_ddp, run_single
from . import gpu_window
from .connectivity import start as start_connectivity
from .gather import gather, post_node_bundle
from .hooks import Hooks, hooks_from_env
from .leave import carries_verdict, wait_gone, write_error_file
from .payload import FORMATION_OP, Hello, RankPayload
from .pingpong import exchange_pingpong
from .plan import Plan, layout, make_plan, node_ranks, report_parameters, steps_for
from .stages import SCAN_RANKS, Marks
from .store import (
    PREFIX,
    REPORTER_KEY,
    STALE_S,
    Heartbeat,
    KVStore,
    connect_store,
    form_group,
    get_text,
    local_pids,
    silent,
    wait_count,
    wait_key,
)
from .watch import JobWatch

__all__ = ["MAX_PAYLOAD", "RankOutcome", "RankRun", "ResultSink", "node_payload", "run_rank", "stage"]

MAX_PAYLOAD = 4 << 20  # a rank's result is bounded; raw artifacts stay on the node
ResultSink = Callable[[Topology, str, Any], None]
"""Hears a rank's results as each workload finishes, before anything is gathered: ``("env",
{"stack", "gpu"})`` once the stack is read (``gpu``: driver and GPU names from NVML, or None),
then ``("gemm", [...])``, ``("train", {...})``, ``("collective", entry)`` per group sweep this
rank reports or saw fail, and ``("ddp", {...})``. The acceptance suite's progress lines
(:class:`gpu_preflight.outputs.acceptance.LiveLines`) are printed from it."""


class RankRun(msgspec.Struct):
    """State of one rank's run, filled stage by stage; :meth:`payload` is what it sends."""

    topo: Topology
    identity: dict[str, Any]
    errors: list[str] = []
    collectives: list[dict[str, Any]] = []
    results: dict[str, Any] = {}  # stack, gemm, ..., load, load_xids, node_entry
    broken: str | None = None
    sampler: Any = None  # workloads.sampling.RankSampler: marks each phase of this rank's GPU
    marks: Marks | None = None  # the job's per-phase counters, for whoever watches its progress
    hooks: Hooks = msgspec.field(default_factory=Hooks)
    on_result: ResultSink | None = None

    def tell(self, name: str, value: Any) -> None:
        """Hand a finished workload's result to ``on_result``; a sink that fails costs nothing else."""
        if self.on_result is not None:
            with contextlib.suppress(Exception):
                self.on_result(self.topo, name, value)

    def phase(self, name: str) -> None:
        """The workload phase that starts now, for the under-load series."""
        if self.sampler is not None:
            self.sampler.mark(name)

    def payload(self) -> RankPayload:
        return RankPayload.own({**self.identity, "errors": self.errors, "collectives": self.collectives,
                                **self.results})


def stage(store: KVStore, rank: int, name: str, marks: Marks | None = None, hooks: Hooks | None = None) -> None:
    """The rank enters a stage: written for the progress view and counted per phase; hooks see it."""
    store.set(f"{PREFIX}/progress/{rank}", name)
    if marks is not None:
        marks.enter(name)
    if hooks is not None:
        hooks.stage(rank, name)


class RankOutcome(msgspec.Struct):
    """The end of a rank's run: the reporting rank holds the gather; every rank leaves in order.

    Rank 0 reports unless it went silent (stopped, hung, dead): then the first rank to notice
    its stale heartbeat takes over the gather (:meth:`await_verdict`). How ranks exit is in
    :mod:`gpu_preflight.distributed.leave`.
    """

    gathered: dict[str, Any] | None
    config: Config
    store: KVStore
    beat: Heartbeat
    collective_timeout_s: float
    device: Any = None
    plan: Plan | None = None
    topo: Topology | None = None
    absent: tuple[int, ...] = ()
    formed: bool = True
    line: str = ""
    decided: bool = False
    watch: Any = None  # distributed.watch.JobWatch: the reporting rank's progress view, until it reports
    marks: Marks | None = None
    hooks: Hooks = msgspec.field(default_factory=Hooks)

    def mark(self, name: str) -> None:
        """The reporting rank's step after the gather (``localize``, ``report``), for the progress view."""
        if self.topo is not None:
            with contextlib.suppress(Exception):  # a store gone at the end must not cost the report
                stage(self.store, self.topo.rank, name, self.marks, self.hooks)

    def quiet(self) -> None:
        """Stop showing progress (before the report or any other line is printed)."""
        if self.watch is not None:
            self.watch.stop()
            self.watch = None

    def publish(self, code: int, line: str = "") -> None:
        """The verdict every rank leaves with (and the line launchers show for it)."""
        self.line = line
        self.store.set(f"{PREFIX}/verdict", json.dumps({"code": code, "line": line}))

    def await_verdict(self) -> int | None:
        """The reporting rank's exit code; ``None`` when it went silent and this rank takes over
        (``gathered`` is then filled). 3 when no verdict came within the bound."""
        topo = self.topo
        deadline = time.monotonic() + self.collective_timeout_s + STALE_S + 60
        key = f"{PREFIX}/verdict"
        while True:
            held = get_text(self.store, REPORTER_KEY)
            reporter = int(held or 0)
            if wait_key(self.store, key, deadline, partial(self._silent, reporter)):
                try:
                    data = json.loads(bytes(self.store.get(key)).decode())
                    self.line = str(data.get("line", "")) if isinstance(data, dict) else ""
                    code = int(data["code"] if isinstance(data, dict) else data)
                except Exception:  # the store host went away after deciding
                    return 3
                self.decided = True
                return code
            if time.monotonic() >= deadline or topo is None:
                return 3
            me = str(topo.rank)
            try:
                now = bytes(self.store.compare_set(REPORTER_KEY, held or "", me)).decode()
            except Exception:
                return 3
            if now == me:
                self.gathered = gather(self.store, topo, deadline=time.monotonic() + 2 * STALE_S,
                                       absent=self.absent)
                return None

    def leave(self, code: int) -> int:
        """Exit in order: this rank's exit code, after the waits that keep launchers calm.

        Without a published verdict (no reporting rank answered) every rank exits with ``code``.
        """
        # optional: torch comes with the [torch] extra, not with a node-only install
        import torch.distributed as dist

        self.quiet()
        _destroy(dist)
        topo = self.topo
        if topo is None or not (self.decided or self.gathered is not None):
            self.beat.stop.set()
            write_error_file(self.line or f"gpu-preflight: exit {code}", code)
            return code
        reporting = self.gathered is not None
        node = [r for r in node_ranks(topo, topo.node_rank) if r == topo.rank or not self._silent(r)]
        carry = carries_verdict(topo.launcher, reporting=reporting, node_carrier=node[0] == topo.rank)
        if carry:
            end = time.monotonic() + STALE_S
            if reporting:
                gone = len((self.gathered or {}).get("missing") or ())
                wait_count(self.store, f"{PREFIX}/left", topo.world_size - 1 - gone, end)
            if topo.launcher is Launcher.TORCHRUN and node[0] == topo.rank:  # its agent stops the node at this exit
                mates = node[1:]
                wait_count(self.store, f"{PREFIX}/left/{topo.node_rank}", len(mates), end)
                wait_gone(local_pids(self.store, topo, mates), min(end, time.monotonic() + 5.0))
            write_error_file(self.line or f"gpu-preflight: exit {code}", code)
        with contextlib.suppress(Exception):
            self.store.add(f"{PREFIX}/left/{topo.node_rank}", 1)
            self.store.add(f"{PREFIX}/left", 1)
        self.beat.stop.set()
        return code if carry else 0

    def _silent(self, rank: int) -> bool:
        return silent(self.store, rank) or (rank in self.absent
                                            and get_text(self.store, f"{PREFIX}/beat/{rank}") is None)


def run_rank(opts: RunOptions, topo: Topology, *, config: Config, collective_timeout_s: float,
             result_dir: str | None = None, view: Any = None, hooks: Hooks | None = None,
             on_result: ResultSink | None = None) -> RankOutcome:
    """Run this rank; rank 0's outcome also holds the gathered payloads (``{"payloads", "missing", ...}``).

    ``config`` is the run's, resolved once (:mod:`gpu_preflight.run`); on a node leader, the
    node checks hand back the one they judged with (with the GPU model's profile once it
    matched one: :func:`gpu_preflight.engine.check_node`), which judges the node section and
    travels in the outcome. ``opts.probe_timeout_s`` bounds each node probe and check;
    ``collective_timeout_s`` each collective and each wait on the job's store. ``on_result``
    (:data:`ResultSink`) hears each workload's result on this rank as it finishes.

    ``view`` (a :class:`~gpu_preflight.progress.StageView`, reporting rank only) shows
    the job's stages and what they wait on until the outcome's :meth:`RankOutcome.quiet`.
    ``hooks``: the rank hooks (:mod:`.hooks`); by default the ones ``GPU_PREFLIGHT_RANK_HOOKS`` names.
    """
    hooks = hooks if hooks is not None else hooks_from_env(os.environ)
    node_checks = None
    window_s = gpu_window.window_s(opts, config)  # DCGM's stress levels first, before any rank touches CUDA
    window = GpuWindow() if window_s and topo.local_rank == 0 else None
    if topo.local_rank == 0:  # node checks overlap torch start-up and the workloads
        checks = replace(opts, node_name=topo.node_name,  # findings under the node's name in the job
                         state=gpu_window.with_window(opts.state, window))
        node_checks = Later(lambda: check_node(checks), "node checks")
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch
    import torch.distributed as dist

    cuda = torch.cuda.is_available() and torch.cuda.device_count() > topo.local_rank  # no CUDA context yet
    device = torch.device(f"cuda:{topo.local_rank}") if cuda else torch.device("cpu")
    plan = replace(make_plan(config, opts.suite, cuda, topo), gpu_window=window_s > 0)
    store = connect_store(topo, collective_timeout_s)  # results and heartbeats never depend on the process group
    beat = Heartbeat(store, topo.rank, lost_after_s=collective_timeout_s + 2 * STALE_S, where=topo.node_name,
                     world_size=topo.world_size)
    run = RankRun(topo, {"rank": topo.rank, "local_rank": topo.local_rank, "node_rank": topo.node_rank,
                         "hostname": topo.hostname or socket.gethostname(), "node_name": topo.node_name,
                         "device": str(device)},
                  marks=Marks(store, topo.node_rank, per_node=topo.world_size > SCAN_RANKS, rank=topo.rank),
                  hooks=hooks, on_result=on_result)
    reach = None  # a node leader's name lookups and connects of the other nodes, measured in the background
    if topo.local_rank == 0:
        run.results["identity"] = node_identity(topo, collective_timeout_s).to_dict()
        reach = start_connectivity(store, topo, run.results["identity"], diagnostics_config(config),
                                   collective_timeout_s)
    if topo.rank == 0:
        store.set(f"{PREFIX}/steps", json.dumps(steps_for(plan, topo)))
    stage(store, topo.rank, "arrive", run.marks, hooks)
    store.set(f"{PREFIX}/hello/{topo.rank}", Hello(
        hostname=run.identity["hostname"], node_name=run.identity["node_name"], node_rank=run.identity["node_rank"],
        local_rank=run.identity["local_rank"], pid=os.getpid()).to_json())
    beat.start()
    watch = None
    if view is not None:
        watch = JobWatch(store, topo, view).start()
    if window_s:
        stage(store, topo.rank, "dcgm", run.marks, hooks)
        gpu_window.hold(store, topo, window, window_s, node_checks.running if node_checks is not None else None)
    if cuda:
        torch.cuda.set_device(device)  # makes the CUDA context: after the node's GPU window
    run.broken, absent = form_group(store, topo, collective_timeout_s)
    if run.broken is None:
        try:
            dist.init_process_group("nccl" if cuda else "gloo", store=dist.PrefixStore(f"{PREFIX}/pg", store),  # type: ignore[attr-defined, arg-type]
                                    timeout=timedelta(seconds=collective_timeout_s), rank=topo.rank,
                                    world_size=topo.world_size)
        except Exception as exc:  # a rank died between arriving and joining
            run.broken = f"process group not formed: {type(exc).__name__}: {exc}"
    formed = run.broken is None
    if run.broken:  # judged like a collective that failed: nothing between ranks was measured
        run.errors.append(run.broken)
        run.collectives.append({"op": FORMATION_OP, "group": "all", "scope": "distributed",
                                "ranks": list(range(topo.world_size)), "success": False,
                                "error": run.broken, "results": []})
        run.tell("collective", run.collectives[-1])
    if topo.local_rank == 0:  # the collectives' sizes and iterations, for the report (any leader's)
        run.results["test_parameters"] = report_parameters(plan, topo, opts.suite)

    load_cfg = load_config(config)
    run.sampler = sampling.start(device, load_cfg)  # this rank's GPU under load (inert on CPU workers)
    xids = XidWatch() if cuda and topo.local_rank == 0 else None  # the node leader, for its node
    try:
        _workloads(run, store, plan, device, config, collective_timeout_s)
    except Exception as exc:  # a workload bug must not lose the rest of the report
        run.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        run.sampler.finish(run.results, load_cfg,
                           series=topo.num_nodes <= report_config(config).detail_max_nodes)
        if xids is not None:
            xids.finish(run.results)
    node_report = None
    if node_checks is not None:
        if node_checks.running():
            stage(store, topo.rank, "node_checks", run.marks, hooks)
        with contextlib.suppress(Exception):  # crashed or overdue: "node checks did not finish" below
            node_report, judged = node_checks.result(opts.probe_limit_s * 3)
            config = judged.config
    if node_report is not None:
        run.results["node_entry"] = node_payload(node_report, topo, config, opts.report_dir,
                                                 run.results.get("identity"))
    elif topo.local_rank == 0:
        run.errors.append("node checks did not finish")
    if reach is not None:
        run.results["connectivity"] = reach.result()
    stage(store, topo.rank, "done", run.marks, hooks)
    payload = run.payload()
    text = payload.to_json()
    if len(text) > MAX_PAYLOAD:
        payload = replace(payload, node_entry=None, errors=[
            *(payload.errors or ()), f"payload of {len(text)} bytes exceeds {MAX_PAYLOAD}; node report dropped"])
        text = payload.to_json()
    if result_dir:
        Path(result_dir, f"rank{topo.rank}.json").write_text(text)
    store.set(f"{PREFIX}/payload/{topo.rank}", text)
    if topo.local_rank == 0:  # node leaders bundle their node's payloads: rank 0 reads one key per node
        post_node_bundle(store, topo, deadline=time.monotonic() + collective_timeout_s + STALE_S, absent=absent)
    gathered = (gather(store, topo, deadline=time.monotonic() + collective_timeout_s + 2 * STALE_S, absent=absent)
                if topo.rank == 0 else None)
    return RankOutcome(gathered, config, store, beat, collective_timeout_s, device, plan, topo, absent, formed,
                       watch=watch, marks=run.marks, hooks=hooks)


def node_identity(topo: Topology, timeout_s: float, env: Mapping[str, str] | None = None) -> NodeIdentity:
    """What this node says about itself (:mod:`.identity`), its fully qualified name read within
    a few seconds (it may ask DNS) or left out."""
    environ = os.environ if env is None else env

    def fqdn() -> str | None:
        try:
            return call(socket.getfqdn, min(timeout_s, 3.0), "fqdn") or None
        except (Timeout, OSError):
            return None

    return measure(environ, hostname=os.uname().nodename, node_rank=topo.node_rank, job_hosts=topo.hosts,
                   sagemaker_host=sagemaker_hosts(environ, SAGEMAKER_RESOURCE_CONFIG)[1] or None,
                   master_addr=topo.master_addr, master_port=topo.master_port, fqdn=fqdn)


def node_payload(report: Any, topo: Topology, config: Config, report_dir: str | None,
                 identity: dict[str, Any] | None = None) -> dict[str, Any]:
    """The node leader's contribution to the cluster report, built here rather than on rank 0.

    Above ``report.detail_max_nodes`` nodes the PASS and SKIP findings stay on the node (in
    ``artifacts/node_<i>/node_report.json`` with ``--report-dir``) and only the facts the
    cluster report reads travel: rank 0 of a 10,000-node job places sections, it does not
    rebuild them.
    """
    key = f"node_{topo.node_rank}"
    detail = topo.num_nodes <= report_config(config).detail_max_nodes
    if not detail:
        report.raw_artifacts["node_report"] = ("node_report.json", json.dumps(report.to_dict(), default=str))
    if report_dir:  # raw outputs stay on the node, beside where the report will be
        report.artifacts = save_artifacts(report, Path(report_dir), key)
    info = node_info(topo.node_rank, topo.num_nodes, topo.world_size, topo.local_world_size,
                     topo.node_name or topo.hostname or socket.gethostname())
    if identity:
        info["identity"] = identity
    entry: dict[str, Any] = node_entry(report, key, info, detail=detail)
    return entry


def _failed(op: str, group: Any, error: str) -> dict[str, Any]:
    return {"op": op, "group": group.name, "scope": group.scope, "ranks": group.ranks, "success": False,
            "error": error, "results": []}


def _workloads(run: RankRun, store: KVStore, plan: Plan, device: Any, config: Config, timeout_s: float) -> None:
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch.distributed as dist

    rank, p, hooks = run.topo.rank, run.results, run.hooks
    stage(store, rank, "stack", run.marks, hooks)
    p["stack"] = read_stack(run.topo.local_rank).to_dict()
    if run.on_result is not None:
        run.tell("env", {"stack": p["stack"], "gpu": _nvml_gpus()})  # NVML's view even where CUDA is not up
    stage(store, rank, "gemm", run.marks, hooks)
    p["gemm"] = []
    for dt in plan.gemm_dtypes:
        store.set(f"{PREFIX}/progress/{rank}", f"gemm {dt}")
        run.phase(f"gemm_{dt}")
        p["gemm"].append(run_gemm(device, dt, plan.gemm_n, plan.gemm_iters, plan.gemm_seconds).to_dict())
    run.tell("gemm", p["gemm"])
    if plan.memory:
        stage(store, rank, "memory", run.marks, hooks)
        run.phase("memory")
        w = config.workload
        p["memory"] = run_memory(device, copy_bytes=1 << 30, transfer_bytes=256 << 20,
                                 pattern_fraction=w.memory_test_fraction).to_dict()
    stage(store, rank, "train", run.marks, hooks)
    run.phase("train")
    p["train"] = run_single(device, plan.train_steps, config.perf.train_min_loss_drop,
                            batch=plan.train_batch).to_dict()
    run.tell("train", p["train"])
    if run.broken:  # no process group: nothing to measure between ranks
        return
    groups = layout(run.topo)
    for g in groups:
        g.handle = dist.new_group(g.ranks) if len(g.ranks) < run.topo.world_size else None
    for g in groups:
        if rank not in g.ranks or len(g.ranks) < 2:
            continue
        for op in plan.ops:
            stage(store, rank, f"{op}@{g.name}", run.marks, hooks)
            run.phase(op)
            try:
                res = run_collective(op, group=g.handle, ranks=g.ranks, group_name=g.name, sizes=plan.sizes,
                                     iters=plan.iters, warmup=plan.warmup, device=device, timeout_s=timeout_s,
                                     inspect=hooks.inspect)
            except CollectiveTimeout as exc:
                run.broken = f"{op} on group {g.name}: {exc}"
                run.errors.append(run.broken)
                run.collectives.append(_failed(op, g, str(exc)))
                run.tell("collective", run.collectives[-1])
                return  # the process group is unusable after a timeout
            except Exception as exc:  # a peer died: gloo/NCCL report a connection error
                run.broken = f"{op} on group {g.name}: {type(exc).__name__}: {exc}"
                run.errors.append(run.broken)
                run.collectives.append(_failed(op, g, run.broken))
                run.tell("collective", run.collectives[-1])
                return
            if rank == g.ranks[0]:  # every member measured the same sweep: its lowest rank reports it
                run.collectives.append({**res.to_dict(), "scope": g.scope})
                run.tell("collective", run.collectives[-1])
    if run.topo.num_nodes > 1:
        stage(store, rank, "links", run.marks, hooks)
        run.phase("links")
        per_node = max(run.topo.local_world_size, 1)
        p["links"] = run_star([n * per_node for n in range(run.topo.num_nodes)], nbytes=plan.pair_bytes(),
                              iters=plan.iters, device=device, timeout_s=timeout_s)
        if run.topo.local_rank == 0:  # node leaders: libfabric fi_pingpong, node 2k serves node 2k+1

            stage(store, rank, "pingpong", run.marks, hooks)
            p["pingpong"] = exchange_pingpong(store, run.topo.node_rank, run.topo.num_nodes, run.topo.master_addr,
                                              diagnostics_config(config), wait_s=timeout_s, prefix=PREFIX)
    if run.topo.world_size > 1:
        stage(store, rank, "ddp", run.marks, hooks)
        run.phase("ddp")
        ddp = run_ddp(device, plan.train_steps, config.perf.train_min_loss_drop, batch=plan.train_batch).to_dict()
        if rank == 0:  # every rank gathered the same digests: rank 0 speaks for the job
            p["ddp"] = ddp
        run.tell("ddp", ddp)


def _nvml_gpus() -> dict[str, Any] | None:
    """The driver and GPU names, as ``nvidia-smi -L`` lists them, for the ``[ENV]`` line (None without NVML)."""
    try:
        # optional: without nvidia-ml-py (or its library) this reads as no NVML, not an error
        import pynvml

        pynvml.nvmlInit()
        try:
            count = pynvml.nvmlDeviceGetCount()
            names = [pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(i)) for i in range(count)]
            driver = pynvml.nvmlSystemGetDriverVersion()
        finally:
            pynvml.nvmlShutdown()
    except Exception:
        return None
    text = [n.decode() if isinstance(n, bytes) else str(n) for n in names]
    return {"driver_version": driver.decode() if isinstance(driver, bytes) else str(driver),
            "gpus": [{"name": n} for n in text]}


def _destroy(dist: Any) -> None:
    """Tear down the process group without risking a hang on a broken one."""
    if dist.is_initialized():
        with contextlib.suppress(Exception):  # a failed or hung teardown changes nothing we report
            call(dist.destroy_process_group, 5.0, "destroy process group")
