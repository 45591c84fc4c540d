"""What travels between ranks: a rank's hello on arriving (:class:`Hello`), one rank's result
(:class:`RankPayload`) and a node's bundle of them (:class:`NodeBundle`).

Each rank sends one payload through the job's store; its node leader reads its node's
payloads, moves the per-rank results into columns (:mod:`gpu_preflight.records.columns`)
and posts one bundle; rank 0 reads one bundle per node. Both are ``msgspec`` structs: what is
read back is validated against their types (:func:`read`), and a payload or bundle that is not
what it claims is a :class:`WireError` naming the key path, which the reader reports as the
ranks it stood for (:mod:`.gather`), never a crash and never a pass. A field the sender did not
fill is ``None`` and absent from the JSON (``omit_defaults``), as it was absent from the rank's
result; keys this version does not know are kept in ``extra`` and sent on unchanged (msgspec
drops unknown keys, so :meth:`RankPayload.from_dict` sets them aside by hand).

The text on the wire is still written by :func:`json.dumps`: a failed GEMM's error and a
diverged loss are NaN, which the standard library writes as the bare ``NaN`` token and reads
back as NaN, as every older peer does; msgspec's encoder would write ``null`` (rank 0 would read
``None`` where it reads NaN) and its decoder refuses the token. So :func:`read` parses with
msgspec's decoder (about three times the standard library's speed on a node's bundle) and
falls back to :func:`json.loads` for a text holding such a token.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, TypeVar

import msgspec

__all__ = ["BUNDLE", "FORMATION_OP", "PAYLOAD", "Hello", "NodeBundle", "RankPayload", "WireError", "read",
           "unreadable"]

FORMATION_OP = "init_process_group"  # a process group that did not form, reported as a failed collective
JsonDict = dict[str, Any]
_RESULTS = ("gemm", "memory", "train")  # moved into the node's columns by its leader
T = TypeVar("T")


class WireError(ValueError):
    """A payload or bundle that is not JSON or not of its type; the message names the key path
    (``Expected `int | null`, got `str` - at `$.node_rank```)."""


def read(text: str | bytes, kind: type[T]) -> T:
    """``text`` decoded and validated as ``kind``; :class:`WireError` naming the key path if it is not.

    Typed by ``msgspec.convert`` after decoding, not by ``msgspec.json.decode(type=...)``: the
    stdlib fallback (NaN and infinity tokens, see the module) yields objects, and one validation
    serves both. Not strict: a bundle's rank keys are JSON strings (``"3"``) read as ints, as
    a rank sent as ``"3"`` was read by ``int()`` before.
    """
    return _convert(_parse(text), kind)


def _parse(text: str | bytes) -> Any:
    """The JSON value of ``text``: msgspec's decoder, the stdlib's where a NaN/Infinity token stops it."""
    try:
        return msgspec.json.decode(text)
    except msgspec.DecodeError:  # a NaN/Infinity token json.dumps wrote, or not JSON at all
        try:
            return json.loads(text)
        except ValueError as exc:
            raise WireError(f"not JSON: {exc}") from exc


def _convert(data: Any, kind: type[T]) -> T:
    try:
        return msgspec.convert(data, kind, strict=False)
    except msgspec.ValidationError as exc:
        raise WireError(str(exc)) from exc


class Hello(msgspec.Struct, frozen=True):
    """What a rank says in the store on arriving (``<PREFIX>/hello/<rank>``): where it runs and its
    process id. Rank 0 names a rank that never reported by its hello (or a node-mate's); a
    leaving rank waits for the processes its node-mates' hellos name on its own host
    (:func:`~.store.local_pids`). Read validated (:meth:`from_json`): a hello that is not one
    names nobody and no process, exactly as a hello never said.

    Sent as :func:`json.dumps` writes the fields in this order, the text every earlier version
    wrote and reads, so ranks of two versions in one job read each other's hellos.
    """

    hostname: str
    node_name: str
    node_rank: int
    local_rank: int
    pid: int

    def to_json(self) -> str:
        return json.dumps(msgspec.structs.asdict(self))

    @classmethod
    def from_json(cls, text: str | bytes) -> Hello:
        """A hello as its rank said it, validated (:class:`WireError` naming the key path)."""
        return read(text, cls)


class RankPayload(msgspec.Struct, frozen=True, omit_defaults=True):
    """One rank's result: who it is, what it measured, what went wrong, and (node leaders) its node.

    ``collectives``: each group's sweep as reported by the group's lowest rank, and every
    failure as this rank saw it; ``node_entry``: the node leader's node section
    (:func:`~gpu_preflight.distributed.rank.node_payload`); ``load``/``load_error`` and
    ``load_xids``: the GPU sampled under the workloads and the Xid events meanwhile;
    ``identity`` (node leaders): who the node is, as it measured itself
    (:class:`~gpu_preflight.backends.launcher.identity.NodeIdentity`), which rank 0 names it by;
    ``connectivity`` (node leaders of multi-node jobs): its name lookups and connects of the other
    nodes (:mod:`gpu_preflight.distributed.connectivity`). A new field is one line here, before
    ``extra`` (fields are sent in this order).
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
    extra: dict[str, Any] = {}

    def to_dict(self, *, without: tuple[str, ...] = ()) -> JsonDict:
        """The payload as sent (fields left ``None`` are absent, unknown keys last); ``without`` leaves fields out.

        A shallow copy (``msgspec.structs.asdict``) leaving out what ``omit_defaults`` leaves out
        of msgspec's encoders: ``to_builtins`` would copy each node entry deep, only for
        :func:`json.dumps` to walk it again (0.45 against 0.07 ms a node leader's payloads)."""
        out = {k: v for k, v in msgspec.structs.asdict(self).items() if v is not None and k not in without}
        out.update(out.pop("extra"))
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), default=str)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> RankPayload:
        """``d`` validated as a payload (:class:`WireError` naming the key path), its unknown keys in ``extra``."""
        if not isinstance(d, Mapping) or d.keys() <= _KNOWN:  # not an object: the error says what it is
            return _convert(d, cls)
        return _convert(_extra_aside(d), cls)

    @classmethod
    def own(cls, d: Mapping[str, Any]) -> RankPayload:
        """A rank's own results as it sends them, not validated: a type slip in a result only a GPU
        produces (load, memory, load_xids) must not cost the rank its whole report; the readers
        (:meth:`from_dict`, the leader and rank 0) validate and name what does not read."""
        return cls(**_extra_aside(d))

    @classmethod
    def from_json(cls, text: str | bytes) -> RankPayload:
        """A payload as its rank sent it, validated (:class:`WireError` naming the key path)."""
        return cls.from_dict(_parse(text))

    @property
    def on_gpu(self) -> bool:
        return str(self.device or "").startswith("cuda")


_KNOWN = frozenset(RankPayload.__struct_fields__) - {"extra"}


def _extra_aside(d: Mapping[str, Any]) -> dict[str, Any]:
    """``d``'s known keys, and its unknown ones under ``extra`` (msgspec would drop them)."""
    return {**{k: v for k, v in d.items() if k in _KNOWN}, "extra": {k: v for k, v in d.items() if k not in _KNOWN}}


class NodeBundle(msgspec.Struct, frozen=True):
    """One node's payloads for rank 0, arranged so rank 0 never has to walk them one by one.

    ``columns``: GEMM, memory and training results packed into columns
    (:mod:`gpu_preflight.records.columns`); ``index``: ``[rank, node, local_rank, on_gpu]``
    rows laid end to end; ``collectives``: the collective results moved out of the payloads,
    as ``{"groups": [[rank, entry]], "failures": [[rank, entry]]}`` (each group's sweep from
    its lowest rank; every failure as each rank saw it). ``payloads`` hold the rest of each
    payload as a dict, the software stack dropped where it equals the first rank's (rank 0
    reads leaders' only); ``missing``: why a rank of the node sent nothing, or nothing readable.
    Rank 0 validates the bundle's own shape; each payload in it was validated by the leader
    (:meth:`from_texts`) and stays a dict, unknown keys and all.
    """

    payloads: dict[int, JsonDict]
    missing: dict[int, str]
    columns: JsonDict = {}
    index: list[Any] = []
    collectives: dict[str, list[list[Any]]] = {}

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
        """The bundle of payloads as their ranks sent them (JSON texts); a text that does not read
        as a payload makes its rank missing, saying why with the key path."""
        payloads: dict[int, RankPayload] = {}
        why = dict(missing)
        for r, text in texts.items():
            try:
                payloads[r] = RankPayload.from_json(text)
            except WireError as exc:
                why[r] = unreadable(PAYLOAD, exc)
        return cls.build(payloads, why)

    def to_json(self) -> str:
        """The bundle as posted: rank keys written as strings by :func:`json.dumps`, nothing copied deep."""
        return json.dumps(msgspec.structs.asdict(self))

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> NodeBundle:
        """``d`` validated as a bundle (:class:`WireError` naming the key path)."""
        return _convert(d, cls)

    @classmethod
    def from_json(cls, text: str | bytes) -> NodeBundle:
        """A bundle as its leader posted it, validated (:class:`WireError` naming the key path)."""
        return read(text, cls)


PAYLOAD = "sent a payload that could not be read"
BUNDLE = "was in its node leader's bundle, which could not be read"


def unreadable(what: str, exc: WireError) -> str:
    """Why a rank counts as missing when what stood for it (:data:`PAYLOAD`, :data:`BUNDLE`) could not be read."""
    return f"{what} ({exc})"
