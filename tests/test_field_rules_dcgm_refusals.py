"""Rules issue 27's field corpus taught the ``dcgmi`` reader about runs that never started (in-repository texts only).

* Any dcgmi command answers ``Error: unable to establish a connection to the specified host`` /
  ``Error: Unable to connect to host engine`` when no nv-hostengine listens: nothing was measured,
  the verdict is ERROR (``dcgm.diag`` ``diag_error``), never a pass and never "not a text we parse".
* A diagnostic whose NVVS binary is missing (``Error when executing the diagnostic: The nvvs binary
  was not found``) is the same: ERROR.
* The lines are read however a paste quotes them (``"Error: ..."``, ``> Error: ...``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind

DCGM = Path(__file__).parent / "fixtures" / "field" / "dcgm"
HOSTENGINE = ("Error: unable to establish a connection to the specified host: localhost\n"
              "Error: Unable to connect to host engine. Host engine connection invalid/disconnected.\n")
NVVS = ("Error when executing the diagnostic: The nvvs binary was not found in the specified location; please "
        "install it to /usr/share/nvidia-validation-suite/ or set environment variable NVVS_BIN_PATH\n")


def verdicts(text: str) -> list[tuple[str, Status, str]]:
    return [(f.check_id, f.status, f.code) for f in judge_text(text, Config(), source="n1")]


@pytest.mark.parametrize("text", [
    HOSTENGINE,
    "$ dcgmi discovery -l\n" + HOSTENGINE.splitlines(keepends=True)[1],
    "".join(f'"{line}"\n' for line in HOSTENGINE.splitlines()),
    "".join(f"> {line}\n" for line in HOSTENGINE.splitlines()),
    NVVS,
    NVVS.lower(),
], ids=["two-lines", "discovery", "double-quoted", "gh-quoted", "nvvs", "nvvs-lower"])
def test_a_dcgmi_run_that_never_started_is_an_error(text: str) -> None:
    assert detect_kind(text) == "dcgmi-diag"
    assert verdicts(text) == [("dcgm.diag", Status.ERROR, "diag_error")]


def test_the_error_names_what_dcgmi_said() -> None:
    finding = judge_text(HOSTENGINE, Config(), source="n1")[0]
    assert "Unable to connect to host engine" in finding.summary
    assert "nv-hostengine running" in (finding.recommendation or "")


@pytest.mark.parametrize("name", ["dcgm57-group-list-hostengine-not-running.txt",
                                  "dcgm133-discovery-remote-host-not-listening.txt",
                                  "dcgmexporter324-3.3.5-diag-r3-nvvs-binary-not-found.txt"])
def test_field_refusals_are_errors(name: str) -> None:
    assert verdicts((DCGM / name).read_text()) == [("dcgm.diag", Status.ERROR, "diag_error")]


def test_prose_about_a_connection_is_not_dcgmi() -> None:
    assert detect_kind("We could not connect to host engine yesterday; it works now.\n") is None
