"""What a write does with records that hold a detected secret: refuse (the default), skip, redact or allow.

Every write goes through `Store.write`, which calls `apply` first, so no command can commit a
secret by a path that forgot to check. Commit messages and topic names/summaries are derived text
and are scrubbed with `scrub` whatever the mode: `--allow-secrets` keeps the record verbatim, never
a copy of the secret in a place the user did not put it.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from .errors import SecretsFound, UsageError

MODES = ("refuse", "skip", "redact", "allow")
HINT = (
    "Nothing was written. Remove them, or pass --skip-secrets (leave those records out), "
    "--redact-secrets (replace each secret by a marker naming its kind) or --allow-secrets (store verbatim)."
)


def _strings(rec: dict):
    """(place, text) for the record's text and every string inside its `meta` and `source`."""
    yield "text", rec.get("text") or ""
    for key in ("meta", "source"):
        stack = [(key, rec.get(key))]
        while stack:
            place, value = stack.pop()
            if isinstance(value, str):
                yield place, value
            elif isinstance(value, dict):
                stack += [(f"{place}.{k}", v) for k, v in value.items()]
            elif isinstance(value, list):
                stack += [(f"{place}[{i}]", v) for i, v in enumerate(value)]


def findings(rec: dict) -> list[tuple[str, object]]:
    """(place, Finding) for every secret in the record."""
    from .ingest import secrets

    found = [(place, f) for place, text in _strings(rec) if text for f in secrets.scan(text)]
    if rec.get("text") and not any(place == "text" for place, _ in found):
        _found_clean(clean_key(rec["text"]))  # `scrub` of this text would give it back unchanged
    return found


def apply(records: list[dict], how: str = "refuse", origins: dict | None = None) -> tuple[list[dict], list[str]]:
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
    for rec in records:
        found = findings(rec)
        if not found:
            kept.append(rec)
            continue
        where = origins.get(id(rec)) or _default_origin(rec)
        if how == "refuse":
            said = f"{where} (record {rec['id']})" if id(rec) in origins and rec.get("id") else where
            refused += [f"{said}: {_place(rec, place, f)}{f.kind} ({f.excerpt_redacted})" for place, f in found]
        elif how == "skip":
            notes.append(f"left out {where}: holds {_kinds(f for _, f in found)}")
        else:
            _redact_in_place(rec)
            kept.append(rec)
            notes.append(f"redacted {_kinds(f for _, f in found)} in {where}")
    if refused:
        raise SecretsFound(
            "Refusing to write what looks like credentials:\n  "
            + "\n  ".join(refused[:50])
            + (f"\n  … and {len(refused) - 50} more" if len(refused) > 50 else ""),
            HINT,
        )
    return kept, notes


def _default_origin(rec: dict) -> str:
    src = rec.get("source")
    if isinstance(src, dict) and src.get("path"):
        return str(src["path"])
    return "the text" if not rec.get("session") else f"a record of session {rec['session']}"


def _place(rec: dict, place: str, f) -> str:
    """Where in the record: nothing for a one-line text, else "text line 3: " or "meta.x: "."""
    multiline = place != "text" or "\n" in (rec.get("text") or "")
    return f"{place} line {f.line}: " if multiline else ""


def _kinds(found) -> str:
    kinds = sorted({f.kind for f in found})
    return ", ".join(kinds)


def _redact_in_place(rec: dict) -> None:
    """Each secret in the record replaced by `[REDACTED kind]`; meta.redacted lists the kinds.

    In place, because the write keys its embedding inputs and given vectors by id(record).
    """
    from .ingest import secrets

    def clean(value):
        if isinstance(value, str):
            text, kinds = secrets.redact(value)
            all_kinds.extend(kinds)
            return text
        if isinstance(value, dict):
            return {k: clean(v) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        return value

    all_kinds: list[str] = []
    rec["text"] = clean(rec["text"])
    for key in ("meta", "source"):
        if key in rec:
            rec[key] = clean(rec[key])
    meta = dict(rec.get("meta") or {})
    meta["redacted"] = sorted(set(all_kinds))
    rec["meta"] = meta


def scrub(text: str) -> str:
    """Derived text (a commit subject, a topic name or summary) with any detected secret replaced.

    A text known to come back unchanged (see `clean_key`) is not scanned again."""
    if not text:
        return text
    key = clean_key(text)
    if key in _CLEAN:
        return text
    from .ingest import secrets

    out = secrets.redact(text)[0]
    if out == text:
        _found_clean(key)
    return out


# Texts that `scrub` gives back unchanged, by `clean_key`. Topic names and summaries are built
# from up to 60 of a topic's texts, re-read on every write: scanning them all again each time cost
# a `ct add` ~100 ms in a topic with a URL in it (a long token wakes detect-secrets). The tree
# keeps these keys in the disposable index (memstore/tree/topicdata.py), so later processes skip
# the scan too; a record written under --allow-secrets is never among them unless it is clean.
_CLEAN: set[bytes] = set()
_FRESH: list[bytes] = []  # found clean by this process, not saved yet
_DETECTOR: list[bytes] = []


def clean_key(text: str) -> bytes:
    """A 16-byte key for "this exact text, checked by this exact detector": the detector's source
    is part of the key, so a changed rule invalidates every saved verdict."""
    if not _DETECTOR:
        here = Path(__file__).resolve().parent
        try:
            source = b"".join((here / name).read_bytes() for name in ("secret_policy.py", "ingest/secrets.py"))
        except OSError:  # not installed as files (a zip): the version has to do
            from . import __version__

            source = f"memstore {__version__}".encode()
        _DETECTOR.append(hashlib.blake2b(source, digest_size=16).digest())
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16, key=_DETECTOR[0]).digest()


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


def take_fresh() -> list[bytes]:
    """The keys found clean since the last call, for saving."""
    out = list(_FRESH)
    _FRESH.clear()
    return out
