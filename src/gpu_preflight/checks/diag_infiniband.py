"""InfiniBand / RoCE / EFA ports of this node: state and rate (``ib.ports``), error counters (``ib.counters``)."""

from __future__ import annotations

import copy
from collections.abc import Iterator

from ..actions import Action, with_action
from ..config.diagnostics import diagnostics_config
from ..config.evidence import evidence_config
from ..model import Finding, Status
from ..records.tools import InfinibandFacts
from ..registry import CheckContext, check
from .evidence import judge_record
from .ib_rails import HCA_MISSING
from .verdicts import not_run, unreadable

IB_PORT_ACTIONS = {"port_down": Action.CHECK_MECHANICALS, "netdev_down": Action.CHECK_MECHANICALS,
                   "rate_low": Action.CHECK_MECHANICALS,
                   "ports_missing": Action.CHECK_MECHANICALS, "device_error": Action.REBOOT_NODE,
                   HCA_MISSING: Action.ISOLATE_NODE}
"""A port down, trained below its rate or missing is a cable, transceiver or switch port (NVIDIA's
CHECK_MECHANICALS; a rail's port that is down FAILs, and the fix is still at the cable); an HCA the
tools cannot read any more has fallen out of its driver, which a reboot reloads. A rail adapter that
is not there at all (:mod:`.ib_rails`) is hardware that has to come back or be replaced: the node
stays out until it is (isolate). Also applied to saved ibstat/ibstatus/ibv_devinfo output."""


@check("ib.ports", needs=("infiniband",), tags=("diagnostics",),
       group="efa_network", component="network_infrastructure", actions=IB_PORT_ACTIONS)
def ports(ctx: CheckContext) -> Iterator[Finding]:
    """Every RDMA port is up at its rate, and the node has as many as it should.

    Reads ``/sys/class/infiniband`` (``diagnostics.infiniband_sysfs``) — what ``ibstat``
    shows, without needing it — and applies the ``ibstat`` rules: FAIL for an InfiniBand
    port not ACTIVE/LinkUp (WARN for an Ethernet/RoCE or EFA port, which may be an unused
    NIC, unless most of its adapter model's ports are up: a missing rail), for a missing rail
    adapter (fewer adapters of the rail model than the profile's ``perf.network_nics_per_node``
    while more than half are there, or one listed without a port: ``hca_missing``, isolate) and
    for fewer active ports than ``evidence.ib_expected_ports``; WARN for an active port below
    ``evidence.ib_min_rate_gbps``. ``ibstat``/``ibv_devinfo`` run when installed:
    their output is kept, and a device they cannot read (``ibpanic``) FAILs. SKIP on a node
    without RDMA devices unless ports are expected.
    """
    facts: InfinibandFacts = ctx.fact("infiniband")
    if not facts.readable:
        status = Status.SKIP if facts.reason and facts.reason.startswith("replayed") else Status.ERROR
        yield ctx.finding(status, ctx.host, "not_read", f"RDMA ports not read: {facts.reason}")
        return
    expected = evidence_config(ctx.config).ib_expected_ports
    if not facts.devices and not expected:
        yield ctx.finding(Status.SKIP, ctx.host, "no_devices", f"no RDMA device: {facts.reason}",
                          details={"root": facts.root})
        return
    record = copy.deepcopy(facts.ports) if facts.ports is not None else None
    if record is None:
        from ..records.fabric import IbDevicesRecord

        record = IbDevicesRecord(format="sysfs")
    for tool in facts.tools:
        if (finding := not_run(ctx.check_id, f"{ctx.host}/{tool.name}", tool.run)) is not None:
            yield finding
        elif tool.record is not None:
            record.errors.extend(f"{tool.name}: {e}" for e in tool.record.errors)
        elif tool.run.rc != 0:
            yield unreadable(ctx.check_id, f"{ctx.host}/{tool.name}", tool.run, tool.parse_error)
    for finding in judge_record("ibstat", record, ctx.config, source=ctx.host):
        finding.details.setdefault("source", f"sysfs {facts.root}")
        yield finding


COUNTER_ACTION = Action.CHECK_MECHANICALS
"""Every counter over its limit is a link that flaps or corrupts packets: cable and switch port
(the finding's advice). The codes are the counter names the configuration lists, so the one action
is named where the finding is made rather than in a table of codes; a counter that went down
(reset, driver reload) names none."""


@check("ib.counters", needs=("infiniband",), tags=("diagnostics",),
       group="efa_network", component="network_infrastructure")
def counters(ctx: CheckContext) -> Iterator[Finding]:
    """No RDMA port's error counters rose during the run.

    The port counters (``counters/`` and ``hw_counters/`` in sysfs) are read when the run
    starts and again after its heavy tools (DCGM, nccl-tests) finish, at least
    ``diagnostics.ib_counter_min_window_s`` apart. An increase above
    ``diagnostics.ib_counters_fail_above`` (default: any ``link_downed``, a link that
    flapped) FAILs; above ``diagnostics.ib_counters_warn_above`` (symbol errors, receive
    errors, link recoveries, discards) WARNs. Lifetime totals are reported in the details
    but not judged: they cannot say whether the errors are recent. A counter that went
    down (reset, driver reload) is reported, not judged. SKIP without RDMA devices.
    """
    facts: InfinibandFacts = ctx.fact("infiniband")
    if not facts.devices:
        yield ctx.finding(Status.SKIP, ctx.host, "no_devices",
                          f"no RDMA port counters to read: {facts.reason or 'no device'}")
        return
    if not facts.counters_end:
        yield ctx.finding(Status.SKIP, ctx.host, "no_counters",
                          f"{len(facts.devices)} RDMA device(s) but no readable port counters under {facts.root}")
        return
    cfg = diagnostics_config(ctx.config)
    flagged, judged = False, 0
    for port in sorted(facts.counters_end):
        start, end = facts.counters_start.get(port, {}), facts.counters_end[port]
        subject = f"{ctx.host}/{port.replace('/', '/port')}"
        deltas = {name: end[name] - start[name] for name in end if name in start}
        judged += 1
        reset = sorted(name for name, d in deltas.items() if d < 0)
        if reset:
            flagged = True
            yield ctx.finding(Status.WARN, subject, "counter_reset",
                              f"counter(s) went down during the run (reset or driver reload): {', '.join(reset)}",
                              details={"start": start, "end": end})
        for limits, status in ((cfg.ib_counters_fail_above, Status.FAIL), (cfg.ib_counters_warn_above, Status.WARN)):
            over = {name: deltas[name] for name, limit in limits.items()
                    if name in deltas and deltas[name] > limit}
            if status is Status.WARN:
                over = {k: v for k, v in over.items() if k not in cfg.ib_counters_fail_above
                        or v <= cfg.ib_counters_fail_above[k]}
            for name, delta in sorted(over.items()):
                flagged = True
                yield ctx.finding(status, subject, name,
                                  f"{port} {name} rose by {delta} in {facts.window_s:g} s (total {end[name]})",
                                  observed=delta, expected=f"<= {limits[name]}", unit="errors",
                                  details=with_action({"window_s": facts.window_s, "total": end[name]},
                                                      COUNTER_ACTION),
                                  recommendation="A link that flaps or corrupts packets under load: check the cable "
                                                 "and switch port (mlxlink, ibdiagnet), reseat or replace; drain the "
                                                 "node if it repeats.")
    if not flagged:
        yield ctx.finding(Status.PASS, ctx.host, "ok",
                          f"{judged} port(s): no error counter rose over {facts.window_s:g} s",
                          observed=judged, unit="ports", details={"window_s": facts.window_s,
                                                                  "totals": facts.counters_end})
