"""``show_gids``: the GID table RoCE addresses a port by, judged by ``ib.gids`` (issue 27; real texts in
tests/fixtures/field/fabric: Mellanox/k8s-rdma-sriov-dev-plugin#30, IBM/SpectrumScale_NETWORK_READINESS#4,
openucx/ucx#9484, NVIDIA/nccl#1573). Format as mlnx-tools' sbin/show_gids prints it: the header, a dashed line,
"DEV PORT INDEX GID IPv4 VER DEV" rows and "n_gids_found=N"."""

from __future__ import annotations

from pathlib import Path

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text

EVIDENCE = Path(__file__).parent / "fixtures" / "evidence"
HEAD = "DEV\tPORT\tINDEX\tGID\t\t\t\t\tIPv4  \t\tVER\tDEV\n---\t----\t-----\t---\t\t\t\t\t------------  \t---\t---\n"


def verdicts(text: str) -> list[tuple[str, Status, str]]:
    return [(f.check_id, f.status, f.code) for f in judge_text(text, Config(), source="x")
            if f.check_id in ("ib.gids", "evidence.complete")]


def test_rows_are_read_with_their_ipv4_version_and_netdev() -> None:
    text = (EVIDENCE / "show_gids-cx7-roce-v2-ipv4.txt").read_text()
    assert detect_kind(text) == "show-gids"
    _kind, record = parse_text(text, "show-gids")
    assert record.found == 6 and len(record.entries) == 6 and record.incomplete == []
    third = record.entries[3]
    assert (third.device, third.port, third.index, third.ipv4, third.version, third.netdev) == (
        "mlx5_0", 1, 3, "10.0.10.11", "v2", "ens1f0np0")


def test_a_roce_port_with_only_link_local_v2_gids_warns() -> None:
    text = (EVIDENCE / "show_gids-cx7-roce-v2-ipv4.txt").read_text()
    assert verdicts(text) == [("ib.gids", Status.WARN, "no_routable_v2_gid")]


def test_an_empty_table_fails() -> None:
    assert verdicts(HEAD + "n_gids_found=0\n") == [("ib.gids", Status.FAIL, "no_gids")]


def test_infiniband_gids_need_no_v2_entry_and_routable_ipv6_is_enough() -> None:
    text = HEAD + ("mlx5_0\t1\t0\tfe80:0000:0000:0000:9c63:c003:0055:48fe\t\t\tv1\tibp26s0\n"
                   "rocep1s0\t1\t1\tfd93:16d3:59b6:010d:0690:81ff:fe39:e3e8\t\t\tv2\tenp1s0\n"
                   "n_gids_found=2\n")
    assert verdicts(text) == [("ib.gids", Status.PASS, "ok")]


def test_without_its_closing_count_the_last_port_is_not_judged_and_the_table_is_incomplete() -> None:
    """A paste cut after a device's first (v1) row: that device is not judged on a row it may not have finished."""
    text = HEAD + ("mlx5_0\t1\t3\t0000:0000:0000:0000:0000:ffff:0a98:000c\t10.152.0.12  \tv2\tnet1\n"
                   "mlx5_2\t1\t4\tfe80:0000:0000:0000:90ea:b5ff:fec5:3f24\t\t\tv1\tnet3\n")
    found = verdicts(text)
    assert ("ib.gids", Status.PASS, "ok") in found
    assert [(check, status) for check, status, _code in found if check == "evidence.complete"] == [
        ("evidence.complete", Status.ERROR)]
