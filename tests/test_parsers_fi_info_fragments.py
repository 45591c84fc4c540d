"""``fi_info -v`` pasted from inside an entry (issue 27; the real text is ofiwg/libfabric#9158 in
tests/fixtures/field/fabric). fi_info's verbose tree (util/info.c, fi_tostr) prints ``fi_info:`` then its
attributes, the provider last under ``fi_fabric_attr: prov_name:``, entries separated by ``---``: a paste that
starts inside one entry and stops inside another shows one whole provider between the cuts."""

from __future__ import annotations

import pytest

from gpu_preflight.config import Config
from gpu_preflight.evidence import judge_text
from gpu_preflight.model import Status
from gpu_preflight.parsers.detect import detect_kind, parse_text
from gpu_preflight.parsers.errors import ParseError

TAIL_OF_ONE = ("        mr_cnt: 0\n"
               "    fi_fabric_attr:\n        name: fe80::/64\n        prov_name: tcp;ofi_rxm\n"
               "        prov_version: 118.10\n    nic: (nil)\n---\n")
HEAD_OF_NEXT = ("fi_info:\n    caps: [ FI_MSG, FI_RMA ]\n    mode: [ FI_BUFFERED_RECV ]\n"
                "    fi_tx_attr:\n        caps: [ FI_MSG, FI_RMA ]\n        inject_size: 64\n")


def test_a_verbose_paste_cut_inside_two_entries_keeps_the_provider_it_shows() -> None:
    text = TAIL_OF_ONE + HEAD_OF_NEXT
    assert detect_kind(text) == "fi-info"
    _kind, record = parse_text(text, "fi-info")
    assert [(p.provider, p.fabric) for p in record.providers] == [("tcp;ofi_rxm", "fe80::/64")]
    assert {(f.status, f.check_id) for f in judge_text(text, Config(), source="x")} == {(Status.PASS,
                                                                                         "fabric.fi_info")}


def test_an_entry_between_two_whole_ones_without_its_provider_is_still_an_error() -> None:
    whole = "fi_info:\n    fi_fabric_attr:\n        name: a\n        prov_name: tcp\n---\n"
    middle = "fi_info:\n    caps: [ FI_MSG ]\n---\n"
    with pytest.raises(ParseError, match="without a provider name"):
        parse_text(whole + middle + whole, "fi-info")
