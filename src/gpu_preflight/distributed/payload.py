"""What travels between ranks: one rank's result (:class:`RankPayload`) and a node's bundle of
them (:class:`NodeBundle`).

Each rank sends one payload through the job's store; its node leader reads its node's
payloads, moves the per-rank results into columns (:mod:`gpu_preflight.records.columns`)
and posts one bundle; rank 0 reads one bundle per node. Both types round-trip through
JSON with hand-written ``to_dict``/``from_dict`` (no reflection: rank 0 of a large job
decodes ten thousand bundles). A field the sender did not fill is ``None`` and absent from
the dict, as it was absent from the rank's result; keys this version does not know are
kept in ``extra`` and sent on unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import msgspec

__all__ = ["FORMATION_OP", "NodeBundle", "RankPayload"]

FORMATION_OP = "init_process_group"  # a process group that did not form, reported as a failed collective
JsonDict = dict[str, Any]
_OPTIONAL = ("local_rank", "node_rank", "hostname", "node_name", "device", "errors", "collectives", "stack", "gemm",
             "memory", "train", "links", "pingpong", "ddp", "load", "load_error", "load_xids", "node_entry", "identity",
             "connectivity")
_KNOWN = frozenset(("rank", *_OPTIONAL))
_RESULTS = ("gemm", "memory", "train")  # moved into the node's columns by its leader


class RankPayload(msgspec.Struct, frozen=True):
    """One rank's result: who it is, what it measured, what went wrong, and (node leaders) its node.

    ``collectives``: each group's sweep as reported by the group's lowest rank, and every
    failure as this rank saw it; ``node_entry``: the node leader's node section
    (:func:`~gpu_preflight.distributed.rank.node_payload`); ``load``/``load_error`` and
    ``load_xids``: the GPU sampled under the workloads and the Xid events meanwhile;
    ``identity`` (node leaders): who the node is, as it measured itself
    (:class:`~gpu_preflight.backends.launcher.identity.NodeIdentity`), which rank 0 names it by;
    ``connectivity`` (node leaders of multi-node jobs): its name lookups and connects of the other
    nodes (:mod:`gpu_preflight.distributed.connectivity`).
    """

    rank: int
    local_rank: int | None = None
    node_rank: int | None = None
    hostname: str | None = None
    node_name: str | None = None
    device: str | None = None
    errors: list[str] | None = None
    collectives: list[JsonDict] | None = None
    stack: JsonDict | None = None
    gemm: list[JsonDict] | None = None
    memory: JsonDict | None = None
    train: JsonDict | None = None
    links: Any = None
    pingpong: Any = None
    ddp: JsonDict | None = None
    load: JsonDict | None = None
    load_error: str | None = None
    load_xids: JsonDict | None = None
    node_entry: JsonDict | None = None
    identity: JsonDict | None = None
    connectivity: JsonDict | None = None
    extra: Mapping[str, Any] = {}

    def to_dict(self, *, without: tuple[str, ...] = ()) -> JsonDict:
        """The payload as sent (fields left ``None`` are absent); ``without`` leaves fields out."""
        out: JsonDict = {"rank": self.rank}
        for name in _OPTIONAL:
            value = getattr(self, name)
            if value is not None and name not in without:
                out[name] = value
        if self.extra:
            out.update(self.extra)
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankPayload:
        g = d.get
        extra = {} if d.keys() <= _KNOWN else {k: v for k, v in d.items() if k not in _KNOWN}
        return cls(int(d["rank"]), g("local_rank"), g("node_rank"), g("hostname"), g("node_name"), g("device"),
                   g("errors"), g("collectives"), g("stack"), g("gemm"), g("memory"), g("train"), g("links"),
                   g("pingpong"), g("ddp"), g("load"), g("load_error"), g("load_xids"), g("node_entry"),
                   g("identity"), g("connectivity"), extra)

    @property
    def on_gpu(self) -> bool:
        return str(self.device or "").startswith("cuda")


class NodeBundle(msgspec.Struct, frozen=True):
    """One node's payloads for rank 0, arranged so rank 0 never has to walk them one by one.

    ``columns``: GEMM, memory and training results packed into columns
    (:mod:`gpu_preflight.records.columns`); ``index``: ``[rank, node, local_rank, on_gpu]``
    rows laid end to end; ``collectives``: the collective results moved out of the payloads,
    as ``{"groups": [[rank, entry]], "failures": [[rank, entry]]}`` (each group's sweep from
    its lowest rank; every failure as each rank saw it). ``payloads`` hold the rest of each
    payload as a dict, the software stack dropped where it equals the first rank's (rank 0
    reads leaders' only); ``missing``: why a rank of the node sent nothing.
    """

    payloads: dict[int, JsonDict]
    missing: dict[int, str]
    columns: JsonDict
    index: list[Any]
    collectives: dict[str, list[list[Any]]]

    @classmethod
    def build(cls, payloads: Mapping[int, RankPayload], missing: Mapping[int, str]) -> NodeBundle:
        from ..records.columns import columns_of

        ordered = sorted(payloads.items())
        columns = columns_of({r: {kind: getattr(p, kind) for kind in _RESULTS} for r, p in ordered})
        first_stack = ordered[0][1].stack if ordered else None
        index: list[Any] = []
        collectives: dict[str, list[list[Any]]] = {"groups": [], "failures": []}
        rest: dict[int, JsonDict] = {}
        for i, (r, p) in enumerate(ordered):
            index += [r, p.node_rank or 0, p.local_rank or 0, p.on_gpu]
            for e in p.collectives or ():
                if e.get("error"):
                    collectives["failures"].append([r, e])
                if e.get("ranks") and e["ranks"][0] == r and e.get("op") != FORMATION_OP:  # a failure, not a sweep
                    collectives["groups"].append([r, e])
            shared = i > 0 and p.stack == first_stack
            rest[r] = p.to_dict(without=(*_RESULTS, "collectives", "stack") if shared else (*_RESULTS, "collectives"))
        return cls(rest, dict(missing), columns, index, collectives)

    @classmethod
    def from_texts(cls, texts: Mapping[int, str], missing: Mapping[int, str]) -> NodeBundle:
        """The bundle of payloads as their ranks sent them (JSON texts)."""
        return cls.build({r: RankPayload.from_dict(json.loads(t)) for r, t in texts.items()}, missing)

    def to_dict(self) -> JsonDict:
        return {"payloads": {str(r): p for r, p in self.payloads.items()},
                "missing": {str(r): w for r, w in self.missing.items()}, "columns": self.columns,
                "index": self.index, "collectives": self.collectives}

    def to_json(self) -> str:
        return json.dumps(self.to_dict())

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeBundle:
        return cls({int(r): p for r, p in d["payloads"].items()}, {int(r): w for r, w in d["missing"].items()},
                   d.get("columns") or {}, d.get("index") or [], d.get("collectives") or {})
