"""The PASS findings of a cluster check: one per subject on a small cluster, one per group at scale.

A 10,000-node job has 80,000 GPUs; ``compute.gemm`` alone would yield 320,000 PASS
findings, each built, serialised and scored, for nothing anybody reads one by one. So a
cluster check never builds its passes itself: it hands each batch of passing subjects to
:meth:`Passes.add`, with how to build one subject's finding and the values the subjects
measured (a :class:`Series` per group), and says where the passes belong in its findings
(:meth:`Passes.add` where it judged them, :meth:`Passes.findings` once after). This module
alone decides, from the node count against ``report.detail_max_nodes``, what comes out:

- up to that size, each subject's own finding, where the check added it;
- above it, one finding per (check, group) that states how many subjects passed with the
  spread of their values, and keeps every subject's value in ``details.subjects`` for
  plots, scores and the history (:func:`gpu_preflight.model.per_subject` expands it back).

Failures and warnings never come here: each still names its GPU.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from itertools import compress
from typing import Any

import msgspec

from ..config.report_schema import report_config
from ..model import Finding, JsonDict, Status
from ..records.cluster import ClusterView
from ..registry import CheckContext


class Series(msgspec.Struct, frozen=True):
    """What a batch of passing subjects measured for one group (a GEMM precision, a memory
    direction): one value per subject, in the subjects' order, and how the group is named."""

    group: str
    values: Sequence[Any]
    label: str
    unit: str | None = None
    details: Mapping[str, Any] = {}


class _Group(msgspec.Struct):
    """One group of like measurements across nodes: its label, unit, the details each came with and the values."""

    label: str
    unit: str | None
    details: dict[str, Any]
    values: dict[str, Any] = {}


class Passes:
    """A cluster check's passes, emitted one per subject or rolled up per group (see the module)."""

    def __init__(self, ctx: CheckContext, facts: ClusterView, *, label: str | None = None) -> None:
        self.check_id = ctx.check_id or "cluster"
        self.label = label or self.check_id  # what the passes of :meth:`add_finding` passed
        self._rolled = facts.num_nodes > report_config(ctx.config).detail_max_nodes
        self._groups: dict[str, _Group] = {}

    def add(self, subjects: Sequence[str], finding: Callable[[int], Finding], *series: Series,
            judged: Collection[int] = ()) -> Iterator[Finding]:
        """These subjects passed, but for the positions in ``judged`` (their findings are made
        already): ``finding(i)`` is the ``i``-th subject's PASS finding, ``series`` the values
        the subjects measured, per group, in the same order. Yields the findings on a small
        cluster; at scale it yields nothing and keeps the values for :meth:`findings`."""
        if not self._rolled:
            for i in range(len(subjects)):
                if i not in judged:
                    yield finding(i)
            return
        keep = [i not in judged for i in range(len(subjects))] if judged else None
        names = subjects if keep is None else list(compress(subjects, keep))
        for s in series:
            g = self._groups.get(s.group)
            if g is None:
                g = self._groups[s.group] = _Group(s.label, s.unit, dict(s.details))
            g.values.update(zip(names, s.values if keep is None else compress(s.values, keep), strict=True))

    def add_finding(self, finding: Finding) -> Iterator[Finding]:
        """One subject's finding, already built: at scale a PASS is rolled into the check's
        one group (its numeric ``observed`` kept, named by ``label``), anything else comes out
        as it is."""
        if finding.status is not Status.PASS:
            yield finding
            return
        observed = finding.observed if isinstance(finding.observed, (int, float)) else None
        yield from self.add((finding.subject,), lambda _: finding,
                            Series("", (observed,), self.label, finding.unit))

    def findings(self) -> Iterator[Finding]:
        """The rolled-up PASS findings, one per group (none on a small cluster)."""
        for g in self._groups.values():
            yield _rolled_up(self.check_id, g)


def _rolled_up(check_id: str, g: _Group) -> Finding:
    """One group's passes as one finding: how many, the spread of their numeric values, every value."""
    values = list(g.values.values())
    try:  # measurements are numbers: sort them at C speed, and filter only when they are not
        numbers = sorted(values)
        plain = not numbers or (type(numbers[0]) in (float, int) and type(numbers[-1]) in (float, int))
    except TypeError:
        plain = False
    if not plain:
        numbers = sorted([v for v in values if type(v) is float or type(v) is int])
    spread: dict[str, Any] = {"count": len(values)}
    text = f"{len(values)} subject(s) passed {g.label}"
    if numbers:
        mid = len(numbers) // 2  # sorted already: statistics.median would sort 80,000 values again
        median = numbers[mid] if len(numbers) % 2 else (numbers[mid - 1] + numbers[mid]) / 2
        spread.update(min=numbers[0], median=median, max=numbers[-1])
        unit = f" {g.unit}" if g.unit else ""
        text += f": min {numbers[0]:g}, median {median:g}, max {numbers[-1]:g}{unit}"
    return Finding(check_id, Status.PASS, "cluster", "ok", text, observed=spread, unit=g.unit,
                   details={**g.details, "rolled_up": True, "subjects": JsonDict(g.values)})
