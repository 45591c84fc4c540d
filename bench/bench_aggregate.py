"""Benchmark: aggregating N synthetic nodes (8 GPUs each) into the cluster report on rank 0.

Target (issue #8): 10,000 nodes in <= 2 s and <= 1 GB on rank 0.

The gathered input is what ``distributed/runner.py`` sends, bundled per node as the node
leaders do and decoded one bundle at a time as rank 0's ``gather`` does (so no two nodes
share an object, and no list of all the texts is ever held): GEMM,
memory, training and stack results from every rank; each collective group's sweep from
its lowest rank; DDP from rank 0; node 0's node-link exchanges; and from each node's local
rank 0 its node entry, built on the node by the runner's own code from a real node report
(the node checks over the captured H200 NVML snapshot, widened to 8 GPUs). Above
``report.detail_max_nodes`` the entry leaves PASS findings on the node, as the runner does.

Printed: the time to build the report (``aggregate_s``, the first run, which also imports the
cluster checks; ``aggregate_runs_s`` and their ``aggregate_median_s`` over three runs on the same
input, for a noisy machine), rank 0's peak RSS with the input
and the report in memory (``rss_peak_mb``; ``rss_peak_with_json_text_mb`` adds the report
serialised into one string), the report's JSON size and time to serialise, and as a same-run
reference the time rank 0's gather takes to decode and validate the bundles
(``NodeBundle.from_json``, ``decode_s``): aggregation costs ``aggregate_vs_decode`` times reading
the input.

    python bench/bench_aggregate.py [--nodes 10000] [--gpus 8] [--profile]
    python bench/bench_aggregate.py --sweep            # 100..10,000 nodes, each in a fresh process
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from _selfcheck import require, timed

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "fixtures" / "captured" / "h200-580.159.04" / "nvml_capture.json"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
SIZES = (1 << 20, 8 << 20, 64 << 20, 256 << 20)  # the quick GPU sweep
GPU_FIELDS = ("index", "name", "memory_total_bytes", "memory_used_bytes", "memory_free_bytes", "temperature_c",
              "utilization_gpu_percent", "power_draw_w", "uuid", "serial", "pci_bus_id", "vbios", "lost")


def node_entry_text(gpus: int, nodes: int) -> str:
    """A node entry as the runner sends it: the node checks over the snapshot, widened to ``gpus`` GPUs."""
    from gpu_preflight.backends.launcher.topology import Launcher, Topology
    from gpu_preflight.config import Config
    from gpu_preflight.distributed.runner import node_payload
    from gpu_preflight.engine import run_checks

    dump = json.loads(SNAPSHOT.read_text())
    dump["system"]["nvmlDeviceGetCount"] = {"ok": gpus}
    devices = []
    for i in range(gpus):
        dev = copy.deepcopy(dump["devices"][0])
        dev["nvmlDeviceGetIndex"] = dev["nvmlDeviceGetMinorNumber"] = {"ok": i}
        dev["nvmlDeviceGetUUID"] = {"ok": dev["nvmlDeviceGetUUID"]["ok"][:-2] + f"{i:02d}"}
        for key in ("nvmlDeviceGetPciInfo", "nvmlDeviceGetPciInfo_v3"):
            if isinstance(dev.get(key), dict) and isinstance(dev[key].get("ok"), dict):
                dev[key]["ok"]["busId"] = f"00000000:{i + 1:02x}:06.0"
        devices.append(dev)
    dump["devices"] = devices
    path = Path("/tmp") / f"gp-bench-dump-{gpus}.json"
    path.write_text(json.dumps(dump))
    topo = Topology(launcher=Launcher.SLURM, world_size=nodes * gpus, rank=0, local_rank=0, local_world_size=gpus,
                    node_rank=0, num_nodes=nodes, hostname="gpu00000")
    return json.dumps(node_payload(run_checks(replay=str(path)), topo, Config(), None))


def result_rows(busbw: float) -> list[dict[str, Any]]:
    return [{"size_bytes": s, "time_us": 1000.0, "algbw_gbps": busbw, "busbw_gbps": busbw, "bandwidth_gbps": busbw,
             "latency_ms": 1.0, "wrong": 0, "time_us_min": 990.0, "time_us_max": 1010.0} for s in SIZES]


def entry(op: str, group: str, scope: str, ranks: list[int], busbw: float) -> dict[str, Any]:
    return {"op": op, "group": group, "ranks": ranks, "success": True, "processes_tested": len(ranks), "error": None,
            "wrong": 0, "peak_bandwidth_gbps": busbw, "results": result_rows(busbw), "scope": scope}


BASE = {"errors": [],
        "stack": {"torch_version": "2.13.0", "torch_cuda": "12.8", "nccl_version": "2.27.3", "cudnn_version": 91000,
                  "cuda_available": True, "device_count": 8, "cuda_init_error": None},
        "gemm": [{"dtype": d, "n": 8192, "iters": 5, "tflops": t, "rel_error": 1e-3, "correct": True,
                  "error": None} for d, t in (("bf16", 650.0), ("fp16", 640.0), ("tf32", 330.0), ("fp32", 55.0))],
        "memory": {"device_copy_gbps": 4100.0, "h2d_gbps": 52.0, "d2h_gbps": 51.0, "pattern_bytes": 1 << 36,
                   "pattern_errors": 0, "patterns": ["address", "0x55", "0xaa"], "error": None},
        "train": {"mode": "single", "steps": 40, "loss_start": 2.4, "loss_end": 0.6, "finite": True,
                  "improved": True, "params_identical": None, "param_digests": None, "error": None}}


def node_texts(node: int, nodes: int, gpus: int, entry_text: str) -> dict[int, str]:
    """The payload texts one node's ranks send (``RankPayload.to_json`` of what the runner fills)."""
    world = nodes * gpus
    world_ranks = list(range(world))
    leaders = list(range(0, world, gpus))
    base = dict(BASE, stack=dict(BASE["stack"], device_count=gpus))
    texts: dict[int, str] = {}
    for local in range(gpus):
        rank = node * gpus + local
        p: dict[str, Any] = dict(base, rank=rank, local_rank=local, node_rank=node, hostname=f"gpu{node:05d}",
                                 node_name=f"gpu{node:05d}", device=f"cuda:{local}", collectives=[])
        groups = [("all", "distributed", world_ranks, 180.0),
                  (f"node{node}", "intra_node", list(range(node * gpus, (node + 1) * gpus)), 360.0)]
        if nodes > 1:
            groups.append(("inter0", "inter_node", leaders, 45.0))
        for name, scope, ranks, bw in groups:
            if rank == ranks[0]:  # the runner: a group's lowest rank reports its sweep
                p["collectives"] += [entry(op, name, scope, ranks, bw) for op in OPS]
        if rank == 0 and nodes > 1:
            p["links"] = [{"pair": [0, peer], "bytes": 256 << 20, "iters": 10, "gbps": 47.0,
                           "time_us": 11000.0, "wrong": 0} for peer in leaders[1:]]
            p["ddp"] = {"mode": "ddp", "steps": 40, "loss_start": 2.4, "loss_end": 0.6, "finite": True,
                        "improved": True, "params_identical": True, "param_digests": ["9f" * 32],
                        "odd_ranks": [], "error": None}
        text = json.dumps(p)
        if local == 0:
            text = text[:-1] + ', "node_entry": ' + entry_text.replace("node_0", f"node_{node}") + "}"
        texts[rank] = text
    return texts


def gathered_input(nodes: int, gpus: int) -> tuple[dict[str, Any], float, int]:
    """What rank 0's ``gather`` returns for this cluster, the seconds its decoding took, and the bytes."""
    from gpu_preflight.distributed.payload import NodeBundle
    from gpu_preflight.distributed.runner import _bundle

    world = nodes * gpus
    entry_text = node_entry_text(gpus, nodes)
    payloads: dict[int, dict[str, Any]] = {}
    columns: list[dict[str, Any]] = []
    index: list[list[Any]] = []
    collectives: list[dict[str, Any]] = []
    size, decode_s = 0, 0.0
    for node in range(nodes):
        bundle = _bundle(node_texts(node, nodes, gpus, entry_text), {})  # the node leader's one store value
        size += len(bundle)
        t0 = time.perf_counter()
        decoded = NodeBundle.from_json(bundle)  # rank 0's gather: decoded and validated
        payloads.update(decoded.payloads)
        columns.append(decoded.columns)
        index.append(decoded.index)
        collectives.append(decoded.collectives)
        decode_s += time.perf_counter() - t0
    topology = {"launcher": "slurm", "world_size": world, "rank": 0, "local_rank": 0, "local_world_size": gpus,
                "node_rank": 0, "num_nodes": nodes, "hostname": "gpu00000",
                "hosts": [f"gpu{n:05d}" for n in range(nodes)], "master_addr": "gpu00000", "master_port": 29500,
                "extra": {}}
    return {"payloads": payloads, "missing": {}, "topology": topology, "columns": columns, "index": index,
            "collectives": collectives}, decode_s, size


def rss_mb() -> float:
    """Peak resident set of this process so far (MB): input, aggregation and report together."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(nodes: int, gpus: int, profile: bool) -> dict[str, Any]:
    from gpu_preflight.config import Config
    from gpu_preflight.report.build import build_cluster_report

    t0 = time.perf_counter()
    gathered, decode_s, payload_bytes = gathered_input(nodes, gpus)
    built_s = time.perf_counter() - t0
    gc.collect()
    rss_input = rss_mb()
    kwargs: dict[str, Any] = {"fail_on": "fail", "include": [], "exclude": [], "suite": "quick", "timeout_s": 600}
    t0 = time.perf_counter()
    report, code = build_cluster_report(gathered, Config(), **kwargs)
    agg_s = time.perf_counter() - t0
    rss_after = rss_mb()
    t0 = time.perf_counter()
    text = json.dumps(report.to_dict())
    dump_s = time.perf_counter() - t0
    out: dict[str, Any] = {"nodes": nodes, "gpus": gpus, "ranks": nodes * gpus, "input_build_s": round(built_s, 2),
           "payload_json_mb": round(payload_bytes / 1e6, 1), "decode_s": round(decode_s, 3),
           "rss_with_input_mb": round(rss_input), "aggregate_s": round(agg_s, 3),
           "aggregate_vs_decode": round(agg_s / decode_s, 2), "rss_peak_mb": round(rss_after),
           "rss_peak_with_json_text_mb": round(rss_mb()),
           "report_json_mb": round(len(text) / 1e6, 1), "report_json_s": round(dump_s, 3),
           "findings": len(report.findings), "exit_code": code}
    del report, text
    again = []  # the same aggregation twice more: the median of three says what one noisy run does not
    for _ in range(2):
        gc.collect()
        t0 = time.perf_counter()
        build_cluster_report(gathered, Config(), **kwargs)
        again.append(time.perf_counter() - t0)
    out["aggregate_runs_s"] = [round(x, 3) for x in (agg_s, *again)]
    out["aggregate_median_s"] = round(statistics.median((agg_s, *again)), 3)
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        build_cluster_report(gathered, Config(), **kwargs)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--profile", action="store_true", help="print the top of a cProfile of the aggregation")
    p.add_argument("--sweep", action="store_true", help="100..10,000 nodes, each in a fresh process")
    a = p.parse_args()
    require("bench_aggregate", "gpu_preflight.cluster.aggregate")
    if a.sweep:
        for nodes in (100, 1000, 3000, 10_000):
            ran = timed("bench_aggregate", [sys.executable, __file__, "--nodes", str(nodes), "--gpus", str(a.gpus)],
                        what=f"the {nodes}-node run")
            print(ran.stdout, end="")
        return
    result = measure(a.nodes, a.gpus, a.profile)
    print(json.dumps(result))
    if a.nodes >= 10_000:
        ok = result["aggregate_median_s"] <= 2.0 and result["rss_peak_mb"] <= 1024
        print(f"target <= 2 s and <= 1 GB: aggregate {result['aggregate_median_s']} s (median of "
              f"{result['aggregate_runs_s']}), peak RSS {result['rss_peak_mb']} MB -> {'OK' if ok else 'MISS'}")


if __name__ == "__main__":
    main()
