"""Network-side lines of a kernel log or syslog: RDMA NIC driver messages and link carrier changes.

A GPU node's collectives between hosts run over its RDMA NICs (InfiniBand/RoCE ConnectX under
``mlx5_core``, AWS EFA under ``efa``) and reach GPU memory through ``nvidia-peermem``; the
kernel log is where those drivers say a device stopped answering. Each message is recognised
here by a pattern and named by a code (:data:`NIC_MESSAGES`); what a code means, its verdict and
its operator action are the judge's (``checks/evidence_fabric.py``), as for nvidia-smi's own
failure texts.

The EFA and mlx5 patterns are NVIDIA NVSentinel's syslog-health-monitor NIC-driver patterns
(``health-monitors/syslog-health-monitor/pkg/nicdriver/config.go`` at commit cb777dd, Apache-2.0),
anchored as there on the driver's own prefix: ``efa <PCI address>:`` before the RDMA device is
registered, ``infiniband <rdmap…|efa_…>:`` after (the ENA network driver shares some texts, so
an unanchored text would misfire), and ``mlx5_core`` for ConnectX. The peermem line is the one
gpud's peermem component and konduktor's dmesg check flag; its predecessor module logs as ``nv_mem``.

A carrier change is what ``systemd-networkd`` (and NetworkManager-less hosts' syslog) prints when
a link goes down and up: ``ib6: Lost carrier`` / ``ib6: Gained carrier``. It is counted per
interface; whether a loss is a fault depends on what the interface is (see
:func:`interface_class`).

Pure text in, tuples out; patterns read a bounded line and have no nested quantifiers.
"""

from __future__ import annotations

import re

__all__ = ["NIC_MESSAGES", "carrier_change", "interface_class", "nic_message"]

_EFA = (r"\b(?:efa (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F])"
        r"|infiniband (?P<ibdev>(?:rdmap|efa_)\S*)):")
_MLX5 = r"\bmlx5_core(?: (?P<bdf>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]))?"

NIC_MESSAGES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("efa_admin_cmd_timeout", re.compile(
        _EFA + r".*(?:Wait for completion \(polling\) timeout|The device didn't send any completion for admin cmd)")),
    ("efa_admin_queue_closed", re.compile(_EFA + r".*Admin queue is closed")),
    ("efa_device_reset_failed", re.compile(
        _EFA + r".*(?:Reset indication didn't turn (?:on|off)|Device isn't ready, can't reset device)")),
    ("efa_device_not_ready", re.compile(_EFA + r".*Device isn't ready, abort com init")),
    ("efa_admin_cmd_failed", re.compile(_EFA + r".*Failed to (?:process|submit) command")),
    ("mlx5_cmd_timeout", re.compile(_MLX5 + r".*timeout\. Will cause a leak of a command resource")),
    ("mlx5_health_compromised", re.compile(_MLX5 + r".*device's health compromised.*reached miss count")),
    ("mlx5_unrecoverable", re.compile(_MLX5 + r".*unrecoverable hardware error")),
    ("mlx5_tx_timeout", re.compile(
        r"(?:NETDEV WATCHDOG.*mlx5_core|" + _MLX5 + r".*NETDEV WATCHDOG).*transmit queue.*timed out"
        r"|" + _MLX5.replace("?P<bdf>", "?:") + r".*TX timeout detected")),
    ("mlx5_rx_timeout", re.compile(_MLX5 + r".*RX timeout on channel")),
    ("mlx5_module_high_temp", re.compile(_MLX5 + r".*Port module event.*High Temperature")),
    ("mlx5_module_unplugged", re.compile(_MLX5 + r".*Port module event.*Cable unplugged")),
    ("mlx5_pcie_power", re.compile(_MLX5 + r".*Detected insufficient power on the PCIe slot")),
    # The driver could not bring the adapter up: "mlx5_core 0000:03:00.0: mlx5_load_one failed with error code
    # -22", then "mlx5_core: probe of 0000:03:00.0 failed with error -22" (the kernel's driver core names it).
    ("mlx5_probe_failed", re.compile(
        _MLX5 + r":? (?:mlx5_(?:load|init)_one failed with error code|probe of "
        r"(?P<probe>[0-9a-fA-F]{4}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}\.[0-9a-fA-F]) failed with error)")),
    # mlx5e's carrier update on an Ethernet/RoCE port: "mlx5_core 0000:5e:00.0 enp94s0f0: Link down".
    ("mlx5_link_down", re.compile(_MLX5 + r" (?P<netdev>[A-Za-z][\w.@-]{0,31}): Link down\b")),
    ("peermem_invalid_context", re.compile(
        r"\bnvidia-peermem\b.*nv_get_p2p_free_callback.*ERROR detected invalid context")),
    # nvidia-peermem's out-of-tree predecessor nv_peer_mem logs as "nv_mem": "nv_mem nv_get_p2p_free_callback:144
    # nv_get_p2p_free_callback -- invalid page_table" is a GPU driver bug its maintainer names (fixed from R510, and
    # in R470 from about May 2021; Mellanox/nv_peer_memory#112): GPUDirect RDMA mappings freed under a stale table.
    ("peermem_invalid_page_table", re.compile(r"\bnv_mem\b.*nv_get_p2p_free_callback.*invalid page_table")),
)
"""Code, pattern; the first that matches a line names it. Most specific first where texts overlap."""

_CARRIER = re.compile(r"(?:^|[\s:\]])(?P<iface>[A-Za-z][\w.@-]{0,31}): (?P<change>Lost|Gained) carrier\b",
                      re.IGNORECASE)

_VIRTUAL = re.compile(r"^(?:veth|cali|docker|cni|flannel|vxlan|tun|tap|virbr|br-|lo$|kube-|weave|cilium|lxc|genev"
                      r"|tailscale|wg|vnet|macvtap|dummy)", re.IGNORECASE)
_INFINIBAND = re.compile(r"^ib(?:\d|p\d|s\d)", re.IGNORECASE)


_EFA_PREFIX = re.compile(_EFA)
# Words every line of a code holds: one search per driver decides whether any of its patterns can match,
# since most of a driver's lines (a ConnectX host logs dozens at boot) are none of these messages.
_KEYS: dict[str, tuple[str, ...]] = {
    "efa_admin_cmd_timeout": ("Wait for completion", "didn't send any completion"),
    "efa_admin_queue_closed": ("Admin queue is closed",),
    "efa_device_reset_failed": ("Reset indication", "can't reset"),
    "efa_device_not_ready": ("abort com init",), "efa_admin_cmd_failed": ("Failed to ",),
    "mlx5_cmd_timeout": ("Will cause a leak",), "mlx5_health_compromised": ("health compromised",),
    "mlx5_unrecoverable": ("unrecoverable hardware error",), "mlx5_tx_timeout": ("timed out", "TX timeout"),
    "mlx5_rx_timeout": ("RX timeout",), "mlx5_module_high_temp": ("High Temperature",),
    "mlx5_module_unplugged": ("Cable unplugged",), "mlx5_pcie_power": ("insufficient power",),
    "mlx5_probe_failed": ("failed with error",), "mlx5_link_down": ("Link down",),
    "peermem_invalid_context": ("invalid context",), "peermem_invalid_page_table": ("invalid page_table",),
}
_FAMILIES: dict[str, tuple[re.Pattern[str], tuple[tuple[str, re.Pattern[str]], ...]]] = {
    family: (re.compile("|".join(re.escape(k) for code, _ in members for k in _KEYS[code])), members)
    for family in ("efa", "mlx5", "peermem")
    for members in [tuple((c, p) for c, p in NIC_MESSAGES if c.split("_", 1)[0] == family)]
}


def nic_message(line: str) -> tuple[str, str | None, str] | None:
    """``(code, device, text)`` for a NIC driver message on ``line``, else ``None``.

    ``device`` is the PCI address or RDMA device the line names (``None`` where it names none).
    Only the patterns of a driver whose prefix is on the line are tried.
    """
    if "mlx5_core" in line:
        family = "mlx5"
    elif "nvidia-peermem" in line or "nv_mem " in line:
        family = "peermem"
    elif ("efa " in line or "infiniband " in line) and _EFA_PREFIX.search(line):
        family = "efa"
    else:
        return None
    gate, members = _FAMILIES[family]
    if gate.search(line) is None:
        return None
    for code, pattern in members:
        if (m := pattern.search(line)) is not None:
            groups = m.groupdict()
            device = groups.get("ibdev") or groups.get("bdf") or groups.get("probe")
            return code, device, line[m.start():].strip()[:300]
    return None


def carrier_change(line: str) -> tuple[str, bool] | None:
    """``(interface, lost)`` for a ``Lost carrier`` / ``Gained carrier`` line, else ``None``."""
    if "carrier" not in line.lower():
        return None
    m = _CARRIER.search(line)
    return (m.group("iface"), m.group("change").lower() == "lost") if m else None


def interface_class(name: str) -> str:
    """``infiniband`` (``ib0``, ``ibp12s0``), ``virtual`` (container and bridge ends: ``veth…``, ``cali…``,
    ``docker0``…, which come and go with pods) or ``ethernet`` (everything else: ``eth0``, ``ens5``,
    ``enp…``, bonds)."""
    if _VIRTUAL.match(name):
        return "virtual"
    return "infiniband" if _INFINIBAND.match(name) else "ethernet"
