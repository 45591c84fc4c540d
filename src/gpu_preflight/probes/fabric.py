"""The ``fabric`` fact: libfabric providers, EFA devices, the NCCL net plugin, the fabric env.

``fi_info -p <provider>`` (``diagnostics.fabric_provider``, efa by default) answers "can a
job open this provider here?"; when it cannot, fi_info prints ``fi_getinfo: -61`` and
exits 61, which the ``fi-info`` parser records as "no provider" (an answer, not a parse
failure). EFA devices are the ``efa``-driven entries of ``/sys/class/infiniband``.

libfabric's start-up costs ``fi_info`` a few hundred milliseconds, half a node check, and
on a node without an EFA device ``fi_info -p efa`` can only say "no provider", which the
check turns into SKIP. So the EFA provider is asked about only where an EFA device is
listed, or ``diagnostics.efa_expected = true``, or the RDMA class cannot be read (then
nobody knows); elsewhere ``fi_info`` stays ``None`` and the check SKIPs saying why. Any
other provider is always asked about.
"""

from __future__ import annotations

from ..diagnostics.running import diag_config, replay_reason, run_and_keep, time_limit
from ..records.tools import FabricFacts
from ..registry import ProbeContext, probe


@probe("fabric")
def fabric_probe(ctx: ProbeContext) -> FabricFacts:
    """List the configured libfabric provider, EFA devices, the aws-ofi-nccl plugin and FI_/NCCL_ variables."""
    cfg = diag_config(ctx)
    facts = FabricFacts(provider=cfg.fabric_provider)
    if reason := replay_reason(ctx):
        facts.reason = reason
        return facts
    from ..backends.fabric import FABRIC_CACHE, fabric_environment, find_ofi_plugin
    from ..backends.infiniband import read_tree

    tree = read_tree(cfg.infiniband_sysfs)
    facts.efa_devices = tree.efa_devices
    kept = ctx.state.kept.get(FABRIC_CACHE)  # a monitor's: the plugin looked for again every tool refresh
    if kept is not None:
        facts.plugin, facts.env = kept.plugin(cfg.ofi_nccl_plugin_dirs), kept.environment()
    else:
        facts.plugin, facts.env = find_ofi_plugin(cfg.ofi_nccl_plugin_dirs), fabric_environment()
    if not fi_info_needed(cfg.fabric_provider, facts.efa_devices, tree.readable, cfg.efa_expected):
        return facts
    limit, capped = time_limit(ctx, cfg.tool_timeout_s)
    result, facts.fi_info = run_and_keep(ctx, ["fi_info", "-p", cfg.fabric_provider], limit, artifact="fi_info",
                                         filename=f"fi_info-p-{cfg.fabric_provider}.txt", capped=capped)
    if facts.fi_info.problem is None:
        from ..parsers.errors import ParseError
        from ..parsers.libfabric import parse_info

        try:
            facts.fi_info_record = parse_info(result.output)
        except ParseError as exc:
            facts.parse_error = str(exc)
    return facts


def fi_info_needed(provider: str, efa_devices: list[str], sysfs_readable: bool, efa_expected: bool | None) -> bool:
    """Whether ``fi_info -p <provider>`` can tell this node anything a SKIP would not."""
    return provider != "efa" or bool(efa_expected) or not sysfs_readable or bool(efa_devices)

