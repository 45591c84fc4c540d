"""perftest pastes: rdma-core's provider-loader warnings, and a header that lost its second '#'.

``libibverbs: Warning: couldn't load driver 'libmana-rdmav34.so': ...`` is printed for every
provider listed in /etc/libibverbs.d whose library is not installed; the device in use has its
provider, and a run left without one says so on its own line. Before, the word "couldn't" made
it a failure ("perftest did not measure", FAIL) of a server output that was only cut before its
results. The result header ``#bytes  #iterations  BW peak...`` pasted as ``#bytes  iterations``
was read as four columns for five values (exit 3); the iterations column is named either way.
"""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import parse_text

BANNER = (" RDMA_Write BW Test\n"
          " Dual-port       : OFF          Device         : rocep4s0f0\n"
          " Number of qps   : 1            Transport type : IB\n"
          " Connection type : RC           Using SRQ      : OFF\n"
          " Link type       : Ethernet\n")
LOADER = ("libibverbs: Warning: couldn't load driver 'libmana-rdmav34.so': libmana-rdmav34.so: cannot open shared "
          "object file: No such file or directory\n")


def statuses(text: str) -> dict[str, Status]:
    return {f.check_id: f.status for f in judge_text(text, Config(), source="n1")}


def test_loader_warnings_are_warnings_and_a_cut_run_is_incomplete_not_failed() -> None:
    kind, record = parse_text(LOADER + "\n" + BANNER)
    assert kind == "perftest"
    assert record.errors == [] and record.warnings == [LOADER.strip()]
    assert record.incomplete and record.device == "rocep4s0f0"
    found = statuses(LOADER + BANNER)
    assert found["evidence.complete"] is Status.ERROR and Status.FAIL not in found.values()


def test_a_real_failure_after_the_loader_warnings_still_fails() -> None:
    text = LOADER + BANNER + " Couldn't connect to 10.0.0.2:18515\n Unable to init the socket connection\n"
    assert parse_text(text)[1].errors == ["Couldn't connect to 10.0.0.2:18515", "Unable to init the socket connection"]
    assert statuses(text)["ib.perftest"] is Status.FAIL


def test_a_header_without_the_second_hash_is_read() -> None:
    text = (" RDMA_Read BW Test\n Device         : mlx5_1\n"
            " #bytes     iterations    BW peak[MB/sec]    BW average[MB/sec]   MsgRate[Mpps]\n"
            " 2          1000             4.86               4.67               2.450225\n"
            " 65536      1000             23000.10           22990.50           0.367848\n")
    record = parse_text(text)[1]
    assert [(r.size_bytes, r.iterations) for r in record.rows] == [(2, 1000), (65536, 1000)]
    assert record.bw_avg_max_gbps == round(22990.50 * 1024 * 1024 * 8 / 1e9, 4)


@pytest.mark.parametrize("tag", ["gpu-node-07: ", "[rank3]: ", "2024-03-01T12:00:00Z "])
def test_a_loader_warning_behind_a_launchers_tag_is_still_a_warning(tag: str) -> None:
    """A host, rank or time tag on every line (pdsh, torchrun, a log shipper) leaves the warning a warning."""
    line = "libibverbs: Warning: couldn't load driver 'libmana-rdmav34.so': cannot open shared object file\n"
    record = parse_text(tag + line + tag + "RDMA_Write BW Test\n", kind="perftest")[1]
    assert record.warnings and not record.errors
