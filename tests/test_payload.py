"""What ranks send (RankPayload) and what node leaders post for rank 0 (NodeBundle): round trips,
absent fields stay absent, unknown keys travel on, NaN travels as the stdlib writes it, the bundle's
columns, index and collectives, and what does not read as its type names the key path."""

from __future__ import annotations

import json
import math
from typing import Any

import msgspec
import pytest

from gpu_preflight.distributed.payload import FORMATION_OP, NodeBundle, RankPayload, WireError
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
    p = RankPayload.from_dict({"rank": 5, "node_rank": 2})
    assert p.to_dict() == msgspec.to_builtins(p) == {"rank": 5, "node_rank": 2}  # omit_defaults: as msgspec writes it


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


def test_a_payload_from_an_older_sender_lacking_newer_keys_reads_and_stays_as_sent() -> None:
    """A rank of a version before load, identity and connectivity: those fields are None, and
    the payload sent on is the text it sent (no key added, none null)."""
    old = {"rank": 9, "local_rank": 1, "node_rank": 4, "hostname": "h4", "device": "cuda:1", "errors": [],
           "collectives": [], "stack": {"torch": "2.1"}}
    p = RankPayload.from_json(json.dumps(old))
    assert p.load is None and p.identity is None and p.connectivity is None and p.extra == {}
    assert p.to_json() == json.dumps(old)


def test_nan_and_infinity_travel_as_the_standard_library_writes_and_reads_them() -> None:
    """A failed GEMM's error and a diverged loss are NaN/inf: written as the bare tokens older peers
    write (msgspec's decoder refuses them, its encoder would write null), read back as floats."""
    d = rank_dict(0)
    d["gemm"][0].update(rel_error=float("nan"), correct=False)
    d["train"].update(loss_end=float("inf"), finite=False)
    text = RankPayload.from_dict(d).to_json()
    assert '"rel_error": NaN' in text and '"loss_end": Infinity' in text
    again = RankPayload.from_json(text)
    assert again.gemm is not None and math.isnan(again.gemm[0]["rel_error"])
    assert again.train is not None and again.train["loss_end"] == math.inf and again.to_json() == text


@pytest.mark.parametrize(("text", "where"), [
    ('{"rank": 1, "node_rank": "one"}', "$.node_rank"),
    ('{"rank": 1, "errors": ["ok", 7]}', "$.errors[1]"),
    ('{"node_rank": 1}', "missing required field `rank`"),
    ('[1, 2]', "Expected `object`, got `array`"),
    ('{"rank": 1', "not JSON"),
])
def test_a_malformed_payload_is_an_error_naming_the_key_path(text: str, where: str) -> None:
    with pytest.raises(WireError) as err:
        RankPayload.from_json(text)
    assert where in str(err.value)


@pytest.mark.parametrize(("bundle", "where"), [
    ({"payloads": {"2": {"rank": 2}}, "missing": {"3": 4}}, "$.missing[...]"),
    ({"payloads": {"2": [2]}, "missing": {}}, "$.payloads[...]"),
    ({"payloads": {"2": {"rank": 2}}, "missing": {}, "collectives": {"groups": [7]}}, "$.collectives[...][0]"),
    ({"missing": {}}, "missing required field `payloads`"),
])
def test_a_malformed_bundle_is_an_error_naming_the_key_path(bundle: dict[str, Any], where: str) -> None:
    with pytest.raises(WireError) as err:
        NodeBundle.from_json(json.dumps(bundle))
    assert where in str(err.value)


def test_a_leader_names_a_rank_whose_payload_does_not_read_and_bundles_the_rest() -> None:
    texts = {0: json.dumps(rank_dict(0)), 1: json.dumps({**rank_dict(1), "local_rank": [1]})}
    bundle = NodeBundle.from_texts(texts, {2: "never joined"})
    assert list(bundle.payloads) == [0] and bundle.index == [0, 0, 0, False]
    assert bundle.missing[2] == "never joined"
    assert bundle.missing[1].startswith("sent a payload that could not be read") and "$.local_rank" in bundle.missing[1]


def test_rank_files_left_behind_are_read_back_as_payloads(tmp_path: Any) -> None:
    """The supervisor's gather from rank files: a whole payload is read, one cut short when its rank
    died is that rank missing with where it broke, a rank with no file missing with its exit code."""
    from gpu_preflight.distributed.launch import Supervised, gathered_from_files

    (tmp_path / "rank0.json").write_text(json.dumps(rank_dict(0)))
    (tmp_path / "rank1.json").write_text(json.dumps(rank_dict(1))[:40])
    got = gathered_from_files(Supervised(tmp_path, None, {2: 1}), 3, {"hostname": "h0"})
    assert got["payloads"] == {0: rank_dict(0)}
    assert got["missing"][1].startswith("rank 1 on h0 sent a payload that could not be read (not JSON")
    assert got["missing"][2] == "rank 2 on h0 exited with code 1 before reporting"


def test_a_rank_sends_its_own_results_unvalidated_and_the_reader_names_the_slip() -> None:
    """A rank whose GPU-only result came out of the wrong type still sends everything else; the
    leader's read of it (validated) is what names the key path."""
    sent = RankPayload.own({"rank": 3, "errors": [], "memory": ["not", "an", "object"], "future_key": 1})
    assert sent.rank == 3 and sent.extra == {"future_key": 1}
    with pytest.raises(WireError, match=r"\$\.memory"):
        RankPayload.from_json(sent.to_json())
