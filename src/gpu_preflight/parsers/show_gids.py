"""``show_gids`` (MLNX OFED / mlnx-tools): the GID table of every RDMA port, the address RoCE uses.

The script prints a header (``DEV PORT INDEX GID IPv4 VER DEV``, then a dashed line), one row per
non-empty GID (``mlx5_0  1  5  0000:...:ffff:ac13:003c  172.19.0.60  v2  ens1f0``: the device, port,
GID index, the GID, the IPv4 address an IPv4-mapped GID carries, the RoCE version from
``gid_attrs/types`` and the netdev from ``gid_attrs/ndevs``) and ``n_gids_found=N``. Where the kernel has no
``gid_attrs`` (or a read of it fails) the script prints the row with the version and netdev columns empty
(``echo -e "$d\t$p\t$g\t$gid\t\t\t$_type\t$_ndev"``, sbin/show_gids:95-99): a GID all the same, its
version not read. An InfiniBand
port's GIDs are its subnet prefix and port GUID, typed ``v1`` and tied to an IPoIB netdev or none.
Rows pasted without the header are read as rows; a header with ``n_gids_found=0`` is a table that
lists nothing, which is what a device no interface addresses shows (a pod whose CNI gave the RDMA
device no network). ``n_gids_found`` is the table's end: without it the listing may be cut inside its
last port, so that port is not judged and the record says it is incomplete.
"""

from __future__ import annotations

import re

from ..records.fabric import GidEntry, GidTableRecord
from .detect import parser
from .errors import ParseError
from .text import is_noise, prepare

KIND = "show-gids"

_HEADER = re.compile(r"^DEV\s+PORT\s+INDEX\s+GID\s+IPv4\s+VER\s+DEV\s*$")
_ROW = re.compile(r"^(?P<dev>[\w.-]{1,64})\s+(?P<port>\d{1,3})\s+(?P<index>\d{1,5})\s+"
                  r"(?P<gid>[0-9a-fA-F]{4}(?::[0-9a-fA-F]{4}){7})(?:\s+(?P<ipv4>\d{1,3}(?:\.\d{1,3}){3}))?"
                  r"(?:\s+(?P<ver>v[12]))?(?:\s+(?P<netdev>\S{1,64}))?\s*$")
_FOUND = re.compile(r"^n_gids_found=(?P<n>\d{1,7})\s*$")


def sniff(text: str) -> int:
    """The table's header (90), or (rows pasted without it) two rows of its shape (60)."""
    lines = [line.strip() for line in text.splitlines()[:500]]
    if any(_HEADER.match(line) for line in lines):
        return 90
    return 60 if sum(1 for line in lines if _ROW.match(line)) >= 2 else 0


@parser(KIND, sniff=sniff, title="show_gids (RoCE/IB GID table)")
def parse(text: str) -> GidTableRecord:
    """Every GID row, and ``n_gids_found`` when shown; a text with neither the header nor a row is not the table."""
    record = GidTableRecord()
    header = False
    for line in prepare(KIND, text):
        line = line.strip()
        if not line or is_noise(line):
            continue
        if _HEADER.match(line):
            header = True
        elif m := _ROW.match(line):
            record.entries.append(GidEntry(m.group("dev"), int(m.group("port")), int(m.group("index")),
                                           m.group("gid").lower(), m.group("ipv4"), m.group("ver"),
                                           m.group("netdev")))
        elif m := _FOUND.match(line):
            record.found = int(m.group("n"))
    if not header and not record.entries:
        raise ParseError(KIND, "no show_gids header or GID row")
    if record.found is None and record.entries:
        last = record.entries[-1]
        record.incomplete.append(f"no closing n_gids_found line: the listing may be cut inside {last.device} "
                                 f"port {last.port}")
    return record
