"""Segment packs (store format 2): one `.is` file per write and day, named by the sha256 of its bytes.

A pack is a plain sequence of ContextTape segments (the same 32-byte header, payload types and int8
scheme as `segment.py`). Segment 0 is a DT_JSON manifest that makes the pack self-describing:

    {"pack": 2, "day": "2026-11-30", "dim": 384,
     "records": [[record_id, hash16, seg], ...],          # one vector segment per record
     "blobs":   [[record_id, blob_seg, manifest_seg], ...]}   # ingest-any originals (optional)

`hash16` is the first 16 hex digits of the record's text hash, so a vector is tied to the exact text
it was made from; `seg` is the segment's position in the pack (0 is the manifest). Links inside a
pack (`next_id`/`prev_id`) are positions too, so a pack read as a ContextTape segment list is
consistent. Packs hold no text: the day log is the one place a record's words live (see
docs/format.md for the measurement behind that choice).

The name is `<sha256 of the bytes>.is`: identical content means an identical name, two clones can
never write the same path with different bytes, and `fsck` checks every byte against the name.
Readers tolerate the same record in several packs (a union of two clones' consolidations) and take
one copy; nothing points at a pack by name, so packs can be consolidated without touching a log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from . import layout
from .segment import (
    DT_JSON,
    HEADER_SIZE,
    KNOWN_TYPES,
    MAX_PAYLOAD,
    VECTOR_TYPES,
    Header,
    SegmentError,
    decode_vector,
    encode_vector,
    write_file_atomic,
)

PACK_FORMAT = 2
HASH_PREFIX = 16
_NAME = re.compile(r"^([0-9a-f]{64})\.is$")


class PackError(SegmentError):
    """A pack is truncated, its bytes do not hash to its name, or its manifest is not what it says."""


def day_dir(root: Path, day: str) -> Path:
    """`packs/YYYY/YYYY-MM-DD/` under the store root."""
    return Path(root) / layout.pack_dir(day)


def pack_name(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest() + ".is"


def hash16(text_hash: str) -> str:
    return text_hash[:HASH_PREFIX]


def pack_files(folder: Path) -> list[Path]:
    """The packs in one day folder, sorted by name (temp files and strays are not packs)."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return [Path(folder) / n for n in sorted(names) if _NAME.match(n)]


def all_pack_days(root: Path) -> dict[str, Path]:
    """Every day that has a pack folder: {day: folder}."""
    out: dict[str, Path] = {}
    base = Path(root) / layout.PACKS
    try:
        years = sorted(os.listdir(base))
    except FileNotFoundError:
        return out
    for y in years:
        try:
            days = sorted(os.listdir(base / y))
        except (NotADirectoryError, FileNotFoundError):
            continue
        for d in days:
            if d.startswith(y) and (base / y / d).is_dir():
                out[d] = base / y / d
    return out


@dataclass
class Pack:
    """One parsed pack: its manifest and its segments as (header, payload) in order."""

    path: Path
    manifest: dict
    segments: list[tuple[Header, bytes]]

    def vectors(self) -> dict[str, tuple[object, str]]:
        """{record id: (float32 vector, hash16)} for every record this pack holds a vector for."""
        out = {}
        for rid, h16, seg in self.manifest.get("records", []):
            header, payload = self.segments[seg]
            out[rid] = (decode_vector(header, payload), h16)
        return out

    def blob(self, record_id: str) -> tuple[Header, bytes, dict] | None:
        """(blob header, blob bytes, its JSON manifest) for a record's original file, or None."""
        for rid, bseg, mseg in self.manifest.get("blobs", []):
            if rid == record_id:
                bh, body = self.segments[bseg]
                return bh, body, json.loads(self.segments[mseg][1].decode("utf-8"))
        return None


def parse(data: bytes, path: Path | str = "<pack>") -> Pack:
    """Split a pack's bytes into segments and check the manifest against them; PackError if wrong."""
    segs: list[tuple[Header, bytes]] = []
    pos = 0
    while pos < len(data):
        try:
            header = Header.unpack(data[pos : pos + HEADER_SIZE])
        except SegmentError as exc:
            raise PackError(f"{path}: segment {len(segs)} at byte {pos}: {exc}") from None
        end = pos + HEADER_SIZE + header.data_len
        if header.data_type not in KNOWN_TYPES or header.data_len < 0 or header.dim < 0 or end > len(data):
            raise PackError(f"{path}: segment {len(segs)} at byte {pos} has an impossible header")
        segs.append((header, data[pos + HEADER_SIZE : end]))
        pos = end
    if not segs or segs[0][0].data_type != DT_JSON:
        raise PackError(f"{path}: does not start with a manifest segment")
    try:
        manifest = json.loads(segs[0][1].decode("utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise PackError(f"{path}: manifest is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("pack") != PACK_FORMAT:
        raise PackError(f"{path}: manifest is not a format-{PACK_FORMAT} pack manifest")
    for row in manifest.get("records", []):
        if not (
            isinstance(row, list)
            and len(row) == 3
            and isinstance(row[2], int)
            and 0 < row[2] < len(segs)
            and segs[row[2]][0].data_type in VECTOR_TYPES
        ):
            raise PackError(f"{path}: manifest entry {row!r} does not name a vector segment")
    for row in manifest.get("blobs", []):
        if not (
            isinstance(row, list)
            and len(row) == 3
            and all(isinstance(x, int) and 0 < x < len(segs) for x in row[1:])
            and segs[row[2]][0].data_type == DT_JSON
        ):
            raise PackError(f"{path}: blob entry {row!r} does not name a blob and its manifest")
    return Pack(Path(path), manifest, segs)


def read(path: Path, verify: bool = False) -> Pack:
    """Read and parse one pack; with `verify`, its bytes must hash to its file name."""
    data = Path(path).read_bytes()
    if verify and pack_name(data) != Path(path).name:
        raise PackError(f"{path}: bytes do not hash to the file name (the pack is damaged)")
    return parse(data, path)


def manifest_ids(path: Path) -> set[str]:
    """The record ids one pack holds a vector or blob for, from its manifest alone (segment 0: one
    header and its payload read, not the vectors); PackError if the head is not a pack manifest."""
    manifest = read_manifest(path)
    rows = list(manifest.get("records") or []) + list(manifest.get("blobs") or [])
    return {row[0] for row in rows if isinstance(row, list) and row and isinstance(row[0], str)}


def read_manifest(path: Path) -> dict:
    """A pack's manifest (segment 0) without reading its vectors; PackError if it is not one."""
    with open(path, "rb") as fh:
        head = fh.read(HEADER_SIZE)
        try:
            header = Header.unpack(head)
        except SegmentError as exc:
            raise PackError(f"{path}: {exc}") from None
        body = fh.read(header.data_len) if header.data_type == DT_JSON and header.data_len > 0 else b""
    try:
        manifest = json.loads(body.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise PackError(f"{path}: does not start with a readable manifest segment") from None
    if not isinstance(manifest, dict):
        raise PackError(f"{path}: does not start with a pack manifest")
    return manifest


def day_vectors(root: Path, day: str) -> dict[str, tuple[object, str]]:
    """{record id: (vector, hash16)} from every pack of one day; the first pack by name wins a repeat."""
    out: dict[str, tuple[object, str]] = {}
    for p in pack_files(day_dir(root, day)):
        for rid, item in read(p).vectors().items():
            out.setdefault(rid, item)
    return out


@dataclass
class PackWriter:
    """Collects one day's vectors (and blobs) and writes them as one content-named pack."""

    day: str
    dim: int
    records: list[tuple[str, str, Header, bytes]] = field(default_factory=list)
    blobs: list[tuple[str, Header, bytes, bytes]] = field(default_factory=list)

    def add_vector(self, record_id: str, text_hash: str, vec, dtype: str, unix_time: int) -> None:
        import numpy as np

        if not np.isfinite(np.asarray(vec, dtype=np.float32)).all():  # would rank first for every query
            raise PackError(f"vector of record {record_id} holds NaN or Infinity")
        vtype, body, scale = encode_vector(vec, dtype)
        self.add_encoded(
            record_id, hash16(text_hash), Header(-1, -1, len(body), vtype, self.dim, scale, unix_time), body
        )

    def add_encoded(self, record_id: str, h16: str, header: Header, body: bytes) -> None:
        """A vector segment kept byte for byte (consolidation, upgrade); links are set on write."""
        self.records.append((record_id, h16, header, body))

    def add_blob(self, record_id: str, payload: bytes, data_type: int, manifest: dict, unix_time: int) -> None:
        if len(payload) > MAX_PAYLOAD:
            raise PackError("blob too large for one segment (2 GiB)")
        mbody = json.dumps(manifest, ensure_ascii=False, sort_keys=True).encode("utf-8")
        self.blobs.append((record_id, Header(-1, -1, len(payload), data_type, 0, 1.0, unix_time), payload, mbody))

    def __bool__(self) -> bool:
        return bool(self.records or self.blobs)

    def to_bytes(self) -> bytes:
        """The pack's bytes: manifest, then vectors, then blob/manifest pairs; deterministic for its input."""
        rows, brows, body = [], [], []
        seg = 1
        for rid, h16, header, payload in self.records:
            rows.append([rid, h16, seg])
            body.append(_relink(header, -1, -1).pack() + payload)
            seg += 1
        for rid, bheader, payload, mbody in self.blobs:
            brows.append([rid, seg, seg + 1])
            body.append(_relink(bheader, seg + 1, -1).pack() + payload)
            body.append(Header(-1, seg, len(mbody), DT_JSON, 0, 1.0, bheader.unix_time).pack() + mbody)
            seg += 2
        manifest = {"pack": PACK_FORMAT, "day": self.day, "dim": self.dim, "records": rows}
        if brows:
            manifest["blobs"] = brows
        mjson = json.dumps(manifest, ensure_ascii=False, sort_keys=True, separators=(",", ":")).encode("utf-8")
        head = Header(-1, -1, len(mjson), DT_JSON, 0, 1.0, 0).pack() + mjson
        return b"".join([head, *body])

    def write(self, root: Path, fsync: bool = False) -> Path:
        """Write the pack under its content name (temp file, rename); an identical pack already there is kept."""
        data = self.to_bytes()
        folder = day_dir(root, self.day)
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / pack_name(data)
        if not path.exists():
            write_file_atomic(path, data, fsync)
        return path


def _relink(h: Header, next_id: int, prev_id: int) -> Header:
    return Header(next_id, prev_id, h.data_len, h.data_type, h.dim, h.scale, h.unix_time)


# A consolidation merges only packs that are each at most 9/20 (45%) of the result. Git's merge
# takes "a file deleted and a new file at least 50% like it" for a rename, and a rename of a pack
# that the other clone consolidated differently is a rename/delete conflict; below half, the new
# pack can never look like a pack it replaces (git's score is at most old size / new size), so both
# sides' deletions and additions merge cleanly. Integers, so the choice never hangs on rounding.
SHARE_NUM, SHARE_DEN = 9, 20


def _small_enough(size: int, total: int) -> bool:
    return size * SHARE_DEN <= total * SHARE_NUM


def mergeable(paths: list[Path]) -> list[Path]:
    """The largest set of a day's packs (smallest first) in which no pack is over 45% of the whole.

    Depends only on the packs' sizes and names, so two clones holding the same packs choose the
    same set. Fewer than two packs means nothing is worth merging; a day therefore keeps a few
    packs of geometrically growing size rather than one, and never rewrites its big pack for a
    small addition.
    """
    sized = sorted((Path(p).stat().st_size, Path(p).name, Path(p)) for p in paths)
    best: list[Path] = []
    total = 0
    for i, (size, _name, _p) in enumerate(sized):
        total += size
        if i >= 1 and _small_enough(size, total):
            best = [q for _, _, q in sized[: i + 1]]
    return best


def consolidate(
    root: Path, day: str, dim: int, keep=None, packs: list[Path] | None = None
) -> tuple[Path | None, list[Path]]:
    """Merge `packs` (default: every pack of `day`) into one: (new pack or None, the packs it replaces).

    The result depends only on the set of (record, hash16, vector) entries, sorted, so two clones
    that consolidate the same packs write the same bytes under the same name. `keep(record_id,
    hash16)` may drop entries (forgetting); by default everything is kept. The caller removes the
    old packs and commits. A pack whose bytes do not match its name raises PackError.
    """
    old = list(packs) if packs is not None else pack_files(day_dir(root, day))
    w = merged_writer(day, dim, old, keep)
    new = w.write(root) if w else None
    return new, [p for p in old if p != new]


def consolidate_safely(root: Path, day: str, dim: int, keep=None) -> tuple[Path | None, list[Path]]:
    """Merge the day's `mergeable` packs, checking the share against the real result; (None, []) if none.
    `keep(record_id, hash16)` may drop entries, as in `consolidate`."""
    chosen = mergeable(pack_files(day_dir(root, day)))
    while len(chosen) >= 2:
        w = merged_writer(day, dim, chosen, keep)
        size = len(w.to_bytes())
        if _small_enough(max(p.stat().st_size for p in chosen), size):  # one manifest, no duplicates: smaller
            new = w.write(root)
            return new, [p for p in chosen if p != new]
        chosen = mergeable(chosen[:-1])
    return None, []


def merged_writer(day: str, dim: int, old: list[Path], keep=None) -> PackWriter:
    """A PackWriter holding every entry of `old`, each (record, hash16) once, in sorted order."""
    entries: dict[tuple[str, str], tuple[Header, bytes]] = {}
    blobs: dict[str, tuple[Header, bytes, bytes]] = {}
    for p in old:
        pk = read(p, verify=True)  # never carry a damaged pack's bytes into a new, valid-looking one
        for rid, h16, seg in pk.manifest.get("records", []):
            entries.setdefault((rid, h16), pk.segments[seg])
        for rid, bseg, mseg in pk.manifest.get("blobs", []):
            blobs.setdefault(rid, (pk.segments[bseg][0], pk.segments[bseg][1], pk.segments[mseg][1]))
    w = PackWriter(day, dim)
    for (rid, h16), (header, payload) in sorted(entries.items()):
        if keep is None or keep(rid, h16):
            w.add_encoded(rid, h16, header, payload)
    for rid, (bheader, payload, mbody) in sorted(blobs.items()):
        if keep is None or keep(rid, None):
            w.blobs.append((rid, bheader, payload, mbody))
    return w
