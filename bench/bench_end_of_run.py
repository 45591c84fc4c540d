"""Benchmark: rank 0's whole end of run at N synthetic nodes (8 GPUs each).

Target (issue #16): aggregate, score, write ``report.json`` and ``report.html`` and print
the console view, at 10,000 nodes x 8 GPUs, in <= 5 s and <= 1 GB peak RSS; the HTML
report <= 5 MB. Before the work on that issue the write alone (``emit``) took 27 s and
peaked at 2.36 GB.

The input is bench/bench_aggregate.py's (what rank 0's ``gather`` returns for the cluster,
decoded bundle by bundle from real node entries), so the two benches measure the same
cluster. Each run builds the report from the gathered input (``build_cluster_report`` with
``assess=False``, as ``run`` does) and hands it to what ``gpu-preflight run`` does next on
rank 0: the run object's ``finish`` (history annotations, scores and advice, report.json and
report.html, publishing, then the CLI's ``show``), for the request that
``gpu-preflight run --report-dir DIR --no-history`` parses to (a fresh temporary directory;
the history store is not this bench's subject), the console view written to /dev/null. Printed per run and as
medians over ``--runs``: ``aggregate_s``, ``emit_s`` and their sum ``end_of_run_s``, wall
clock, and the same in CPU seconds of this process (``*_cpu_s``: on a VM shared with other
work, ``cpu_vs_wall`` well below 1 says the wall time waited for a core); as a
same-run reference the seconds ``json.loads`` takes to decode the gathered bundles
(``decode_s``) and ``end_of_run_vs_decode``; the CPU seconds of each part of one extra
emit (scores and advice, report.json, report.html, console); the process's peak RSS (input, report and
writing together; per run also the peak so far after aggregating and after emitting, the
first run's difference being what the writing adds); the CPU seconds the cyclic garbage
collector took in each part, with its collections per generation (``gc_cpu_s``,
``gc_collections``); and the sizes of report.json and report.html.

    python bench/bench_end_of_run.py [--nodes 10000] [--gpus 8] [--runs 3] [--pretty] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from _selfcheck import fail, require

MB = 1e6


def rss_mb() -> float:
    """Peak resident set of this process so far (MB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def end_of_run(report_dir: str, pretty: bool) -> Callable[[Any, Any], int]:
    """Rank 0's end of run for ``gpu-preflight run --report-dir DIR --no-history [--pretty]``:
    the run object's ``finish`` with the CLI's ``show``, as ``cmd_run`` builds them."""
    from gpu_preflight.cli.main import build_parser
    from gpu_preflight.cli.run_cmd import run_request, show
    from gpu_preflight.run import _Run

    argv = ["run", "--report-dir", report_dir, "--no-history", *(["--pretty"] if pretty else [])]
    finisher = _Run(run_request(build_parser().parse_args(argv)), show)
    return lambda report, config: finisher.finish(report, config, [])[1]


class GcTime:
    """CPU seconds the cyclic collector spent, and its collections per generation, while active
    (the collector is the product's, not the bench's: this says what a run pays for it)."""

    def __init__(self) -> None:
        self.cpu_s, self.collections, self._start = 0.0, [0, 0, 0], 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._start = time.process_time()
        else:
            self.cpu_s += time.process_time() - self._start
            self.collections[info["generation"]] += 1

    def __enter__(self) -> GcTime:
        gc.callbacks.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        gc.callbacks.remove(self)


def one_run(gathered: dict[str, Any], pretty: bool) -> dict[str, Any]:
    """Aggregate and emit once; the seconds of each and the written files' sizes."""
    from gpu_preflight.config import Config
    from gpu_preflight.report.build import build_cluster_report

    gc.collect()
    with tempfile.TemporaryDirectory(prefix="gp-bench-eor-") as tmp, open(os.devnull, "w") as null:
        out = Path(tmp) / "report"
        finish = end_of_run(str(out), pretty)
        with GcTime() as gc_agg:
            t0, c0 = time.perf_counter(), time.process_time()
            report, _ = build_cluster_report(gathered, Config(), fail_on="fail", include=[], exclude=[],
                                             suite="quick", timeout_s=600, assess=False)
            t1, c1 = time.perf_counter(), time.process_time()
        rss_aggregated = rss_mb()
        with contextlib.redirect_stderr(null), GcTime() as gc_emit:
            code = finish(report, Config())
            t2, c2 = time.perf_counter(), time.process_time()
        if code == 3 or not (out / "report.json").is_file() or not (out / "report.html").is_file():
            fail("bench_end_of_run", f"the end of run did not write the report (exit {code})")
        sizes = {"report_json_mb": round((out / "report.json").stat().st_size / MB, 1),
                 "report_html_mb": round((out / "report.html").stat().st_size / MB, 2)}
        with (out / "report.json").open("rb") as fh:
            head = fh.read(2)
    del report
    return {"aggregate_s": t1 - t0, "emit_s": t2 - t1, "end_of_run_s": t2 - t0, "aggregate_cpu_s": c1 - c0,
            "emit_cpu_s": c2 - c1, "end_of_run_cpu_s": c2 - c0, "rss_peak_after_aggregate_mb": round(rss_aggregated),
            "rss_peak_after_emit_mb": round(rss_mb()), "exit_code": code,
            "gc_cpu_s": {"aggregate": round(gc_agg.cpu_s, 3), "emit": round(gc_emit.cpu_s, 3)},
            "gc_collections": {"aggregate": gc_agg.collections, "emit": gc_emit.collections},
            "indented": head == b"{\n", **sizes}


def phases(gathered: dict[str, Any], pretty: bool) -> dict[str, float]:
    """CPU seconds of each part of one emit (wall seconds wait for a core on a shared VM):
    scores and advice, report.json (encoded and written, no fsync), report.html, console."""
    from gpu_preflight.config import Config
    from gpu_preflight.report.advice import advise
    from gpu_preflight.report.build import build_cluster_report
    from gpu_preflight.report.console import render_console
    from gpu_preflight.report.html import render_html
    from gpu_preflight.report.jsonio import dump_report
    from gpu_preflight.report.scores import compute_scores

    report, _ = build_cluster_report(gathered, Config(), fail_on="fail", include=[], exclude=[], suite="quick",
                                     timeout_s=600, assess=False)
    gc.collect()
    out: dict[str, float] = {}
    c0 = time.process_time()
    report = report.with_assessment(advise(report, None, compute_scores(report)))
    out["scores_advice_cpu_s"] = time.process_time() - c0
    with tempfile.TemporaryDirectory(prefix="gp-bench-eor-") as tmp, open(os.devnull, "w") as null:
        c0 = time.process_time()
        with open(Path(tmp) / "report.json", "wb") as fh:
            dump_report(report.to_dict(), fh, pretty=pretty)
        out["report_json_cpu_s"] = time.process_time() - c0
        c0 = time.process_time()
        with open(Path(tmp) / "report.html", "w", encoding="utf-8") as fh:
            fh.write(render_html(report))
        out["report_html_cpu_s"] = time.process_time() - c0
        c0 = time.process_time()
        render_console(report, stream=null)
        out["console_cpu_s"] = time.process_time() - c0
    return {k: round(v, 3) for k, v in out.items()}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=10_000)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--pretty", action="store_true", help="report.json indented (run --pretty)")
    p.add_argument("--profile", action="store_true", help="print the top of a cProfile of one emit")
    a = p.parse_args()
    require("bench_end_of_run", "gpu_preflight.run", "gpu_preflight.cli.run_cmd", "gpu_preflight.cluster.aggregate")
    from bench_aggregate import gathered_input

    t0 = time.perf_counter()
    gathered, decode_s, payload_bytes = gathered_input(a.nodes, a.gpus)
    built_s = time.perf_counter() - t0
    gc.collect()
    rss_input = rss_mb()
    runs = [one_run(gathered, a.pretty) for _ in range(max(1, a.runs))]
    median = {k: statistics.median(r[k] for r in runs) for k in ("aggregate_s", "emit_s", "end_of_run_s",
                                                                  "aggregate_cpu_s", "emit_cpu_s", "end_of_run_cpu_s")}
    result: dict[str, Any] = {
        "nodes": a.nodes, "gpus": a.gpus, "pretty": a.pretty, "input_build_s": round(built_s, 2),
        "payload_json_mb": round(payload_bytes / MB, 1), "decode_s": round(decode_s, 3),
        "runs": [{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()} for r in runs],
        **{f"{k[:-2]}_median_s": round(v, 3) for k, v in median.items()},
        "cpu_vs_wall": round(median["end_of_run_cpu_s"] / median["end_of_run_s"], 2),
        "end_of_run_vs_decode": round(median["end_of_run_s"] / decode_s, 2),
        "rss_with_input_mb": round(rss_input), "rss_peak_mb": round(rss_mb()),
        "report_json_mb": runs[0]["report_json_mb"], "report_html_mb": runs[0]["report_html_mb"],
        "report_json_indented": runs[0]["indented"], "exit_code": runs[0]["exit_code"],
    }
    result["phases_s"] = phases(gathered, a.pretty)
    print(json.dumps(result))
    if a.profile:
        import cProfile
        import pstats

        prof = cProfile.Profile()
        prof.enable()
        one_run(gathered, a.pretty)
        prof.disable()
        pstats.Stats(prof).sort_stats("cumulative").print_stats(30)
    if a.nodes >= 10_000:
        ok = (result["end_of_run_median_s"] <= 5.0 and result["rss_peak_mb"] <= 1024
              and result["report_html_mb"] <= 5.0)
        print(f"target <= 5 s, <= 1 GB, HTML <= 5 MB: end of run {result['end_of_run_median_s']} s (median of "
              f"{[r['end_of_run_s'] for r in result['runs']]}), peak RSS {result['rss_peak_mb']} MB, HTML "
              f"{result['report_html_mb']} MB -> {'OK' if ok else 'MISS'}", file=sys.stderr)


if __name__ == "__main__":
    main()
