"""Training smoke tests: a small model must learn, alone and data-parallel across ranks.

The single-device run catches a GPU whose arithmetic is subtly broken in the backward
pass; the data-parallel run catches gradients that are averaged wrongly across ranks —
after training, the parameters must be bit-identical on every rank.

Why no ``torch.optim`` and no ``DistributedDataParallel``: both import ``torch._dynamo``
on first use (the optimiser's step, DDP's constructor), which costs every rank 3.5–4.4 s
on our H100 machine and as much again on a 2-core CPU host — a fifth of a whole quick run.
The loop below does what they do for this model, in the same order: parameters
broadcast from the group's first rank, each step's gradients flattened into one buffer
(DDP's bucket), all-reduced and divided by the group size, then SGD with momentum exactly
as ``torch.optim.SGD`` computes it (``buf = momentum * buf + grad``; ``p -= lr * buf``).
"""

from __future__ import annotations

import hashlib
import math
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgspec
from msgspec.structs import asdict

SAMPLES = 512  # the training set; the default batch (workload.train_batch_size) is all of it


class TrainResult(msgspec.Struct):
    """The training smoke's outcome: mode, steps, loss at start and end, whether it improved, DDP parameters agree."""

    mode: str  # "single" or "ddp"
    steps: int
    loss_start: float
    loss_end: float
    finite: bool
    improved: bool
    params_identical: bool | None = None
    param_digests: list[str] | None = None  # the distinct digests (one when DDP works)
    odd_ranks: list[int] | None = None  # ranks whose parameters differ from most ranks' (the first 64)
    error: str | None = None
    batch_size: int | None = None  # samples per step on this rank (at most its share of the set)
    batches_per_epoch: int | None = None  # steps in one pass over this rank's share

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _model_and_data(torch: Any, device: Any, seed: int) -> tuple[Any, Any, Any]:
    gen = torch.Generator(device="cpu").manual_seed(seed)
    model = torch.nn.Sequential(torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.05)
    x = torch.randn(SAMPLES, 256, generator=gen)
    teacher = torch.randn(256, 10, generator=gen)
    y = (x @ teacher).argmax(dim=1)
    return model.to(device), x.to(device), y.to(device)


def batching(samples: int, batch: int) -> tuple[int, int]:
    """The batch a rank trains on (at most its ``samples``) and how many make one pass over them."""
    size = max(1, min(batch, samples))
    return size, -(-samples // size)


def _train(torch: Any, model: Any, x: Any, y: Any, steps: int, lr: float,
           reduce: Callable[[list[Any]], None] | None = None, momentum: float = 0.9,
           batch: int | None = None) -> tuple[float, float, bool]:
    """SGD with momentum as torch.optim.SGD computes it; ``reduce`` averages gradients across ranks.

    With ``batch`` below the number of samples, step ``i`` trains on the ``batch`` samples from
    ``i * batch`` on (wrapping round); otherwise on all of them, as before batches existed, so
    the default batch gives bit-identical losses.
    """
    params = list(model.parameters())
    n = int(x.shape[0])
    size = n if batch is None else batching(n, batch)[0]
    bufs: list[Any] = [None] * len(params)
    loss_fn = torch.nn.CrossEntropyLoss()
    first = last = float("nan")
    finite = True
    for step in range(steps):
        for p in params:
            p.grad = None
        if size < n:
            idx = torch.arange(step * size, (step + 1) * size, device=x.device) % n
            loss = loss_fn(model(x[idx]), y[idx])
        else:
            loss = loss_fn(model(x), y)
        loss.backward()
        grads = [p.grad for p in params]
        if reduce is not None:
            reduce(grads)
        with torch.no_grad():
            for i, (p, g) in enumerate(zip(params, grads, strict=True)):
                bufs[i] = g.clone() if bufs[i] is None else bufs[i].mul_(momentum).add_(g)
                p.add_(bufs[i], alpha=-lr)
        value = float(loss.detach())
        finite = finite and math.isfinite(value)
        if step == 0:
            first = value
        last = value
    return first, last, finite


def digest(torch: Any, model: Any) -> str:
    """SHA-256 over the exact bytes of every parameter."""
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()


def run_single(device: Any, steps: int, min_drop: float, lr: float = 0.05, batch: int = SAMPLES) -> TrainResult:
    """Train on one device; ``min_drop`` is the fraction the loss must fall by; ``batch`` samples per step."""
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch

    size, per_epoch = batching(SAMPLES, batch)
    try:
        model, x, y = _model_and_data(torch, device, seed=7)
        first, last, finite = _train(torch, model, x, y, steps, lr, batch=batch)
        return TrainResult("single", steps, first, last, finite, finite and last <= first * (1 - min_drop),
                           batch_size=size, batches_per_epoch=per_epoch)
    except Exception as exc:
        return TrainResult("single", steps, float("nan"), float("nan"), False, False,
                           error=f"{type(exc).__name__}: {exc}", batch_size=size, batches_per_epoch=per_epoch)


def _all_reduce_mean(torch: Any, dist: Any, group: Any) -> Callable[[list[Any]], None]:
    """Average gradients across ``group`` through one flattened buffer, as DDP's bucket does."""
    size = dist.get_world_size(group)

    def reduce(grads: list[Any]) -> None:
        flat = torch.cat([g.reshape(-1) for g in grads])
        dist.all_reduce(flat, group=group)
        flat.div_(size)
        offset = 0
        for g in grads:
            g.copy_(flat[offset:offset + g.numel()].view_as(g))
            offset += g.numel()

    return reduce


def run_ddp(device: Any, steps: int, min_drop: float, group: Any = None, lr: float = 0.05,
            batch: int = SAMPLES) -> TrainResult:
    """Data-parallel training across ``group`` (every member must call); compares parameter
    digests afterwards. ``batch``: samples per step on each rank, from its share of the set."""
    # optional: torch comes with the [torch] extra, not with a node-only install
    import torch
    import torch.distributed as dist

    size = per_epoch = None
    try:
        model, x, y = _model_and_data(torch, device, seed=7)
        shard = torch.arange(x.shape[0], device=x.device) % dist.get_world_size(group) == dist.get_rank(group)
        source = dist.get_global_rank(group, 0) if group is not None else 0
        with torch.no_grad():
            for p in model.parameters():  # every rank starts from the first rank's parameters
                dist.broadcast(p, src=source, group=group)
        size, per_epoch = batching(int(shard.sum()), batch)
        first, last, finite = _train(torch, model, x[shard], y[shard], steps, lr,
                                     reduce=_all_reduce_mean(torch, dist, group), batch=batch)
        digests: list[Any] = [None] * dist.get_world_size(group)
        dist.all_gather_object(digests, digest(torch, model), group=group)
        counts = Counter(str(d) for d in digests)
        majority = counts.most_common(1)[0][0]
        odd = [r for r, d in enumerate(digests) if str(d) != majority][:64]
        return TrainResult("ddp", steps, first, last, finite, finite and last <= first * (1 - min_drop),
                           len(counts) == 1, sorted(counts), odd, batch_size=size, batches_per_epoch=per_epoch)
    except Exception as exc:
        return TrainResult("ddp", steps, float("nan"), float("nan"), False, False, False,
                           error=f"{type(exc).__name__}: {exc}", batch_size=size, batches_per_epoch=per_epoch)
