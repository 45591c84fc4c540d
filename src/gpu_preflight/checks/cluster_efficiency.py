"""Work per watt under GEMM: the GPU that burns its power for less work than its peers.

The node checks compare power limits, and ``load.power`` asks whether a GPU could draw its
power at all. Neither sees a GPU that draws full power and computes less for it — a degraded
board, a part leaking current, a VRM running hot — which wastes a node's power budget and
paces every data-parallel step. This check divides each GPU's GEMM throughput by the median
power it drew during that GEMM (:func:`gpu_preflight.records.efficiency.work_per_watt`, which
the ranks also put in the report's ``nodes.<node>.load.<gpu>.work_per_watt``) and compares the
figure with the node's other GPUs for the same precision.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from typing import Any

from ..config.load import LoadConfig
from ..model import Finding, Status
from ..records.efficiency import as_figures, gathered_work_per_watt
from ..registry import CheckContext, check
from .cluster_load import Load, over_loads
from .cluster_rollup import Passes


@check("load.efficiency", needs=("cluster",), scope="cluster", group="gpu_health", component="hardware_health",
       core=True)
@over_loads
def efficiency(ctx: CheckContext, cfg: LoadConfig, loads: list[tuple[str, int, Load]],
               passes: Passes) -> Iterator[Finding]:
    """Each GPU does as much GEMM work per watt as its node's other GPUs.

    Per node and GEMM precision, a GPU's work per watt — its GEMM TFLOP/s over the median
    power it drew during that GEMM — is compared with the median of the node's other GPUs:
    WARN below ``load.efficiency_min_fraction`` (0.85) of it, naming the GPU, both figures and
    its power. PASS with the figures otherwise. SKIP, saying why, for a GPU with no GEMM phase
    long enough or no power reading (nothing measured), or alone on its node (no peers); on
    CPU workers there is no GPU to measure.
    """
    measured = gathered_work_per_watt(ctx.fact("cluster"))
    by_node: dict[str, list[tuple[str, dict[str, dict[str, Any]]]]] = {}
    for subject, rank, _ in loads:
        figures = {dtype: as_figures(m) for dtype, m in measured.get(rank, {}).items() if m[2] >= cfg.min_samples}
        by_node.setdefault(subject.rsplit("/", 1)[0], []).append((subject, figures))
    floor = cfg.efficiency_min_fraction
    for node, members in sorted(by_node.items()):
        for subject, figures in members:
            if not figures:
                yield ctx.finding(Status.SKIP, subject, "not_measured",
                                  f"{subject}: no work per watt: no GEMM phase of {cfg.min_samples} samples or more "
                                  "with a power reading and a correct GEMM")
                continue
            judged: dict[str, dict[str, Any]] = {}
            warned = False
            for dtype, fig in sorted(figures.items()):
                mine = float(fig["tflops_per_watt"])
                others = [float(f[dtype]["tflops_per_watt"]) for s, f in members if s != subject and dtype in f]
                ref = statistics.median(others) if others else None
                judged[dtype] = {**fig, "peers": len(others), "peers_median_tflops_per_watt": ref}
                if ref and mine < ref * floor:
                    warned = True
                    yield ctx.finding(Status.WARN, subject, "efficiency_below_peers",
                                      f"{subject}: {dtype} GEMM {_gflops_w(mine)} GFLOP/s per W "
                                      f"({float(fig['tflops']):.1f} TFLOP/s at {float(fig['power_w_median']):.0f} W), "
                                      f"{100 * (1 - mine / ref):.0f}% below its {len(others)} peer(s) on {node} "
                                      f"({_gflops_w(ref)} GFLOP/s per W)", observed=round(mine, 6),
                                      expected=f">= {ref * floor:.6f}", unit="TFLOP/s per W",
                                      recommendation="This GPU draws its power and computes less for it: compare its "
                                                     "clocks, temperature and clock event reasons with its peers' "
                                                     "(load.clocks, load.peers); a persistent gap calls for DCGM "
                                                     "targeted power (dcgmi diag -r 3) and the vendor.",
                                      details={"dtype": dtype, **judged[dtype]})
            if warned:
                continue
            if not any(j["peers"] for j in judged.values()):
                yield ctx.finding(Status.SKIP, subject, "no_peers",
                                  f"{subject}: GEMM work per watt measured but not compared: no other GPU on {node} "
                                  "measured the same precision", details={"work_per_watt": judged})
                continue
            best = max(judged, key=lambda d: float(judged[d]["tflops_per_watt"]))
            yield from passes.add_finding(ctx.finding(
                Status.PASS, subject, "ok", f"{subject}: GEMM work per watt in line with its peers ({best}: "
                                            f"{_gflops_w(float(judged[best]['tflops_per_watt']))} GFLOP/s per W)",
                observed=round(float(judged[best]["tflops_per_watt"]), 6), unit="TFLOP/s per W",
                details={"work_per_watt": judged}))


def _gflops_w(tflops_per_watt: float) -> str:
    """GFLOP/s per W, the unit such figures are quoted in (Green500): whole above 10, else three digits."""
    value = 1000 * tflops_per_watt
    return f"{value:.0f}" if value >= 10 else f"{value:.3g}"
