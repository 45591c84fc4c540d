"""nccl-tests result tables and NCCL / torch.distributed job logs against the corpus facts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.parsers.errors import ParseError
from gpu_preflight.parsers.nccl_log import SIGNATURES
from gpu_preflight.parsers.nccl_log import parse as parse_log
from gpu_preflight.parsers.nccl_tests import parse as parse_tests

from .evidence_facts import check_facts, parsed

FIXTURES = Path(__file__).parent / "fixtures" / "evidence"

# rows, peak out-of-place busbw, its size, peak in-place busbw, avg (reported or None), nranks, inferred
TABLES: dict[str, tuple[int, float, int, float, float | None, int, bool]] = {
    "awsome-all_reduce-1x-p5-8gpu-aws-batch.txt": (32, 483.05, 17179869184, 483.35, 156.742, 8, True),
    "awsome-all_reduce-2x-p4de-16gpu-srun-prefix.txt": (29, 78.33, 2147483648, 78.33, None, 16, True),
    "awsome-all_reduce-2x-p5-16gpu-srun-prefix.txt": (32, 487.09, 17179869184, 487.26, None, 16, True),
    "awsome-all_reduce-2x-p5-eks-mpirun-prefix-elided.txt": (7, 437.79, 2147483648, 437.89, 52.9753, 16, True),
    "awsome-all_reduce-p5en-128gpu-elided.txt": (3, 369.86, 17179869184, 369.42, 84.0569, 128, True),
    "coreweave-all_reduce-gb200-nvl72-72rank-graphics-device.txt": (5, 839.16, 4294967296, 846.82, 745.53, 72, False),
    "coreweave-all_reduce-h100-64gpu-sharp-mpijob-elided.txt": (5, 386.56, 8589934592, 385.56, 373.187, 96, True),
    "cscs-all_reduce-2.17.1-2x-gh200-8rank-slingshot-healthy.txt": (25, 122.57, 134217728, 123.11, 19.7866, 8, False),
    "cscs-all_reduce-2.18.2-2x-gh200-2rank-sarus.txt": (8, 22.86, 134217728, 22.88, 14.9966, 2, False),
    "deepops-all_reduce-legacy-error-column-2x-dgxa100-hdr.txt": (30, 188.53, 4294967296, 188.7, 53.7098, 16, True),
    "deepops-all_reduce-legacy-error-column-roce-k8s.txt": (29, 22.92, 2147483648, 22.9, 7.76739, 16, True),
    "gcp-a3mega-all_reduce-2x-h100-16rank.txt": (31, 338.82, 8589934592, 337.35, 70.742, 16, False),
    "hcdeep-all_reduce-gcp-a3-h100x8-single-node.txt": (31, 479.93, 8589934592, 479.93, 145.47, 8, False),
    "oci-all_reduce-2.17.9-2x-a100-b4.8-16rank.txt": (4, 189.6, 8589934592, 189.5, None, 16, False),
    "oci-all_reduce-2x-a100-40gb-16rank-mpijob.txt": (31, 237.94, 8589934592, 237.52, 66.4834, 16, False),
}


@pytest.mark.parametrize("name", sorted(TABLES))
def test_nccl_tests_tables(corpus: Path, name: str) -> None:
    rows, peak, at, peak_in, avg, nranks, inferred = TABLES[name]
    data = parsed(corpus, f"nccl-tests/{name}")
    assert len(data["rows"]) == rows
    check_facts(data, {"peak_busbw_gbps": peak, "peak_size_bytes": at, "peak_busbw_in_place_gbps": peak_in,
                       "nranks": nranks, "nranks_inferred": inferred, "errors": []})
    if avg is None:
        assert data["avg_busbw_source"] == "computed"
    else:
        assert (data["avg_busbw_gbps"], data["avg_busbw_source"]) == (avg, "reported")
    legacy = name.startswith("deepops")
    assert data["wrong_total"] == (None if legacy else 0)
    assert (data["max_error"] == 5e-07) if legacy else data["max_error"] is None
    assert all(r["root"] is None for r in data["rows"]) if legacy else {r["root"] for r in data["rows"]} == {-1}


def test_nccl_tests_versions_hosts_and_row_layout(corpus: Path) -> None:
    sarus = parsed(corpus, "nccl-tests/cscs-all_reduce-2.18.2-2x-gh200-2rank-sarus.txt")
    check_facts(sarus, {"test": "all_reduce", "nccl_tests_version": "2.18.2", "nccl_version": "2.30.7",
                        "rows.0.size_bytes": 1048576, "rows.0.time_us": 339.61, "rows.7.time_us": 5871.07,
                        "rows.0.in_place.busbw_gbps": 3.12, "rows.0.wrong": 0})
    assert sarus["hosts"] == ["nid007106", "nid007109"]
    oci = parsed(corpus, "nccl-tests/oci-all_reduce-2.17.9-2x-a100-b4.8-16rank.txt")
    check_facts(oci, {"nccl_tests_version": "2.17.9", "nccl_version": "2.29.3+cuda13.1",
                      "rows.0.size_bytes": 1073741824, "rows.3.algbw_gbps": 101.12})
    single = parsed(corpus, "nccl-tests/hcdeep-all_reduce-gcp-a3-h100x8-single-node.txt")
    assert single["nccl_version"] == "2.22.3+cuda12.6" and len(single["hosts"]) == 1
    eks = parsed(corpus, "nccl-tests/awsome-all_reduce-2x-p5-eks-mpirun-prefix-elided.txt")
    assert eks["rows"][0]["size_bytes"] == 0 and eks["out_of_bounds"] == 0
    p5 = parsed(corpus, "nccl-tests/awsome-all_reduce-2x-p5-16gpu-srun-prefix.txt")
    assert p5["rows"][-1]["time_us"] == 66132 and p5["rows"][-1]["algbw_gbps"] == 259.78


def test_nccl_tests_aborted_run(corpus: Path) -> None:
    data = parsed(corpus, "nccl-tests/cscs-test-nccl-failure-invalid-usage.txt")
    assert data["rows"] == []
    assert data["errors"] == [{"host": "nid006352", "kind": "NCCL", "file": "common.cu", "line": 958,
                               "message": "invalid usage (run with NCCL_DEBUG=WARN for details)",
                               "signature": "invalid_usage"}]


def test_wrong_values_and_sendrecv_na_in_place() -> None:
    text = "\n".join([
        "#  size  count  type  redop  root  time  algbw  busbw  #wrong  time  algbw  busbw  #wrong",
        "#   (B)  (elements)  (us)  (GB/s)  (GB/s)  (us)  (GB/s)  (GB/s)",
        "  1048576  262144  float  none  -1  20.10  52.17  52.17  0  20.00  52.43  52.43  N/A",
        "  2097152  524288  float  none  -1  38.10  55.04  55.04  3  37.90  55.33  55.33  N/A",
    ])
    record = parse_tests(text)
    assert record.wrong_total == 3 and record.rows[0].in_place is not None and record.rows[0].in_place.wrong is None


@pytest.mark.parametrize(("text", "message"), [
    ("nothing here\n", "no nccl-tests result row"),
    ("#  size  count  type\n  8  2  float  sum\n", "values where the header names 3"),
    ("#  size  count  type\n  8k  2  float\n", "not a byte count"),
])
def test_malformed_nccl_tests(text: str, message: str) -> None:
    with pytest.raises(ParseError, match=message):
        parse_tests(text)


# kind of each signature, and what the log says about where
LOGS: dict[str, list[dict[str, Any]]] = {
    "cscs-nccl-info-plugin-not-found-then-warn.txt": [
        {"kind": "net_plugin_fallback", "host": "nid006365", "pid": 180142, "device": 0, "line": 1},
        {"kind": "net_plugin_missing", "host": "nid006365", "device": 0, "line": 3,
         "detail": "Error: network AWS Libfabric not found."}],
    "cscs-nccl-warn-aws-libfabric-not-found.txt": [
        {"kind": "net_plugin_missing", "host": "nid006352", "pid": 34157, "device": 1}],
    "stas00-nccl-unhandled-system-error-2.7.8.log": [{"kind": "system_error"}, {"kind": "system_error"}],
    "stas00-nccl-warn-connect-refused.log": [
        {"kind": "connection_refused", "host": "r11i6n2", "pid": 486514, "device": 1, "peer": "10.148.3.247<56821>"}],
    "stas00-nccl-warn-net-ib-completion-error12.log": [
        {"kind": "ib_completion_error", "host": "node-2", "pid": 5776, "peer": "10.2.0.5<33092>",
         "detail": "NET/IB : Got completion from peer 10.2.0.5<33092> with error 12, opcode 0, len 0, "
                   "vendor err 129 (Recv)"}],
}


@pytest.mark.parametrize("name", sorted(LOGS))
def test_nccl_log_signatures(corpus: Path, name: str) -> None:
    sigs = parsed(corpus, f"torch-distributed/{name}")["signatures"]
    assert len(sigs) == len(LOGS[name])
    for sig, want in zip(sigs, LOGS[name], strict=True):
        assert {k: sig[k] for k in want} == want


def test_peer_death_is_remote_error_not_timeout(corpus: Path) -> None:
    data = parsed(corpus, "torch-distributed/hcdeep-nccl-remote-error-peer-pod-deleted.txt")
    kinds = [s["kind"] for s in data["signatures"]]
    assert "watchdog_timeout" not in kinds  # the '#' commentary mentions one; it is not log
    assert set(kinds) == {"remote_error", "segfault"}
    assert data["nccl_version"] == "2.22.3+cuda12.6" and data["ranks_seen"] == [0]
    first = data["signatures"][0]
    assert first["rank"] == 0 and "Timeout(ms)=60000" in first["detail"]


def test_duplicate_gpu_from_our_capture() -> None:
    record = parse_log((FIXTURES / "nccl-duplicate-gpu-error.txt").read_text())
    assert record.nccl_version == "2.28.9+cuda13.0"
    dup = [s for s in record.signatures if s.kind == "duplicate_gpu"]
    assert {(s.rank, s.host) for s in dup} >= {(1, "vm"), (0, "vm")}
    assert "both on CUDA device 60" in dup[0].detail
    assert any(s.kind == "invalid_usage" for s in record.signatures)
    root = [s for s in record.signatures if s.kind == "rank_exited"]
    assert [(s.rank, s.host) for s in root] == [(1, "localhost")] and "exitcode 1" in root[0].detail


@pytest.mark.parametrize(("line", "kind", "rank"), [
    ("[rank3]:[E1125 10:00:00.0 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: "
     "WorkNCCL(SeqNum=7, OpType=ALLREDUCE, Timeout(ms)=600000) ran for 600049 milliseconds before timing out.",
     "watchdog_timeout", 3),
    ("[rank1]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB", "out_of_memory", 1),
    ("[rank0]: torch.distributed.DistStoreError: Timed out after 901 seconds waiting for clients. 1/2 clients joined.",
     "rendezvous_timeout", 0),
    ("host:1:2 [0] enqueue.cc:1 NCCL WARN Cuda failure 'an illegal memory access' ncclUnhandledCudaError",
     "cuda_error", None),
])
def test_more_signatures(line: str, kind: str, rank: int | None) -> None:
    sig = parse_log(line + "\n").signatures[0]
    assert (sig.kind, sig.rank) == (kind, rank)


def test_log_without_signature_and_non_log() -> None:
    assert parse_log("host:1:2 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n").signatures == []
    with pytest.raises(ParseError, match=r"no NCCL or torch\.distributed line"):
        parse_log("hello world\n")


def test_signature_kinds_are_unique() -> None:
    kinds = [k for k, _ in SIGNATURES]
    assert len(kinds) == len(set(kinds))
