"""The node's fabric as a job would see it: libfabric's provider, EFA devices, NCCL's net plugin.

Operator actions (:data:`EFA_ACTIONS`): an EFA device that is expected and missing isolates the
node; the rest are software and settings, which name none (docs/checks.md, "Operator actions").
"""

from __future__ import annotations

from collections.abc import Iterator

from ..actions import Action
from ..config.diagnostics import diagnostics_config
from ..model import Finding, Status
from ..records.tools import FabricFacts
from ..registry import CheckContext, check
from .evidence import judge_record
from .verdicts import not_run, unreadable

EFA = "efa"

EFA_ACTIONS = {"no_efa_device": Action.ISOLATE_NODE}
"""A node that should have EFA and lists no EFA device has lost its fabric NIC (an instance
launched without its EFA interfaces, or a device its driver no longer sees): no job spanning nodes
can use it at full speed until it is relaunched or repaired, so it stays out (isolate). A missing
NCCL net plugin or libfabric provider (``fabric.fi_info``'s ``no_provider``) is the software
stack, and ``FI_PROVIDER``/``NCCL_NET_PLUGIN`` are settings: like the stack checks, they name no
action (install or set them; nothing on the node is broken)."""


def efa_expected(ctx: CheckContext, facts: FabricFacts) -> bool:
    """``diagnostics.efa_expected`` when set; otherwise EFA is expected where an EFA device exists."""
    wanted = diagnostics_config(ctx.config).efa_expected
    return bool(facts.efa_devices) if wanted is None else wanted


@check("fabric.fi_info", needs=("fabric",), tags=("diagnostics",),
       group="efa_network", component="network_infrastructure")
def fi_info(ctx: CheckContext) -> Iterator[Finding]:
    """libfabric offers the provider the job will use (``fi_info -p efa``).

    Runs ``fi_info -p <diagnostics.fabric_provider>`` and keeps its output. A listing with
    at least ``evidence.fi_info_min_entries`` entries PASSes. No entry (``fi_getinfo: -61``,
    exit 61) FAILs where the provider is expected — a non-default provider, or EFA on a node
    with EFA devices or ``diagnostics.efa_expected = true`` — and is a SKIP (this node has
    no such fabric) elsewhere, and on a node without an EFA device ``fi_info -p efa`` is
    not even run (SKIP, saying so). SKIP when fi_info is not installed; ERROR when it hangs
    or prints nothing readable.
    """
    facts: FabricFacts = ctx.fact("fabric")
    if facts.fi_info is None and facts.reason is None:  # the probe asks libfabric only where EFA can be
        yield ctx.finding(Status.SKIP, ctx.host, "not_expected",
                          f"`fi_info -p {facts.provider}` not run: no EFA device in /sys/class/infiniband (set "
                          "diagnostics.efa_expected = true if it should have one)", observed=0,
                          details={"efa_devices": facts.efa_devices})
        return
    if facts.fi_info is None:
        yield ctx.finding(Status.SKIP, ctx.host, "not_run", f"fi_info not run: {facts.reason}")
        return
    if (finding := not_run(ctx.check_id, ctx.host, facts.fi_info)) is not None:
        yield finding
        return
    record = facts.fi_info_record
    if record is None:
        yield unreadable(ctx.check_id, ctx.host, facts.fi_info, facts.parse_error)
        return
    expected = facts.provider != EFA or efa_expected(ctx, facts)
    if not record.providers and not expected:
        code = f"fi_getinfo {record.error_code}" if record.error_code is not None else "no entry"
        yield ctx.finding(Status.SKIP, ctx.host, "no_provider",
                          f"no {facts.provider} provider on this node ({code}); not expected: no EFA device in "
                          f"/sys/class/infiniband (set diagnostics.efa_expected = true if it should have one)",
                          observed=0,
                          details={"error_code": record.error_code, "artifact": facts.fi_info.artifact_file})
        return
    for finding in judge_record("fi-info", record, ctx.config, source=ctx.host):
        finding.details.setdefault("provider", facts.provider)
        yield finding


@check("fabric.efa", needs=("fabric",), tags=("diagnostics",), group="efa_network", component="network_infrastructure",
       actions=EFA_ACTIONS)
def efa(ctx: CheckContext) -> Iterator[Finding]:
    """EFA devices are present and NCCL can load its network plugin (aws-ofi-nccl).

    Where EFA is expected (EFA devices in ``/sys/class/infiniband``, or
    ``diagnostics.efa_expected = true``): FAIL without an EFA device or without the
    aws-ofi-nccl plugin (``libnccl-net*.so`` in ``LD_LIBRARY_PATH`` or
    ``diagnostics.ofi_nccl_plugin_dirs``, or the library ``NCCL_NET_PLUGIN`` names) —
    NCCL would fall back to TCP sockets; WARN when ``FI_PROVIDER`` names another provider
    or ``NCCL_NET_PLUGIN=none`` switches plugins off. The ``NCCL_NET_PLUGIN``,
    ``FI_PROVIDER`` and the known ``FI_EFA_*``/``OFI_NCCL_*`` tuning variables are reported in
    the details (an allow-list: unknown names and secret-looking values never are). SKIP
    where no EFA is expected.
    """
    facts: FabricFacts = ctx.fact("fabric")
    plugin = facts.plugin
    details = {"efa_devices": facts.efa_devices, "env": facts.env,
               "plugin": {"installed": plugin.installed, "path": plugin.path, "requested": plugin.requested,
                          "searched": plugin.searched} if plugin else None}
    if facts.reason:
        yield ctx.finding(Status.SKIP, ctx.host, "not_run", f"not checked: {facts.reason}")
        return
    if not efa_expected(ctx, facts):
        why = ("diagnostics.efa_expected = false" if diagnostics_config(ctx.config).efa_expected is False
               else "no EFA device in /sys/class/infiniband")
        yield ctx.finding(Status.SKIP, ctx.host, "not_expected", f"EFA not judged: {why}", details=details)
        return
    flagged = False
    if not facts.efa_devices:
        flagged = True
        yield ctx.finding(Status.FAIL, ctx.host, "no_efa_device",
                          "EFA is expected but no EFA device is listed in /sys/class/infiniband", observed=0,
                          details=details, recommendation="Launch the instance with EFA network interfaces and install "
                                                          "the EFA driver (the EFA installer); check `fi_info -p efa`.")
    if plugin is not None and not plugin.installed:
        flagged = True
        from .evidence_nccl import ADVICE

        off = (plugin.requested or "").lower() == "none"
        named = f" (NCCL_NET_PLUGIN={plugin.requested})" if plugin.requested else ""
        yield ctx.finding(Status.WARN if off else Status.FAIL, ctx.host,
                          "net_plugin_disabled" if off else "net_plugin_missing",
                          "NCCL_NET_PLUGIN=none: NCCL will not use EFA" if off else
                          f"NCCL network plugin not found{named}: NCCL would fall back to TCP sockets", details=details,
                          recommendation=ADVICE["net_plugin_missing"].recommendation)
    provider = facts.env.get("FI_PROVIDER")
    if provider and EFA not in provider.split(","):
        flagged = True
        yield ctx.finding(Status.WARN, ctx.host, "fi_provider_override",
                          f"FI_PROVIDER={provider} keeps libfabric (and NCCL through it) off EFA", observed=provider,
                          expected=EFA, details=details, recommendation="Unset FI_PROVIDER or set it to efa.")
    if not flagged:
        yield ctx.finding(Status.PASS, ctx.host, "ok",
                          f"{len(facts.efa_devices)} EFA device(s); NCCL net plugin {plugin.path if plugin else '?'}",
                          observed=len(facts.efa_devices), unit="devices", details=details)
