"""The report ids that code outside ``checks/`` names, as constants from where they are declared.

History compares ``compute.gemm`` findings, the health API reads ``gpu.nvml``, localisation
writes ``localize.suspect``. Typed as string literals there, a renamed check would leave
them reading nothing, silently. Each constant here comes from the check module that
registers the id (``@check(NVML_ID, ...)``) or from its ``declare()`` call, so a rename
changes them too; ``tests/test_id_literals.py`` fails on a new literal outside ``checks/``.

The layers outside the engine may not import ``checks/`` (pure rules, private to the
engine), so they import the ids from here.
"""

from __future__ import annotations

from .checks.cluster_ids import GEMM_ID, MEMORY_BANDWIDTH_ID
from .checks.gpu_inventory import NVML_ID
from .checks.gpu_recovery import RECOVERY_ACTION_ID
from .checks.report_ids import HISTORY_REGRESSION, HISTORY_REPEAT_OFFENDER, LOCALIZE_SUSPECT

__all__ = ["GEMM_ID", "HISTORY_REGRESSION", "HISTORY_REGRESSION_ID", "HISTORY_REPEAT_OFFENDER",
           "HISTORY_REPEAT_OFFENDER_ID", "LOCALIZE_SUSPECT_ID", "MEMORY_BANDWIDTH_ID", "NVML_ID",
           "RECOVERY_ACTION_ID"]

HISTORY_REGRESSION_ID = HISTORY_REGRESSION.id
HISTORY_REPEAT_OFFENDER_ID = HISTORY_REPEAT_OFFENDER.id
LOCALIZE_SUSPECT_ID = LOCALIZE_SUSPECT.id
