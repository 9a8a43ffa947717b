"""`ct import contexttape DIR`: an existing ContextTape store's text/vector pairs become records, one commit.

A ContextTape store is a folder of `segment_<n>.is` files (or a folder of such folders, like its
`data/wiki` and `data/chat`). A pair is a text segment whose `next_id` names a vector segment whose
`prev_id` names it back, exactly as ContextTape's own `list_pairs` decides. Each pair becomes one
record dated by the text segment's header time; "user: …" / "assistant: …" texts (ContextTape's chat
turns) are conversation turns, everything else a document. ContextTape stores do not record which
model made their vectors, so the vectors are kept only when the user names that model with
`model=` and it is the store's own model with the same dimension; otherwise the text is re-embedded.
Segments that are not in a pair (orphan texts from an interrupted write, blobs, manifests, coarse
indexes) are not imported, and the result's notes say how many of each were left.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path

from ..errors import FormatError, UsageError
from ..format.segment import (
    DT_TEXT,
    VECTOR_TYPES,
    SegmentError,
    decode_vector,
    read_segment,
    segment_ids,
    segment_name,
)
from ..results import WriteResult

_CHAT_PREFIXES = {"user: ": "user", "assistant: ": "assistant", "system: ": "system"}
_KIND_NAMES = {
    1: "vector",
    2: "vector",
    10: "image blob",
    11: "audio blob",
    12: "blob",
    13: "manifest",
    100: "coarse index",
}


def tape_dirs(path: Path) -> list[Path]:
    """The ContextTape store folders at or under `path` (folders holding segment_<n>.is files)."""
    if segment_ids(path):
        return [path]
    found = []
    for dirpath, dirnames, _ in os.walk(path):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        if segment_ids(Path(dirpath)):
            found.append(Path(dirpath))
    return found


def read_pairs(folder: Path) -> tuple[list[tuple[int, int, object, object, bytes, bytes]], Counter]:
    """[(text id, vector id, text header, vector header, text payload, vector payload)] and unpaired kinds.

    Any unreadable segment (truncated, impossible header) is a FormatError naming it: nothing is
    imported from a damaged store rather than a silent part of it.
    """
    segs = {}
    for sid in segment_ids(folder):
        p = folder / segment_name(sid)
        try:
            segs[sid] = read_segment(p)
        except (OSError, SegmentError) as exc:
            raise FormatError(
                p,
                f"not a readable ContextTape segment ({exc})",
                hint="Nothing was imported. Remove or repair that file first.",
            ) from None
    pairs, used = [], set()
    for sid, (h, body) in segs.items():
        if h.data_type != DT_TEXT or h.next_id < 0 or h.next_id not in segs:
            continue
        vh, vbody = segs[h.next_id]
        if vh.data_type in VECTOR_TYPES and vh.prev_id == sid:
            pairs.append((sid, h.next_id, h, vh, body, vbody))
            used.update((sid, h.next_id))
    left = Counter(
        "orphan text"
        if h.data_type == DT_TEXT
        else _KIND_NAMES.get(h.data_type, f"type {h.data_type}")
        for sid, (h, _) in segs.items()
        if sid not in used
    )
    return pairs, left


def _record_fields(text: str) -> dict:
    for prefix, role in _CHAT_PREFIXES.items():
        if text.startswith(prefix):
            return {"role": role, "type": "text", "actor": role}
    return {"role": "system", "type": "doc", "actor": "document"}


def import_contexttape(
    store,
    path,
    *,
    model: str | None = None,
    progress=None,
    allow_secrets: bool = False,
    secrets: str | None = None,
    **_opts,
) -> WriteResult:
    """Import every pair under `path` (see the module docstring); returns the write's result."""
    import numpy as np

    from ..format.record import RecordError
    from .importers import printable, unix_time

    root = Path(path).expanduser().resolve()
    if not root.is_dir():
        raise UsageError(
            f"{root}: not a folder (a ContextTape store is a folder of segment_<n>.is files)"
        )
    folders = tape_dirs(root)
    if not folders:
        raise UsageError(f"{root}: no ContextTape segments (segment_<n>.is) found")
    dim = int(store.config.embedder["dim"])
    keep = model is not None and model == store.config.embedder["model"]
    notes: list[str] = []
    if model is not None and not keep:
        notes.append(
            f"vectors were made by {model}, the store uses {store.config.embedder['model']}: re-embedding"
        )
    records, given, origins = [], {}, {}
    n_kept = 0
    wrong_dim = 0
    for folder in folders:
        pairs, left = read_pairs(folder)
        rel = printable(folder.relative_to(root).as_posix() if folder != root else root.name)
        for kind, n in sorted(left.items()):
            notes.append(f"{folder}: {n} {kind} segment(s) not in a text/vector pair, not imported")
        for tid, vid, th, vh, tbody, vbody in pairs:
            tpath = folder / segment_name(tid)
            try:
                text = tbody.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FormatError(
                    tpath, f"text is not UTF-8 (byte {exc.start})", hint="Nothing was imported."
                ) from None
            when = th.unix_time if th.unix_time > 0 else int(tpath.stat().st_mtime)
            try:
                ts = unix_time(when, "header time")
            except ValueError as exc:
                raise FormatError(tpath, str(exc), hint="Nothing was imported.") from None
            raw = {
                "ts": ts,
                "text": text,
                "session": rel,
                **_record_fields(text),
                # where the pair came from, portably: the imported folder's name and the path below it
                "contexttape": {
                    "dir": printable(root.name)
                    if folder == root
                    else f"{printable(root.name)}/{rel}",
                    "text": tid,
                    "vec": vid,
                },
            }
            try:
                rec = store.normalize(raw, derive_id=True)
            except RecordError as exc:
                raise FormatError(tpath, str(exc), hint="Nothing was imported.") from None
            origins[id(rec)] = str(tpath)
            records.append(rec)
            if keep:
                if vh.dim != dim:
                    wrong_dim += 1
                    continue
                vec = decode_vector(vh, vbody)
                if not np.isfinite(vec).all():
                    raise FormatError(
                        folder / segment_name(vid),
                        f"vector (of text segment {tid}) holds NaN or Infinity",
                        hint="Nothing was imported.",
                    )
                norm = float(np.linalg.norm(vec))
                given[id(rec)] = (
                    vec / norm if norm > 0 else vec
                )  # int8 round trips are not unit length
                n_kept += 1
    if wrong_dim:
        notes.append(
            f"{wrong_dim} vectors have another dimension than the store's {dim}: re-embedded"
        )

    def message(added) -> str:
        kept = sum(1 for r in added if id(r) in given)
        how = f"{kept} vectors kept, {len(added) - kept} re-embedded" if kept else "re-embedded"
        return f"Import {len(added)} contexttape records from {printable(root.name)} ({how})"

    res = store.write(
        records,
        message,
        progress=progress,
        given_vectors=given,
        secrets=secrets or ("allow" if allow_secrets else "refuse"),
        origins=origins,
    )
    res.notes = notes + res.notes
    return res
