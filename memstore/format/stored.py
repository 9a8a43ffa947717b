"""Where a record's stored vector bytes live, in any store format: format 1 `seg` pairs, format 2 or 3 packs.

Both return the vector segment as committed (header and payload; a format-3 pack's unsealed), so
copying it elsewhere (`ct upgrade`, `ct export contexttape`) keeps every vector bit for bit.
"""

from __future__ import annotations

from pathlib import Path

from . import pack as packfmt
from .segment import VECTOR_TYPES, Header, SegmentError, read_segment, segment_name


def safe_join(root: Path, rel: str) -> Path:
    """`root/rel`, refusing a reference that climbs out of the store."""
    path = (Path(root) / rel).resolve()
    if not path.is_relative_to(Path(root).resolve()):
        raise SegmentError(f"{rel}: points outside the store")
    return path


def seg_vector(root: Path, rec: dict) -> tuple[Header, bytes]:
    """The format-1 vector segment a record's `seg` names; SegmentError when it is not a vector."""
    seg = rec["seg"]
    path = safe_join(root, str(seg["shard"])) / segment_name(int(seg["vec"]))
    header, payload = read_segment(path)
    if header.data_type not in VECTOR_TYPES:
        raise SegmentError(f"{path}: data_type {header.data_type} is not a vector")
    return header, payload


def seg_blob(root: Path, ref: dict) -> tuple[Header, bytes, bytes]:
    """A format-1 `source.blob` reference: (blob header, blob bytes, manifest bytes)."""
    shard = safe_join(root, str(ref["shard"]))
    bh, body = read_segment(shard / segment_name(int(ref["blob"])))
    _, manifest = read_segment(shard / segment_name(int(ref["manifest"])))
    return bh, body, manifest


def day_encoded(root: Path, day: str, records=None) -> dict[str, tuple[str, Header, bytes]]:
    """Formats 2 and 3: {record id: (hash16, plain vector header, payload)} from the day's packs (first
    pack by name wins), opened with the keys of `records` (default: the day log's lines)."""
    from . import log as logfmt

    if records is None:
        path = logfmt.day_path(root, day)
        records = (
            [ln.record for ln in logfmt.read_lines(path) if ln.record] if path.exists() else []
        )
    keys = packfmt.ring(records)
    plain = [(str(r.get("id")), None) for r in records if isinstance(r, dict)]
    out: dict[str, tuple[str, Header, bytes]] = {}
    for p in packfmt.pack_files(packfmt.day_dir(root, day)):
        pk = packfmt.read(p)
        for it in pk.items(keys if pk.sealed else plain):
            out.setdefault(it.record_id, (it.h16, it.header, it.payload))
    return out


def record_vector(
    root: Path, day: str, rec: dict, packs: dict | None = None
) -> tuple[Header, bytes] | None:
    """A record's stored vector segment, in the clear, in any format; `packs` caches `day_encoded`."""
    if isinstance(rec.get("seg"), dict):
        return seg_vector(root, rec)
    if packs is None:
        packs = day_encoded(root, day, [rec])
    got = packs.get(rec["id"])
    if got is None or got[0] != packfmt.hash16(str(rec.get("hash", ""))):
        return None
    return got[1], got[2]
