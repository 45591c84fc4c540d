"""What the acceptance suite (spec 004) printed and wrote on a real H100 (tests/fixtures/captured/h100-run-2026-11-26c):
the reports match the shipped schema, the file named by --report-name holds the same verdict as stdout, and the
--verbose lines carry the seed's fields with the GPU's real figures."""

from __future__ import annotations

import json
import re

from .conftest import FIXTURES
from .report_schema_check import problems

RUN = FIXTURES / "captured" / "h100-run-2026-11-26c"


def test_the_recorded_reports_match_the_shipped_schema() -> None:
    for name in ("acceptance.json", "cluster_report.json"):
        assert problems(json.loads((RUN / name).read_text())) == [], name


def test_the_named_report_and_stdout_say_the_same() -> None:
    written = json.loads((RUN / "acceptance.json").read_text())
    printed = json.loads((RUN / "cluster_report.json").read_text())
    assert written["cluster_summary"]["overall_status"] == printed["cluster_summary"]["overall_status"] == "WARN"
    assert written["cluster_summary"]["exit_code"] == printed["cluster_summary"]["exit_code"] == 1
    assert {(f["check_id"], f["subject"], f["status"]) for f in written["findings"]} == \
        {(f["check_id"], f["subject"], f["status"]) for f in printed["findings"]}


def test_the_verbose_lines_came_as_the_workloads_finished() -> None:
    lines = (RUN / "verbose_stderr.txt").read_text().splitlines()
    tags = [line.split()[0] for line in lines if line.startswith("[")]
    assert tags[0] == "[ENV]" and tags.count("[COMPUTE]") == 4 and tags[-1] == "[TRAIN]"
    env = next(line for line in lines if line.startswith("[ENV]"))
    assert "cuda_available=True" in env and "H100" in env
    compute = {m["dtype"]: float(m["gflops"]) for line in lines
               if (m := re.match(r"\[COMPUTE\] \S+ dtype=(?P<dtype>\w+) n=\d+ GFLOP/s=(?P<gflops>[\d.]+) correct=True",
                                 line))}
    assert set(compute) == {"bf16", "fp16", "tf32", "fp32"} and compute["bf16"] > 400_000  # a healthy H100
    # each [COMPUTE] line precedes the memory stage, the [TRAIN] line follows it: printed as they finished
    assert lines.index(next(x for x in lines if "stage memory test" in x)) > \
        max(i for i, x in enumerate(lines) if x.startswith("[COMPUTE]"))
    assert next(i for i, x in enumerate(lines) if x.startswith("[TRAIN]")) > \
        lines.index(next(x for x in lines if "stage memory test" in x))
    train = next(line for line in lines if line.startswith("[TRAIN]"))
    assert "improved=True" in train
