"""``report.write.write``: the report goes in as a value and comes out as a new one, with every
artifact it wrote listed and named where a section refers to it; the caller's report is untouched."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from gpu_preflight.engine import run_checks
from gpu_preflight.report.build import build
from gpu_preflight.report.write import write, write_report

from .conftest import REPO
from .diag_tools import replay

SPEC = REPO / "tests" / "fixtures" / "evidence" / "spec-dcgmi-diag-r3-targeted-power-fail.txt"


def test_write_fills_the_artifact_paths_in_a_new_report_and_changes_nothing_it_was_given(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bindir = tmp_path / "bin"
    bindir.mkdir()
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    monkeypatch.setattr("gpu_preflight.backends.pci.nvidia_gpus", lambda root="": [])
    replay(bindir, "dcgmi", SPEC, rc=226)
    node = run_checks(include=["dcgm.*"])
    report = build([node])
    before = json.dumps(report.to_dict())
    built = report.nodes["node_0"].dcgm
    assert built is not None and built.diagnostics.basic is not None and built.diagnostics.basic.raw_output_artifact
    assert built.diagnostics.basic.raw_output_artifact.path is None

    written = write(report, [node], tmp_path / "out", name="preflight.json")

    assert json.dumps(report.to_dict()) == before  # the report it was given is the same value
    ref = written.report.to_dict()["nodes"]["node_0"]["dcgm"]["diagnostics"]["basic"]["raw_output_artifact"]
    assert ref["path"] == "artifacts/node_0/dcgmi_diag_r1.txt"
    assert (tmp_path / "out" / ref["path"]).read_text() == SPEC.read_text()
    assert [a["path"] for a in written.report.artifacts] == [ref["path"]]
    assert written.artifacts == (tmp_path / "out" / ref["path"],)
    assert written.path == tmp_path / "out" / "preflight.json"
    assert json.loads(written.path.read_text()) == written.report.to_dict()  # the file is the value returned

    as_dict = report.to_dict()  # the older form fills a dict in place, as the file has it
    path = write_report(as_dict, [node], tmp_path / "again")
    assert as_dict == json.loads(path.read_text())
