"""Run history: every run filed in a local SQLite store, judged against earlier runs.

``extract`` reads what the history keeps out of a canonical report, ``store`` files and
queries it, ``compare`` turns it into findings (regressions, repeat-offender GPUs),
``trends`` prints it, ``baseline`` captures a GPU-model profile from known-good numbers.
"""

from __future__ import annotations

from .compare import history_findings
from .extract import RunRecord, extract
from .merge import add_findings
from .store import HistoryStore, default_path

__all__ = ["HistoryStore", "RunRecord", "add_findings", "default_path", "extract", "history_findings"]
