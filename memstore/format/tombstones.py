"""forgotten.jsonl: tombstones of forgotten records, {"id", "hash", "at"} per line, never the text."""

from __future__ import annotations

import json
from pathlib import Path

from .sealed_lines import plain_view as read_plain

FILENAME = "forgotten.jsonl"
ATTRIBUTE = f"{FILENAME} merge=union"  # two clones' tombstones merge by union, like day logs
# What fsck and reads say of a tombstoned record's line found in a day log:
BACK = "record {rid} was forgotten (forgotten.jsonl), but a git merge with a clone that still had it brought its line back"


def read(root: Path) -> dict[str, dict]:
    """id -> tombstone for every line (unreadable lines are skipped: a tombstone only ever hides)."""
    out: dict[str, dict] = {}
    try:
        data = read_plain(Path(root) / FILENAME).decode("utf-8")
    except (FileNotFoundError, UnicodeDecodeError):
        return out
    for line in data.splitlines():
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("id"), str):
            out.setdefault(obj["id"], obj)
    return out


def ids(root: Path) -> set[str]:
    return set(read(root))


def ids_in(data: bytes) -> set[str]:
    """The ids the tombstones in `data` (forgotten.jsonl's bytes at some commit) name."""
    out = set()
    for line in data.splitlines():
        try:
            obj = json.loads(line)
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
            obj = json.loads(raw)
        except ValueError:
            continue
        if isinstance(obj, dict) and obj.get("id") in gone:
            out.append(obj)
    return out
