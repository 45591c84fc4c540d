"""The host's process list, kept by a monitor between ticks and re-read on a cadence.

Walking ``/proc`` for every process name is the dearest host reading (4 ms for 100
processes on the 2-core dev VM, proportionally more on a busy node), and only
``system.services`` judges it: whether a required daemon (``nvidia-persistenced``,
``nv-fabricmanager``) runs. A daemon that dies is seen at the next scan, so a monitor
re-reads the list once it is ``system.process_scan_refresh_s`` old instead of every tick.
A scan that fails is not kept: the next tick asks again, and the check says ERROR meanwhile.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

from .system import process_names

__all__ = ["ProcessScan"]


class ProcessScan:
    """The last successful process scan and when it was taken."""

    def __init__(self, scan: Callable[[], list[str]] | None = None) -> None:
        self._scan = scan or process_names
        self._names: list[str] | None = None
        self._read_at = -math.inf
        self._lock = threading.Lock()
        self.scans = 0

    def names(self, max_age_s: float) -> list[str]:
        """Process names no older than ``max_age_s`` (a fresh scan when the kept one is older)."""
        with self._lock:
            now = time.monotonic()
            if self._names is None or now - self._read_at >= max_age_s:
                self._names = self._scan()  # an exception keeps nothing: the caller reports it
                self._read_at = now
                self.scans += 1
            return self._names
