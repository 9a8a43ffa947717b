"""ingest-any: every file becomes memory — text as chunks, everything else kept whole as a blob — in one commit.

Text and code go through ingest-path's planner (same chunks, same ids, same supersession). A PDF
with text becomes chunks too, and its original bytes are kept as a blob that the chunks point at.
Images, audio, video, PDFs without text and any other file become a blob segment (ContextTape
data type 10 image, 11 audio, 12 other) with a JSON manifest segment (type 13) linked to it, plus
one searchable `doc` record that describes the file in words and names the original by content:
`source.blob = {"sha256", "bytes"}`. The pair goes into the pack that the same write makes for the
record's day, where it is found by record id (docs/format.md). Nothing is truncated: a file over
the size limit is skipped with a message. Blobs are queued inside the write transaction by
`Store.write`'s `before_write` hook, so a crash rolls them back like any other uncommitted pack.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import FormatError, SecretsFound, UsageError
from ..format import layout
from ..format import safejson
from ..format.segment import DT_AUDIO, DT_BLOB, DT_IMAGE, MAX_PAYLOAD
from ..format.timeutil import from_iso, now_utc, to_iso
from ..results import WriteResult
from .importers import printable

DEFAULT_MAX_BYTES = 100 * 1024 * 1024
DATA_TYPES = {"image": DT_IMAGE, "audio": DT_AUDIO}  # everything else is DT_BLOB


@dataclass
class _BlobJob:
    """One original file to store as a blob, and the records that will point at it."""

    path: Path
    rel: str
    sha256: str
    size: int
    info: dict
    records: list[dict] = field(default_factory=list)


def ingest_any(
    store,
    path,
    *,
    max_bytes: int = DEFAULT_MAX_BYTES,
    follow_symlinks: bool = False,
    allow_secrets: bool = False,
    progress=None,
    verbose: int = 0,
    secrets: str | None = None,
    exclude=(),
    default_excludes: bool = True,
) -> WriteResult:
    """Ingest a file or folder of any files (see the module docstring); one commit, none if nothing is new."""
    from .location import base_label
    from .path import display, excluded_note, plan_files
    from .walk import BlobItem, Excluded, FileItem, walk

    from ..secrets import policy as secret_policy

    how = secrets or ("allow" if allow_secrets else "refuse")
    root = Path(path).expanduser()
    if not root.exists():
        raise UsageError(f"{root}: no such file or folder")
    if max_bytes is not None and max_bytes > MAX_PAYLOAD:
        raise UsageError(
            f"--max-bytes {max_bytes} is above what one segment holds ({MAX_PAYLOAD} bytes)"
        )
    texts, blobs, notes, left_out = [], [], [], []
    for item in walk(
        root,
        max_bytes=max_bytes,
        follow_symlinks=follow_symlinks,
        exclude=[store.root],
        allow_secrets=how == "allow",
        blobs=True,
        patterns=exclude,
        default_excludes=default_excludes,
    ):
        if isinstance(item, Excluded):
            left_out.append(item)
        elif isinstance(item, FileItem):
            texts.append(item)
        elif isinstance(item, BlobItem):
            blobs.append(item)
        else:
            notes.append(f"skipped {item.path}: {item.reason}")
    if not texts and not blobs and root.is_file():
        reason = notes[0].split(": ", 1)[1] if notes else "nothing to read"
        raise FormatError(printable(root), reason, hint="Nothing was written.")

    now = now_utc()
    base = base_label(store, root)
    plan = plan_files(store, texts, now, allow_secrets=how != "refuse", verbose=verbose, base=base)
    if plan.found:
        raise SecretsFound(
            "Refusing to ingest what looks like credentials:\n  " + "\n  ".join(plan.found[:50]),
            secret_policy.HINT,
        )
    records, inputs, jobs = list(plan.records), list(plan.inputs), []
    for item in texts:  # a PDF's original is kept beside its text
        new = [r for r in plan.by_file.get(item.path, []) if r["type"] == "doc"]
        if item.kind == "pdf" and new:
            jobs.append(
                _BlobJob(
                    Path(item.path),
                    item.rel,
                    item.sha256,
                    item.size,
                    {"mime": "application/pdf", "kind": "pdf", "pages": item.pages},
                    new,
                )
            )
    moved = _plan_blobs(store, blobs, now, records, inputs, jobs, notes, base) + plan.moved

    def message(added) -> str:
        docs = [r for r in added if r["type"] == "doc"]
        n_blobs = sum(1 for r in docs if r["id"].startswith("blob:"))
        n_chunks = len(docs) - n_blobs
        n_files = len({r["source"]["path"] for r in docs})
        msg = f"Ingest {n_files} files ({n_chunks} chunks, {n_blobs} blobs) from {display(base, root)}"
        msg += f"; {moved} moved" if moved else ""
        return msg + (f"; {len(left_out)} excluded" if left_out else "")

    res = store.write(
        records,
        message,
        embed_inputs=inputs,
        progress=progress,
        before_write=lambda st, added: _write_blobs(st, jobs, added),
        secrets=how,
    )
    res.notes = notes + plan.notes + ([excluded_note(left_out)] if left_out else []) + res.notes
    return res


def _plan_blobs(store, blobs, now, records, inputs, jobs, notes, base: str = "") -> int:
    """A describing record (and a blob job) for each new or changed non-text file; returns how many moved."""
    from .location import live_rows, location, moved_from, still_there
    from .media import describe_media, description
    from .path import _hash, copy_note, moving_record, superseding_record

    index = store.index()
    moved = 0
    for item in blobs:
        key = location(base, item.rel)
        current = [(rid, fsha) for rid, fsha, _ in live_rows(index, key)]
        if any(fsha == item.sha256 for _, fsha in current):
            continue
        old = None if current else moved_from(index, item.sha256, item.rel, key)
        if old is not None and still_there(store, old, item.rel, item.sha256):
            notes.append(copy_note(item.path, old))
            continue
        if old is not None:
            rec = moving_record(store, now, item.rel, key, old, item.sha256)
            records.append(rec)
            inputs.append(rec["text"])
            moved += 1
            continue
        try:
            data = Path(item.path).read_bytes()
        except OSError as exc:
            notes.append(f"skipped {item.path}: cannot read: {exc.strerror or exc}")
            continue
        info = describe_media(Path(item.path).name, data)
        del data
        text = description(item.rel, item.size, info, item.reason)
        rec = store.normalize(
            {
                "ts": now,
                "actor": "document",
                "role": "system",
                "type": "doc",
                "text": text,
                "session": item.rel,
                "source": {
                    "path": key,
                    "rel": item.rel,
                    "chunk": 0,
                    "chunks": 1,
                    "file_sha256": item.sha256,
                    "size": item.size,
                    "media": info,
                },
            },
            derive_id=False,
        )
        rec["id"] = f"blob:{_hash(key)[:8]}:{item.sha256[:12]}"
        records.append(rec)
        inputs.append(text)
        jobs.append(_BlobJob(Path(item.path), item.rel, item.sha256, item.size, info, [rec]))
        if current:
            sup = superseding_record(
                store, now, item.rel, key, item.sha256, sorted(rid for rid, _ in current)
            )
            records.append(sup)
            inputs.append(sup["text"])
    return moved


def _write_blobs(store, jobs: list[_BlobJob], added: list[dict]) -> list[str]:
    """In the write transaction: queue each needed original for its records' pack and point them at it."""
    from ..format.timeutil import local_day

    added_ids = {id(r) for r in added}
    for job in jobs:
        recs = [r for r in job.records if id(r) in added_ids]
        if not recs:
            continue  # already in the store (same id): its blob was written then
        data = job.path.read_bytes()
        if hashlib.sha256(data).hexdigest() != job.sha256:
            raise FormatError(
                job.path,
                "changed while it was being ingested",
                hint="Run the ingest again; nothing from it was committed.",
            )
        when = from_iso(recs[0]["ts"])
        # ContextTape's own manifest keys (type, filename) as well, so its readers understand it
        manifest = {
            "type": job.info.get("kind"),
            "filename": job.path.name,
            "path": job.rel,
            "size": len(data),
            "sha256": job.sha256,
            "ingested": to_iso(when),
            "records": [r["id"] for r in recs],
            **job.info,
        }
        dtype = DATA_TYPES.get(job.info.get("kind"), DT_BLOB)
        store._tx.add_blob(
            recs[0]["id"], local_day(when, store.tz), data, dtype, manifest, int(when.timestamp())
        )
        for r in recs:
            r["source"]["blob"] = {"sha256": job.sha256, "bytes": len(data)}
    return []


def read_blob(store, rec: dict) -> tuple[bytes, dict]:
    """The original bytes and the manifest of a record's `source.blob` (format 2: from its day's packs)."""
    ref = rec["source"]["blob"]
    if "shard" in ref:  # format 1: the record names its blob and manifest segments
        from ..format.segment import read_segment, segment_name

        shard = layout.safe_path(store.root, str(ref["shard"]))
        _, payload = read_segment(shard / segment_name(int(ref["blob"])))
        _, manifest = read_segment(shard / segment_name(int(ref["manifest"])))
        return payload, safejson.loads(manifest)
    from ..upkeep.fsck import find_day_blob
    from ..format import log as logfmt  # noqa: F811
    from ..format import pack as packfmt
    from ..format.timeutil import local_day

    day = local_day(from_iso(rec["ts"]), store.tz)
    path = logfmt.day_path(store.root, day)
    lines = [ln.record for ln in logfmt.read_lines(path) if ln.record] if path.exists() else [rec]
    keys = packfmt.ring(
        lines
    )  # an original is sealed under the key of the record it was stored with
    blobs = []
    for p in packfmt.pack_files(packfmt.day_dir(store.root, day)):
        pk = packfmt.read(p)
        for rid, _key, _bh, body, mbody in pk.blobs(
            keys if pk.sealed else [(str(r.get("id")), None) for r in lines]
        ):
            try:
                manifest = safejson.loads(mbody)
            except ValueError:  # damaged: fsck names it
                continue
            if isinstance(manifest, dict):
                blobs.append((rid, p.name, body, manifest))
    found = find_day_blob(blobs, str(rec["id"]), ref.get("sha256"))
    if found is None:
        raise FormatError(
            packfmt.day_dir(store.root, day), f"no pack holds the original of record {rec['id']}"
        )
    return found[1], found[2]
