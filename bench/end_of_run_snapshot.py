"""Write rank 0's end-of-run outputs for a fixed gathered input, to compare two checkouts byte for byte.

bench/bench_end_of_run.py times the end of run; this writes what it produces —
``report.json``, ``report.html`` and the console view — for one gathered input saved once
(``--input``, a pickle made on first use, so both checkouts read the very same nodes,
timestamps included) with the report's own timestamp, wall time and cluster checks' durations fixed. Run it under each
checkout (``PYTHONPATH=<checkout>/src``) and compare the directories with ``cmp``::

    python bench/end_of_run_snapshot.py --nodes 200 --input /tmp/in200.pkl --out /tmp/after200
"""

from __future__ import annotations

import argparse
import gc
import io
import pickle
import sys
from pathlib import Path


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--nodes", type=int, default=200)
    p.add_argument("--gpus", type=int, default=8)
    p.add_argument("--input", required=True, help="pickle of the gathered input (made here if absent)")
    p.add_argument("--out", required=True, help="directory for report.json, report.html, console.txt")
    a = p.parse_args()
    src = Path(a.input)
    if src.is_file():
        with src.open("rb") as fh:
            gc.disable()
            gathered = pickle.load(fh)  # noqa: S301 - the file this script wrote itself
            gc.enable()
    else:
        from bench_aggregate import gathered_input

        gathered = gathered_input(a.nodes, a.gpus)[0]
        with src.open("wb") as fh:
            pickle.dump(gathered, fh, protocol=pickle.HIGHEST_PROTOCOL)

    from gpu_preflight.config import Config
    from gpu_preflight.findings.model import ClusterReport
    from gpu_preflight.report import write_report
    from gpu_preflight.report.advice import add_advice
    from gpu_preflight.report.build import build_cluster_report
    from gpu_preflight.report.console import render_console
    from gpu_preflight.report.scores import add_scores

    config = Config()
    report, _ = build_cluster_report(gathered, config, fail_on="fail", include=[], exclude=[], suite="quick",
                                     timeout_s=600, assess=False)
    if not isinstance(report, dict):
        report = report.to_dict()
    report["timestamp"] = "2025-01-01T00:00:00Z"
    report.setdefault("run", {})["wall_s"] = 1.0
    for check in report.get("cluster_checks") or []:
        check["duration_s"] = 0.0  # the cluster checks' own time differs from run to run
    add_advice(add_scores(report, config.report), config.report)
    out = Path(a.out)
    write_report(report, [], out)
    text = io.StringIO()
    render_console(ClusterReport.from_dict(report), stream=text, verbose=False, width=120)
    (out / "console.txt").write_text(text.getvalue())
    print(f"written to {out}", file=sys.stderr)


if __name__ == "__main__":
    main()
