"""fsck: verify every invariant of docs/format.md and report each damaged file."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .format import log as logfmt
from .format import record as recordfmt
from .format.segment import (DT_AUDIO, DT_BLOB, DT_IMAGE, DT_JSON, DT_TEXT, SegmentError, VECTOR_TYPES, read_segment,
                             segment_ids, segment_name)


@dataclass
class Report:
    damage: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    records: int = 0
    segments: int = 0

    @property
    def ok(self) -> bool:
        return not self.damage

    def to_json(self) -> dict:
        return {"ok": self.ok, "records": self.records, "segments": self.segments,
                "damage": self.damage, "warnings": self.warnings}


def fsck(store) -> Report:
    rep = Report()
    dim = int(store.config.embedder["dim"])
    referenced: set[Path] = set()
    ids: dict[str, str] = {}
    for day, path in logfmt.list_days(store.root).items():
        try:
            lines = list(logfmt.read_lines(path))
        except OSError as exc:
            rep.damage.append(f"{path}: cannot read ({exc})")
            continue
        for ln in lines:
            where = f"{store.rel(path)}:{ln.line_no}"
            if ln.record is None:
                rep.damage.append(f"{where}: {ln.error}")
                continue
            rec = ln.record
            rep.records += 1
            _check_record(store, rec, where, day, dim, rep, referenced)
            if rec["id"] in ids and ids[rec["id"]] != where:
                rep.warnings.append(f"{where}: id {rec['id']} also at {ids[rec['id']]} (the earlier copy is used)")
            ids.setdefault(rec["id"], where)
    _check_orphans(store, rep, referenced)
    _check_tree(store, rep)
    from .repair import crashed_journal

    journal = crashed_journal(store)
    if journal is not None:
        rep.warnings.append(f".memstore/write-journal.json: a write (pid {journal.get('pid')}) did not finish; "
                            '"ct fsck --repair" rolls back what it left')
    return rep


def _check_record(store, rec, where, day, dim, rep, referenced) -> None:
    if rec.get("role") not in recordfmt.ROLES:
        rep.damage.append(f"{where}: role {rec.get('role')!r} is not one of {recordfmt.ROLES}")
    if rec.get("type") not in recordfmt.TYPES:
        rep.damage.append(f"{where}: type {rec.get('type')!r} is not one of {recordfmt.TYPES}")
    from .format.timeutil import from_iso, local_day

    if local_day(from_iso(rec["ts"]), store.tz) != day:
        rep.damage.append(f"{where}: ts {rec['ts']} is not on day {day} in {store.config.timezone}")
    if rec.get("hash") and rec["hash"] != recordfmt.text_hash(rec["text"]):
        rep.damage.append(f"{where}: text does not match its hash")
    src = rec.get("source")
    if isinstance(src, dict) and "blob" in src:  # ingest-any: the original file, kept whole
        _check_blob(store, rec, src["blob"], where, rep, referenced)
    seg = rec.get("seg")
    if not isinstance(seg, dict):
        rep.warnings.append(f"{where}: record has no segment reference (not vector-searchable)")
        return
    from .index.build import safe_path

    try:  # a reference that climbs out of the store (e.g. "../../etc") is damage, never a file to open
        shard = safe_path(store.root, str(seg.get("shard", "")))
        tpath, vpath = shard / segment_name(int(seg.get("text", -1))), shard / segment_name(int(seg.get("vec", -1)))
    except (ValueError, TypeError) as exc:
        rep.damage.append(f"{where}: bad segment reference ({exc})")
        return
    referenced.update((tpath, vpath))
    try:
        th, tbody = read_segment(tpath)
    except (OSError, SegmentError) as exc:
        rep.damage.append(f"{store.rel(tpath) if tpath.exists() else tpath}: {exc} (text of {where})")
        return
    try:
        vh, vbody = read_segment(vpath)
    except (OSError, SegmentError) as exc:
        rep.damage.append(f"{vpath}: {exc} (vector of {where})")
        return
    if th.data_type != DT_TEXT or th.next_id != seg["vec"]:
        rep.damage.append(f"{tpath}: text segment does not link to vector {seg['vec']}")
    if vh.data_type not in VECTOR_TYPES or vh.prev_id != seg["text"]:
        rep.damage.append(f"{vpath}: vector segment does not link back to text {seg['text']}")
    if vh.dim != dim:
        rep.damage.append(f"{vpath}: vector has {vh.dim} dimensions, the store uses {dim}")
    if tbody != rec["text"].encode("utf-8"):
        rep.damage.append(f"{tpath}: text differs from the log record at {where}")


def _check_tree(store, rep) -> None:
    """Every tree op line must parse (named file:line), and a format-1 tree.json as a topic tree."""
    from .errors import FormatError
    from .format import tree as treefmt
    from .format import treelog

    if treelog.exists(store.root):
        rep.damage += treelog.read_ops(store.root)[1]
        return
    if not treefmt.path_of(store.root).exists():
        return
    try:
        treefmt.read(store.root)
    except FormatError as exc:
        rep.damage.append(str(exc).splitlines()[0])


def _check_orphans(store, rep, referenced) -> None:
    seg_root = store.root / "segments"
    if not seg_root.exists():
        return
    for dirpath, dirnames, filenames in os.walk(seg_root):
        folder = Path(dirpath)
        for sid in segment_ids(folder):
            rep.segments += 1
            p = folder / segment_name(sid)
            if p not in referenced:
                try:
                    h, _ = read_segment(p)
                except (OSError, SegmentError) as exc:
                    rep.damage.append(f"{p}: {exc}")
                    continue
                if h.data_type in (DT_TEXT, *VECTOR_TYPES, *BLOB_TYPES, DT_JSON):
                    rep.warnings.append(f"{store.rel(p)}: segment not referenced by any record (orphan)")
        for name in filenames:
            if name.startswith(".") and ".tmp-" in name:
                rep.warnings.append(f"{store.rel(folder / name)}: temp file left by an interrupted write")


BLOB_TYPES = (DT_IMAGE, DT_AUDIO, DT_BLOB)


def _check_blob(store, rec, ref, where, rep, referenced) -> None:
    """A record's `source.blob`: blob and manifest segments exist, link both ways, and the bytes hash right."""
    import hashlib
    import json

    from .index.build import safe_path

    try:
        shard = safe_path(store.root, str(ref.get("shard", "")))
        bid, mid = int(ref["blob"]), int(ref["manifest"])
    except (ValueError, TypeError, KeyError, AttributeError) as exc:
        rep.damage.append(f"{where}: bad blob reference ({exc})")
        return
    bpath, mpath = shard / segment_name(bid), shard / segment_name(mid)
    if bpath in referenced and mpath in referenced:
        return  # another record (an earlier chunk of the same PDF) had it checked
    referenced.update((bpath, mpath))
    try:
        bh, body = read_segment(bpath)
        mh, mbody = read_segment(mpath)
    except (OSError, SegmentError) as exc:
        rep.damage.append(f"{shard}: {exc} (blob of {where})")
        return
    if bh.data_type not in BLOB_TYPES or bh.next_id != mid:
        rep.damage.append(f"{store.rel(bpath)}: blob segment does not link to its manifest {mid}")
    if mh.data_type != DT_JSON or mh.prev_id != bid:
        rep.damage.append(f"{store.rel(mpath)}: manifest does not link back to blob {bid}")
    try:
        manifest = json.loads(mbody.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        rep.damage.append(f"{store.rel(mpath)}: manifest is not JSON")
        return
    digest = hashlib.sha256(body).hexdigest()
    if manifest.get("sha256") != digest or rec["source"].get("file_sha256") not in (None, digest):
        rep.damage.append(f"{store.rel(bpath)}: blob bytes do not match the sha256 in its manifest and record ({where})")
