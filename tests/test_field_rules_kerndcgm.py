"""Rules issue 27's kernel + DCGM batch of 2026-12-07 taught the readers (in-repository texts only).

* dcgm-exporter's fatal exit in its logrus forms (``level=fatal msg="..."`` off a terminal, ``FATA[0000] ...`` on
  one), in a log that shows the exporter's own start line: the exporter stopped, nothing was exported: ERROR,
  naming DCGM's message, even with another tool's table header pasted after it. A fatal line of some other program
  is no DCGM text.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind

# gpu-monitoring-tools#165 (dcgm-exporter built for DCGM 2.1 against a 2.0.13 host engine), shortened
LOGFMT = (
    'time="2021-03-11T18:34:24+08:00" level=info msg="Starting dcgm-exporter"\n'
    'time="2021-03-11T18:34:25+08:00" level=info msg="DCGM successfully initialized!"\n'
    'time="2021-03-11T18:34:25+08:00" level=fatal msg="Error retrieving DCGM MIG hierarchy: API version mismatch"\n'
)
# the same exit as logrus prints it on a terminal (gpu-monitoring-tools#168's form)
TTY = (
    "INFO[0000] Starting dcgm-exporter                       \n"
    "INFO[0001] DCGM successfully initialized!               \n"
    "FATA[0001] Error retrieving DCGM MIG hierarchy: API version mismatch \n"
)
# nvidia-smi's table header pasted after the exporter's log, cut before any GPU row (gpu-monitoring-tools#165)
SMI_HEADER = (
    "\n# nvidia-smi\n"
    "+-----------------------------------------------------------------------------+\n"
    "| NVIDIA-SMI 455.28       Driver Version: 455.28       CUDA Version: 11.1     |\n"
    "|-------------------------------+----------------------+----------------------+\n"
    "| GPU  Name        Persistence-M| Bus-Id        Disp.A | Volatile Uncorr. ECC |\n"
)


@pytest.mark.parametrize("text", [LOGFMT, TTY, LOGFMT + SMI_HEADER], ids=["logfmt", "tty", "with-smi-header"])
def test_an_exporter_that_exited_fatally_measured_nothing(text: str) -> None:
    assert detect_kind(text) == "dcgmi-diag"
    (finding,) = [f for f in judge_text(text, Config(), source="n1") if f.status is not Status.SKIP]
    assert (finding.check_id, finding.status) == ("dcgm.diag", Status.ERROR)
    assert "dcgm-exporter stopped: Error retrieving DCGM MIG hierarchy: API version mismatch" in finding.summary


def test_a_fatal_line_without_the_exporters_start_is_no_dcgm_text() -> None:
    text = 'time="2021-03-11T18:34:25+08:00" level=fatal msg="listen tcp :8080: bind: address already in use"\n'
    assert detect_kind(text) != "dcgmi-diag"
