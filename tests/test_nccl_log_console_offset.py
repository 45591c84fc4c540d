"""A log console's clock with its UTC offset before NCCL's line is read past, so the finding names the host.

NVIDIA/nccl#1905 (field corpus, not held out) pasted WARN lines from a console that prints
``2025-11-09 15:39:31.043 +08:00`` before each line, then NCCL's own bracketed clock and ``host:pid:tid [dev]``.
The plain date and time was read past, the ``+08:00`` was not, so NCCL's prefix was not at the line's start and
the IB findings named no host: the node to check was lost. The lines below are built here in that shape.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.parsers.detect import parse_text

WARN = ("[2025-11-09 07:39:30] h100-28:238:1219 [0] transport/net_ib.cc:180 NCCL WARN NET/IB : mlx5_ib0:1 async "
        "fatal event on QP (0x7f69f01519a8): local access violation work queue error")


@pytest.mark.parametrize("clock", ["2025-11-09 15:39:31.043 +08:00 ", "2025-11-09 15:39:31.043 -0700 ",
                                   "2025-11-09 15:39:31 Z ", "2025-11-09 15:39:31,043 +05:30 "])
def test_the_offset_of_a_console_clock_is_read_past(clock: str) -> None:
    _kind, record = parse_text(clock + WARN + "\n", "nccl-log")
    (signature,) = record.signatures
    assert (signature.kind, signature.host) == ("ib_async_event", "h100-28")
    (finding,) = [f for f in judge_text(clock + WARN + "\n", Config(), source="job.log")
                  if f.check_id == "nccl_log.triage"]
    assert finding.subject == "job.log/h100-28"


def test_a_number_after_the_time_that_is_no_offset_stays_in_the_line() -> None:
    _kind, record = parse_text("2025-11-09 15:39:31 +0800x " + WARN + "\n", "nccl-log")
    assert all(s.host != "h100-28" for s in record.signatures)
