"""`ct export contexttape DIR`: the store's searchable records as a classic ContextTape store.

ContextTape's `ISStore` is one folder of `segment_<n>.is` files in which a text segment's
`next_id` names its vector segment and that vector's `prev_id` names the text back. The export
writes, for every record that `ct search --mode vector` can return (indexed, with a vector, not
superseded), in time order, the text as segment 2i and the record's committed vector segment as
2i+1 — its payload, type, dim and int8 scale copied byte for byte, so ContextTape's cosine scan
ranks exactly the vectors memstore ranks. The header's reserved bytes hold the record's Unix time
as everywhere else. `memstore-export.json` beside the segments maps each text segment to its record
id (ContextTape reads only `segment_*.is`, so the file is invisible to it).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..errors import UsageError
from ..format.segment import DT_TEXT, MAX_PAYLOAD, Header, segment_name, write_file_atomic
from ..format.stored import day_encoded, record_vector
from ..format.timeutil import from_iso
from ..index.queries import current_vector_rows

MAP_FILE = "memstore-export.json"


def export_contexttape(store, dest, progress=None) -> dict:
    """Write the ContextTape store into `dest` (new or empty); returns {"dir", "pairs", "skipped"}."""
    dest = Path(dest).expanduser()
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise UsageError(f"{dest}: exists and is not an empty folder", "Export into a new folder.")
    index = store.index()
    rows = current_vector_rows(index)
    dest.mkdir(parents=True, exist_ok=True)
    packs: dict[str, dict] = {}
    mapping, skipped = [], 0
    for rowid, day in rows:
        rec = index.record_at(rowid)
        if day not in packs and not isinstance(rec.get("seg"), dict):
            packs = {day: day_encoded(store.root, day)}  # rows are in time order: one day at a time
        vec = record_vector(store.root, day, rec, packs.get(day))
        body = rec["text"].encode("utf-8")
        if vec is None or len(body) > MAX_PAYLOAD:
            skipped += 1
            continue
        vheader, payload = vec
        tid = 2 * len(mapping)
        unix = int(from_iso(rec["ts"]).timestamp())
        write_file_atomic(
            dest / segment_name(tid),
            Header(tid + 1, -1, len(body), DT_TEXT, 0, 1.0, unix).pack() + body,
            fsync=False,
        )
        write_file_atomic(
            dest / segment_name(tid + 1),
            Header(
                -1, tid, len(payload), vheader.data_type, vheader.dim, vheader.scale, unix
            ).pack()
            + payload,
            fsync=False,
        )
        mapping.append([tid, rec["id"]])
        if progress:
            progress(1)
    info = {"store_id": store.config.store_id, "embedder": store.config.embedder, "pairs": mapping}
    (dest / MAP_FILE).write_text(json.dumps(info, ensure_ascii=False) + "\n", encoding="utf-8")
    return {"dir": str(dest), "pairs": len(mapping), "skipped": skipped}
