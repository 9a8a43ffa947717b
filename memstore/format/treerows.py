"""The topic tree's replay cache as SQLite rows (`.memstore/tree-cache.db`): one row per topic, per
placed record, per archived record and per tombstone, so a write reads the few topics it needs
(by id, by parent, by record) instead of the whole tree. Every SQL statement of the cache is here
(a database of its own, like the embedding cache: not the index); treecache.py decides what is
valid and checks every value it reads back (the file is disposable and untrusted: a damaged one
raises `Unusable` and is rebuilt).

Rows are plain tuples: (id, name, summary, parent, records as a JSON array, created, last_active,
named_by) for a topic."""

from __future__ import annotations

import json
from ..sqlitedb import sqlite3
from pathlib import Path

from .. import storefile

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value);
CREATE TABLE IF NOT EXISTS topics (
    id TEXT PRIMARY KEY, name, summary, parent, records, created, last_active, named_by);
CREATE INDEX IF NOT EXISTS topics_parent ON topics (parent);
CREATE TABLE IF NOT EXISTS placed (record TEXT PRIMARY KEY, topic);
CREATE INDEX IF NOT EXISTS placed_topic ON placed (topic);
CREATE TABLE IF NOT EXISTS archived (record TEXT PRIMARY KEY);
CREATE TABLE IF NOT EXISTS gone (id TEXT PRIMARY KEY, data);
"""
COLUMNS = "id, name, summary, parent, records, created, last_active, named_by"
_UPSERT = (
    f"INSERT INTO topics ({COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT(id) DO UPDATE SET "
    "name = excluded.name, summary = excluded.summary, parent = excluded.parent, "
    "records = excluded.records, created = excluded.created, "
    "last_active = excluded.last_active, named_by = excluded.named_by"
)
CHUNK = 500  # ids per IN (...) query


_EXPECTED: list = []


def _schema(conn: sqlite3.Connection) -> list[tuple]:
    return conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
    ).fetchall()


def _expected() -> list[tuple]:
    """What SCHEMA makes, read back the way an opened file is read."""
    if not _EXPECTED:
        mem = sqlite3.connect(":memory:")
        mem.executescript(SCHEMA)
        _EXPECTED.extend(_schema(mem))
        mem.close()
    return _EXPECTED


class Unusable(Exception):
    """The file is not a readable cache (damaged, planted, locked too long): rebuild it."""


class TreeRows:
    """One connection to the cache file; every method raises Unusable on a SQLite error."""

    def __init__(self, path: Path, create: bool = False):
        self.path = Path(path)
        self.conn: sqlite3.Connection | None = None
        if not create and not self.path.exists():
            raise Unusable("no cache")
        try:
            storefile.check_db(self.path, self.path.parent.parent)
        except storefile.StoreLink as exc:
            raise Unusable(str(exc).split("\n")[0]) from None
        try:
            self.conn = sqlite3.connect(self.path, timeout=10, isolation_level=None)
            self.conn.execute("PRAGMA secure_delete = ON")  # a forgotten name leaves no free page
            self.conn.execute("PRAGMA synchronous = OFF")  # disposable: a torn file is rebuilt
            self.conn.execute("PRAGMA journal_mode = DELETE")
            have = _schema(self.conn)
            if not have and create:
                self.conn.executescript(SCHEMA)
                have = _schema(self.conn)
        except sqlite3.Error as exc:
            self.close()
            raise Unusable(str(exc)) from None
        if have != _expected():  # another schema, a trigger, a view: not a cache this code made
            self.close()
            raise Unusable("not memstore's tree cache")

    def close(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass
            self.conn = None

    def _all(self, sql: str, args=()) -> list[tuple]:
        if self.conn is None:
            raise Unusable("closed")
        try:
            return self.conn.execute(sql, args).fetchall()
        except sqlite3.Error as exc:
            raise Unusable(str(exc)) from None

    # ----- reading -----------------------------------------------------------------------------

    def meta(self) -> dict:
        return dict(self._all("SELECT key, value FROM meta"))

    def topic(self, tid: str) -> tuple | None:
        rows = self._all(f"SELECT {COLUMNS} FROM topics WHERE id = ?", (tid,))
        return rows[0] if rows else None

    def children(self, parent: str | None) -> list[tuple]:
        if parent is None:
            return self._all(f"SELECT {COLUMNS} FROM topics WHERE parent IS NULL")
        return self._all(f"SELECT {COLUMNS} FROM topics WHERE parent = ?", (parent,))

    def topics(self) -> list[tuple]:
        return self._all(f"SELECT {COLUMNS} FROM topics ORDER BY rowid")

    def owners(self, records: list[str]) -> dict:
        """record id -> the topic holding it, or None for an archived record (others absent)."""
        out: dict = {}
        for i in range(0, len(records), CHUNK):
            part = records[i : i + CHUNK]
            marks = ",".join("?" * len(part))
            out.update(
                self._all(f"SELECT record, topic FROM placed WHERE record IN ({marks})", part)
            )
            for (rid,) in self._all(f"SELECT record FROM archived WHERE record IN ({marks})", part):
                out[rid] = None
        return out

    def archived(self) -> list:
        return [r for (r,) in self._all("SELECT record FROM archived ORDER BY rowid")]

    def gone(self, tid: str):
        rows = self._all("SELECT data FROM gone WHERE id = ?", (tid,))
        return rows[0][0] if rows else None

    def all_gone(self) -> list[tuple]:
        return self._all("SELECT id, data FROM gone ORDER BY rowid")

    # ----- writing -----------------------------------------------------------------------------

    def replace(
        self, topics: list[tuple], archived: list[str], gone: dict, meta: dict, still=None
    ) -> bool:
        """The whole cache, in one transaction, when `still()` is true inside it (the files it was
        read from have not changed since): False when they had."""
        return self._write(None, topics, archived, gone, meta, whole=True, still=still)

    def update(
        self,
        base_fp: str,
        topics: dict,
        archived: list[str] | None,
        gone: dict,
        meta: dict,
        still=None,
    ) -> bool:
        """Apply a write's changes (topic id -> row, or None for a topic that left) when the cache
        is still at `base_fp`; False (nothing changed) when it is not."""
        return self._write(
            base_fp, list(topics.items()), archived, gone, meta, whole=False, still=still
        )

    def _write(self, base_fp, topics, archived, gone, meta, whole: bool, still=None) -> bool:
        c = self.conn
        if c is None:
            raise Unusable("closed")
        try:
            c.execute("BEGIN IMMEDIATE")
            try:
                if still is not None and not still():
                    c.execute("ROLLBACK")
                    return False
                if base_fp is not None:
                    got = c.execute("SELECT value FROM meta WHERE key = 'fp'").fetchone()
                    if got is None or got[0] != base_fp:
                        c.execute("ROLLBACK")
                        return False
                if whole:
                    for table in ("meta", "topics", "placed", "archived", "gone"):
                        c.execute(f"DELETE FROM {table}")
                    c.executemany(_UPSERT, topics)
                    c.executemany(
                        "INSERT OR REPLACE INTO placed (record, topic) VALUES (?, ?)",
                        [(r, row[0]) for row in topics for r in json.loads(row[4])],
                    )
                else:
                    for tid, row in topics:
                        c.execute("DELETE FROM placed WHERE topic = ?", (tid,))
                        if row is None:
                            c.execute("DELETE FROM topics WHERE id = ?", (tid,))
                    rows = [row for _, row in topics if row is not None]
                    c.executemany(_UPSERT, rows)
                    c.executemany(
                        "INSERT OR REPLACE INTO placed (record, topic) VALUES (?, ?)",
                        [(r, row[0]) for row in rows for r in json.loads(row[4])],
                    )
                if archived is not None:
                    c.execute("DELETE FROM archived")
                    c.executemany(
                        "INSERT OR IGNORE INTO archived (record) VALUES (?)",
                        [(r,) for r in archived],
                    )
                c.executemany(
                    "INSERT OR REPLACE INTO gone (id, data) VALUES (?, ?)",
                    [(k, json.dumps(v, ensure_ascii=False)) for k, v in gone.items()],
                )
                c.executemany(
                    "INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", list(meta.items())
                )
                c.execute("COMMIT")
                return True
            except BaseException:
                if c.in_transaction:
                    c.execute("ROLLBACK")
                raise
        except sqlite3.Error as exc:
            raise Unusable(str(exc)) from None
