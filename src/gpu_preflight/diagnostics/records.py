"""The diagnostics' facts where probes and checks have always found them: now in :mod:`..records.tools`."""

from __future__ import annotations

from ..records.tools import (
    DcgmFacts,
    FabricFacts,
    IbToolRun,
    InfinibandFacts,
    NcclTestRun,
    NcclTestsFacts,
    PcieFacts,
    ToolRun,
)

__all__ = ["DcgmFacts", "FabricFacts", "IbToolRun", "InfinibandFacts", "NcclTestRun", "NcclTestsFacts", "PcieFacts",
           "ToolRun"]
