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
from ..results import WriteResult
from .importers import Problem, as_imported, not_importable, parse_json, printable

KINDS = ("jsonl", "claude-code", "chatgpt", "trace", "lossless-memory")
# a bad line refuses the whole file (one-shot imports); in the other kinds it is skipped and named
STRICT_KINDS = ("jsonl", "lossless-memory")


def import_source(
    store,
    kind: str,
    path,
    progress=None,
    allow_secrets: bool = False,
    secrets: str | None = None,
    follow: bool = False,
    **_opts,
) -> WriteResult:
    """Import one source, or a list of sources of one kind (`ct watch`'s batch), in one commit.

    `secrets` (refuse, skip, redact, allow; `allow_secrets` is the old name for allow) says what
    to do with records that hold a detected secret; messages name the input file and line.

    What a bad item does (docs/format.md, "Imports"): a line of a jsonl or lossless-memory file
    that cannot be read refuses the file (FormatError naming every such line, nothing imported); in Claude Code
    transcripts and ChatGPT exports each bad line or conversation is skipped with a note naming
    it. A record whose text UTF-8 cannot store is skipped in every kind, and so is a last line
    cut off without a newline. When nothing at all could be imported and something was skipped,
    FormatError (exit 4) names the first. `follow` (`ct watch`): a bad line never refuses a file
    nor the batch, it is a note and the cursor moves past it so it is not reported again; a last
    line without a newline is waited for in silence.
    """
    how = secrets or ("allow" if allow_secrets else "refuse")
    paths = [
        Path(p).expanduser().resolve()
        for p in (path if isinstance(path, (list, tuple)) else [path])
    ]
    path = paths[0]
    if kind not in KINDS:
        raise UsageError(f"unknown import kind {kind!r} (one of {', '.join(KINDS)})")
    for p in paths:  # a path the user named: a folder, or a file that can be read to its end
        why = None if p.is_dir() or not p.exists() else not_importable(p)
        if why is not None:
            raise FormatError(p, why, hint="Nothing was imported.")
    if kind == "trace":  # one whole JSON file whose topic structure goes into tree.json
        from .import_trace import import_trace

        return import_trace(store, path, progress=progress, secrets=how)
    if kind == "lossless-memory":
        from .import_lossless import check_timezone

        _opts["source_timezone"] = check_timezone(
            _opts.get("source_timezone") or store.config.timezone
        )
    state_path = store.meta_dir / "import-state.json"
    state = _load_state(state_path)
    strict = kind in STRICT_KINDS and not follow
    raw, cursors, notes, bad, refused = [], {}, [], [], []
    for p in paths:
        r, c, n, b = _read(kind, p, state, _opts, follow)
        raw += r
        cursors.update(c)
        notes += n
        bad += b
    if strict:  # every line that refuses its file, named in one run: read problems first
        refused += [p for p in bad if getattr(p, "refuses", False)]
    records, origins = [], {}
    for i, (src, rec) in enumerate(raw):
        line = getattr(rec, "line", None)
        where = (
            f"{printable(src)}:{line}" if line is not None else f"{printable(src)}: record {i + 1}"
        )
        try:
            norm = as_imported(store, rec)
        except RecordError as exc:
            problem = Problem(
                printable(src), line, str(exc) if line is not None else f"record {i + 1}: {exc}"
            )
            if strict and not isinstance(exc, UnstorableText):
                refused.append(problem)
                continue
            notes.append(
                f"skipped {problem}"
            )  # that one record is reported; the rest of the file comes in
            bad.append(problem)
            continue
        origins[id(norm)] = where
        records.append(norm)
    if refused:
        raise refusal(refused)
    records = _one_per_id(records, origins, notes)
    _own_corrections(records)
    if not records and bad and not follow:
        more = len(bad) - 1
        also = (
            f" ({more} more item{'s' if more > 1 else ''} could not be read either)" if more else ""
        )
        raise FormatError(
            bad[0].path, bad[0].message, line=bad[0].line, hint=f"Nothing was imported{also}."
        )

    def message(added):
        sessions = len({r["session"] for r in added})
        where = printable(path.name) if len(paths) == 1 else f"{len(paths)} paths"
        return f"Import {len(added)} {kind} records from {where} ({sessions} sessions)"

    res = store.write(records, message, progress=progress, secrets=how, origins=origins)
    state.update(cursors)
    _save_state(state_path, state)
    res.notes = notes + res.notes
    return res


def _one_per_id(records: list[dict], origins: dict, notes: list[str]) -> list[dict]:
    """The records of one import with each id once: a repeat of the same record (a line given
    twice) is dropped quietly; another record under an id already taken is skipped with a note
    naming both places, instead of counting as "already present" in a store that never held it."""
    first: dict[str, dict] = {}
    out = []
    for rec in records:
        seen = first.get(rec["id"])
        if seen is None:
            first[rec["id"]] = rec
            out.append(rec)
        elif any(seen.get(k) != rec.get(k) for k in ("ts", "role", "text", "session")):
            notes.append(
                f"skipped {origins.get(id(rec), 'a record')}: its id {rec['id']!r} is also that of "
                f"{origins.get(id(seen), 'an earlier record')}, a different record (the first is kept)"
            )
    return out


def _own_corrections(records: list[dict]) -> None:
    """A correction inside the export (a record whose `supersedes` names only records the same
    import brings) keeps its meaning; one naming anything else (a record this store committed)
    stays under `meta`, where `as_imported` put it: a file can never hide committed records."""
    ids = {r["id"] for r in records}
    for rec in records:
        meta = rec.get("meta")
        old = meta.get("supersedes") if isinstance(meta, dict) else None
        if isinstance(old, list) and old and all(isinstance(i, str) and i in ids for i in old):
            rec["supersedes"] = meta.pop("supersedes")
            if not meta:
                del rec["meta"]


SHOWN_PROBLEMS = 20  # a refusal lists this many bad lines, then counts the rest


def refusal(problems: list[Problem]) -> FormatError:
    """One error for every line that refuses a strict import: the first as the message, the rest
    (in file and line order) listed under it, so one run names them all."""
    ordered = sorted(problems, key=lambda p: (p.path, p.line or 0))
    first, rest = ordered[0], ordered[1:]
    listed = [f"  {p}" for p in rest[:SHOWN_PROBLEMS]]
    if len(rest) > SHOWN_PROBLEMS:
        listed.append(f"  … and {len(rest) - SHOWN_PROBLEMS} more")
    also = (
        f"{len(rest)} more line{'s' if len(rest) != 1 else ''} cannot be imported either:\n"
        + "\n".join(listed)
        + "\n"
        if rest
        else ""
    )
    return FormatError(
        first.path, first.message, line=first.line, hint=f"{also}Nothing was imported."
    )


def _read(kind: str, path: Path, state: dict, opts: dict | None = None, follow: bool = False):
    """[(source file, record)], new cursors, notes, and the items that could not be read."""
    from .importers import Cursor

    notes: list[str] = []
    bad: list[str] = []
    out: list[tuple[Path, dict]] = []
    cursors: dict[str, dict] = {}
    if kind == "chatgpt":
        from .import_chatgpt import read_chatgpt

        batch = read_chatgpt(path)
        for p in batch.problems:
            notes.append(str(p) if p.skippable else f"skipped {p}")
            bad += [] if p.skippable else [p]
        return [(path, r) for r in batch.records], cursors, notes, bad
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
            raise UsageError(f"{printable(path)}: no Claude Code session files (*.jsonl) found")
    for f in files:
        why = not_importable(f, path) if path.is_dir() else None
        if why is not None:  # in the folder the user named: that file is skipped, named
            notes.append(f"skipped {printable(f)}: {why}")
            continue
        key = str(f)
        cursor = Cursor.from_dict(state[key]) if key in state else None
        tail = _last_line(f)
        whole = tail is not None and parse_json(tail)[1] is None  # a finished file's last line
        result = mod.read_new(f, cursor, final=whole, **read_opts)
        hard = [p for p in result.problems if not p.skippable]
        if hard and kind in STRICT_KINDS and not follow:  # refuses the file: named with the rest
            hard = [_Refuses(printable(p.path), p.line, p.message) for p in hard]
        notes += [f"skipped {p}" if not p.skippable else str(p) for p in result.problems]
        bad += hard
        cut = None if follow or whole else _cut_off(f, result.cursor, tail)
        if cut is not None:
            notes.append(f"skipped {cut}")
            bad.append(cut)
        out += [(f, r) for r in result.records]
        cursors[key] = result.cursor.to_dict()
    return out, cursors, notes, bad


class _Refuses(Problem):
    """A bad line of a strict import: it refuses its file (every one is named, nothing imported)."""

    refuses = True


def _last_line(path: Path) -> bytes | None:
    """The file's last line when it lacks a newline (None when the file ends with one or is empty)."""
    try:
        with open(path, "rb") as fh:
            end = fh.seek(0, os.SEEK_END)
            pos, tail = end, b""
            while pos > 0:
                step = min(pos, 1 << 20)
                pos -= step
                fh.seek(pos)
                tail = fh.read(step) + tail
                if pos == end - step and tail.endswith(b"\n"):
                    return None
                if b"\n" in tail:
                    return tail.rsplit(b"\n", 1)[1]
            return tail or None
    except OSError:
        return None


def _cut_off(path: Path, cursor, tail: bytes | None):
    """A Problem for a last line that stops without a newline and is no whole JSON value (a
    one-shot import leaves it, and the cursor before it: a later import takes it once whole)."""
    if tail is None or not tail.strip():
        return None
    with open(path, "rb") as fh:
        fh.seek(cursor.offset)
        newlines = fh.read().count(b"\n")
    return Problem(
        str(path),
        cursor.line + newlines + 1,
        "the last line is cut off (no newline at the end, and not whole JSON); not imported",
    )


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
