"""Benchmark: aggregating N synthetic nodes (8 GPUs each) with the existing ``build_cluster_report``.

Target (issue #8): 10,000 nodes in <= 2 s and <= 1 GB on rank 0.

The gathered input is shaped like the runner's (``distributed/runner.py``): one payload per
rank, parsed from JSON (so every rank's objects are distinct, as after ``json.loads`` of
the store values), with GEMM/memory/training/stack results, the collectives of the groups
the rank is in, node 0's node-link exchanges, and on each node's local rank 0 a real node
report: the node checks run on the captured H200 NVML snapshot, widened to 8 GPUs.

Shapes (``--shape``):

* ``runner`` — exactly what the runner sends today: every member of a group repeats the
  group's entry with its full ``ranks`` list (the world group's is world-sized), and DDP's
  ``param_digests`` holds one digest per rank. Only small clusters fit in memory; use
  ``--sweep`` to see how it grows.
* ``lean`` — the same report content, but a group's results are sent once, by its lowest
  rank (what ``collective_entries`` keeps anyway), and the DDP result only by rank 0 (the
  only one ``train.smoke`` judges) with one digest: the change the runner's payload needs.
* ``slim`` — ``lean``, and the node report as rank 0 needs it at scale: the findings
  that are not PASS (a check with none left still reads PASS), and of the raw ``facts``
  only the fields the report's node sections read (``report/canonical.py``). The full
  node report stays on the node (``--report-dir``).

``--proposed`` swaps in, for the run, the code changes measured here as the fix for
``model.py``, ``report/canonical.py`` and the cluster checks (see :func:`apply_proposed`
and :func:`apply_pass_summaries`).

    python bench/bench_aggregate.py [--nodes 10000] [--shape lean] [--profile]
    python bench/bench_aggregate.py --sweep            # runner shape, 16..256 nodes
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import resource
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SNAPSHOT = REPO / "tests" / "fixtures" / "captured" / "h200-580.159.04" / "nvml_capture.json"
OPS = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "all_to_all", "sendrecv")
SIZES = (1 << 20, 8 << 20, 64 << 20, 256 << 20)  # the quick GPU sweep
GPU_FIELDS = ("index", "name", "memory_total_bytes", "memory_used_bytes", "memory_free_bytes", "temperature_c",
              "utilization_gpu_percent", "power_draw_w", "uuid", "serial", "pci_bus_id", "vbios", "lost")


def node_report_text(gpus: int, shape: str) -> str:
    """A real node report: the node checks over the captured snapshot, widened to ``gpus`` GPUs."""
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
    report = run_checks(replay=str(path)).to_dict()
    if shape == "slim":
        for result in report["results"]:
            result["findings"] = [f for f in result["findings"] if f["status"] != "PASS"]
        gpu = report["facts"].get("gpu", {})
        report["facts"] = {"gpu": {"driver_version": gpu.get("driver_version"),
                                   "gpus": [{k: g.get(k) for k in GPU_FIELDS} for g in gpu.get("gpus", [])]},
                           "system": {k: v for k, v in report["facts"].get("system", {}).items()
                                      if k in ("memory_total_bytes", "memory_available_bytes", "disks", "cpu_count",
                                               "cpu_percent", "load_1m")}}
    return json.dumps(report)


def result_rows(busbw: float) -> list[dict[str, Any]]:
    return [{"size_bytes": s, "time_us": 1000.0, "algbw_gbps": busbw, "busbw_gbps": busbw, "bandwidth_gbps": busbw,
             "latency_ms": 1.0, "wrong": 0, "time_us_min": 990.0, "time_us_max": 1010.0} for s in SIZES]


def entry(op: str, group: str, scope: str, ranks: list[int], busbw: float) -> dict[str, Any]:
    return {"op": op, "group": group, "ranks": ranks, "success": True, "processes_tested": len(ranks), "error": None,
            "wrong": 0, "peak_bandwidth_gbps": busbw, "results": result_rows(busbw), "scope": scope}


def gathered_input(nodes: int, gpus: int, shape: str) -> dict[str, Any]:
    """What rank 0's ``gather`` returns for this cluster, built the way it is: by json.loads per rank."""
    world = nodes * gpus
    report_text = node_report_text(gpus, shape)
    base = {"errors": [],
            "stack": {"torch_version": "2.13.0", "torch_cuda": "12.8", "nccl_version": "2.27.3", "cudnn_version": 91000,
                      "cuda_available": True, "device_count": gpus, "cuda_init_error": None},
            "gemm": [{"dtype": d, "n": 8192, "iters": 5, "tflops": t, "rel_error": 1e-3, "correct": True,
                      "error": None} for d, t in (("bf16", 650.0), ("fp16", 640.0), ("tf32", 330.0),
                                                   ("fp32", 55.0))],
            "memory": {"device_copy_gbps": 4100.0, "h2d_gbps": 52.0, "d2h_gbps": 51.0, "pattern_bytes": 1 << 36,
                       "pattern_errors": 0, "patterns": ["address", "0x55", "0xaa"], "error": None},
            "train": {"mode": "single", "steps": 40, "loss_start": 2.4, "loss_end": 0.6, "finite": True,
                      "improved": True, "params_identical": None, "param_digests": None, "error": None}}
    base_text = json.dumps(base)
    world_ranks = list(range(world))
    leaders = list(range(0, world, gpus))
    digests = ["9f" * 32] * world if shape == "runner" else ["9f" * 32]
    payloads: dict[int, dict[str, Any]] = {}
    for rank in range(world):
        node, local = divmod(rank, gpus)
        p = json.loads(base_text)
        p.update(rank=rank, local_rank=local, node_rank=node, hostname=f"gpu{node:05d}", node_name=f"gpu{node:05d}",
                 device=f"cuda:{local}")
        colls: list[dict[str, Any]] = []
        node_ranks = list(range(node * gpus, (node + 1) * gpus))
        groups = [("all", "distributed", world_ranks, 180.0), (f"node{node}", "intra_node", node_ranks, 360.0)]
        if local == 0 and nodes > 1:
            groups.append(("inter0", "inter_node", leaders, 45.0))
        for name, scope, ranks, bw in groups:
            if shape != "runner" and rank != ranks[0]:
                continue
            colls += [entry(op, name, scope, ranks, bw) for op in OPS]
        p["collectives"] = json.loads(json.dumps(colls))  # distinct objects, as after the store's JSON
        if rank == 0 and nodes > 1:
            p["links"] = [{"pair": [0, peer], "bytes": 256 << 20, "iters": 10, "gbps": 47.0, "time_us": 11000.0,
                           "wrong": 0} for peer in leaders[1:]]
        if shape == "runner" or rank == 0:  # train.smoke judges only the first rank's DDP result
            p["ddp"] = json.loads(json.dumps({"mode": "ddp", "steps": 40, "loss_start": 2.4, "loss_end": 0.6,
                                              "finite": True, "improved": True, "params_identical": True,
                                              "param_digests": digests, "error": None}))
        if local == 0:
            p["node_report"] = json.loads(report_text)
            p["node_report"]["hostname"] = f"gpu{node:05d}"
        payloads[rank] = p
    topology = {"launcher": "slurm", "world_size": world, "rank": 0, "local_rank": 0, "local_world_size": gpus,
                "node_rank": 0, "num_nodes": nodes, "hostname": "gpu00000",
                "hosts": [f"gpu{n:05d}" for n in range(nodes)], "master_addr": "gpu00000", "master_port": 29500,
                "extra": {}}
    return {"payloads": payloads, "missing": {}, "topology": topology}


def apply_proposed() -> None:
    """The code changes this benchmark recommends, applied in-process (nothing is written).

    1. ``model.Finding.to_dict`` builds its dict directly: ``dataclasses.asdict`` deep-copies
       every field recursively and the result then went through ``jsonable`` again; it was
       70 % of the aggregation's time.
    2. ``report.canonical.summarize`` maps each check id to its test groups once (cached)
       and fills the groups in one pass, instead of ``fnmatch`` per finding x group x
       pattern in ``_group_result``.
    """
    import functools
    from fnmatch import fnmatchcase

    from gpu_preflight import model
    from gpu_preflight.report import canonical

    def to_dict(self: model.Finding) -> dict[str, Any]:
        return {"check_id": self.check_id, "status": self.status.value, "subject": self.subject, "code": self.code,
                "summary": self.summary, "observed": model.jsonable(self.observed),
                "expected": model.jsonable(self.expected), "unit": self.unit,
                "recommendation": self.recommendation, "details": model.jsonable(self.details)}

    @functools.lru_cache(maxsize=4096)
    def groups_of(check_id: str) -> tuple[str, ...]:
        return tuple(name for name, pats in canonical.TEST_GROUPS.items()
                     if any(fnmatchcase(check_id, p) for p in pats))

    def summarize(findings: list[model.Finding], fail_on: str) -> dict[str, Any]:
        Status = model.Status
        overall = model.verdict(f.status for f in findings)
        ordered = sorted((f for f in findings if f.status.rank >= Status.WARN.rank),
                         key=lambda f: (-f.status.rank, f.check_id, f.subject))
        recommendations = list(dict.fromkeys(f"{f.subject}: {f.recommendation}" for f in ordered if f.recommendation))
        if not model.gating_statuses(fail_on) & {f.status for f in findings} and overall is Status.PASS:
            recommendations.append(canonical.READY)
        groups: dict[str, list[model.Status]] = {name: [] for name in canonical.TEST_GROUPS}
        counts = dict.fromkeys(Status, 0)
        for f in findings:
            counts[f.status] += 1
            for g in groups_of(f.check_id):
                groups[g].append(f.status)
        tests = {name: None if not st or all(s is Status.SKIP for s in st) else
                 Status.worst(st).rank <= Status.SKIP.rank for name, st in groups.items()}
        return {"overall_status": overall.value, "exit_code": model.gated_exit_code(overall, fail_on),
                "test_results": tests, "cluster_info": {}, "performance_summary": {},
                "issues": [f"[{f.status.value}] {f.subject} {f.check_id}: {f.summary}" for f in ordered],
                "recommendations": recommendations, "counts": {s.value: n for s, n in counts.items()}}

    model.Finding.to_dict = to_dict  # type: ignore[method-assign]
    canonical.summarize = summarize


def apply_pass_summaries() -> None:
    """3. Cluster checks report passes as one finding per check, not one per GPU/rank.

    ``compute.gemm`` alone yields a PASS per GPU and precision (320,000 at 10,000 nodes),
    each serialised twice into the report. Failures and warnings keep their own finding
    (they name the GPU); the passes become one ``PASS`` naming how many subjects passed.
    Applied here by wrapping the registered cluster checks.
    """
    import dataclasses

    from gpu_preflight import model, registry

    def collapse(fn: Any) -> Any:
        def wrapped(ctx: Any) -> list[model.Finding]:
            out: list[model.Finding] = []
            passed: list[model.Finding] = []
            for f in fn(ctx):
                (passed if f.status is model.Status.PASS and f.subject != "cluster" else out).append(f)
            if passed:
                out.append(model.Finding(passed[0].check_id, model.Status.PASS, "cluster", "ok",
                                         f"{len(passed)} subject(s) passed: {passed[0].summary} ...",
                                         observed=len(passed), unit="subjects"))
            return out
        return wrapped

    registry.discover()
    for cid, spec in list(registry._CHECKS.items()):
        if spec.scope == "cluster":
            registry._CHECKS[cid] = dataclasses.replace(spec, fn=collapse(spec.fn))


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measure(nodes: int, gpus: int, shape: str, profile: bool) -> dict[str, Any]:
    from gpu_preflight.cluster.aggregate import build_cluster_report
    from gpu_preflight.config import Config

    t0 = time.perf_counter()
    gathered = gathered_input(nodes, gpus, shape)
    built_s = time.perf_counter() - t0
    payload_bytes = sum(len(json.dumps(p)) for p in gathered["payloads"].values())
    gc.collect()
    rss_input = rss_mb()
    kwargs: dict[str, Any] = {"fail_on": "fail", "include": [], "exclude": [], "suite": "quick", "timeout_s": 600}
    t0 = time.perf_counter()
    report, code = build_cluster_report(gathered, Config(), **kwargs)
    agg_s = time.perf_counter() - t0
    rss_after = rss_mb()
    t0 = time.perf_counter()
    text = json.dumps(report)
    dump_s = time.perf_counter() - t0
    del report, text
    gc.collect()
    tracemalloc.start()
    build_cluster_report(gathered, Config(), **kwargs)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    out = {"nodes": nodes, "gpus": gpus, "ranks": nodes * gpus, "shape": shape, "input_build_s": round(built_s, 2),
           "payload_json_mb": round(payload_bytes / 1e6, 1), "rss_with_input_mb": round(rss_input),
           "aggregate_s": round(agg_s, 3), "aggregate_peak_alloc_mb": round(peak / 1e6),
           "rss_peak_mb": round(max(rss_after, rss_mb())), "report_json_s": round(dump_s, 3), "exit_code": code}
    if profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        build_cluster_report(gathered, Config(), **kwargs)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(18)
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--shape", choices=("runner", "lean", "slim"), default="lean")
    p.add_argument("--profile", action="store_true", help="print the top of a cProfile of the aggregation")
    p.add_argument("--proposed", action="store_true", help="apply the recommended model/canonical changes first")
    p.add_argument("--sweep", action="store_true", help="runner shape at 16..256 nodes, each in a fresh process")
    a = p.parse_args()
    if a.sweep:
        for nodes in (16, 32, 64, 128, 256):
            subprocess.run([sys.executable, __file__, "--nodes", str(nodes), "--gpus", str(a.gpus), "--shape",
                            "runner"], check=True)
        return
    if a.proposed:
        apply_proposed()
        apply_pass_summaries()
    result = measure(a.nodes, a.gpus, a.shape, a.profile)
    result["proposed"] = a.proposed
    print(json.dumps(result))
    if a.nodes >= 10_000:
        ok = result["aggregate_s"] <= 2.0 and result["rss_peak_mb"] <= 1024
        print(f"target <= 2 s and <= 1 GB: aggregate {result['aggregate_s']} s, peak RSS {result['rss_peak_mb']} MB "
              f"-> {'OK' if ok else 'MISS'}")


if __name__ == "__main__":
    main()
