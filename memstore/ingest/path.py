"""ingest-path: files and folders become document chunks, idempotently, in one commit.

A file is known by its portable location `<base>/<rel>` (memstore/ingest/location.py: never an
absolute path). An unchanged file (same sha256 as its current chunks) adds nothing. A changed file
adds the chunks whose text is new and appends one `meta` record that supersedes the chunks that no
longer exist; chunks that did not change stay as they are. A file at a new location whose bytes and
relative path match a live document is that document moved: one `meta` record notes the move.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError, SecretsFound, UsageError
from ..format.timeutil import now_utc
from ..secrets import policy as secret_policy
from ..results import WriteResult
from .importers import printable
from .location import base_label, live_rows, location, moved_from, still_there


def ingest_path(
    store,
    path,
    *,
    exts=None,
    max_bytes: int = 10 * 1024 * 1024,
    max_pdf_pages=None,
    follow_symlinks: bool = False,
    quantize: bool = False,
    allow_secrets: bool = False,
    progress=None,
    verbose: int = 0,
    secrets: str | None = None,
    exclude=(),
    default_excludes: bool = True,
) -> WriteResult:
    from .walk import Excluded, FileItem, walk

    how = secrets or ("allow" if allow_secrets else "refuse")
    root = Path(path).expanduser()
    if not root.exists():
        raise UsageError(f"{root}: no such file or folder")
    items, notes, left_out = [], [], []
    for item in walk(
        root,
        exts=exts,
        max_bytes=max_bytes,
        follow_symlinks=follow_symlinks,
        exclude=[store.root],
        allow_secrets=how == "allow",
        max_pdf_pages=max_pdf_pages,
        patterns=exclude,
        default_excludes=default_excludes,
    ):
        if isinstance(item, Excluded):
            left_out.append(item)
            continue
        if not isinstance(item, FileItem):
            notes.append(f"skipped {item.path}: {item.reason}")
            continue
        items.append(item)
    if not items and root.is_file():
        reason = notes[0].split(": ", 1)[1] if notes else "nothing to read"
        raise FormatError(printable(root), reason, hint="Nothing was written.")

    # Refusing names file and line here; skipping or redacting is per chunk, in the store's write.
    base = base_label(store, root)
    plan = plan_files(
        store, items, now_utc(), allow_secrets=how != "refuse", verbose=verbose, base=base
    )
    notes += plan.notes
    if left_out:
        notes.append(excluded_note(left_out))
    records, inputs, found, files_changed = (
        plan.records,
        plan.inputs,
        plan.found,
        plan.files_changed,
    )
    if found:
        raise SecretsFound(
            "Refusing to ingest what looks like credentials:\n  " + "\n  ".join(found[:50]),
            secret_policy.HINT,
        )
    n_files = len({r["source"]["path"] for r in records if r["type"] == "doc"})
    n_chunks = sum(1 for r in records if r["type"] == "doc")
    msg = f"Ingest {n_files} files ({n_chunks} chunks) from {display(base, root)}"
    if files_changed:
        msg += f"; {files_changed} changed"
    if plan.moved:
        msg += f"; {plan.moved} moved"
    if left_out:
        msg += f"; {len(left_out)} excluded"
    if quantize:
        store.config.settings["vector_dtype"] = "int8"
    res = store.write(records, msg, embed_inputs=inputs, progress=progress, secrets=how)
    res.notes = notes + res.notes
    return res


@dataclass
class Plan:
    """What ingesting some files would write: records with their embedding inputs, and what was found."""

    records: list[dict] = field(default_factory=list)
    inputs: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    found: list[str] = field(default_factory=list)  # secrets, "path:line: kind (redacted)"
    files_changed: int = 0
    moved: int = 0  # files found at a new location, unchanged
    copies: int = 0  # files whose stored twin still lies where it was ingested: nothing added
    by_file: dict = field(default_factory=dict)  # FileItem.path -> its new records


def plan_files(
    store, items, now, allow_secrets: bool = False, verbose: int = 0, base: str = ""
) -> Plan:
    """Chunk records for text FileItems (shared by ingest-path and ingest-any): only what is new.

    An unchanged file adds nothing; a moved one adds a `meta` record naming its old location; a
    changed one adds its new chunks plus a `meta` record that supersedes the chunks that are gone.
    `base` is the ingested folder's committed name (location.base_label).
    """
    from ..secrets import detect as secrets
    from .chunk import chunk, embedding_input
    from ..format.record import doc_kind

    index = store.index()
    emb = store.embedder
    max_tokens = int(store.config.setting("chunk_tokens"))
    overlap = int(store.config.setting("chunk_overlap"))
    plan = Plan()
    for item in items:
        # An item may name its own key (build-wiki: the page URL); files are keyed by portable location.
        key = getattr(item, "key", None) or location(base, item.rel)
        current = live_rows(index, key)
        if any(fsha == item.sha256 for _, fsha, _ in current):
            continue
        old = None if current else moved_from(index, item.sha256, item.rel, key)
        if old is not None and still_there(store, old, item.rel, item.sha256):
            plan.notes.append(copy_note(item.path, old))
            plan.copies += 1
            continue
        if old is not None:
            rec = moving_record(store, now, item.rel, key, old, item.sha256)
            plan.records.append(rec)
            plan.inputs.append(rec["text"])
            plan.by_file[item.path] = [rec]
            plan.moved += 1
            continue
        try:
            text = item.read_text()
        except (OSError, ValueError) as exc:
            plan.notes.append(f"skipped {item.path}: {exc}")
            continue
        if not text.strip():
            plan.notes.append(f"skipped {item.path}: no text")
            continue
        if not allow_secrets:
            found = secrets.scan(text)
            if found:  # the file's name may hold a secret of its own
                where = secret_policy.mask_message(str(item.path))
                plan.found += [f"{where}:{f.line}: {f.kind} ({f.excerpt_redacted})" for f in found]
        chunks = chunk(text, item.kind, emb.count_tokens, max_tokens, overlap)
        # Judged on the stored location, as search judges it (memstore/retrieve/search.py).
        kind = None if getattr(item, "key", None) else doc_kind(key)
        current_hashes = {}
        for rid, _, rowid in current:
            rec = index.record_at(rowid)
            current_hashes[rec.get("hash")] = rid
        new_hashes = set()
        file_records = []
        for i, ch in enumerate(chunks):
            rec = store.normalize(
                {
                    "ts": now,
                    "actor": "document",
                    "role": "system",
                    "type": "doc",
                    "text": ch.text,
                    "session": item.rel,
                    "source": _source(key, item, i, len(chunks), ch, kind),
                },
                derive_id=False,
            )
            rec["id"] = f"doc:{_hash(key)[:8]}:{item.sha256[:12]}:{i}"
            h = _hash(ch.text)
            new_hashes.add(h)
            if h in current_hashes:
                continue
            file_records.append(rec)
            plan.inputs.append(embedding_input(chunks, i, overlap, emb.count_tokens))
        gone = sorted(rid for h, rid in current_hashes.items() if h not in new_hashes)
        if gone:
            sup = superseding_record(store, now, item.rel, key, item.sha256, gone)
            file_records.append(sup)
            plan.inputs.append(sup["text"])
        if current:
            plan.files_changed += 1
        plan.records += file_records
        plan.by_file[item.path] = file_records
        if verbose:
            plan.notes.append(f"{item.rel}: {len(chunks)} chunks, {len(file_records)} new records")
    return plan


def excluded_note(left_out: list) -> str:
    """One line naming what exclude patterns left out: how many files and folders, and which."""
    folders = sum(1 for e in left_out if e.rel.endswith("/"))
    files = len(left_out) - folders
    counts = " and ".join(
        f"{n} {word}{'' if n == 1 else 's'}"
        for n, word in ((files, "file"), (folders, "folder"))
        if n
    )
    shown = ", ".join(
        e.rel if e.pattern == e.rel else f"{e.rel} ({e.pattern})" for e in left_out[:12]
    )
    more = f", and {len(left_out) - 12} more" if len(left_out) > 12 else ""
    return (
        f"excluded {counts}: {shown}{more} (--no-default-excludes, or --exclude '!PATTERN', "
        "takes a default back)"
    )


def copy_note(path, old: str) -> str:
    return (
        f"skipped {printable(path)}: a copy of {old}, which is still there (a copy adds nothing; "
        "the stored document keeps its location)"
    )


def superseding_record(store, now, rel: str, key: str, sha256: str, gone: list[str]) -> dict:
    """The `meta` record that retires a changed file's old records (they leave search, never the log)."""
    return store.normalize(
        {
            "ts": now,
            "actor": "memstore",
            "role": "system",
            "type": "meta",
            "text": f"{rel} changed: {len(gone)} chunk(s) superseded",
            "session": rel,
            "supersedes": gone,
            "source": {"path": key, "file_sha256": sha256},
        }
    )


def moving_record(store, now, rel: str, key: str, old: str, sha256: str) -> dict:
    """The `meta` record that notes a document found at a new location with the same bytes (no new chunks)."""
    return store.normalize(
        {
            "ts": now,
            "actor": "memstore",
            "role": "system",
            "type": "meta",
            "text": f"{old} moved to {key}",
            "session": rel,
            "source": {"path": key, "rel": rel, "moved_from": old, "file_sha256": sha256},
        }
    )


def _hash(text: str) -> str:
    from ..format.record import text_hash

    return text_hash(text)


def _source(key: str, item, i: int, n: int, ch, kind: str | None = None) -> dict:
    src = {
        "path": key,
        "rel": item.rel,
        "chunk": i,
        "chunks": n,
        "file_sha256": item.sha256,
        "start": ch.start,
        "end": ch.end,
    }
    if getattr(ch, "heading", None):
        src["heading"] = ch.heading
    if kind:
        src["doc_kind"] = kind
    if getattr(ch, "pages", None):
        src["pages"] = list(ch.pages)
    return src


def display(base: str, root: Path) -> str:
    """The ingested file or folder as a commit message names it: its portable name, never an absolute path."""
    if Path(root).is_dir():
        return (base or ".") + "/"
    return location(base, Path(root).name)
