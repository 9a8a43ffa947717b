"""--since/--until values: ISO timestamps or natural phrases, resolved in the store's timezone."""

from __future__ import annotations

import datetime as dt

from ..errors import UsageError
from ..format.timeutil import now_utc, parse_ts


def reference_now(now: str | None, tz) -> dt.datetime:
    if not now:
        return now_utc()
    try:
        return parse_ts(now, tz)
    except ValueError as exc:
        raise UsageError(f"--now: {exc}") from None


def instant(value: str, store, now: str | None = None, edge: str = "start") -> float:
    """Unix seconds for an ISO time or a phrase ('yesterday' → start of yesterday, or its end for --until)."""
    try:
        return parse_ts(value, store.tz).timestamp()
    except ValueError:
        pass
    from .timephrase import parse_time_query

    ref = reference_now(now, store.tz)
    tq = parse_time_query(value, ref, store.tz)
    if tq.window is None:
        raise UsageError(
            f"cannot read {value!r} as a time (try ISO like 2026-03-01 or 'last week')"
        )
    return (tq.window.start if edge == "start" else tq.window.end).timestamp()
