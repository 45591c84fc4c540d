"""A node's RDMA rails: which adapters form its back-end fabric, and whether one of them is gone.

A GPU node's back-end fabric is a set of identical adapters, one per GPU or GPU pair (8 x
ConnectX-7 on an HGX H100), all cabled. Two rules read that set, for a live node (``ib.ports``
over ``/sys/class/infiniband``) and for saved ``ibstat``/``ibstatus``/``ibv_devinfo`` output
alike, since both go through the one ``ibstat`` judge (:mod:`.evidence_fabric`):

* :func:`rail_sets`: a port that is down while most of its model's ports are up is a missing
  rail, not an unused NIC;
* :func:`missing_hcas`: an adapter that is not there at all (fewer adapters of the rail model
  than the profile's ``perf.network_nics_per_node``), or that is listed without a single port
  while its siblings have theirs, is a missing rail too. No port-level rule can see it: a
  vanished HCA has no port to be down.

Both only ever add a failure where the set is evidently meant to be whole (more than half of it,
and at least two, present): a node with one or two front-end NICs and no back-end fabric is not a
node with six rails missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from ..model import Finding, Status

if TYPE_CHECKING:
    from ..config import Config
    from ..records.fabric import IbDevicesRecord

__all__ = ["HCA_MISSING", "MissingHcas", "hca_missing_findings", "missing_hcas", "rail_sets"]

HCA_MISSING = "hca_missing"  # the finding code (``ib.ports``; its operator action: diag_infiniband.IB_PORT_ACTIONS)


def _is_set(present: int, total: int) -> bool:
    """More than half of a set of ``total`` (and at least two) is present: the set is meant to be whole."""
    return present >= 2 and 2 * present > total


def rail_sets(record: IbDevicesRecord) -> dict[str, tuple[int, int]]:
    """Adapter models whose ports form a multi-rail RDMA set that is in use: model -> (active, total).

    When most of a model's ports (more than half, and at least two) are ACTIVE, the set is
    evidently meant to be up, and a sibling that is down is a missing rail — the collectives
    lose its share of the bandwidth or fail over it — not an unused NIC. A model with half or
    fewer of its ports up (a dual-port front-end card with one cable) is not such a set, and its
    down ports keep the unused-NIC WARN. Only models with a port down are listed.

    Rails are separate cards: when every port's adapter is known (its system image GUID) and the
    active ports all sit on one card, they are that card's ports (a GB10's QSFP cage shows as
    two PCIe functions per port, one cage cabled), not a set of rails, however many are up.
    """
    counts: dict[str, list[int]] = {}
    cards: dict[str, set[str | None]] = {}  # model -> the adapters (system image GUIDs) of its active ports
    for device in record.devices:
        if not device.ca_type:
            continue
        for port in device.ports:
            up = port.state == "ACTIVE" and port.physical_state in ("LINKUP", None)
            tally = counts.setdefault(device.ca_type, [0, 0])
            tally[0] += up
            tally[1] += 1
            if up:
                cards.setdefault(device.ca_type, set()).add(device.system_guid)
    return {model: (up, total) for model, (up, total) in counts.items()
            if _is_set(up, total) and up < total and _several_cards(cards.get(model, set()))}


def _several_cards(guids: set[str | None]) -> bool:
    """Whether active ports with these adapter GUIDs can be rails: on two cards or more, or on cards not known."""
    return None in guids or len(guids) >= 2


class MissingHcas(msgspec.Struct, frozen=True):
    """Adapters of the rail model that are not there: ``present`` have ports, ``portless`` are
    listed without one, ``expected`` is the profile's count (None when it names none)."""

    model: str
    present: list[str]
    portless: list[str]
    expected: int | None

    @property
    def missing(self) -> int:
        """How many rails the node lacks: the profile's shortfall, or the port-less adapters."""
        short = self.expected - len(self.present) if self.expected is not None else 0
        return max(short, len(self.portless))


def missing_hcas(record: IbDevicesRecord, expected: int | None) -> MissingHcas | None:
    """The rail model's missing adapters, or None when the set is whole (or is no rail set).

    The rail model is the adapter model with the most adapters that list a port (ties: none is
    judged, the set is ambiguous). It lacks adapters when ``expected`` (the profile's NIC count)
    is more than it has while it has more than half of them, or when an adapter of the model is
    listed with no port while more than half of the model's adapters (and at least two) have
    theirs. Adapters without a model (EFA lists none) are not judged: their set cannot be told.
    """
    by_model: dict[str, tuple[list[str], list[str]]] = {}
    for device in record.devices:
        if device.ca_type:
            present, portless = by_model.setdefault(device.ca_type, ([], []))
            (present if device.ports else portless).append(device.name)
    if not by_model:
        return None
    ranked = sorted(by_model.items(), key=lambda kv: len(kv[1][0]), reverse=True)
    if len(ranked) > 1 and len(ranked[0][1][0]) == len(ranked[1][1][0]):
        return None
    model, (present, portless) = ranked[0]
    short = expected is not None and len(present) < expected and _is_set(len(present), expected)
    hollow = bool(portless) and _is_set(len(present), len(present) + len(portless))
    if not (short or hollow):
        return None
    return MissingHcas(model, present, portless if hollow else [], expected)


def hca_missing_findings(record: IbDevicesRecord, config: Config, source: str) -> list[Finding]:
    """The ``ib.ports`` FAIL for a rail model that lacks adapters (:func:`missing_hcas`), if any.

    The expected count is ``perf.network_nics_per_node``: the profile's back-end NICs per node
    (the same number the multi-node bandwidth bound uses), so a saved ``ibstat`` judged with
    ``--profile`` and a live node whose profile matched are held to one count.
    """
    expected = config.perf.network_nics_per_node
    gone = missing_hcas(record, expected)
    if gone is None:
        return []
    parts = []
    if gone.expected is not None and len(gone.present) < gone.expected:
        parts.append(f"{len(gone.present)} of the {gone.expected} {gone.model} adapters the profile expects are "
                     "present (perf.network_nics_per_node)")
    if gone.portless:
        parts.append(f"{', '.join(gone.portless)} ({gone.model}) list(s) no port while "
                     f"{len(gone.present)} sibling(s) do")
    return [Finding("ib.ports", Status.FAIL, source, HCA_MISSING, "; ".join(parts) + ": a rail is missing",
                    observed=len(gone.present), expected=gone.expected if gone.expected is not None else
                    len(gone.present) + len(gone.portless), unit="adapters",
                    details={"model": gone.model, "present": gone.present, "portless": gone.portless,
                             "missing": gone.missing},
                    recommendation="An adapter of the node's back-end fabric is gone (fallen off the PCIe bus, "
                                   "failed firmware, or not cabled and not probed): check dmesg for mlx5 "
                                   "errors and `lspci | grep Mellanox`; drain the node until the adapter is "
                                   "back or replaced: every collective over it loses a rail.")]
