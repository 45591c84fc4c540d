"""A GSP falcon core dump is the GSP timeout it follows (issue 27, kernel batch).

open-gpu-kernel-modules' kernel_gsp.c calls ``kflcnCoreDumpNondestructive`` (and, on a fatal timeout,
``kflcnCoreDumpDestructive``) only from its GSP-timeout logging, on the RPC path and the periodic
health-check path alike; a paste of the dump's TRACE lines without the Xid 119 line above it
(open-gpu-kernel-modules#446, a Talos node's ``kern: warning: [RFC 3339]:`` prefix) still reports that
timeout: ``gpu.xid`` FAILs as for Xid 119 (reset the GPU).
"""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.kernel_log import KernelLineReader, XidEvent

TRACE = ("10.0.0.7: kern: warning: [2026-04-22T21:27:51.291660856Z]: NVRM: kflcnCoreDumpNondestructive_IMPL: "
         "TRACE: 08 = 0x0000000004d4b1a0\n"
         "[  912.441871] NVRM: GPU2 kflcnCoreDumpNondestructive_IMPL: PRI: PC = 0x000000000400a35c\n")


def test_a_core_dump_line_is_the_gsp_timeout_it_follows() -> None:
    events = [e for line in TRACE.splitlines() for e in KernelLineReader().read(line)]
    assert [(e.xid, e.kind) for e in events if isinstance(e, XidEvent)] == [(119, "nvrm:gsp_core_dump")] * 2


def test_a_pasted_core_dump_fails_gpu_xid() -> None:
    assert {f.status for f in judge_text(TRACE, Config(), source="n1") if f.check_id == "gpu.xid"} == {Status.FAIL}


def test_the_words_in_prose_are_not_a_dump() -> None:
    assert KernelLineReader().read("see kflcnCoreDumpNondestructive in kernel_falcon.c for the register names") == []
