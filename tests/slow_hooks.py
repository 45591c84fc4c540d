"""A rank hook that holds every rank for :data:`PAUSE_S` as it enters the ``train`` stage, so a
test can tell lines printed as workloads finish from lines printed after the gather."""

from __future__ import annotations

import time

PAUSE_S = 3.0
HOOKS_REF = "tests.slow_hooks:hooks"


class PauseAtTrain:
    def stage(self, rank: int, name: str) -> None:
        if name == "train":
            time.sleep(PAUSE_S)


hooks = PauseAtTrain()
