"""The Xid catalogue as data: every published Xid has a verdict, an action and a doc line, and the docs
are rendered from it; a fatal Xid is never dropped silently by the window.

The catalogue (``data/xid_policy.toml``) transcribes NVIDIA's Xid catalog (its header names the
edition); ``docs/xids.md`` is rendered from it and the README points there instead of listing
numbers (it once said 94/95 FAIL while the check warned on 94).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_preflight.actions import BY_NVIDIA_ACTION, Action
from gpu_preflight.config.loader import ConfigError
from gpu_preflight.config.xid_docs import main as render_main
from gpu_preflight.config.xid_docs import operator_action, render
from gpu_preflight.config.xid_policy import (
    ACTIONS,
    CAUSES,
    RECOVERY_ACTIONS,
    SEVERITIES,
    SHIPPED_POLICY,
    XidPolicy,
    load_xid_policy,
)
from gpu_preflight.parsers import dmesg, xid_timeline
from gpu_preflight.parsers.kernel_log import KernelLineReader
from gpu_preflight.records.xid import XidCounter, XidEvent, xid_window

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs" / "xids.md"
NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def shipped() -> XidPolicy:
    return load_xid_policy()


# --- the catalogue is complete --------------------------------------------------------------------


def test_catalogue_names_its_edition_and_covers_the_published_range_without_gaps(shipped: XidPolicy) -> None:
    cat = shipped.catalogue
    assert cat is not None and "analyzing-xid-catalog" in cat.edition and "e712af97" in cat.edition
    assert (cat.first, cat.last) == (1, 172)  # NVIDIA's catalogue: 1 through 172 (PSHC 162-165, 171/172)
    assert sorted(shipped.rules) == list(range(cat.first, cat.last + 1))  # no number falls to [default]
    assert all(shipped.rule(n).xid == n for n in range(cat.first, cat.last + 1))


def test_every_xid_has_a_verdict_a_routable_action_and_a_recommendation(shipped: XidPolicy) -> None:
    for xid, rule in shipped.rules.items():
        assert rule.severity in SEVERITIES and rule.cause in CAUSES and rule.action in ACTIONS, xid
        assert isinstance(operator_action(rule), Action), xid
        assert rule.name.strip() and rule.mnemonic and len(rule.recommendation) > 30, xid
        if rule.severity == "fail":  # a FAIL names something a scheduler hook can do
            assert operator_action(rule) not in (Action.NONE, Action.MONITOR), xid
    assert set(ACTIONS) <= set(BY_NVIDIA_ACTION)


# NVIDIA's immediate action -> our severity, as the file's header says; the exceptions are the deliberate ones
BUCKET_SEVERITY = {"RESET_GPU": "fail", "RESTART_BM": "fail", "RESTART_VM": "fail", "WORKFLOW_XID_48": "fail",
                   "WORKFLOW_NVLINK_ERR": "fail", "CHECK_MECHANICALS": "fail", "CONTACT_SUPPORT": "fail",
                   "UPDATE_SWFW": "fail", "RESTART_APP": "warn", "IGNORE": "info", "WORKFLOW_NVLINK5_ERR": "warn",
                   "XID_154": "warn", "CHECK_UVM": "warn", "WORKFLOW_XID_45": "info",
                   "BOOT_REATTEMPT_OR_ENABLE_ECC": "fail"}
DELIBERATE = {61: "warn", 63: "warn", 92: "warn", 43: "warn", 157: "warn", 160: "warn", 161: "warn"}


def test_severities_follow_nvidias_buckets_except_the_documented_choices(shipped: XidPolicy) -> None:
    got = {xid: rule.severity for xid, rule in shipped.rules.items() if rule.nvidia_action is not None}
    want = {xid: DELIBERATE.get(xid, BUCKET_SEVERITY[shipped.rules[xid].nvidia_action or ""]) for xid in got}
    assert got == want
    text = SHIPPED_POLICY.read_text()
    header = text[:text.index("\n[catalogue]\n")]
    for xid in DELIBERATE:  # each exception is explained in the header
        assert re.search(rf"\b{xid}\b", header), xid


@pytest.mark.parametrize(("xid", "severity", "action"), [
    (94, "warn", Action.RESTART_JOB), (95, "fail", Action.RESET_GPU), (79, "fail", Action.REBOOT_NODE),
    (48, "fail", Action.RESET_GPU), (54, "fail", Action.CHECK_MECHANICALS), (151, "fail", Action.REBOOT_NODE),
    (162, "info", Action.NONE), (165, "warn", Action.MONITOR), (168, "fail", Action.REBOOT_NODE),
    (9, "fail", Action.ISOLATE_NODE), (39, "warn", Action.RESTART_JOB),
])
def test_representative_verdicts(shipped: XidPolicy, xid: int, severity: str, action: Action) -> None:
    rule = shipped.rule(xid)
    assert (rule.severity, operator_action(rule)) == (severity, action)


# --- the docs are rendered from it ------------------------------------------------------------------


def test_docs_are_the_rendered_catalogue_with_one_line_per_xid(shipped: XidPolicy) -> None:
    text = render(shipped)
    assert DOCS.read_text(encoding="utf-8") == text, "run: python -m gpu_preflight.config.xid_docs > docs/xids.md"
    rows = {int(m.group(1)): m.group(0) for m in re.finditer(r"^\| (\d+) \|.*$", text, re.MULTILINE)}
    assert sorted(rows) == sorted(shipped.rules)
    assert "| WARN | any | `restart_job` | `RESTART_APP`" in rows[94]
    assert "| FAIL | any | `reset_gpu` | `RESET_GPU`" in rows[95]
    assert "| 13 |" in rows[13] and "| WARN | any | `restart_job`" in rows[13]  # from the first event
    assert all(f"`nvrm_{key}`" in text for key in shipped.drivers)


def test_the_renderer_checks_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert render_main(["--check", str(DOCS)]) == 0
    stale = tmp_path / "xids.md"
    stale.write_text(DOCS.read_text(encoding="utf-8").replace("| 94 |", "| 94x |"), encoding="utf-8")
    assert render_main(["--check", str(stale)]) == 1 and "differs from the catalogue" in capsys.readouterr().err
    assert render_main(["--bogus"]) == 2


def test_readme_and_checks_doc_point_to_the_rendered_table_instead_of_listing_numbers() -> None:
    (line,) = [x for x in (ROOT / "README.md").read_text().splitlines() if x.startswith("| `gpu.xid`")]
    assert "docs/xids.md" in line and not re.search(r"\b(?:48|64|79|94|95|119)\b", line)
    assert "docs/xids.md" in (ROOT / "docs" / "checks.md").read_text()


def test_a_catalogue_table_with_a_bad_range_is_refused(tmp_path: Path) -> None:
    text = SHIPPED_POLICY.read_text().replace("first = 1\nlast = 172", "first = 9\nlast = 3")
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match="first <= last") as info:
        load_xid_policy(path)
    assert info.value.key == "catalogue"
    path.write_text(text.replace("first = 9", 'first = "1"'))
    with pytest.raises(ConfigError, match="expected an integer, got '1'") as info:
        load_xid_policy(path)
    assert info.value.key == "catalogue.first"


# --- Xid 154 carries the driver's recovery action ---------------------------------------------------


@pytest.mark.parametrize(("text", "severity", "action"), [
    ("0x0 (None)", "info", Action.NONE), ("0x3 (Drain P2P)", "warn", Action.RESTART_JOB),
    ("0x4 (Drain and Reset)", "fail", Action.RESET_GPU), ("0x1 (GPU Reset Required)", "fail", Action.RESET_GPU),
    ("0x2 (Node Reboot Required)", "fail", Action.REBOOT_NODE), ("0x5 (PF FLR)", "fail", Action.RESET_GPU),
])
def test_xid154_is_judged_by_the_recovery_action_its_line_names(shipped: XidPolicy, text: str, severity: str,
                                                                 action: Action) -> None:
    line = f"[Mon Mar  2 10:00:00 2026] NVRM: Xid (PCI:0000:01:00): 154, GPU recovery action changed from 0x0 " \
           f"(None) to {text}"
    (event,) = KernelLineReader(now=NOW).read(line)
    assert isinstance(event, XidEvent) and event.kind.startswith("xid:recovery=")
    assert event.kind.partition("=")[2] in RECOVERY_ACTIONS
    rule = shipped.rule_for(154, event.kind)
    assert (rule.severity, BY_NVIDIA_ACTION[rule.action]) == (severity, action)


# --- a fatal Xid older than the window is never dropped silently ------------------------------------


def ev(xid: int, hours_ago: float, pci: str = "0000:38:00", kind: str = "xid") -> XidEvent:
    return XidEvent(xid, pci, NOW - timedelta(hours=hours_ago), 1, "p", f"Xid {xid}", f"NVRM: Xid {xid}", kind)


def judged(policy: XidPolicy, counter: XidCounter) -> list[tuple[int, str | None, str, bool, int]]:
    return [(v.xid, v.pci, v.severity, v.before_window, v.count) for v in policy.judge_tally(counter.tally())]


def test_an_old_fatal_xid_without_a_reset_after_it_warns_and_a_reset_clears_it(shipped: XidPolicy) -> None:
    window = xid_window(2, now=NOW)
    counter = XidCounter(window)
    counter.add_reset()  # a boot before the Xids covers none of them
    for item in (ev(79, 30), ev(79, 29), ev(13, 30), ev(95, 20, "0000:9b:00")):
        counter.add(item)
    got = judged(shipped, counter)  # the 13 (application, not fatal) stays left out
    assert got == [(79, "0000:38:00", "warn", True, 2), (95, "0000:9b:00", "warn", True, 1)]
    (v,) = [v for v in shipped.judge_tally(counter.tally()) if v.xid == 79]
    assert v.code == "xid_79" and v.last == NOW - timedelta(hours=29) and v.rule.severity == "fail"
    counter.add(ev(154, 10, "0000:9b:00", "xid:recovery=none"))  # that GPU's recovery is back to None
    assert judged(shipped, counter) == [(79, "0000:38:00", "warn", True, 2)]
    counter.add_reset()  # the driver reloaded: every GPU re-initialised
    assert judged(shipped, counter) == [] and counter.tally().outside == 5


def test_an_old_fatal_xid_with_a_recent_one_of_the_same_gpu_is_judged_once_by_the_recent(shipped: XidPolicy) -> None:
    counter = XidCounter(xid_window(2, now=NOW))
    counter.add(ev(79, 30))
    counter.add(ev(79, 1))
    assert judged(shipped, counter) == [(79, "0000:38:00", "fail", False, 1)]


def log_line(hours_ago: float, text: str) -> str:
    return f"{(NOW - timedelta(hours=hours_ago)).isoformat()} {text}\n"


XID79 = "NVRM: Xid (PCI:0000:38:00): 79, pid=1, name=x, GPU has fallen off the bus."


@pytest.mark.parametrize(("marker", "stale"), [
    ("NVRM: loading NVIDIA UNIX x86_64 Kernel Module  535.129.03  Thu Oct 19 18:56:32 UTC 2023", False),
    ("kernel: Linux version 6.8.0-45-generic (buildd@lcy02-amd64-075) #45-Ubuntu SMP", False),
    ("kernel: eth0: link up", True),
])
def test_a_saved_log_reports_an_unreset_fatal_xid_and_clears_it_after_a_boot_or_reload(
        shipped: XidPolicy, marker: str, stale: bool) -> None:
    text = log_line(30, XID79) + log_line(20, marker) + log_line(0, "kernel: eth0: link up")
    record = dmesg.parse(text)
    tally = record.xid_tally(record.window(2))
    assert tally.outside == 1 and tally.resets == (0 if stale else 1)
    expected = [(79, "0000:38:00", "warn", True, 1)] if stale else []
    assert [(v.xid, v.pci, v.severity, v.before_window, v.count) for v in shipped.judge_tally(tally)] == expected


def test_a_journal_boot_separator_is_a_reset() -> None:
    assert xid_timeline.reset_mark("-- Boot 5f2a3c0d9e8b4e0f9d3c2b1a0f9e8d7c --")
    assert xid_timeline.reset_mark("-- Reboot --")
    assert not xid_timeline.reset_mark("NVRM: Xid (PCI:0000:38:00): 79, the string -- Boot x -- inside")


def test_the_folded_timeline_keeps_unreset_old_events(monkeypatch: pytest.MonkeyPatch, shipped: XidPolicy) -> None:
    monkeypatch.setattr(xid_timeline, "TIMELINE_MAX", 64)
    monkeypatch.setattr(dmesg, "KEPT", 10)
    old = "".join(log_line(48 - i / 100, XID79.replace("pid=1", f"pid={i}")) for i in range(200))
    reload_ = log_line(40, "NVRM: loading NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build")
    after = "".join(log_line(30 - i / 100, XID79.replace("0000:38:00", "0000:9b:00").replace("pid=1", f"pid={i}"))
                    for i in range(100))
    tail = log_line(10, "kernel: eth0: link down") + log_line(0, "kernel: eth0: up")  # no gap read as a clock jump
    record = dmesg.parse(old + reload_ + after + tail)
    assert "xid_events" in record.omitted  # the timeline counted, and folded the first events
    tally = record.xid_tally(record.window(2))
    assert tally.outside == 300 and [(g.pci, g.count) for g in tally.stale] == [("0000:9b:00", 100)]
    (v,) = shipped.judge_tally(tally)
    assert (v.pci, v.severity, v.before_window, v.count) == ("0000:9b:00", "warn", True, 100)
    assert v.first == NOW - timedelta(hours=30) and v.examples
