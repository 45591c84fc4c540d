"""A perftest run pasted with its banner and settings but no result row (issue 27's kernel/fabric batch of 2026-12-07).

Mellanox/k8s-rdma-sriov-dev-plugin#32 posted ``ib_read_bw``'s banner (quoted with ``>``) and the two
addresses, then nothing: the run never measured (all-zero GIDs in the pod). Such a paste is perftest's
own structure, so it is a perftest run we read and could not judge (ERROR: output incomplete), not an
unknown text; its failure lines, when present, still make it a FAIL. Text built here.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind
from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.perftest import parse

BANNER = ("---------------------------------------------------------------------------------------\n"
          "                    RDMA_Read BW Test\n"
          " Dual-port       : OFF\t\tDevice         : mlx5_0\n"
          " Number of qps   : 1\t\tTransport type : IB\n"
          " Connection type : RC\t\tUsing SRQ      : OFF\n"
          " Link type       : Ethernet\n"
          " GID index       : 0\n"
          "---------------------------------------------------------------------------------------\n"
          " local address: LID 0000 QPN 0x0108 PSN 0x63ad7d\n"
          " GID: 00:00:00:00:00:00:00:00:00:00:00:00:00:00:00:00\n")


def statuses(text: str) -> dict[str, Status]:
    return {f.check_id: f.status for f in judge_text(text, Config(), source="n1")}


@pytest.mark.parametrize("quote", ["", "> "], ids=["plain", "quoted"])
def test_a_banner_without_results_is_an_incomplete_perftest_run(quote: str) -> None:
    text = "".join(quote + line + "\n" for line in BANNER.splitlines())
    assert detect_kind(text) == "perftest"
    record = parse(text)
    assert (record.test, record.device, record.rows, record.errors) == ("RDMA_Read BW Test", "mlx5_0", [], [])
    assert record.incomplete
    assert statuses(text) == {"ib.perftest": Status.SKIP, "evidence.complete": Status.ERROR}


def test_a_banner_with_its_failure_line_stays_a_failure() -> None:
    text = BANNER + " Unable to Connect the HCA's through the link\n"
    assert statuses(text)["ib.perftest"] is Status.FAIL and not parse(text).incomplete


def test_settings_alone_without_the_banner_are_still_not_a_run() -> None:
    with pytest.raises(ParseError):
        parse(" Number of qps   : 1\t\tConnection type : RC\n")
