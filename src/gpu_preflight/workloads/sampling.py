"""Start and finish a rank's under-load sampler around its workloads.

A rank on a GPU samples that GPU (not the node's others: each rank owns its device, so
eight ranks of a node sample eight GPUs, each at the configured rate). The NVML handle is
found from the CUDA device's UUID, then its PCI bus id: CUDA and NVML may number GPUs
differently. Anything that goes wrong here costs the series, never the workloads: the
rank's payload then says why (``load_error``) and the load checks report an ERROR for
that GPU instead of judging nothing silently.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..backends.nvml import import_pynvml
from ..backends.nvml_sampler import LoadSampler, resolve_handle, summarize
from ..config.load import LoadConfig
from ..records.efficiency import work_per_watt


class RankSampler:
    """The sampler of one rank's GPU, or the reason there is none."""

    def __init__(self, sampler: LoadSampler | None, nvml: Any, error: str | None) -> None:
        self.sampler, self.nvml, self.error = sampler, nvml, error

    def mark(self, phase: str) -> None:
        if self.sampler is not None:
            self.sampler.mark(phase)

    def finish(self, payload: dict[str, Any], cfg: LoadConfig, series: bool = True) -> None:
        """Stop sampling and put the summary (or the reason for none) into the rank's payload;
        ``series=False`` (a cluster too large to list every GPU) sends the statistics alone."""
        if self.sampler is not None:
            try:
                payload["load"] = summarize(self.sampler.stop(), cfg.max_points if series else 0)
                if per_watt := work_per_watt(payload.get("gemm") or [], payload["load"]):
                    payload["load"]["work_per_watt"] = per_watt
            except Exception as exc:  # a broken summary must not cost the rank's other results
                payload["load_error"] = f"{type(exc).__name__}: {exc}"
            if self.nvml is not None:
                with contextlib.suppress(Exception):  # tidiness: the series is already taken
                    self.nvml.nvmlShutdown()
        elif self.error:
            payload["load_error"] = self.error


def _device_ids(device: Any) -> tuple[str | None, str | None, int]:
    """(NVML-style UUID, PCI bus id, CUDA index) of a torch CUDA device."""
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch

    index = device.index if device.index is not None else torch.cuda.current_device()
    props = torch.cuda.get_device_properties(index)
    uuid = getattr(props, "uuid", None)
    nvml_uuid = None if uuid is None else (str(uuid) if str(uuid).startswith("GPU-") else f"GPU-{uuid}")
    bus = getattr(props, "pci_bus_id", None)
    pci = None
    if bus is not None:
        pci = f"{getattr(props, 'pci_domain_id', 0):08x}:{bus:02x}:{getattr(props, 'pci_device_id', 0):02x}.0"
    return nvml_uuid, pci, index


def start(device: Any, cfg: LoadConfig) -> RankSampler:
    """A running sampler for a CUDA device; an inert one (with the reason) otherwise."""
    if getattr(device, "type", None) != "cuda" or cfg.sample_hz <= 0:
        return RankSampler(None, None, None)  # CPU workers (or sampling off): nothing to sample, nothing wrong
    try:
        nvml = import_pynvml()
        nvml.nvmlInit()
    except Exception as exc:
        return RankSampler(None, None, f"NVML unavailable: {type(exc).__name__}: {exc}")
    try:
        uuid, pci, index = _device_ids(device)
        handle = resolve_handle(nvml, uuid, pci, index)
        label = f"gpu{index}"
        return RankSampler(LoadSampler(nvml, handle, label, hz=cfg.sample_hz).start(), nvml, None)
    except Exception as exc:
        with contextlib.suppress(Exception):  # the error below is what the report needs
            nvml.nvmlShutdown()
        return RankSampler(None, None, f"no NVML handle for {device}: {type(exc).__name__}: {exc}")

