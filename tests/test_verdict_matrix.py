"""One verdict, said the same way everywhere: a scenario x output-format matrix of real CLI runs.

Each scenario is run as a user runs it (``python -m gpu_preflight run ...`` in a subprocess),
once per output format. Every run must exit with the scenario's code, and every format must
say what that code says: the ``[RESULT]`` word, the console header, JSON ``overall_status``
and ``exit_code``, the HTML badge, the Markdown title and group table (against the JSON
``test_results`` booleans), the JUnit failure and error counts, the Prometheus textfile's
``run_status`` and ``run_exit_code``. Replay scenarios judge only ``gpu.*`` so that this
host's own checks do not enter the recorded node's verdict.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.findings.canonical import TEST_GROUPS

from .conftest import H200_DUMP

ENV = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PREFLIGHT_")}
ENV.pop("LD_LIBRARY_PATH", None)  # no stub NVML: this machine's real "NVML library not found"
WORDS = {0: "SUCCESS", 1: "WARNING", 2: "FAILURE", 3: "ERROR"}  # the spec's [RESULT] word per exit code
RANK = {"PASS": 0, "SKIP": 1, "WARN": 2, "ERROR": 3, "FAIL": 4}
NO_PERMISSION = {"error": "NVMLError_NoPermission", "value": 4, "str": "Insufficient Permissions"}
Dump = dict[str, Any]


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "gpu_preflight", *args], capture_output=True, text=True,
                          timeout=180, env=ENV)


def gpu0(dump: Dump, name: str, value: Any) -> None:
    dump["devices"][0][name] = value


@dataclass
class Scenario:
    """A command line (``{dump}`` stands for the edited H200 dump) and what it must give."""

    args: list[str]
    status: str
    exit_code: int
    result: str
    edit: Callable[[Dump], None] | None = None
    fail_on: str = "fail"
    extra: list[str] = field(default_factory=list)


def _ecc(d: Dump) -> None:
    d["devices"][0]["ecc_total"]["volatile_uncorrected"] = {"ok": 1}


def _remap(d: Dump) -> None:
    gpu0(d, "nvmlDeviceGetRemappedRows", {"ok": [0, 2, 0, 1]})


def _hot(d: Dump) -> None:
    gpu0(d, "nvmlDeviceGetTemperature", {"ok": 89})


def _warm(d: Dump) -> None:
    gpu0(d, "nvmlDeviceGetTemperature", {"ok": 84})


def _refused(d: Dump) -> None:
    gpu0(d, "nvmlDeviceGetTemperature", dict(NO_PERMISSION))


def _remap_and_refused(d: Dump) -> None:
    _remap(d)
    _refused(d)


REPLAY = ["--replay", "{dump}", "--check", "gpu.*"]
SCENARIOS = {
    "no_gpu": Scenario(["--check", "gpu.*"], "WARN", 1, "[RESULT] WARNING: [gpu.inventory.count]"),
    "no_gpu_expected": Scenario(["--check", "gpu.*", "--expect-gpus", "0"], "PASS", 0, "[RESULT] SUCCESS"),
    "no_gpu_only_skips": Scenario(["--check", "gpu.ecc.errors"], "ERROR", 3, "[RESULT] ERROR: [run.coverage]"),
    "h200_healthy": Scenario(REPLAY, "PASS", 0, "[RESULT] SUCCESS"),
    "h200_ecc": Scenario(REPLAY, "FAIL", 2, "[RESULT] FAILURE: [gpu.ecc.errors]", _ecc),
    "h200_remap_failure": Scenario(REPLAY, "FAIL", 2, "[RESULT] FAILURE: [gpu.memory.remap]", _remap),
    "h200_thermal_slowdown": Scenario(REPLAY, "FAIL", 2, "[RESULT] FAILURE: [gpu.thermal]", _hot),
    "h200_warn_only": Scenario(REPLAY, "WARN", 1, "[RESULT] WARNING: [gpu.thermal]", _warm),
    "h200_warn_gating": Scenario(REPLAY, "WARN", 2, "[RESULT] FAILURE: [gpu.thermal]", _warm, "warn",
                                 ["--fail-on", "warn"]),
    "h200_refused_reading": Scenario(REPLAY, "ERROR", 3, "[RESULT] ERROR: [gpu.nvml]", _refused),
    "h200_fail_and_error": Scenario(REPLAY, "FAIL", 2, "[RESULT] FAILURE: [gpu.memory.remap]; ERROR: [gpu.nvml]",
                                    _remap_and_refused),
    "skip_everything": Scenario(["--node-only", "--skip", "*"], "ERROR", 3, "[RESULT] ERROR: [run.coverage]"),
    "nothing_selected": Scenario(["--check", "gpu.ecc.errors", "--skip", "gpu.ecc.*"], "ERROR", 3,
                                 "[RESULT] ERROR: [run.coverage]"),
}


class _Badge(HTMLParser):
    """The banner's verdict, [RESULT] line and exit code of an HTML report."""

    def __init__(self) -> None:
        super().__init__()
        self.found: dict[str, str] = {}
        self._in: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "header" and a.get("data-exit-code") is not None:
            self.found["exit_code"] = str(a["data-exit-code"])
        if a.get("id") in ("verdict", "result"):
            self._in = str(a["id"])

    def handle_data(self, data: str) -> None:
        if self._in:
            self.found[self._in] = self.found.get(self._in, "") + data

    def handle_endtag(self, tag: str) -> None:
        self._in = None


def badge(page: str) -> dict[str, str]:
    parser = _Badge()
    parser.feed(page)
    return parser.found


def group_worst(findings: list[dict[str, Any]]) -> dict[str, str | None]:
    """Each group's worst judged status, computed here from the findings, independently of the reporters."""
    out: dict[str, str | None] = {}
    for name, patterns in TEST_GROUPS.items():
        judged = [f["status"] for f in findings if f["status"] != "SKIP"
                  and any(fnmatch.fnmatchcase(f["check_id"], p) for p in patterns)]
        out[name] = max(judged, key=RANK.__getitem__) if judged else None
    return out


def markdown_groups(md: str) -> dict[str, str]:
    table = md.split("## Test results", 1)[1].split("## Findings", 1)[0]
    return {g: s for g, s in re.findall(r"^\| (\w+) \| ([^|]+?) \|$", table, re.M) if g != "Group"}


def run_formats(tmp_path: Path, sc: Scenario) -> dict[str, subprocess.CompletedProcess[str]]:
    dump = json.loads(H200_DUMP.read_text())
    if sc.edit is not None:
        sc.edit(dump)
    path = tmp_path / "dump.json"
    path.write_text(json.dumps(dump))
    args = [str(path) if a == "{dump}" else a for a in sc.args]
    base = ["run", *args, *sc.extra, "--no-history"]
    out = {"json": cli(*base, "--format", "json", "--report-dir", str(tmp_path / "r"),
                       "--prom-textfile", str(tmp_path / "preflight.prom"))}
    for fmt in ("console", "md", "html", "junit"):
        out[fmt] = cli(*base, "--format", fmt)
    return out


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_format_says_the_exit_code(tmp_path: Path, name: str) -> None:
    sc = SCENARIOS[name]
    runs = run_formats(tmp_path, sc)
    for fmt, proc in runs.items():
        assert proc.returncode == sc.exit_code, f"{fmt}: rc {proc.returncode}\n{proc.stderr}"
    assert sc.result.split(":")[0] == f"[RESULT] {WORDS[sc.exit_code]}"  # the scenario table itself agrees

    report = json.loads(runs["json"].stdout)
    summary = report["cluster_summary"]
    assert (summary["overall_status"], summary["exit_code"]) == (sc.status, sc.exit_code)
    assert report["run"]["fail_on"] == sc.fail_on
    saved = json.loads((tmp_path / "r" / "report.json").read_text())
    assert (saved["cluster_summary"]["overall_status"], saved["cluster_summary"]["exit_code"]) == (sc.status,
                                                                                                   sc.exit_code)
    counts = {s: sum(f["status"] == s for f in report["findings"]) for s in RANK}
    assert counts == {s: n for s, n in summary["counts"].items()}

    console = runs["console"].stderr.rstrip().splitlines()
    assert console[-1] == sc.result
    header = next(line for line in console if line.startswith("gpu-preflight: ") and "(" in line
                  and not line.startswith("gpu-preflight: report written"))
    assert header.split()[1] == sc.status
    assert ("gating: --fail-on warn" in header) == (sc.exit_code == 2 and sc.status == "WARN")
    assert runs["console"].stdout == ""

    md = runs["md"].stdout
    assert md.startswith(f"# gpu-preflight report: {sc.status}")
    assert f"\n```\n{sc.result}\n```\n" in md and f"- Exit code: {sc.exit_code} ({WORDS[sc.exit_code]})" in md
    shown = markdown_groups(md)
    expected = group_worst(report["findings"])
    assert shown == {g: s or "not tested" for g, s in expected.items()}
    notes = summary.get("test_results_notes") or {}
    for group, ok in summary["test_results"].items():  # the seed's booleans say the same as the table
        assert ok == (expected[group] == "PASS"), group  # not tested: false, never null ...
        assert (group in notes) == (expected[group] is None), group  # ... and the note says it was not tested
    rows = re.findall(r"^\| (PASS|SKIP|WARN|ERROR|FAIL) \| ", md.split("## Findings", 1)[1], re.M)
    assert {s: rows.count(s) for s in RANK} == counts

    for page in (runs["html"].stdout, (tmp_path / "r" / "report.html").read_text()):
        assert badge(page) == {"exit_code": str(sc.exit_code), "verdict": sc.status, "result": sc.result}

    root = ET.fromstring(runs["junit"].stdout)
    failures, errors = int(root.get("failures", "-1")), int(root.get("errors", "-1"))
    gating_warns = counts["WARN"] if sc.fail_on == "warn" else 0
    assert (failures, errors) == (counts["FAIL"] + gating_warns, counts["ERROR"])
    if sc.exit_code in (0, 1):
        assert failures == errors == 0
    elif sc.exit_code == 2:
        assert failures > 0
    else:
        assert errors > 0
    props = {p.get("name"): p.get("value") for p in root.iter("property") if p.get("name", "").startswith("gpu-")}
    assert props == {"gpu-preflight.verdict": sc.status, "gpu-preflight.exit_code": str(sc.exit_code),
                     "gpu-preflight.result": sc.result}

    prom = (tmp_path / "preflight.prom").read_text()
    assert f'gpu_preflight_run_status{{status="{sc.status.lower()}"}} 1' in prom
    assert len(re.findall(r'^gpu_preflight_run_status\{status="\w+"\} 1$', prom, re.M)) == 1
    assert re.search(rf"^gpu_preflight_run_exit_code {sc.exit_code}$", prom, re.M)


def test_skip_everything_without_node_only_is_an_error_too() -> None:
    """The self-launched path (workers, cluster checks) judges nothing as well: ERROR, one clear line."""
    proc = cli("run", "--skip", "*", "--no-history", "--format", "json")
    report = json.loads(proc.stdout)
    assert proc.returncode == 3 and report["cluster_summary"]["overall_status"] == "ERROR"
    (coverage,) = [f for f in report["findings"] if f["status"] != "SKIP"]
    assert (coverage["check_id"], coverage["status"]) == ("run.coverage", "ERROR")
    assert coverage["summary"].startswith("no check was run: ")


@pytest.mark.parametrize(("args", "message"), [
    (["run", "--chek", "gpu.*"], "unrecognized arguments: --chek"),
    (["run", "--fail-on", "sometimes"], "invalid choice: 'sometimes'"),
    (["run", "--profile", "nonesuch"], "unknown profile 'nonesuch'"),
    (["run", "--replay", "/nonexistent/dump.json"], "cannot read replay file"),
    (["run", "--check", "gpu.nope"], "no check matches 'gpu.nope'"),
    (["run", "--set", "gpu.temp_margn_c=3"], "unknown setting"),
    (["report", "render", "/nonexistent/report.json"], "cannot read report"),
    (["checks", "explain", "gpu.nope"], "no check 'gpu.nope'"),
    (["nonesuch"], "invalid choice: 'nonesuch'"),
])
def test_usage_errors_exit_3_with_one_line(args: list[str], message: str) -> None:
    """A usage error judged no node: exit 3 (could not judge), one line on stderr, nothing on stdout."""
    proc = cli(*args)
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], proc.stderr
