"""The scored report: the findings layer's assembly (:mod:`.canonical`,
:mod:`gpu_preflight.cluster.aggregate`) with the report layer's health scores and advice.

Scoring and advice (:mod:`.advice`, :mod:`.assessment`) read the verdict the findings
reached, so they sit above them; the findings take the scorer as an argument and never
import it. These are the entry points that score by default, as the public
``gpu_preflight.build_report`` always has; ``assess=False`` leaves the scores out for a
caller that adds them once the findings are final.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..findings import canonical

if TYPE_CHECKING:
    from ..config import Config
    from ..config.report_schema import ReportConfig
    from ..findings.canonical import Assessor
    from ..findings.model import ClusterReport
    from ..model import NodeReport

__all__ = ["assemble", "assemble_report", "build", "build_cluster_report", "build_report"]


def _scorer(assess: bool) -> Assessor | None:
    """:func:`~.advice.advise` when ``assess``; imported only then (an unscored run never loads the scorer)."""
    if not assess:
        return None
    from .advice import advise

    return advise


def build_report(nodes: list[NodeReport], *, assess: bool = True, **kwargs: Any) -> dict[str, Any]:
    """:func:`.canonical.build_report`, scored and advised unless ``assess`` is False: the
    report's JSON dict, as the library's ``gpu_preflight.build_report`` has always returned it
    (:func:`build` is the typed report)."""
    return canonical.build_report(nodes, assess=_scorer(assess), **kwargs)


def build(nodes: list[NodeReport], *, assess: bool = True, config: ReportConfig | None = None,
          **kwargs: Any) -> ClusterReport:
    """The typed report for one or more node reports (``node_0`` ... in the given order), scored
    and advised under ``config`` unless ``assess`` is False; ``kwargs`` as for :func:`assemble`."""
    if not nodes:
        raise ValueError("a report needs at least one node")
    infos = kwargs.pop("node_infos", None) or [{}] * len(nodes)
    entries = [canonical.node_entry(n, f"node_{i}", infos[i]) for i, n in enumerate(nodes)]
    return assemble(entries, fail_on=nodes[0].fail_on, assess=assess, config=config, **kwargs)


def assemble_report(entries: list[dict[str, Any]], *, fail_on: str, assess: bool = True,
                    **kwargs: Any) -> dict[str, Any]:
    """:func:`.canonical.assemble_report`, scored and advised unless ``assess`` is False."""
    return canonical.assemble_report(entries, fail_on=fail_on, assess=_scorer(assess), **kwargs)


def assemble(entries: list[dict[str, Any]], *, fail_on: str, assess: bool = True,
             config: ReportConfig | None = None, **kwargs: Any) -> ClusterReport:
    """:func:`.canonical.assemble`, scored and advised under ``config`` unless ``assess`` is False."""
    return canonical.assemble(entries, fail_on=fail_on, assess=_scorer(assess), config=config, **kwargs)


def build_cluster_report(gathered: dict[str, Any], config: Config, *, assess: bool = True,
                         **kwargs: Any) -> tuple[ClusterReport, int]:
    """:func:`gpu_preflight.cluster.aggregate.build_cluster_report`: the typed report of a
    gathered run and its exit code, scored and advised unless ``assess`` is False."""
    from ..cluster.aggregate import build_cluster_report as aggregate

    return aggregate(gathered, config, assess=_scorer(assess), **kwargs)
