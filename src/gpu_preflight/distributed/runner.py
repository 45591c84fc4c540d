"""One rank of a distributed run: node checks, workloads, and the gather to rank 0.

Every rank measures its own device and takes part in collectives on the world, its node
and (multi-node) one-rank-per-node groups. Results travel to rank 0 through the c10d
key-value store, not through collectives: a broken process group (a dead or stopped
peer) cannot stop the gather. A heartbeat per rank in the same store lets rank 0 name a
rank that stopped answering within seconds instead of waiting out every timeout.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sys
import threading
import time
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..config import Config
from ..engine import RunOptions, run_checks
from .stages import PREFIX as PREFIX  # every key of the job lives under it
from .stages import SCAN_RANKS, Marks
from .topology import Topology

FORMATION_OP = "init_process_group"  # a process group that did not form, reported as a failed collective
HEARTBEAT_S = 1.0
STALE_S = 10.0  # a rank whose heartbeat is this old is dead or stopped
MAX_PAYLOAD = 4 << 20  # a rank's result is bounded; raw artifacts stay on the node


@dataclass
class Plan:
    """What this rank runs, derived from the suite, the device and the config."""

    sizes: list[int]
    iters: int
    warmup: int
    gemm_dtypes: list[str]
    gemm_n: int
    gemm_iters: int
    gemm_seconds: float | None
    memory: bool
    train_steps: int
    ops: tuple[str, ...] = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")


def make_plan(config: Config, suite: str, cuda: bool) -> Plan:
    w = config.workload
    if cuda:
        top = w.collective_max_bytes_full_gpu if suite == "full" else w.collective_max_bytes_quick_gpu
        start = 8 if suite == "full" else 1 << 20
        factor = 2 if suite == "full" else 8
        iters, dtypes, n = w.collective_iters, list(w.gemm_dtypes_gpu), w.gemm_n_gpu
        seconds: float | None = w.gemm_seconds_full if suite == "full" else w.gemm_seconds_quick
        steps = w.train_steps
    else:
        top, start, factor = w.collective_max_bytes_cpu, 1 << 10, 32
        iters, dtypes, n, seconds = 3, ["fp32"], w.gemm_n_cpu, None
        steps = min(w.train_steps, 25)  # CPU ranks share cores: keep the smoke short
    sizes, size = [], start
    while size < top:
        sizes.append(size)
        size *= factor
    sizes.append(top)
    return Plan(sizes, iters, 1, dtypes, n, 3 if not cuda else 5, seconds, cuda, steps)


@dataclass
class Group:
    name: str
    scope: str  # "distributed" (all ranks), "intra_node", "inter_node"
    ranks: list[int]
    handle: Any = None


def layout(topo: Topology) -> list[Group]:
    """Groups every rank creates in the same order: world, each node, one rank per node."""
    world = list(range(topo.world_size))
    groups = [Group("all", "distributed", world)]
    per_node = max(topo.local_world_size, 1)
    if topo.num_nodes > 1 and per_node > 1:  # with one rank per node, these groups would repeat "all"
        groups += [Group(f"node{n}", "intra_node", world[n * per_node:(n + 1) * per_node])
                   for n in range(topo.num_nodes)]
        groups.append(Group("inter0", "inter_node", [n * per_node for n in range(topo.num_nodes)]))
    return groups


class Heartbeat:
    """A thread that stamps ``beat/<rank>`` in the store every second while the rank lives.

    The store client has no timeout on sending: a rank whose link is cut blocks in it for
    as long as TCP retries (many minutes). A second thread watches the stamps and ends the
    process (exit 3, with the reason for the launcher) when none got through for
    ``lost_after_s``: the rest of the job has named it by then.
    """

    def __init__(self, store: Any, rank: int, lost_after_s: float = 0.0, where: str = "") -> None:
        self.store, self.rank, self.lost_after_s, self.where = store, rank, lost_after_s, where
        self.stop = threading.Event()
        self.last_ok = time.monotonic()
        self.thread = threading.Thread(target=self._run, name="gp-heartbeat", daemon=True)
        self.watch = threading.Thread(target=self._watch, name="gp-store-watch", daemon=True)

    def start(self) -> None:
        self.last_ok = time.monotonic()
        self.thread.start()
        if self.lost_after_s > 0:
            self.watch.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.store.set(f"{PREFIX}/beat/{self.rank}", str(time.time()))
            except Exception:  # the store host may be gone at the very end of the run
                return
            self.last_ok = time.monotonic()
            self.stop.wait(HEARTBEAT_S)

    def _watch(self) -> None:
        while not self.stop.wait(1.0):
            silent_s = time.monotonic() - self.last_ok
            if silent_s > self.lost_after_s:
                from .leave import write_error_file

                line = (f"gpu-preflight: rank {self.rank} on {self.where} lost the job's store "
                        f"(no answer for {silent_s:.0f} s); the other ranks report without it")
                print(line, file=sys.stderr, flush=True)
                write_error_file(line, 3)
                os._exit(3)


@dataclass
class RankRun:
    """State of one rank's run, filled stage by stage."""

    topo: Topology
    payload: dict[str, Any] = field(default_factory=dict)
    broken: str | None = None
    sampler: Any = None  # workloads.sampling.RankSampler: marks each phase of this rank's GPU
    marks: Marks | None = None  # the job's per-phase counters, for whoever watches its progress

    def phase(self, name: str) -> None:
        """The workload phase that starts now, for the under-load series."""
        if self.sampler is not None:
            self.sampler.mark(name)


# Test-only fault injection: "kill:RANK:STAGE" or "stop:RANK:STAGE" makes that rank die
# (exit 137) or SIGSTOP itself when it enters the stage, as a crashed or hung GPU would.
# RANK "*" is whichever rank reads it (set on one host only: torchrun numbers hosts in join
# order); stage "arrive" is before the rank registers, i.e. before the process group forms.
FAULT_ENV = "GPU_PREFLIGHT_TEST_FAULT"


def _stage(store: Any, rank: int, name: str, marks: Marks | None = None) -> None:
    store.set(f"{PREFIX}/progress/{rank}", name)
    if marks is not None:
        marks.enter(name)
    action, _, rest = os.environ.get(FAULT_ENV, "").partition(":")
    target, _, stage = rest.partition(":")
    if action and target in (str(rank), "*") and stage == name:
        if action == "kill":
            os._exit(137)
        if action == "stop":
            import signal

            os.kill(os.getpid(), signal.SIGSTOP)


@dataclass
class RankOutcome:
    """The end of a rank's run: the reporting rank holds the gather; every rank leaves in order.

    Rank 0 reports unless it went silent (stopped, hung, dead): then the first rank to notice
    its stale heartbeat takes over the gather (:meth:`await_verdict`). How ranks exit is in
    :mod:`gpu_preflight.distributed.leave`.
    """

    gathered: dict[str, Any] | None
    config: Config
    store: Any
    beat: Heartbeat
    timeout_s: float
    device: Any = None
    plan: Plan | None = None
    topo: Topology | None = None
    absent: tuple[int, ...] = ()
    formed: bool = True
    line: str = ""
    decided: bool = False
    watch: Any = None  # distributed.watch.JobWatch: the reporting rank's progress view, until it reports
    marks: Marks | None = None

    def mark(self, name: str) -> None:
        """The reporting rank's step after the gather (``localize``, ``report``), for the progress view."""
        if self.topo is not None:
            with contextlib.suppress(Exception):  # a store gone at the end must not cost the report
                _stage(self.store, self.topo.rank, name, self.marks)

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
        deadline = time.monotonic() + self.timeout_s + STALE_S + 60
        key = f"{PREFIX}/verdict"
        while True:
            held = _get(self.store, REPORTER_KEY)
            reporter = int(held or 0)
            if wait_key(self.store, key, deadline, lambda r=reporter: self._silent(r)):
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
        import torch.distributed as dist

        from .leave import carries_verdict, wait_gone, write_error_file

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
                _wait_count(self.store, f"{PREFIX}/left", topo.world_size - 1 - gone, end)
            if topo.launcher == "torchrun" and node[0] == topo.rank:  # its agent stops the node at this exit
                mates = node[1:]
                _wait_count(self.store, f"{PREFIX}/left/{topo.node_rank}", len(mates), end)
                wait_gone(_local_pids(self.store, topo, mates), min(end, time.monotonic() + 5.0))
            write_error_file(self.line or f"gpu-preflight: exit {code}", code)
        with contextlib.suppress(Exception):
            self.store.add(f"{PREFIX}/left/{topo.node_rank}", 1)
            self.store.add(f"{PREFIX}/left", 1)
        self.beat.stop.set()
        return code if carry else 0


    def _silent(self, rank: int) -> bool:
        return silent(self.store, rank) or (rank in self.absent and _get(self.store, f"{PREFIX}/beat/{rank}") is None)


REPORTER_KEY = f"{PREFIX}/reporter"
RDZV_NAMES_KEY = f"{PREFIX}/rendezvous_names"  # node rank -> host, as torchrun's rendezvous saw the job


def silent(store: Any, rank: int) -> bool:
    """The rank's heartbeat is older than ``STALE_S`` (a rank that never beat is not silent yet)."""
    beat = _get(store, f"{PREFIX}/beat/{rank}")
    return beat is not None and time.time() - float(beat) > STALE_S


def wait_key(store: Any, key: str, deadline: float, give_up: Any = None) -> bool:
    """Wait for ``key`` until ``deadline`` (monotonic), asking ``give_up()`` every couple of seconds.

    The store notifies waiters, so thousands of ranks waiting cost the store's host nothing
    until the key is set; the periodic wake-up lets them notice a silent peer.
    """
    while True:
        left = deadline - time.monotonic()
        if left <= 0:
            return False
        try:
            store.wait([key], timedelta(seconds=min(2.0, left)))
            return True
        except Exception:  # noqa: S110 - a timed-out wait: look at the peer, then wait again
            pass
        if give_up is not None and give_up():
            return False


def _wait_count(store: Any, key: str, target: int, deadline: float) -> None:
    while target > 0 and time.monotonic() < deadline:
        try:
            if int(store.add(key, 0)) >= target:
                return
        except Exception:
            return
        time.sleep(0.05)


def _local_pids(store: Any, topo: Topology, ranks: list[int]) -> list[int]:
    """Process ids of these ranks that run on this host (their hello says so)."""
    pids = []
    for r in ranks:
        hello = _get(store, f"{PREFIX}/hello/{r}")
        data = json.loads(hello) if hello else {}
        if data.get("hostname") == (topo.hostname or socket.gethostname()) and isinstance(data.get("pid"), int):
            pids.append(int(data["pid"]))
    return pids


def connect_store(topo: Topology, timeout_s: float) -> Any:
    """The job's key-value store: hosted by an agent (torchrun's, or our supervisor's) where the
    launcher says so (``TORCHELASTIC_USE_AGENT_STORE``), else by rank 0 itself.

    Connecting before the process group lets every rank register its arrival, so a rank that
    never arrives is named instead of failing everyone's ``init_process_group``.
    """
    import torch.distributed as dist

    agent = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    return dist.TCPStore(topo.master_addr or "127.0.0.1", topo.master_port or 29500,  # type: ignore[attr-defined]
                         is_master=topo.rank == 0 and not agent, wait_for_workers=False,
                         timeout=timedelta(seconds=timeout_s))


def form_group(store: Any, topo: Topology, timeout_s: float) -> tuple[str | None, tuple[int, ...]]:
    """Arrival, then rank 0's decision: ``(None, ())`` when every rank arrived within the timeout,
    else why the process group is not formed and the ranks that never arrived.

    Everyone follows one decision in the store, so a late rank cannot form a group the
    others have given up on.
    """
    key = f"{PREFIX}/formation"
    store.add(f"{PREFIX}/arrived", 1)
    if topo.rank == 0:
        deadline = time.monotonic() + timeout_s
        if topo.launcher == "torchrun" and topo.num_nodes > 1:  # read now: agents that fail soon leave it
            from .rendezvous_view import node_addresses

            store.set(RDZV_NAMES_KEY, json.dumps(node_addresses()))
        while int(store.add(f"{PREFIX}/arrived", 0)) < topo.world_size and time.monotonic() < deadline:
            time.sleep(0.1)
        absent = [] if int(store.add(f"{PREFIX}/arrived", 0)) >= topo.world_size else [
            r for r in range(topo.world_size) if not store.check([f"{PREFIX}/hello/{r}"])]
        store.set(key, json.dumps(absent))
    elif not wait_key(store, key, time.monotonic() + timeout_s + STALE_S, lambda: silent(store, 0)):
        never = () if store.check([f"{PREFIX}/hello/0"]) else (0,)
        return "process group not formed: rank 0 " + ("never arrived" if never else "went silent"), never
    absent = json.loads(bytes(store.get(key)).decode())
    if absent:
        shown = ", ".join(map(str, absent[:20])) + (" …" if len(absent) > 20 else "")
        return (f"process group not formed: {len(absent)} rank(s) did not arrive within {timeout_s:g} s "
                f"(ranks {shown})", tuple(absent))
    return None, ()


def steps_for(plan: Plan, topo: Topology) -> list[str]:
    """This rank's steps in order, as written to ``progress/<rank>``: the length of a progress bar."""
    steps = ["arrive", "stack", "gemm", *(["memory"] if plan.memory else []), "train"]
    for g in layout(topo):
        if topo.rank in g.ranks and len(g.ranks) >= 2:
            steps += [f"{op}@{g.name}" for op in plan.ops]
    if topo.num_nodes > 1:
        steps += ["links", "pingpong"] if topo.local_rank == 0 else ["links"]
    if topo.world_size > 1:
        steps.append("ddp")
    if topo.local_rank == 0:
        steps.append("node_checks")
    return [*steps, "done"]


def run_rank(opts: RunOptions, topo: Topology, *, timeout_s: float, result_dir: str | None = None,
             view: Any = None) -> RankOutcome:
    """Run this rank; rank 0's outcome also holds the gathered payloads (``{"payloads", "missing", ...}``).

    ``view`` (a :class:`~gpu_preflight.report.progress.StageView`, reporting rank only) shows
    the job's stages and what they wait on until the outcome's :meth:`RankOutcome.quiet`.
    """
    from ..config import build_config

    node_box: dict[str, Any] = {}
    node_thread = None
    if topo.local_rank == 0:  # node checks overlap torch start-up and the workloads
        node_thread = threading.Thread(target=lambda: node_box.update(report=run_checks(opts)), daemon=True,
                                       name="gp-node-checks")
        node_thread.start()
    import torch
    import torch.distributed as dist

    config, _ = build_config(profile=None, config_file=opts.config_file, overrides=opts.overrides,
                             environ=opts.environ)
    cuda = torch.cuda.is_available() and torch.cuda.device_count() > topo.local_rank
    device = torch.device(f"cuda:{topo.local_rank}") if cuda else torch.device("cpu")
    if cuda:
        torch.cuda.set_device(device)
    plan = make_plan(config, opts.suite, cuda)
    store = connect_store(topo, timeout_s)  # results and heartbeats never depend on the process group
    beat = Heartbeat(store, topo.rank, lost_after_s=timeout_s + 2 * STALE_S, where=topo.node_name)
    run = RankRun(topo, {"rank": topo.rank, "local_rank": topo.local_rank, "node_rank": topo.node_rank,
                         "hostname": topo.hostname or socket.gethostname(), "node_name": topo.node_name,
                         "device": str(device), "errors": [], "collectives": []},
                  marks=Marks(store, topo.node_rank, per_node=topo.world_size > SCAN_RANKS, rank=topo.rank))
    if topo.rank == 0:
        store.set(f"{PREFIX}/steps", json.dumps(steps_for(plan, topo)))
    _stage(store, topo.rank, "arrive", run.marks)
    store.set(f"{PREFIX}/hello/{topo.rank}", json.dumps({**{k: run.payload[k] for k in (
        "hostname", "node_name", "node_rank", "local_rank")}, "pid": os.getpid()}))
    beat.start()
    watch = None
    if view is not None:
        from .watch import JobWatch

        watch = JobWatch(store, topo, view).start()
    run.broken, absent = form_group(store, topo, timeout_s)
    if run.broken is None:
        try:
            dist.init_process_group("nccl" if cuda else "gloo", store=dist.PrefixStore(f"{PREFIX}/pg", store),  # type: ignore[attr-defined]
                                    timeout=timedelta(seconds=timeout_s), rank=topo.rank,
                                    world_size=topo.world_size)
        except Exception as exc:  # a rank died between arriving and joining
            run.broken = f"process group not formed: {type(exc).__name__}: {exc}"
    formed = run.broken is None
    if run.broken:  # judged like a collective that failed: nothing between ranks was measured
        run.payload["errors"].append(run.broken)
        run.payload["collectives"].append({"op": FORMATION_OP, "group": "all", "scope": "distributed",
                                           "ranks": list(range(topo.world_size)), "success": False,
                                           "error": run.broken, "results": []})
    from ..backends.kernel_log import XidWatch
    from ..config.load import load_config
    from ..config.report_schema import report_config
    from ..workloads import sampling

    load_cfg = load_config(config)
    run.sampler = sampling.start(device, load_cfg)  # this rank's GPU under load (inert on CPU workers)
    xids = XidWatch() if cuda and topo.local_rank == 0 else None  # the node leader, for its node
    try:
        _workloads(run, store, plan, device, config, timeout_s)
    except Exception as exc:  # a workload bug must not lose the rest of the report
        run.payload["errors"].append(f"{type(exc).__name__}: {exc}")
    finally:
        run.sampler.finish(run.payload, load_cfg,
                           series=topo.num_nodes <= report_config(config).detail_max_nodes)
        if xids is not None:
            xids.finish(run.payload)
    if node_thread is not None:
        if node_thread.is_alive():
            _stage(store, topo.rank, "node_checks", run.marks)
        node_thread.join(opts.timeout_s * 3)
    node_report = node_box.get("report")
    if node_report is not None and node_report.profile:
        from ..config import find_profile

        config, _ = build_config(profile=find_profile(node_report.profile), config_file=opts.config_file,
                                 overrides=opts.overrides, environ=opts.environ)
    if node_report is not None:
        run.payload["node_entry"] = node_payload(node_report, topo, config, opts.report_dir)
    elif topo.local_rank == 0:
        run.payload["errors"].append("node checks did not finish")
    _stage(store, topo.rank, "done", run.marks)
    text = json.dumps(run.payload, default=str)
    if len(text) > MAX_PAYLOAD:
        run.payload.pop("node_entry", None)
        run.payload["errors"].append(f"payload of {len(text)} bytes exceeds {MAX_PAYLOAD}; node report dropped")
        text = json.dumps(run.payload, default=str)
    if result_dir:
        Path(result_dir, f"rank{topo.rank}.json").write_text(text)
    store.set(f"{PREFIX}/payload/{topo.rank}", text)
    if topo.local_rank == 0:  # node leaders bundle their node's payloads: rank 0 reads one key per node
        post_node_bundle(store, topo, deadline=time.monotonic() + timeout_s + STALE_S, absent=absent)
    gathered = (gather(store, topo, deadline=time.monotonic() + timeout_s + 2 * STALE_S, absent=absent)
                if topo.rank == 0 else None)
    return RankOutcome(gathered, config, store, beat, timeout_s, device, plan, topo, absent, formed, watch=watch,
                       marks=run.marks)


def node_payload(report: Any, topo: Topology, config: Config, report_dir: str | None) -> dict[str, Any]:
    """The node leader's contribution to the cluster report, built here rather than on rank 0.

    Above ``report.detail_max_nodes`` nodes the PASS and SKIP findings stay on the node (in
    ``artifacts/node_<i>/node_report.json`` with ``--report-dir``) and only the facts the
    cluster report reads travel: rank 0 of a 10,000-node job places sections, it does not
    rebuild them.
    """
    from ..cluster.aggregate import node_info
    from ..config.report_schema import report_config
    from ..report.canonical import node_entry, save_artifacts

    key = f"node_{topo.node_rank}"
    detail = topo.num_nodes <= report_config(config).detail_max_nodes
    if not detail:
        report.raw_artifacts["node_report"] = ("node_report.json", json.dumps(report.to_dict(), default=str))
    if report_dir:  # raw outputs stay on the node, beside where the report will be
        report.artifacts = save_artifacts(report, Path(report_dir), key)
    info = node_info(topo.node_rank, topo.num_nodes, topo.world_size, topo.local_world_size,
                     topo.node_name or topo.hostname or socket.gethostname())
    entry: dict[str, Any] = node_entry(report, key, info, detail=detail)
    return entry


def _workloads(run: RankRun, store: Any, plan: Plan, device: Any, config: Config, timeout_s: float) -> None:
    import torch.distributed as dist

    from ..workloads.collectives import CollectiveTimeout, run_collective
    from ..workloads.compute import run_gemm
    from ..workloads.memory import run_memory
    from ..workloads.stack import read_stack
    from ..workloads.training import run_ddp, run_single

    rank, p = run.topo.rank, run.payload
    _stage(store, rank, "stack", run.marks)
    p["stack"] = read_stack(run.topo.local_rank).to_dict()
    _stage(store, rank, "gemm", run.marks)
    p["gemm"] = []
    for dt in plan.gemm_dtypes:
        store.set(f"{PREFIX}/progress/{rank}", f"gemm {dt}")
        run.phase(f"gemm_{dt}")
        p["gemm"].append(run_gemm(device, dt, plan.gemm_n, plan.gemm_iters, plan.gemm_seconds).to_dict())
    if plan.memory:
        _stage(store, rank, "memory", run.marks)
        run.phase("memory")
        w = config.workload
        p["memory"] = run_memory(device, copy_bytes=1 << 30, transfer_bytes=256 << 20,
                                 pattern_fraction=w.memory_test_fraction).to_dict()
    _stage(store, rank, "train", run.marks)
    run.phase("train")
    p["train"] = run_single(device, plan.train_steps, config.perf.train_min_loss_drop).to_dict()
    if run.broken:  # no process group: nothing to measure between ranks
        return
    groups = layout(run.topo)
    for g in groups:
        g.handle = dist.new_group(g.ranks) if len(g.ranks) < run.topo.world_size else None
    for g in groups:
        if rank not in g.ranks or len(g.ranks) < 2:
            continue
        for op in plan.ops:
            _stage(store, rank, f"{op}@{g.name}", run.marks)
            run.phase(op)
            try:
                res = run_collective(op, group=g.handle, ranks=g.ranks, group_name=g.name, sizes=plan.sizes,
                                     iters=plan.iters, warmup=plan.warmup, device=device, timeout_s=timeout_s)
            except CollectiveTimeout as exc:
                run.broken = f"{op} on group {g.name}: {exc}"
                p["errors"].append(run.broken)
                p["collectives"].append({"op": op, "group": g.name, "scope": g.scope, "ranks": g.ranks,
                                         "success": False, "error": str(exc), "results": []})
                return  # the process group is unusable after a timeout
            except Exception as exc:  # a peer died: gloo/NCCL report a connection error
                run.broken = f"{op} on group {g.name}: {type(exc).__name__}: {exc}"
                p["errors"].append(run.broken)
                p["collectives"].append({"op": op, "group": g.name, "scope": g.scope, "ranks": g.ranks,
                                         "success": False, "error": run.broken, "results": []})
                return
            if rank == g.ranks[0]:  # every member measured the same sweep: its lowest rank reports it
                p["collectives"].append({**res.to_dict(), "scope": g.scope})
    if run.topo.num_nodes > 1:
        from ..workloads.links import run_star

        _stage(store, rank, "links", run.marks)
        run.phase("links")
        per_node = max(run.topo.local_world_size, 1)
        p["links"] = run_star([n * per_node for n in range(run.topo.num_nodes)], nbytes=plan.sizes[-1],
                              iters=plan.iters, device=device, timeout_s=timeout_s)
        if run.topo.local_rank == 0:  # node leaders: libfabric fi_pingpong, node 2k serves node 2k+1
            from ..config.diagnostics import diagnostics_config
            from .pingpong import exchange_pingpong

            _stage(store, rank, "pingpong", run.marks)
            p["pingpong"] = exchange_pingpong(store, run.topo.node_rank, run.topo.num_nodes, run.topo.master_addr,
                                              diagnostics_config(config), wait_s=timeout_s, prefix=PREFIX)
    if run.topo.world_size > 1:
        _stage(store, rank, "ddp", run.marks)
        run.phase("ddp")
        ddp = run_ddp(device, plan.train_steps, config.perf.train_min_loss_drop).to_dict()
        if rank == 0:  # every rank gathered the same digests: rank 0 speaks for the job
            p["ddp"] = ddp


def node_ranks(topo: Topology, node: int) -> range:
    """The ranks of one node (ranks are laid out node by node)."""
    per_node = max(topo.local_world_size, 1)
    return range(node * per_node, min((node + 1) * per_node, topo.world_size))


def collect(store: Any, ranks: Iterable[int], deadline: float,
            absent: Collection[int] = ()) -> tuple[dict[int, str], dict[int, str]]:
    """These ranks' payload texts as they arrive, and why each rank that did not arrive is missing
    (it never joined the job, its heartbeat went stale, or the deadline passed). One pass when the
    deadline is already past."""
    texts: dict[int, str] = {}
    missing: dict[int, str] = {}
    pending = set(ranks)
    while pending:
        for r in sorted(pending):
            key = f"{PREFIX}/payload/{r}"
            if store.check([key]):
                texts[r] = bytes(store.get(key)).decode()
                pending.discard(r)
                continue
            beat = _get(store, f"{PREFIX}/beat/{r}")
            if beat is None and r in absent:
                missing[r] = "never joined the job (did not arrive before the process group was due)"
                pending.discard(r)
            elif beat is not None and time.time() - float(beat) > STALE_S:
                missing[r] = f"stopped answering (last heartbeat {time.time() - float(beat):.0f} s ago)"
                pending.discard(r)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for r in pending:
        missing[r] = "did not report before the deadline"
    return texts, missing


def _bundle(texts: dict[int, str], missing: dict[int, str]) -> str:
    """The node's payloads for rank 0, arranged so rank 0 never has to walk them one by one.

    ``columns``: GEMM, memory and training results packed into columns
    (:mod:`gpu_preflight.cluster.columns`); ``index``: ``[rank, node, local_rank, on_gpu]``
    rows laid end to end; ``collectives``: the collective results moved out of the payloads,
    as ``{"groups": [[rank, entry]], "failures": [[rank, entry]]}`` (each group's sweep from its
    lowest rank; every failure as each rank saw it); the software stack of ranks that share the leader's is
    dropped (rank 0 reads leaders' only). What stays in ``payloads`` is small.
    """
    from ..cluster.columns import take_results

    payloads = {r: json.loads(t) for r, t in sorted(texts.items())}
    columns = take_results(payloads)
    first = payloads.get(min(payloads, default=-1), {})
    index: list[Any] = []
    collectives: dict[str, list[list[Any]]] = {"groups": [], "failures": []}
    for r, p in payloads.items():
        index += [r, p.get("node_rank", 0), p.get("local_rank", 0), str(p.get("device", "")).startswith("cuda")]
        for e in p.pop("collectives", None) or ():
            if e.get("error"):
                collectives["failures"].append([r, e])
            if e.get("ranks") and e["ranks"][0] == r and e.get("op") != FORMATION_OP:  # a failure, not a sweep
                collectives["groups"].append([r, e])
        if p is not first and p.get("stack") == first.get("stack"):
            p.pop("stack", None)
    return json.dumps({"payloads": {str(r): p for r, p in payloads.items()},
                       "missing": {str(r): w for r, w in missing.items()}, "columns": columns, "index": index,
                       "collectives": collectives})


def post_node_bundle(store: Any, topo: Topology, deadline: float, absent: Collection[int] = ()) -> None:
    """Node leader: put the node's payloads in one store value for rank 0.

    At 80,000 ranks rank 0 would otherwise poll 80,000 keys and decode 80,000 texts; a
    bundle per node is 10,000 of each, one decode per node shares the key strings of its
    ranks' payloads, and the results arrive as columns rank 0 can screen in bulk.
    """
    texts, missing = collect(store, node_ranks(topo, topo.node_rank), deadline, absent)
    store.set(f"{PREFIX}/node/{topo.node_rank}", _bundle(texts, missing))
    for r in texts:  # the bundle holds them now: the store's host keeps one copy, not two
        with contextlib.suppress(Exception):
            store.delete_key(f"{PREFIX}/payload/{r}")


def gather(store: Any, topo: Topology, deadline: float, absent: Collection[int] = ()) -> dict[str, Any]:
    """The reporting rank: collect every node's bundle; name ranks that died, stopped answering
    or never joined.

    A node whose leader died (stale heartbeat), never joined, or never posted a bundle is read
    rank by rank, so its surviving ranks still count. A rank that never said hello is named
    from its node's other ranks, else from the launcher's view of the job
    (:func:`~gpu_preflight.distributed.topology.launcher_node_names`).
    """
    payloads: dict[int, dict[str, Any]] = {}
    missing: dict[int, str] = {}
    columns: list[dict[str, Any]] = []
    index: list[list[Any]] = []
    collectives: list[dict[str, Any]] = []
    pending = set(range(topo.num_nodes))

    def take(texts: dict[int, str], why: dict[int, str]) -> None:
        payloads.update((r, json.loads(t)) for r, t in texts.items())
        missing.update(why)

    while pending:
        for n in sorted(pending):
            key = f"{PREFIX}/node/{n}"
            if store.check([key]):
                bundle = json.loads(store.get(key))
                payloads.update((int(r), p) for r, p in bundle["payloads"].items())
                missing.update((int(r), w) for r, w in bundle["missing"].items())
                columns.append(bundle.get("columns") or {})
                index.append(bundle.get("index") or [])
                collectives.append(bundle.get("collectives") or {})
                pending.discard(n)
                continue
            leader = node_ranks(topo, n)[0]
            beat = _get(store, f"{PREFIX}/beat/{leader}")
            if (beat is None and leader in absent) or (beat is not None and time.time() - float(beat) > STALE_S):
                take(*collect(store, node_ranks(topo, n), deadline, absent))
                pending.discard(n)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for n in sorted(pending):  # no bundle in time: whatever its ranks posted themselves
        take(*collect(store, node_ranks(topo, n), time.monotonic(), absent))
    names = _names(store, topo, [r for r in range(topo.world_size) if r in missing or r not in payloads])
    for r, why in list(missing.items()):
        progress = _get(store, f"{PREFIX}/progress/{r}")
        missing[r] = (f"rank {r} on {names.get(r) or 'unknown host'} {why}"
                      + (f", last stage {progress}" if progress else ""))
    return {"payloads": payloads, "missing": missing, "names": names, "topology": topo.to_dict(),
            "columns": columns, "index": index, "collectives": collectives}


def _names(store: Any, topo: Topology, ranks: list[int]) -> dict[int, str]:
    """Host names of ranks that did not report: their own hello, a node-mate's, or the launcher's."""
    from .topology import launcher_node_names

    names: dict[int, str] = {}
    launcher: dict[int, str] | None = None
    for r in ranks:
        for other in [r, *node_ranks(topo, r // max(topo.local_world_size, 1))]:
            hello = _get(store, f"{PREFIX}/hello/{other}")
            if hello:
                data = json.loads(hello)
                names[r] = data.get("node_name") or data.get("hostname")
                break
        else:
            if launcher is None:
                launcher = launcher_node_names(topo)
                launcher.update((int(n), a) for n, a in json.loads(_get(store, RDZV_NAMES_KEY) or "{}").items())
            if r // max(topo.local_world_size, 1) in launcher:
                names[r] = launcher[r // max(topo.local_world_size, 1)]
    return names


def _get(store: Any, key: str) -> str | None:
    try:
        if store.check([key]):
            return bytes(store.get(key)).decode()
    except Exception:  # noqa: S110 - a store hiccup reads as "no information"
        pass
    return None


def _destroy(dist: Any) -> None:
    """Tear down the process group without risking a hang on a broken one."""
    if not dist.is_initialized():
        return
    t = threading.Thread(target=lambda: dist.destroy_process_group(), daemon=True)
    t.start()
    t.join(5.0)


def env_timeout(default: float) -> float:
    raw = os.environ.get("GPU_PREFLIGHT_TIMEOUT_S")
    return float(raw) if raw else default
