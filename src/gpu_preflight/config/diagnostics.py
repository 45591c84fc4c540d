"""How the external diagnostics run: which tools, how long they may take, where they live.

One section, ``[diagnostics]``. What the *outputs* are judged against stays in
``[evidence]`` (``evidence.dcgm_ignore_tests``, ``evidence.nccl_busbw_min_gbps``,
``evidence.ib_expected_ports``...), because ``gpu-preflight judge`` of a saved log and a
live run must reach the same verdict. This section only says what to run and how, plus
the InfiniBand counter limits, which only a live run can measure (a saved log has no
"before" and "after").
"""

from __future__ import annotations

from typing import Literal

import msgspec

from .fields import setting

__all__ = ["DiagnosticsConfig", "diagnostics_config"]


class DiagnosticsConfig(msgspec.Struct):
    """Which external tools a node run starts, with what arguments and time limits."""

    tool_dirs: list[str] = setting(
        [], "Directories searched for dcgmi, nccl-tests, fi_info, fi_pingpong, lspci, ibstat... before PATH."
    )
    tool_timeout_s: float = setting(30.0, "Time limit for the quick listing tools (fi_info, lspci, ibstat).", "s",
        above=0, max=3600)
    dcgm_enabled: bool = setting(True, "Run `dcgmi diag` when dcgmi is installed (SKIP with the reason when not).")
    dcgm_level_full: Literal[2, 3] = setting(
        2, "DCGM level of --full runs: 2 (about 2 min) or 3 (about 15 min, stress; only when asked for). "
           "Quick runs use level 1 (seconds)."
    )
    dcgm_full_runs_basic: bool = setting(
        True, "--full runs level 1 before the full level, so the report has both `dcgm.diagnostics.basic` and "
              "`extended` (as the SageMaker health check's does); false runs the full level alone."
    )
    dcgm_raw_output_inline_max_bytes: int = setting(
        65_536, "How much of each `dcgmi diag` output the report shows inline (`raw_output`, `stdout`); the whole "
                "output is always saved as an artifact. 0: none inline.", "bytes", min=0, max=16 * 1024 * 1024
    )
    dcgm_args: list[str] = setting(
        [], "Extra `dcgmi diag` arguments, e.g. ['-i', '0,1,2,3'] or ['-p', 'pcie.gpu_nvlinks_expected_up=18']. "
            "Failures of tests in evidence.dcgm_ignore_tests are reported as SKIP."
    )
    dcgm_timeout_r1_s: float = setting(120.0, "Time limit for `dcgmi diag -r 1`.", "s", above=0, max=86_400)
    dcgm_timeout_r2_s: float = setting(600.0, "Time limit for `dcgmi diag -r 2`.", "s", above=0, max=86_400)
    dcgm_timeout_r3_s: float = setting(2700.0, "Time limit for `dcgmi diag -r 3`.", "s", above=0, max=86_400)
    nccl_tests: list[str] = setting(
        ["all_reduce_perf", "all_gather_perf"], "nccl-tests binaries run on a single node (found in "
                                                "nccl_tests_dir, tool_dirs or PATH)."
    )
    nccl_tests_dir: str | None = setting(None, "Directory of the nccl-tests binaries (e.g. /opt/nccl-tests/build).")
    nccl_tests_gpus: int | None = setting(
        None, "GPUs given to nccl-tests (-g). Unset: the NVIDIA GPUs on the PCI bus (CUDA_VISIBLE_DEVICES counted "
              "when set).", min=1, max=256
    )
    nccl_tests_args_quick: list[str] = setting(
        ["-b", "1M", "-e", "64M", "-f", "4", "-n", "5", "-w", "2"], "nccl-tests arguments in quick runs."
    )
    nccl_tests_args_full: list[str] = setting(
        ["-b", "8", "-e", "8G", "-f", "2"], "nccl-tests arguments in --full runs."
    )
    nccl_tests_timeout_s: float = setting(300.0, "Time limit for each nccl-tests binary.", "s", above=0, max=86_400)
    fabric_provider: str = setting("efa", "libfabric provider `fi_info -p` lists (efa on AWS).")
    efa_expected: bool | None = setting(
        None, "true: this node must have EFA (no device or provider FAILs); false: EFA is not judged; "
              "unset: expected when an EFA device is present."
    )
    ofi_nccl_plugin_dirs: list[str] = setting(
        ["/opt/amazon/ofi-nccl/lib", "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu", "/opt/amazon/ofi-nccl/lib64",
         "/opt/aws-ofi-nccl/lib", "/usr/local/lib", "/usr/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib"],
        "Where the aws-ofi-nccl plugin (libnccl-net*.so) is looked for, after LD_LIBRARY_PATH."
    )
    pingpong_provider: str = setting(
        "efa", "libfabric provider of the node-pair fi_pingpong in distributed runs (tcp to test without EFA)."
    )
    pingpong_endpoint: Literal["rdm", "msg", "dgram"] = setting(
        "rdm", "fi_pingpong endpoint type (efa: rdm or dgram; tcp: msg)."
    )
    pingpong_iterations: int = setting(10, "fi_pingpong iterations per message size (-I).", min=1, max=10**6)
    pingpong_base_port: int = setting(47600, "Control port of node pair k is this plus k.", min=1, max=65_535)
    pingpong_timeout_s: float = setting(60.0, "Time limit for one fi_pingpong side.", "s", above=0, max=86_400)
    connectivity_port: int = setting(
        0, "TCP port each node leader listens on in a multi-node run, for the other nodes' reachability probe "
           "(cluster.connectivity). 0: an ephemeral port, as NCCL's and gloo's own sockets use; set the port your "
           "firewall must let through to test that.", min=0, max=65_535
    )
    connectivity_timeout_s: float = setting(
        5.0, "Time limit of each name lookup and TCP connect of the reachability probe (cluster.connectivity).", "s",
        above=0, max=600
    )
    connectivity_slow_ms: float = setting(
        1000.0, "A name lookup slower than this WARNs (cluster.connectivity): a resolver that answers only after its "
                "first server timed out.", "ms", above=0, max=600_000
    )
    infiniband_sysfs: str = setting("/sys/class/infiniband", "Where RDMA devices (IB, RoCE, EFA) are listed.")
    ib_tools: list[str] = setting(
        ["ibstat", "ibv_devinfo"], "Port-listing tools run when installed; their output is kept and their "
                                   "device errors (ibpanic) judged beside sysfs."
    )
    ib_counter_min_window_s: float = setting(
        1.0, "Shortest time between the two reads of the port error counters (the window also spans the run's "
             "DCGM and nccl-tests).", "s", min=0, max=3600
    )
    ib_counters_fail_above: dict[str, int] = setting(
        {"link_downed": 0}, "Port counter increases during the run above which a port FAILs.", min=0, max=10**12
    )
    ib_counters_warn_above: dict[str, int] = setting(
        {"symbol_error": 10, "link_error_recovery": 0, "port_rcv_errors": 0, "port_rcv_remote_physical_errors": 0,
         "local_link_integrity_errors": 0, "excessive_buffer_overrun_errors": 0, "port_xmit_discards": 100},
        "Port counter increases during the run above which a port WARNs.", min=0, max=10**12
    )


def diagnostics_config(config: object) -> DiagnosticsConfig:
    """The ``diagnostics`` section of a resolved config, or the defaults where none is registered."""
    section = getattr(config, "diagnostics", None)
    return section if isinstance(section, DiagnosticsConfig) else DiagnosticsConfig()
