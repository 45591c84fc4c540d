"""Rules issue 27's fresh DCGM batch (field corpus F) taught the ``dcgmi`` readers (in-repository texts only).

* nv-hostengine's own failures (``Err: Failed to start DCGM Server: -7``, ``Failed to start host engine
  server``, ``Unable to terminate host engine, it may not be running.``, ``Error: Failed to initialize NVML``)
  and DCGM's refusal strings as its clients log them (dcgm-exporter's ``Error starting nv-hostengine: DCGM
  initialization error``, ``This GPU is not supported by DCGM``; any client's ``Host engine connection
  invalid/disconnected``) are a DCGM that measured nothing: ERROR.
* A host engine's start log with nothing after it (``Started host engine version 4.4.2 using port number``)
  holds no result: ERROR, never a pass.
* The diagnostic's own debug log (nvvs) with ERROR lines and no result: ERROR, naming nvvs' message.
* The host engine's Health-module log line (``[[Health]] Detected a WARNING in health system Thermal: '...'``)
  is the health check's incident: WARNING -> WARN, FAILURE -> FAIL, on the GPU DCGM's message names.
* ``dcgmi health`` answering only ``Health monitor systems set successfully.`` reported no health: ERROR.
* DCGM 4.x's ``dcgmi discovery -l`` count line ``8 GPUs found (Active).`` and a paste indented as a whole
  are read as the listing they are.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.dcgmi.health import parse_discovery
from gpu_preflight.parsers.detect import detect_kind


def verdicts(text: str) -> list[tuple[str, Status, str]]:
    return [(f.check_id, f.status, f.code) for f in judge_text(text, Config(), source="n1")]


@pytest.mark.parametrize("text", [
    "Err: Failed to start DCGM Server: -7\n",
    "Failed to start DCGM Server: -7\n",
    "Starting NVIDIA host engine...\nFailed to start host engine server\nDone\n",
    "Stopping NVIDIA host engine...\nUnable to terminate host engine, it may not be running.\nDone\n",
    "root@c0:/# nv-hostengine\nError: Failed to initialize NVML\n",
    'time="2020-07-21T18:49:33Z" level=info msg="Starting dcgm-exporter"\n'
    'time="2020-07-21T18:49:33Z" level=fatal msg="Error starting nv-hostengine: DCGM initialization error"\n',
    "   INFO[0000] Initializing system entities of type: GPU\n"
    "   FATA[0000] Error adding GPU 1 to group: This GPU is not supported by DCGM\n",
    "ERROR     : dcgm_sampler dcgmConnect() failed: Host engine connection invalid/disconnected(-21)\n",
    '{"level":"error","msg":"failed to reconcile DCGM state","error":"failed to initialize DCGM: error connecting to '
    'nv-hostengine: Host engine connection invalid/disconnected"}\n',
], ids=["err-server", "server", "start-script", "terminate", "nvml", "exporter-init", "not-supported", "sampler",
        "agent-json"])
def test_a_host_engine_that_could_not_run_is_an_error(text: str) -> None:
    assert detect_kind(text) == "dcgmi-diag"
    assert verdicts(text) == [("dcgm.diag", Status.ERROR, "diag_error")]


def test_a_host_engine_start_log_holds_no_result() -> None:
    text = ("nvidia driver modules are not yet loaded, invoking /usr/local/bin/runc directly\n"
            "Started host engine version 4.4.2 using port number: 5555\n")
    assert verdicts(text) == [("dcgm.diag", Status.ERROR, "diag_error")]
    summary = judge_text(text, Config(), source="n1")[0].summary
    assert "not yet loaded" in summary


def test_nvidia_smi_failing_to_reach_nvml_stays_nvidia_smi() -> None:
    text = "Failed to initialize NVML: Driver/library version mismatch\n"
    assert detect_kind(text) != "dcgmi-diag"


def test_the_diagnostics_debug_log_with_errors_is_an_error() -> None:
    text = ("2023-11-29 16:27:36.609 ERROR [74919:74919] Could not read package diag config. Please ensure the "
            "datacenter-gpu-manager-config package is installed [/workspaces/dcgm/nvvs/src/ConfigFileParser_v2.cpp:218]"
            " [DcgmNs::Nvvs::ConfigFileParser_v2::ConfigFileParser_v2]\n")
    assert detect_kind(text) == "dcgmi-diag"
    finding = judge_text(text, Config(), source="n1")[0]
    assert (finding.check_id, finding.status) == ("dcgm.diag", Status.ERROR)
    assert "Could not read package diag config" in finding.summary


def test_a_log_line_outside_nvvs_is_not_the_diagnostics() -> None:
    text = ("2024-01-01 00:00:00.000 ERROR [1:1] something failed [/workspaces/dcgm/common/Foo.cpp:10] [Foo::Bar]\n")
    assert detect_kind(text) != "dcgmi-diag"


@pytest.mark.parametrize(("word", "status"), [("WARNING", Status.WARN), ("FAILURE", Status.FAIL)])
def test_the_health_modules_log_line_is_its_incident(word: str, status: Status) -> None:
    text = (f"ERROR [1514002:1514004] [[Health]] Detected a {word} in health system Thermal: 'Detected clocks event "
            "due to thermal violation in GPU 2. Verify that the cooling on this machine is functional.' "
            "[/builds/dcgm/modules/health/DcgmHealthWatch.cpp:890] [DcgmHealthWatch::SetResponse]\n")
    assert detect_kind(text) == "dcgmi-health"
    findings = judge_text(text, Config(), source="n1")
    assert {f.status for f in findings} == {status}
    assert any(f.subject.endswith("gpu2") for f in findings)


def test_health_answering_only_that_it_set_the_watches_is_an_error() -> None:
    text = "./dcgmi health -g 2 -c\nHealth monitor systems set successfully.\n"
    assert detect_kind(text) == "dcgmi-health"
    assert [(f.check_id, f.status) for f in judge_text(text, Config(), source="n1")] == [("dcgm.health", Status.ERROR)]


BOX = ("+--------+----------------------------------------------------------------------+\n"
       "| GPU ID | Device Information                                                   |\n"
       "+--------+----------------------------------------------------------------------+\n"
       "| 0      | Name: NVIDIA H100 80GB HBM3                                          |\n"
       "|        | PCI Bus ID: 00000000:19:00.0                                         |\n"
       "|        | Device UUID: GPU-d6a2c177-4cd8-8d01-0310-79f2720f37de                |\n"
       "+--------+----------------------------------------------------------------------+\n")


@pytest.mark.parametrize("indent", ["", "  "], ids=["flush", "indented"])
def test_dcgm4_discovery_count_line_names_which_gpus(indent: str) -> None:
    """The count is read (two counted, one box pasted: the listing is elided), at any indentation."""
    text = "".join(f"{indent}{line}\n" for line in ("$ dcgmi discovery -l", "2 GPUs found (Active).",
                                                   *BOX.splitlines(), "..."))
    assert detect_kind(text) == "dcgmi-discovery"
    record = parse_discovery(text)
    assert [gpu.name for gpu in record.gpus] == ["NVIDIA H100 80GB HBM3"] and record.elided
    findings = judge_text(text, Config(), source="n1")
    assert findings and all(f.status in (Status.PASS, Status.SKIP) for f in findings)
