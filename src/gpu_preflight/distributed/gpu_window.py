"""The ranks of a ``--full`` run wait, before touching CUDA, for every node's GPU window.

In a node's GPU window its leader runs DCGM's stress levels (``dcgmi diag -r 2``/``-r 3``)
while no rank of the node holds a GPU (:mod:`gpu_preflight.diagnostics.window`). Every rank
waits until the window of *every* node has closed, not only its own node's: the ranks start
their workloads by forming the process group, which waits for every rank only the run's
timeout, and a node whose level 2 took two minutes longer than another's would otherwise
arrive after the others gave up on it. Each leader counts its window closed in the job's
store; the leader that completes the count sets one key, which every rank waits on (the store
notifies waiters, so thousands of ranks cost its host nothing meanwhile).

Every wait is bounded by :func:`window_s`, the DCGM levels' own time limits plus a margin
(:func:`gpu_preflight.diagnostics.budgets.dcgm_levels_s`): each level is killed at its limit,
so a hung ``dcgmi`` ends the window (an ERROR in the report naming it), and the leader's probe
is abandoned by the engine at that budget. The other ranks wait that long plus a heartbeat's
stale time, then go on: a leader that died in its window is named by the formation that follows.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any

from .. import registry
from ..backends.launcher.topology import Topology
from ..config import Config
from ..config.diagnostics import diagnostics_config
from ..diagnostics.budgets import dcgm_levels_for, dcgm_levels_s
from ..diagnostics.window import GPU_WINDOW, GpuWindow
from ..engine import RunSettings
from .liveness import beat_interval
from .store import PREFIX, STALE_S, KVStore, wait_key

__all__ = ["ALL_KEY", "CLOSED_KEY", "hold", "window_s", "with_window"]

CLOSED_KEY = f"{PREFIX}/gpu_window/closed"  # how many nodes' windows have closed
ALL_KEY = f"{PREFIX}/gpu_window/all"  # set once every node's window has closed


def window_s(opts: RunSettings, config: Config) -> float:
    """The longest the GPU window may last, 0 for a run without one: a ``--full`` live run
    whose checks need the ``dcgm`` fact and whose DCGM levels go beyond level 1.

    Every rank reaches the same answer from the run's options and config alone, so the
    ranks that wait and the leader that holds the window agree without a message."""
    cfg = diagnostics_config(config)
    if opts.suite != "full" or opts.replay or not cfg.dcgm_enabled or max(dcgm_levels_for(cfg, opts.suite)) < 2:
        return 0.0

    try:
        specs = registry.select(opts.suite, opts.include, opts.exclude)
    except KeyError:  # a pattern that matches nothing: the run reports it, and runs no DCGM
        return 0.0
    return dcgm_levels_s(cfg, opts.suite) if any("dcgm" in s.needs for s in specs) else 0.0


def with_window(state: Mapping[str, Any] | None, window: GpuWindow | None) -> Mapping[str, Any] | None:
    """The node checks' kept state with the leader's window in it (unchanged without one)."""
    return state if window is None else {**(state or {}), GPU_WINDOW: window}


def hold(store: KVStore, topo: Topology, window: GpuWindow | None, limit_s: float,
         alive: Callable[[], bool] | None = None) -> bool:
    """Wait out the job's GPU windows; True when every node's closed within its bound.

    ``window``: the node leader's own (its node checks close it); ``None`` on the other
    ranks. ``alive``: whether the leader's node checks still run (a window they left open
    closes no later than they end)."""
    whole = True
    if window is not None:
        whole = window.wait(limit_s, alive)
        if int(store.add(CLOSED_KEY, 1)) >= topo.num_nodes:
            store.set(ALL_KEY, "1")
    wake = 2 * beat_interval(topo.world_size)  # thousands of ranks waiting wake no more often than they beat
    return wait_key(store, ALL_KEY, time.monotonic() + limit_s + STALE_S, wake_s=wake) and whole
