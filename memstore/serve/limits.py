"""What a served store (`ct serve`, `ct mcp`) accepts from a caller it cannot trust: the size of
every value, and the writes that need a flag the user gave when starting the server.

The caller of the HTTP API or of the MCP tools may be a web page, a prompt-injected agent or
another local user, so no value may make the one store thread work for long, and no single call
may store a secret verbatim or forget more than a few records unless the user said so.
Both servers call the same checks, so the limits below are the same over HTTP and MCP.
"""

from __future__ import annotations

import re
import threading
import time

from ..errors import NotPermitted, UsageError

MAX_K = 1_000  # hits, lines, markers: any count a caller asks for
MAX_QUERY = 10_000  # characters of a query, a question or a forget match
MAX_TEXT = 100_000  # characters of one added turn
MAX_STRING = 1_000  # characters of any other string (a session, a time, a role)
MAX_ITEMS = 1_000  # entries of a list (roles, sessions, ids)
MAX_FORGET = 10  # records one forget may remove without --allow-wide-forget

# integer parameters: (lowest, highest) accepted
INT_RANGES = {
    "k": (1, MAX_K),
    "around": (0, 100),
    "budget": (1, 1_000_000),
    "recent": (0, MAX_K),
    "markers": (0, MAX_K),
    "lines": (0, MAX_K),
    "offset": (0, 10**9),
    "limit": (1, MAX_K),
    "n": (1, 500),
    "depth": (0, 1_000),
}
STRING_LIMITS = {"query": MAX_QUERY, "question": MAX_QUERY, "match": MAX_QUERY, "text": MAX_TEXT}

RATE = 50.0  # requests a second one caller (a token, or an address without tokens) may keep up
BURST = 100  # requests one caller may send at once before the rate applies

SECRETS_FLAG = "--allow-secrets-override"
FORGET_FLAG = "--allow-wide-forget"
SHARE_FLAG = "--allow-share"


def problem(name: str, value) -> str | None:
    """Why `value` is not accepted for the parameter `name`, or None when it is."""
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, int):
        low, high = INT_RANGES.get(name, (0, 10**9))
        if not low <= value <= high:
            return f"parameter {name!r} must be from {low} to {high}, not {_short(value)}"
        return None
    if isinstance(value, str):
        limit = STRING_LIMITS.get(name, MAX_STRING)
        if len(value) > limit:
            return f"parameter {name!r} is {len(value):,} characters long; the limit is {limit:,}"
        return _surrogate(name, value)
    if isinstance(value, (list, tuple)):
        if len(value) > MAX_ITEMS:
            return f"parameter {name!r} has {len(value):,} entries; the limit is {MAX_ITEMS:,}"
        for item in value:
            if (why := problem(name, item)) is not None:
                return why
    return None


def check(params: dict) -> None:
    """UsageError naming the first parameter of `params` over its limit."""
    for name, value in params.items():
        if (why := problem(name, value)) is not None:
            raise UsageError(why)


# a CLI flag in a library message, with the metavar that may follow it ("--match QUERY", "--now")
_FLAG = re.compile(r"--([a-z][a-z0-9]*(?:-[a-z0-9]+)*)(?: [A-Z][A-Z_]*\b)?")
_SECRETS_FLAGS = {"skip-secrets": "skip", "redact-secrets": "redact", "allow-secrets": "allow"}
# a quoted span (a value the caller gave, a command to run by hand): left as it is
_QUOTED = re.compile(r"""(?<!\w)('[^'\n]*'|"[^"\n]*")(?!\w)""")


def in_parameters(message: str, names) -> str:
    """`message` as a caller of a served tool or endpoint should read it: each CLI flag that is
    one of its parameters `names` (`--now`, `--match QUERY`, `--since/--until`) becomes the
    parameter's name, and `--skip-secrets` and its kin become the value of `secrets` they stand
    for. Other flags, and anything quoted (a value the caller gave, a `ct` command to run by
    hand), are left as they are."""
    names = set(names)

    def one(m: re.Match) -> str:
        flag = m.group(1)
        if flag.replace("-", "_") in names:
            return flag.replace("-", "_")
        if flag in _SECRETS_FLAGS and "secrets" in names:
            return f'secrets "{_SECRETS_FLAGS[flag]}"'
        return m.group(0)

    parts = _QUOTED.split(message)  # odd entries are the quoted spans
    return "".join(p if i % 2 else _FLAG.sub(one, p) for i, p in enumerate(parts))


def check_secrets(mode: str | None, allowed: bool, command: str) -> None:
    """NotPermitted when `mode` would store a detected secret verbatim on a server not started to allow it."""
    if mode == "allow" and not allowed:
        raise NotPermitted(
            f'secrets "allow" (store a detected secret verbatim) is off on this server; the user can '
            f'start it with "{command} {SECRETS_FLAG}" to let callers ask for it',
            'Use secrets "redact" to store the text with [REDACTED kind] markers instead.',
        )


def bounded_forget(st, allowed: bool, command: str, ids=(), *, dry_run: bool = False, **criteria):
    """`st.forget(...)` that removes at most MAX_FORGET records unless `allowed` → ForgetResult.

    It selects first (a dry run), refuses a wider selection, and then forgets exactly the
    records it counted, so a record written meanwhile is never taken along.
    """
    chosen = st.forget(ids, dry_run=True, **criteria)
    if dry_run:
        return chosen
    n = len(chosen.records)
    if n > MAX_FORGET and not allowed:
        raise NotPermitted(
            f"this forget would remove {n} records; this server forgets at most {MAX_FORGET} per call "
            f'unless the user starts it with "{command} {FORGET_FLAG}"',
            "Narrow it (ids, match, session, a shorter since/until), or run ct forget yourself.",
        )
    if n == 0:
        return st.forget(ids, **criteria)  # the library's own "nothing to forget" answer
    return st.forget([r["id"] for r in chosen.records], **criteria)


def bounded_share(st, allowed: bool, secrets_allowed: bool, command: str, ids, *, dry_run=False):
    """`st.share(...)` for a caller: a preview (`dry_run`) always; making records shared only on a
    server the user started with SHARE_FLAG, and a record the scanner flags a secret in only with
    SECRETS_FLAG as well → ShareResult.

    A share cannot be taken back (every clone and reader of the store gets the text), so a
    prompt-injected agent must not be able to publish a private record with one call: the user
    decides, by running `ct share` (which shows each record first) or by starting the server so.
    """
    chosen = st.share(ids, dry_run=True)
    if dry_run:
        return chosen
    if not allowed:
        raise NotPermitted(
            "sharing private records is off on this server (a share cannot be taken back); the "
            f'user can share them with "ct share ID..." or start the server with "{command} '
            f'{SHARE_FLAG}" to let callers do it',
            "Nothing was shared. Show the user the preview (dry_run) and let them decide.",
        )
    flagged = [r["id"] for r in chosen.records if r["secrets"]]
    if flagged and not secrets_allowed:
        raise NotPermitted(
            f"record {flagged[0]!r}"
            + (f" (and {len(flagged) - 1} more)" if len(flagged) > 1 else "")
            + " holds a detected secret; this server shares such a record only when the user "
            f'starts it with "{command} {SECRETS_FLAG}" too',
            "Nothing was shared. Leave those records out, or let the user run ct share.",
        )
    return st.share(ids)


class RateLimit:
    """A token bucket per caller: `burst` requests at once, then `rate` a second; `rate` 0 is
    no limit. `take(caller)` answers None when the request may go on, else the seconds to wait.
    Callers not seen for a minute are dropped, so the table stays small."""

    def __init__(self, rate: float = RATE, burst: int = BURST):
        self.rate, self.burst = float(rate), max(1, int(burst))
        self._buckets: dict[str, tuple[float, float]] = {}  # caller -> (tokens left, when)
        self._lock = threading.Lock()
        self._swept = time.monotonic()

    def take(self, caller: str) -> float | None:
        if self.rate <= 0:
            return None
        now = time.monotonic()
        with self._lock:
            if now - self._swept > 60:
                self._buckets = {c: b for c, b in self._buckets.items() if now - b[1] < 60}
                self._swept = now
            left, then = self._buckets.get(caller, (float(self.burst), now))
            left = min(float(self.burst), left + (now - then) * self.rate)
            if left < 1:
                self._buckets[caller] = (left, now)
                return (1 - left) / self.rate
            self._buckets[caller] = (left - 1, now)
            return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate(name: str, value: str) -> str | None:
    if (m := _SURROGATE.search(value)) is None:
        return None
    return (
        f"parameter {name!r} holds a lone UTF-16 surrogate ({ascii(m.group())} at character {m.start()}), "
        "which is not Unicode text"
    )


def _short(value) -> str:
    s = str(value)
    return s if len(s) <= 24 else f"{s[:12]}…({len(s)} digits)"
