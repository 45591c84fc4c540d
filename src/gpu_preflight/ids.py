"""The report ids that code outside ``checks/`` names, in one place on the model floor.

History compares ``compute.gemm`` findings, the health API reads ``gpu.nvml``, the scores
count ``gpu.inventory.count``, localisation writes ``localize.suspect``. Typed as string
literals there, a renamed check would leave them reading nothing, silently. So each id
below is what the check or declaration that produces it registers (``@check(NVML_ID, ...)``,
``declare(RUN_COVERAGE_ID, ...)``): a rename here renames both sides.
``tests/test_id_literals.py`` fails on a registered id typed as a literal outside ``checks/``
and on a constant here that nothing registers.

Plain strings, importing nothing: every layer may read them (the report layer included,
which may not import the checks).
"""

from __future__ import annotations

__all__ = [
    "CLUSTER_NODE_REPORT_ID", "CONNECTIVITY_ID", "EVIDENCE_JUDGE_ID", "GEMM_ID", "GPU_POWER_ID", "GPU_THERMAL_ID",
    "HISTORY_REGRESSION_ID", "HISTORY_REPEAT_OFFENDER_ID", "INVENTORY_COUNT_ID", "LOCALIZE_SUSPECT_ID",
    "MEMORY_BANDWIDTH_ID", "NCCL_COLLECTIVES_ID", "NCCL_CORRECTNESS_ID", "NODE_LINKS_ID", "NVML_ID", "PINGPONG_ID",
    "RECOVERY_ACTION_ID", "RUN_COVERAGE_ID", "STACK_CUDA_ID", "TRAIN_SMOKE_ID", "WORKLOADS_ID",
]

# GPU checks (checks/gpu_*.py)
NVML_ID = "gpu.nvml"  # the health API and the NVML helper run and read it
INVENTORY_COUNT_ID = "gpu.inventory.count"  # scores: "no GPU" against "--expect-gpus 0"
RECOVERY_ACTION_ID = "gpu.recovery_action"  # the health API reads it
GPU_THERMAL_ID = "gpu.thermal"  # the HTML report plots it
GPU_POWER_ID = "gpu.power"
# cluster checks (checks/cluster_*.py)
GEMM_ID = "compute.gemm"  # history compares it; the report plots and measures it
MEMORY_BANDWIDTH_ID = "memory.bandwidth"
NODE_LINKS_ID = "network.node_links"  # the connectivity matrix
PINGPONG_ID = "fabric.pingpong"  # the assessment's pair latencies
CONNECTIVITY_ID = "cluster.connectivity"  # the report's name-resolution and reachability matrix
# the acceptance suite's per-program summary (outputs/acceptance.py) groups these
STACK_CUDA_ID = "stack.cuda"
TRAIN_SMOKE_ID = "train.smoke"
NCCL_CORRECTNESS_ID = "nccl.correctness"
NCCL_COLLECTIVES_ID = "nccl.collectives"
# declared ids no check produces (checks/report_ids.py, checks/evidence.py)
HISTORY_REGRESSION_ID = "history.regression"
HISTORY_REPEAT_OFFENDER_ID = "history.repeat_offender"
LOCALIZE_SUSPECT_ID = "localize.suspect"
RUN_COVERAGE_ID = "run.coverage"
CLUSTER_NODE_REPORT_ID = "cluster.node_report"
WORKLOADS_ID = "workloads"
EVIDENCE_JUDGE_ID = "evidence.judge"

# A finding code read outside checks/ (not an id, so not in __all__): the health verdict
# reads gpu.nvml's ERROR for a GPU that answered none of its core readings as unknown.
NVML_UNREADABLE_CODE = "gpu_unreadable"
