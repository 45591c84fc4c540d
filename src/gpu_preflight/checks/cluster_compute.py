"""Cluster checks over per-GPU workloads: GEMM, memory, training smoke, software stack, skew."""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterator
from typing import Any, cast

from ..actions import Action
from ..ids import GEMM_ID, MEMORY_BANDWIDTH_ID
from ..model import Finding, Status
from ..records import ClusterView
from ..records.columns import GemmColumns
from ..registry import CheckContext, check
from .cluster_comm import cluster
from .cluster_identity import identity_findings
from .cluster_load import explain
from .cluster_rollup import Passes, Series
from .common import version_below
from .floors import Floor, host_transfer_floor, node_topology, peer_gap_status

GEMM_ACTIONS = {"gemm_wrong": Action.ISOLATE_NODE}
MEMORY_ACTIONS = {"pattern_errors": Action.ISOLATE_NODE}
"""A GPU that computes wrong products or reads back wrong memory corrupts training silently: DCGM
isolates for the same findings (DCGM_FR_L1TAG_MISCOMPARE, DCGM_FR_FAULTY_MEMORY,
DCGM_FR_MEMORY_MISMATCH: ISOLATE). A slow GPU names no action: why it is slow is another check's
finding (clocks, power, PCIe), which names its own."""


@check(GEMM_ID, needs=("cluster",), scope="cluster", group="compute", component="hardware_health",
       actions=GEMM_ACTIONS)
def gemm(ctx: CheckContext) -> Iterator[Finding]:
    """Every GPU computes GEMMs correctly and at the expected speed.

    FAIL when a product is wrong (Freivalds check against float64) or throughput is below
    ``perf.gemm_fail_fraction`` of the profile's expected TFLOP/s for the precision; WARN
    below ``perf.gemm_warn_fraction`` of it. Against the median of all GPUs in the job for
    that precision: WARN more than ``perf.peer_outlier_fraction`` below, FAIL
    ``perf.peer_outlier_fail_fraction`` or more below (a data-parallel step waits for the
    slowest GPU). CPU workers share cores and are held to no GPU expectation, and are not
    compared with each other. ERROR when a precision could not run.
    """
    c, perf = cluster(ctx), ctx.config.perf
    passes = Passes(ctx, c)
    by_dtype = c.columns.gemm
    if not by_dtype:
        yield ctx.finding(Status.SKIP, "cluster", "not_run", "no GEMM result was gathered")
    on_gpu, subject = c.gpu_ranks, c.rank_subject
    for dtype, col in sorted(by_dtype.items()):
        ranks, tflops = col.rank, col.tflops
        view = c.rank_names(ranks)
        expected = getattr(perf, f"gemm_{dtype}_tflops", None)
        # The common case costs a few C-speed calls per precision: every product correct, no
        # error, all on GPUs, the slowest above the floors; anything else is looked at GPU by GPU.
        clean = all(col.correct) and not any(col.error) and None not in tflops
        ok = [True] * len(ranks) if clean else [bool(k) and not e for k, e in zip(col.correct, col.error, strict=True)]
        ok_values = tflops if clean and view.all_gpu else [t for t, k, r in zip(tflops, ok, ranks, strict=True)
                                                           if k and r in on_gpu]
        ordered = sorted(ok_values)
        n_ok = len(ordered)  # CPU ranks share cores: no peers, no median
        median = (ordered[n_ok // 2] if n_ok % 2 else (ordered[n_ok // 2 - 1] + ordered[n_ok // 2]) / 2) \
            if n_ok >= 2 else None
        details = {"dtype": dtype, "median_tflops": median, "expected": expected}
        floors = [x for x in (expected and expected * perf.gemm_warn_fraction,
                              median and median * (1 - perf.peer_outlier_fraction)) if x]
        low = max(floors) if floors else float("-inf")
        if clean and view.all_gpu and (not tflops or min(tflops) >= low):
            flagged: set[int] = set()
        else:
            flagged = {i for i, (t, k, r) in enumerate(zip(tflops, ok, ranks, strict=True))
                       if not k or (r in on_gpu and (t or 0.0) < low)}
        for i in sorted(flagged):
            yield _with_load(_judge_gemm(ctx, subject(ranks[i]), dtype, col.row(i), perf, details),
                             c.payloads.get(ranks[i], {}).get("load"), f"gemm_{dtype}")

        def passed(i: int, col: GemmColumns = col, details: dict[str, Any] = details) -> Finding:
            r = col.rank[i]
            own = details if r in on_gpu else {**details, "expected": None, "median_tflops": None}
            return _gemm_finding(ctx, subject(r), f"{own['dtype']} GEMM {col.n[i]}^3", float(col.tflops[i]),
                                 Status.PASS, "ok", None, own)

        gpu_only = view.all_gpu or on_gpu.issuperset([r for i, r in enumerate(ranks) if i not in flagged])
        yield from passes.add(view.subjects, passed, Series(dtype, tflops, f"{dtype} GEMM", "TFLOP/s",
                                                            {**details, "gpu_only": gpu_only}), judged=flagged)
    yield from passes.findings()


def _with_load(finding: Finding, load: Any, phase: str) -> Finding:
    """A slow GPU's GEMM finding says what its load series saw in that phase (see load.*)."""
    why = explain(load, phase) if finding.status in (Status.WARN, Status.FAIL) else None
    if why is not None:
        finding.summary += f"; under load: {why[0]}"
        finding.details = {**finding.details, "load": why[1]}
    return finding


def _judge_gemm(ctx: CheckContext, subject: str, dtype: str, g: dict[str, Any], perf: Any,
                details: dict[str, Any]) -> Finding:
    """The verdict on one GPU's GEMM for one precision (wrong, failed, slow, outlier or fine)."""
    expected, median = details["expected"], details["median_tflops"]
    tflops = float(g.get("tflops") or 0.0)
    label = f"{dtype} GEMM {g['n']}^3"
    if g.get("error"):
        return ctx.finding(Status.ERROR, subject, "gemm_error", f"{label}: {g['error']}",
                           recommendation="Check the CUDA stack (stack.cuda) and GPU memory.")
    if not g.get("correct"):
        return ctx.finding(Status.FAIL, subject, "gemm_wrong",
                           f"{label}: wrong result (relative error {g['rel_error']:.3g})",
                           observed=g["rel_error"], unit="rel. error",
                           recommendation="The GPU computes wrong results: drain the node, run DCGM level 3, "
                                          "RMA the GPU if it repeats.")
    status, code, limit = Status.PASS, "ok", None
    if expected:
        if tflops < expected * perf.gemm_fail_fraction:
            status, code, limit = Status.FAIL, "gemm_slow", expected * perf.gemm_fail_fraction
        elif tflops < expected * perf.gemm_warn_fraction:
            status, code, limit = Status.WARN, "gemm_below_expected", expected * perf.gemm_warn_fraction
    if status is not Status.FAIL and median:
        peer = peer_gap_status(tflops, median, perf)
        if peer is Status.FAIL:
            status, code, limit = Status.FAIL, "gemm_outlier", median * (1 - perf.peer_outlier_fail_fraction)
        elif peer is Status.WARN and status is Status.PASS:
            status, code, limit = Status.WARN, "gemm_outlier", median * (1 - perf.peer_outlier_fraction)
    return _gemm_finding(ctx, subject, label, tflops, status, code, limit, details)


def _gemm_finding(ctx: CheckContext, subject: str, label: str, tflops: float, status: Status, code: str,
                  limit: float | None, details: dict[str, Any]) -> Finding:
    expected, median = details["expected"], details["median_tflops"]
    shown = f"{tflops * 1000:.1f} GFLOP/s" if tflops < 1 else f"{tflops:.1f} TFLOP/s"
    return ctx.finding(status, subject, code,
                       f"{label}: {shown}" + (f" (expected {expected:g}, peers' median {median:.1f})"
                                              if expected and median else ""),
                       observed=round(tflops, 4), expected=f">= {limit:.1f}" if limit else expected,
                       unit="TFLOP/s", details=details,
                       recommendation=None if status is Status.PASS else
                       "Check clocks and throttling (gpu.clocks, gpu.power, gpu.thermal) and other processes "
                       "on the GPU (gpu.busy); compare with DCGM targeted stress.")


@check(MEMORY_BANDWIDTH_ID, needs=("cluster",), scope="cluster", group="compute", component="hardware_health",
       actions=MEMORY_ACTIONS)
def memory(ctx: CheckContext) -> Iterator[Finding]:
    """GPU memory copies fast, host transfers reach PCIe/C2C speed, patterns read back intact.

    FAIL on any pattern mismatch (bad HBM). Device copy below ``perf.device_copy_min_gbps``,
    or pinned host↔device below ``perf.host_transfer_min_gbps`` (halved per PCIe generation
    the GPU's link can reach less than ``gpu.pcie_expected_gen``), WARNs; below
    ``perf.bandwidth_floor_fail_fraction`` of the floor it FAILs (a downtrained PCIe link,
    HBM at half speed). Against the median of the job's GPUs for each direction: WARN more
    than ``perf.peer_outlier_fraction`` below, FAIL ``perf.peer_outlier_fail_fraction`` or
    more below. ERROR when the test could not run; SKIP on CPU.
    """
    c, perf = cluster(ctx), ctx.config.perf
    passes = Passes(ctx, c)
    col, subject = c.columns.memory, c.rank_subject
    ranks, copy, h2d, d2h = col.rank, col.device_copy_gbps, col.h2d_gbps, col.d2h_gbps
    per_node = max(c.local_world_size, 1)
    host_floors: dict[int, Floor | None] = {}
    for node in {r // per_node for r in ranks}:
        host_floors[node] = host_transfer_floor(perf, ctx.config.gpu,
                                                node_topology(c.node_facts.get(node, {}).get("gpu")))
    medians = {key: _median([v for v, e in zip(values, col.error, strict=True) if v is not None and not e])
               for key, values in (("device_copy", copy), ("h2d", h2d), ("d2h", d2h))}
    # The strictest line each direction is held to: a rank at or above it on every direction passes.
    copy_line = max(_lines(perf.device_copy_min_gbps, medians["device_copy"], perf), default=None)
    host_line = {key: max(_lines(max((f.gbps for f in host_floors.values() if f), default=None), medians[key], perf),
                          default=None) for key in ("h2d", "d2h")}
    inf = float("inf")
    # Screen the columns first; only the flagged get a verdict each. The common case is a few
    # C-speed calls (no error, no bad pattern, every minimum above its line). An unmeasured
    # direction (None) is not slow, as _judge_memory judges it; 0.0 is.
    clean = not any(col.error) and not any(col.pattern_errors) and _all_at(copy, copy_line) \
        and _all_at(h2d, host_line["h2d"]) and _all_at(d2h, host_line["d2h"])
    flagged: set[int] = set() if clean else {
        i for i, (e, bad, dc, hd, dh) in enumerate(zip(col.error, col.pattern_errors, copy, h2d, d2h,
                                                        strict=True))
        if e or bad or (copy_line is not None and (inf if dc is None else dc) < copy_line)
        or (host_line["h2d"] is not None and (inf if hd is None else hd) < host_line["h2d"])
        or (host_line["d2h"] is not None and (inf if dh is None else dh) < host_line["d2h"])}
    judged: set[int] = set()
    for i in sorted(flagged):
        findings = list(_judge_memory(ctx, subject(ranks[i]), col.row(i), perf, host_floors[ranks[i] // per_node],
                                      medians))
        if any(f.status is not Status.PASS for f in findings):
            judged.add(i)
            yield from findings
    names = c.rank_names(ranks).subjects
    yield from passes.add(names, lambda i: _memory_pass(ctx, names[i], col.row(i)),
                          *(Series(key, values, f"the memory test ({what})", "GB/s", {"memory_key": key})
                            for key, values, what in (("device_copy", copy, "device copy"),
                                                      ("h2d", h2d, "host-to-device"), ("d2h", d2h, "device-to-host"))),
                          judged=judged)
    yield from passes.findings()
    if not ranks:
        yield ctx.finding(Status.SKIP, "cluster", "no_gpu", "no GPU worker: memory test not run")


def _all_at(values: list[float | None], line: float | None) -> bool:
    """Every rank measured this direction, at or above ``line`` where there is one (at C speed)."""
    if None in values:
        return False
    return line is None or not values or min(cast("list[float]", values)) >= line


def _median(values: list[float]) -> float | None:
    """The median of two or more measurements (one GPU has no peers)."""
    return statistics.median(values) if len(values) >= 2 else None


def _lines(floor: float | None, median: float | None, perf: Any) -> list[float]:
    """The WARN lines a value is screened against: its floor and its peers' median, where known."""
    return [x for x in (floor, median and median * (1 - perf.peer_outlier_fraction)) if x]


def _judge_memory(ctx: CheckContext, subject: str, m: dict[str, Any], perf: Any, host_floor: Floor | None,
                  medians: dict[str, float | None]) -> Iterator[Finding]:
    """The findings for one GPU's memory test: error, corrupted patterns, each slow direction, or a pass."""
    if m.get("error"):
        yield ctx.finding(Status.ERROR, subject, "memory_error", f"memory test: {m['error']}")
        return
    if m.get("pattern_errors"):
        yield ctx.finding(Status.FAIL, subject, "pattern_errors",
                          f"{m['pattern_errors']} word(s) read back wrong over {m['pattern_bytes'] / 1e9:.1f} GB",
                          observed=m["pattern_errors"], expected=0, unit="words",
                          recommendation="GPU memory is corrupting data: drain the node, check ECC/remapping, RMA.")
    flagged = False
    copy_floor = perf.device_copy_min_gbps
    host = host_floor.gbps if host_floor else None
    for key, floor, basis, what in (("device_copy", copy_floor, None, "device copy"),
                                    ("h2d", host, host_floor.basis if host_floor else None, "host-to-device"),
                                    ("d2h", host, host_floor.basis if host_floor else None, "device-to-host")):
        value = m.get(f"{key}_gbps")
        if value is None:
            continue
        finding = _memory_floor(ctx, subject, key, what, value, floor, basis, perf) if floor is not None else None
        median = medians.get(key)
        if finding is None and median:
            finding = _memory_peer(ctx, subject, key, what, value, median, perf)
        if finding is not None:
            flagged = True
            yield finding
    if not flagged and not m.get("pattern_errors"):
        yield _memory_pass(ctx, subject, m)


_MEMORY_ADVICE = ("Check the PCIe link (gpu.pcie) and NUMA placement for host transfers; memory clocks and "
                  "throttling for device copies.")


def _memory_floor(ctx: CheckContext, subject: str, key: str, what: str, value: float, floor: float, basis: str | None,
                  perf: Any) -> Finding | None:
    """WARN below the floor, FAIL below ``perf.bandwidth_floor_fail_fraction`` of it."""
    if value >= floor:
        return None
    fail_line = floor * perf.bandwidth_floor_fail_fraction
    status = Status.FAIL if value < fail_line else Status.WARN
    return ctx.finding(status, subject, f"{key}_slow",
                       f"{what} {value:.1f} GB/s below {floor:g}" + (f" ({basis})" if basis else ""),
                       observed=round(value, 2), expected=f">= {fail_line if status is Status.FAIL else floor:g}",
                       unit="GB/s", details={"memory_key": key, "floor_gbps": floor},
                       recommendation=_MEMORY_ADVICE)


def _memory_peer(ctx: CheckContext, subject: str, key: str, what: str, value: float, median: float,
                 perf: Any) -> Finding | None:
    """WARN or FAIL for a direction well below the median of the job's GPUs."""
    status = peer_gap_status(value, median, perf)
    if status is Status.PASS:
        return None
    limit = median * (1 - (perf.peer_outlier_fail_fraction if status is Status.FAIL else perf.peer_outlier_fraction))
    return ctx.finding(status, subject, f"{key}_outlier",
                       f"{what} {value:.1f} GB/s, {100 * (1 - value / median):.0f}% below the median GPU "
                       f"({median:.1f})",
                       observed=round(value, 2), expected=f"{'>' if status is Status.FAIL else '>='} {limit:.1f}",
                       unit="GB/s", details={"memory_key": key, "median_gbps": round(median, 2)},
                       recommendation=_MEMORY_ADVICE)


def _memory_pass(ctx: CheckContext, subject: str, m: dict[str, Any]) -> Finding:
    return ctx.finding(Status.PASS, subject, "ok",
                       f"copy {m['device_copy_gbps']:.0f} GB/s, H2D {m['h2d_gbps']:.1f}, D2H {m['d2h_gbps']:.1f}, "
                       f"{m['pattern_bytes'] / 1e9:.1f} GB patterns intact", observed=m)


@check("train.smoke", needs=("cluster",), scope="cluster", group="training", component="service_reliability")
def training(ctx: CheckContext) -> Iterator[Finding]:
    """A small model learns on every GPU, and DDP keeps every rank's parameters identical.

    FAIL when the loss does not fall by ``perf.train_min_loss_drop`` or becomes non-finite,
    or when DDP leaves parameters that differ between ranks (broken gradient all-reduce).
    ERROR when training could not run.
    """
    c, drop = cluster(ctx), ctx.config.perf.train_min_loss_drop
    passes = Passes(ctx, c)
    col, subject = c.columns.train, c.rank_subject
    ranks, loss_end = col.rank, col.loss_end
    clean = not any(col.error) and all(col.finite) and all(col.improved)  # C speed, the common case
    flagged: set[int] = set() if clean else {
        i for i, (e, fin, imp) in enumerate(zip(col.error, col.finite, col.improved, strict=True))
        if e or not fin or not imp}
    for i in sorted(flagged):
        yield _judge_training(ctx, c, subject(ranks[i]), "train", "training smoke", col.row(i), drop)
    names = c.rank_names(ranks).subjects
    yield from passes.add(names, lambda i: _train_pass(ctx, names[i], "training smoke", col.row(i), ""),
                          Series("", [None if i in flagged else round(v, 4) for i, v in enumerate(loss_end)],
                                 "the training smoke", "final loss"),
                          judged=flagged)
    yield from passes.findings()
    first = min(c.payloads, default=0)
    ddp = c.payloads.get(first, {}).get("ddp")
    if ddp is not None:
        yield _judge_training(ctx, c, "cluster", "ddp", f"DDP smoke on {c.world_size} ranks", ddp, drop)


def _judge_training(ctx: CheckContext, c: ClusterView, subject: str, key: str, name: str, t: dict[str, Any],
                    drop: float) -> Finding:
    """The verdict on one training smoke result (``key`` "train" on one GPU, "ddp" for the job)."""
    if t.get("error"):
        return ctx.finding(Status.ERROR, subject, f"{key}_error", f"{name}: {t['error']}")
    if not t.get("finite"):
        return ctx.finding(Status.FAIL, subject, f"{key}_not_finite",
                           f"{name}: loss became non-finite", observed=t["loss_end"],
                           recommendation="NaN/Inf in training on this GPU: run DCGM diagnostics; drain it.")
    if not t.get("improved"):
        return ctx.finding(Status.FAIL, subject, f"{key}_no_progress",
                           f"{name}: loss {t['loss_start']:.3f} -> {t['loss_end']:.3f}, less than {drop:.0%} drop",
                           observed=t["loss_end"], expected=f"<= {t['loss_start'] * (1 - drop):.3f}",
                           recommendation="The model does not learn on this GPU: check GEMM correctness and "
                                          "the CUDA stack.")
    if key == "ddp" and t.get("params_identical") is False:
        odd = t.get("odd_ranks") or []
        return ctx.finding(Status.FAIL, subject, "ddp_params_differ",
                           f"{name}: parameters differ between ranks after training"
                           + (f" (differing from most: {', '.join(c.rank_subject(r) for r in odd)})" if odd else ""),
                           observed=len(set(t.get("param_digests") or [])), expected=1, unit="distinct",
                           recommendation="Gradient all-reduce is broken: run --localize and nccl.correctness.")
    return _train_pass(ctx, subject, name, t, ", parameters identical on every rank" if key == "ddp" else "")


def _train_pass(ctx: CheckContext, subject: str, name: str, t: dict[str, Any], extra: str) -> Finding:
    return ctx.finding(Status.PASS, subject, "ok",
                       f"{name}: loss {t['loss_start']:.3f} -> {t['loss_end']:.3f}{extra}",
                       observed=round(t["loss_end"], 4))


@check("stack.cuda", needs=("cluster",), scope="cluster", group="training", component="software_stack")
def stack(ctx: CheckContext) -> Iterator[Finding]:
    """torch's CUDA matches the driver and CUDA starts on every GPU.

    FAIL when CUDA cannot initialise on a GPU node, when torch was built for a newer CUDA
    than the driver supports (the commonest cause of "no GPU" in containers), or when a
    CPU-only torch runs on a GPU node. Reports torch, CUDA, NCCL and cuDNN versions.
    """
    c = cluster(ctx)
    passes = Passes(ctx, c)
    # Nodes run a handful of distinct images: judge each (stack, GPU count, driver CUDA) once
    # and name every node that has it, rather than judging 10,000 identical stacks.
    kinds: dict[tuple[Any, ...], tuple[dict[str, Any], int, Any, list[str]]] = {}
    for node, payload in c.leaders.items():
        s = payload.get("stack")
        if not s:
            continue
        gpu_facts = c.node_facts.get(node, {}).get("gpu", {})
        gpus = len(gpu_facts.get("gpus", [])) if gpu_facts.get("available") else 0
        driver_cuda = gpu_facts.get("cuda_driver_version")
        key = (*(str(s.get(k)) for k in _STACK_KEYS), gpus, str(driver_cuda))
        kind = kinds.get(key)
        if kind is None:
            kind = kinds[key] = (s, gpus, driver_cuda, [])
        kind[3].append(c.node_names.get(node, f"node{node}"))
    for s, gpus, driver_cuda, names in kinds.values():
        versions = {k: s.get(k) for k in ("torch_version", "torch_cuda", "nccl_version", "cudnn_version")}
        if s.get("container_image"):  # GPU_PREFLIGHT_IMAGE where it was set (the report's software stack shows it)
            versions["container_image"] = s["container_image"]
        verdict = _judge_stack(s, gpus, driver_cuda, versions)
        if verdict is not None:
            for name in names:
                yield ctx.finding(Status.FAIL, name, *verdict)
            continue
        where = f"CUDA {s['torch_cuda']}, NCCL {s['nccl_version']}" if s.get("torch_cuda") else "CPU (gloo)"
        text = f"torch {s['torch_version']}, {where}"

        def passed(i: int, names: list[str] = names, text: str = text, versions: dict[str, Any] = versions) -> Finding:
            return ctx.finding(Status.PASS, names[i], "ok", text, observed=versions)

        yield from passes.add(names, passed,
                              Series(text, [versions] * len(names), f"the software stack check ({text})"))
    yield from passes.findings()


_STACK_KEYS = ("torch_version", "torch_cuda", "nccl_version", "cudnn_version", "cuda_init_error", "container_image")


def _judge_stack(s: dict[str, Any], gpus: int, driver_cuda: Any, versions: dict[str, Any]) -> tuple[Any, ...] | None:
    """``(code, summary, observed, expected, unit, recommendation)`` of a FAIL, or None for a good stack."""
    if s.get("cuda_init_error"):
        return ("cuda_init_failed", f"CUDA did not start: {s['cuda_init_error']}", versions, None, None,
                _fix(s, driver_cuda))
    if gpus and not s.get("torch_cuda"):
        return ("cpu_only_torch", f"torch {s['torch_version']} is a CPU-only build on a node with {gpus} GPU(s)",
                versions, None, None, "Install a CUDA build of torch matching the driver.")
    if s.get("torch_cuda") and isinstance(driver_cuda, str) and version_below(driver_cuda, s["torch_cuda"]):
        return ("cuda_newer_than_driver", f"torch built for CUDA {s['torch_cuda']}, driver supports up to "
                f"{driver_cuda}", s["torch_cuda"], f"<= {driver_cuda}", None, _fix(s, driver_cuda))
    return None


def _fix(stack: dict[str, Any], driver_cuda: Any) -> str:
    return (f"Use an image whose CUDA ({stack.get('torch_cuda')}) the driver supports (driver CUDA "
            f"{driver_cuda}), or upgrade the driver; check that the container sees the GPUs (--gpus all).")


@check("cluster.consistency", needs=("cluster",), scope="cluster", group=(), component="software_stack")
def consistency(ctx: CheckContext) -> Iterator[Finding]:
    """Nodes are distinct machines under their own names, with the same software and GPU count.

    WARN when driver, CUDA, torch or NCCL versions differ between nodes (a classic source
    of hangs and slowdowns), and when GPU counts differ between nodes. FAIL when two node
    sections hold the same GPU (one machine counted twice) or two nodes claim one name; WARN
    when a node's name is not in the job's host list (:mod:`.cluster_identity`).
    """
    c = cluster(ctx)
    if c.num_nodes < 2:
        yield ctx.finding(Status.SKIP, "cluster", "single_node", "one node: nothing to compare")
        return
    clashes = list(identity_findings(ctx, c))
    yield from clashes
    if clashes:
        yield from (f for f in _versions(ctx, c) if f.status is not Status.PASS)
    else:
        yield from _versions(ctx, c)


def _versions(ctx: CheckContext, c: ClusterView) -> Iterator[Finding]:
    # The common case first: every node's (driver, GPU count) and (torch, CUDA, NCCL) the same.
    hardware = {(str(f.get("gpu", {}).get("driver_version")), len(f.get("gpu", {}).get("gpus", []))
                 if f.get("gpu", {}).get("available") else 0) for f in c.node_facts.values()}
    software = {tuple(str((p.get("stack") or {}).get(k)) for k in ("torch_version", "torch_cuda", "nccl_version"))
                for p in c.leaders.values()}
    if len(hardware) <= 1 and len(software) <= 1:
        yield ctx.finding(Status.PASS, "cluster", "ok",
                          f"{c.num_nodes} nodes agree on driver, CUDA, torch, NCCL and GPU count")
        return
    values: dict[str, dict[str, Any]] = defaultdict(dict)
    for node, facts in sorted(c.node_facts.items()):
        name = c.node_names.get(node, f"node{node}")
        gpu = facts.get("gpu", {})
        values["driver"][name] = gpu.get("driver_version") if isinstance(gpu.get("driver_version"), str) else None
        values["GPU count"][name] = len(gpu.get("gpus", [])) if gpu.get("available") else 0
    for node, payload in c.leaders.items():  # ranks of one node share its image
        s = payload.get("stack") or {}
        name = c.node_names.get(node, "?")
        for key in ("torch_version", "torch_cuda", "nccl_version"):
            values[key][name] = s.get(key)
    skew = False
    for what, per_node in sorted(values.items()):
        by_value: dict[Any, list[str]] = defaultdict(list)
        for name, value in per_node.items():
            by_value[value].append(name)
        if len(by_value) > 1:
            skew = True
            yield ctx.finding(Status.WARN, "cluster", "version_skew" if what != "GPU count"
                              else "gpu_count_mismatch", f"{what} differs between nodes: {_spread(by_value)}",
                              observed=per_node,
                              recommendation="Run every node on the same image, driver and GPU count.")
    if not skew:
        yield ctx.finding(Status.PASS, "cluster", "ok",
                          f"{c.num_nodes} nodes agree on driver, CUDA, torch, NCCL and GPU count")


def _spread(by_value: dict[Any, list[str]], shown: int = 4) -> str:
    """``535.1 on 2 nodes (h3, h9); 550.54 on 998 nodes (h0, h1, h2, h4, ...)``: readable at 10,000 nodes."""
    parts = []
    for value, names in sorted(by_value.items(), key=lambda kv: len(kv[1])):
        more = ", ..." if len(names) > shown else ""
        parts.append(f"{value} on {len(names)} node{'s' if len(names) != 1 else ''} ({', '.join(names[:shown])}{more})")
    return "; ".join(parts)
