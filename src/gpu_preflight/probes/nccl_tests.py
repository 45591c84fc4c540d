"""The ``nccl_tests`` fact: NVIDIA's nccl-tests run on this node, one process with ``-g <gpus>``.

The binaries (``all_reduce_perf``, ``all_gather_perf``...) are looked for in
``diagnostics.nccl_tests_dir``, ``diagnostics.tool_dirs`` and ``PATH``, and run one after
the other, each under its own time limit. Only the single-node form runs here: across
nodes nccl-tests needs MPI to start one process per GPU on every node, which is the
launcher's job (``mpirun``/``srun``, see docs/diagnostics.md); a saved multi-node run is
judged with ``gpu-preflight judge``. Under a launcher this process is one rank whose
sibling workers hold the GPUs, so the local run is skipped there.
"""

from __future__ import annotations

import os
import time

from ..diagnostics.budgets import MARGIN_S
from ..diagnostics.running import diag_config, launched_as_rank, replay_reason, run_and_keep, suite_of, time_limit
from ..records.tools import NcclTestRun, NcclTestsFacts
from ..registry import ProbeContext, probe


def local_gpu_count() -> int:
    """GPUs a local nccl-tests run may use: NVIDIA GPUs on the PCI bus, narrowed by CUDA_VISIBLE_DEVICES."""
    from ..backends.pci import nvidia_gpus

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    found = nvidia_gpus()
    count = len(found) if isinstance(found, list) else 0
    if visible is not None:
        listed = [v for v in visible.split(",") if v.strip() and v.strip() != "-1"]
        count = min(count, len(listed)) if count else len(listed)
    return count


def nccl_tests_budget(ctx: ProbeContext) -> float:
    """Every binary's time limit, one after the other, and a margin."""
    cfg = diag_config(ctx)
    return len(cfg.nccl_tests) * cfg.nccl_tests_timeout_s + MARGIN_S


@probe("nccl_tests", budget=nccl_tests_budget)
def nccl_tests_probe(ctx: ProbeContext) -> NcclTestsFacts:
    """Run each configured nccl-tests binary found on this node with ``-g <gpus>`` and parse its table."""
    cfg = diag_config(ctx)
    dirs = [d for d in (cfg.nccl_tests_dir, *cfg.tool_dirs) if d]
    if reason := replay_reason(ctx):  # before any lookup: this host's PATH says nothing of the snapshot's
        return NcclTestsFacts(False, reason=reason)
    from ..backends.commands import find_tool  # a replay never loads the tool runner (subprocess and all)

    found = {name: find_tool(name, dirs) for name in cfg.nccl_tests}
    paths = {name: path for name, path in found.items() if path}
    facts = NcclTestsFacts(bool(paths), not_found=[n for n, p in found.items() if p is None])
    if not paths:
        facts.reason = f"no nccl-tests binary found ({', '.join(cfg.nccl_tests)}; looked in " \
                       f"{', '.join([*dirs, 'PATH'])})"
        return facts
    from ..parsers.errors import ParseError
    from ..parsers.nccl_tests import parse
    if launcher := launched_as_rank():
        facts.reason = (f"this process is one rank of a {launcher} job whose workers use the GPUs; run nccl-tests "
                        "across nodes with mpirun/srun (docs/diagnostics.md) or `gpu-preflight run --node-only`")
        return facts
    facts.gpus = cfg.nccl_tests_gpus if cfg.nccl_tests_gpus is not None else local_gpu_count()
    if facts.gpus < 1:
        facts.reason = "no NVIDIA GPU on this node's PCI bus (set diagnostics.nccl_tests_gpus to override)"
        return facts
    args = cfg.nccl_tests_args_full if suite_of(ctx) == "full" else cfg.nccl_tests_args_quick
    started = time.monotonic()
    for name, path in paths.items():
        limit, capped = time_limit(ctx, cfg.nccl_tests_timeout_s, spent_s=time.monotonic() - started)
        result, run = run_and_keep(ctx, [path, "-g", str(facts.gpus), *args], limit, artifact=f"nccl_tests_{name}",
                                   filename=f"{name}.txt", heavy=True, capped=capped)
        entry = NcclTestRun(name, run)
        if run.problem is None:
            try:
                entry.record = parse(result.output)
            except ParseError as exc:
                entry.parse_error = str(exc)
        facts.runs.append(entry)
        if run.timed_out:
            break  # the probe's time is spent; the remaining binaries would be killed too
    return facts
