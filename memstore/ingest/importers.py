"""What every importer shares: the record shape, problems, cursors and the complete-line reader.

Importers are pure parsers: they read another tool's files and return plain record dicts; the
store decides what to write. The format-specific code lives next to this module:

    import_claude   Claude Code session transcripts (~/.claude/projects/**/*.jsonl), incremental
    import_chatgpt  a ChatGPT export's conversations.json (or the export's .zip / folder)
    import_jsonl    one record per line (memstore's and lossless-memory's own shape), incremental

A record is a dict whose first keys are the seven lossless fields (ts, actor, role, type, text,
model, session), then `id` (omitted when the source has none; the store derives one), then any
extra fields, which the store keeps under `meta`.
"""

from __future__ import annotations

import hashlib
import importlib
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, NamedTuple

from memstore.errors import FormatError, shown_path

ROLES = ("user", "assistant", "system", "tool")
TYPES = ("text", "action", "meta", "doc")
HEAD_BYTES = 4096  # how much of a file's start the cursor fingerprints to notice a rewrite


# Fields a store sets itself (docs/format.md, "Records"). An export's own values of them are what
# its source said, kept under `meta`: taken as the store's, a `supersedes` in a file would hide
# committed records, a `source` or `hash` would be damage fsck names, a `scope` would skip the
# private review `import_scope` asks for.
STORE_OWNED = ("source", "supersedes", "scope", "hash", "vkey", "seg")


def not_importable(path: Path, under: Path | None = None) -> str | None:
    """Why the file `path` is not read by an import, or None: anything but a regular file (a FIFO
    would hang the read, /dev/zero fill memory), or, for a file found in the folder `under` that
    the user named, one that a link (the file's or a folder's on its way) takes outside it, as
    `ct ingest` does without --follow-symlinks."""
    import stat

    try:
        st = os.stat(path)
    except OSError as exc:
        return f"cannot be read ({exc.strerror or exc})"
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file (a pipe, a device or a socket): not read"
    if under is not None:  # the file, or a folder on its way, may be a link
        target, top = os.path.realpath(path), os.path.realpath(under)
        if os.path.commonpath([target, top]) != top:
            return f"a link to {target}, outside {under}: not followed"
    return None


def as_imported(store, raw: dict, derive_id: bool = True) -> dict:
    """The store's record for one record an importer read (RecordError when it cannot be one):
    the store-owned fields the source gave kept under `meta`, and its scope the store's for
    imports (`import_scope`), or private when the source marked it so (never less private)."""
    from memstore.format.record import PRIVATE

    src = dict(raw)
    given = {k: src.pop(k) for k in STORE_OWNED if k in src}
    if given:
        meta = dict(src["meta"]) if isinstance(src.get("meta"), dict) else {}
        src["meta"] = {**given, **meta}
    norm = store.normalize(src, derive_id=derive_id)
    scope = store.config.default_scope(imported=True)
    norm["scope"] = PRIVATE if given.get("scope") == PRIVATE else scope
    return norm


@dataclass(frozen=True)
class Problem:
    """A line (or, with line None, a part of a file) that could not be read as a record."""

    path: str
    line: int | None
    message: str
    skippable: bool = False  # a note, not a reason to refuse the file (an empty turn)

    def __str__(self) -> str:
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: {self.message}"

    def to_error(self) -> FormatError:
        return FormatError(self.path, self.message, line=self.line)


@dataclass(frozen=True)
class Cursor:
    """How far a line-based source file has been consumed; save it (to_dict) between runs.

    offset   bytes consumed, always just after a "\\n"
    head_sha sha256 of the first min(offset, 4096) bytes: if they change, the file was rewritten
    line     complete lines before offset, so problems carry absolute line numbers
    last_ts  the latest row timestamp consumed, to date rows that carry none (Claude Code titles)
    """

    offset: int = 0
    head_sha: str = ""
    line: int = 0
    last_ts: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Cursor:
        return cls(**{k: data[k] for k in ("offset", "head_sha", "line", "last_ts") if k in data})


class ReadResult(NamedTuple):
    """What an incremental read returns: new records, the cursor to save, problems found."""

    records: list[dict]
    cursor: Cursor
    problems: list[Problem]


class Batch(NamedTuple):
    """What a whole-source read returns."""

    records: list[dict]
    problems: list[Problem]


def record(
    ts,
    actor: str,
    role: str,
    type_: str,
    text: str,
    model: str | None,
    session: str,
    id_: str | None = None,
    **extra,
) -> dict:
    """A record dict in the canonical key order; extra fields that are None or False are left out."""
    rec = {
        "ts": ts,
        "actor": actor,
        "role": role,
        "type": type_,
        "text": text,
        "model": model,
        "session": session,
    }
    if id_ is not None:
        rec["id"] = id_
    rec.update((k, v) for k, v in extra.items() if v is not None and v is not False)
    return rec


class LineRecord(dict):
    """A record dict that remembers the 1-based line of its source file (`.line`), for messages.

    It compares and serialises as the plain dict it is, so readers' results stay plain records.
    """

    line: int | None = None


def at_line(rec: dict, number: int) -> LineRecord:
    out = LineRecord(rec)
    out.line = number
    return out


# ---------------------------------------------------------------------------------------------
# Complete-line reading


class Line(NamedTuple):
    number: int  # 1-based, absolute in the file
    raw: bytes  # without the trailing "\n"


class Lines:
    """The complete lines of a file after a cursor, and the cursor after any prefix of them."""

    def __init__(self, path: Path, start: Cursor, prefix: bytes, data: bytes, final: bool):
        self.path = path
        self.start = start
        self._prefix = prefix  # the file's first min(start.offset, HEAD_BYTES) bytes
        self._data = data
        self.lines: list[Line] = []
        self._ends: list[int] = []  # offset just after each line, relative to start.offset
        pos = 0
        while True:
            nl = data.find(b"\n", pos)
            if nl < 0:
                break
            self._add(data[pos:nl], nl + 1)
            pos = nl + 1
        # A last line without "\n" may still be being written; only a one-shot read takes it.
        if final and pos < len(data):
            self._add(data[pos:], len(data))

    def _add(self, raw: bytes, end: int) -> None:
        self.lines.append(Line(self.start.line + len(self.lines) + 1, raw))
        self._ends.append(end)

    def cursor_after(self, n: int, last_ts: str | None) -> Cursor:
        """The cursor just after the first n lines."""
        if n == 0:
            return Cursor(self.start.offset, self.start.head_sha, self.start.line, last_ts)
        end = self.start.offset + self._ends[n - 1]
        head = (self._prefix + self._data[:HEAD_BYTES])[: min(end, HEAD_BYTES)]
        return Cursor(end, _sha(head), self.start.line + n, last_ts)


def read_lines(
    path: str | os.PathLike, cursor: Cursor | int | None = None, final: bool = False
) -> Lines:
    """The complete lines after `cursor`; from the start when the file was rewritten or shrank.

    `final` also takes a last line with no "\\n" (for one-shot imports of files nobody writes).
    An int cursor is a bare byte offset (its line count is recounted; no fingerprint to check).
    """
    path = Path(path)
    cursor = _as_cursor(path, cursor)
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        prefix = f.read(min(cursor.offset, HEAD_BYTES))
        if not _still_valid(f, cursor, size, prefix):
            cursor, prefix = Cursor(), b""  # rewritten: start over; the store dedupes by id
        f.seek(cursor.offset)
        data = f.read()
    return Lines(path, cursor, prefix, data, final)


def was_rewritten(path: str | os.PathLike, cursor: Cursor) -> bool:
    """True when the file no longer starts with what `cursor` consumed (the next read restarts)."""
    with open(path, "rb") as f:
        size = os.fstat(f.fileno()).st_size
        return not _still_valid(f, cursor, size, f.read(min(cursor.offset, HEAD_BYTES)))


def _still_valid(f, cursor: Cursor, size: int, prefix: bytes) -> bool:
    if cursor.offset == 0:
        return True
    if size < cursor.offset:
        return False
    if cursor.head_sha and _sha(prefix) != cursor.head_sha:
        return False
    # An append never changes the byte before the offset, which was a line end when we stopped.
    f.seek(cursor.offset - 1)
    return f.read(1) == b"\n"


def _as_cursor(path: Path, cursor: Cursor | int | None) -> Cursor:
    if cursor is None:
        return Cursor()
    if isinstance(cursor, Cursor):
        return cursor
    return Cursor(offset=cursor, line=_count_lines(path, cursor))


def _count_lines(path: Path, offset: int) -> int:
    count, left = 0, offset
    with open(path, "rb") as f:
        while left > 0:
            chunk = f.read(min(left, 1 << 20))
            if not chunk:
                break
            count += chunk.count(b"\n")
            left -= len(chunk)
    return count


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def decode_line(lines: Lines, line: Line) -> tuple[str | None, Problem | None]:
    """The line as text, or a Problem when it is not UTF-8."""
    try:
        text = line.raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return None, Problem(
            str(lines.path), line.number, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
        )
    if line.number == 1:
        text = text.removeprefix("\ufeff")  # editors on Windows write a byte-order mark
    return text, None


def parse_json(text: str | bytes) -> tuple[Any, str | None]:
    """(the value, None), or (None, why it is not JSON we can read) for any input, hostile ones too.

    json.loads raises more than JSONDecodeError: RecursionError for values nested thousands deep,
    ValueError for an integer of more than 4300 digits (Python's int-string limit), and
    UnicodeDecodeError for bytes that are not UTF-8. Each becomes a sentence, never a traceback.
    """
    import json

    try:
        return json.loads(text), None
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg}, column {exc.colno})"
    except RecursionError:
        return None, "not valid JSON we can read (nested too deep)"
    except UnicodeDecodeError as exc:
        return None, f"not valid UTF-8 ({exc.reason} at byte {exc.start})"
    except ValueError as exc:  # the int-string conversion limit
        if "digits" in str(exc):
            return None, f"a number with too many digits (more than {_int_digits()})"
        return None, f"not valid JSON ({exc})"


def _int_digits() -> int:
    import sys

    return sys.get_int_max_str_digits() or 4300


def unix_time(value: float, what: str):
    """The UTC datetime of a Unix time; ValueError naming `what` when it is out of any calendar."""
    import datetime as dt
    import math

    if not math.isfinite(value):
        raise ValueError(f"{what}: {value!r} is not a Unix time")
    try:
        return dt.datetime.fromtimestamp(value, dt.timezone.utc)
    except (OverflowError, OSError, ValueError):
        raise ValueError(
            f"{what}: {value!r} is not a Unix time (outside the years 1-9999)"
        ) from None


def printable(path) -> str:
    """A path as text that can be printed and stored: bytes that are not UTF-8 shown as \\xNN."""
    return shown_path(path)


# ---------------------------------------------------------------------------------------------
# Registry: one place that names every importer, loaded lazily so `ct --help` stays instant.

IMPORTERS: dict[str, tuple[str, str, str | None]] = {
    # kind: (module, whole-source reader, incremental reader or None)
    "claude-code": ("memstore.ingest.import_claude", "read_claude_code", "read_new"),
    "chatgpt": ("memstore.ingest.import_chatgpt", "read_chatgpt", None),
    "jsonl": ("memstore.ingest.import_jsonl", "read_jsonl", "read_new"),
}


def reader(kind: str, incremental: bool = False) -> Callable:
    """The reader function for an import kind ("claude-code", "chatgpt", "jsonl")."""
    if kind not in IMPORTERS:
        raise ValueError(f"unknown import kind {kind!r} (known: {', '.join(IMPORTERS)})")
    module, whole, new = IMPORTERS[kind]
    name = new if incremental else whole
    if name is None:
        raise ValueError(f"{kind} files are read whole; there is no incremental reader")
    return getattr(importlib.import_module(module), name)
