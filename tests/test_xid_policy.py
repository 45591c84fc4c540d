"""The Xid policy table: shipped content, loading errors, overrides and judging events."""

from __future__ import annotations

import tomllib
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from gpu_preflight.config.loader import ConfigError
from gpu_preflight.config.xid_policy import (
    ACTIONS,
    CAUSES,
    SEVERITIES,
    SHIPPED_POLICY,
    XidPolicy,
    XidRule,
    load_xid_policy,
)
from gpu_preflight.parsers.kernel_log import XidEvent, parse_xid_events

NOW = datetime(2025, 1, 21, 5, 0, tzinfo=UTC)
REQUIRED_XIDS = [13, 31, 32, 38, 43, 45, 48, 56, 57, 58, 61, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 94,
                 95, 109, 110, 119, 120, 121, 136, 140, 143, *range(144, 151), 151, 154, 155, 156, 158]
RULE = """
[default]
name = "unknown"
severity = "warn"
cause = "unknown"
action = "CONTACT_SUPPORT"
recommendation = "Look it up."

[xid.79]
name = "GPU has fallen off the bus"
severity = "fail"
cause = "hardware"
action = "POWER_CYCLE"
recommendation = "Power-cycle."
"""


def event(xid: int, at: datetime | None, pci: str | None = "0000:38:00", message: str = "m",
          pid: int | None = None) -> XidEvent:
    return XidEvent(xid=xid, pci=pci, timestamp=at, pid=pid, process=None, message=message, raw=f"Xid {xid}")


def write_policy(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(text)
    return path


@pytest.fixture(scope="module")
def shipped() -> XidPolicy:
    return load_xid_policy()


# --- the shipped table ------------------------------------------------------------------------


def test_shipped_policy_covers_the_catalogued_xids(shipped: XidPolicy) -> None:
    assert sorted(set(REQUIRED_XIDS) - set(shipped.rules)) == []
    assert shipped.source == str(SHIPPED_POLICY)
    for xid, rule in shipped.rules.items():
        assert rule.xid == xid
        assert (rule.severity, rule.cause, rule.action) in {(s, c, a) for s in SEVERITIES for c in CAUSES
                                                            for a in ACTIONS}
        assert rule.name.strip() and rule.recommendation.strip().endswith(".")


def test_shipped_default_is_a_warning(shipped: XidPolicy) -> None:
    assert shipped.default.xid is None
    assert (shipped.default.severity, shipped.default.count) == ("warn", 1)
    assert shipped.rule(9999) is shipped.default


@pytest.mark.parametrize(("xid", "severity", "cause", "action", "count", "nvidia_action"), [
    (13, "warn", "application", "RESTART_APP", 1, "RESTART_APP"),
    (31, "warn", "application", "RESTART_APP", 1, "RESTART_APP"),
    (43, "warn", "application", "NONE", 1, "IGNORE"),
    (45, "info", "application", "NONE", 1, "WORKFLOW_XID_45"),
    (48, "fail", "memory", "RESET_GPU", 1, "WORKFLOW_XID_48"),
    (63, "warn", "memory", "RESET_GPU", 1, "IGNORE"),
    (74, "fail", "nvlink", "RESET_GPU", 1, "WORKFLOW_NVLINK_ERR"),
    (79, "fail", "hardware", "POWER_CYCLE", 1, "RESTART_BM"),
    (94, "warn", "memory", "RESTART_APP", 1, "RESTART_APP"),
    (95, "fail", "memory", "RESET_GPU", 1, "RESET_GPU"),
    (119, "fail", "driver", "RESET_GPU", 1, "RESET_GPU"),
    (121, "info", "hardware", "NONE", 1, "IGNORE"),
    (145, "warn", "nvlink", "RESET_GPU", 1, "WORKFLOW_NVLINK5_ERR"),
])
def test_shipped_rules_follow_the_catalog(shipped: XidPolicy, xid: int, severity: str, cause: str, action: str,
                                          count: int, nvidia_action: str) -> None:
    rule = shipped.rule(xid)
    assert (rule.severity, rule.cause, rule.action, rule.count, rule.nvidia_action) == (
        severity, cause, action, count, nvidia_action)


def test_every_azure_fail_xid_is_at_least_a_warning(shipped: XidPolicy) -> None:
    azure_fail = [48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 119, 120]
    assert [x for x in azure_fail if shipped.rule(x).severity not in ("warn", "fail")] == []


# --- count thresholds ---------------------------------------------------------------------------


def escalating_site(tmp_path: Path) -> XidPolicy:
    """A site that wants AWS's escalation back: Xid 13 warns only at 5 per GPU (``count = 5``)."""
    text = SHIPPED_POLICY.read_text(encoding="utf-8").replace('[xid.13]\n', '[xid.13]\ncount = 5\n', 1)
    site = tmp_path / "site-xid.toml"
    site.write_text(text, encoding="utf-8")
    return load_xid_policy(site)


@pytest.mark.parametrize("n", [1, 2])
def test_application_xid_warns_from_the_first(shipped: XidPolicy, n: int) -> None:
    events = [event(13, NOW - timedelta(minutes=i)) for i in range(n)]
    (verdict,) = shipped.judge(events, now=NOW, window_hours=2)
    assert (verdict.count, verdict.severity) == (n, "warn")


@pytest.mark.parametrize(("n", "severity"), [(4, "info"), (5, "warn"), (6, "warn")])
def test_a_site_count_warns_only_when_repeated(tmp_path: Path, n: int, severity: str) -> None:
    events = [event(13, NOW - timedelta(minutes=i)) for i in range(n)]
    (verdict,) = escalating_site(tmp_path).judge(events, now=NOW, window_hours=2)
    assert (verdict.count, verdict.severity) == (n, severity)


@pytest.mark.parametrize(("rule_severity", "n", "severity"), [
    ("fail", 2, "warn"), ("fail", 3, "fail"), ("fail", 4, "fail"),
    ("info", 2, "ignore"), ("ignore", 2, "ignore"),
])
def test_count_lowers_one_level_below_threshold(rule_severity: str, n: int, severity: str) -> None:
    rule = XidRule(xid=7, name="n", severity=rule_severity, cause="unknown", action="NONE", recommendation="r",
                   count=3)
    assert rule.severity_for(n) == severity


# --- the window -------------------------------------------------------------------------------


@pytest.mark.parametrize(("age", "kept"), [
    (timedelta(hours=2), True),
    (timedelta(hours=2, microseconds=1), False),
    (timedelta(hours=1, minutes=59), True),
    (timedelta(hours=3), False),
    (timedelta(minutes=-5), True),
])
def test_window_boundaries(shipped: XidPolicy, age: timedelta, kept: bool) -> None:
    verdicts = shipped.judge([event(79, NOW - age)], now=NOW, window_hours=2)
    # older than the window, with nothing in the log saying the GPU was reset since: a warning, never nothing
    expected = [(79, "fail", False)] if kept else [(79, "warn", True)]
    assert [(v.xid, v.severity, v.before_window) for v in verdicts] == expected


def test_undated_events_are_kept_and_flagged(shipped: XidPolicy) -> None:
    events = [event(48, None), event(48, NOW - timedelta(days=3)), event(48, NOW - timedelta(minutes=10)),
              event(79, None), event(79, None)]
    v48, v79 = shipped.judge(events, now=NOW, window_hours=2)
    assert (v48.xid, v48.count, v48.undated, v48.first, v48.last) == (
        48, 2, True, NOW - timedelta(minutes=10), NOW - timedelta(minutes=10))
    assert (v79.xid, v79.count, v79.undated, v79.first, v79.last) == (79, 2, True, None, None)


def test_window_arguments_are_checked(shipped: XidPolicy) -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        shipped.judge([], now=datetime(2025, 1, 21), window_hours=2)
    with pytest.raises(ValueError, match="window_hours"):
        shipped.judge([], now=NOW, window_hours=-1)
    with pytest.raises(ValueError, match="window_hours"):
        shipped.judge([], now=NOW, window_hours=float("nan"))


# --- grouping and de-duplication -------------------------------------------------------------------


def test_grouped_by_xid_and_normalised_pci_and_sorted_worst_first(shipped: XidPolicy) -> None:
    t = NOW - timedelta(minutes=30)
    events = [event(43, t, "0000:3A:00"), event(79, t, "0000:9b:00"), event(43, t + timedelta(seconds=1), "0000:3a:00"),
              event(43, t, "0000:38:00"), event(9999, t, None)]
    got = [(v.severity, v.xid, v.pci, v.count) for v in shipped.judge(events, now=NOW, window_hours=2)]
    assert got == [("fail", 79, "0000:9b:00", 1), ("warn", 43, "0000:38:00", 1), ("warn", 43, "0000:3a:00", 2),
                   ("warn", 9999, None, 1)]


def test_same_event_read_twice_counts_once_but_distinct_events_count(shipped: XidPolicy) -> None:
    t = NOW - timedelta(minutes=30)
    events = [event(31, t, pid=1), event(31, t, pid=1), event(31, t, pid=2), event(31, t, message="other", pid=1),
              event(31, t + timedelta(microseconds=1), pid=1)]
    (verdict,) = shipped.judge(events, now=NOW, window_hours=2)
    assert verdict.count == 4


def test_unknown_xid_uses_the_default_rule(shipped: XidPolicy) -> None:
    (verdict,) = shipped.judge([event(4242, NOW)], now=NOW, window_hours=2)
    assert verdict.rule is shipped.default
    assert verdict.severity == "warn"


def test_corpus_burst_judged_in_and_out_of_window(shipped: XidPolicy, corpus: Path) -> None:
    text = (corpus / "kernel-xid" / "gpud-dmesg-decode-iso-xid13-xid43-burst.log").read_text()
    events = parse_xid_events(text)
    wide = shipped.judge(events, now=NOW, window_hours=3)
    assert [(v.xid, v.pci, v.count, v.severity, v.undated) for v in wide] == [
        (13, "0000:38:00", 629, "warn", False), (43, "0000:38:00", 7, "warn", False)]
    assert wide[1].first == datetime(2025, 1, 21, 2, 21, 33, 502278, tzinfo=UTC)
    assert wide[1].last == datetime(2025, 1, 21, 4, 41, 44, 287197, tzinfo=UTC)
    assert wide[1].message == "Ch 00000008"
    narrow = shipped.judge(events, now=NOW, window_hours=0.5)
    assert [(v.xid, v.count, v.severity) for v in narrow] == [(13, 59, "warn"), (43, 1, "warn")]
    assert shipped.judge(events, now=NOW + timedelta(days=1), window_hours=2) == []


# --- overrides --------------------------------------------------------------------------------


def test_overrides_change_severity_keep_count_and_add_unknown_xids(tmp_path: Path) -> None:
    escalating_site(tmp_path)  # writes the site file with Xid 13 at count 5
    policy = load_xid_policy(tmp_path / "site-xid.toml", overrides={"13": "fail", "9999": "ignore", "default": "fail"})
    assert (policy.rule(13).severity, policy.rule(13).count) == ("fail", 5)
    assert policy.rule(9999).xid == 9999 and policy.rule(9999).severity == "ignore"
    assert policy.rule(7777).severity == "fail"
    events = [event(13, NOW - timedelta(seconds=i)) for i in range(4)]
    assert [v.severity for v in policy.judge(events, now=NOW, window_hours=2)] == ["warn"]


@pytest.mark.parametrize(("overrides", "key", "message"), [
    ({"13": "critical"}, "xid.severity_overrides.13", "expected one of 'ignore', 'info', 'warn', 'fail'"),
    ({"thirteen": "warn"}, "xid.severity_overrides.thirteen", "Xid must be a non-negative integer"),
    ({"-1": "warn"}, "xid.severity_overrides.-1", "Xid must be a non-negative integer"),
])
def test_bad_overrides_are_named(overrides: dict[str, str], key: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message) as info:
        load_xid_policy(overrides=overrides)
    assert info.value.key == key


# --- loading errors -----------------------------------------------------------------------------


def test_site_policy_replaces_the_shipped_table(tmp_path: Path) -> None:
    policy = load_xid_policy(write_policy(tmp_path, RULE))
    assert sorted(policy.rules) == [79]
    assert policy.rule(48) is policy.default


@pytest.mark.parametrize(("edit", "key", "line", "message"), [
    (('severity = "fail"', 'severity = "fatal"'), "xid.79.severity", 11, "expected one of 'ignore'"),
    (('cause = "hardware"', 'cause = "gpu"'), "xid.79.cause", 12, "expected one of 'hardware'"),
    (('action = "POWER_CYCLE"', 'action = "RMA"'), "xid.79.action", 13, "expected one of 'NONE'"),
    (('severity = "fail"', 'severty = "fail"'), "xid.79.severty", 11, "did you mean 'severity'"),
    (('severity = "fail"', 'severity = "fail"\ncount = 0'), "xid.79.count", 12, "expected an integer >= 1"),
    (('severity = "fail"', 'severity = "fail"\ncount = true'), "xid.79.count", 12, "expected an integer >= 1"),
    (('name = "GPU has fallen off the bus"', 'name = ""'), "xid.79.name", 10, "non-empty string"),
    (('name = "GPU has fallen off the bus"\n', ''), "xid.79.name", 9, "missing required field 'name'"),
    (("[xid.79]", "[xid.seventy-nine]"), "xid.seventy-nine", 9, "Xid must be a non-negative integer"),
    (("[xid.79]", "[xids.79]"), "xids", 9, "did you mean 'xid'"),
])
def test_malformed_policy_names_file_key_and_line(tmp_path: Path, edit: tuple[str, str], key: str, line: int,
                                                   message: str) -> None:
    path = write_policy(tmp_path, RULE.replace(*edit, 1))
    with pytest.raises(ConfigError, match=message) as info:
        load_xid_policy(path)
    assert (info.value.source, info.value.key, info.value.line) == (str(path), key, line)
    assert str(info.value).startswith(f"{path}:{line}: {key}: ")


def test_invalid_toml_names_the_line(tmp_path: Path) -> None:
    path = write_policy(tmp_path, RULE.replace('cause = "hardware"', 'cause = hardware'))
    with pytest.raises(ConfigError, match="invalid TOML") as info:
        load_xid_policy(path)
    assert (info.value.source, info.value.line) == (str(path), 12)


def test_policy_without_default_or_file_is_refused(tmp_path: Path) -> None:
    path = write_policy(tmp_path, RULE[RULE.index("[xid.79]"):])
    with pytest.raises(ConfigError, match=r"missing \[default\] table") as info:
        load_xid_policy(path)
    assert info.value.key == "default"
    with pytest.raises(ConfigError, match="cannot read Xid policy"):
        load_xid_policy(tmp_path / "absent.toml")


def test_shipped_file_is_valid_toml_with_only_known_tables() -> None:
    data = tomllib.loads(SHIPPED_POLICY.read_text())
    assert set(data) == {"catalogue", "default", "xid", "driver", "sxid"}
