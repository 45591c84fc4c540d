"""Judging the fabric: libfabric, InfiniBand/RoCE ports, perftest and PCIe links.

* ``fabric.fi_info``: FAIL when fi_info lists fewer provider entries than
  ``evidence.fi_info_min_entries`` (``fi_getinfo: -61`` is none: the provider the job
  needs is not there); SKIP for ``fi_info -l`` (the providers built in, no device shown).
* ``fabric.pingpong``: FAIL when fi_pingpong did not complete (no row, or an error after its rows), or its
  bandwidth at the largest size is below ``evidence.pingpong_min_mb_per_s``.
* ``ib.ports``: FAIL for an InfiniBand port that is not ACTIVE/LinkUp (WARN for an
  Ethernet/RoCE port, which may be an unused NIC, unless it is a missing rail: see
  :func:`.ib_rails.rail_sets`), for an HCA that vanished while listed
  (``ibpanic``), for a rail adapter that is missing (:func:`.ib_rails.missing_hcas`) and for
  fewer active ports than ``evidence.ib_expected_ports``; WARN for an active port slower than
  ``evidence.ib_min_rate_gbps``. ``rdma link`` and ``ibdev2netdev -v`` listings are judged so too; plain
  ``ibdev2netdev`` shows only the interface's carrier, and an interface Down WARNs (``netdev_down``).
* ``ib.counters`` (a saved ``perfquery``): WARN for an error counter over its ``diagnostics.ib_counters_*``
  limit, as a total since the last clear (never FAIL: not known to be recent); ERROR for a port the tool could not
  query (``iberror: failed``); PASS otherwise.
* ``ib.gids`` (a saved ``show_gids``): FAIL when it lists no GID, WARN for a RoCE port whose v2 GIDs are all
  link-local, PASS otherwise.
* ``ib.perftest``: FAIL when the test could not connect or stopped on an error after some rows, or its best
  average bandwidth is below ``evidence.perftest_min_bw_gbps`` (SKIP with the value when unset; SKIP for a latency
  test, which measures no bandwidth).
* ``kernel.nic``: an RDMA NIC driver message in a saved kernel log (:data:`NIC_VERDICTS`):
  FAIL for a device that stopped answering (EFA admin queue closed or command timed out,
  mlx5 firmware unresponsive), WARN for an event worth a look (a failed admin command, a TX/RX
  timeout the driver recovers from, nvidia-peermem's invalid-context errors, nv_peer_mem's invalid
  page_table, a GPU driver bug fixed in later drivers).
* ``kernel.link_flap``: FAIL for an InfiniBand interface that lost its carrier, WARN for any
  other physical interface (container and bridge ends are not judged).
* ``pcie.lnksta``: FAIL for a link trained narrower than it can (``lspci -vvv`` LnkSta
  width below LnkCap); WARN for a NIC or bridge trained slower. A GPU's *speed* is
  reported, not judged: idle GPUs drop to 2.5 GT/s to save power (as ``gpu.pcie`` does).
  A device that does not answer, capabilities denied (not root) and ``pcie.aer``: :mod:`.evidence_pcie`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from datetime import datetime
from typing import TYPE_CHECKING

from ..actions import Action, with_action
from ..config.diagnostics import diagnostics_config
from ..config.evidence import evidence_config
from ..model import Finding, Status
from ..records.fabric import EFA_NAMES
from ..registry import declare
from .evidence import judges
from .evidence_kernel import in_window
from .evidence_pcie import device_findings
from .ib_rails import hca_missing_findings, rail_sets

if TYPE_CHECKING:
    from ..config import Config
    from ..records.dmesg import DmesgRecord
    from ..records.fabric import GidEntry, GidTableRecord, IbDevice, IbDevicesRecord, IbPort, PerfqueryRecord
    from ..records.libfabric import FiInfoRecord, PingpongRecord
    from ..records.pci import LspciRecord, PciDevice
    from ..records.perftest import PerftestRecord
    from ..records.xid import XidWindow

IB_PERFTEST = declare(
    "ib.perftest", "perftest reaches the bandwidth floor",
    """A saved perftest run (``ib_write_bw``, ``ib_read_bw``, ``ib_send_bw``): FAIL when the test
    could not connect, stopped on an error after some message sizes, or its best average bandwidth is below
    ``evidence.perftest_min_bw_gbps``; SKIP with the measured value when that floor is unset, and for a latency
    test (``ib_*_lat``: no bandwidth measured).""",
    group="efa_network", component="network_infrastructure", settings=("evidence.perftest_min_bw_gbps",))

IB_GIDS = declare(
    "ib.gids", "Every RoCE port has a GID RoCE v2 can route",
    """A saved ``show_gids``: FAIL when it lists no GID at all (no address reaches the device: a pod
    whose network gave the RDMA device none, a netdev without an IP); WARN for a RoCE port (a netdev
    that is not IPoIB) whose RoCE v2 GIDs are all link-local (fe80::, only reachable inside one L2
    segment; NCCL prefers an IPv4-mapped or routable IPv6 v2 GID); PASS otherwise. InfiniBand GIDs
    (typed v1, an IPoIB netdev or none) need no v2 entry.""",
    group="efa_network", component="network_infrastructure")

# RDMA NIC driver messages (parsers/nic_log.py codes): status, operator action, what it means, what to do.
# NVSentinel's pattern table classifies them (fatal: REPLACE_VM; non-fatal: NONE, an event).
_REPLACE = ("Drain the node and replace it (or its NIC): reboot first where the host is yours; the adapter stopped "
            "answering its driver, so collectives over it hang or fail.")
NIC_VERDICTS: dict[str, tuple[Status, Action, str, str]] = {
    "efa_admin_cmd_timeout": (Status.FAIL, Action.ISOLATE_NODE,
                              "an EFA device did not complete an admin command (firmware unresponsive)", _REPLACE),
    "efa_admin_queue_closed": (Status.FAIL, Action.ISOLATE_NODE,
                               "an EFA device's admin queue is closed (unusable until reset)", _REPLACE),
    "efa_device_reset_failed": (Status.FAIL, Action.ISOLATE_NODE, "an EFA device could not be reset", _REPLACE),
    "efa_device_not_ready": (Status.FAIL, Action.ISOLATE_NODE,
                             "an EFA device was not ready when its driver initialised it", _REPLACE),
    "efa_admin_cmd_failed": (Status.WARN, Action.MONITOR, "an EFA admin command failed",
                             "Watch for repeats: a one-off failed command (a queue pair the job asked for) is an "
                             "event; repeats with the job's EFA errors point at the device."),
    "mlx5_cmd_timeout": (Status.FAIL, Action.ISOLATE_NODE,
                         "a ConnectX command timed out (firmware/driver control plane broken)", _REPLACE),
    "mlx5_health_compromised": (Status.FAIL, Action.ISOLATE_NODE,
                                "a ConnectX adapter missed its health heartbeats", _REPLACE),
    "mlx5_unrecoverable": (Status.FAIL, Action.ISOLATE_NODE, "a ConnectX adapter reported an unrecoverable error",
                           _REPLACE),
    "mlx5_tx_timeout": (Status.WARN, Action.MONITOR, "a ConnectX transmit queue timed out (the driver recovers)",
                        "Watch for repeats on the same port; check the cable and switch port if they recur."),
    "mlx5_rx_timeout": (Status.WARN, Action.MONITOR, "a ConnectX receive channel timed out (the driver recovers)",
                        "Watch for repeats on the same port; check the cable and switch port if they recur."),
    "mlx5_module_high_temp": (Status.WARN, Action.CHECK_MECHANICALS, "a ConnectX port's transceiver is too hot",
                              "Check the transceiver's airflow and seating; replace it if it stays hot."),
    "mlx5_module_unplugged": (Status.WARN, Action.CHECK_MECHANICALS, "a ConnectX port's cable was unplugged",
                              "If the port carries the job's traffic, reseat or replace the cable."),
    "mlx5_pcie_power": (Status.WARN, Action.CHECK_MECHANICALS, "a ConnectX adapter's PCIe slot gives too little power",
                        "Check the slot and riser: the adapter may throttle or fail under load."),
    "mlx5_probe_failed": (Status.FAIL, Action.ISOLATE_NODE,
                          "a ConnectX adapter's driver failed to bring it up (probe/load failed): the NIC is unusable",
                          "Match the mlx5_core driver (OFED or inbox) and the adapter's firmware, then reload the "
                          "driver or reboot; keep the node out of multi-node jobs until the adapter loads."),
    "mlx5_link_down": (Status.WARN, Action.CHECK_MECHANICALS, "a ConnectX Ethernet/RoCE port's link went down",
                       "If the port carries the job's traffic, check its cable, transceiver and switch port "
                       "(ethtool, the switch log); repeats mean a flapping link."),
    "peermem_invalid_context": (Status.WARN, Action.MONITOR,
                                "nvidia-peermem could not free a GPUDirect RDMA mapping (invalid context)",
                                "A GPU-NIC communication problem may be building up: watch for repeats and for NCCL "
                                "errors in the job, and restart nvidia-peermem (or reboot) if they persist."),
    "peermem_invalid_page_table": (Status.WARN, Action.MONITOR,
                                   "nv_peer_mem freed a GPUDirect RDMA mapping under an invalid page table, a known "
                                   "GPU driver bug",
                                   "Upgrade the GPU driver (R510 or later, or an R470 from mid-2021 on): the fix is "
                                   "in the driver; until then GPUDirect RDMA transfers may fail."),
}
"""Fatal NIC messages mean the adapter stopped answering its driver: NVSentinel's REPLACE_VM, our
isolate. The others are events a healthy node also logs now and then: a look, not a drain."""
KERNEL_NIC = declare(
    "kernel.nic", "No RDMA NIC driver failed",
    """A saved kernel log holds an RDMA NIC driver message (EFA, ConnectX ``mlx5_core``,
    ``nvidia-peermem``): FAIL when the device stopped answering its driver (admin queue closed,
    command timeout, not ready, unrecoverable error, lost heartbeat) or the driver could not bring
    it up (probe failed), WARN for events worth a look (a failed admin command, a TX/RX timeout the
    driver recovers from, a port whose link went down, a hot or unplugged transceiver, GPUDirect
    RDMA invalid-context or invalid page_table errors). Messages older than the Xid window are
    counted, not judged.""",
    group="efa_network", component="network_infrastructure", settings=("xid.window_hours",),
    actions={code: action for code, (_, action, _, _) in NIC_VERDICTS.items()})
LINK_FLAP_ACTIONS = {"ib_link_flap": Action.CHECK_MECHANICALS, "link_flap": Action.CHECK_MECHANICALS}
"""A link that loses its carrier is a cable, transceiver or switch-port fault until shown otherwise."""
KERNEL_LINK_FLAP = declare(
    "kernel.link_flap", "No network link lost its carrier",
    """A saved syslog or journal shows ``<interface>: Lost carrier``: FAIL on an InfiniBand
    interface (``ib0``, ``ibp…``: a rail of the fabric between nodes went down, and NCCL's
    connections over it break; Azure's health check and Meta's gcm fail a node for it), WARN on
    any other physical interface (it may be a management link). Container and bridge ends
    (``veth``, ``cali``, ``docker``...) come and go with pods and are not judged; losses older
    than the Xid window are counted, not judged.""",
    group="efa_network", component="network_infrastructure", settings=("xid.window_hours",),
    actions=LINK_FLAP_ACTIONS)
_GPU_CLASSES = ("3D controller", "VGA compatible controller", "Display controller")


@judges("fi-info")
def judge_fi_info(record: FiInfoRecord, config: Config, source: str) -> Iterator[Finding]:
    """Does libfabric offer the provider the job will use?"""
    minimum = evidence_config(config).fi_info_min_entries
    if record.provider_list and not record.providers and record.error_code is None:
        listed = ", ".join(p.provider for p in record.provider_list)
        yield Finding("fabric.fi_info", Status.SKIP, source, "provider_list",
                      f"fi_info -l lists the {len(record.provider_list)} provider(s) libfabric has ({listed[:200]}), "
                      "not the endpoints a device offers: not judged", observed=len(record.provider_list),
                      unit="providers", recommendation="Run `fi_info -p <provider>` (e.g. efa, verbs) to judge it.")
        return
    names = sorted({p.provider for p in record.providers})
    domains = sorted({p.domain for p in record.providers if p.domain})
    if len(record.providers) < minimum:
        reason = (f"fi_getinfo {record.error_code}" + (f" ({record.error})" if record.error else "")
                  if record.error_code is not None else "no provider entry")
        yield Finding("fabric.fi_info", Status.FAIL, source, "no_provider",
                      f"libfabric lists {len(record.providers)} provider entr(y/ies), needs {minimum}: {reason}",
                      observed=len(record.providers), expected=f">= {minimum}", unit="entries",
                      details={"error_code": record.error_code, "providers": names},
                      recommendation="Install the fabric's libfabric provider and driver (EFA: the EFA installer; "
                                     "check `fi_info -p efa`, /sys/class/infiniband and FI_PROVIDER).")
        return
    yield Finding("fabric.fi_info", Status.PASS, source, "ok",
                  f"{len(record.providers)} entr(y/ies): provider {', '.join(names)}; domain {', '.join(domains)}",
                  observed=len(record.providers), expected=f">= {minimum}", unit="entries",
                  details={"providers": names, "domains": domains})


@judges("fi-pingpong")
def judge_pingpong(record: PingpongRecord, config: Config, source: str) -> Iterator[Finding]:
    """Did a fi_pingpong exchange complete, and fast enough at its largest size?"""
    floor = evidence_config(config).pingpong_min_mb_per_s
    if not record.rows:
        yield Finding("fabric.pingpong", Status.FAIL, source, "pingpong_failed",
                      f"fi_pingpong did not complete: {'; '.join(record.errors)[:300]}",
                      recommendation="Check that both ends use the same provider and endpoint type, that the server "
                                     "was reachable, and the provider's own error above.")
        return
    if record.errors:  # rows for the sizes it finished, then the error that stopped it
        yield Finding("fabric.pingpong", Status.FAIL, source, "pingpong_failed",
                      f"fi_pingpong failed after {len(record.rows)} size(s): {'; '.join(record.errors)[:300]}",
                      recommendation="The exchange stopped on an error (a completion error, corrupted data, a "
                                     "timeout): check the provider's error above, the link and the remote host.")
        return
    largest = max(record.rows, key=lambda r: r.size_bytes)
    observed = largest.mb_per_s
    what = f"fi_pingpong {len(record.rows)} size(s), {observed:g} MB/s at {largest.size_bytes} B" \
        if observed is not None else f"fi_pingpong {len(record.rows)} size(s)"
    if floor is not None and (observed is None or observed < floor):
        yield Finding("fabric.pingpong", Status.FAIL, source, "bandwidth_low", f"{what}, below {floor:g} MB/s",
                      observed=observed, expected=f">= {floor:g}", unit="MB/s",
                      recommendation="Check the provider in use (FI_PROVIDER) and the link between the two hosts.")
    else:
        yield Finding("fabric.pingpong", Status.PASS, source, "ok", what, observed=observed,
                      expected=f">= {floor:g}" if floor is not None else None, unit="MB/s")


def _netdev_down(device: str, port: IbPort, subject: str) -> Finding:
    """A port whose interface ``ibdev2netdev`` shows Down: no carrier, or an interface that is down or unconfigured
    (an unused IPoIB interface reads Down on a healthy IB port). The port's own state is not in the text, so this
    WARNs and never FAILs: ``ibstat`` or ``ibdev2netdev -v`` shows whether the link itself is down."""
    return Finding("ib.ports", Status.WARN, subject, "netdev_down",
                   f"{device} port {port.port}: its interface {port.netdev} is Down (no carrier, or the interface "
                   "is down); the port's own state is not shown", observed="Down", expected="Up",
                   recommendation="Run ibstat (or ibdev2netdev -v) for the port's state: a port that is not ACTIVE "
                                  "is a cable or switch port (IB: also the subnet manager; an SR-IOV VF: its link "
                                  "state); an ACTIVE port whose interface is down only lacks its IP configuration.")


def _guid_unset(device: IbDevice) -> bool:
    """A node GUID of zeros on an InfiniBand or RoCE device: one never given its identity (an SR-IOV virtual
    function the operator or firmware did not assign a GUID), which RDMA CM and verbs' memory registration fail
    on (k8snetworkplumbingwg/sriov-network-operator#267, sriov-network-device-plugin#20 and #590). EFA reports
    a zero node GUID by design (its link layer is ``Unknown``): not this fault."""
    digits = re.sub(r"[^0-9a-fA-F]", "", (device.node_guid or "").removeprefix("0x"))
    efa = device.name.startswith(EFA_NAMES) or any((p.link_layer or "").lower() == "unknown"
                                                             for p in device.ports)
    return len(digits) >= 12 and set(digits) == {"0"} and not efa


@judges("ibstat", "ibstatus", "ibv-devinfo", "ibdev2netdev", "rdma-link", "ibv-devices", "ibportstate",
        "mlxlink")
def judge_ib_ports(record: IbDevicesRecord, config: Config, source: str) -> Iterator[Finding]:
    """Every IB/RoCE port up, at its rate, and as many as the node should have."""
    cfg = evidence_config(config)
    flagged = False
    for error in record.errors:
        flagged = True
        yield Finding("ib.ports", Status.FAIL, source, "device_error", f"{record.format}: {error}",
                      recommendation="An HCA disappeared or cannot be read: check dmesg for mlx5 errors, "
                                     "reseat/reset the adapter, drain the node.")
    for device in record.devices:
        if _guid_unset(device):
            flagged = True
            yield Finding("ib.ports", Status.FAIL, f"{source}/{device.name}", "guid_unset",
                          f"{device.name}: node GUID {device.node_guid} (never assigned): RDMA CM and memory "
                          "registration fail on it", observed=device.node_guid, expected="a non-zero GUID",
                          recommendation="Give the device its GUID: for an SR-IOV virtual function set the VF's node "
                                         "and port GUID (ip link set <pf> vf <n> node_guid/port_guid, or the SR-IOV "
                                         "operator) and rebind its driver.")
    if record.format in ("ibv_devices", "ibv_devinfo -l") and record.devices and not flagged:
        guids = " with their GUIDs" if record.format == "ibv_devices" else ""
        yield Finding("ib.ports", Status.SKIP, source, "no_port_state",
                      f"{record.format} lists {len(record.devices)} device(s){guids} and no port state: "
                      "the ports are not judged", observed=len(record.devices), unit="devices")
        return
    active, rates = [], []
    rails = rail_sets(record)
    for device in record.devices:
        for port in device.ports:
            subject = f"{source}/{device.name}/port{port.port}"
            state = f"{port.state or '?'}/{port.physical_state or '?'}"
            if port.state is None and port.carrier is not None:  # plain ibdev2netdev: the interface's carrier only
                if port.carrier:
                    active.append(f"{device.name}/{port.port}")
                    continue
                flagged = True
                yield _netdev_down(device.name, port, subject)
                continue
            if port.state is None and port.physical_state in ("LINKUP", None):
                continue  # its state not shown (a cut block, a quoted line): not a pass, not a port down either
            if port.state == "ACTIVE" and port.physical_state in ("LINKUP", None):
                active.append(f"{device.name}/{port.port}")
                if port.rate_gbps is not None:
                    rates.append(port.rate_gbps)
                if cfg.ib_min_rate_gbps is not None and port.rate_gbps is not None \
                        and port.rate_gbps < cfg.ib_min_rate_gbps:
                    flagged = True
                    yield Finding("ib.ports", Status.WARN, subject, "rate_low",
                                  f"{device.name} port {port.port}: {port.rate_gbps:g} Gb/s, "
                                  f"expected >= {cfg.ib_min_rate_gbps:g}", observed=port.rate_gbps,
                                  expected=f">= {cfg.ib_min_rate_gbps:g}", unit="Gb/s",
                                  recommendation="The link trained below its rate: check the cable and switch port.")
                continue
            flagged = True
            # Polling is InfiniBand link training with no peer (a RoCE port that is down shows Disabled):
            # a cabled IB port without a link, whatever link layer the text shows.
            infiniband = (port.link_layer or "").lower() == "infiniband" or port.physical_state == "POLLING"
            rail = rails.get(device.ca_type or "")
            missing_rail = f"; {rail[0]} of the {rail[1]} {device.ca_type} ports are active: a rail is missing" \
                if rail else ""
            yield Finding("ib.ports", Status.FAIL if infiniband or rail else Status.WARN, subject, "port_down",
                          f"{device.name} port {port.port} ({port.link_layer or 'unknown link layer'}) is {state}"
                          f"{missing_rail}",
                          observed=state, expected="ACTIVE/LINKUP",
                          recommendation="Check the cable, the switch port and the subnet manager (IB) or the "
                                         "switch config (RoCE); a port that is meant to be unused can be ignored.")
    for finding in hca_missing_findings(record, config, source):
        flagged = True
        yield finding
    if record.format == "mlxlink" and not flagged and not active:
        yield Finding("ib.ports", Status.SKIP, source, "no_port_state",
                      "mlxlink shows the physical link up (State: Active), not the InfiniBand port's logical state "
                      "(Init until a subnet manager brings it Active): the port is not judged",
                      recommendation="Run ibstat (or rdma link) for the port's state.")
        return
    expected = cfg.ib_expected_ports
    if expected is not None and len(active) < expected:
        flagged = True
        yield Finding("ib.ports", Status.FAIL, source, "ports_missing",
                      f"{len(active)} active port(s), expected {expected}", observed=len(active), expected=expected,
                      unit="ports", recommendation="Drain the node: it cannot reach its full fabric bandwidth.")
    if not flagged:
        yield Finding("ib.ports", Status.PASS, source, "ok",
                      f"{len(active)} port(s) active" + (f" at {', '.join(f'{r:g}' for r in sorted(set(rates)))} Gb/s"
                                                         if rates else ""),
                      observed=len(active), expected=expected, unit="ports", details={"active": active})


def judge_kernel_network(record: DmesgRecord, window: XidWindow, source: str) -> Iterator[Finding]:
    """``kernel.nic`` and ``kernel.link_flap`` findings of a saved kernel log (called by its judge)."""
    start = window.start
    recent, _ = in_window(record.nic_messages, start)
    groups: dict[tuple[str, str | None], list[str]] = {}
    for message in recent:
        groups.setdefault((message.code, message.device), []).append(message.message)
    for (code, device), texts in groups.items():
        status, _, what, advice = NIC_VERDICTS[code]
        subject = f"{source}/{device}" if device else source
        yield Finding("kernel.nic", status, subject, code,
                      f"{what}: {texts[0][:160]}" + (f" ({len(texts)} times)" if len(texts) > 1 else ""),
                      observed=len(texts), unit="messages", recommendation=advice,
                      details={"examples": texts[:3], "window": window.describe()})
    if older := len(record.nic_messages) - len(recent):
        yield Finding("kernel.nic", Status.PASS, source, "older",
                      f"{older} NIC driver message(s) before {window.describe()}: not judged", observed=older)
    for changes in record.carrier:
        if not changes.lost:
            continue
        if start is not None and changes.last_lost is not None and datetime.fromisoformat(changes.last_lost) < start:
            yield Finding("kernel.link_flap", Status.PASS, f"{source}/{changes.interface}", "older",
                          f"{changes.interface}: lost its carrier {changes.lost} time(s) before "
                          f"{window.describe()}: not judged", observed=changes.lost)
            continue
        infiniband = changes.link == "infiniband"
        regained = f", regained {changes.gained}" if changes.gained else ", not regained in the log"
        yield Finding("kernel.link_flap", Status.FAIL if infiniband else Status.WARN, f"{source}/{changes.interface}",
                      "ib_link_flap" if infiniband else "link_flap",
                      f"{changes.interface} ({'InfiniBand' if infiniband else 'network'} link) lost its carrier "
                      f"{changes.lost} time(s){regained}", observed=changes.lost, expected=0, unit="flaps",
                      details={"gained": changes.gained, "first": changes.first_lost, "last": changes.last_lost},
                      recommendation="Check the cable, transceiver and switch port of this link (ibstat, the switch "
                                     "log); drain the node if an InfiniBand rail keeps flapping.")


@judges("perfquery")
def judge_perfquery(record: PerfqueryRecord, config: Config, source: str) -> Iterator[Finding]:
    """A saved ``perfquery``: its error counters against the ``ib.counters`` limits, as totals.

    The live check judges increases during a run; a saved text holds only totals since the counters were
    last cleared, which cannot say whether the errors are recent. So a counter above its limit
    (``diagnostics.ib_counters_fail_above`` or ``ib_counters_warn_above``) WARNs, naming the total, and never
    FAILs; a port whose error counters are all within their limits PASSes."""
    cfg = diagnostics_config(config)
    limits = {**cfg.ib_counters_warn_above, **cfg.ib_counters_fail_above}
    for error in record.errors:  # a port it could not open or query: no counter read there, so not a pass
        yield Finding("ib.counters", Status.ERROR, source, "counters_unreadable", f"not read: {error}"[:300],
                      recommendation="Check the LID and port asked for (ibstat), that the port is ACTIVE, and that "
                                     "ib_umad is loaded; then read the counters again.")
    if record.errors and not record.blocks and record.ports_checked is None:
        return
    flagged = False
    for block in record.blocks:
        port = (f"lid {block.lid} port {block.port}" if block.lid is not None
                else f"guid {block.guid} port {'ALL' if block.port is None else block.port}" if block.guid
                else "port (header not pasted)")
        subject = f"{source}/{port.replace(' ', '')}"
        for name, limit in sorted(limits.items()):
            total = block.counters.get(name)
            if total is None or total <= limit:
                continue
            flagged = True
            yield Finding("ib.counters", Status.WARN, subject, name,
                          f"{port}: {name} is {total} since the counters were last cleared (limit {limit} per run)",
                          observed=total, expected=f"<= {limit}", unit="errors",
                          details=with_action({"total": total}, Action.CHECK_MECHANICALS),
                          recommendation="A total, not a rate: clear the counters (perfquery -R), run the job or "
                                         "ib_write_bw, and read them again; errors that come back are a link that "
                                         "flaps or corrupts packets (cable, switch port).")
    if not flagged and not record.blocks and record.ports_checked is not None:
        # ibqueryerrors' summary alone: it lists only ports over its own thresholds, so none listed is its verdict
        clean = record.ports_over_threshold == 0
        yield Finding("ib.counters", Status.PASS if clean else Status.ERROR, source, "ok" if clean else "incomplete",
                      f"ibqueryerrors: {record.ports_checked} port(s) checked, none with errors beyond its thresholds"
                      if clean else f"ibqueryerrors counts {record.ports_over_threshold} port(s) with errors beyond "
                      "its thresholds but their lines are not in the text",
                      observed=record.ports_over_threshold, expected=0, unit="ports",
                      recommendation="" if clean else "Paste ibqueryerrors' whole output: its port lines name the "
                                                      "counters.")
        return
    if not flagged:
        judged = sorted({name for block in record.blocks for name in block.counters if name in limits})
        yield Finding("ib.counters", Status.PASS if judged else Status.SKIP, source, "ok" if judged else "no_counters",
                      f"{len(record.blocks)} port(s): none of {len(judged)} error counter(s) over its limit since "
                      "the counters were last cleared" if judged else "no error counter in the text to judge",
                      observed=len(record.blocks), unit="ports", details={"counters": judged})


@judges("show-gids")
def judge_gids(record: GidTableRecord, config: Config, source: str) -> Iterator[Finding]:
    """Does each port have a GID its transport can use? (see :data:`IB_GIDS`)"""
    del config
    if not record.entries:
        yield Finding("ib.gids", Status.FAIL, source, "no_gids",
                      "show_gids lists no GID" + (f" (n_gids_found={record.found})" if record.found is not None
                                                  else ""), observed=0, unit="GIDs",
                      recommendation="No address reaches the RDMA device: give its netdev an IP (in a pod, a CNI "
                                     "that attaches the RDMA device's interface: SR-IOV, macvlan or host-device), "
                                     "then check show_gids again.")
        return
    ports: dict[tuple[str, int], list[GidEntry]] = {}
    for entry in record.entries:
        ports.setdefault((entry.device, entry.port), []).append(entry)
    last = (record.entries[-1].device, record.entries[-1].port)
    flagged = False
    for (device, port), entries in ports.items():
        if record.incomplete and (device, port) == last:
            continue  # the listing may be cut inside it (evidence.complete says so)
        netdevs = {e.netdev for e in entries}
        if all(n is None or n.startswith("ib") for n in netdevs):
            continue  # InfiniBand: its GIDs are the subnet prefix and port GUID
        if any(e.version == "v2" and (e.ipv4 or not e.gid.startswith("fe80:")) for e in entries):
            continue
        flagged = True
        typed = any(e.version for e in entries)  # show_gids prints no version where gid_attrs/types is unread
        why = ("with an IPv4 or routable IPv6 address (only link-local ones), so RoCE v2 reaches only its own L2 "
               "segment") if typed else \
            "known: show_gids shows no RoCE version for its GIDs (the kernel's gid_attrs/types not read)"
        yield Finding("ib.gids", Status.WARN, f"{source}/{device}/port{port}", "no_routable_v2_gid",
                      f"{device} port {port}: no RoCE v2 GID {why}", observed=len(entries),
                      unit="GIDs", recommendation="Give the interface an IP address; set NCCL_IB_GID_INDEX to the "
                                                  "v2 GID of that address if NCCL does not pick it."
                      if typed else "Read the GID types (cat /sys/class/infiniband/<dev>/"
                      "ports/<port>/gid_attrs/types/<index>); a kernel without them has no RoCE v2.")
    if not flagged:
        yield Finding("ib.gids", Status.PASS, source, "ok",
                      f"{len(ports)} port(s) with GIDs ({len(record.entries)} listed)", observed=len(ports),
                      unit="ports")


@judges("perftest")
def judge_perftest(record: PerftestRecord, config: Config, source: str) -> Iterator[Finding]:
    """A perftest run: did it connect, and did its bandwidth reach the floor? (A latency run measured no
    bandwidth: SKIP, with its latency.)"""
    floor = evidence_config(config).perftest_min_bw_gbps
    if not record.rows and not record.errors:  # cut before its table: evidence.complete says so (ERROR)
        yield Finding("ib.perftest", Status.SKIP, source, "no_result",
                      f"{record.test or 'perftest'} on {record.device or '?'}: no result row to judge")
        return
    if not record.rows:
        yield Finding("ib.perftest", Status.FAIL, source, "perftest_failed",
                      f"perftest did not measure: {'; '.join(record.errors)[:300]}",
                      recommendation="The two ends could not connect: check the server is running, the device "
                                     "and GID index (-d, -x), and that the ports are ACTIVE.")
        return
    if record.errors:  # rows for the sizes it finished, then its failure (a -a run whose completion failed at a size)
        yield Finding("ib.perftest", Status.FAIL, source, "perftest_failed",
                      f"perftest failed after {len(record.rows)} message size(s): {'; '.join(record.errors)[:300]}",
                      recommendation="The run stopped on an error: a completion error (retry exceeded, remote access) "
                                     "points at the link or the remote side; check both ports (ibstat) and the "
                                     "counters (perfquery).")
        return
    latencies = [r.latency_usec for r in record.rows if r.latency_usec is not None]
    if record.bw_avg_max_gbps is None and latencies:  # a latency test measured: no bandwidth to hold to a floor
        yield Finding("ib.perftest", Status.SKIP, source, "latency_run",
                      f"{record.test or 'perftest latency test'} on {record.device or '?'} "
                      f"({record.connection_type or '?'}): latency {min(latencies):g} usec; no bandwidth "
                      "to judge (run ib_*_bw for the floor)", observed=min(latencies), unit="usec",
                      details={"warnings": record.warnings})
        return
    best = record.bw_avg_max_gbps
    what = (f"{record.test or 'perftest'} on {record.device or '?'} ({record.connection_type or '?'}): "
            f"best average {best:g} Gb/s, peak {record.bw_peak_max_gbps:g} Gb/s"
            if best is not None and record.bw_peak_max_gbps is not None else f"{record.test or 'perftest'}")
    details = {"unit_printed": record.bw_unit, "warnings": record.warnings}
    if floor is None:
        yield Finding("ib.perftest", Status.SKIP, source, "no_floor",
                      f"{what}; not judged: set evidence.perftest_min_bw_gbps", observed=best, unit="Gb/s",
                      details=details)
    elif best is None or best < floor:
        yield Finding("ib.perftest", Status.FAIL, source, "bandwidth_low", f"{what}, below {floor:g} Gb/s",
                      observed=best, expected=f">= {floor:g}", unit="Gb/s", details=details,
                      recommendation="Check the port rate (ibstat), PCIe link of the HCA (lspci -vvv), and NUMA "
                                     "placement of the test process.")
    else:
        yield Finding("ib.perftest", Status.PASS, source, "ok", what, observed=best, expected=f">= {floor:g}",
                      unit="Gb/s", details=details)


@judges("lspci")
def judge_lspci(record: LspciRecord, config: Config, source: str) -> Iterator[Finding]:
    """PCIe links trained below their capability (``lspci -vvv``); devices that do not answer, capabilities
    lspci could not read and AER's uncorrectable status (:mod:`.evidence_pcie`)."""
    yield from device_findings(record, source)
    linked = [d for d in record.devices if d.downgraded is not None]
    if not linked:
        if any(d.capabilities_denied or d.config_unreadable for d in record.devices):
            return  # said above: an ERROR (not root) or a FAIL (the device does not answer)
        yield Finding("pcie.lnksta", Status.SKIP, source, "no_link_status",
                      f"{len(record.devices)} device(s) listed without a link status to judge (LnkSta against "
                      "LnkCap): capture `lspci -vvv` (as root) to judge PCIe links",
                      details={"devices": len(record.devices)})
        return
    flagged = False
    for device in linked:
        finding = _link_finding(device, source)
        if finding is not None:
            flagged = flagged or finding.status is not Status.PASS
            yield finding
    if not flagged:
        slow = [d for d in linked if d.speed_downgraded]
        yield Finding("pcie.lnksta", Status.PASS, source, "ok",
                      f"{len(linked)} PCIe link(s) at full width" + (
                          "" if not slow else " (idle GPUs at reduced speed, not judged)"
                          if all(d.device_class for d in slow) else
                          " (reduced speed of a device whose class is not shown, not judged)"),
                      observed=len(linked), unit="links")


def _link_finding(device: PciDevice, source: str) -> Finding | None:
    subject = f"{source}/{device.address}"
    link = (f"{device.name}: {device.sta_speed_gts:g} GT/s x{device.sta_width}, "
            f"capable of {device.cap_speed_gts:g} GT/s x{device.cap_width}"
            if None not in (device.sta_speed_gts, device.sta_width, device.cap_speed_gts, device.cap_width)
            else device.name)
    details = {"address": device.address, "class": device.device_class, "cap_speed_gts": device.cap_speed_gts,
               "cap_width": device.cap_width, "sta_speed_gts": device.sta_speed_gts, "sta_width": device.sta_width}
    if device.width_downgraded:
        return Finding("pcie.lnksta", Status.FAIL, subject, "width_downgraded", f"{device.address} {link}",
                       observed=device.sta_width, expected=device.cap_width, unit="lanes", details=details,
                       recommendation="A link trained narrower than it can: reseat the card or riser, check the "
                                      "slot; bandwidth to this device is cut proportionally.")
    # Speed is judged for a device shown not to be a GPU (idle GPUs drop to 2.5 GT/s); a fragment that
    # does not show the device line does not say which it is, and nothing is assumed.
    if device.speed_downgraded and device.device_class and not (
            device.device_class.startswith(_GPU_CLASSES) or (device.class_id or "").startswith("03")):  # -n: 0302
        return Finding("pcie.lnksta", Status.WARN, subject, "speed_downgraded", f"{device.address} {link}",
                       observed=device.sta_speed_gts, expected=device.cap_speed_gts, unit="GT/s", details=details,
                       recommendation="The link trained at a lower generation: check the slot/switch generation "
                                      "and BIOS PCIe settings (`dmesg | grep 'limited by'`).")
    return None
