"""Benchmark: the job's store at 1,000-16,000 ranks, on the real transport (issue 31).

A real ``torch.distributed.TCPStore`` server (the libuv backend the job uses) runs in its own
process; N simulated ranks, each holding its own store connection, run in several client
processes (so the bench measures the server, not one client process's interpreter) and do
what the runner's ranks do, through the runner's own code: hello, the stage counters
(:func:`~gpu_preflight.distributed.rank.stage` with per-node :class:`~.stages.Marks`), the
heartbeat (:class:`~gpu_preflight.distributed.store.Heartbeat`, its beats driven from one
thread per process at the real interval and spread), arrival (:func:`~.store.arrive`),
payloads of the size an 8-GPU node sends (``bench_aggregate.node_texts``: node checks over
the captured H200 snapshot widened to 8 GPUs), and node leaders bundling
(:func:`~.gather.post_node_bundle`). Rank 0 runs here: :class:`~.watch.JobWatch` for the
whole run, :func:`~.store.form_group` and :func:`~.gather.gather`. One rank, not a leader,
is killed as the payloads start (its beats stop and its connection closes).

Printed per N: the time to connect (and per connection), formation, heartbeat writes per
second, the store server's CPU (cores) and RSS over a steady heartbeat phase and over the
gather, the time from the last bundle posted to rank 0 holding every bundle, the time to
name the killed rank, and, alternated in the same script on the same store, ``gather`` over
every bundle already posted against the transport's floor (one ``multi_get`` of every
bundle key plus ``json.loads`` of each): ``ratio``; the load average and the wall time of
each N. Where the file descriptors run out the script says so and stops.

Every TCPStore connection makes a reverse DNS lookup of the peer's address (torch's
``socket.cpp``: the client before it connects, the server on its event-loop thread after
``accept``). On a VM whose resolver is slow or drops queries that, not the store, sets the
connection rate; ``--netns`` runs the bench in a private network namespace (loopback only,
``unshare -n``, root), where the lookup fails at once, so the store itself is measured.

    python bench/bench_store_scale.py --ranks 1000 4000 [--procs 4] [--steady-s 8] [--netns]
"""

from __future__ import annotations

import argparse
import contextlib
import heapq
import json
import multiprocessing as mp
import os
import random
import resource
import shlex
import statistics
import sys
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

GPUS = 8


def raise_fd_limit() -> int:
    """Raise this process's open-file limit to the hard limit; the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def proc_cpu_rss(pid: int) -> tuple[float, float]:
    """CPU seconds (user + system) and resident MB of a process, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    rss = int(fields[21]) * os.sysconf("SC_PAGE_SIZE") / 1e6
    return cpu, rss


def serve(conn: Any) -> None:
    """The store server: a master ``TCPStore`` (libuv) and nothing else in the process."""
    raise_fd_limit()
    import torch.distributed as dist

    server = dist.TCPStore(  # type: ignore[attr-defined]
        "127.0.0.1", 0, is_master=True, wait_for_workers=False, timeout=timedelta(seconds=300))
    conn.send((server.port, bool(getattr(server, "libuvBackend", True))))
    conn.recv()  # until told to stop
    del server


def topo_of(rank: int, world: int) -> Any:
    from gpu_preflight.backends.launcher.topology import Launcher, Topology

    node, local = divmod(rank, GPUS)
    return Topology(launcher=Launcher.SLURM, world_size=world, rank=rank, local_rank=local, local_world_size=GPUS,
                    node_rank=node, num_nodes=world // GPUS, hostname=f"gpu{node:05d}")


def text_for(texts: dict[int, str], rank: int) -> str:
    """Rank ``rank``'s payload: node 0's as recorded, any other node's from node 1's texts renumbered."""
    node, local = divmod(rank, GPUS)
    if node == 0:
        return texts[local]
    mark = f'"rank": {GPUS + local}, "local_rank": {local}, "node_rank": 1,'
    return texts[GPUS + local].replace(mark, f'"rank": {rank}, "local_rank": {local}, "node_rank": {node},', 1)


def ranks_process(conn: Any, port: int, ranks: list[int], world: int, texts: dict[int, str], killed: int) -> None:
    """Simulated ranks: connections, hello, stages, heartbeats, arrival, payloads, node bundles (the runner's code)."""
    raise_fd_limit()
    import torch.distributed as dist

    from gpu_preflight.distributed.gather import post_node_bundle
    from gpu_preflight.distributed.rank import stage
    from gpu_preflight.distributed.stages import SCAN_RANKS, Marks
    from gpu_preflight.distributed.store import PREFIX, Heartbeat, arrive

    stores: dict[int, Any] = {}
    t0 = time.monotonic()
    try:
        for r in ranks:
            stores[r] = dist.TCPStore(  # type: ignore[attr-defined]
                "127.0.0.1", port, is_master=False, wait_for_workers=False, timeout=timedelta(seconds=300))
    except Exception as exc:  # the machine's file descriptors or the server's backlog ran out
        conn.send(("failed", f"{len(stores)} connections, then {type(exc).__name__}: {exc}"))
        return
    connect_s = time.monotonic() - t0
    connected_at = time.time()
    beats = {r: Heartbeat(stores[r], r, world_size=world) for r in ranks}
    marks = {r: Marks(stores[r], r // GPUS, per_node=world > SCAN_RANKS, rank=r) for r in ranks}
    for r in ranks:
        stage(stores[r], r, "arrive", marks[r])
        stores[r].set(f"{PREFIX}/hello/{r}", json.dumps({"hostname": f"gpu{r // GPUS:05d}", "node_name":
                                                          f"gpu{r // GPUS:05d}", "node_rank": r // GPUS,
                                                          "local_rank": r % GPUS, "pid": os.getpid()}))
        beats[r].beat()  # Heartbeat.start's first beat, written before arrival
        arrive(stores[r], topo_of(r, world))
    stop, count = threading.Event(), [0]

    def drive() -> None:
        """Each rank's beats at its real interval, spread as Heartbeat._run spreads them."""
        rng = random.Random(ranks[0])  # noqa: S311 - spreading, not security
        due = [(time.monotonic() + rng.uniform(0, hb.interval), r) for r, hb in beats.items()]
        heapq.heapify(due)
        while not stop.is_set():
            at, r = heapq.heappop(due)
            if stop.wait(max(0.0, at - time.monotonic())):
                return
            hb = beats.get(r)
            if hb is None:  # the killed rank
                continue
            try:
                hb.beat()
            except Exception:  # noqa: S112 - a closed connection
                continue
            count[0] += 1
            heapq.heappush(due, (at + hb.interval * rng.uniform(0.75, 1.25), r))

    driver = threading.Thread(target=drive, daemon=True)
    driver.start()
    conn.send(("ready", len(stores), connect_s, connected_at))
    conn.recv()  # steady phase starts
    c0, t0 = count[0], time.monotonic()
    conn.recv()  # payload phase starts
    steady = (count[0] - c0) / (time.monotonic() - t0)
    killed_at = None
    if killed in beats:
        del beats[killed]
        stores.pop(killed)  # its connection closes, as a killed process's would
        killed_at = time.time()
    last_payload = 0.0
    for r in ranks:
        if r != killed:
            stage(stores[r], r, "done", marks[r])
            stores[r].set(f"{PREFIX}/payload/{r}", text_for(texts, r))
            last_payload = time.time()
    posted: list[float] = []

    def bundle(r: int) -> None:
        post_node_bundle(stores[r], topo_of(r, world), time.monotonic() + 120)
        posted.append(time.time())

    leaders = [threading.Thread(target=bundle, args=(r,)) for r in ranks if r % GPUS == 0 and r != 0]
    for t in leaders:
        t.start()
    for t in leaders:
        t.join()
    conn.send(("done", steady, last_payload, max(posted, default=0.0), killed_at))
    conn.recv()
    stop.set()


class Shown:
    """A stage view that keeps what the watch showed (the bench checks it named the killed rank's node)."""

    def __init__(self) -> None:
        self.states: list[Any] = []

    def show(self, state: Any) -> None:
        self.states.append(state)

    def close(self) -> None:
        return None


def floor_read(store: Any, nodes: int) -> float:
    """The transport's floor: one ``multi_get`` of every bundle key and a ``json.loads`` of each."""
    from gpu_preflight.distributed.store import PREFIX

    t0 = time.perf_counter()
    for v in store.multi_get([f"{PREFIX}/node/{n}" for n in range(nodes)]):
        json.loads(v)
    return time.perf_counter() - t0


def measure(world: int, procs: int, steady_s: float, texts: dict[int, str]) -> dict[str, Any]:
    import torch.distributed as dist

    from gpu_preflight.distributed.gather import gather, post_node_bundle
    from gpu_preflight.distributed.liveness import beat_interval, stale_after
    from gpu_preflight.distributed.rank import stage
    from gpu_preflight.distributed.stages import SCAN_RANKS, Marks
    from gpu_preflight.distributed.store import PREFIX, Heartbeat, form_group
    from gpu_preflight.distributed.watch import JobWatch

    wall0 = time.monotonic()
    ctx = mp.get_context("spawn")
    here, there = ctx.Pipe()
    server = ctx.Process(target=serve, args=(there,), daemon=True)
    server.start()
    port, libuv = here.recv()
    killed = world // 2 + 3  # a rank that is not a node leader
    others = list(range(1, world))
    pipes, workers = [], []
    for i in range(procs):
        a, b = ctx.Pipe()
        w = ctx.Process(target=ranks_process, args=(b, port, others[i::procs], world, texts, killed), daemon=True)
        w.start()
        pipes.append(a)
        workers.append(w)
    out: dict[str, Any] = {"ranks": world, "nodes": world // GPUS, "procs": procs, "libuv": libuv,
                           "beat_interval_s": beat_interval(world),
                           "stale_after_s": stale_after(beat_interval(world)), "load_before": os.getloadavg()[0]}
    view = Shown()
    watch = None
    try:
        store: Any = dist.TCPStore(  # type: ignore[attr-defined]
            "127.0.0.1", port, is_master=False, wait_for_workers=False, timeout=timedelta(seconds=300))
        topo0 = topo_of(0, world)
        marks0 = Marks(store, 0, per_node=world > SCAN_RANKS, rank=0)
        stage(store, 0, "arrive", marks0)
        store.set(f"{PREFIX}/hello/0", json.dumps({"hostname": "gpu00000", "node_name": "gpu00000",
                                                   "node_rank": 0, "local_rank": 0, "pid": os.getpid()}))
        ours = Heartbeat(store, 0, world_size=world)
        ours.start()
        watch = JobWatch(store, topo0, view).start()  # as rank 0 runs it: on the gather's store
        t0 = time.monotonic()
        why, absent = form_group(store, topo0, 600)
        formed_at = time.time()
        replies = [p.recv() for p in pipes]
        failed = [r[1] for r in replies if r[0] == "failed"]
        if failed:
            out["stopped"] = "; ".join(failed)
            return out
        out["connect_and_formation_s"] = round(time.monotonic() - t0, 2)  # every client connects, then arrives
        out["connect_s"] = round(max(r[2] for r in replies), 2)  # the slowest process's connections
        out["connect_ms_each"] = round(1000 * statistics.mean(r[2] / max(r[1], 1) for r in replies), 2)
        out["formation_after_last_connect_s"] = round(formed_at - max(r[3] for r in replies), 2)
        out["formed"] = why is None
        cpu0, _ = proc_cpu_rss(server.pid or 0)
        for p in pipes:
            p.send("steady")
        time.sleep(steady_s)
        cpu1, rss1 = proc_cpu_rss(server.pid or 0)
        out["server_cores_steady"] = round((cpu1 - cpu0) / steady_s, 3)
        out["server_rss_mb_steady"] = round(rss1, 1)
        for p in pipes:
            p.send("payloads")
        stage(store, 0, "done", marks0)
        store.set(f"{PREFIX}/payload/0", text_for(texts, 0))
        g0, c0 = time.monotonic(), cpu1
        post_node_bundle(store, topo0, time.monotonic() + 120)
        got = gather(store, topo0, time.monotonic() + 120, absent)
        held = time.time()
        out["gather_s"] = round(time.monotonic() - g0, 2)
        cpu2, rss2 = proc_cpu_rss(server.pid or 0)
        out["server_cores_gather"] = round((cpu2 - c0) / (time.monotonic() - g0), 3)
        out["server_rss_mb_gather"] = round(rss2, 1)
        done = [p.recv() for p in pipes]
        out["beats_per_s"] = round(sum(d[1] for d in done), 0)
        last_bundle = max(d[3] for d in done)
        out["last_bundle_to_all_s"] = round(held - last_bundle, 3)
        out["last_payload_to_all_s"] = round(held - max(d[2] for d in done), 3)
        killed_at = next(d[4] for d in done if d[4] is not None)
        out["killed_named"] = sorted(got["missing"]) == [killed]
        out["killed_named_after_s"] = round(held - killed_at, 1)
        out["payloads"] = len(got["payloads"])
        waits = [s.waiting for s in view.states if getattr(s, "waiting", "")]
        out["watch_states"] = len(view.states)
        out["watch_last_waiting"] = waits[-1] if waits else ""
        out["watch_named_killed_node"] = any(f"gpu{killed // GPUS:05d}" in w for w in waits)
        watch.stop()
        watch = None
        ours_s, floor_s = [], []
        for _ in range(3):  # alternated on the same store: gather with every bundle posted vs the floor
            t = time.perf_counter()
            gather(store, topo0, time.monotonic() + 120, absent)
            ours_s.append(time.perf_counter() - t)
            floor_s.append(floor_read(store, world // GPUS))
        out["gather_all_posted_s"] = round(statistics.median(ours_s), 3)
        out["multi_get_floor_s"] = round(statistics.median(floor_s), 3)
        out["ratio"] = round(statistics.median(ours_s) / statistics.median(floor_s), 2)
        ours.stop.set()
        return out
    finally:
        if watch is not None:
            watch.stop()
        for p in pipes:
            with contextlib.suppress(Exception):  # a worker that failed has gone
                p.send("stop")
        for w in workers:
            w.join(10)
            if w.is_alive():
                w.kill()
        here.send("stop")
        server.join(10)
        if server.is_alive():
            server.kill()
        out["load_after"] = os.getloadavg()[0]
        out["wall_s"] = round(time.monotonic() - wall0, 1)


def in_private_netns() -> None:
    """Run this script again in a private network namespace with loopback only (``unshare -n``):
    the reverse DNS lookup of every connection fails at once there instead of asking the host's resolver."""
    argv = [sys.executable, *(a for a in sys.argv if a != "--netns"), "--in-netns"]
    script = "ip link set lo up && exec " + shlex.join(argv)
    os.execvp("unshare", ["unshare", "-n", "sh", "-c", script])  # noqa: S606 - argv quoted for the shell


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--ranks", type=int, nargs="+", default=[1000, 4000])
    p.add_argument("--procs", type=int, default=4, help="client processes the simulated ranks share")
    p.add_argument("--steady-s", type=float, default=8.0, help="seconds of heartbeats only, for the server's CPU")
    p.add_argument("--netns", action="store_true", help="run in a private network namespace (no DNS; needs root)")
    p.add_argument("--in-netns", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args()
    os.environ.setdefault("TORCH_CPP_LOG_LEVEL", "ERROR")  # c10d warns of every timed-out wait: the waits are ours
    if a.netns:
        in_private_netns()
    limit = raise_fd_limit()
    from bench_aggregate import node_entry_text, node_texts

    texts = node_texts(0, 2, GPUS, node_entry_text(GPUS, 1000)) | node_texts(1, 2, GPUS, node_entry_text(GPUS, 1000))
    sizes = sorted(len(t) for t in texts.values())
    print(json.dumps({"fd_limit": limit, "payload_bytes_leader": sizes[-1], "payload_bytes_other": sizes[0],
                      "private_netns": a.in_netns, "cpus": os.cpu_count()}), flush=True)
    for world in a.ranks:
        if world + 64 > limit:
            print(json.dumps({"ranks": world, "stopped": f"the server would need {world} descriptors, "
                                                          f"the limit is {limit}"}), flush=True)
            break
        result = measure(world, a.procs, a.steady_s, texts)
        print(json.dumps(result), flush=True)
        if "stopped" in result:
            break


if __name__ == "__main__":
    main()
