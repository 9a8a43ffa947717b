"""stat: what a store holds — records, days, packs (or format-1 segments), bytes, tokens."""

from __future__ import annotations

import os

from ..index import queries


def stat(store) -> dict:
    index = store.index()
    rows = queries.summary(index)
    seg_files, seg_bytes = _walk_size(store.root / "segments")
    pack_files, pack_bytes = _walk_size(store.root / "packs")
    log_files, log_bytes = _walk_size(store.root / "log")
    s = index.stats()
    return {
        "store": str(store.root),
        "store_id": store.config.store_id,
        "format_version": store.config.format_version,
        "timezone": store.config.timezone,
        "embedder": store.config.embedder,
        "records": s["records"],
        "current_records": s["visible"],
        "vectors": s["vectors"],
        "days": s["days"],
        "first_day": rows["first_day"],
        "last_day": rows["last_day"],
        "sessions": rows["sessions"],
        "by_type": rows["by_type"],
        "by_role": rows["by_role"],
        "packs": pack_files,
        "pack_bytes": pack_bytes,
        "segments": seg_files,
        "segment_bytes": seg_bytes,
        "log_files": log_files,
        "log_bytes": log_bytes,
        "approx_tokens": int(rows["text_bytes"] / 4),
        # record scopes (docs/format.md, "Records"): the private records this user reads, and the
        # private lines of other writers an encrypted store holds (skipped: not this user's key)
        "private_records": rows["private"],
        "others_private_lines": store.sealer.others_private() if store.sealer else 0,
    }


def _walk_size(root) -> tuple[int, int]:
    n = size = 0
    for dirpath, _, files in os.walk(root):
        for f in files:
            n += 1
            size += os.path.getsize(os.path.join(dirpath, f))
    return n, size
