"""Where the conversation stands: the open markers and the latest session's last lines (`ct where`).

`where` must answer in well under 100 ms on a large store and its process must not import numpy,
so it reads the index's SQLite directly when a stat-only freshness check (the same fingerprints
the index builder stores) says the index is current (index/queries.py `latest_session`), and falls
back to a normal index update only when something changed since the last update.
"""

from __future__ import annotations

from ..format import log as logfmt
from ..format import markers as markerfmt
from ..format.timeutil import now_utc
from ..index.queries import latest_session
from ..results import Where


def where(store, markers: int = 10, lines: int = 8, now=None) -> Where:
    """Open markers and the last `lines` lines of the latest session, without importing numpy."""
    from ..format.timeutil import to_iso

    out = Where(now=to_iso(now or now_utc()))
    all_markers = markerfmt.read(store.root)
    open_ = [m for m in all_markers if m.status == "open"]
    out.markers_done = len(all_markers) - len(open_)
    out.markers = open_[-markers:] if markers > 0 else []
    out.markers_omitted = len(open_) - len(out.markers)
    # Harness rows and document chunks are not "where the conversation stands" (index/queries.py).
    out.fast, latest = latest_session(store, lines)
    if latest is not None:
        out.session, out.session_lines, rows = latest
        out.lines = [
            logfmt.read_text_at(logfmt.day_path(store.root, day), off, ln) for day, off, ln in rows
        ]
    return out
