"""What ranks send (RankPayload) and what node leaders post for rank 0 (NodeBundle): round trips,
absent fields stay absent, unknown keys travel on, and the bundle's columns, index and collectives."""

from __future__ import annotations

import json
from typing import Any

from gpu_preflight.distributed.payload import FORMATION_OP, NodeBundle, RankPayload
from gpu_preflight.records.columns import unpack


def rank_dict(rank: int, *, stack: str = "torch 2.4", failed: bool = False) -> dict[str, Any]:
    node, local = divmod(rank, 2)
    group = [node * 2, node * 2 + 1]
    sweep = {"op": "all_reduce", "group": f"node{node}", "ranks": group, "success": True, "error": None,
             "results": [], "scope": "intra_node"}
    collectives = [sweep] if local == 0 else []
    if failed:
        collectives.append({"op": FORMATION_OP, "group": "all", "ranks": [0, 1, 2, 3], "success": False,
                            "error": "process group not formed", "results": []})
    return {"rank": rank, "local_rank": local, "node_rank": node, "hostname": f"h{node}", "node_name": f"h{node}",
            "device": "cpu", "errors": ["process group not formed"] if failed else [], "collectives": collectives,
            "stack": {"torch": stack},
            "gemm": [{"dtype": "fp32", "n": 512, "tflops": 0.1 + rank, "correct": True, "rel_error": 0.0,
                      "error": None}],
            "train": {"loss_start": 1.0, "loss_end": 0.5, "finite": True, "improved": True, "error": None},
            "load_error": "no GPU", "future_field": {"kept": rank}}


def test_rank_payload_round_trips_exactly() -> None:
    d = rank_dict(1, failed=True)
    p = RankPayload.from_dict(d)
    assert p.to_dict() == d and json.loads(p.to_json()) == d
    assert p.extra == {"future_field": {"kept": 1}} and not p.on_gpu
    assert "memory" not in p.to_dict() and "ddp" not in p.to_dict()  # not measured: absent, not null


def test_a_sparse_payload_stays_sparse() -> None:
    assert RankPayload.from_dict({"rank": 5, "node_rank": 2}).to_dict() == {"rank": 5, "node_rank": 2}


def test_node_bundle_moves_results_into_columns() -> None:
    texts = {r: json.dumps(rank_dict(r, stack="same" if r < 2 else "other", failed=r == 1)) for r in (0, 1)}
    bundle = NodeBundle.from_texts(texts, {})
    assert bundle.index == [0, 0, 0, False, 1, 0, 1, False]
    for p in bundle.payloads.values():
        assert not {"gemm", "train", "memory", "collectives"} & set(p)
    assert "stack" in bundle.payloads[0] and "stack" not in bundle.payloads[1]  # same as the first rank's
    assert bundle.payloads[1]["future_field"] == {"kept": 1}
    gemm = unpack([bundle.columns]).gemm["fp32"]
    assert gemm.rank == [0, 1] and gemm.tflops == [0.1, 1.1]
    assert [r for r, _ in bundle.collectives["groups"]] == [0]  # the sweep, not the formation failure
    assert [(r, e["op"]) for r, e in bundle.collectives["failures"]] == [(1, FORMATION_OP)]


def test_node_bundle_keeps_a_different_stack_and_round_trips() -> None:
    texts = {2: json.dumps(rank_dict(2)), 3: json.dumps(rank_dict(3, stack="torch 2.5"))}
    bundle = NodeBundle.from_texts(texts, {4: "never joined"})
    assert bundle.payloads[3]["stack"] == {"torch": "torch 2.5"}
    again = NodeBundle.from_dict(json.loads(bundle.to_json()))
    assert again == bundle and again.missing == {4: "never joined"}
