"""The full-text table: how it is made, and its totals kept true where it holds no text.

Where the SQLite can delete from an FTS5 table that keeps no copy of the text (contentless_delete,
SQLite 3.43+, memstore/sqlitedb.py), the table holds the terms only: the text is in the day logs
already, and its copy was most of the index (162 of 194 MB for the 100k LongMemEval dev turns).

Such a table does not lower its totals when a row is deleted: FTS5's averages record (the number
of rows and of tokens, which bm25 reads as N and the mean length) keeps counting every row ever
deleted, so a day read again (a forget, an edit, a merge) would weigh every term as if its old
rows were still there, and an index brought up to date would rank differently from one rebuilt.
So each delete first notes what it takes away — its rows and their token counts, from
fts_docsize, in meta `fts_owed`, in the delete's own transaction — and `settle` takes that off
the averages record in a transaction of its own after the commit: FTS5 writes the totals it
holds in memory when a transaction that wrote to it commits, over anything written to the
record before. A process stopped between the two leaves the debt noted; the next update
settles it first. (A table that keeps its copy of the text lowers its own totals: nothing is
owed there.)
"""

from __future__ import annotations

from ..sqlitedb import CONTENTLESS_DELETE

# The table's options: no copy of the text where this SQLite can delete from such a table;
# `body` then reads back NULL (nothing reads it: a search reads the terms, and the text from the
# day log).
CONTENT = "content='', contentless_delete=1, " if CONTENTLESS_DELETE else ""
TOKENIZE = "tokenize='porter unicode61 remove_diacritics 2'"
CREATE = f"CREATE VIRTUAL TABLE IF NOT EXISTS fts USING fts5(body, {CONTENT}{TOKENIZE})"

OWED = "fts_owed"  # meta key: "rows tokens" deleted since the totals were last settled
_AVERAGES = 1  # FTS5's averages record: its rowid in fts_data (a varint of rows, one per column)


def delete_rows(conn, rowids_sql: str, args=()) -> None:
    """DELETE FROM fts the rows whose rowids `rowids_sql` (a SELECT) gives, noting what they held
    where the table will not take it off its totals (see the module's words)."""
    if CONTENTLESS_DELETE:
        rows = tokens = 0
        for (size,) in conn.execute(f"SELECT sz FROM fts_docsize WHERE id IN ({rowids_sql})", args):
            rows += 1
            tokens += _varint(size, 0)[0]
        if rows:
            owed_rows, owed_tokens = _owed(conn) or (0, 0)
            conn.execute(
                "INSERT OR REPLACE INTO meta VALUES (?, ?)",
                (OWED, f"{owed_rows + rows} {owed_tokens + tokens}"),
            )
    conn.execute(f"DELETE FROM fts WHERE rowid IN ({rowids_sql})", args)


def delete_all(conn) -> None:
    """Empty the table, its totals with it (nothing is owed after)."""
    if CONTENTLESS_DELETE:
        conn.execute("INSERT INTO fts(fts) VALUES ('delete-all')")
        conn.execute("DELETE FROM meta WHERE key = ?", (OWED,))
    else:
        conn.execute("DELETE FROM fts")


def settle(conn) -> None:
    """Take what deletes noted off the averages record, in a transaction of its own (never inside
    one that wrote to the table: its commit would write FTS5's own totals over these)."""
    if not CONTENTLESS_DELETE or conn.in_transaction:
        return
    with conn:
        owed = _owed(conn)
        if owed is None:
            return
        rows, tokens = owed
        if not rows:
            conn.execute("DELETE FROM meta WHERE key = ?", (OWED,))  # (not ours)
            return
        got = conn.execute("SELECT block FROM fts_data WHERE id = ?", (_AVERAGES,)).fetchone()
        values, at = [], 0
        block = got[0] if got and isinstance(got[0], bytes) else b""
        try:
            while at < len(block):
                value, at = _varint(block, at)
                values.append(value)
        except IndexError:  # not a record FTS5 wrote (a copied index.db): its queries say so
            values = []
        if values:
            values += [0] * (2 - len(values))
            values[0] = max(values[0] - rows, 0)
            values[1] = max(values[1] - tokens, 0)  # (one column, body)
            conn.execute(
                "UPDATE fts_data SET block = ? WHERE id = ?",
                (b"".join(map(_put_varint, values)), _AVERAGES),
            )
        conn.execute("DELETE FROM meta WHERE key = ?", (OWED,))


def _owed(conn) -> tuple[int, int] | None:
    """(rows, tokens) the deletes noted, None when nothing is noted."""
    got = conn.execute("SELECT value FROM meta WHERE key = ?", (OWED,)).fetchone()
    if got is None:
        return None
    try:
        rows, tokens = map(int, str(got[0]).split())
    except ValueError:  # not ours: nothing can be said to be owed
        return 0, 0
    return max(rows, 0), max(tokens, 0)


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """SQLite's varint at `at` (big-endian 7-bit groups, a ninth byte of 8 bits): (value, next)."""
    value = 0
    for _ in range(8):
        byte = data[at]
        at += 1
        value = (value << 7) | (byte & 0x7F)
        if not byte & 0x80:
            return value, at
    return (value << 8) | data[at], at + 1


def _put_varint(value: int) -> bytes:
    if value >= 1 << 56:
        out = [value & 0xFF]
        value >>= 8
        for _ in range(8):
            out.append((value & 0x7F) | 0x80)
            value >>= 7
        return bytes(reversed(out))
    out = [value & 0x7F]
    value >>= 7
    while value:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    return bytes(reversed(out))
