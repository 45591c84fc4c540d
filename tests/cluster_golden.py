"""Cluster reports whose JSON is pinned byte for byte (``tests/fixtures/cluster_golden/``).

Each case is a gathered run (``report_data.gathered_cluster`` widened with a second GEMM
precision, memory results, load series and a stale image on one node) judged twice: as a
small cluster (one finding per passing subject) and above ``report.detail_max_nodes``
(passes rolled up per check and group). The pinned files were written by the code before
the cluster checks took one code path each: the JSON of either report must not change
when how the checks emit their passes does.

    python -m tests.cluster_golden     # rewrite the pinned files (only when a change is meant)
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from gpu_preflight.config import Config
from gpu_preflight.config.report_schema import ReportConfig
from gpu_preflight.config.schema import PerfConfig
from gpu_preflight.report.build import build_cluster_report

from .conftest import REPO
from .report_data import gathered_cluster

GOLDEN = Path(__file__).parent / "fixtures" / "cluster_golden"
RUN_AT = "2026-11-20T09:00:00+00:00"  # the pinned runs' date; the JSON blanks it, next_assessment keeps it
SCALES = {"small": 32, "large": 1}  # report.detail_max_nodes: 3 nodes listed in full, or "large"


def _load(sm: float, *, power: float = 690.0, temp: float = 65.0, reasons: dict[str, float] | None = None,
          uncorrected: int = 0) -> dict[str, Any]:
    """A GPU's load summary as the sampler sends it (one GEMM phase)."""
    return {"gpu": "gpu", "static": {"power_limit_w": 700.0, "temp_slowdown_c": 90, "temp_mem_max_c": 95},
            "phases": {"gemm_bf16": {"n": 20, "seconds": 2.0, "sm_mhz": {"min": sm, "median": sm, "max": sm},
                                     "power_w": {"min": power, "median": power, "max": power},
                                     "temp_c": {"min": temp, "median": temp, "max": temp},
                                     "reason_share": reasons or {"0x4": 1.0}, "power_max_fraction": power / 700.0}},
            "series": {}, "errors": {}, "lost": None, "ecc_delta": {"volatile_uncorrected": uncorrected}}


def _memory(copy: float = 3000.0, h2d: float = 50.0, d2h: float = 50.0, patterns: int = 0) -> dict[str, Any]:
    return {"device_copy_gbps": copy, "h2d_gbps": h2d, "d2h_gbps": d2h, "pattern_bytes": 4 << 30,
            "pattern_errors": patterns, "error": None}


def gathered(case: str) -> dict[str, Any]:
    """``healthy``: every subject passes; ``faults``: some subjects of every check fail or warn."""
    nodes, per_node = 4, 2
    faults = case == "faults"
    gemm = [700.0 + r for r in range(nodes * per_node)]
    if faults:
        gemm[3] = 300.0
    fabric = [450.0, 452.0, 300.0 if faults else 451.0, 449.0]
    g = gathered_cluster(nodes, per_node, gemm=gemm, node_fabric=fabric)
    for rank, p in g["payloads"].items():
        p["gemm"].append({"dtype": "fp16", "n": 8192, "iters": 10, "tflops": 690.0 - rank, "rel_error": 1e-3,
                          "correct": not (faults and rank == 5), "error": None})
        p["memory"] = _memory(3000.0 + rank, 50.0 + rank / 10, 51.0 - rank / 10,
                              patterns=7 if faults and rank == 6 else 0)
        p["train"]["loss_end"] = 0.5 + rank / 100
        p["load"] = _load(1900.0 - rank, temp=88.5 if faults and rank == 2 else 60.0 + rank,
                          power=300.0 if faults and rank == 4 else 690.0 - rank,
                          uncorrected=2 if faults and rank == 7 else 0)
    if faults:
        g["payloads"][1]["memory"]["h2d_gbps"] = 10.0
        g["payloads"][2]["train"].update(improved=False, loss_end=2.4)
        g["payloads"][6]["stack"] = {**g["payloads"][6]["stack"], "torch_cuda": None}
        g["payloads"][4]["stack"] = {**g["payloads"][4]["stack"], "torch_version": "2.12.0"}
    for p in g["payloads"].values():  # a fixed run date: next_assessment is derived from it, not from today
        if "node_entry" in p:
            p["node_entry"] = {**p["node_entry"], "section": {**p["node_entry"]["section"], "timestamp": RUN_AT}}
    return g


def report_dict(case: str, scale: str) -> dict[str, Any]:
    """The report of ``case`` at ``scale`` (its JSON object, times and versions as they came)."""
    config = Config(perf=PerfConfig(gemm_bf16_tflops=670.0), report=ReportConfig(detail_max_nodes=SCALES[scale]))
    report, _ = build_cluster_report(gathered(case), config, fail_on="fail", include=[], exclude=[],
                                     suite="quick", timeout_s=60.0)
    return report.to_dict()


def report_json(case: str, scale: str) -> str:
    """The report's JSON with what differs between runs (times, versions) blanked."""
    return json.dumps(_blank(report_dict(case, scale)), indent=1).replace(str(REPO), "<repo>") + "\n"


_VARYING = frozenset({"timestamp", "duration_s", "version", "read_at", "cost_benefit"})


def _blank(value: Any, *, ordered: bool = False) -> Any:
    """The report with what differs from run to run blanked: clock readings, the tool's version,
    and the order of a node's facts (its probes run in parallel and finish in any order)."""
    if isinstance(value, dict):
        items = sorted(value.items()) if ordered else value.items()
        return {k: "-" if k in _VARYING else _blank(v, ordered=ordered or k == "facts") for k, v in items}
    if isinstance(value, list):
        return [_blank(v, ordered=ordered) for v in value]
    return value


CASES = [(case, scale) for case in ("healthy", "faults") for scale in SCALES]


def path(case: str, scale: str) -> Path:
    return GOLDEN / f"{case}_{scale}.json"


if __name__ == "__main__":
    GOLDEN.mkdir(parents=True, exist_ok=True)
    for case, scale in CASES:
        path(case, scale).write_text(report_json(case, scale))
        print(path(case, scale))
