"""`ct import KIND PATH`: read another tool's conversations and write them as records, one commit.

Line-based sources (jsonl, claude-code) are read incrementally from a cursor per file, kept in the
disposable `.memstore/import-state.json`; the cursor is saved only after the commit. Losing it is
harmless: the file is read again and records already present (same id) are skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from ..errors import FormatError, UsageError
from ..format.record import RecordError, UnstorableText
from ..store import WriteResult

KINDS = ("jsonl", "claude-code", "chatgpt", "trace", "lossless-memory")


def import_source(
    store, kind: str, path, progress=None, allow_secrets: bool = False, secrets: str | None = None, **_opts
) -> WriteResult:
    """Import one source, or a list of sources of one kind (`ct watch`'s batch), in one commit.

    `secrets` (refuse, skip, redact, allow; `allow_secrets` is the old name for allow) says what
    to do with records that hold a detected secret; messages name the input file and line.
    """
    how = secrets or ("allow" if allow_secrets else "refuse")
    paths = [Path(p).expanduser().resolve() for p in (path if isinstance(path, (list, tuple)) else [path])]
    path = paths[0]
    if kind not in KINDS:
        raise UsageError(f"unknown import kind {kind!r} (one of {', '.join(KINDS)})")
    if kind == "trace":  # one whole JSON file whose topic structure goes into tree.json
        from .import_trace import import_trace

        return import_trace(store, path, progress=progress, secrets=how)
    if kind == "lossless-memory":
        from .import_lossless import check_timezone

        _opts["source_timezone"] = check_timezone(_opts.get("source_timezone") or store.config.timezone)
    state_path = store.meta_dir / "import-state.json"
    state = _load_state(state_path)
    raw, cursors, notes = [], {}, []
    for p in paths:
        r, c, n = _read(kind, p, state, _opts)
        raw += r
        cursors.update(c)
        notes += n
    records, origins = [], {}
    for i, (src, rec) in enumerate(raw):
        line = getattr(rec, "line", None)
        try:
            norm = store.normalize(rec, derive_id=True)
        except UnstorableText as exc:  # that one record is reported; the rest of the file comes in
            notes.append(f"skipped {src}:{line if line is not None else f' record {i + 1}'}: {exc}")
            continue
        except RecordError as exc:
            if line is not None:
                raise FormatError(src, str(exc), line=line, hint="Nothing was imported.") from None
            raise FormatError(src, f"record {i + 1}: {exc}", hint="Nothing was imported.") from None
        origins[id(norm)] = f"{src}:{line}" if line is not None else f"{src}: record {i + 1}"
        records.append(norm)

    def message(added):
        sessions = len({r["session"] for r in added})
        where = path.name if len(paths) == 1 else f"{len(paths)} paths"
        return f"Import {len(added)} {kind} records from {where} ({sessions} sessions)"

    res = store.write(records, message, progress=progress, secrets=how, origins=origins)
    state.update(cursors)
    _save_state(state_path, state)
    res.notes = notes + res.notes
    return res


def _read(kind: str, path: Path, state: dict, opts: dict | None = None):
    """[(source file, record)], new cursors, notes."""
    from .importers import Cursor

    notes: list[str] = []
    out: list[tuple[Path, dict]] = []
    cursors: dict[str, dict] = {}
    if kind == "chatgpt":
        from .import_chatgpt import read_chatgpt

        batch = read_chatgpt(path)
        for p in batch.problems:
            notes.append(f"skipped {p}")
        return [(path, r) for r in batch.records], cursors, notes
    read_opts: dict = {}
    if kind == "jsonl":
        from . import import_jsonl as mod
        from .import_claude import session_files

        files = [path] if path.is_file() else session_files(path)  # a folder of logs (ct watch)
    elif kind == "lossless-memory":
        from . import import_lossless as mod

        files = mod.data_files(path)
        read_opts["source_timezone"] = (opts or {}).get("source_timezone")
    else:
        from . import import_claude as mod

        files = mod.session_files(path)
        if not files:
            raise UsageError(f"{path}: no Claude Code session files (*.jsonl) found")
    for f in files:
        key = str(f)
        cursor = Cursor.from_dict(state[key]) if key in state else None
        result = mod.read_new(f, cursor, final=_complete_tail(f), **read_opts)
        hard = [p for p in result.problems if not p.skippable]
        if hard and kind in ("jsonl", "lossless-memory"):
            p = hard[0]
            raise FormatError(p.path, p.message, line=p.line, hint="Nothing was imported.")
        notes += [f"skipped {p}" if not p.skippable else str(p) for p in result.problems]
        out += [(f, r) for r in result.records]
        cursors[key] = result.cursor.to_dict()
    return out, cursors, notes


def _complete_tail(path: Path) -> bool:
    """True when the file's last line lacks a newline but is a whole JSON value (a finished file)."""
    try:
        with open(path, "rb") as fh:
            size = fh.seek(0, os.SEEK_END)
            fh.seek(max(0, size - (1 << 20)))
            tail = fh.read()
    except OSError:
        return False
    if not tail or tail.endswith(b"\n"):
        return False
    last = tail.rsplit(b"\n", 1)[-1]
    try:
        json.loads(last)
        return True
    except (ValueError, UnicodeDecodeError):
        return False


def _load_state(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, ValueError):
        return {}


def _save_state(path: Path, state: dict) -> None:
    path.parent.mkdir(exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(state, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(tmp, path)
