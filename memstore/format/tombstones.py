"""forgotten.jsonl: tombstones of forgotten records, {"id", "hash", "at"} per line, never the text."""

from __future__ import annotations

import sys
from pathlib import Path

from ..storefile import StoreLink
from . import safejson
from .sealed_lines import plain_view as read_plain

FILENAME = "forgotten.jsonl"
ATTRIBUTE = f"{FILENAME} merge=union"  # two clones' tombstones merge by union, like day logs
# What fsck and reads say of a tombstoned record's line found in a day log:
BACK = "record {rid} was forgotten (forgotten.jsonl), but a git merge with a clone that still had it brought its line back"


_WARNED: set[str] = set()


def read(root: Path) -> dict[str, dict]:
    """id -> tombstone for every line (unreadable lines are skipped: a tombstone only ever hides)."""
    out: dict[str, dict] = {}
    try:
        data = read_plain(Path(root) / FILENAME).decode("utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return out
    except StoreLink as exc:  # damage (fsck names it): read as no tombstones, said once on stderr
        if exc.path not in _WARNED:
            _WARNED.add(exc.path)
            print(f"memstore: warning: {exc.message} (skipped; see ct fsck)", file=sys.stderr)
        return out
    for line in data.splitlines():
        try:
            obj = safejson.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            out.setdefault(obj["id"], obj)
    return out


def problem(line: bytes) -> str | None:
    """What is wrong with one line of forgotten.jsonl (`{"id", "hash", "at"}`, all strings), or None."""
    try:
        obj = safejson.loads(line)
    except ValueError as exc:
        return str(exc)
    if type(obj) is not dict:
        return "a tombstone must be a JSON object"
    for key in ("id", "hash", "at"):
        if type(obj.get(key)) is not str or not obj[key]:
            return f"tombstone field {key!r} is missing or not a string"
    return None


def problems(root: Path) -> list[str]:
    """`forgotten.jsonl:LINE: why` for every damaged tombstone (fsck names them; reads skip them)."""
    try:
        data = read_plain(Path(root) / FILENAME)
    except (FileNotFoundError, StoreLink):  # a link is named by fsck's check of links
        return []
    return safejson.line_problems(FILENAME, data, problem)


def ids(root: Path) -> set[str]:
    return set(read(root))


def ids_in(data: bytes) -> set[str]:
    """The ids the tombstones in `data` (forgotten.jsonl's bytes at some commit) name."""
    out = set()
    for line in data.splitlines():
        try:
            obj = safejson.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            out.add(obj["id"])
    return out


def lines_named(data: bytes, gone) -> list[dict]:
    """The JSON-object lines of `data` (a day log, markers.jsonl) whose "id" a tombstone names."""
    out = []
    for raw in data.splitlines():
        try:
            obj = safejson.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and type(obj.get("id")) is str and obj["id"] in gone:
            out.append(obj)
    return out
