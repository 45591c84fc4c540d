"""PASS findings of a cluster check at scale: one per subject up to a size, one per group beyond.

A 10,000-node job has 80,000 GPUs; ``compute.gemm`` alone would yield 320,000 PASS
findings, each built, serialised and scored, for nothing anybody reads one by one. Above
``report.detail_max_nodes`` nodes a check's passes become one finding per group (a GEMM
precision, say) that states how many subjects passed with the spread of their values, and
keeps every subject's value in ``details.subjects`` for plots, scores and the history
(:func:`gpu_preflight.model.per_subject` expands it back). Failures and warnings are never
rolled up: each still names its GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..config.report_schema import report_config
from ..model import Finding, JsonDict, Status
from ..records import ClusterFacts
from ..registry import CheckContext


@dataclass
class _Group:
    label: str
    unit: str | None
    details: dict[str, Any]
    values: dict[str, Any] = field(default_factory=dict)
    ordered: list[float] | None = None  # the values sorted, when the check sorted them already


class Passes:
    r"""A check's PASS findings at scale: the check asks :attr:`rolled` and, when it is set,
    :meth:`record`\ s its passes instead of yielding them one per subject."""

    def __init__(self, ctx: CheckContext, facts: ClusterFacts) -> None:
        self.check_id = ctx.check_id or "cluster"
        self.rolled = facts.num_nodes > report_config(ctx.config).detail_max_nodes
        self.groups: dict[str, _Group] = {}

    def record(self, values: dict[str, Any], *, group: str = "", label: str = "", unit: str | None = None,
               details: dict[str, Any] | None = None, ordered: list[float] | None = None) -> None:
        """At scale: remember many subjects' observed values at once (``{subject: observed}``).

        ``ordered``: the same values, sorted, when the check has them (a GEMM precision's
        median needs them sorted anyway): 80,000 values are not sorted twice.
        """
        g = self.groups.get(group)
        if g is None:
            g = self.groups[group] = _Group(label or self.check_id, unit, dict(details or {}), ordered=ordered)
        else:
            g.ordered = None
        g.values.update(values)

    def findings(self) -> Iterator[Finding]:
        """The rolled-up PASS findings (none on a small cluster)."""
        for g in self.groups.values():
            values = list(g.values.values())
            try:  # measurements are numbers: sort them at C speed, and filter only when they are not
                numbers = g.ordered if g.ordered is not None and len(g.ordered) == len(values) else sorted(values)
                plain = not numbers or (type(numbers[0]) in (float, int) and type(numbers[-1]) in (float, int))
            except TypeError:
                plain = False
            if not plain:
                numbers = sorted([v for v in values if type(v) is float or type(v) is int])
            spread: dict[str, Any] = {"count": len(g.values)}
            text = f"{len(g.values)} subject(s) passed {g.label}"
            if numbers:
                mid = len(numbers) // 2  # sorted already: statistics.median would sort 80,000 values again
                median = numbers[mid] if len(numbers) % 2 else (numbers[mid - 1] + numbers[mid]) / 2
                spread.update(min=numbers[0], median=median, max=numbers[-1])
                unit = f" {g.unit}" if g.unit else ""
                text += f": min {numbers[0]:g}, median {spread['median']:g}, max {numbers[-1]:g}{unit}"
            subjects = JsonDict(g.values)
            if numbers and len(numbers) == len(values):
                subjects.ordered = numbers
            yield Finding(self.check_id, Status.PASS, "cluster", "ok", text, observed=spread, unit=g.unit,
                          details={**g.details, "rolled_up": True, "subjects": subjects})
