"""ingest-path: files and folders become document chunks, idempotently, in one commit.

A file is identified by its resolved path. An unchanged file (same sha256 as its current chunks)
adds nothing. A changed file adds the chunks whose text is new and appends one `meta` record that
supersedes the chunks that no longer exist; chunks that did not change stay as they are.
"""

from __future__ import annotations

from pathlib import Path

from ..errors import FormatError, SecretsFound, UsageError
from ..format.timeutil import now_utc
from ..store import WriteResult


def ingest_path(store, path, *, exts=None, max_bytes: int = 10 * 1024 * 1024, max_pdf_pages=None,
                follow_symlinks: bool = False, quantize: bool = False, allow_secrets: bool = False,
                progress=None, verbose: int = 0) -> WriteResult:
    from . import secrets
    from .chunk import chunk, embedding_input
    from .walk import FileItem, walk

    root = Path(path).expanduser()
    if not root.exists():
        raise UsageError(f"{root}: no such file or folder")
    index = store.index()
    emb = store.embedder
    max_tokens = int(store.config.setting("chunk_tokens"))
    overlap = int(store.config.setting("chunk_overlap"))
    items, notes, found = [], [], []
    for item in walk(root, exts=exts, max_bytes=max_bytes, follow_symlinks=follow_symlinks,
                     exclude=[store.root], allow_secrets=allow_secrets, max_pdf_pages=max_pdf_pages):
        if not isinstance(item, FileItem):
            notes.append(f"skipped {item.path}: {item.reason}")
            continue
        items.append(item)
    if not items and root.is_file():
        reason = notes[0].split(": ", 1)[1] if notes else "nothing to read"
        raise FormatError(root, reason, hint="Nothing was written.")

    now = now_utc()
    records, inputs = [], []
    files_changed = 0
    for item in items:
        key = str(Path(item.path).resolve())
        current = index.conn.execute(
            "SELECT id, fsha, rowid FROM records WHERE source = ? AND hidden = 0", (key,)).fetchall()
        if any(fsha == item.sha256 for _, fsha, _ in current):
            continue
        try:
            text = item.read_text()
        except (OSError, ValueError) as exc:
            notes.append(f"skipped {item.path}: {exc}")
            continue
        if not text.strip():
            notes.append(f"skipped {item.path}: no text")
            continue
        if not allow_secrets:
            found += [f"{item.path}:{f.line}: {f.kind} ({f.excerpt_redacted})" for f in secrets.scan(text)]
        chunks = chunk(text, item.kind, emb.count_tokens, max_tokens, overlap)
        current_hashes = {}
        for rid, _, rowid in current:
            rec = index.record_at(rowid)
            current_hashes[rec.get("hash")] = rid
        new_hashes = set()
        file_records = []
        for i, ch in enumerate(chunks):
            rec = store.normalize({
                "ts": now, "actor": "document", "role": "system", "type": "doc", "text": ch.text,
                "session": item.rel,
                "source": _source(key, item, i, len(chunks), ch),
            }, derive_id=False)
            rec["id"] = f"doc:{_hash(key)[:8]}:{item.sha256[:12]}:{i}"
            h = _hash(ch.text)
            new_hashes.add(h)
            if h in current_hashes:
                continue
            file_records.append(rec)
            inputs.append(embedding_input(chunks, i, overlap, emb.count_tokens))
        gone = sorted(rid for h, rid in current_hashes.items() if h not in new_hashes)
        if gone:
            sup = store.normalize({
                "ts": now, "actor": "memstore", "role": "system", "type": "meta",
                "text": f"{item.rel} changed: {len(gone)} chunk(s) superseded",
                "session": item.rel, "supersedes": gone,
                "source": {"path": key, "file_sha256": item.sha256},
            })
            file_records.append(sup)
            inputs.append(sup["text"])
        if current:
            files_changed += 1
        records += file_records
        if verbose:
            notes.append(f"{item.rel}: {len(chunks)} chunks, {len(file_records)} new records")
    if found:
        raise SecretsFound("Refusing to ingest what looks like credentials:\n  " + "\n  ".join(found[:50]),
                           "Nothing was written. Remove them, or pass --allow-secrets.")
    n_files = len({r["source"]["path"] for r in records if r["type"] == "doc"})
    n_chunks = sum(1 for r in records if r["type"] == "doc")
    msg = f"Ingest {n_files} files ({n_chunks} chunks) from {_display(root)}"
    if files_changed:
        msg += f"; {files_changed} changed"
    if quantize:
        store.config.settings["vector_dtype"] = "int8"
    res = store.write(records, msg, embed_inputs=inputs, progress=progress)
    res.notes = notes + res.notes
    return res


def _hash(text: str) -> str:
    from ..format.record import text_hash

    return text_hash(text)


def _source(key: str, item, i: int, n: int, ch) -> dict:
    src = {"path": key, "rel": item.rel, "chunk": i, "chunks": n, "file_sha256": item.sha256,
           "start": ch.start, "end": ch.end}
    if getattr(ch, "heading", None):
        src["heading"] = ch.heading
    if getattr(ch, "pages", None):
        src["pages"] = list(ch.pages)
    return src


def _display(root: Path) -> str:
    s = str(root)
    return s if not root.is_dir() or s.endswith("/") else s + "/"
