"""Settings of the run history: where it lives, what counts as a regression, what a baseline is.

One section, ``[history]``. A regression is judged against the median of earlier runs,
not against one run, because a single noisy measurement must not become the bar every
later run is held to. The fractions are separate for bandwidth and compute: GEMM
throughput of a healthy GPU repeats within a few percent, bus bandwidth varies more
with placement and fabric load, so one number would either miss slow GPUs or cry wolf
on the network.
"""

from __future__ import annotations

import msgspec

from .fields import setting

__all__ = ["HistoryConfig", "history_config"]


class HistoryConfig(msgspec.Struct):
    """The local run history (SQLite) and the regression / repeat-offender judgements made from it."""

    enabled: bool = setting(True, "Append every run to the history store (--no-history turns it off for one run).")
    path: str | None = setting(
        None, "History database file. Unset: $GPU_PREFLIGHT_HISTORY, else "
              "$XDG_DATA_HOME/gpu-preflight/history.sqlite (~/.local/share/...). Keep it on a local disk: "
              "SQLite locking over NFS is unreliable.")
    lock_timeout_s: float = setting(
        2.0, "How long a run waits for another process's lock on the history database, each time it reads or "
             "writes it; then it goes on without the history (and says so). Writes take milliseconds, so a longer "
             "wait only delays the verdict behind a stuck process.", "s", above=0, max=600)
    cluster: str | None = setting(
        None, "Name runs are filed under. Unset: --cluster-name, else $SLURM_CLUSTER_NAME, else 'default'.")
    bandwidth_regression_fraction: float = setting(
        0.10, "Bus or memory bandwidth more than this fraction below its baseline WARNs (history.regression).",
        "ratio", min=0, max=1)
    tflops_regression_fraction: float = setting(
        0.05, "GEMM throughput more than this fraction below its baseline WARNs (history.regression).", "ratio",
        min=0, max=1)
    baseline_runs: int = setting(
        10, "A baseline is the median over this many most recent earlier runs that measured the same thing.",
        "runs", min=1, max=10_000)
    baseline_min_samples: int = setting(
        1, "Fewer earlier values than this: no baseline yet, nothing is judged.", "values", min=1, max=10_000)
    repeat_offender_statuses: list[str] = setting(
        ["FAIL"], "Statuses that make a GPU a repeat offender when it had them in an earlier run.")
    repeat_offender_checks: list[str] = setting(
        ["gpu.*", "compute.*", "memory.*", "train.*"],
        "Checks (globs) whose failures stick to the GPU itself (not to a rank that died with its host).")
    repeat_offender_window_days: float = setting(
        365.0, "Only failures this recent make a repeat offender.", "days", above=0, max=36_500)
    capture_floor_fraction: float = setting(
        0.9, "`baseline capture` writes bandwidth floors (perf.*_min_gbps) at this fraction of the measured "
             "median.", "ratio", above=0, max=1)
    capture_gemm_fraction: float = setting(
        1.0, "`baseline capture` writes expected GEMM throughput (perf.gemm_*_tflops) at this fraction of the "
             "measured median; compute.gemm already WARNs below perf.gemm_warn_fraction of it.", "ratio",
             above=0, max=1)


def history_config(config: object) -> HistoryConfig:
    """The ``history`` section of a resolved config, or the defaults where none is registered."""
    if isinstance(config, HistoryConfig):
        return config
    section = getattr(config, "history", None)
    return section if isinstance(section, HistoryConfig) else HistoryConfig()
