"""What a write does with records that hold a detected secret: refuse (the default), skip, redact or allow.

Every write goes through `Store.write`, which calls `apply` first, so no command can commit a
secret by a path that forgot to check. Commit messages and topic names/summaries are derived text
and are scrubbed with `scrub` whatever the mode: `--allow-secrets` keeps the record verbatim, never
a copy of the secret in a place the user did not put it.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path

from ..errors import SecretsFound, UsageError

MODES = ("refuse", "skip", "redact", "allow")
SPLIT_SCAN = 2_000  # a write of this many records is scanned on two cores (memstore/workers.py)
HINT = (
    "Nothing was written. Remove them, or pass --skip-secrets (leave those records out), "
    "--redact-secrets (replace each secret by a marker naming its kind) or --allow-secrets (store verbatim)."
)


# Fields the record format fixes (checked values, a timestamp, hashes memstore computes) hold no
# text of the user's; every other string is scanned, dict keys too.
_FIXED = frozenset(("ts", "role", "type", "hash", "seg"))
_LONG_FIELD = 300  # longer strings, and strings of several lines, are scanned alone, like a text
# Identifiers made of hex digits or lower-case base32 (memstore's ids, UUIDs, "chatgpt:<uuid>"): no
# rule finds a secret in one without a secret's name, so they are not scanned (a write's ids are
# all new, and each would cost a look at detect-secrets).
_PLAIN_ID = re.compile(r"(?:[a-z][a-z0-9_-]{0,20}:)?(?:[0-9a-f-]{8,64}|[0-9a-hjkmnp-tv-z]{26})")


def _fields(rec: dict):
    """(place, key, value) for every field but the text: value is a str, a scalar, or None for a
    dict's or list's own key (its contents come after it)."""
    for key, value in rec.items():
        if key != "text" and key not in _FIXED:
            yield from _walk(key, key, value)


def _walk(place: str, key: str, value):
    if isinstance(value, dict):
        yield place, key, None
        for k, v in value.items():
            yield from _walk(f"{place}.{k}", str(k), v)
    elif isinstance(value, list):
        yield place, key, None
        for i, v in enumerate(value):
            yield from _walk(f"{place}[{i}]", key, v)
    else:
        yield place, key, value


def _field_line(key: str, value) -> str:
    """How a short field is scanned: `key: value`, so a secret's name (password: ...) counts."""
    if (
        value is None
        or isinstance(value, (bool, int, float))
        or (isinstance(value, str) and _plain(key, value))
    ):
        return f"{key}:"
    return f"{key}: {value}"


def _plain(key: str, value: str) -> bool:
    lowered = key.lower()
    if any(word in lowered for word in ("key", "secret", "token", "passw", "pwd", "auth", "cred")):
        return False  # a secret's name makes a hex value one (private_key_id, token: <hex>)
    return len(value) <= 80 and _PLAIN_ID.fullmatch(value) is not None


def _long(value) -> bool:
    return isinstance(value, str) and (len(value) > _LONG_FIELD or "\n" in value)


# Field lines found clean by this process (a session's name, a model, a file's path recur on every
# record of an import); bounded, since it is only a shortcut.
_CLEAN_LINES: set[str] = set()
_CLEAN_LINES_MAX = 100_000


def findings(rec: dict) -> list[tuple[str, object]]:
    """(place, Finding) for every secret in the record: its text, and every other string field
    (session, actor, model, id, source, meta and unknown fields kept, nested ones, dict keys)."""
    from . import detect as secrets

    text = rec.get("text") or ""
    found = [("text", f) for f in secrets.scan(text)] if text else []
    if text and not found and not secrets.quiet(text):
        _found_clean(clean_key(text))  # `scrub` of this text would give it back unchanged
    lines: list[tuple[str, str]] = []
    for place, key, value in _fields(rec):
        if _long(value):
            found += [(place, f) for f in secrets.scan(value)]
            value = None
        line = _field_line(key, value)
        if line not in _CLEAN_LINES:
            lines.append((place, line))
    if lines:
        found += _scan_lines(lines)
    return found


def _plain_findings(rec: dict) -> list:
    """`findings` as plain values (what crosses memstore/workers.py's pipe): (place, (line, kind,
    excerpt, start, end)) each."""
    return [
        (place, (f.line, f.kind, f.excerpt_redacted, f.start, f.end)) for place, f in findings(rec)
    ]


def _scan_lines(lines: list[tuple[str, str]]) -> list[tuple[str, object]]:
    """The field lines scanned as one text (a blank line between, so no two are read as one)."""
    from . import detect as secrets

    hits = secrets.scan("\n\n".join(line for _, line in lines))
    out, flagged = [], set()
    for f in hits:
        i = (f.line - 1) // 2
        flagged.add(i)
        out.append((lines[i][0], secrets.Finding(1, f.kind, f.excerpt_redacted)))
    if len(_CLEAN_LINES) > _CLEAN_LINES_MAX:
        _CLEAN_LINES.clear()
    _CLEAN_LINES.update(line for i, (_, line) in enumerate(lines) if i not in flagged)
    return out


def apply(
    records: list[dict], how: str = "refuse", origins: dict | None = None
) -> tuple[list[dict], list[str]]:
    """The records to write and notes on what was left out or redacted; SecretsFound when refusing.

    `origins` maps id(record) to where it came from ("file:line"), for messages that name the
    input line rather than a record id nobody has seen yet.
    """
    if how not in MODES:
        raise UsageError(f"secrets mode must be one of {', '.join(MODES)}, not {how!r}")
    if how == "allow" or not records:
        return records, []
    origins = origins or {}
    kept, notes, refused = [], [], []
    from .. import workers

    # The scan of each record is pure (regular expressions and detect-secrets' plugins): a big
    # write's records are scanned on two cores, the clean verdicts the child found kept here.
    from .detect import Finding

    plain, learnt = workers.split_map(
        _plain_findings, records, min_items=SPLIT_SCAN, extra=take_fresh
    )
    add_fresh(learnt)
    found_each = [[(place, Finding(*f)) for place, f in found] for found in plain]
    for rec, found in zip(records, found_each):
        if not found:
            kept.append(rec)
            continue
        where = origins.get(id(rec)) or _default_origin(rec)
        if how == "refuse":
            said = (
                f"{where} (record {rec['id']})" if id(rec) in origins and rec.get("id") else where
            )
            # a file name, a record id or a session may hold a secret of its own: masked too
            said = mask_message(said)
            refused += [
                f"{said}: {mask_message(_place(rec, place, f))}{f.kind} ({f.excerpt_redacted})"
                for place, f in found
            ]
        elif how == "skip":
            notes.append(f"left out {mask_message(where)}: holds {_kinds(f for _, f in found)}")
        else:
            _redact_in_place(rec)
            kept.append(rec)
            notes.append(f"redacted {_kinds(f for _, f in found)} in {mask_message(where)}")
    if refused:
        raise SecretsFound(
            "Refusing to write what looks like credentials:\n  "
            + "\n  ".join(refused[:50])
            + (f"\n  … and {len(refused) - 50} more" if len(refused) > 50 else ""),
            HINT,
        )
    return kept, notes


def mask_message(text: str) -> str:
    """A message for the user (an error, a note) with every detected secret in it replaced: a
    refusal names a file, a record id or a session, any of which may itself be a token."""
    if not text:
        return text
    from . import detect as secrets

    return secrets.redact(text)[0]


def _default_origin(rec: dict) -> str:
    src = rec.get("source")
    if isinstance(src, dict) and src.get("path"):
        return str(src["path"])
    return "the text" if not rec.get("session") else f"a record of session {rec['session']}"


def _place(rec: dict, place: str, f) -> str:
    """Where in the record: nothing for a one-line text, else "text line 3: ", "meta.x: " or "meta.x line 2: "."""
    if place == "text":
        return f"text line {f.line}: " if "\n" in (rec.get("text") or "") else ""
    return f"{place} line {f.line}: " if f.excerpt_redacted and f.line > 1 else f"{place}: "


def _kinds(found) -> str:
    kinds = sorted({f.kind for f in found})
    return ", ".join(kinds)


def _redact_in_place(rec: dict) -> None:
    """Each secret in the record replaced by `[REDACTED kind]`; meta.redacted lists the kinds.

    Every field is cleaned as `findings` scans it, so the result is found clean. An id (or a
    `supersedes` id) holding a secret becomes a hash of it, so a second import of the same input
    still finds the record. In place, because the write keys its embedding inputs and given vectors
    by id(record)."""
    from . import detect as secrets

    all_kinds: list[str] = []

    def red(value: str) -> str:
        out, kinds = secrets.redact(value)
        all_kinds.extend(kinds)
        return out

    def clean_key_name(key: str) -> str:
        line = f"{key}:"
        cleaned = red(line)
        if cleaned == line:
            return key
        return cleaned[:-1] if cleaned.endswith(":") else red(key)

    def pair(key: str, value):
        """(key, value) cleaned the way `findings` shows them to the scan."""
        if _long(value):
            return clean_key_name(key), red(value)
        line = _field_line(key, value)
        if line == f"{key}:":
            return clean_key_name(key), value
        cleaned = red(line)
        if cleaned == line:
            return key, value
        if cleaned.startswith(f"{key}: "):
            return key, cleaned[len(key) + 2 :]
        return clean_key_name(key), red(value)

    def clean(key: str, value):
        if isinstance(value, dict):
            return clean_key_name(key), dict(clean(str(k), v) for k, v in value.items())
        if isinstance(value, list):
            return clean_key_name(key), [clean(key, v)[1] for v in value]
        return pair(key, value)

    rec["text"] = red(rec["text"])
    for key in [k for k in rec if k != "text" and k not in _FIXED]:
        value = clean(key, rec[key])[1]
        if key in ("id", "supersedes"):
            value = _id_without_secret(rec[key], value)
        rec[key] = value  # the record's own field names are fixed; only nested keys are renamed
    meta = dict(rec.get("meta") or {})
    meta["redacted"] = sorted(set(all_kinds))
    rec["meta"] = meta


def _id_without_secret(old, new):
    """An id the redaction changed becomes a hash of the original: unique, and the same on re-import."""
    if isinstance(old, list):
        return [_id_without_secret(o, n) for o, n in zip(old, new)]
    if isinstance(old, str) and old != new:
        return "r" + hashlib.sha256(old.encode("utf-8", "surrogatepass")).hexdigest()[:25]
    return new


def scrub(text: str) -> str:
    """Derived text (a commit subject, a topic name or summary) with any detected secret replaced.

    A text known to come back unchanged (see `clean_key`) is not scanned again."""
    return scrub_kinds(text)[0]


def scrub_kinds(text: str) -> tuple[str, list[str]]:
    """`scrub`, and the kinds of secret it replaced."""
    from . import detect as secrets

    if not text or secrets.quiet(text):  # (told in one pass: no verdict to keep or look up)
        return text, []
    key = clean_key(text)
    if key in _CLEAN:
        return text, []
    out, kinds = secrets.redact(text)
    if out == text:
        _found_clean(key)
    return out, kinds


# Texts that `scrub` gives back unchanged, by `clean_key` (not the quiet ones, detect.quiet: most
# texts, told as fast as a key is made, so never kept or looked up). Topic names and summaries are built
# from up to 60 of a topic's texts, re-read on every write: scanning them all again each time cost
# a `ct add` ~100 ms in a topic with a URL in it (a long token wakes detect-secrets). The tree
# keeps these keys in the disposable index (memstore/tree/topicdata.py), so later processes skip
# the scan too; a record written under --allow-secrets is never among them unless it is clean.
_CLEAN: set[bytes] = set()
_FRESH: list[bytes] = []  # found clean by this process, not saved yet
_DETECTOR: list[bytes] = []
DETECTOR_SOURCES = (
    "policy.py",
    "detect.py",
)  # beside this file: their bytes key the clean verdicts


def clean_key(text: str) -> bytes:
    """A 16-byte key for "this exact text, checked by this exact detector": the detector's source
    is part of the key, so a changed rule invalidates every saved verdict."""
    if not _DETECTOR:
        here = Path(__file__).resolve().parent
        try:
            source = b"".join((here / name).read_bytes() for name in DETECTOR_SOURCES)
        except OSError:  # not installed as files (a zip): the version has to do
            from .. import __version__

            source = f"memstore {__version__}".encode()
        _DETECTOR.append(hashlib.blake2b(source, digest_size=16).digest())
    return hashlib.blake2b(
        text.encode("utf-8", "surrogatepass"), digest_size=16, key=_DETECTOR[0]
    ).digest()


def _found_clean(key: bytes) -> None:
    if key not in _CLEAN:
        _CLEAN.add(key)
        _FRESH.append(key)


def unchecked(keys: list[bytes]) -> list[bytes]:
    """The keys this process does not know as clean yet."""
    return [k for k in keys if k not in _CLEAN]


def known_clean(keys) -> None:
    """Keys saved earlier (by any process) as clean."""
    _CLEAN.update(keys)


def add_fresh(keys) -> None:
    """Keys another process found clean on this process's behalf (memstore/workers.py), to save."""
    for key in keys:
        _found_clean(key)


def take_fresh() -> list[bytes]:
    """The keys found clean since the last call, for saving."""
    out = list(_FRESH)
    _FRESH.clear()
    return out


def user_message(exc: BaseException) -> str:
    """What the user is shown for an error (CLI stderr, HTTP body, MCP error), secrets masked: a
    refusal is built masked; any other message may quote an input (a bad role, a file's name)."""
    if isinstance(exc, SecretsFound):
        return str(exc)
    return mask_message(str(exc))


def preview(text: str, width: int = 60) -> str:
    """A commit subject's excerpt of a text: one line, secrets already scrubbed before cutting."""
    return " ".join(scrub(text).split())[:width]
