"""A numpy-free view of the index's freshness: per-day stat fingerprints and the quick check.

Both the builder (memstore/index/build.py) and light readers such as `ct where` use these, so
the fingerprint is defined once.
"""

from __future__ import annotations

import os
import re

from ..format import layout
from .. import storefile
from ..sqlitedb import CONTENTLESS_DELETE, sqlite3

SCHEMA_VERSION = 8  # 3: the private table (record scopes), or author columns; 4: both;
# 5: int8 codes with scales and errors, and each vector's location in records.vkey;
# 6: the vector-row index covers each row's location (records_vrow_at);
# 7: each matrix row's record and location in where-<gen>.bin (the plain records_vrow index again);
# 8: the full-text table keeps no copy of the text where the SQLite can delete from such a table
# (memstore/sqlitedb.py); where it cannot, the index says so in its schema, "8-content", and a
# process of the other kind rebuilds it rather than reading a table its SQLite cannot open.
SCHEMA_ID = str(SCHEMA_VERSION) if CONTENTLESS_DELETE else f"{SCHEMA_VERSION}-content"

_DAY_FILE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\.jsonl$")


def stat_fingerprint(log_path, seg_dir, pack_dir=None) -> str:
    """Size, mtime and inode of the day log, the mtimes of the day's segment folders (format 1)
    and, where the day has one, the mtime and inode of its pack folder (format 2).

    Plain string paths: on a store with hundreds of days, pathlib's object creation would cost
    more than the stat calls themselves.
    """
    parts = []
    try:
        st = os.stat(log_path)
        parts.append(f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}")
    except (OSError, TypeError):
        parts.append("-")
    try:
        if seg_dir is None:
            raise FileNotFoundError  # a format-2 store has no segment folders to look at
        seg_dir = os.fspath(seg_dir)
        st = os.stat(seg_dir)
        parts.append(f"{st.st_mtime_ns}")
        for name in sorted(os.listdir(seg_dir)):
            sub = os.stat(os.path.join(seg_dir, name))
            parts.append(f"{name}:{sub.st_mtime_ns}:{sub.st_nlink}")
    except OSError:
        parts.append("-")
    if pack_dir is not None:
        # One stat, no listing: packs are only ever added (renamed in) or removed, never changed in
        # place, and either changes the folder's mtime. Absent on format-1 stores: nothing is added,
        # so their fingerprints stay as they were.
        try:
            st = os.stat(pack_dir)
            parts.append(f"p{st.st_mtime_ns}:{st.st_ino}")
        except OSError:
            pass
    return "|".join(parts)


def fingerprints(root: str, days: dict[str, str], segments: bool) -> dict[str, str]:
    """{day: stat_fingerprint} for `days` ({day: log path}), the same strings as stat_fingerprint
    gives. A store without segments/ (format 2) takes a loop of two stat calls per day and no path
    objects: this is what a fresh process pays to know its index is current (~10,000 days at 1M)."""
    if segments:
        return {
            d: stat_fingerprint(p, segment_dir(root, d), pack_dir(root, d)) for d, p in days.items()
        }
    stat, packs, out = os.stat, os.path.join(root, layout.PACKS), {}
    for day, log_path in days.items():
        try:
            st = stat(log_path)
            fp = f"{st.st_size}:{st.st_mtime_ns}:{st.st_ino}|-"
        except OSError:
            fp = "-|-"
        try:
            st = stat(f"{packs}/{day[:4]}/{day}")
            fp = f"{fp}|p{st.st_mtime_ns}:{st.st_ino}"
        except OSError:
            pass
        out[day] = fp
    return out


def days_on_disk(root: str) -> dict[str, str]:
    """{day: log path} for every day log (string paths)."""
    base = os.path.join(root, "log")
    out: dict[str, str] = {}
    try:
        years = os.listdir(base)
    except FileNotFoundError:
        return out
    for year in years:
        ydir = os.path.join(base, year)
        try:
            names = os.listdir(ydir)
        except (NotADirectoryError, FileNotFoundError):
            continue
        for name in names:
            if _DAY_FILE.match(name) and name[:4] == year:
                out[name[:10]] = os.path.join(ydir, name)
    return out


def segment_dir(root: str, day: str) -> str:
    return os.path.join(root, layout.segment_dir(day))


def pack_dir(root: str, day: str) -> str:
    return os.path.join(root, layout.pack_dir(day))


def fresh_index_connection(store) -> sqlite3.Connection | None:
    """A read connection to the index if no day's files changed since it was built, else None.

    Only stat calls and one small query: the same test the builder's plan starts with. Any doubt
    (no index yet, another schema or embedder, a new, vanished or touched day) answers None, and
    the caller takes the normal path that updates the index first.
    """
    db = store.meta_dir / "index.db"
    if not db.is_file():
        return None
    try:
        storefile.check_db(db, store.meta_dir.parent)
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    except (sqlite3.Error, OSError):  # a link: the normal path names it
        return None
    try:
        meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('schema', 'embedder')"))
        emb = store.config.embedder
        if (
            meta.get("schema") != SCHEMA_ID
            or meta.get("embedder") != f"{emb['model']}:{emb['dim']}"
        ):
            conn.close()
            return None
        known = dict(conn.execute("SELECT day, stat_fp FROM days"))
        root = str(store.root)
        days = days_on_disk(root)
        if days.keys() != known.keys():
            conn.close()
            return None
        segments = os.path.isdir(os.path.join(root, layout.SEGMENTS))
        if fingerprints(root, days, segments) != known:
            conn.close()
            return None
    except sqlite3.Error:
        conn.close()
        return None
    return conn
