"""Every read the rest of memstore makes of the index's tables, named for what it answers.

The index owns its schema (memstore/index/build.py): no module outside memstore/index/ runs SQL or
holds its connection (tests/test_architecture.py checks that). Functions take an `Index` and return
plain rows, rowids or counts; each runs the same statements the callers used to run themselves, so
the retrieval path pays nothing for the indirection. Browsing by day and id is in browse.py.

No numpy here, and no sqlite-utils: `ct where` and the other light commands import this module.
"""

from __future__ import annotations

import json
from ..sqlitedb import sqlite3
from typing import TYPE_CHECKING, Iterator

from ..format.record import CONVERSATION_TYPES
from .fresh import fresh_index_connection

if TYPE_CHECKING:
    from ..results import Filters

# What a conversation record is (format/record.py), as SQL: harness rows and document chunks are not.
CONVERSATION = "type IN (" + ", ".join(f"'{t}'" for t in CONVERSATION_TYPES) + ")"
# memstore's own supersession notes for re-ingested documents are not conversation either.
_NOT_OWN_NOTES = " AND NOT (r.type = 'meta' AND r.actor = 'memstore')"


def _marks(values) -> str:
    return ",".join("?" * len(values))


# ----- row filters ------------------------------------------------------------------------------


def filters_where(filters: Filters, own_notes: bool = True) -> tuple[str, list]:
    """`Filters` as a WHERE clause over `records r` and its arguments.

    `own_notes=False` also leaves out memstore's own meta rows (the notes it writes when a
    document is re-ingested or moved).
    """
    clauses, args = [], []
    if not filters.include_hidden:
        clauses.append("r.hidden = 0")
    if filters.since is not None:
        clauses.append("r.ts >= ?")
        args.append(filters.since)
    if filters.until is not None:
        clauses.append("r.ts < ?")
        args.append(filters.until)
    for col in ("role", "actor", "type", "session"):
        values = getattr(filters, col)
        if values:
            clauses.append(f"r.{col} IN ({_marks(values)})")
            args += list(values)
    if filters.author:  # a name or an email, case-folded like the columns (format/record.py)
        wanted = [a.strip().casefold() for a in filters.author]
        marks = _marks(wanted)
        clauses.append(f"(r.author_name IN ({marks}) OR r.author_email IN ({marks}))")
        args += wanted + wanted
    if filters.exclude_types:
        clauses.append(f"r.type NOT IN ({_marks(filters.exclude_types)})")
        args += list(filters.exclude_types)
    if filters.scope is not None:
        no = "" if filters.scope == "private" else "NOT "
        clauses.append(f"r.id {no}IN (SELECT id FROM private)")
    where = " AND ".join(clauses) or "1"
    return (where if own_notes else where + _NOT_OWN_NOTES), args


# ----- search: words ----------------------------------------------------------------------------


def bm25_rows(index, expr: str, filters: Filters, limit: int) -> list[tuple[int, float]]:
    """(rowid, bm25 score — higher is better) of the best FTS matches of the MATCH expression `expr`."""
    if filters.since is None and filters.until is None and not filters.narrows_rows:
        fast = _bm25_unfiltered(index, expr, filters, limit)
        if fast is not None:
            return fast
    where, args = filters_where(filters)
    sql = (
        f"SELECT r.rowid, -bm25(fts) AS s FROM fts JOIN records r ON r.rowid = fts.rowid "
        f"WHERE fts MATCH ? AND {where} ORDER BY bm25(fts) LIMIT ?"
    )
    return [(row[0], float(row[1])) for row in index.conn.execute(sql, [expr, *args, limit])]


def _bm25_unfiltered(
    index, expr: str, filters: Filters, limit: int
) -> list[tuple[int, float]] | None:
    """FTS5 ranking on its own, hidden rows dropped afterwards; None when too many rows are hidden.

    Joining every match to `records` just to test `hidden` about doubles the cost of a keyword
    query on a large store, and hidden rows are few, so a list longer by their number suffices.
    """
    conn = index.conn
    n_hidden = (
        0
        if filters.include_hidden
        else conn.execute("SELECT COUNT(*) FROM records WHERE hidden != 0").fetchone()[0]
    )
    if n_hidden > 1000:
        return None
    rows = conn.execute(
        "SELECT rowid, -bm25(fts) FROM fts WHERE fts MATCH ? ORDER BY bm25(fts) LIMIT ?",
        (expr, limit + n_hidden),
    ).fetchall()
    if n_hidden and rows:
        hidden = {
            r
            for (r,) in conn.execute(
                f"SELECT rowid FROM records WHERE hidden != 0 AND rowid IN ({_marks(rows)})",
                [r for r, _ in rows],
            )
        }
        rows = [row for row in rows if row[0] not in hidden]
    return [(r, float(s)) for r, s in rows[:limit]]


def fts_rowids(index, expr: str, among: list[int] | None = None) -> list[int]:
    """Rowids whose text matches the MATCH expression `expr` (in FTS order), only those `among` when given."""
    if among is None:
        return [
            r for (r,) in index.conn.execute("SELECT rowid FROM fts WHERE fts MATCH ?", (expr,))
        ]
    return [
        r
        for (r,) in index.conn.execute(
            f"SELECT rowid FROM fts WHERE fts MATCH ? AND rowid IN ({_marks(among)})",
            [expr, *among],
        ).fetchall()
    ]


def visible_ids_matching(index, expr: str, limit: int) -> list[str]:
    """Record ids of current rows matching the MATCH expression `expr`, at most `limit`."""
    rows = index.conn.execute(
        f"SELECT r.id FROM fts JOIN records r ON r.rowid = fts.rowid WHERE fts MATCH ? AND r.hidden = 0 LIMIT {int(limit)}",
        [expr],
    ).fetchall()
    return [rid for (rid,) in rows]


def match_sample(index, expr: str, limit: int) -> tuple[int, int | None]:
    """(matches, highest rowid among them) of the first `limit` FTS matches of `expr` (rowid order).

    An expression FTS rejects raises sqlite3.Error.
    """
    return index.conn.execute(
        f"SELECT COUNT(*), MAX(rowid) FROM (SELECT rowid FROM fts WHERE fts MATCH ? LIMIT {int(limit)})",
        [expr],
    ).fetchone()


# ----- search: vectors --------------------------------------------------------------------------


def vrows_where(index, filters: Filters, ranges: list[tuple[int, int]]) -> list[int]:
    """Vector rows in the half-open `ranges` whose records pass `filters`, range by range.

    One query per range: an OR of two ranges keeps SQLite from using the vrow index.
    """
    where, args = filters_where(filters)
    sql = f"SELECT r.vrow FROM records r WHERE r.vrow >= ? AND r.vrow < ? AND {where}"
    return [row[0] for a, b in ranges for row in index.conn.execute(sql, [a, b, *args])]


def hidden_vrows(index, ranges: list[tuple[int, int]]) -> set[int]:
    """Vector rows of hidden records in the half-open `ranges` (few; a partial index finds them)."""
    return {
        r[0]
        for a, b in ranges
        for r in index.conn.execute(
            "SELECT vrow FROM records WHERE hidden != 0 AND vrow >= ? AND vrow < ?", (a, b)
        )
    }


def rowids_of_vrows(index, vrows: list[int]) -> dict[int, int]:
    """{vector row: rowid} for these vector rows."""
    return dict(
        index.conn.execute(
            f"SELECT vrow, rowid FROM records WHERE vrow IN ({_marks(vrows)})", vrows
        )
    )


def vrows_of_rowids(index, rowids: list[int]) -> dict[int, int]:
    """{rowid: vector row (-1 without a vector)} for these rows."""
    return dict(
        index.conn.execute(
            f"SELECT rowid, vrow FROM records WHERE rowid IN ({_marks(rowids)})", rowids
        )
    )


def assistant_rowids(index, rowids: list[int]) -> set[int]:
    """Those of these rows that are the assistant's turns."""
    rows = index.conn.execute(
        "SELECT rowid FROM records WHERE rowid IN (SELECT value FROM json_each(?)) AND role = 'assistant'",
        (json.dumps(list(rowids)),),
    )
    return {r[0] for r in rows}


def doc_sources(index, rowids: list[int]) -> dict[int, str]:
    """{rowid: source path} of those of these rows that are document chunks."""
    rows = index.conn.execute(
        "SELECT rowid, source FROM records WHERE rowid IN (SELECT value FROM json_each(?))"
        " AND type = 'doc' AND source IS NOT NULL",
        (json.dumps(list(rowids)),),
    )
    return {r[0]: r[1] for r in rows}


def day_of(index, rowid: int) -> str:
    return index.conn.execute("SELECT day FROM records WHERE rowid = ?", (rowid,)).fetchone()[0]


# ----- recall -----------------------------------------------------------------------------------


def count_in_window(
    index, filters: Filters, since: float, until: float, own_notes: bool = True
) -> int:
    """Rows passing `filters` with since <= ts < until."""
    where, args = filters_where(filters, own_notes)
    return index.conn.execute(
        f"SELECT COUNT(*) FROM records r WHERE {where} AND r.ts >= ? AND r.ts < ?",
        [*args, since, until],
    ).fetchone()[0]


def _filtered_rowids(index, filters: Filters, own_notes: bool, tail: str, args: list) -> list[int]:
    where, wargs = filters_where(filters, own_notes)
    rows = index.conn.execute(
        f"SELECT r.rowid FROM records r WHERE {where} {tail}", [*wargs, *args]
    )
    return [rid for (rid,) in rows.fetchall()]


def rowids_in_window(
    index, filters: Filters, since: float, until: float, limit: int, own_notes: bool = True
) -> list[int]:
    """The first `limit` rows passing `filters` with since <= ts < until, in time order."""
    return _filtered_rowids(
        index,
        filters,
        own_notes,
        "AND r.ts >= ? AND r.ts < ? ORDER BY r.ts, r.rowid LIMIT ?",
        [since, until, limit],
    )


def latest_rowids(index, filters: Filters, n: int, own_notes: bool = True) -> list[int]:
    """The `n` newest non-meta rows passing `filters`, newest first."""
    return _filtered_rowids(
        index,
        filters,
        own_notes,
        "AND r.type != 'meta' ORDER BY r.ts DESC, r.rowid DESC LIMIT ?",
        [n],
    )


def session_neighbours(
    index,
    filters: Filters,
    session: str | None,
    rowid: int,
    ts: float,
    n: int,
    own_notes: bool = True,
) -> list[int]:
    """Up to `n` rows before the row (`rowid`, `ts`) in its session, nearest first, then up to `n`
    after it, nearest first; only rows passing `filters`."""
    where, wargs = filters_where(filters, own_notes)
    out: list[int] = []
    for cmp, order in (("<", "DESC"), (">", "ASC")):
        rows = index.conn.execute(
            f"SELECT r.rowid FROM records r WHERE {where} AND r.session IS ? AND r.rowid != ? AND "
            f"(r.ts {cmp} ? OR (r.ts = ? AND r.rowid {cmp} ?)) ORDER BY r.ts {order}, r.rowid {order} LIMIT ?",
            [*wargs, session, rowid, ts, ts, rowid, n],
        ).fetchall()
        out += [rid for (rid,) in rows]
    return out


def next_in_session(index, session: str, rowid: int) -> tuple[int, str, str] | None:
    """(rowid, role, type) of the visible row that follows the row `rowid` in its session."""
    return index.conn.execute(
        "SELECT r.rowid, r.role, r.type FROM records q JOIN records r ON r.session = q.session "
        "WHERE q.rowid = ? AND r.session = ? AND r.hidden = 0 AND r.rowid != q.rowid AND "
        "(r.ts > q.ts OR (r.ts = q.ts AND r.rowid > q.rowid)) ORDER BY r.ts, r.rowid LIMIT 1",
        (rowid, session),
    ).fetchone()


def days_of_ids(index, ids: list[str]) -> list[str]:
    """The days holding rows of these record ids."""
    rows = index.conn.execute(
        "SELECT DISTINCT day FROM records WHERE id IN (SELECT value FROM json_each(?))",
        (json.dumps(list(ids)),),
    )
    return sorted(d for (d,) in rows)


def id_of(index, rowid: int) -> str:
    return index.conn.execute("SELECT id FROM records WHERE rowid = ?", (rowid,)).fetchone()[0]


def passes(index, rowid: int, filters: Filters) -> bool:
    """Whether the row passes `filters`."""
    where, args = filters_where(filters)
    return (
        index.conn.execute(
            f"SELECT 1 FROM records r WHERE r.rowid = ? AND {where}", [rowid, *args]
        ).fetchone()
        is not None
    )


# ----- conversation rows ------------------------------------------------------------------------


def latest_conversation_rowids(index, n: int) -> list[int]:
    """The `n` newest current text and action rows, newest first."""
    rows = index.conn.execute(
        f"SELECT rowid FROM records WHERE hidden = 0 AND {CONVERSATION} ORDER BY ts DESC, rowid DESC LIMIT ?",
        (n,),
    ).fetchall()
    return [r[0] for r in rows]


def conversation_rows(index) -> list[tuple[int, str, int]]:
    """(rowid, id, vrow) of every text and action row that is not a repeat of another, in time order."""
    return index.conn.execute(
        f"SELECT rowid, id, vrow FROM records WHERE {CONVERSATION} AND hidden != 2 ORDER BY ts, rowid"
    ).fetchall()


def latest_session(
    store, n: int
) -> tuple[bool, tuple[str | None, int, list[tuple[str, int, int]]] | None]:
    """(fast, latest): `latest` is (session, its current lines, (day, off, len) of its last `n`
    lines oldest first) for the session of the newest current conversation line, None when the
    index holds none. `fast` is whether the index was read as it stood: when a stat-only check
    (fresh.py) finds files changed since it was built, it is updated first.
    """
    conn = fresh_index_connection(store)
    if conn is None:
        return False, _latest_session(store.index().conn, n)
    try:
        return True, _latest_session(conn, n)
    finally:
        conn.close()


def _latest_session(conn, n: int):
    row = conn.execute(
        f"SELECT session FROM records WHERE hidden = 0 AND {CONVERSATION} ORDER BY ts DESC, rowid DESC LIMIT 1"
    ).fetchone()
    if row is None:
        return None
    count = conn.execute(
        f"SELECT COUNT(*) FROM records WHERE session IS ? AND hidden = 0 AND {CONVERSATION}",
        (row[0],),
    ).fetchone()[0]
    rows = conn.execute(
        f"SELECT day, off, len FROM records WHERE session IS ? AND hidden = 0 AND {CONVERSATION} "
        "ORDER BY ts DESC, rowid DESC LIMIT ?",
        (row[0], max(0, n)),
    ).fetchall()
    return row[0], count, rows[::-1]


# ----- records by id, source and content ---------------------------------------------------------


def record_rows(
    index, ids: list[str] | None = None
) -> Iterator[tuple[str, int, int, float, str, str]]:
    """(id, rowid, vrow, ts, role, type) of every row, or of the rows of `ids`; newest rowid first."""
    if ids is None:
        yield from index.conn.execute(
            "SELECT id, rowid, vrow, ts, role, type FROM records ORDER BY rowid DESC"
        )
        return
    for k in range(0, len(ids), 500):
        part = ids[k : k + 500]
        yield from index.conn.execute(
            f"SELECT id, rowid, vrow, ts, role, type FROM records WHERE id IN ({_marks(part)}) ORDER BY rowid DESC",
            part,
        )


def rowids_of(
    index,
    *,
    record_id: str | None = None,
    session: str | None = None,
    ts_range: tuple[float, float] | None = None,
) -> list[int]:
    """Rowids of the rows (hidden ones too) with this record id, or in this session, or with
    lo <= ts <= hi for `ts_range` (lo, hi); give exactly one."""
    if record_id is not None:
        cur = index.conn.execute("SELECT rowid FROM records WHERE id = ?", (record_id,))
    elif session is not None:
        cur = index.conn.execute("SELECT rowid FROM records WHERE session = ?", (session,))
    elif ts_range is not None:
        cur = index.conn.execute("SELECT rowid FROM records WHERE ts >= ? AND ts <= ?", ts_range)
    else:
        raise ValueError("rowids_of needs record_id, session or ts_range")
    return [r for (r,) in cur]


def current_vector_rows(index) -> list[tuple[int, str]]:
    """(rowid, day) of every current row with a vector, in the matrix's order (day, ts, line, id)."""
    return index.conn.execute(
        "SELECT rowid, day FROM records WHERE hidden = 0 AND vrow >= 0 ORDER BY day, ts, line_no, id"
    ).fetchall()


def live_rows_at(index, source: str) -> list[tuple[str, str | None, int, str]]:
    """(id, fsha, rowid, type) of the current rows whose source path is `source`."""
    return index.conn.execute(
        "SELECT id, fsha, rowid, type FROM records WHERE source = ? AND hidden = 0", (source,)
    ).fetchall()


def live_rows_with_content(index, fsha: str, not_at: str) -> list[tuple[int, str | None]]:
    """(rowid, source) of current rows of a document with these bytes found anywhere but `not_at`, newest first."""
    return index.conn.execute(
        "SELECT rowid, source FROM records WHERE fsha = ? AND hidden = 0 AND source != ? ORDER BY ts DESC, rowid DESC",
        (fsha, not_at),
    ).fetchall()


def move_notes(index, fsha: str) -> list[int]:
    """Rowids of the current meta rows (notes of moves) about a document with these bytes, oldest first."""
    rows = index.conn.execute(
        "SELECT rowid FROM records WHERE fsha = ? AND type = 'meta' AND hidden = 0 ORDER BY ts, rowid",
        (fsha,),
    ).fetchall()
    return [r for (r,) in rows]


# ----- sizes ------------------------------------------------------------------------------------


def summary(index) -> dict:
    """Counts over all rows: by type and by role, first and last day, sessions, and bytes of the lines."""
    c = index.conn
    by_type = dict(c.execute("SELECT type, COUNT(*) FROM records GROUP BY type"))
    by_role = dict(c.execute("SELECT role, COUNT(*) FROM records GROUP BY role"))
    first, last = c.execute("SELECT MIN(day), MAX(day) FROM records").fetchone()
    sessions = c.execute("SELECT COUNT(DISTINCT session) FROM records").fetchone()[0]
    text_bytes = c.execute("SELECT COALESCE(SUM(len), 0) FROM records").fetchone()[0]
    private = c.execute("SELECT COUNT(DISTINCT id) FROM private").fetchone()[0]
    return {
        "private": private,
        "by_type": by_type,
        "by_role": by_role,
        "first_day": first,
        "last_day": last,
        "sessions": sessions,
        "text_bytes": text_bytes,
    }


def private_ids(index) -> list[str]:
    """Ids of the current private records, oldest first."""
    return [
        r[0]
        for r in index.conn.execute(
            "SELECT id FROM records WHERE hidden = 0 AND id IN (SELECT id FROM private) "
            "ORDER BY ts, rowid"
        )
    ]


def clean_keys(index, keys: list[bytes]) -> list[bytes]:
    """Which of these secret-scan keys the index holds as clean (none before the first is saved)."""
    found: list[bytes] = []
    try:
        for i in range(0, len(keys), 500):
            part = keys[i : i + 500]
            q = f"SELECT key FROM clean_texts WHERE key IN ({_marks(part)})"
            found += [r[0] for r in index.conn.execute(q, part)]
    except sqlite3.OperationalError:  # no such table yet
        return []
    return found


def vector_row_count(index) -> int:
    """The matrix's row count (every record with a vector), from `meta`; COUNT(*) of the rows when
    the index has no matrix yet. Counting walks every row: a million rows cost it."""
    row = index.conn.execute("SELECT value FROM meta WHERE key = 'n_rows'").fetchone()
    return int(row[0]) if row else index.conn.execute("SELECT COUNT(*) FROM records").fetchone()[0]


def max_rowid(index) -> int:
    return index.conn.execute("SELECT MAX(rowid) FROM records").fetchone()[0] or 0


def has_days(index) -> bool:
    """Whether any day has been indexed yet (a clone's first write builds the whole index)."""
    return index.conn.execute("SELECT 1 FROM days LIMIT 1").fetchone() is not None


def vacuum(index) -> None:
    """Compact the database, so no free page keeps text the last rebuild removed."""
    index.conn.execute("VACUUM")


def vector_of(index, rowid: int):
    """The row's vector as the store holds it (read from its pack), or None when it has none."""
    from . import exact

    row = index.conn.execute("SELECT vrow FROM records WHERE rowid = ?", (rowid,)).fetchone()
    vecs, _times = index.matrix()
    if row is None or not 0 <= row[0] < len(vecs):
        return None
    return exact.rows(index, [row[0]])[0][0]


def scrub(index, clean_keys: list[bytes] = ()) -> bool:
    """After a forget's rebuild: no byte of index.db or its WAL may keep a forgotten text. The
    secret scan's verdicts on the texts (`clean_keys`) go; FTS5 keeps a deleted row's words in
    its older segments until they are merged, so the full-text index is merged into one segment
    (optimize); VACUUM writes the database afresh (freed pages gone); the WAL, which holds every
    page the rebuild and the VACUUM wrote, is emptied. False when a reader kept the WAL busy."""
    conn = index.conn
    with conn:
        if clean_keys:
            try:
                for i in range(0, len(clean_keys), 500):
                    part = list(clean_keys[i : i + 500])
                    conn.execute(f"DELETE FROM clean_texts WHERE key IN ({_marks(part)})", part)
            except sqlite3.OperationalError:  # no such table yet
                pass
        conn.execute("INSERT INTO fts(fts) VALUES ('optimize')")
    conn.execute("VACUUM")
    return index.checkpoint(wait=True)
