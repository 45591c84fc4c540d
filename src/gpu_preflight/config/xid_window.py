"""The Xid window and tally, as config and its callers have always imported them.

They live in :mod:`gpu_preflight.records.xid` (one place below config, parsers and checks,
so the Xid policy and the log parsers share them without importing each other).
"""

from __future__ import annotations

from ..records.xid import (
    DEDUP_KEYS_MAX,
    EXAMPLES,
    XidCounter,
    XidGroup,
    XidTally,
    XidWindow,
    count_events,
    xid_window,
)

__all__ = ["DEDUP_KEYS_MAX", "EXAMPLES", "XidCounter", "XidGroup", "XidTally", "XidWindow", "count_events",
           "xid_window"]
