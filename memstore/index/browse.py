"""Read-only index queries for browsing memory by day and by id: per-day counts, a day's lines,
records by id, the titles of conversations.

Only current records are returned: superseded and repeated ones are hidden in the index, and a
forgotten record has no row at all. The text is read from the day logs (late dereference), each
day file once.
"""

from __future__ import annotations

import re

from .. import storefile
from ..format import log as logfmt
from ..format import record as recordfmt


def day_counts(index) -> list[tuple[str, int]]:
    """(day, current records) for every day that has any, oldest first.

    `days.n` is the number of rows each day put in `records`; the hidden ones (few) are found
    through the partial index on hidden rows. Grouping all rows by day instead costs ~40 ms at 100k.
    """
    hidden: dict[str, int] = {}
    for (day,) in index.conn.execute(
        "SELECT day FROM records INDEXED BY records_hidden_vrow WHERE hidden != 0"
    ):
        hidden[day] = hidden.get(day, 0) + 1
    out = []
    for day, n in index.conn.execute("SELECT day, n FROM days ORDER BY day"):
        current = (n or 0) - hidden.get(day, 0)
        if current > 0:
            out.append((day, current))
    return out


def day_records(index, day: str) -> list[dict]:
    """The day's current records, verbatim, in time order (line order breaks ties)."""
    rows = index.conn.execute(
        "SELECT off, len FROM records WHERE day = ? AND hidden = 0 ORDER BY ts, line_no", (day,)
    ).fetchall()
    return _read(index, day, rows)


def records_by_id(index, ids: list[str]) -> list[dict]:
    """The current records among `ids`, in time order; ids with no current record are left out."""
    found: list[tuple] = []
    for i in range(0, len(ids), 500):
        part = list(ids[i : i + 500])
        q = f"SELECT ts, line_no, day, off, len FROM records WHERE hidden = 0 AND id IN ({','.join('?' * len(part))})"
        found += index.conn.execute(q, part).fetchall()
    found.sort()
    by_day: dict[str, list[tuple]] = {}
    for _, _, day, off, ln in found:
        by_day.setdefault(day, []).append((off, ln))
    read = {day: iter(_read(index, day, rows)) for day, rows in by_day.items()}
    return [next(read[day]) for _, _, day, _, _ in found]


def _read(index, day: str, rows: list[tuple]) -> list[dict]:
    if not rows:
        return []
    data = logfmt.read_plain(logfmt.day_path(index.store.root, day))
    out = []
    for off, ln in rows:
        rec = recordfmt.loads(data[off : off + ln].decode("utf-8"))
        rec["day"] = day
        out.append(rec)
    return out


TITLE_MAX = 80  # characters of a first user line used as a conversation's title
# A session id no one chose to read: a UUID, a long hex or base64-ish token.
_OPAQUE = re.compile(r"[0-9A-Za-z_:-]{20,}")
_SUMMARY_ROWS = 20  # a session's latest system notes looked through for a title row


def session_titles(index, sessions) -> dict[str, str]:
    """A title for each of `sessions` that has one: the title its source kept (a ChatGPT
    conversation's `conversation_title`, the latest Claude Code summary row), else for an opaque
    session id (a UUID) the first thing its user said, on one line and cut to TITLE_MAX. A session
    with a readable name of its own ("ops", "main") gets none: its name is its label.

    A few rows per session, through the index on (session, ts); each day file read once.
    """
    conn = index.conn
    files: dict[str, bytes] = {}

    def read(row) -> dict:
        day, off, ln = row
        if day not in files:
            files[day] = storefile.read_bytes(logfmt.day_path(index.store.root, day))
        return recordfmt.loads(files[day][off : off + ln].decode("utf-8"))

    base = "SELECT day, off, len FROM records WHERE session = ? AND hidden = 0"
    out: dict[str, str] = {}
    for sid in dict.fromkeys(s for s in sessions if isinstance(s, str) and s):
        first = conn.execute(base + " ORDER BY ts, line_no LIMIT 1", (sid,)).fetchone()
        if first is None:
            continue
        title = (read(first).get("meta") or {}).get("conversation_title")
        if not (isinstance(title, str) and title.strip()):
            notes = conn.execute(
                base + " AND type = 'meta' AND role = 'system' ORDER BY ts DESC, line_no DESC"
                " LIMIT ?",
                (sid, _SUMMARY_ROWS),
            )
            title = next(
                (
                    r["text"]
                    for r in map(read, notes)
                    if (r.get("meta") or {}).get("kind") == "summary"
                ),
                None,
            )
        if not (isinstance(title, str) and title.strip()) and _OPAQUE.fullmatch(sid):
            said = conn.execute(
                base + " AND role = 'user' AND type = 'text' ORDER BY ts, line_no LIMIT 1", (sid,)
            ).fetchone()
            title = read(said).get("text") if said else None
        if isinstance(title, str) and title.strip():
            line = " ".join(title.split())
            out[sid] = line if len(line) <= TITLE_MAX else line[: TITLE_MAX - 1].rstrip() + "…"
    return out
