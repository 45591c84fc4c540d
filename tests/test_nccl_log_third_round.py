"""NCCL job logs of the third field round (issue 27): ranks that disagree on a collective or on the topology.

The texts follow NCCL's own format strings (transport/net_ib.cc "NET/IB : req %d/%d tag %x peer %s collective
mismatch error, local size %lu remote size %lu" and its pre-2.12 form, init.cc's "Mismatched collective
detected, please check your collective calls at and around rank %d" of NCCL 2.4-2.6, graph/rings.cc's "Error :
ring %d does not loop back to start (%d != %d)"), with hosts and numbers as threads of the field corpus posted
them (NVIDIA/nccl#969, #615, #296, #1020, #520; tests/fixtures/field/nccl-log/SOURCES.toml). Before these rules
each was an unnamed NCCL WARN: a WARN, while the job it ended had failed.
"""

from __future__ import annotations

import pytest

from gpu_preflight.model import Status

from .nccl_log_judging import kinds, triage


@pytest.mark.parametrize("text", [
    # NCCL >= 2.12 (net_ib.cc returns ncclInvalidUsage), behind a launcher's IP prefix
    "10.1.2.3: node-a:1307367:1307586 [0] transport/net_ib.cc:1038 NCCL WARN NET/IB : req 0/1 tag 0 peer "
    "10.1.2.4<58683> collective mismatch error, local size 496640 remote size 65536\n",
    # before 2.12
    "worker-0:15483:15645 [0] transport/net_ib.cc:665 NCCL WARN NET/IB : collective mismatch error local size "
    "546816 remote 524288 addr 7ff7d1530000 rkey 2553d seq 14/1c\n",
    # NCCL 2.4-2.6, host prefix or none
    "init.cc:1247 NCCL WARN Mismatched collective detected, please check your collective calls at and around rank "
    "39. You can use NCCL_DEBUG=INFO and NCCL_DEBUG_SUBSYS=COLL to see the collective logs\n",
])
def test_ranks_that_disagree_on_a_collective_are_invalid_usage(text: str) -> None:
    assert kinds(text) == ["invalid_usage"]
    assert triage(text) == [(Status.FAIL, "invalid_usage")]


@pytest.mark.parametrize("text", [
    "[7] graph/rings.cc:38 NCCL WARN Error : ring 0 does not loop back to start (13 != 15).\n",
    "node-5: node-5:3048:4991 [2] graph/rings.cc:38 NCCL WARN Error : ring 2 does not loop back to start (7 != 2)\n"
    "node-5: node-5:3048:4991 [2] NCCL INFO graph/connect.cc:281 -> 3\n",
])
def test_a_ring_that_does_not_loop_back_is_nccls_internal_error(text: str) -> None:
    assert kinds(text) == ["internal_error"]
    assert triage(text) == [(Status.FAIL, "internal_error")]


def test_an_unnamed_nccl_warn_still_only_warns() -> None:
    """The catch-all stays a WARN: a WARN NCCL printed and ran on (a capped setting) is not a failed job."""
    text = "node-a:1:2 [0] NCCL WARN NCCL_NTHREADS set to 1024, capped to 512\n"
    assert triage(text) == [(Status.WARN, "nccl_warn")]
