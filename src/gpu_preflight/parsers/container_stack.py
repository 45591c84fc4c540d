"""The GPU container stack's failure sentences: libnvidia-container, the toolkit, Docker, the device plugin.

When a GPU container will not start, the stack says why, and people paste that text alone: Docker's or
containerd's ``OCI runtime create failed ... nvidia-container-cli: <stage> error: <why>: unknown.``, the
Kubernetes device plugin's klog lines. Each names a state of the node this tool already judges from other
tools (a driver/library mismatch, no driver, a lost GPU, an Xid) or a configuration that keeps GPUs out of
containers; the evidence is the tool's own prefix, so detection rests on it (:func:`sniff`).

Forms, cited in docs/repertoire/container-stack.md:

- libnvidia-container's CLI (src/cli/configure.c): ``warnx("<stage> error: %s", ...)`` for the stages
  initialization, detection, device, requirement, mount, ldcache, container and permission; the reason is
  NVML's ``nvml error: <nvmlErrorString>`` (src/error.c), ``load library failed: <dlerror>`` (src/xfuncs.h) or
  the requirement's ``unsatisfied condition: cuda>=12.4`` (src/cli/dsl.c, with its hint ``please update your
  driver ...`` after a CUDA condition); the toolkit's CSV mode says ``requirements not met: unsatisfied condition:
  cuda>=12.4 (cuda=12.2)`` (internal/modifier/csv.go, internal/requirements/constraints/binary.go).
- Docker (moby) when no runtime serves ``--gpus``: ``could not select device driver "" with capabilities:
  [[gpu]]``; the toolkit's CDI mode when no spec names the device: ``unresolvable CDI devices <name>``.
- NVIDIA/gpu-operator's validator: ``Error: error validating driver|toolkit|plugin installation: <why>``.
- NVIDIA/k8s-device-plugin: ``XidCriticalError: Xid=%d on Device=%s; marking device as unhealthy.``
  (internal/rm/health.go; older releases' ``..., the device will go unhealthy.``), the other ``marking ...
  unhealthy`` lines there, ``'%s' device marked unhealthy: %s`` (internal/plugin/server.go), ``Failed to
  initialize NVML: %v.`` with its runtime hint and ``Incompatible strategy detected %v``
  (internal/plugin/factory.go), ``No devices found. Waiting indefinitely.`` (cmd/nvidia-device-plugin/main.go).

``Failed to initialize NVML: Unknown Error`` printed alone (nvidia-smi in a container that lost its device
access) is nvidia-smi's sentence, read by :mod:`.nvidia_smi.failures`.
"""

from __future__ import annotations

import re

from ..records.container import ContainerStackRecord, StackFailure
from .detect import parser
from .errors import ParseError
from .nvidia_smi.failures import failures_in as smi_failures_in
from .text import prepare

KIND = "container-stack"

NVC = "nvidia-container-cli"
DOCKER = "docker"
TOOLKIT = "nvidia-container-toolkit"
PLUGIN = "k8s-device-plugin"
VALIDATOR = "gpu-operator-validator"

# nvidia-container-cli's stage prefix (configure.c's warnx); the reason runs to the runtime's ': unknown' suffix.
_NVC = re.compile(r"nvidia-container-cli(?:\.real)?: (?P<stage>initialization|detection|device|requirement|mount|"
                  r"ldcache|container|permission) error: (?P<why>.+?)(?::\s*unknown)?[.\"'\\n]*\s*$")
# The reason, first match wins: (code, pattern). NVML's strings are nvmlErrorString's, lower-cased by error.c.
_NVC_WHY: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("gpu_lost", re.compile(r"nvml error: gpu is lost", re.IGNORECASE)),
    ("driver_unreachable", re.compile(r"nvml error: driver not loaded", re.IGNORECASE)),
    ("nvml_init_failed", re.compile(r"nvml error: ", re.IGNORECASE)),
    # the host has no driver user-space libraries where the toolkit looks (no driver, or a broken install)
    ("nvml_init_failed", re.compile(r"load library failed: lib(?:nvidia-ml|cuda)\.so", re.IGNORECASE)),
    ("no_devices", re.compile(r"cuda error: no cuda-capable device is detected", re.IGNORECASE)),
    ("cuda_driver_too_old", re.compile(r"unsatisfied condition: (?P<need>(?:cuda|driver)\s*>=?\s*[\d.]+)",
                                       re.IGNORECASE)),
    ("requirement_unsatisfied", re.compile(r"unsatisfied condition: (?P<need>\S+)", re.IGNORECASE)),
)
# (code, tool, pattern): lines outside nvidia-container-cli's prefix; the first match classifies a line.
_LINES: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    # v0.14+ 'on Device=%s; marking device as unhealthy.', v0.10-v0.13 'on Device=%s, the device will go unhealthy.',
    # 1.0.0-beta 'on GPU=%s, ...', and before v0.13 'Xid=%d, All devices will go unhealthy.' (no device named)
    ("xid", PLUGIN, re.compile(r"XidCriticalError: Xid=(?P<xid>\d+)(?: on (?:Device|GPU)=(?P<device>[^\s;,]+))?")),
    ("device_unhealthy", PLUGIN, re.compile(r"(?:'(?P<resource>[^']+)' )?device marked unhealthy: "
                                         r"(?P<device>(?:GPU|MIG)-[\w:-]+)")),
    ("device_unhealthy", PLUGIN, re.compile(
        r"(?:Marking device (?P<device>\S+) as unhealthy: (?P<why>.+)|unable to get device handle from UUID: "
        r"(?P<why2>.+?); marking it as unhealthy|unabled? to determine the supported events for (?P<device3>\S+): "
        r"(?P<why3>.+?); marking it as unhealthy|Could not determine device placement for (?P<device2>\S+): .*"
        r"Marking it unhealthy|(?P<all>Marking all devices as unhealthy))", re.IGNORECASE)),
    ("runtime_missing", PLUGIN, re.compile(r"Incompatible strategy detected (?P<why>\S*)")),
    ("no_devices", PLUGIN, re.compile(r"No devices found\. Waiting indefinitely\.")),
    ("runtime_missing", DOCKER, re.compile(r"could not select device driver \"[^\"]*\" with capabilities: "
                                           r"\[\[(?P<why>[^\]]*gpu[^\]]*)\]\]")),
    ("runtime_missing", DOCKER, re.compile(r"Unknown runtime specified (?P<why>nvidia)\b")),
    # the GPU Operator's validator (cmd/nvidia-validator/main.go; validator/main.go before v23.x): 'Error: %v' of
    # 'error validating <component> installation: %w'; the driver's and toolkit's checks are nvidia-smi run on the
    # host's driver and in a container the toolkit prepared, failing with its exit status
    ("driver_unreachable", VALIDATOR, re.compile(r"error validating driver installation: (?P<why>.*(?:exit status "
                                                 r"\d+|nvidia-smi).*?)\"?\s*$")),
    ("runtime_missing", VALIDATOR, re.compile(r"error validating toolkit installation: (?P<why>.*exit status \d+.*?)"
                                              r"\"?\s*$")),
    ("no_devices", VALIDATOR, re.compile(r"error validating plugin installation: (?P<why>GPU resources are not "
                                         r"discovered by the node|unable to find any allocatable GPU resource)")),
    ("cuda_driver_too_old", TOOLKIT, re.compile(r"requirements not met: unsatisfied condition: (?P<why>(?:cuda|driver)"
                                                r"\s*>=?\s*[\d.]+)")),
    ("requirement_unsatisfied", TOOLKIT, re.compile(r"requirements not met: unsatisfied condition: (?P<why>[^:]+)")),
    ("cdi_unresolved", TOOLKIT, re.compile(r"unresolvable CDI devices (?P<device>\S+?)[:.,]?(?:\s|$)")),
)
# The device plugin's NVML failure (factory.go), read only where its hint shows the line is the plugin's.
_PLUGIN_NVML: tuple[tuple[str, str, re.Pattern[str]], ...] = (
    # the plugin could not load NVML at all: its own hint names the runtime (the driver libraries were not
    # injected), as 'Incompatible strategy detected' does
    ("runtime_missing", PLUGIN, re.compile(r"Failed to initialize NVML: (?P<why>ERROR_LIBRARY_NOT_FOUND|could not "
                                           r"load NVML library)", re.IGNORECASE)),
    ("driver_unreachable", PLUGIN, re.compile(r"Failed to initialize NVML: (?P<why>ERROR_DRIVER_NOT_LOADED)")),
    ("gpu_lost", PLUGIN, re.compile(r"Failed to initialize NVML: (?P<why>ERROR_GPU_IS_LOST)")),
    ("nvml_init_failed", PLUGIN, re.compile(r"Failed to initialize NVML: (?P<why>.+?)\.?\s*$")),
)
# Lines only the device plugin prints: with a 'Failed to initialize NVML' they say whose line it is.
_PLUGIN_HINT = re.compile(r"If this is a GPU node, did you (?:set the docker default runtime to|configure the "
                          r"NVIDIA Container Toolkit)")


def failures_in(lines: list[str]) -> list[StackFailure]:
    """Every container-stack failure sentence in ``lines``, in order.

    ``Failed to initialize NVML`` is the device plugin's only where its hint follows it; without the hint
    it is nvidia-smi's sentence, not read here."""
    plugin = any(_PLUGIN_HINT.search(line) for line in lines)
    out: list[StackFailure] = []
    for number, line in enumerate(lines, 1):
        if found := _classify(line, number, plugin):
            out.append(found)
    return out


# A printf verb where the value goes: the format string quoted (a doc, a test, a diff), not the tool's output.
_FORMAT_VERB = re.compile(r"%[+#]?[sdvq]\b")


def _classify(line: str, number: int, plugin: bool) -> StackFailure | None:
    if _FORMAT_VERB.search(line):
        return None
    if m := _NVC.search(line):
        message = _from(line, m.start())
        why = m["why"].strip()
        for code, pattern in _NVC_WHY:
            if w := pattern.search(why):
                return StackFailure(code, message, number, NVC, detail=w.groupdict().get("need") or why)
        return StackFailure("container_setup_failed", message, number, NVC, detail=f"{m['stage']} error: {why}")
    for code, tool, pattern in (*_LINES, *(_PLUGIN_NVML if plugin else ())):
        if (m := pattern.search(line)) is None:
            continue
        message = _from(line, m.start())
        groups = {k: v for k, v in m.groupdict().items() if v}
        device = groups.get("device") or groups.get("device2") or groups.get("device3")
        xid = int(groups["xid"]) if "xid" in groups else None
        detail = next((groups[k] for k in ("why", "why2", "why3", "resource", "all") if k in groups), None)
        return StackFailure(code, message, number, tool, device=device, xid=xid, detail=detail)
    return None


def _from(line: str, start: int) -> str:
    """The sentence from the tool's own prefix on (the engine's or klog's wrapping left out), capped."""
    return line[start:].strip().rstrip("\"'").strip()[:300]


def sniff(text: str) -> int:
    """The tools' own prefixes are the strongest evidence of whose text this is; above nvidia-smi's failure
    sentences (75), which a device plugin log quotes in its own line."""
    return 80 if failures_in(text.splitlines()[:400]) else 0


@parser(KIND, sniff=sniff, title="GPU container stack failure (nvidia-container-cli, toolkit, device plugin)")
def parse(text: str) -> ContainerStackRecord:
    """The failures the container stack printed."""
    lines = prepare(KIND, text)
    failures = failures_in(lines)
    if not failures:
        raise ParseError(KIND, "no container-stack failure sentence")
    # nvidia-smi's own sentences above the stack's line (the validator's nvidia-smi, a hook's stderr), on lines
    # the stack's forms did not read: judged as nvidia-smi's
    ours = {f.line for f in failures}
    smi = [f for f in smi_failures_in(lines) if f.line not in ours]
    return ContainerStackRecord(failures=failures, smi_failures=smi)
