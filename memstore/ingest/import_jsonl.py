"""Plain JSONL conversation logs, one record per line, as records (incremental by cursor).

A line is an object with `ts`, `role` and `text` (required) and optionally `actor`, `session`,
`id`, `model`, `type`; every other field is kept. lossless-memory's own day files read as they
are: its role "ai" means "assistant" and its type "thinking" becomes type meta, kind "thinking".
Defaults: `type` text, `actor` the role, `session` the file's name without extension. A line
without `id` gets none here; the store derives one. Anything wrong is a Problem naming the line.
"""

from __future__ import annotations

import os
from pathlib import Path

from memstore.format.timeutil import UTC, parse_ts
from memstore.ingest.importers import (
    ROLES,
    TYPES,
    Batch,
    Lines,
    Problem,
    ReadResult,
    at_line,
    decode_line,
    parse_json,
    printable,
    read_lines,
    record,
)

REQUIRED = ("ts", "role", "text")
KNOWN = ("ts", "actor", "role", "type", "text", "model", "session", "id")
ROLE_ALIASES = {"ai": "assistant"}  # lossless-memory writes "ai"


def read_jsonl(path: str | os.PathLike) -> Batch:
    """Every record of a file nobody is writing (a last line without "\\n" counts too)."""
    records, _, problems = read_new(path, final=True)
    return Batch(records, problems)


def read_new(path: str | os.PathLike, cursor=None, final: bool = False) -> ReadResult:
    """Records from the complete lines after `cursor` (a Cursor, a byte offset or None)."""
    lines = read_lines(path, cursor, final)
    session = printable(Path(path).stem)  # a name that is not UTF-8 is shown with \xNN escapes
    records, problems = [], []
    for line in lines.lines:
        rec, problem = _parse_line(lines, line, session)
        if problem is not None:
            problems.append(problem)
        elif rec is not None:
            records.append(rec)
    return ReadResult(records, lines.cursor_after(len(lines.lines), lines.start.last_ts), problems)


def _parse_line(lines: Lines, line, session: str) -> tuple[dict | None, Problem | None]:
    text, problem = decode_line(lines, line)
    if problem is not None:
        return None, problem
    if not text.strip():
        return None, None
    obj, why = parse_json(text)
    if why is not None:
        return None, Problem(str(lines.path), line.number, why)
    if not isinstance(obj, dict):
        return None, Problem(str(lines.path), line.number, "not a JSON object")
    if (
        obj.get("type", "text") == "text"
        and isinstance(obj.get("text"), str)
        and not obj["text"].strip()
    ):
        # Public conversation data sets hold empty turns; one must not block a file of good ones.
        return None, Problem(
            str(lines.path),
            line.number,
            "field 'text' is empty: an empty turn, skipped",
            skippable=True,
        )
    try:
        return at_line(to_record(obj, session), line.number), None
    except ValueError as exc:
        return None, Problem(str(lines.path), line.number, str(exc))


def to_record(obj: dict, default_session: str) -> dict:
    """The record for one line's object; ValueError naming the field that is wrong."""
    for name in REQUIRED:
        if name not in obj or obj[name] is None:
            raise ValueError(f"missing required field {name!r}")
    ts = obj["ts"]
    try:
        parse_ts(ts, UTC)  # only checked here, so the store's later normalising cannot fail
    except (ValueError, OverflowError, OSError) as exc:  # a Unix time past any calendar (1e999)
        raise ValueError(f"field 'ts': {exc}") from None
    role = _role(obj["role"])
    type_, kind = _type(obj.get("type", "text"))
    text = obj["text"]
    if not isinstance(text, str):
        raise ValueError(f"field 'text' must be a string, not {type(text).__name__}")
    if type_ == "text" and not text.strip():
        raise ValueError("field 'text' is empty")
    rec = record(
        ts,
        _string(obj, "actor", role),
        role,
        type_,
        text,
        _model(obj.get("model")),
        _string(obj, "session", default_session),
        id_=_optional_id(obj.get("id")),
    )
    rec.update((k, v) for k, v in obj.items() if k not in KNOWN)
    if kind:
        rec.setdefault("kind", kind)
    return rec


def _role(value) -> str:
    role = ROLE_ALIASES.get(value, value) if isinstance(value, str) else value
    if role not in ROLES:
        raise ValueError(f"field 'role': {value!r} is not one of {', '.join(ROLES)} (or ai)")
    return role


def _type(value) -> tuple[str, str | None]:
    if value == "thinking":
        return "meta", "thinking"
    if value not in TYPES:
        raise ValueError(f"field 'type': {value!r} is not one of {', '.join(TYPES)}")
    return value, None


def _string(obj: dict, name: str, default: str) -> str:
    value = obj.get(name)
    if value is None or value == "":
        return default
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"field {name!r} must be a string, not {type(value).__name__}")


def _model(value) -> str | None:
    if value is None or isinstance(value, str):
        return value or None
    raise ValueError(f"field 'model' must be a string or null, not {type(value).__name__}")


def _optional_id(value) -> str | None:
    if value is None or value == "":
        return None
    if isinstance(value, (str, int)) and not isinstance(value, bool):
        return str(value)
    raise ValueError(f"field 'id' must be a string, not {type(value).__name__}")
