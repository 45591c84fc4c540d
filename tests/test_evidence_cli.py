"""``gpu-preflight parse`` / ``judge``: output, exit codes and errors, in-process and as a real process.

``cli/main.py`` wires the commands with ``evidence_cmd.add_commands``; these tests build
the same subparsers on a local parser, so they do not depend on that wiring.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import msgspec
import pytest

from gpu_preflight.cli import evidence_cmd

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"
SPEC = FIXTURES / "spec-dcgmi-diag-r3-targeted-power-fail.txt"
WIRING = ("import argparse, sys\n"
          "from gpu_preflight.cli import evidence_cmd\n"
          "p = argparse.ArgumentParser(prog='gpu-preflight')\n"
          "evidence_cmd.add_commands(p.add_subparsers(dest='command', required=True))\n"
          "sys.exit(evidence_cmd.run(p.parse_args(sys.argv[1:])))\n")


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser(prog="gpu-preflight")
    evidence_cmd.add_commands(parser.add_subparsers(dest="command", required=True))
    return evidence_cmd.run(parser.parse_args(list(argv)))


def test_parse_prints_kind_and_record(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("parse", str(corpus / "libfabric/cscs-fi_info-p-cxi-not-working-61.txt")) == 0
    out = json.loads(capsys.readouterr().out)
    assert out == {"kind": "fi-info", "record": {"providers": [], "error_code": -61, "error": "No data available",
                                                     "provider_list": []}}


def test_parse_with_kind_and_nulls(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus / "nvidia-smi-xml/telegraf-gtx-1070-ti.xml"
    assert cli("parse", str(path), "--kind", "nvidia-smi-xml") == 0
    record = json.loads(capsys.readouterr().out)["record"]
    assert record["driver_version"] is None and record["gpus"][0]["temperature_c"] == 39


@pytest.mark.parametrize(("argv", "code", "message"), [
    (("parse", "/no/such/file"), 3, "/no/such/file: cannot read tool output: No such file"),
    (("parse", "--kind", "nope", str(SPEC)), 3, "unknown kind 'nope'"),
    (("judge", "--kind", "nope", str(SPEC)), 3, "unknown kind 'nope'"),
    (("parse", str(FIXTURES / "README.md")), 3, "cannot tell which tool printed"),
    (("parse", "--kind", "ibstat", str(SPEC)), 3, "could not parse as ibstat"),
    (("parse",), 3, "a FILE is required"),
    (("judge", "--set", "gpu.nope=1", str(SPEC)), 3, "configuration error"),
    (("judge", str(Path(__file__).parents[1] / "README.md")), 3, "cannot tell which tool printed"),
    (("judge", "/dev/zero"), 3, "/dev/zero: tool output is a character device"),
    (("parse", "/"), 3, "/: tool output is a directory"),
])
def test_unusable_input_exit_codes(argv: tuple[str, ...], code: int, message: str,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(*argv) == code
    captured = capsys.readouterr()
    assert message in captured.err and captured.out == ""


def test_list_kinds(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("parse", "--list-kinds") == 0
    kinds = [line.split()[0] for line in capsys.readouterr().out.splitlines()]
    assert "dcgmi-diag" in kinds and "nccl-log" in kinds and len(kinds) == 38


def test_judge_spec_dcgm_console(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("judge", str(SPEC)) == 2
    err = capsys.readouterr().err
    assert "FAIL    dcgm.diag" in err and "Targeted Power failed on GPU 1" in err
    assert cli("judge", str(SPEC), "--verbose") == 2  # the whole message, wrapped to the width
    err = capsys.readouterr().err
    assert "FAIL    dcgm.diag" in err and "on GPU 1: GPU 1 Max power of 224.1" in " ".join(err.split())
    assert err.rstrip().endswith("[RESULT] FAILURE: [dcgm.diag]")


def test_judge_json_report(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("judge", str(SPEC), "--format", "json", "--source", "node-7") == 2
    report = json.loads(capsys.readouterr().out)
    assert report["cluster_summary"]["overall_status"] == "FAIL"
    fail = [f for f in report["findings"] if f["status"] == "FAIL"]
    assert [(f["check_id"], f["subject"]) for f in fail] == [("dcgm.diag", "node-7/gpu1")]
    evidence = report["nodes"]["node_0"]["facts"]["evidence"]
    assert evidence["kind"] == "dcgmi-diag" and evidence["record"]["dcgm_version"] == "3.3.9"


def test_judge_junit_and_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("judge", str(SPEC), "--format", "junit") == 2
    suite = ET.fromstring(capsys.readouterr().out)
    assert "dcgm.diag" in ET.tostring(suite, encoding="unicode")
    assert cli("judge", str(SPEC), "--format", "md") == 2
    assert "dcgm.diag" in capsys.readouterr().out


@pytest.mark.parametrize(("name", "fail_on", "code"), [
    ("dcgm/awsome-dcgmi-diag-r2-3.3.3-p4de-a100-pass.txt", "fail", 0),
    ("infiniband/gpud-ibstat-h100-3-eth-ports-down.txt", "fail", 1),
    ("infiniband/gpud-ibstat-h100-3-eth-ports-down.txt", "warn", 2),
    ("dcgm/hcdeep-dcgmi-diag-r3-4.4.0-plugin-load-error.txt", "fail", 3),
])
def test_judge_exit_codes_like_run(corpus: Path, name: str, fail_on: str, code: int,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("judge", str(corpus / name), "--fail-on", fail_on) == code


def test_judge_parse_error_is_an_error_finding(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("judge", "--kind", "ibstat", str(SPEC), "--format", "json") == 3
    report = json.loads(capsys.readouterr().out)
    assert [(f["check_id"], f["status"]) for f in report["findings"]] == [("evidence.parse", "ERROR")]


@pytest.fixture
def evidence_registered(monkeypatch: pytest.MonkeyPatch) -> None:
    """The ``[evidence]`` section registered as the lead will in ``config/schema.py``'s ``Config``."""
    from gpu_preflight.config import loader, schema
    from gpu_preflight.config.evidence import EvidenceConfig

    registered = msgspec.defstruct(
        "Config", [("evidence", EvidenceConfig, msgspec.field(default_factory=EvidenceConfig))],
        bases=(schema.Config,))
    monkeypatch.setitem(schema.SECTIONS, "evidence", EvidenceConfig)
    monkeypatch.setattr(loader, "Config", registered)


def test_judge_thresholds_from_set(corpus: Path, evidence_registered: None,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    path = corpus / "nccl-tests/gcp-a3mega-all_reduce-2x-h100-16rank.txt"  # peak busbw 338.82
    assert cli("judge", str(path)) == 0  # no floor: bandwidth SKIP, correctness PASS
    assert cli("judge", str(path), "--set", "evidence.nccl_busbw_min_gbps=338.82") == 0
    assert cli("judge", str(path), "--set", "evidence.nccl_busbw_min_gbps=400") == 2
    assert cli("judge", str(path), "--set", "evidence.nccl_busbw_min_gbps=fast") == 3  # a config error
    assert "configuration error" in capsys.readouterr().err


def test_evidence_section_in_config_defaults(evidence_registered: None) -> None:
    from gpu_preflight.config.describe import defaults_toml

    text = defaults_toml()
    assert "[evidence]" in text and "# nccl_busbw_min_gbps =   (unset)" in text
    assert 'dcgm_ignore_tests = []' in text


def test_judge_auto_profile_from_gpu_names(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cli("judge", str(corpus / "nvidia-smi-text/gpud-h100x8-535.183.01-q.txt"), "--format", "json")
    report = json.loads(capsys.readouterr().out)
    assert report["nodes"]["node_0"]["node_info"]["profile"] == "h100-sxm"


def test_real_process_stdin_and_streams(corpus: Path) -> None:
    """As a process: machine output alone on stdout, chatter on stderr, exit code intact; '-' reads stdin."""
    text = (corpus / "torch-distributed/stas00-nccl-warn-connect-refused.log").read_text()
    done = subprocess.run([sys.executable, "-c", WIRING, "judge", "-", "--format", "json"], input=text,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    report = json.loads(done.stdout)
    assert [f["code"] for f in report["findings"]] == ["connection_refused"]
    parsed = subprocess.run([sys.executable, "-c", WIRING, "parse", "-"], input=text, capture_output=True,
                            text=True, timeout=60, check=False)
    assert parsed.returncode == 0 and json.loads(parsed.stdout)["kind"] == "nccl-log"
