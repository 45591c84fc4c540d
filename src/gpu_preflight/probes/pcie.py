"""The ``pcie`` fact: link capability vs status of GPUs and NICs, and the kernel's ``limited by`` lines.

``lspci -vvv -nn`` prints every device's ``LnkCap`` (what the link can do) and
``LnkSta`` (what it trained to); ``-nn`` adds the class and vendor ids used to keep
NVIDIA GPUs and network controllers. Without root, lspci hides the capabilities and the
judge says so (SKIP) rather than guessing. The kernel logs ``... available PCIe
bandwidth, limited by ...`` at boot for a device behind a slower upstream link; those
lines are taken from the live kernel log the ``kernel_log`` probe reads, read once per run
(:func:`~gpu_preflight.probes.kernel_log.live_kernel_log`).
"""

from __future__ import annotations

from ..diagnostics.running import diag_config, replay_reason, run_and_keep, time_limit
from ..records.tools import PcieFacts
from ..registry import ProbeContext, probe

NVIDIA = "10de"
_GPU_CLASS_NAMES = ("3D controller", "VGA compatible controller", "Display controller")
_NIC_CLASS_NAMES = ("Ethernet controller", "Infiniband controller", "Network controller", "InfiniBand")


def is_gpu_or_nic(device: object) -> bool:
    """NVIDIA display/3D controllers and network controllers (class 02xx), by id when lspci gave ids."""
    class_id = getattr(device, "class_id", None)
    vendor = getattr(device, "vendor_id", None)
    name = str(getattr(device, "device_class", ""))
    if class_id:
        return class_id.startswith("02") or (class_id.startswith("03") and vendor == NVIDIA)
    return name.startswith(_NIC_CLASS_NAMES) or (name.startswith(_GPU_CLASS_NAMES)
                                                  and "NVIDIA" in str(getattr(device, "name", "")))


@probe("pcie")
def pcie_probe(ctx: ProbeContext) -> PcieFacts:
    """Run ``lspci -vvv -nn``, keep the GPUs and NICs, and collect the kernel's PCIe ``limited by`` lines."""
    cfg = diag_config(ctx)
    facts = PcieFacts()
    if reason := replay_reason(ctx):
        facts.reason = reason
        facts.kernel_log_reason = reason
        if ctx.inputs.kernel_log:
            _limited_lines(ctx, facts)
        return facts
    limit, capped = time_limit(ctx, cfg.tool_timeout_s)
    result, facts.lspci = run_and_keep(ctx, ["lspci", "-vvv", "-nn"], limit, artifact="lspci",
                                       filename="lspci-vvv-nn.txt", capped=capped)
    if facts.lspci.problem is None and facts.lspci.rc == 0 and not result.stdout.strip():
        facts.reason = "lspci lists no PCI device (no PCI bus visible here, e.g. inside a container)"
    elif facts.lspci.problem is None and facts.lspci.rc == 0:
        from ..parsers.errors import ParseError
        from ..parsers.lspci import parse  # only when lspci printed something

        try:
            record = parse(result.stdout)
        except ParseError as exc:
            facts.parse_error = str(exc)
        else:
            facts.devices_listed = len(record.devices)
            record.devices = [d for d in record.devices if is_gpu_or_nic(d)]
            facts.record = record
    _limited_lines(ctx, facts)
    return facts


def _limited_lines(ctx: ProbeContext, facts: PcieFacts) -> None:
    from ..backends.kernel_log import KernelLogUnavailable, read_kernel_log_file
    from .kernel_log import live_kernel_log

    path = ctx.inputs.kernel_log
    try:
        log = read_kernel_log_file(path) if path else live_kernel_log(ctx)
    except KernelLogUnavailable as exc:
        facts.kernel_log_reason = f"cannot read kernel log: {exc}"
        return
    facts.kernel_log_source, facts.kernel_log_reason = log.source, None
    facts.limited_lines = [line for line in log.text.splitlines() if "limited by" in line and "PCIe" in line]
    if facts.limited_lines:
        from ..parsers.dmesg import parse
        from ..parsers.errors import ParseError

        try:
            facts.limits = parse("\n".join(facts.limited_lines)).pcie_limits
        except ParseError:
            facts.limits = []
