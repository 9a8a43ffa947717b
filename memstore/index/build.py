"""Make-style index maintenance: find the days whose files changed and rebuild exactly those.

Each day has a fingerprint of the files its rows came from (the day log and the day's segment
folders). A cheap stat fingerprint decides whether to look closer; a content fingerprint decides
whether to reindex, so a checkout that only touches mtimes costs nothing. Rows of vanished days
are dropped. Everything a reader sees changes in one SQLite transaction; vector rows live in
generation files named by that transaction, so a reader never sees a half-built index.
"""

from __future__ import annotations

import datetime as dt
import functools
import hashlib
import json
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..format import layout
from ..format import log as logfmt
from ..format import pack as packfmt
from ..format import seal
from ..format import tombstones
from ..format.record import author_parts
from ..format.segment import (
    DT_VEC_F32,
    SegmentError,
    VECTOR_TYPES,
    decode_vector,
    read_segment,
    segment_name,
)
from ..format.timeutil import from_iso
from ..errors import LockTimeout
from .. import storefile
from ..sqlitedb import sqlite3
from ..locking import file_lock, lock_timeout
from . import exact
from . import fts
from . import vectors as vecfiles
from .fresh import (
    SCHEMA_ID,
    days_on_disk,
    fingerprints,
    pack_dir,
    segment_dir,
    stat_fingerprint,
)
from .tokenize import index_text

_EPOCH = dt.datetime(1970, 1, 1)
_SECOND = dt.timedelta(seconds=1)


def _seconds(value) -> float:
    """A record's `ts` in Unix seconds, exactly `from_iso(value).timestamp()` (which raises what
    this raises). The store's own form (timeutil.to_iso: `2026-11-30T06:08:11.000000Z`) is read
    without the general parser's steps: both divide the same microseconds by a million."""
    if type(value) is str and len(value) == 27 and value[26] == "Z":
        try:
            d = dt.datetime.fromisoformat(value[:26])
        except ValueError:
            d = None
        if d is not None and d.tzinfo is None:
            return (d - _EPOCH) / _SECOND
    return from_iso(value).timestamp()


# A store has few authors (a person, an importer): each is split and case-folded once.
_split_author = functools.lru_cache(maxsize=1024)(author_parts)


def _author_parts(author) -> tuple[str, str]:
    return _split_author(author) if isinstance(author, str) else author_parts(author)


BACK = "record {rid} was forgotten (forgotten.jsonl), but a git merge with a clone that still had it brought its line back"


SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT);
CREATE TABLE IF NOT EXISTS days (day TEXT PRIMARY KEY, stat_fp TEXT, content_fp TEXT, n INTEGER, problems TEXT);
CREATE TABLE IF NOT EXISTS records (
  rowid INTEGER PRIMARY KEY, id TEXT NOT NULL, day TEXT NOT NULL, line_no INTEGER, off INTEGER, len INTEGER,
  ts REAL, actor TEXT, role TEXT, type TEXT, session TEXT, source TEXT, fsha TEXT, hidden INTEGER DEFAULT 0,
  vrow INTEGER DEFAULT -1, vkey,  -- where the exact vector lies (index/exact.py)
  author_name TEXT, author_email TEXT);
CREATE INDEX IF NOT EXISTS records_id ON records(id);
CREATE INDEX IF NOT EXISTS records_day ON records(day);
-- (A vector search finds where its candidates' exact vectors lie in the matrix's where-<gen>.bin,
-- index/vectors.py, not here: a query per row was most of an approximate search at 1M rows.)
CREATE INDEX IF NOT EXISTS records_vrow ON records(vrow);
-- Hidden rows are few; this partial index makes the vector search's "skip hidden rows" lookup
-- read only them instead of walking every vector row (100 ms -> 0.05 ms at 100k rows).
CREATE INDEX IF NOT EXISTS records_hidden_vrow ON records(vrow) WHERE hidden != 0;
CREATE INDEX IF NOT EXISTS records_session ON records(session, ts);
CREATE INDEX IF NOT EXISTS records_ts ON records(ts);
CREATE INDEX IF NOT EXISTS records_source ON records(source);
-- Documents by content: finds a moved document (memstore/ingest/location.py); conversation rows have none.
CREATE INDEX IF NOT EXISTS records_fsha ON records(fsha) WHERE fsha IS NOT NULL;
CREATE TABLE IF NOT EXISTS supersedes (day TEXT, id TEXT);
CREATE INDEX IF NOT EXISTS supersedes_day ON supersedes(day);
-- Records of scope "private" (docs/format.md, "Records"), by day like supersedes: the --scope filter.
CREATE TABLE IF NOT EXISTS private (day TEXT, id TEXT);
CREATE INDEX IF NOT EXISTS private_day ON private(day);
CREATE INDEX IF NOT EXISTS private_id ON private(id);
-- the full-text table: index/fts.py
CREATE_FTS;
""".replace("CREATE_FTS", fts.CREATE)
# Texts the secret scan found nothing in, by secrets.policy.clean_key: a cache like the rest.
CLEAN_TEXTS = "CREATE TABLE IF NOT EXISTS clean_texts (key BLOB PRIMARY KEY) WITHOUT ROWID"


RECORD_INDEX_SQL = [st.strip() for st in SCHEMA.split(";") if st.strip().startswith("CREATE INDEX")]
RECORD_INDEXES = [st.split("EXISTS", 1)[1].split()[0] for st in RECORD_INDEX_SQL]

# The unsorted tail of the vector matrix (rows appended out of time order) stays below
# max(TAIL_MIN, TAIL_SHARE of the rows); past that the next update puts it in order.
TAIL_MIN = 5_000
TAIL_SHARE = 0.02

# An update that brings in this many rows (an import, a rebuild always) merges the full-text index
# into one segment afterwards; smaller ones leave it to FTS5's own incremental merging.
FTS_MERGE_ROWS = 20_000
# FTS5's own `automerge` setting (SQLite's default, which this index never changes); a bulk load
# turns it off while its rows go in (see _fts_merging_off).
FTS_AUTOMERGE = 4
# FTS5's `hashsize` (SQLite's default, never changed here) and what a bulk load sets it to
FTS_HASHSIZE = 1 << 20
FTS_BULK_HASH = 64 << 20
# SQLite's page cache (KiB) while a bulk load's rows go in (see Index._page_cache); its default
# is 2 MB
BULK_CACHE_KIB = 256 << 10

# index.db-wal: `ct` leaves through os._exit, so SQLite's checkpoint on close never runs. Each
# update ends with a checkpoint that empties the WAL (TRUNCATE) when no reader is in it, and
# journal_size_limit cuts it back to this size whenever it is reset, so it never grows to the
# size of the database (a rebuild writes every page into it).
WAL_LIMIT = 4 << 20


def _expected_columns() -> dict[str, list[str]]:
    """{table: columns} of SCHEMA, read from an in-memory database made with it (once per process)."""
    global _EXPECTED
    if _EXPECTED is None:
        mem = sqlite3.connect(":memory:")
        mem.executescript(SCHEMA)
        tables = [r[0] for r in mem.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        _EXPECTED = {
            t: [r[1] for r in mem.execute(f"PRAGMA table_info('{t}')")]
            for t in tables
            if "fts_" not in t
        }
        mem.close()
    return _EXPECTED


_EXPECTED: dict[str, list[str]] | None = None


# Columns and tables added since schema 2: an index without them is an older version's, not a
# damaged one.
NEWER_COLUMNS = ("author_name", "author_email")
NEWER_TABLES = ("private",)


def damage_of(
    conn: sqlite3.Connection,
    meta_dir: Path,
    dim: int,
    thorough: bool = False,
    allow_missing=(),
) -> str | None:
    """What is wrong with an index (a table or column missing, a vector file shorter than the rows
    it must hold), named by file, or None. Cheap (a few pragmas and two stats); `thorough` adds
    SQLite's quick_check, which reads every page (fsck). DatabaseError if it is no database."""
    for table, cols in _expected_columns().items():
        have = [r[1] for r in conn.execute(f"PRAGMA table_info('{table}')")]
        if not have:
            if table in allow_missing:
                continue
            return f"index.db has no table {table} (not this version's schema)"
        missing = [c for c in cols if c not in have and c not in allow_missing]
        if missing:
            return f"index.db: table {table} has no column {missing[0]} (not this version's schema)"
    if thorough:
        found = [r[0] for r in conn.execute("PRAGMA quick_check")]
        if found != ["ok"]:
            return f"index.db fails SQLite's quick_check ({found[0]})"
    meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('gen', 'n_rows')"))
    try:
        gen, n_rows = int(meta.get("gen", 0)), int(meta.get("n_rows", 0))
    except ValueError:
        return "index.db: its meta table holds no row count"
    return vecfiles.damage(meta_dir, gen, n_rows, dim, thorough)


def check(store) -> str | None:
    """The damage of a store's index as it is on disk (thorough), without creating or changing it."""
    path = store.meta_dir / "index.db"
    if not path.exists():
        return None
    try:
        storefile.check_db(path, store.meta_dir.parent)
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    except storefile.StoreLink as exc:
        return str(exc).split("\n")[0]
    except sqlite3.Error as exc:
        return f"index.db cannot be opened ({exc})"
    try:
        if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
            return (
                None
                if path.stat().st_size == 0
                else "index.db has no table meta (not this version's schema)"
            )
        schema = conn.execute("SELECT value FROM meta WHERE key = 'schema'").fetchone()
        if schema is not None and schema[0] != SCHEMA_ID:
            return None  # another version's index: no damage, the next read rebuilds it
        made_by = conn.execute("SELECT value FROM meta WHERE key = 'embedder'").fetchone()
        e = store.config.embedder
        if made_by is not None and made_by[0] != f"{e['model']}:{e['dim']}":
            return None  # another embedder's vectors (a reembed): the next read rebuilds it
        # an older memstore's index that never wrote its version lacks the newer columns: it
        # is rebuilt by the next read as well, so their absence alone is no damage
        dim = int(store.config.embedder["dim"])
        found = damage_of(
            conn,
            store.meta_dir,
            dim,
            thorough=True,
            allow_missing=NEWER_COLUMNS + NEWER_TABLES if schema is None else (),
        )
        if found is None and schema is not None:
            found = exact.sample_damage(conn, store.root, store.meta_dir, dim)
        return found
    except sqlite3.DatabaseError as exc:
        return f"index.db is not a readable database ({exc})"
    finally:
        conn.close()


@dataclass
class Plan:
    """What an update would do: days to (re)index and days to drop."""

    changed: list[str] = field(default_factory=list)
    vanished: list[str] = field(default_factory=list)
    touched: list[str] = field(default_factory=list)  # stat changed, content did not
    rebuild: bool = False

    @property
    def empty(self) -> bool:
        return not (self.changed or self.vanished or self.touched or self.rebuild)

    def to_json(self) -> dict:
        return {
            "reindex": self.changed,
            "drop": self.vanished,
            "refresh_fingerprint": self.touched,
            "rebuild": self.rebuild,
        }


def _same_prefix(content_fp: str | None, data: bytes) -> bool:
    """Whether `data` starts with the day log a day's `content_fp` was taken of (False when that
    fingerprint does not say: one from an older memstore, or none)."""
    parts = (content_fp or "").split(":")
    if len(parts) != 3 or not parts[1].isdigit() or int(parts[1]) > len(data):
        return False
    return hashlib.sha1(memoryview(data)[: int(parts[1])]).hexdigest() == parts[0]


@dataclass
class DayRows:
    day: str
    rows: list[
        tuple
    ]  # (id, line_no, off, len, ts, actor, role, type, session, source, fsha, vkey, text)
    vectors: list  # np.ndarray | None per row
    supersedes: list[str]
    problems: list[str]
    private: list[str] = field(default_factory=list)  # ids of the day's private records
    data: bytes = b""  # the day log as read (kept off a rebuild: the append check reads its prefix)


class Index:
    def __init__(self, store):
        self.store = store
        self.meta_dir: Path = store.meta_dir
        self.path = self.meta_dir / "index.db"
        self.dim = int(store.config.embedder["dim"])
        self._conn: sqlite3.Connection | None = None
        self.dropped = False  # set when a damaged or outdated index.db was thrown away
        self.note: str | None = None  # what was damaged, when that was why (a reader says it once)
        self._matrix: tuple | None = (
            None  # ((gen, n_rows), (vectors, times)) while that generation is current
        )
        self._has_segments = True  # refreshed by plan(): a store without segments/ skips that stat
        self._watch = (
            None  # kernel watches: a later full update skips the stat calls if nothing moved
        )
        self._pinned = False  # a read transaction holds the index as it was (see `pin`)
        self._looked = False  # a full look was made (the watches are armed from the second on)

    # ----- connection ---------------------------------------------------------------------------

    @property
    def conn(self) -> sqlite3.Connection:
        """The index database; created on first use. Reads go through the stdlib driver so a
        search does not pay for importing sqlite-utils, which creates the schema."""
        if self._conn is None:
            storefile.mkdirs(self.meta_dir, self.meta_dir.parent)
            storefile.check_db(self.path, self.meta_dir.parent)  # never an outside file's tables
            conn = sqlite3.connect(self.path, timeout=30)
            try:
                conn.execute("PRAGMA busy_timeout = 30000")
                conn.execute(
                    "PRAGMA secure_delete = ON"
                )  # a freed page is zeroed: deleted text leaves no copy
                conn.execute(f"PRAGMA journal_size_limit = {WAL_LIMIT}")
                if not conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'meta'").fetchone():
                    self._create(conn)
                stale = self._meta(conn, "schema") not in (None, SCHEMA_ID) or self._meta(
                    conn, "embedder"
                ) not in (None, self._embedder_key())
                damage = None if stale else self._damage(conn)
            except (
                sqlite3.DatabaseError
            ) as exc:  # not a database (damaged, truncated): it is only a cache
                stale, damage = True, f"index.db is not a readable database ({exc})"
            if stale or damage:
                conn.close()
                self._drop_files()
                self.dropped = True  # the next update rebuilds every day from the files
                if damage:
                    self.note = f".memstore/{damage}: rebuilding the index from the store's files"
                return self.conn
            self._conn = conn
        return self._conn

    def drop_if_damaged(self) -> str | None:
        """Throw the index away when the thorough check finds it damaged (`index -B`, `fsck --repair`),
        so that the rebuild starts from an empty database; returns what was wrong, or None."""
        damage = check(self.store)
        if damage is None:
            return None
        self.close()
        with file_lock(self.meta_dir / "index.lock", timeout=lock_timeout(), what="index"):
            self._drop_files()
        self._matrix = None
        self.dropped = True
        self.note = f".memstore/{damage}: rebuilding the index from the store's files"
        return damage

    def _damage(self, conn: sqlite3.Connection) -> str | None:
        """damage_of, confirmed under the index lock: an update swapping generations meanwhile is no damage."""
        if damage_of(conn, self.meta_dir, self.dim) is None:
            return None
        with file_lock(self.meta_dir / "index.lock", timeout=lock_timeout(), what="index"):
            return damage_of(conn, self.meta_dir, self.dim)

    @staticmethod
    def _create(conn: sqlite3.Connection) -> None:
        import sqlite_utils

        db = sqlite_utils.Database(conn)
        if db.journal_mode != "wal":
            db.enable_wal()
        conn.executescript(SCHEMA)

    def pin(self) -> None:
        """Read the index as it is now until `unpin`, whatever another process writes meanwhile (a
        WAL read snapshot, and the vector matrix mapped as it is): a big write's placement reads it
        while a second process takes in the days the write just wrote (core.py, IndexBeside), and
        must see the same index a write without that process would."""
        conn = self.conn
        if self._pinned or conn.in_transaction:
            return
        conn.execute("BEGIN")
        conn.execute("SELECT count(*) FROM meta").fetchall()
        self._pinned = True
        try:
            self.matrix()  # a generation the other process retires stays readable once mapped
        except (OSError, RuntimeError, ValueError):
            pass

    def unpin(self) -> None:
        if not self._pinned:
            return
        self._pinned = False
        try:
            self.conn.execute("COMMIT")
        except sqlite3.Error:
            if self.conn.in_transaction:
                self.conn.execute("ROLLBACK")

    def take_in(self, days: list[str]) -> None:
        """Bring `days` up to date after a write committed them; a failure here only leaves the
        cache behind (the next read updates it and says what failed), never fails the write."""
        try:
            self.update(days=days)
        except (OSError, sqlite3.Error):
            pass

    def close(self) -> None:
        self._pinned = False
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _embedder_key(self) -> str:
        e = self.store.config.embedder
        return f"{e['model']}:{e['dim']}"

    @staticmethod
    def _meta(conn, key, default=None):
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return row[0] if row else default

    def _drop_files(self) -> None:
        for p in self.meta_dir.glob("index.db*"):
            p.unlink(missing_ok=True)
        vecfiles.remove_generations(self.meta_dir, keep=-1)

    # ----- planning -----------------------------------------------------------------------------

    def _day_sources(self) -> dict[str, tuple[str, str]]:
        root = str(self.store.root)
        return {d: (p, segment_dir(root, d)) for d, p in sorted(days_on_disk(root).items())}

    def _stat_fp(self, log_path, seg_dir) -> str:
        day = os.path.basename(os.fspath(seg_dir))
        if not self._has_segments:
            seg_dir = None  # no segments/ at all (format 2): one stat fewer per day
        return stat_fingerprint(log_path, seg_dir, pack_dir(str(self.store.root), day))

    def _content_fp(self, log_bytes: bytes, seg_dir) -> str:
        """ "<sha1 of the day log>:<its length>:<sha1 of the log, the pack names and segment files>".

        The first two let the append path check that the lines it indexed before are still the
        file's first bytes (an edit in place of the same length changes no offset)."""
        h = hashlib.sha1(log_bytes)
        log_sha = h.hexdigest()  # the log alone; `h` goes on from there (the log hashed once)
        try:  # format 2: packs are named by their content, so their names are the fingerprint
            names = [
                n
                for n in sorted(
                    os.listdir(pack_dir(str(self.store.root), os.path.basename(os.fspath(seg_dir))))
                )
                if n.endswith(".is")
            ]
            h.update(("\npacks\n" + "\n".join(names)).encode())
        except OSError:
            pass
        try:
            for name in sorted(os.listdir(seg_dir)):
                shard = os.path.join(seg_dir, name)
                if os.path.isdir(shard):
                    with os.scandir(shard) as it:
                        listing = sorted(f"{e.name}:{e.stat().st_size}" for e in it)
                    h.update(("\n" + name + "\n" + "\n".join(listing)).encode())
        except OSError:
            pass
        return f"{log_sha}:{len(log_bytes)}:{h.hexdigest()}"

    def plan(self, rebuild: bool = False, days: list[str] | None = None) -> Plan:
        """What an update would do. With `days`, only those days are looked at (a write that knows
        which days it touches): the cost is theirs, not the store's; other days wait for a full plan."""
        conn = self.conn
        plan = Plan(rebuild=rebuild)
        self._has_segments = os.path.isdir(os.path.join(self.store.root, "segments"))
        if days is not None and not rebuild:
            wanted = sorted(set(days))
            marks = ",".join("?" * len(wanted))
            known = (
                {
                    d: (s, c)
                    for d, s, c in conn.execute(
                        f"SELECT day, stat_fp, content_fp FROM days WHERE day IN ({marks})", wanted
                    )
                }
                if wanted
                else {}
            )
            root = str(self.store.root)
            sources = {d: (str(logfmt.day_path(root, d)), segment_dir(root, d)) for d in wanted}
            sources = {d: src for d, src in sources.items() if os.path.exists(src[0])}
        else:
            known = {
                d: (s, c) for d, s, c in conn.execute("SELECT day, stat_fp, content_fp FROM days")
            }
            sources = self._day_sources()
        stats = (
            None
            if rebuild or days is not None
            else fingerprints(
                str(self.store.root),
                {d: src[0] for d, src in sources.items() if d in known},
                self._has_segments,
            )
        )
        for day, (log_path, seg_dir) in sorted(sources.items()):
            if rebuild or day not in known:
                plan.changed.append(day)
                continue
            now = stats[day] if stats is not None else self._stat_fp(log_path, seg_dir)
            if now == known[day][0]:
                continue
            try:
                data = storefile.read_bytes(log_path, self.store.root)
            except storefile.StoreLink:
                data = b""  # damage: read (and named) as a day with no lines
            if self._content_fp(data, seg_dir) == known[day][1]:
                plan.touched.append(day)
            else:
                plan.changed.append(day)
        plan.vanished = sorted(d for d in known if d not in sources)
        return plan

    # ----- updating -----------------------------------------------------------------------------

    def update(
        self,
        rebuild: bool = False,
        quiet: bool = True,
        progress=None,
        days: list[str] | None = None,
        opened: dict | None = None,
    ) -> Plan:
        """Bring the index up to date (or rebuild it); returns what was done. `days`: only those (see `plan`).
        `opened`: what a write put into the packs it made, by day (core._opened), taken instead of
        reading those packs back where they are still the day's only pack."""
        self.unpin()  # an update reads (and writes) the index as it is now
        if rebuild:
            self.drop_if_damaged()
        full = days is None and not rebuild
        if full:
            watch = self._watcher()
            if not watch.changed():
                return Plan()  # no file of the store or of git moved since the last full look
            if self._looked:
                # Before looking: a change made while we look is an event for next time. Not on
                # this reader's first full look: a one-shot `ct search` would pay for watches on
                # every day's folder (~15 µs each) that it never reads; a reader that comes back
                # looks once more and is watched from then on.
                watch.arm()
            self._looked = True
        try:
            return self._update(rebuild, days, progress, opened)
        except BaseException:
            if full:
                self._watch.dirty()  # the look did not finish: look again next time
            raise

    def _watcher(self):
        if self._watch is None:
            from ..gitrepo import git_dir
            from .watch import Watch

            root = self.store.root
            self._watch = Watch(root, git_dir(root) or root / ".git")
        return self._watch

    def _update(self, rebuild: bool, days: list[str] | None, progress, opened=None) -> Plan:
        plan = self.plan(rebuild, days)
        if plan.empty:
            return plan
        try:  # free at once (the common case); had another process applied the plan meanwhile, applying it again changes nothing
            with file_lock(self.meta_dir / "index.lock", timeout=0, what="index"):
                self._apply(plan, progress, opened)
                self.checkpoint()
            return plan
        except LockTimeout:
            pass
        with file_lock(self.meta_dir / "index.lock", timeout=lock_timeout(), what="index"):
            plan = self.plan(rebuild, days)  # another process may have done it while we waited
            if not plan.empty:
                self._apply(plan, progress, opened)
                self.checkpoint()
        return plan

    def checkpoint(self, wait: bool = False) -> bool:
        """Copy index.db-wal into index.db and empty it (SQLite's TRUNCATE checkpoint); True when
        it is empty. Without `wait` it gives up at once if a reader is in the WAL (the next update
        tries again; journal_size_limit bounds it meanwhile); with it, it waits for readers as
        long as any SQLite lock (30 s)."""
        conn = self.conn
        if not wait:
            conn.execute("PRAGMA busy_timeout = 0")
        try:
            busy, _frames, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        except sqlite3.OperationalError:
            return False
        finally:
            if not wait:
                conn.execute("PRAGMA busy_timeout = 30000")
        return busy == 0

    def _read_day(self, day: str, keep: bool = False, opened=None) -> tuple[DayRows, str, str]:
        log_path = logfmt.day_path(self.store.root, day)
        seg_dir = logfmt.segment_day_dir(self.store.root, day)
        stat_fp = self._stat_fp(log_path, seg_dir)
        try:
            data, linked = storefile.read_bytes(log_path, self.store.root), None
        except storefile.StoreLink as exc:  # damage: no line of it is read (fsck names it)
            data, linked = b"", exc.message
        content_fp = self._content_fp(data, seg_dir)
        out = DayRows(day, [], [], [], [], data=data if keep else b"")
        if linked is not None:
            out.problems.append(linked)
        shared: set[str] = set()
        gone = self._forgotten()
        # First every line (a problem, or a record with its time), then the vectors of all the
        # day's pack records in one pass over the packs (_pack_vectors), then the rows in line
        # order, each problem where the line-by-line reading put it.
        lines: list = []
        for ln in logfmt.read_lines(log_path, data):
            if ln.record is None:
                lines.append(f"{log_path}:{ln.line_no}: {ln.error}")
                continue
            rec = ln.record
            if (
                str(rec.get("id")) in gone
            ):  # forgotten on some clone (forgotten.jsonl): never indexed
                lines.append(
                    f"{log_path}:{ln.line_no}: {tombstones.BACK.format(rid=rec.get('id'))}"
                )
                continue
            try:
                ts = _seconds(rec["ts"])
            except (ValueError, TypeError):
                lines.append(f"{log_path}:{ln.line_no}: bad ts")
                continue
            lines.append((ln, rec, ts))
        in_packs = [e[1] for e in lines if type(e) is tuple and "seg" not in e[1]]
        pack_problems: list[str] = []
        packed = iter(
            (
                self._opened_vectors(opened, in_packs, day)
                or self._pack_vectors(self._read_packs(day, pack_problems), in_packs, day)
            )
            if in_packs
            else ()
        )
        for entry in lines:
            if type(entry) is str:
                out.problems.append(entry)
                continue
            ln, rec, ts = entry
            if "seg" in rec:  # format 1: the record names its segment files
                vec, vkey = self._read_vector(rec, out.problems)
            else:
                if pack_problems:  # a damaged pack is said before the first record it fails
                    out.problems += pack_problems
                    pack_problems = []
                vec, vkey, problem = next(packed)
                if problem is not None:
                    out.problems.append(problem)
            source = rec.get("source")
            source_path = (
                source.get("path")
                if isinstance(source, dict)
                else (source if isinstance(source, str) else None)
            )
            fsha = source.get("file_sha256") if isinstance(source, dict) else None
            out.rows.append(
                (
                    str(rec["id"]),
                    ln.line_no,
                    ln.offset,
                    ln.length,
                    ts,
                    rec.get("actor"),
                    rec.get("role"),
                    rec.get("type"),
                    rec.get("session"),
                    source_path,
                    fsha,
                    vkey,
                    rec["text"],
                    *_author_parts(rec.get("author")),  # case-folded, for --author
                )
            )
            out.vectors.append(vec)
            sup = rec.get("supersedes")
            if isinstance(sup, list):
                out.supersedes += [str(s) for s in sup]
            if rec.get("scope") == "private":
                out.private.append(str(rec["id"]))
            else:
                shared.add(str(rec["id"]))
        # a shared copy (a merge kept the private line `ct share` replaced) wins
        out.private = [i for i in out.private if i not in shared]
        return out, stat_fp, content_fp

    def _forgotten(self) -> set[str]:
        """Tombstoned ids (forgotten.jsonl), read again only when the file changed."""
        try:
            st = os.stat(self.store.root / tombstones.FILENAME)
            key = (st.st_mtime_ns, st.st_size)
        except FileNotFoundError:
            return set()
        if getattr(self, "_gone_key", None) != key:
            self._gone_key, self._gone = key, tombstones.ids(self.store.root)
        return self._gone

    def _read_vector(self, rec: dict, problems: list[str]):
        seg = rec.get("seg")
        if not isinstance(seg, dict) or "shard" not in seg or "vec" not in seg:
            return None, None
        try:
            path = layout.safe_path(self.store.root, str(seg["shard"])) / segment_name(
                int(seg["vec"])
            )
        except (ValueError, TypeError) as exc:
            problems.append(f"record {rec.get('id')}: bad segment reference ({exc})")
            return None, None
        try:
            header, payload = read_segment(path)
            if header.data_type not in VECTOR_TYPES:
                raise SegmentError(f"data_type {header.data_type} is not a vector")
            vec = decode_vector(header, payload)
            if vec.shape[0] != self.dim:
                raise SegmentError(
                    f"vector has {vec.shape[0]} dimensions, the store uses {self.dim}"
                )
        except (OSError, SegmentError, ValueError) as exc:
            problems.append(f"{path}: {exc}")
            return None, None
        return vec, f"{seg['shard']}:{seg['vec']}"

    def _read_packs(self, day: str, problems: list[str]) -> list:
        """The day's packs, parsed; a damaged pack is a problem and is skipped, the rest still count."""
        out = []
        for p in packfmt.pack_files(packfmt.day_dir(self.store.root, day)):
            try:
                out.append(packfmt.read(p))
            except (OSError, SegmentError, ValueError) as exc:
                why = str(exc).split("\n")[0]  # a StoreLink's hint is for fsck to give
                problems.append(why if str(p) in why else f"{p}: {why}")
        return out

    def _opened_vectors(self, opened, recs: list[dict], day: str) -> list[tuple] | None:
        """What `_pack_vectors` gives for the day's records, from what the write that made the
        day's pack put into it (core._opened): None unless that pack is still the day's only one
        and its records are exactly the day's, in order (then the pack would be read back)."""
        if not isinstance(opened, dict):
            return None
        try:
            names = [p.name for p in packfmt.pack_files(packfmt.day_dir(self.store.root, day))]
            ids, places = opened["ids"], opened["places"]
            vecs = np.frombuffer(opened["vectors"], dtype="<f4").astype(np.float32, copy=False)
            vecs = vecs.reshape(len(ids), self.dim)
        except (OSError, KeyError, TypeError, ValueError):
            return None
        size = exact.SEALED_SIZE
        if (
            names != [opened.get("pack")]
            or ids != [str(rec.get("id")) for rec in recs]
            or len(places) != size * len(ids)
        ):
            return None
        return [(vecs[n], places[n * size : (n + 1) * size], None) for n in range(len(ids))]

    def _pack_vectors(self, packs: list, recs: list[dict], day: str) -> list[tuple]:
        """(vector, location, problem) for each record of a day whose vector lies in the day's
        packs: the first pack (by name) its line's key opens, and it must belong to its text.

        One look into each pack for all the records the packs before it did not hold, and one
        decode and finiteness check for all the float32 vectors: a record at a time, the Python
        around each lookup cost more than opening the sealed item itself."""
        where = layout.pack_dir(day)
        rids = [str(rec.get("id")) for rec in recs]
        keys = [seal.key_bytes(rec.get("vkey")) for rec in recs]  # as packfmt.ring reads them
        # (record id, key) of a sealed item, or the record id of a format-2 one:
        # (pack number, pack name, hash16, plain header, payload, location)
        hits: dict = {}
        for n, pk in enumerate(packs):
            if pk.sealed:
                ring = [p for p in dict.fromkeys(zip(rids, keys)) if p[1] is not None]
                for rid, key, *item in exact.opened_items(pk, [p for p in ring if p not in hits]):
                    hits.setdefault((rid, key), (n, pk.path.name, *item))
            else:
                wanted = [(r, None) for r in dict.fromkeys(rids) if r not in hits]
                for rid, _, *item in exact.opened_items(pk, wanted):
                    hits.setdefault(rid, (n, pk.path.name, *item))
        # A record with a sealed item and a format-2 one (a day written before and after an
        # upgrade) takes the one in the pack first by name, as a lookup pack by pack did.
        found = []
        for rid, key in zip(rids, keys):
            sealed = hits.get((rid, key)) if key is not None else None
            clear = hits.get(rid)
            if sealed is None or (clear is not None and clear[0] < sealed[0]):
                sealed = clear
            found.append(sealed)
        # float32 vectors of the store's dimension, decoded together (decode_vector for the rest)
        plain = [
            j
            for j, hit in enumerate(found)
            if hit is not None
            and hit[3].data_type == DT_VEC_F32
            and hit[3].dim == self.dim
            and len(hit[4]) == 4 * self.dim
        ]
        block = (
            np.frombuffer(b"".join(found[j][4] for j in plain), dtype="<f4")
            .astype(np.float32, copy=False)  # a view of the bytes where "<f4" is float32
            .reshape(len(plain), self.dim)
        )
        finite = np.isfinite(block).all(axis=1).tolist()
        decoded = {j: (block[n], finite[n]) for n, j in enumerate(plain)}
        out = []
        for j, (rec, rid, hit) in enumerate(zip(recs, rids, found)):
            if hit is None:
                out.append((None, None, f"record {rid}: no vector in {where}/"))
                continue
            _, name, h16, header, payload, location = hit
            if j in decoded:
                vec, ok = decoded[j]
            else:
                try:
                    vec = decode_vector(header, payload)
                except SegmentError as exc:
                    out.append((None, None, f"{where}/{name}: vector of record {rid}: {exc}"))
                    continue
                ok = None
            own = packfmt.hash16(str(rec.get("hash") or ""))
            if h16 != own:
                out.append(
                    (
                        None,
                        None,
                        f"{where}/{name}: vector of record {rid} was made from other text "
                        f"(hash16 {h16}, the record's is {own})",
                    )
                )
            elif vec.shape[0] != self.dim:
                out.append(
                    (
                        None,
                        None,
                        f"{where}/{name}: vector of record {rid} has {vec.shape[0]} "
                        f"dimensions, the store uses {self.dim}",
                    )
                )
            elif not (ok if ok is not None else np.isfinite(vec).all()):
                # it would rank first for every query
                out.append(
                    (None, None, f"{where}/{name}: vector of record {rid} holds NaN or Infinity")
                )
            else:
                out.append((vec, location, None))
        return out

    def _apply(self, plan: Plan, progress=None, opened: dict | None = None) -> None:
        conn = self.conn
        fts.settle(conn)  # what a delete left owed, where its process stopped before settling
        gen = int(self._meta(conn, "gen", "0"))
        n_rows = int(self._meta(conn, "n_rows", "0"))
        day_data = {}
        for day in plan.changed:
            day_data[day] = self._read_day(
                day, keep=not plan.rebuild, opened=(opened or {}).get(day)
            )
            if progress:
                progress(1)
        bulk = plan.rebuild or sum(len(r.rows) for r, _, _ in day_data.values()) >= FTS_MERGE_ROWS
        with self._page_cache(conn, bulk):
            self._apply_rows(plan, conn, day_data, gen, n_rows, bulk)

    @staticmethod
    @contextmanager
    def _page_cache(conn, bulk: bool):
        """With `bulk`, SQLite's page cache at BULK_CACHE_KIB while the rows go in, then as it was.
        At its default (2 MB) a bulk load's pages left the cache and were read back and written
        again: 203,605 page writes and 128,438 page reads for the 100k dev turns' import (a 194 MB
        index), 148,466 and 49,470 with it."""
        if not bulk:
            yield
            return
        had = conn.execute("PRAGMA cache_size").fetchone()[0]
        conn.execute(f"PRAGMA cache_size = {-BULK_CACHE_KIB}")
        try:
            yield
        finally:
            conn.execute(f"PRAGMA cache_size = {int(had)}")

    def _apply_rows(
        self, plan: Plan, conn, day_data: dict, gen: int, n_rows: int, bulk: bool
    ) -> None:
        """`_apply`'s writes, the days read."""
        if (
            not plan.rebuild
            and not plan.vanished
            and self._append_only(conn, day_data, n_rows, gen, plan.touched, bulk)
        ):
            if bulk:
                self._merge_fts(conn)
            return
        # Counted only off the append path: at a million rows the count alone costs ~0.1 s.
        if plan.rebuild:
            gen_new, keep_rows, first_day = gen + 1, 0, ""
        else:
            affected = sorted(plan.changed + plan.vanished)
            first_day = affected[0] if affected else None
            tail_day = self._tail_first_day(conn, n_rows)
            if tail_day is not None and first_day is not None:
                first_day = min(
                    first_day, tail_day
                )  # the unsorted tail is put in order with the rest
            if first_day is None:
                gen_new, keep_rows = gen, n_rows
            else:
                later = conn.execute(
                    "SELECT COUNT(*) FROM records WHERE day >= ? AND vrow >= 0", (first_day,)
                ).fetchone()[0]
                keep_rows = n_rows - later
                gen_new = gen if keep_rows == n_rows else gen + 1

        old_vec, _ = (  # a rebuild keeps no row: it needs no old file (they may be damaged)
            vecfiles.open_matrix(self.meta_dir, gen, n_rows, self.dim)
            if n_rows and not plan.rebuild
            else (None, None)
        )
        affected = None if plan.rebuild else self._ids_of_days(conn, plan.changed + plan.vanished)
        with conn:  # one transaction
            if plan.rebuild:
                # A bulk load builds the secondary indexes once, by sorting, after the rows are in:
                # kept during the load, each of the seven would take a B-tree insert per row.
                for name in RECORD_INDEXES:
                    conn.execute(f"DROP INDEX IF EXISTS {name}")
                conn.execute("DELETE FROM records")
                fts.delete_all(conn)
                conn.execute("DELETE FROM supersedes")
                conn.execute("DELETE FROM private")
                conn.execute("DELETE FROM days")
            for day in plan.vanished + [d for d in plan.changed if not plan.rebuild]:
                fts.delete_rows(conn, "SELECT rowid FROM records WHERE day = ?", (day,))
                conn.execute("DELETE FROM records WHERE day = ?", (day,))
                conn.execute("DELETE FROM supersedes WHERE day = ?", (day,))
                conn.execute("DELETE FROM private WHERE day = ?", (day,))
                conn.execute("DELETE FROM days WHERE day = ?", (day,))
            fresh_vectors: dict[int, np.ndarray] = {}
            # a rebuild's rows are all new: each goes in with its vector row (see _placement)
            placed, vrows = (
                self._placement(
                    conn, [(d, r.rows, r.vectors) for d, (r, _, _) in day_data.items()], 0
                )
                if plan.rebuild
                else ([], None)
            )
            with self._fts_merging_off(conn, bulk):
                for day, (rows, stat_fp, content_fp) in day_data.items():
                    fresh_vectors.update(
                        self._insert_rows(conn, day, rows.rows, rows.vectors, vrows)
                    )
                    conn.executemany(
                        "INSERT INTO supersedes (day, id) VALUES (?, ?)",
                        [(day, s) for s in rows.supersedes],
                    )
                    self._save_private(conn, day, rows)
                    self._save_day(conn, day, rows, stat_fp, content_fp)
            self._refresh_touched(conn, plan.touched)
            if placed:
                self._write_placed(conn, placed, gen_new, 0, True, 0)
            elif first_day is not None or plan.rebuild:
                self._renumber(
                    conn, first_day or "", keep_rows, gen, gen_new, old_vec, fresh_vectors
                )
            if affected is not None:
                affected |= self._ids_of_days(conn, plan.changed)
            if plan.rebuild:
                for statement in RECORD_INDEX_SQL:
                    conn.execute(statement)
            self._mark_hidden(conn, affected)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_ID,))
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('embedder', ?)", (self._embedder_key(),)
            )
        del old_vec
        fts.settle(conn)  # (after the commit: see index/fts.py)
        if bulk:
            self._merge_fts(conn)
        vecfiles.remove_generations(self.meta_dir, keep=int(self._meta(conn, "gen", "0")))

    def _renumber(
        self, conn, first_day: str, keep_rows: int, gen: int, gen_new: int, old_vec, fresh: dict
    ) -> None:
        """Give rows from `first_day` on their time-ordered vector rows and write those rows."""
        tail = conn.execute(
            "SELECT rowid, vrow, ts, day, vkey FROM records WHERE day >= ? AND (vrow >= 0 OR rowid IN (SELECT value FROM json_each(?)))"
            " ORDER BY day, ts, line_no, id",
            (first_day, json.dumps(list(fresh))),
        ).fetchall()
        # Rows kept from the old generation keep their codes, so they keep its scales; only a
        # generation made wholly of freshly read vectors (a rebuild) gets scales of its own.
        kept = any(rowid not in fresh for rowid, *_ in tail)
        if keep_rows or kept:
            scale = old_vec.scale
        else:
            scale = (
                vecfiles.make_scales(np.stack(list(fresh.values())))
                if fresh
                else np.ones(self.dim, np.float32)
            )
        is_fresh = np.array([rowid in fresh for rowid, *_ in tail], bool)
        codes = np.zeros((len(tail), self.dim), np.int8)
        errors = np.zeros(len(tail), np.float32)
        if is_fresh.any():
            got = vecfiles.quantize(
                np.stack([fresh[r] for r, *_ in tail if r in fresh]).astype(np.float32), scale
            )
            codes[is_fresh], errors[is_fresh] = got
        if not is_fresh.all():
            old_rows = np.array([v for r, v, *_ in tail if r not in fresh], np.int64)
            codes[~is_fresh] = old_vec.codes[old_rows]
            errors[~is_fresh] = old_vec.errors[old_rows]
        times = np.array([ts for _, _, ts, *_ in tail], np.float64)
        updates = [(keep_rows + i, rowid) for i, (rowid, *_) in enumerate(tail)]
        if gen_new != gen and keep_rows:
            vecfiles.copy_prefix(self.meta_dir, gen, gen_new, keep_rows, self.dim)
        elif not keep_rows:
            vecfiles.write_scales(self.meta_dir, gen_new, scale)
        where = [(rowid, day, vkey) for rowid, _, _, day, vkey in tail]
        vecfiles.write_rows(self.meta_dir, gen_new, keep_rows, codes, errors, times, where)
        self._raise_maxima(conn, codes, errors, keep=keep_rows > 0)
        conn.execute("UPDATE records SET vrow = -1 WHERE day >= ?", (first_day,))
        conn.executemany("UPDATE records SET vrow = ? WHERE rowid = ?", updates)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('gen', ?)", (str(gen_new),))
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('n_rows', ?)", (str(keep_rows + len(tail)),)
        )
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('sorted_rows', ?)", (str(keep_rows + len(tail)),)
        )

    def _raise_maxima(self, conn, codes: np.ndarray, errors: np.ndarray, keep: bool) -> None:
        """Keep in meta the largest code norm and row error of the generation (with `keep`, the
        larger of the values there and these rows'), which bound what a faiss stage leaves out
        (index/ann.py): an upper bound, never below a row's (deleted rows may leave it higher)."""
        new = vecfiles.maxima(codes, errors)
        for key, value in zip(("code_norm_max", "error_max"), new):
            old = self._meta(conn, key) if keep else None
            try:
                value = max(value, float(old)) if old is not None else value
            except ValueError:
                pass
            conn.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", (key, repr(value)))

    def _mark_hidden(self, conn, ids: set[str] | None = None) -> None:
        """Superseded records (1) and repeated ids (2, all but the earliest copy) leave search.

        With `ids` (the record and superseded ids of the days just changed) only those ids are
        looked at, so a write's cost does not grow with the store; None recomputes every row.
        """
        if ids is None or len(ids) > 50_000:
            conn.execute("UPDATE records SET hidden = 0 WHERE hidden != 0")
            conn.execute("UPDATE records SET hidden = 1 WHERE id IN (SELECT id FROM supersedes)")
            conn.execute("""
                UPDATE records SET hidden = 2 WHERE rowid IN (
                  SELECT rowid FROM (
                    SELECT rowid, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts, day, vkey, line_no) AS rn
                    FROM records WHERE id IN (SELECT id FROM records GROUP BY id HAVING COUNT(*) > 1))
                  WHERE rn > 1)""")
            return
        conn.execute("CREATE TEMP TABLE IF NOT EXISTS touched_ids (id TEXT PRIMARY KEY)")
        conn.execute("DELETE FROM touched_ids")
        conn.executemany("INSERT OR IGNORE INTO touched_ids VALUES (?)", ((i,) for i in ids))
        conn.execute(
            "UPDATE records SET hidden = 0 WHERE hidden != 0 AND id IN (SELECT id FROM touched_ids)"
        )
        conn.execute(
            "UPDATE records SET hidden = 1 WHERE id IN (SELECT id FROM touched_ids)"
            " AND id IN (SELECT id FROM supersedes)"
        )
        conn.execute("""
            UPDATE records SET hidden = 2 WHERE rowid IN (
              SELECT rowid FROM (
                SELECT rowid, ROW_NUMBER() OVER (PARTITION BY id ORDER BY ts, day, vkey, line_no) AS rn
                FROM records WHERE id IN (SELECT id FROM touched_ids))
              WHERE rn > 1)""")

    @staticmethod
    def _ids_of_days(conn, days: list[str]) -> set[str]:
        """Record ids and superseded ids of these days, as the index holds them now."""
        out: set[str] = set()
        for i in range(0, len(days), 500):
            chunk = days[i : i + 500]
            q = ",".join("?" * len(chunk))
            out.update(
                r[0] for r in conn.execute(f"SELECT id FROM records WHERE day IN ({q})", chunk)
            )
            out.update(
                r[0] for r in conn.execute(f"SELECT id FROM supersedes WHERE day IN ({q})", chunk)
            )
        return out

    @staticmethod
    def _insert_rows(
        conn, day: str, rows: list, vectors: list, vrows: dict | None = None
    ) -> dict[int, np.ndarray]:
        """Insert rows (and their words) for `day`; returns {rowid: vector} for those that have one.
        `vrows`: {rowid: vector row} known before the insert (the append path), else -1 for now."""
        if not rows:
            return {}
        # rowids given, so the rows and their words go in with one statement each, not two a row
        first = conn.execute("SELECT COALESCE(MAX(rowid), 0) + 1 FROM records").fetchone()[0]
        ids = range(first, first + len(rows))
        vrows = vrows or {}
        conn.executemany(
            "INSERT INTO records (rowid, id, day, line_no, off, len, ts, actor, role, type, session,"
            " source, fsha, vkey, author_name, author_email, vrow)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            [
                (
                    rowid,
                    row[0],
                    day,
                    *row[1:12],
                    row[13] or None,
                    row[14] or None,
                    vrows.get(rowid, -1),
                )
                for rowid, row in zip(ids, rows)
            ],
        )
        conn.executemany(
            "INSERT INTO fts (rowid, body) VALUES (?, ?)",
            [(rowid, index_text(row[12])) for rowid, row in zip(ids, rows)],
        )
        return {rowid: vec for rowid, vec in zip(ids, vectors) if vec is not None}

    @staticmethod
    def _save_private(conn, day: str, rows) -> None:
        conn.execute("DELETE FROM private WHERE day = ?", (day,))
        conn.executemany(
            "INSERT INTO private (day, id) VALUES (?, ?)", [(day, i) for i in rows.private]
        )

    @staticmethod
    def _save_day(conn, day: str, rows, stat_fp: str, content_fp: str) -> None:
        conn.execute(
            "INSERT OR REPLACE INTO days (day, stat_fp, content_fp, n, problems) VALUES (?,?,?,?,?)",
            (day, stat_fp, content_fp, len(rows.rows), json.dumps(rows.problems[:50])),
        )

    def _refresh_touched(self, conn, days: list[str]) -> None:
        """Days whose files were touched but not changed (a checkout): only their stat fingerprint moves."""
        for day in days:
            log_path = logfmt.day_path(self.store.root, day)
            seg_dir = logfmt.segment_day_dir(self.store.root, day)
            conn.execute(
                "UPDATE days SET stat_fp = ? WHERE day = ?", (self._stat_fp(log_path, seg_dir), day)
            )

    @staticmethod
    @contextmanager
    def _fts_merging_off(conn, bulk: bool):
        """Inside a write transaction: with `bulk` (an update that `_merge_fts` follows), FTS5
        merges none of the segments the rows fill while they go in (its `automerge` 0), since
        the optimize after it merges them all at once (0.45 of 3.1 s of full-text inserts at
        100k rows), and gathers up to FTS_BULK_HASH bytes of terms in memory before it writes a
        segment (`hashsize`; 1 MB by default): 100k dev turns then go in as one segment, which
        the optimize finds merged (their full-text inserts and merge 3.9 -> 3.2 s CPU, 54 MB more
        memory in the process that indexes). Then the settings are put back as they were,
        fts_config holding no row for one when it held none. A failure rolls all of it back with
        the transaction."""
        if not bulk:
            yield
            return
        had = {
            k: conn.execute("SELECT v FROM fts_config WHERE k = ?", (k,)).fetchone()
            for k in ("automerge", "hashsize")
        }
        conn.execute("INSERT INTO fts(fts, rank) VALUES ('automerge', 0)")
        put = [("automerge", FTS_AUTOMERGE)]
        try:  # (not among FTS5's documented settings: an SQLite without it loads as before)
            conn.execute("INSERT INTO fts(fts, rank) VALUES ('hashsize', ?)", (FTS_BULK_HASH,))
            put.append(("hashsize", FTS_HASHSIZE))
        except sqlite3.OperationalError:
            pass
        yield
        # through FTS5, so that this connection's copy of each setting is back as well
        for k, default in put:
            conn.execute(
                "INSERT INTO fts(fts, rank) VALUES (?, ?)",
                (k, had[k][0] if had[k] else default),
            )
            if had[k] is None:
                conn.execute("DELETE FROM fts_config WHERE k = ?", (k,))

    @staticmethod
    def _merge_fts(conn) -> None:
        """After a bulk load: the full-text index, left in many small segments, merged into one
        (316 -> 100 B a record at 100k, ~0.8 s). The pages that frees, and those a rebuild's
        deletes freed, are given back to the disk when they are a tenth of the file or more
        (VACUUM: ~0.7 s at 100k; a `ct index -B` of the 100k bench store left 4,440 free pages,
        120 B a record, under the quarter this rule said before); fewer are left for the next
        writes to reuse."""
        with conn:
            conn.execute("INSERT INTO fts(fts) VALUES ('optimize')")
        free = conn.execute("PRAGMA freelist_count").fetchone()[0]
        if free * 10 >= conn.execute("PRAGMA page_count").fetchone()[0]:
            conn.execute("VACUUM")

    @staticmethod
    def _placement(conn, new_rows: list, first_vrow: int) -> tuple[list, dict]:
        """Where rows about to go in, [(day, rows, vectors)], will lie: (placed, {rowid: vector
        row}), placed being (matrix order, rowid, day, location, vector) of each row with a
        vector, in matrix order from `first_vrow` on. Known before they go in, so no row is
        updated afterwards: rowids follow MAX(rowid) in this order, and the matrix order is
        SQLite's ORDER BY day, ts, line_no, id (text compares as its UTF-8 bytes, which sort as
        Python's code points)."""
        rowid = conn.execute("SELECT COALESCE(MAX(rowid), 0) + 1 FROM records").fetchone()[0]
        placed = []
        for day, rows, vectors in new_rows:
            for row, vec in zip(rows, vectors):
                if vec is not None:
                    placed.append(((day, row[4], row[1], row[0]), rowid, day, row[11], vec))
                rowid += 1
        placed.sort(key=lambda p: p[0])
        return placed, {p[1]: first_vrow + i for i, p in enumerate(placed)}

    def _write_placed(
        self, conn, placed: list, gen: int, n_rows: int, in_order: bool, sorted_rows: int
    ) -> None:
        """Write `placed` (see _placement) as vector rows n_rows.. of generation `gen` (the first
        write of a generation fixes its scales) and say so in meta."""
        vecs = [p[4] for p in placed]  # (stacked a chunk at a time by make_scales and quantize)
        times = np.array([p[0][1] for p in placed], np.float64)
        if n_rows:
            scale = vecfiles.read_scales(self.meta_dir, gen, self.dim)
        else:  # the generation's first write fixes its scales
            scale = vecfiles.make_scales(vecs)
            vecfiles.write_scales(self.meta_dir, gen, scale)
        codes, errors = vecfiles.quantize(vecs, scale)
        where = [(r, day, vkey) for _, r, day, vkey, _ in placed]
        vecfiles.write_rows(self.meta_dir, gen, n_rows, codes, errors, times, where)
        self._raise_maxima(conn, codes, errors, keep=n_rows > 0)
        conn.execute("INSERT OR REPLACE INTO meta VALUES ('gen', ?)", (str(gen),))
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('n_rows', ?)", (str(n_rows + len(placed)),)
        )
        conn.execute(
            "INSERT OR REPLACE INTO meta VALUES ('sorted_rows', ?)",
            (str(n_rows + len(placed) if in_order else sorted_rows),),
        )

    def _append_only(
        self, conn, day_data: dict, n_rows: int, gen: int, touched: list[str], bulk: bool = False
    ) -> bool:
        """The common write: lines appended to days whose old lines are unchanged, all sorting after
        every indexed row. Then only the new rows are inserted and their vectors appended to the
        current generation (readers holding the old row count are unaffected), so the cost is that
        of the new lines, not of the store. Returns False (and changes nothing) when it does not apply.
        """
        key = lambda day, row: (
            day,
            row[4],
            row[1],
            row[0],
        )  # the matrix order: day, ts, line_no, id
        last = (
            conn.execute(
                "SELECT day, ts, line_no, id FROM records WHERE vrow = ?", (n_rows - 1,)
            ).fetchone()
            if n_rows
            else None
        )
        sorted_rows = self._sorted_rows(conn, n_rows)
        new_rows: dict[str, tuple[list, list, int]] = {}
        before = dict(
            conn.execute(
                f"SELECT day, content_fp FROM days WHERE day IN ({','.join('?' * len(day_data))})",
                list(day_data),
            )
        )
        for day, (rows, _, _) in day_data.items():
            if day in before and not _same_prefix(before[day], rows.data):
                return False  # a line indexed before was changed in place: the day is read again
            old = conn.execute(
                "SELECT id, line_no, off, len, vrow, vkey FROM records WHERE day = ? ORDER BY line_no",
                (day,),
            ).fetchall()
            if len(old) > len(rows.rows) or [tuple(r[:4]) for r in rows.rows[: len(old)]] != [
                tuple(o[:4]) for o in old
            ]:
                return False
            # A re-embedded or repacked day moves its vectors: a pack is named by its bytes, so
            # another vector is another location.
            for (*_, vrow, where), row, vec in zip(old, rows.rows, rows.vectors):
                if (vec is None) != (vrow < 0) or (vec is not None and where != row[11]):
                    return False
            added = rows.rows[len(old) :]
            new_rows[day] = (added, rows.vectors[len(old) :], len(old))
        # Rows that sort after every indexed row extend the time-ordered prefix. Others (a turn dated
        # before the newest one: a back-fill, another clock) go to the unsorted tail, which readers
        # scan whole; re-sorting from their day instead would copy the matrix from there (seconds at
        # a million rows). A tail past TAIL_MAX rows is folded in by the full path.
        in_order = sorted_rows == n_rows and all(
            last is None or key(day, r) > tuple(last)
            for day, (added, _, _) in new_rows.items()
            for r in added
        )
        if not in_order:
            count = sum(len(a) for a, _, _ in new_rows.values())
            if n_rows + count - sorted_rows > max(TAIL_MIN, int(n_rows * TAIL_SHARE)):
                return False

        placed, vrows = self._placement(
            conn, [(day, added, vecs) for day, (added, vecs, _) in new_rows.items()], n_rows
        )
        # Into an empty index, the secondary indexes are built once, by sorting, after the rows
        # are in (as a rebuild does), not a B-tree insert a row for each of the seven.
        bulk_load = conn.execute("SELECT 1 FROM records LIMIT 1").fetchone() is None and any(
            added for added, _, _ in new_rows.values()
        )

        with conn:
            if bulk_load:
                for name in RECORD_INDEXES:
                    conn.execute(f"DROP INDEX IF EXISTS {name}")
            with self._fts_merging_off(conn, bulk):
                for day, (added, vecs, _) in new_rows.items():
                    self._insert_rows(conn, day, added, vecs, vrows)
                    rows, stat_fp, content_fp = day_data[day]
                    conn.execute("DELETE FROM supersedes WHERE day = ?", (day,))
                    conn.executemany(
                        "INSERT INTO supersedes (day, id) VALUES (?, ?)",
                        [(day, s) for s in rows.supersedes],
                    )
                    self._save_private(conn, day, rows)
                    self._save_day(conn, day, rows, stat_fp, content_fp)
            if bulk_load:
                for statement in RECORD_INDEX_SQL:
                    conn.execute(statement)
            if placed:
                self._write_placed(conn, placed, gen, n_rows, in_order, sorted_rows)
            self._refresh_touched(conn, touched)
            ids = {r[0] for added, _, _ in new_rows.values() for r in added}
            ids |= {s for rows, _, _ in day_data.values() for s in rows.supersedes}
            self._mark_hidden(conn, ids)
            conn.execute("INSERT OR REPLACE INTO meta VALUES ('schema', ?)", (SCHEMA_ID,))
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES ('embedder', ?)", (self._embedder_key(),)
            )
        return True

    # ----- reading --------------------------------------------------------------------------------

    def _sorted_rows(self, conn, n_rows: int) -> int:
        """Rows [0, sorted_rows) are in time order; the rest is the unsorted tail (see _append_only)."""
        value = self._meta(conn, "sorted_rows")
        return min(int(value), n_rows) if value is not None else n_rows

    def _tail_first_day(self, conn, n_rows: int) -> str | None:
        sorted_rows = self._sorted_rows(conn, n_rows)
        if sorted_rows >= n_rows:
            return None
        return conn.execute(
            "SELECT MIN(day) FROM records WHERE vrow >= ?", (sorted_rows,)
        ).fetchone()[0]

    def sorted_rows(self) -> int:
        """How many leading rows of the matrix `matrix()` last returned are in time order."""
        if self._matrix is None:
            self.matrix()
        return self._matrix[2]

    def matrix(self):
        """(vectors, times) of the current generation, memory-mapped; retried if an update swaps it.

        `vectors` is a vectors.Matrix: int8 codes with their scales and errors; indexing it gives
        decoded float32 approximations. A row's exact vector is read from the store (index/exact.py).

        The mapping is reused while (generation, rows) is unchanged: mapping the file anew for every
        query makes each query fault every page of the matrix in again (~20 ms at 100k rows).
        Rows are only ever appended to a current generation, so a kept mapping stays valid.
        """
        for _ in range(5):
            meta = dict(
                self.conn.execute(
                    "SELECT key, value FROM meta WHERE key IN"
                    " ('gen', 'n_rows', 'sorted_rows', 'code_norm_max', 'error_max')"
                )
            )
            gen, n_rows = int(meta.get("gen", 0)), int(meta.get("n_rows", 0))
            ordered = min(int(meta.get("sorted_rows", n_rows)), n_rows)
            if self._matrix is not None and self._matrix[0] == (gen, n_rows):
                self._matrix = (self._matrix[0], self._matrix[1], ordered)
                return self._matrix[1]
            try:
                arrays = vecfiles.open_matrix(self.meta_dir, gen, n_rows, self.dim)
            except FileNotFoundError:
                continue
            arrays[0].known_maxima(meta.get("code_norm_max"), meta.get("error_max"))
            self._matrix = ((gen, n_rows), arrays, ordered)
            return arrays
        raise RuntimeError("the vector index kept changing while it was being opened")

    def save_clean_keys(self, keys: list[bytes]) -> None:
        """Remember texts the secret scan found clean (memstore/secrets/policy.py); best effort.
        In key order: a big write's keys (88,000 for a 100k-turn import) inserted at random places
        of the table's B-tree spilled SQLite's page cache (0.41 s; sorted first 0.18 s)."""
        if not keys:
            return
        try:
            with self.conn:
                self.conn.execute(CLEAN_TEXTS)
                self.conn.executemany(
                    "INSERT OR IGNORE INTO clean_texts VALUES (?)", [(k,) for k in sorted(keys)]
                )
        except sqlite3.Error:  # a busy or read-only cache only costs a later process the scan
            pass

    def known_ids(self, ids: list[str]) -> set[str]:
        found: set[str] = set()
        for i in range(0, len(ids), 500):
            part = ids[i : i + 500]
            q = f"SELECT id FROM records WHERE id IN ({','.join('?' * len(part))})"
            found.update(r[0] for r in self.conn.execute(q, part))
        return found

    def problems(self) -> list[str]:
        out = []
        for (p,) in self.conn.execute(
            "SELECT problems FROM days WHERE problems != '[]' ORDER BY day"
        ):
            out += json.loads(p)
        # vectors a search could not read from the store (index/exact.py): a pack gone or damaged
        return out + sorted(self.__dict__.get("vector_problems", ()))

    def record_at(self, rowid: int) -> dict:
        """The full record behind an index row, read from its day log (late dereference)."""
        day, off, ln = self.conn.execute(
            "SELECT day, off, len FROM records WHERE rowid = ?", (rowid,)
        ).fetchone()
        return logfmt.read_text_at(logfmt.day_path(self.store.root, day), off, ln)

    def stats(self) -> dict:
        c = self.conn
        return {
            "records": c.execute("SELECT COUNT(*) FROM records").fetchone()[0],
            "visible": c.execute("SELECT COUNT(*) FROM records WHERE hidden = 0").fetchone()[0],
            "days": c.execute("SELECT COUNT(*) FROM days").fetchone()[0],
            "vectors": int(self._meta(c, "n_rows", "0")),
        }
