"""The history believes only timestamps a run can have had: a real date, not in the future.

Issue 28: ``history import`` filed reports dated ``"yesterday"`` or 2099; ``prune`` never
removed them (they are never "older than N days") and a failure dated 2099 stayed inside
every repeat-offender window, flagging its GPU on every later run. Now such a report is
refused on import (one line naming it; nothing of it is filed), and rows an older version
already filed are ignored by the window and removed by ``prune``. Times are injected or
placed relative to this machine's clock: no test depends on today's date.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from gpu_preflight.cli import history_cmd
from gpu_preflight.config.history import HistoryConfig
from gpu_preflight.findings.model import ClusterReport
from gpu_preflight.history import HistoryStore, extract, history_findings
from gpu_preflight.history.when import TimestampError, checked, stored
from gpu_preflight.model import Status

from .history_data import REMAP_FAILURE, cluster_run, gpus

NOW = datetime(2031, 5, 17, 12, 0, tzinfo=UTC)
TABLES = ("runs", "gpus", "findings", "measurements", "scores")


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    history_cmd.add_commands(parser.add_subparsers(dest="command", required=True))
    return history_cmd.run(parser.parse_args(list(argv)))


def rows(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as con:
        return {t: con.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0] for t in TABLES}


def report_dated(when: object, prefix: str = "aa") -> dict[str, Any]:
    report = cluster_run({"h0": gpus(prefix)})
    report["timestamp"] = when
    return report


@pytest.mark.parametrize("when, why", [
    ("yesterday", "is not an ISO 8601 date"),
    ("", "is not a date"),
    (None, "is not a date"),
    (1_700_000_000, "is not a date"),
    ("2031-05-19T12:00:01+00:00", "days in the future"),
    ("2099-01-01T00:00:00", "days in the future"),
    ("1970-01-01T00:00:00+00:00", "is before 2000-01-01"),
    ("2031-13-45T00:00:00", "is not an ISO 8601 date"),
])
def test_impossible_timestamps_are_refused_and_say_why(when: object, why: str) -> None:
    with pytest.raises(TimestampError, match=why):
        checked(when, NOW)


def test_timestamps_are_filed_in_utc_with_a_days_slack_for_a_clock_ahead() -> None:
    assert stored("2031-05-17T14:00:00+02:00", NOW) == "2031-05-17T12:00:00+00:00"
    assert stored("2031-05-18T11:00:00", NOW) == "2031-05-18T11:00:00+00:00"  # naive is UTC; 23 h ahead is skew


def test_import_refuses_a_future_or_undated_report_by_name_and_files_nothing_of_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    future = (datetime.now(UTC) + timedelta(days=3650)).isoformat()
    good, ahead, words = tmp_path / "good.json", tmp_path / "ahead.json", tmp_path / "words.json"
    good.write_text(json.dumps(cluster_run({"h0": gpus("aa")})))
    ahead.write_text(json.dumps(report_dated(future, "bb")))
    words.write_text(json.dumps(report_dated("last tuesday", "cc")))
    assert cli("history", "import", str(ahead), str(good), str(words), "--db", str(db)) == 3
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3
    assert err[0].startswith(f"gpu-preflight: {ahead}: not filed: timestamp '{future}' is 3,650 days in the future")
    assert err[1].startswith(f"gpu-preflight: {good}: run #1 filed")
    assert err[2] == f"gpu-preflight: {words}: not filed: timestamp 'last tuesday' is not an ISO 8601 date"
    assert rows(db)["runs"] == 1
    with sqlite3.connect(db) as con:
        assert {u for (u,) in con.execute("SELECT DISTINCT uuid FROM gpus")} == {g.uuid for g in gpus("aa")}


def test_a_refused_run_leaves_no_row_in_any_table(tmp_path: Path) -> None:
    with HistoryStore(tmp_path / "h.sqlite") as store, pytest.raises(TimestampError):
        store.record(extract(ClusterReport.of(report_dated("2099-01-01T00:00:00+00:00"))), "c1", now=NOW)
    assert rows(tmp_path / "h.sqlite") == dict.fromkeys(TABLES, 0)


def backdate(db: Path, timestamp: str) -> None:
    """What an older version left: a run filed with its report's timestamp unchecked."""
    with sqlite3.connect(db) as con:
        con.execute("UPDATE runs SET timestamp = ?", (timestamp,))


@pytest.mark.parametrize("timestamp", ["2099-01-01T00:00:00+00:00", "garbage", "2031-99-99T00:00:00"])
def test_rows_an_older_version_filed_flag_no_gpu_and_are_pruned(tmp_path: Path, timestamp: str) -> None:
    db = tmp_path / "h.sqlite"
    failing = gpus("aa")
    failing[0].faults = dict(REMAP_FAILURE)
    with HistoryStore(db) as store:
        store.record(extract(ClusterReport.of(cluster_run({"h0": failing}))), "c1")
        today = cluster_run({"h0": gpus("aa")})
        flagged = [f for f in history_findings(ClusterReport.of(today), store, HistoryConfig(), "c1")
                   if f.check_id == "history.repeat_offender" and f.status is not Status.PASS]
        assert [f.subject for f in flagged] == ["h0/gpu0"]  # dated now: inside the window
    backdate(db, timestamp)
    with HistoryStore(db) as store:
        found = [f for f in history_findings(ClusterReport.of(today), store, HistoryConfig(), "c1")
                 if f.check_id == "history.repeat_offender"]
        assert [(f.status, f.code) for f in found] == [(Status.PASS, "ok")]
        removed = store.prune(36_500)
        assert (removed.old, removed.implausible) == (0, 1)
    assert rows(db) == dict.fromkeys(TABLES, 0)


def test_prune_says_how_many_runs_were_undated_or_future(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "h.sqlite"
    with HistoryStore(db) as store:
        store.record(extract(ClusterReport.of(report_dated(NOW.isoformat()))), "c1", now=NOW)
        store.record(extract(ClusterReport.of(report_dated((NOW - timedelta(days=40)).isoformat(), "bb"))), "c1",
                     now=NOW)
        store.record(extract(ClusterReport.of(report_dated((NOW - timedelta(hours=1)).isoformat(), "cc"))), "c1",
                     now=NOW)
        with sqlite3.connect(db) as con:
            con.execute("UPDATE runs SET timestamp = '3000-01-01' WHERE id = 3")
        removed = store.prune(30, now=NOW)
        assert (removed.old, removed.implausible, removed.total) == (1, 1, 2)
        assert [r.id for r in store.runs()] == [1]
    backdate(db, "not a date")
    assert cli("history", "prune", "--older-than-days", "30", "--db", str(db)) == 0
    err = capsys.readouterr().err
    assert "0 run(s) older than 30 days removed" in err and "1 run(s) dated in the future or not dated removed" in err
