"""The run history: one SQLite file, appended to by every run.

SQLite because the history must work on a laptop, a login node and inside a training
container alike, with nothing to install or run. Rows carry the cluster, the node and
the GPU's UUID and serial side by side, so the same table answers "how did node X do"
and "where has GPU Y been". Writers wait for each other (``timeout``) instead of failing,
because ranks 0 of several jobs may finish at the same moment on a shared login node.
"""

from __future__ import annotations

import os
import sqlite3
import statistics
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import msgspec

from ..findings.model import EarlierScore, Number
from ..model import verdict
from ..safeio import SQLITE_MAX_PATH, length_problem, prepare_file
from .extract import Measurement, RunRecord
from .when import FUTURE_SLACK, TimestampError, checked, plausible, stored

__all__ = ["Baseline", "HistoryStore", "PastFailure", "Pruned", "RunRow", "default_path"]

SCHEMA_VERSION = 1
SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_key TEXT NOT NULL UNIQUE,
    cluster TEXT NOT NULL,
    timestamp TEXT NOT NULL,
    recorded_at TEXT NOT NULL,
    status TEXT NOT NULL,
    num_nodes INTEGER NOT NULL,
    world_size INTEGER NOT NULL,
    tool_version TEXT,
    source TEXT
);
CREATE TABLE IF NOT EXISTS gpus (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    node TEXT NOT NULL, slot TEXT NOT NULL, uuid TEXT, serial TEXT, model TEXT, pci_bus_id TEXT
);
CREATE TABLE IF NOT EXISTS findings (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    node TEXT, slot TEXT, uuid TEXT, serial TEXT,
    check_id TEXT NOT NULL, status TEXT NOT NULL, subject TEXT NOT NULL, code TEXT, summary TEXT
);
CREATE TABLE IF NOT EXISTS measurements (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    node TEXT, slot TEXT, uuid TEXT, serial TEXT, model TEXT,
    metric TEXT NOT NULL, value REAL NOT NULL, unit TEXT, subject TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS scores (
    run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    component TEXT NOT NULL, score REAL
);
CREATE INDEX IF NOT EXISTS gpus_uuid ON gpus(uuid);
CREATE INDEX IF NOT EXISTS gpus_serial ON gpus(serial);
CREATE INDEX IF NOT EXISTS findings_uuid ON findings(uuid);
CREATE INDEX IF NOT EXISTS findings_serial ON findings(serial);
CREATE INDEX IF NOT EXISTS measurements_metric ON measurements(metric, run_id);
CREATE INDEX IF NOT EXISTS measurements_uuid ON measurements(uuid, metric, run_id);
CREATE INDEX IF NOT EXISTS measurements_serial ON measurements(serial, metric, run_id);
CREATE INDEX IF NOT EXISTS measurements_node ON measurements(node, metric, run_id);
CREATE INDEX IF NOT EXISTS measurements_model ON measurements(model, metric, run_id);
"""


_ENTITY_COLUMNS = frozenset({"uuid", "serial", "cluster", "node", "slot", "model"})


def default_path(environ: dict[str, str] | None = None) -> Path:
    """``$GPU_PREFLIGHT_HISTORY``, else the XDG data directory (``~/.local/share/gpu-preflight``)."""
    env = os.environ if environ is None else environ
    if env.get("GPU_PREFLIGHT_HISTORY"):
        return Path(env["GPU_PREFLIGHT_HISTORY"]).expanduser()
    base = Path(env["XDG_DATA_HOME"]) if env.get("XDG_DATA_HOME") else Path.home() / ".local" / "share"
    return base / "gpu-preflight" / "history.sqlite"


class RunRow(msgspec.Struct, frozen=True):
    """One run as the history database keeps it: id, cluster, when, verdict, size and where it came from."""

    id: int
    cluster: str
    timestamp: str
    status: str
    num_nodes: int
    world_size: int
    source: str | None


class PastFailure(msgspec.Struct, frozen=True):
    """An earlier finding against a GPU, and where that GPU was at the time."""

    run_id: int
    timestamp: str
    cluster: str
    node: str | None
    slot: str | None
    check_id: str
    status: str
    summary: str


class Pruned(msgspec.Struct, frozen=True):
    """What ``prune`` removed: runs older than asked, and runs whose timestamp no run can have
    (not a date, or in the future: see :mod:`.when`), which no age would ever remove."""

    old: int
    implausible: int

    @property
    def total(self) -> int:
        return self.old + self.implausible


class Baseline(msgspec.Struct, frozen=True):
    """The median of earlier values and how many values it is made of."""

    median: float
    samples: int


class HistoryStore:
    """Append runs, and answer the questions regressions, repeat offenders and trends ask.

    Queries are assembled from fixed fragments only (hence the ``noqa: S608``); every value
    from a report or the command line is a bound parameter.
    """

    def __init__(self, path: str | Path, *, timeout_s: float = 30.0, readonly: bool = False) -> None:
        """Open (and, unless ``readonly``, create) the store; wait at most ``timeout_s`` for a lock.

        The directory is made 0700 and checked like every directory gpu-preflight writes into
        (:func:`gpu_preflight.safeio.prepare_file`): SQLite opens the database and its journal by
        name, so no one else may be able to plant a link there; a FIFO or device named as the
        database is refused before SQLite blocks on it. ``readonly`` takes no write lock, so
        judging a run against the history never waits for a writer's schema check.
        """
        self.path = Path(path)
        problem = length_problem(self.path, limit=SQLITE_MAX_PATH)  # history.path is not checked by argparse
        if problem:
            raise RuntimeError(f"{self.path}: {problem}")
        prepare_file(self.path, create=not readonly)
        if readonly:
            self.db = sqlite3.connect(f"{self.path.absolute().as_uri()}?mode=ro", timeout=timeout_s, uri=True)
        else:
            self.db = sqlite3.connect(str(self.path), timeout=timeout_s)
        self.db.execute("PRAGMA foreign_keys = ON")
        if not readonly:
            with self.db:
                self.db.executescript(SCHEMA)
                self.db.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        found = int(self.db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0])
        if found > SCHEMA_VERSION:
            self.db.close()
            raise RuntimeError(f"{self.path}: history schema {found} is newer than this gpu-preflight "
                               f"understands ({SCHEMA_VERSION}); upgrade gpu-preflight")

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> HistoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- writing -------------------------------------------------------------------------

    def run_id(self, run_key: str) -> int | None:
        row = self.db.execute("SELECT id FROM runs WHERE run_key = ?", (run_key,)).fetchone()
        return int(row[0]) if row else None

    def record(self, run: RunRecord, cluster: str, source: str | None = None, *,
               now: datetime | None = None) -> tuple[int, bool]:
        """File a run; returns its id and whether it is new (a run already filed is left alone).

        A run whose timestamp is not a date, or lies in the future, is refused with
        :class:`~gpu_preflight.history.when.TimestampError` before anything is written; the
        timestamp is filed in UTC. The run is written in one transaction: all of it or nothing.
        """
        clock = now or datetime.now(UTC)
        when = stored(run.timestamp, clock)
        existing = self.run_id(run.key)
        if existing is not None:
            return existing, False
        with self.db:
            cur = self.db.execute(
                "INSERT INTO runs (run_key, cluster, timestamp, recorded_at, status, num_nodes, world_size, "
                "tool_version, source) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (run.key, cluster, when, clock.isoformat(), run.status, run.num_nodes, run.world_size, run.tool_version,
                 source))
            rid = int(cur.lastrowid or 0)
            self.db.executemany("INSERT INTO gpus VALUES (?, ?, ?, ?, ?, ?, ?)",
                                [(rid, g.node, g.slot, g.uuid, g.serial, g.model, g.pci_bus_id) for g in run.gpus])
            self.db.executemany("INSERT INTO findings VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [(rid, f.node, f.slot, f.uuid, f.serial, f.check_id, f.status, f.subject, f.code,
                                  f.summary) for f in run.findings])
            self.db.executemany("INSERT INTO measurements VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                                [(rid, m.node, m.slot, m.uuid, m.serial, m.model, m.metric, m.value, m.unit,
                                  m.subject) for m in run.measurements])
            self.db.executemany("INSERT INTO scores VALUES (?, ?, ?)",
                                [(rid, name, score) for name, score in run.scores.items()])
        return rid, True

    def prune(self, older_than_days: float, *, now: datetime | None = None) -> Pruned:
        """Forget runs older than this, and runs whose timestamp is not a date or lies in the future.

        Timestamps are read and judged here, not compared as text in SQL: an older version
        filed whatever a report said (``"yesterday"``, ``2099-01-01``, other time zones).
        """
        clock = now or datetime.now(UTC)
        cutoff = clock - timedelta(days=older_than_days)
        old: list[tuple[int]] = []
        implausible: list[tuple[int]] = []
        for rid, text in self.db.execute("SELECT id, timestamp FROM runs"):
            try:
                when = checked(text, clock)
            except TimestampError:
                implausible.append((rid,))
                continue
            if when < cutoff:
                old.append((rid,))
        with self.db:
            self.db.executemany("DELETE FROM runs WHERE id = ?", old + implausible)
        return Pruned(len(old), len(implausible))

    # -- reading -------------------------------------------------------------------------

    def runs(self, cluster: str | None = None, last: int | None = None) -> list[RunRow]:
        """Runs, oldest first (the last ``last`` of them)."""
        sql = "SELECT id, cluster, timestamp, status, num_nodes, world_size, source FROM runs"
        args: list[Any] = []
        if cluster:
            sql += " WHERE cluster = ?"
            args.append(cluster)
        sql += " ORDER BY id DESC"
        if last:
            sql += " LIMIT ?"
            args.append(last)
        return [RunRow(*row) for row in reversed(self.db.execute(sql, args).fetchall())]

    def earlier_scores(self, cluster: str, last: int, before: int | None = None) -> list[EarlierScore]:
        """The health scores of the cluster's last ``last`` runs (filed before run ``before``), oldest
        first, ``overall`` among each run's components. A run filed before the history kept scores
        (or a database opened read-only that predates the ``scores`` table) has empty
        ``components``: the run happened, its scores are unknown.
        """
        rows = self.db.execute("SELECT id, timestamp FROM runs WHERE cluster = ? AND id < ? ORDER BY id DESC LIMIT ?",
                               (cluster, before if before is not None else 2**62, last)).fetchall()
        by_id: dict[int, dict[str, Number | None]] = {int(rid): {} for rid, _ in rows}
        if by_id:
            try:
                found = self.db.execute(
                    f"SELECT run_id, component, score FROM scores WHERE run_id IN ({', '.join('?' for _ in by_id)})",  # noqa: S608
                    list(by_id)).fetchall()
            except sqlite3.OperationalError as exc:
                if "no such table" not in str(exc):
                    raise
                found = []
            for rid, name, score in found:
                by_id[int(rid)][str(name)] = None if score is None else float(score)
        return [EarlierScore(run=int(rid), timestamp=ts, components=by_id[int(rid)]) for rid, ts in reversed(rows)]

    def baseline(self, metric: str, *, runs: int, before: int | None = None, **where: str | None) -> Baseline | None:
        """Median of ``metric`` over the last ``runs`` earlier runs that measured it for ``where``.

        ``where`` names the entity by column (``uuid``, ``serial``, ``cluster``, ``node``,
        ``slot``, ``model``); ``node=None`` and ``slot=None`` select cluster- and
        node-wide numbers.
        """
        conds: list[str] = ["m.metric = ?"]
        args: list[Any] = [metric]
        for column, value in where.items():
            if column not in _ENTITY_COLUMNS:
                raise ValueError(f"cannot select measurements by {column!r}")
            qualified = "r.cluster" if column == "cluster" else f"m.{column}"
            if value is None:
                conds.append(f"{qualified} IS NULL")
            else:
                conds.append(f"{qualified} = ?")
                args.append(value)
        if before is not None:
            conds.append("m.run_id < ?")
            args.append(before)
        cond = " AND ".join(conds)
        sql = (f"SELECT m.value FROM measurements m JOIN runs r ON r.id = m.run_id WHERE {cond} AND m.run_id IN "  # noqa: S608
               f"(SELECT DISTINCT m.run_id FROM measurements m JOIN runs r ON r.id = m.run_id WHERE {cond} "
               f"ORDER BY m.run_id DESC LIMIT ?)")
        values = [float(v) for (v,) in self.db.execute(sql, [*args, *args, runs]).fetchall()]
        return Baseline(statistics.median(values), len(values)) if values else None

    def past_failures(self, *, uuid: str | None, serial: str | None, statuses: Sequence[str],
                      since: str, before: int | None = None, now: datetime | None = None) -> list[PastFailure]:
        """Earlier findings with these statuses against the GPU with this UUID or serial, on any host,
        from runs dated between ``since`` and now: a run dated in the future (or not dated at
        all, filed by an older version) is in no window, or it would flag the GPU for ever."""
        clock = now or datetime.now(UTC)
        idents: list[str] = []
        args: list[Any] = []
        if uuid:
            idents.append("f.uuid = ?")
            args.append(uuid)
        if serial:
            idents.append("f.serial = ?")
            args.append(serial)
        if not idents or not statuses:
            return []
        sql = (f"SELECT r.id, r.timestamp, r.cluster, f.node, f.slot, f.check_id, f.status, f.summary "  # noqa: S608
               f"FROM findings f JOIN runs r ON r.id = f.run_id WHERE ({' OR '.join(idents)}) "
               f"AND f.status IN ({', '.join('?' for _ in statuses)}) AND r.timestamp >= ? AND r.timestamp <= ?")
        args += [*statuses, since, (clock + FUTURE_SLACK).isoformat()]
        if before is not None:
            sql += " AND r.id < ?"
            args.append(before)
        sql += " ORDER BY r.id"
        return [PastFailure(*row) for row in self.db.execute(sql, args).fetchall() if plausible(row[1], clock)]

    def series(self, *, cluster: str | None = None, node: str | None = None, gpu: str | None = None,
               last: int = 20) -> Iterator[tuple[Any, ...]]:
        """Measurements of the last ``last`` runs: (run id, timestamp, cluster, subject, node, slot, uuid,
        serial, model, metric, value, unit), oldest first. ``gpu`` matches a UUID (or its prefix) or a serial."""
        recent = "SELECT id FROM runs" + (" WHERE cluster = ?" if cluster else "") + " ORDER BY id DESC LIMIT ?"  # noqa: S608
        conds: list[str] = [f"r.id IN ({recent})"]
        args: list[Any] = [cluster, last] if cluster else [last]
        if node:
            conds.append("m.node = ?")
            args.append(node)
        if gpu:
            conds.append("(m.uuid LIKE ? OR m.serial = ?)")
            args += [f"{gpu}%", gpu]
        sql = ("SELECT r.id, r.timestamp, r.cluster, m.subject, m.node, m.slot, m.uuid, m.serial, m.model, m.metric, "  # noqa: S608
               f"m.value, m.unit FROM measurements m JOIN runs r ON r.id = m.run_id WHERE {' AND '.join(conds)} "
               "ORDER BY r.id")
        yield from self.db.execute(sql, args)

    def measurements(self, *, cluster: str | None = None, node: str | None = None, run: int | None = None,
                     last: int = 10) -> list[Measurement]:
        """Measurements of one run, or of the last ``last`` runs (of a cluster, of a node)."""
        if run is not None:
            rows = self.db.execute(
                "SELECT m.subject, m.node, m.slot, m.uuid, m.serial, m.model, m.metric, m.value, m.unit "
                "FROM measurements m WHERE m.run_id = ?" + (" AND m.node = ?" if node else ""),
                (run, node) if node else (run,)).fetchall()
        else:
            rows = [(r[3], r[4], r[5], r[6], r[7], r[8], r[9], r[10], r[11])
                    for r in self.series(cluster=cluster, node=node, last=last)]
        return [Measurement(metric, float(value), unit or "", subject, m_node, slot, uuid, serial, model)
                for subject, m_node, slot, uuid, serial, model, metric, value, unit in rows]

    def gpu_timeline(self, gpu: str) -> list[tuple[Any, ...]]:
        """Where a GPU (UUID, UUID prefix or serial) was in each run, with its worst finding there:
        (run id, timestamp, cluster, node, slot, uuid, serial, model, worst status, failed checks)."""
        rows = self.db.execute(
            "SELECT r.id, r.timestamp, r.cluster, g.node, g.slot, g.uuid, g.serial, g.model FROM gpus g "
            "JOIN runs r ON r.id = g.run_id WHERE g.uuid LIKE ? OR g.serial = ? ORDER BY r.id",
            (f"{gpu}%", gpu)).fetchall()
        out = []
        for row in rows:
            found = self.db.execute(
                "SELECT status, check_id FROM findings WHERE run_id = ? AND node = ? AND slot = ?",
                (row[0], row[3], row[4])).fetchall()
            worst = verdict(s for s, _ in found).value if found else "-"
            failed = sorted({c for s, c in found if s in ("FAIL", "ERROR", "WARN")})
            out.append((*row, worst, failed))
        return out
