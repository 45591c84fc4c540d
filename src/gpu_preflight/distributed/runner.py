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
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

from ..config import Config
from ..engine import RunOptions, run_checks
from .topology import Topology

PREFIX = "gpu-preflight"
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
    """A thread that stamps ``beat/<rank>`` in the store every second while the rank lives."""

    def __init__(self, store: Any, rank: int) -> None:
        self.store, self.rank = store, rank
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, name="gp-heartbeat", daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                self.store.set(f"{PREFIX}/beat/{self.rank}", str(time.time()))
            except Exception:  # the store host may be gone at the very end of the run
                return
            self.stop.wait(HEARTBEAT_S)


@dataclass
class RankRun:
    """State of one rank's run, filled stage by stage."""

    topo: Topology
    payload: dict[str, Any] = field(default_factory=dict)
    broken: str | None = None


# Test-only fault injection: "kill:RANK:STAGE" or "stop:RANK:STAGE" makes that rank die
# (exit 137) or SIGSTOP itself when it enters the stage, as a crashed or hung GPU would.
FAULT_ENV = "GPU_PREFLIGHT_TEST_FAULT"


def _stage(store: Any, rank: int, name: str) -> None:
    store.set(f"{PREFIX}/progress/{rank}", name)
    action, _, rest = os.environ.get(FAULT_ENV, "").partition(":")
    target, _, stage = rest.partition(":")
    if action and target == str(rank) and stage == name:
        if action == "kill":
            os._exit(137)
        if action == "stop":
            import signal

            os.kill(os.getpid(), signal.SIGSTOP)


@dataclass
class RankOutcome:
    """The end of a rank's run: rank 0 holds the gather; every rank exits with rank 0's verdict.

    All ranks leaving with the same code matters under torchrun: agents whose workers
    succeeded wait at an exit barrier for agents whose workers failed, for minutes.
    """

    gathered: dict[str, Any] | None
    config: Config
    store: Any
    beat: Heartbeat
    timeout_s: float
    device: Any = None
    plan: Plan | None = None

    def publish(self, code: int) -> None:
        self.store.set(f"{PREFIX}/verdict", str(code))
        self._finish()

    def await_verdict(self) -> int:
        try:
            self.store.wait([f"{PREFIX}/verdict"], timedelta(seconds=self.timeout_s + STALE_S + 60))
            code = int(bytes(self.store.get(f"{PREFIX}/verdict")).decode())
        except Exception:  # rank 0 died before deciding: this run could not be judged
            code = 3
        self._finish()
        return code

    def _finish(self) -> None:
        self.beat.stop.set()
        import torch.distributed as dist

        _destroy(dist)


def run_rank(opts: RunOptions, topo: Topology, *, timeout_s: float, result_dir: str | None = None) -> RankOutcome:
    """Run this rank; rank 0's outcome also holds the gathered payloads (``{"payloads", "missing", ...}``)."""
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
    init = "env://" if topo.launcher in ("torchrun", "self") else f"tcp://{topo.master_addr}:{topo.master_port}"
    dist.init_process_group("nccl" if cuda else "gloo", init_method=init, timeout=timedelta(seconds=timeout_s),
                            rank=topo.rank, world_size=topo.world_size)
    # Our own client of the job's store (hosted by rank 0 or the torchrun agent): results and
    # heartbeats must not depend on the process group, which a dead peer can break.
    store = dist.TCPStore(topo.master_addr or "127.0.0.1", topo.master_port or 29500,  # type: ignore[attr-defined]
                          is_master=False, timeout=timedelta(seconds=timeout_s))
    beat = Heartbeat(store, topo.rank)
    beat.thread.start()
    run = RankRun(topo, {"rank": topo.rank, "local_rank": topo.local_rank, "node_rank": topo.node_rank,
                         "hostname": topo.hostname or socket.gethostname(), "node_name": topo.node_name,
                         "device": str(device), "errors": [], "collectives": []})
    store.set(f"{PREFIX}/hello/{topo.rank}", json.dumps({k: run.payload[k] for k in
                                                          ("hostname", "node_name", "node_rank", "local_rank")}))
    try:
        _workloads(run, store, plan, device, config, timeout_s)
    except Exception as exc:  # a workload bug must not lose the rest of the report
        run.payload["errors"].append(f"{type(exc).__name__}: {exc}")
    if node_thread is not None:
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
    _stage(store, topo.rank, "done")
    text = json.dumps(run.payload, default=str)
    if len(text) > MAX_PAYLOAD:
        run.payload.pop("node_entry", None)
        run.payload["errors"].append(f"payload of {len(text)} bytes exceeds {MAX_PAYLOAD}; node report dropped")
        text = json.dumps(run.payload, default=str)
    if result_dir:
        Path(result_dir, f"rank{topo.rank}.json").write_text(text)
    store.set(f"{PREFIX}/payload/{topo.rank}", text)
    if topo.local_rank == 0:  # node leaders bundle their node's payloads: rank 0 reads one key per node
        post_node_bundle(store, topo, deadline=time.monotonic() + timeout_s + STALE_S)
    gathered = gather(store, topo, deadline=time.monotonic() + timeout_s + 2 * STALE_S) if topo.rank == 0 else None
    return RankOutcome(gathered, config, store, beat, timeout_s, device, plan)


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

    from ..report.progress import progress
    from ..workloads.collectives import CollectiveTimeout, run_collective
    from ..workloads.compute import run_gemm
    from ..workloads.memory import run_memory
    from ..workloads.stack import read_stack
    from ..workloads.training import run_ddp, run_single

    rank, p = run.topo.rank, run.payload
    _stage(store, rank, "stack")
    p["stack"] = read_stack(run.topo.local_rank).to_dict()
    show = None if rank == 0 else False  # one bar per terminal: ranks share it under launchers
    _stage(store, rank, "gemm")
    p["gemm"] = []
    with progress("GEMM", total=len(plan.gemm_dtypes), enabled=show) as bar:
        for dt in plan.gemm_dtypes:
            p["gemm"].append(run_gemm(device, dt, plan.gemm_n, plan.gemm_iters, plan.gemm_seconds).to_dict())
            bar.advance(dt)
    if plan.memory:
        _stage(store, rank, "memory")
        w = config.workload
        with progress("memory test", enabled=show):
            p["memory"] = run_memory(device, copy_bytes=1 << 30, transfer_bytes=256 << 20,
                                     pattern_fraction=w.memory_test_fraction).to_dict()
    _stage(store, rank, "train")
    p["train"] = run_single(device, plan.train_steps, config.perf.train_min_loss_drop).to_dict()
    groups = layout(run.topo)
    for g in groups:
        g.handle = dist.new_group(g.ranks) if len(g.ranks) < run.topo.world_size else None
    mine = sum(len(plan.ops) for g in groups if rank in g.ranks and len(g.ranks) >= 2)
    with progress("collectives", total=mine, enabled=show) as bar:
        for g in groups:
            if rank not in g.ranks or len(g.ranks) < 2:
                continue
            for op in plan.ops:
                _stage(store, rank, f"{op}@{g.name}")
                bar.advance(f"{op} on {g.name}")
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

        _stage(store, rank, "links")
        per_node = max(run.topo.local_world_size, 1)
        p["links"] = run_star([n * per_node for n in range(run.topo.num_nodes)], nbytes=plan.sizes[-1],
                              iters=plan.iters, device=device, timeout_s=timeout_s)
        if run.topo.local_rank == 0:  # node leaders: libfabric fi_pingpong, node 2k serves node 2k+1
            from ..config.diagnostics import diagnostics_config
            from .pingpong import exchange_pingpong

            _stage(store, rank, "pingpong")
            p["pingpong"] = exchange_pingpong(store, run.topo.node_rank, run.topo.num_nodes, run.topo.master_addr,
                                              diagnostics_config(config), wait_s=timeout_s, prefix=PREFIX)
    if run.topo.world_size > 1:
        _stage(store, rank, "ddp")
        ddp = run_ddp(device, plan.train_steps, config.perf.train_min_loss_drop).to_dict()
        if rank == 0:  # every rank gathered the same digests: rank 0 speaks for the job
            p["ddp"] = ddp


def node_ranks(topo: Topology, node: int) -> range:
    """The ranks of one node (ranks are laid out node by node)."""
    per_node = max(topo.local_world_size, 1)
    return range(node * per_node, min((node + 1) * per_node, topo.world_size))


def collect(store: Any, ranks: Iterable[int], deadline: float) -> tuple[dict[int, str], dict[int, str]]:
    """These ranks' payload texts as they arrive, and why each rank that did not arrive is missing
    (its heartbeat went stale, or the deadline passed). One pass when the deadline is already past."""
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
            if beat is not None and time.time() - float(beat) > STALE_S:
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
            if e.get("ranks") and e["ranks"][0] == r:
                collectives["groups"].append([r, e])
        if p is not first and p.get("stack") == first.get("stack"):
            p.pop("stack", None)
    return json.dumps({"payloads": {str(r): p for r, p in payloads.items()},
                       "missing": {str(r): w for r, w in missing.items()}, "columns": columns, "index": index,
                       "collectives": collectives})


def post_node_bundle(store: Any, topo: Topology, deadline: float) -> None:
    """Node leader: put the node's payloads in one store value for rank 0.

    At 80,000 ranks rank 0 would otherwise poll 80,000 keys and decode 80,000 texts; a
    bundle per node is 10,000 of each, one decode per node shares the key strings of its
    ranks' payloads, and the results arrive as columns rank 0 can screen in bulk.
    """
    texts, missing = collect(store, node_ranks(topo, topo.node_rank), deadline)
    store.set(f"{PREFIX}/node/{topo.node_rank}", _bundle(texts, missing))
    for r in texts:  # the bundle holds them now: the store's host keeps one copy, not two
        with contextlib.suppress(Exception):
            store.delete_key(f"{PREFIX}/payload/{r}")


def gather(store: Any, topo: Topology, deadline: float) -> dict[str, Any]:
    """Rank 0: collect every node's bundle; name ranks that died or stopped answering.

    A node whose leader died (stale heartbeat) or never posted a bundle is read rank by rank,
    so its surviving ranks still count.
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
            if beat is not None and time.time() - float(beat) > STALE_S:
                take(*collect(store, node_ranks(topo, n), deadline))
                pending.discard(n)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.2)
    for n in sorted(pending):  # no bundle in time: whatever its ranks posted themselves
        take(*collect(store, node_ranks(topo, n), time.monotonic()))
    names: dict[int, str] = {}
    for r in range(topo.world_size):  # every rank said hello after init: names even for the silent ones
        hello = _get(store, f"{PREFIX}/hello/{r}") if r in missing or r not in payloads else None
        if hello:
            names[r] = json.loads(hello).get("node_name") or json.loads(hello).get("hostname")
    for r, why in list(missing.items()):
        hello = _get(store, f"{PREFIX}/hello/{r}")
        progress = _get(store, f"{PREFIX}/progress/{r}")
        where = json.loads(hello) if hello else {}
        missing[r] = (f"rank {r} on {where.get('node_name') or where.get('hostname') or 'unknown host'} {why}"
                      + (f", last stage {progress}" if progress else ""))
    return {"payloads": payloads, "missing": missing, "names": names, "topology": topo.to_dict(),
            "columns": columns, "index": index, "collectives": collectives}


def _get(store: Any, key: str) -> str | None:
    try:
        if store.check([key]):
            return bytes(store.get(key)).decode()
    except Exception:  # noqa: S110 - a store hiccup reads as "no information"
        pass
    return None


def _destroy(dist: Any) -> None:
    """Tear down the process group without risking a hang on a broken one."""
    t = threading.Thread(target=lambda: dist.destroy_process_group(), daemon=True)
    t.start()
    t.join(5.0)


def env_timeout(default: float) -> float:
    raw = os.environ.get("GPU_PREFLIGHT_TIMEOUT_S")
    return float(raw) if raw else default
