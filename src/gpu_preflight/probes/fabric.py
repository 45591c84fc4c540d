"""The ``fabric`` fact: libfabric providers, EFA devices, the NCCL net plugin, the fabric env.

``fi_info -p <provider>`` (``diagnostics.fabric_provider``, efa by default) answers "can a
job open this provider here?"; when it cannot, fi_info prints ``fi_getinfo: -61`` and
exits 61, which the ``fi-info`` parser records as "no provider" (an answer, not a parse
failure). EFA devices are the ``efa``-driven entries of ``/sys/class/infiniband``.
"""

from __future__ import annotations

from ..diagnostics.records import FabricFacts
from ..diagnostics.running import diag_config, replay_reason, run_and_keep, time_limit
from ..registry import ProbeContext, probe


@probe("fabric")
def fabric_probe(ctx: ProbeContext) -> FabricFacts:
    """List the configured libfabric provider, EFA devices, the aws-ofi-nccl plugin and FI_/NCCL_ variables."""
    cfg = diag_config(ctx)
    facts = FabricFacts(provider=cfg.fabric_provider)
    if reason := replay_reason(ctx):
        facts.reason = reason
        return facts
    from ..backends.fabric import fabric_environment, find_ofi_plugin
    from ..backends.infiniband import read_tree
    from ..parsers.errors import ParseError
    from ..parsers.libfabric import parse_info

    facts.efa_devices = read_tree(cfg.infiniband_sysfs).efa_devices
    facts.plugin = find_ofi_plugin(cfg.ofi_nccl_plugin_dirs)
    facts.env = fabric_environment()
    limit, capped = time_limit(ctx, cfg.tool_timeout_s)
    result, facts.fi_info = run_and_keep(ctx, ["fi_info", "-p", cfg.fabric_provider], limit, artifact="fi_info",
                                         filename=f"fi_info-p-{cfg.fabric_provider}.txt", capped=capped)
    if facts.fi_info.problem is None:
        try:
            facts.fi_info_record = parse_info(result.output)
        except ParseError as exc:
            facts.parse_error = str(exc)
    return facts
