"""``cluster_info.expected_total_gpus`` is an integer in every distributed run (issue 29 item 3).

The SageMaker document's report has an integer there; a CPU-rank run used to write null.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from gpu_preflight.cluster.aggregate import expected_gpus


def _entries(*gpus: int) -> list[dict[str, Any]]:
    return [{"section": {"gpu": {f"gpu_{i}": {} for i in range(n)}}} for n in gpus]


@pytest.mark.parametrize(("gpu_ranks", "per_node", "seen", "expected"), [
    (True, None, (8, 8), 16),  # GPU ranks: the launcher placed one per GPU (world size 16)
    (True, 4, (8, 8), 8),  # --expect-gpus 4 per node wins
    (False, None, (8, 7), 16),  # CPU ranks: the most any node listed x nodes (the short node shows)
    (False, None, (0, 0), 0),  # no GPU anywhere, none expected: 0, not null
    (False, 0, (0, 0), 0),
])
def test_expected_total(gpu_ranks: bool, per_node: int | None, seen: tuple[int, ...], expected: int) -> None:
    facts = SimpleNamespace(num_nodes=len(seen), gpu_ranks=gpu_ranks, world_size=16)
    assert expected_gpus(facts, _entries(*seen), per_node) == expected  # type: ignore[arg-type]
