"""A written report directory with a raw artifact and an HTML page, and the ``run`` flags, for the
output tests."""

from __future__ import annotations

import argparse
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gpu_preflight import build_report, run_checks
from gpu_preflight.model import NodeReport
from gpu_preflight.outputs import add_output_arguments
from gpu_preflight.outputs.options import OutputOptions
from gpu_preflight.report import write_report

from .conftest import H200_DUMP

NVRM = "NVRM: Xid (PCI:0000:18:00): 79, pid=1234, GPU has fallen off the bus.\n"


@dataclass
class Written:
    report: dict[str, Any]
    node: NodeReport
    directory: Path


def node_with_artifact(**faults: Any) -> NodeReport:
    """The real H200 capture judged by the node checks, with a raw kernel-log artifact to publish."""
    dump = json.loads(H200_DUMP.read_text())
    for key, value in faults.items():
        dump["devices"][0][key] = {"ok": value}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "dump.json"
        path.write_text(json.dumps(dump))
        node = run_checks(replay=str(path), include=["gpu.*"], environ={})
    node.raw_artifacts["kernel_log_nvrm"] = ("kernel_log_nvrm.txt", NVRM)
    return node


def written_report(directory: Path, **faults: Any) -> Written:
    """``--report-dir`` as a run leaves it: report.json, artifacts/, report.html, plus a stale file."""
    node = node_with_artifact(**faults)
    report = build_report([node])
    write_report(report, [node], directory)
    (directory / "report.html").write_text("<!doctype html><title>preflight</title>\n")
    (directory / "artifacts" / "node_0" / "stale-from-an-earlier-run.txt").write_text("old\n")
    return Written(report, node, directory)


def run_args(*argv: str, report_dir: Path | None = None) -> OutputOptions:
    """The output options of ``gpu-preflight run`` with these output flags, as the CLI builds them."""
    parser = argparse.ArgumentParser()
    add_output_arguments(parser)
    args = parser.parse_args(list(argv))
    return OutputOptions(report_dir=str(report_dir) if report_dir else None, outputs=tuple(args.output),
                         mlflow_uri=args.mlflow_uri, prom_textfile=args.prom_textfile, history=args.history,
                         history_db=args.history_db, cluster_name=args.cluster_name)
