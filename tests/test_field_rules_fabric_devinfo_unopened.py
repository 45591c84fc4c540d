"""ibv_devinfo's ``Failed to open device`` is a device the node lists but cannot use (issue 27, fabric batch).

rdma-core's devinfo.c prints the line in place of a device's ``hca_id`` block when ``ibv_open_device()``
fails for it (hustcat/k8s-rdma-device-plugin#8: a container given one of eight ConnectX-3 VFs lists the
other seven and cannot open them, and a job that picks one fails). The parser keeps it as a device error,
as it keeps ibstat's ``ibpanic:`` lines, and ``ib.ports`` FAILs on it by its documented device_error rule,
even when another device's port is active; a listing where no device opens at all is read, not refused.
"""

from __future__ import annotations

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.infiniband import parse_devinfo

ACTIVE = """hca_id: mlx4_2
        transport:                      InfiniBand (0)
        fw_ver:                         2.42.5000
        phys_port_cnt:                  1
                port:   1
                        state:                  PORT_ACTIVE (4)
                        max_mtu:                4096 (5)
                        active_mtu:             4096 (5)
                        link_layer:             InfiniBand
"""


def test_an_unopened_device_beside_an_active_one_is_a_device_error() -> None:
    text = "Failed to open device\nFailed to open device\n" + ACTIVE + "\nFailed to open device\n"
    record = parse_devinfo(text)
    assert [d.name for d in record.devices] == ["mlx4_2"]
    assert record.errors == ["Failed to open device (3 listed device(s) libibverbs cannot open)"]
    found = [(f.status, f.code) for f in judge_text(text, Config(), source="n1") if f.check_id == "ib.ports"]
    assert (Status.FAIL, "device_error") in found


def test_a_listing_where_no_device_opens_is_read_as_errors() -> None:
    record = parse_devinfo("Failed to open device\nFailed to open device\n")
    assert record.devices == [] and len(record.errors) == 1


def test_a_clean_listing_has_no_error() -> None:
    assert parse_devinfo(ACTIVE).errors == []
