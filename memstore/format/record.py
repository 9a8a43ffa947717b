"""Records: the seven lossless fields, then memstore's own fields, validated and serialised."""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import time
from datetime import datetime

from . import safejson
from .timeutil import normalize_ts, parse_ts

_fromiso = datetime.fromisoformat

LOSSLESS_FIELDS = ("ts", "actor", "role", "type", "text", "model", "session")
OWN_FIELDS = ("id", "hash", "vkey", "seg", "source", "supersedes", "meta")
# A record's scope (docs/format.md, "Records"): "private" (its writer's only) is written as
# `"scope":"private"`, right after `meta`; no field means "shared" (the team).
SCOPES = ("private", "shared")
PRIVATE = "private"
# Who put the record into memory (docs/format.md, "Records"): set by the writer, never by an input.
WRITER_FIELDS = ("author",)
FIELD_ORDER = LOSSLESS_FIELDS + OWN_FIELDS[:3] + WRITER_FIELDS + OWN_FIELDS[3:] + ("scope",)
# The fields a line holds after those a write stamps (hash, vkey, author), in their order.
AFTER_STAMPED = FIELD_ORDER[FIELD_ORDER.index(WRITER_FIELDS[-1]) + 1 :]
MAX_AUTHOR_LEN = 300
ROLES = ("user", "assistant", "system", "tool")
TYPES = ("text", "action", "meta", "doc")
# What was said or done in a conversation; meta rows (a harness's own notes) and document chunks are not.
CONVERSATION_TYPES = ("text", "action")


def is_conversation(rec: dict) -> bool:
    return rec.get("type") in CONVERSATION_TYPES


def is_private(rec: dict) -> bool:
    return rec.get("scope") == PRIVATE


def check_scope(value) -> str:
    """A scope as given (`--scope`, an API's `scope`); RecordError names the choices."""
    if value not in SCOPES:
        raise RecordError(f"scope must be one of {'|'.join(SCOPES)}, not {value!r}")
    return value


# Names other tools use for the same roles (lossless-memory writes "ai").
ROLE_ALIASES = {
    "ai": "assistant",
    "human": "user",
    "bot": "assistant",
    "model": "assistant",
    "function": "tool",
}
MAX_ID_LEN = 200
_ID_CONTROL = re.compile("[\x00-\x1f]")  # what `_check_id` refuses in an id


class RecordError(ValueError):
    """An input record is unusable; the message says which field and why."""


class UnstorableText(RecordError):
    """The text holds something UTF-8 cannot store (a lone UTF-16 surrogate); an import skips that record."""


def _lone_surrogate(text: str) -> int:
    """The index of the first lone UTF-16 surrogate in the text (half an emoji), or -1."""
    try:
        text.encode("utf-8")
        return -1
    except UnicodeEncodeError as exc:
        return exc.start


def _any_lone_surrogate(value, depth: int = 0) -> bool:
    """The quick check (no names built): is there a string UTF-8 cannot store anywhere in value?"""
    if isinstance(value, str):
        return not value.isascii() and _lone_surrogate(value) >= 0
    if depth > 100:
        return False
    if isinstance(value, dict):
        for k, v in value.items():
            if (isinstance(v, (str, dict, list)) and _any_lone_surrogate(v, depth + 1)) or (
                isinstance(k, str) and not k.isascii() and _lone_surrogate(k) >= 0
            ):
                return True
    elif isinstance(value, list):
        for v in value:
            if isinstance(v, (str, dict, list)) and _any_lone_surrogate(v, depth + 1):
                return True
    return False


def _unstorable(value, where: str, depth: int = 0) -> UnstorableText | None:
    """The error for the first string (a value or a key, at any depth) UTF-8 cannot store, or None."""
    if isinstance(value, str):
        bad = _lone_surrogate(value)
        if bad < 0:
            return None
        return UnstorableText(
            f"field {where!r} holds a lone UTF-16 surrogate ({value[bad]!r} at character {bad}, "
            "half of an emoji or a byte that was not UTF-8), which UTF-8 cannot store"
        )
    if depth > 100:  # deeper values are refused by the reader's JSON first; nothing to walk for
        return None
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        name = f"{where}[{key}]" if isinstance(key, int) else f"{where}.{key}" if where else key
        problem = (
            _unstorable(key, f"{where} key" if where else "key", depth + 1)
            if isinstance(key, str)
            else None
        )
        problem = problem or _unstorable(item, name, depth + 1)
        if problem is not None:
            return problem
    return None


def text_hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_ULID_ALPHABET = "0123456789abcdefghjkmnpqrstvwxyz"


def new_id() -> str:
    """A time-ordered random id (48-bit ms time + 80 random bits, Crockford base32, lower case)."""
    value = (int(time.time() * 1000) << 80) | int.from_bytes(os.urandom(10), "big")
    out = []
    for _ in range(26):
        out.append(_ULID_ALPHABET[value & 31])
        value >>= 5
    return "".join(reversed(out))


def derived_id(rec: dict) -> str:
    """A content-derived id, so that re-importing the same turn yields the same record."""
    key = "\x1f".join(
        str(rec.get(k) or "") for k in ("ts", "role", "actor", "session", "type", "text")
    )
    return "h" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:25]


def _check_id(value) -> str:
    if not isinstance(value, (str, int)) or isinstance(value, bool):
        raise RecordError(f"id must be a string, not {type(value).__name__}")
    s = str(value)
    if not s or len(s) > MAX_ID_LEN or any(ord(c) < 32 for c in s):
        raise RecordError(f"id {s[:40]!r} must be 1-{MAX_ID_LEN} printable characters")
    return s


def normalize(raw: dict, tz, *, defaults: dict | None = None, derive_id: bool = False) -> dict:
    """A validated record in canonical field order (without hash/seg: the store adds those).

    Unknown input fields are kept under `meta`. `derive_id` gives records without an id a
    content-derived one (imports); otherwise they get a fresh time-ordered id (add, chat).
    """
    if not isinstance(raw, dict):
        raise RecordError(f"a record must be a JSON object, not {type(raw).__name__}")
    src = dict(defaults or {})
    src.update({k: v for k, v in raw.items() if v is not None or k not in src})
    text = src.get("text")
    if not isinstance(text, str):
        raise RecordError(
            "missing field 'text'" if text is None else "field 'text' must be a string"
        )
    # NUL and other control characters are kept: JSON escapes them in the log (\u0000). A lone
    # surrogate (in any field, meta too) cannot be stored verbatim, so the record is refused.
    if _any_lone_surrogate(src):
        raise _unstorable(text, "text") or _unstorable(src, "")
    role = str(src.get("role") or "").strip().lower()
    role = ROLE_ALIASES.get(role, role)
    if role not in ROLES:
        raise RecordError(f"field 'role' must be one of {'|'.join(ROLES)}, not {src.get('role')!r}")
    rtype = str(src.get("type") or "text").strip().lower()
    if rtype not in TYPES:
        raise RecordError(f"field 'type' must be one of {'|'.join(TYPES)}, not {src.get('type')!r}")
    if src.get("ts") in (None, ""):
        raise RecordError("missing field 'ts'")
    try:
        ts = normalize_ts(src["ts"], tz)
    except (ValueError, OverflowError, OSError) as exc:
        raise RecordError(f"field 'ts': {exc}") from None
    rec = {
        "ts": ts,
        "actor": str(src.get("actor") or role),
        "role": role,
        "type": rtype,
        "text": text,
        "model": None if src.get("model") in (None, "") else str(src["model"]),
        "session": str(src.get("session") or ""),
    }
    if src.get("id") not in (None, ""):
        rec["id"] = _check_id(src["id"])
    else:
        rec["id"] = derived_id(rec) if derive_id else new_id()
    for key in ("source", "supersedes"):
        if src.get(key) is not None:
            rec[key] = src[key]
    # an input's own `author` is what the source says, kept under meta; the writer sets the field
    extra = {k: v for k, v in src.items() if k not in FIELD_ORDER or k in WRITER_FIELDS}
    meta = dict(src.get("meta") or {}) if isinstance(src.get("meta"), dict) else {}
    meta.update(extra)
    if meta:
        rec["meta"] = meta
    if src.get("scope") is not None:  # "shared" stays until the write: it overrides the default
        rec["scope"] = check_scope(src["scope"])
    _refuse_non_finite(rec)
    return rec


def _non_finite(value, where: str) -> tuple[str, float] | None:
    """(dotted path, value) of the first NaN or ±Infinity inside a JSON value, or None."""
    if isinstance(value, float) and not math.isfinite(value):
        return where, value
    items = (
        value.items()
        if isinstance(value, dict)
        else enumerate(value)
        if isinstance(value, list)
        else ()
    )
    for key, item in items:
        found = _non_finite(item, f"{where}.{key}" if isinstance(key, str) else f"{where}[{key}]")
        if found:
            return found
    return None


def _refuse_non_finite(rec: dict) -> None:
    """NaN and Infinity are no JSON numbers: a day log holding one is invalid JSON for every other reader."""
    for key, value in rec.items():
        found = _non_finite(value, key)
        if found:
            what = json.dumps(found[1])  # NaN, Infinity or -Infinity, as the input spelled it
            raise RecordError(
                f"field {found[0]!r} is {what}, which JSON cannot store (not a number)"
            )


_RANK = {k: n for n, k in enumerate(FIELD_ORDER)}.get
_UNKNOWN = len(FIELD_ORDER)


def ordered(rec: dict) -> dict:
    """The record with fields in canonical order (unknown top-level keys last, as written): the
    record itself when they are in that order already (a write's records are), else a copy."""
    last = -1
    for k in rec:
        rank = _RANK(k, _UNKNOWN)
        if rank < last:
            out = {k: rec[k] for k in FIELD_ORDER if k in rec}
            out.update({k: v for k, v in rec.items() if k not in out})
            return out
        last = rank
    return rec


# json.dumps with these options makes an encoder per call (a tenth of a write's lines' time)
_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode


def dumps(rec: dict) -> str:
    """One log line (without the newline): compact JSON, UTF-8 kept as is."""
    try:
        return _ENCODE(ordered(rec))
    except (
        ValueError
    ):  # a NaN that came past normalize (a caller's own record): never into a day log
        _refuse_non_finite(rec)
        raise


def loads(line: str | bytes) -> dict:
    """Parse and check one log line; RecordError says what is wrong.

    Every field docs/format.md gives a type is checked here, where readers, the index and fsck
    all take their records, so a line holding another type (an object for `actor`, `null` for
    `id`, NaN anywhere) is a damaged line: fsck names it and reads skip it. This is the index's
    hot path: one expression passes a good line, and `_problem` says what is wrong with a bad one.
    """
    try:
        obj = _decode(line if type(line) is str else line.decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # not JSON, too deep, a giant number, NaN
        raise RecordError(safejson.problem(exc)) from None
    if type(obj) is not dict or not _REQUIRED <= obj.keys():
        raise RecordError(_problem(obj))
    get, rid, ts = obj.get, obj["id"], obj["ts"]
    if not (
        type(obj["text"]) is str
        and type(rid) is str
        and 0 < len(rid) <= MAX_ID_LEN
        and obj["role"] in ROLES
        and obj["type"] in TYPES
        and type(get("actor", "")) is str
        and type(get("session", "")) is str
        and type(get("model")) in _STR_OR_NULL
        and type(get("hash", "")) is str
        and type(get("vkey", "")) is str
        and type(get("source", _OBJ)) is dict
        and type(get("meta", _OBJ)) is dict
        and type(get("seg", _OBJ)) is dict
        and get("scope", PRIVATE) in SCOPES
        and ("supersedes" not in obj or _id_list(obj["supersedes"]))
        and ("author" not in obj or author_problem(obj["author"]) is None)
        and not _ID_CONTROL.search(rid)
        and _canonical_ts(ts)
    ):
        raise RecordError(_problem(obj))
    return obj


_decode = safejson.DECODER.decode
_REQUIRED = frozenset(("ts", "role", "type", "text", "id"))
_STR_OR_NULL = (str, type(None))
_OBJ: dict = {}
# The optional fields' JSON types (docs/format.md, "Records"), for the message of a bad line.
_TYPED = (
    ("actor", (str,), "a string"),
    ("session", (str,), "a string"),
    ("model", _STR_OR_NULL, "a string or null"),
    ("hash", (str,), "a string"),
    ("vkey", (str,), "a string"),
    ("source", (dict,), "an object"),
    ("meta", (dict,), "an object"),
    ("seg", (dict,), "an object"),
)


def _id_list(value) -> bool:
    return type(value) is list and all(type(v) is str for v in value)


def _canonical_ts(ts) -> bool:
    """Is `ts` a time (as written: fixed width, ending in Z, which fromisoformat reads directly)?"""
    if type(ts) is not str:
        return False
    try:
        if len(ts) == 27 and ts[26] == "Z":
            _fromiso(ts)
        else:
            parse_ts(ts, None)
    except (ValueError, TypeError):
        return False
    return True


def _problem(obj) -> str:
    """What is wrong with a decoded log line that `loads` refused (the slow path: bad lines only)."""
    if type(obj) is not dict:
        return "a log line must be a JSON object"
    for key in ("ts", "role", "type", "text", "id"):
        if key not in obj:
            return f"missing field {key!r}"
    if type(obj["text"]) is not str:
        return "field 'text' must be a string"
    rid = obj["id"]
    if type(rid) is not str or not 0 < len(rid) <= MAX_ID_LEN or _ID_CONTROL.search(rid):
        return f"field 'id' must be 1-{MAX_ID_LEN} printable characters, not {_shown(rid)}"
    for key, choices in (("role", ROLES), ("type", TYPES)):
        if obj[key] not in choices:
            return f"field {key!r} must be one of {'|'.join(choices)}, not {_shown(obj[key])}"
    for key, types, what in _TYPED:
        if key in obj and type(obj[key]) not in types:
            return f"field {key!r} must be {what}, not {_shown(obj[key])}"
    if obj.get("scope", PRIVATE) not in SCOPES:
        return f"field 'scope' must be private (or absent), not {_shown(obj['scope'])}"
    if "supersedes" in obj and not _id_list(obj["supersedes"]):
        return f"field 'supersedes' must be a list of record ids, not {_shown(obj['supersedes'])}"
    if "author" in obj and author_problem(obj["author"]):
        return f"field 'author' {author_problem(obj['author'])}"
    if type(obj["ts"]) is not str:
        return f"field 'ts' must be an ISO-8601 time, not {_shown(obj['ts'])}"
    try:
        parse_ts(obj["ts"], None)
    except (ValueError, TypeError) as exc:
        return f"field 'ts': {exc}"
    return "not a record"  # unreachable while _problem checks what loads checks


def _shown(value) -> str:
    """A value for a message: a short string's repr, else its JSON type."""
    if type(value) is str:
        return repr(value if len(value) <= 40 else value[:40] + "…")
    if value is None:
        return "null"
    return {bool: "a boolean", int: "a number", float: "a number", list: "a list"}.get(
        type(value), "an object"
    )


_CONTROL = re.compile("[\x00-\x1f\x7f]")


def author_problem(value) -> str | None:
    """What is wrong with an `author` value ("must be a string, not int"), or None when it is fine:
    a name, optionally followed by ` <email>`, 1-300 characters, no control characters."""
    if not isinstance(value, str):
        return f"must be a string, not {type(value).__name__}"
    if not value.strip() or len(value) > MAX_AUTHOR_LEN:
        return f"must be 1-{MAX_AUTHOR_LEN} characters, not {len(value.strip())}"
    if _CONTROL.search(value):
        return f"{value[:40]!r} holds a control character"
    return None


def author_parts(author: str | None) -> tuple[str, str]:
    """(name, email) of an author, both case-folded for matching: "Ana <ana@x.org>" gives
    ("ana", "ana@x.org"); a bare name gives (name, "")."""
    if not isinstance(author, str):
        return "", ""
    name, sep, rest = author.partition("<")
    email = rest.rsplit(">", 1)[0] if sep else ""
    return name.strip().casefold(), email.strip().casefold()


def author_matches(author: str | None, wanted: str) -> bool:
    """Whether `--author wanted` picks this author: its name or its email, case-insensitively."""
    want = wanted.strip().casefold()
    return bool(want) and want in author_parts(author)


# A release history by its file name (docs/format.md, "Document sources": `source.doc_kind`).
_CHANGELOG = re.compile(
    r"(?:^|/)(?:(?:change[-_ ]?log|changes|history|news|release[-_ ]?notes|releases|whats[-_ ]?new)"
    r"(?:\.(?:md|markdown|rst|rest|txt|text|adoc|asciidoc|org))?"
    r"|(?:change[-_ ]?logs?|release[-_ ]?notes|whats[-_ ]?new)/.*)$",
    re.IGNORECASE,
)


def doc_kind(rel: str) -> str | None:
    """ "changelog" for a release history by its name (CHANGELOG.md, docs/changes.rst, NEWS,
    HISTORY.txt, release-notes.md, whatsnew/3.0.rst, changelog/v2.md), else None."""
    return "changelog" if _CHANGELOG.search(rel.replace("\\", "/")) else None
