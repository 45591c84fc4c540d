"""The software stack as torch sees it: torch, its CUDA and NCCL, cuDNN, CUDA start-up.

An image built for a newer CUDA than the driver supports is the commonest cause of
"no GPU" inside containers; recording both sides lets a check name the mismatch. The image
itself cannot be seen from inside the container: ``GPU_PREFLIGHT_IMAGE`` (the reference or
digest, set by whoever starts the job) is recorded as ``container_image`` so the report can
say whether every node ran the same one.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
from msgspec.structs import asdict


class StackInfo(msgspec.Struct):
    """The software stack a rank sees: torch and its CUDA, NCCL and cuDNN versions, devices, and why CUDA failed if it
    did."""

    torch_version: str
    torch_cuda: str | None
    nccl_version: str | None
    cudnn_version: int | None
    cuda_available: bool
    device_count: int
    cuda_init_error: str | None
    gloo_available: bool
    nccl_available: bool
    container_image: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


IMAGE_VARIABLE = "GPU_PREFLIGHT_IMAGE"


def read_stack(local_rank: int | None = None) -> StackInfo:
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch
    import torch.distributed as dist

    nccl = None
    init_error = None
    count = 0
    if torch.version.cuda:
        try:
            count = torch.cuda.device_count()
            if count:
                torch.cuda.init()
                torch.zeros(1, device=f"cuda:{local_rank or 0}")  # actually create a context
        except Exception as exc:  # "CUDA driver version is insufficient for CUDA runtime version", ...
            init_error = f"{type(exc).__name__}: {exc}"
        try:
            nccl = ".".join(str(v) for v in torch.cuda.nccl.version())
        except Exception:  # a CPU-only build or a missing libnccl
            nccl = None
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    return StackInfo(
        torch_version=str(torch.__version__), torch_cuda=torch.version.cuda, nccl_version=nccl,
        cudnn_version=cudnn, cuda_available=bool(torch.version.cuda) and count > 0 and init_error is None,
        device_count=count, cuda_init_error=init_error, gloo_available=dist.is_gloo_available(),
        nccl_available=dist.is_nccl_available(), container_image=os.environ.get(IMAGE_VARIABLE) or None)
