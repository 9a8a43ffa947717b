"""Segment packs: one `.is` file per write and day, named by the sha256 of its bytes.

A pack is a plain sequence of ContextTape segments (the same 32-byte header as `segment.py`).
Segment 0 is a DT_JSON manifest. Format 3 (this code writes it) seals every item:

    {"nonce": "<24 hex: random, one per pack>", "pack": 3, "day": "2026-11-30", "dim": 384,
     "records": [[tag, seg], ...],                # one sealed vector segment per record
     "blobs":   [[tag, blob_seg, manifest_seg], ...]}   # ingest-any originals (optional)

Each item is sealed (ChaCha20-Poly1305, `seal.py`) under the key that only its record's day-log
line holds (`vkey`), and its tag is a keyed hash of the pack's nonce: nothing in a pack names a
record, only the line's key finds and opens its entry, and a forget (which removes the line) leaves
the pack untouched and its item unreadable. The random nonce makes every pack's bytes unique, so
git's rename detection never pairs a pack with another, whatever they hold. A sealed vector opens
to `hash16` (8 bytes), its inner header (data type, dim, int8 scale, Unix time) and its payload.
Format-2 packs (read, never written) hold the same items in the clear, named by record id.

The name is `<sha256 of the bytes>.is`: two clones can never write the same path with different
bytes, and `fsck` checks every byte against the name. Readers tolerate the same record in several
packs (a union of two clones' consolidations) and take one copy; nothing points at a pack by name,
so packs can be consolidated without touching a log.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .. import storefile
from . import layout
from . import safejson
from . import seal
from .segment import (
    DT_JSON,
    DT_SEALED,
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

PACK_FORMAT = 3
READABLE_PACKS = (2, 3)
HASH_PREFIX = 16
_INNER = struct.Struct("<iifq")  # a sealed vector's inner header: data type, dim, scale, Unix time
VECTOR_INNER = _INNER  # after the 8 bytes of hash16 (memstore/index/exact.py reads it directly)
_BLOB_INNER = struct.Struct("<iq")  # a sealed original's: data type, Unix time
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


Ring = list  # [(record id, key bytes), ...] in day-log order: the keys the day's lines hold


def ring(records) -> Ring:
    """The (record id, key) pairs of records (day-log dicts) that carry a well-formed `vkey`."""
    out = []
    for rec in records:
        key = seal.key_bytes(rec.get("vkey")) if isinstance(rec, dict) else None
        if key is not None:
            out.append((str(rec.get("id")), key))
    return out


@dataclass
class Item:
    """One opened vector: its record, the key that opened it, its plain header and payload."""

    record_id: str
    key: bytes | None  # the key given for it (format 2: nothing is sealed, maybe None)
    h16: str
    header: Header
    payload: bytes
    seg: int = -1  # the segment of the pack that holds it (its byte offset: Pack.offsets)


def opened_vector(plain: bytes) -> tuple[str, Header, bytes] | None:
    """(hash16, plain header, payload) of a sealed vector's plaintext, or None if it is too short."""
    if len(plain) < 8 + _INNER.size:
        return None
    dtype, dim, scale, unix = _INNER.unpack_from(plain, 8)
    body = plain[8 + _INNER.size :]
    return plain[:8].hex(), Header(-1, -1, len(body), dtype, dim, scale, unix), body


@dataclass
class Pack:
    """One parsed pack: its manifest and its segments as (header, payload) in order."""

    path: Path
    manifest: dict
    segments: list[tuple[Header, bytes]]
    _tags: dict = field(default_factory=dict, repr=False)
    offsets: list[int] = field(default_factory=list)  # each segment's header's byte offset

    @property
    def sealed(self) -> bool:
        return self.manifest.get("pack") == 3

    @property
    def entries(self) -> int:
        return len(self.manifest.get("records") or [])

    def _found(self, keys: Ring, rows_key: str, kind: bytes):
        """(record id, key, row) for each manifest row of `rows_key` one of `keys` names."""
        if rows_key not in self._tags:  # format 3: by tag; format 2: by record id
            self._tags[rows_key] = {row[0]: row for row in self.manifest.get(rows_key) or []}
        by_tag = self._tags[rows_key]
        nonce = bytes.fromhex(self.manifest["nonce"]) if self.sealed else b""
        out = []
        for rid, key in keys:
            row = by_tag.get(seal.tag(key, nonce, kind) if self.sealed else rid)
            if row is not None:
                out.append((rid, key, row))
        return out

    def items(self, keys: Ring) -> list[Item]:
        """Every vector the keys open (format 2: the keys' record ids name); one that will not open is skipped."""
        out = []
        nonce = bytes.fromhex(self.manifest["nonce"]) if self.sealed else b""
        for rid, key, row in self._found(keys, "records", seal.VECTOR):
            header, payload = self.segments[row[-1]]
            if not self.sealed:
                out.append(Item(rid, None, row[1], header, payload, row[-1]))
                continue
            plain = seal.unseal(key, nonce, seal.VECTOR, payload)
            if plain is None or len(plain) < 8 + _INNER.size:
                continue  # damaged: fsck names the pack (its bytes no longer hash to its name)
            dtype, dim, scale, unix = _INNER.unpack_from(plain, 8)
            body = plain[8 + _INNER.size :]
            out.append(
                Item(
                    rid,
                    key,
                    plain[:8].hex(),
                    Header(-1, -1, len(body), dtype, dim, scale, unix),
                    body,
                    row[-1],
                )
            )
        return out

    def vectors(self, keys: Ring) -> dict[tuple[str, bytes | None], tuple[object, str]]:
        """{(record id, key): (float32 vector, hash16)} for every vector the keys open."""
        return {
            (it.record_id, it.key): (decode_vector(it.header, it.payload), it.h16)
            for it in self.items(keys)
        }

    def blobs(self, keys: Ring) -> list[tuple[str, bytes | None, Header, bytes, bytes]]:
        """(record id, key, blob header, blob bytes, manifest bytes) of every original the keys open."""
        out = []
        nonce = bytes.fromhex(self.manifest["nonce"]) if self.sealed else b""
        for rid, key, row in self._found(keys, "blobs", seal.BLOB):
            (bh, body), (_mh, mbody) = self.segments[row[1]], self.segments[row[2]]
            if self.sealed:
                plain = seal.unseal(key, nonce, seal.BLOB, body)
                mbody = seal.unseal(key, nonce, seal.BLOB_MANIFEST, mbody)
                if plain is None or mbody is None or len(plain) < _BLOB_INNER.size:
                    continue
                dtype, unix = _BLOB_INNER.unpack_from(plain)
                body = plain[_BLOB_INNER.size :]
                bh = Header(-1, -1, len(body), dtype, 0, 1.0, unix)
            out.append((rid, key, bh, body, mbody))
        return out

    def blob(self, record_id: str, keys: Ring) -> tuple[Header, bytes, dict] | None:
        """(blob header, blob bytes, its JSON manifest) for a record's original file, or None."""
        for rid, _key, bh, body, mbody in self.blobs([k for k in keys if k[0] == record_id]):
            if rid == record_id:
                try:
                    return bh, body, safejson.loads(mbody)
                except ValueError as exc:
                    raise PackError(
                        f"{self.path}: the manifest of {rid}'s original: {exc}"
                    ) from None
        return None


def parse(data: bytes, path: Path | str = "<pack>") -> Pack:
    """Split a pack's bytes into segments and check the manifest against them; PackError if wrong."""
    segs: list[tuple[Header, bytes]] = []
    offsets: list[int] = []
    pos = 0
    while pos < len(data):
        try:
            header = Header.unpack(data[pos : pos + HEADER_SIZE])
        except SegmentError as exc:
            raise PackError(f"{path}: segment {len(segs)} at byte {pos}: {exc}") from None
        end = pos + HEADER_SIZE + header.data_len
        if (
            header.data_type not in KNOWN_TYPES
            or header.data_len < 0
            or header.dim < 0
            or end > len(data)
        ):
            raise PackError(f"{path}: segment {len(segs)} at byte {pos} has an impossible header")
        segs.append((header, data[pos + HEADER_SIZE : end]))
        offsets.append(pos)
        pos = end
    if not segs or segs[0][0].data_type != DT_JSON:
        raise PackError(f"{path}: does not start with a manifest segment")
    try:
        manifest = safejson.loads(segs[0][1])
    except ValueError as exc:
        raise PackError(f"{path}: manifest is not JSON ({exc})") from None
    if not isinstance(manifest, dict) or manifest.get("pack") not in READABLE_PACKS:
        raise PackError(
            f"{path}: manifest is not a pack manifest of format {' or '.join(map(str, READABLE_PACKS))}"
        )
    for key in ("records", "blobs"):
        if not isinstance(manifest.get(key, []), list):
            raise PackError(f"{path}: manifest's {key!r} is not a list")
    sealed = manifest["pack"] == 3
    if sealed and not (
        isinstance(manifest.get("nonce"), str)
        and len(manifest["nonce"]) == 2 * seal.NONCE_BYTES
        and all(c in "0123456789abcdef" for c in manifest["nonce"])
    ):
        raise PackError(f"{path}: manifest has no nonce (every format-3 pack has one)")
    vector_types = {DT_SEALED} if sealed else VECTOR_TYPES
    for row in manifest.get("records", []):
        if not (
            isinstance(row, list)
            and len(row) == (2 if sealed else 3)
            and isinstance(row[0], str)
            and isinstance(row[-1], int)
            and 0 < row[-1] < len(segs)
            and segs[row[-1]][0].data_type in vector_types
        ):
            raise PackError(f"{path}: manifest entry {row!r} does not name a vector segment")
    for row in manifest.get("blobs", []):
        if not (
            isinstance(row, list)
            and len(row) == 3
            and all(isinstance(x, int) and 0 < x < len(segs) for x in row[1:])
            and segs[row[2]][0].data_type == (DT_SEALED if sealed else DT_JSON)
        ):
            raise PackError(f"{path}: blob entry {row!r} does not name a blob and its manifest")
    return Pack(Path(path), manifest, segs, offsets=offsets)


def read(path: Path, verify: bool = False) -> Pack:
    """Read and parse one pack; with `verify`, its bytes must hash to its file name."""
    data = storefile.read_bytes(path)
    if verify and pack_name(data) != Path(path).name:
        raise PackError(f"{path}: bytes do not hash to the file name (the pack is damaged)")
    return parse(data, path)


def read_manifest(path: Path) -> dict:
    """A pack's manifest (segment 0) without reading its vectors; PackError if it is not one."""
    with storefile.open_file(path) as fh:
        head = fh.read(HEADER_SIZE)
        try:
            header = Header.unpack(head)
        except SegmentError as exc:
            raise PackError(f"{path}: {exc}") from None
        body = (
            fh.read(header.data_len) if header.data_type == DT_JSON and header.data_len > 0 else b""
        )
    try:
        manifest = safejson.loads(body)
    except ValueError:
        raise PackError(f"{path}: does not start with a readable manifest segment") from None
    if not isinstance(manifest, dict):
        raise PackError(f"{path}: does not start with a pack manifest")
    return manifest


def day_vectors(root: Path, day: str, keys: Ring | None = None) -> dict[str, tuple[object, str]]:
    """{record id: (vector, hash16)} from every pack of one day, opened with `keys` (default: the day
    log's lines); the first pack by name wins a repeat."""
    if keys is None:
        from . import log as logfmt

        path = logfmt.day_path(root, day)
        keys = (
            ring(ln.record for ln in logfmt.read_lines(path) if ln.record) if path.exists() else []
        )
    out: dict = {}
    for p in pack_files(day_dir(root, day)):
        pk = read(p)
        for (rid, _key), item in pk.vectors(
            keys if pk.sealed else [(r, None) for r, _ in keys]
        ).items():
            out.setdefault(rid, item)
    return out


def non_finite(record_id: str) -> str:
    return f"vector of record {record_id} holds NaN or Infinity"


@dataclass
class PackWriter:
    """Collects one day's vectors (and blobs) and writes them, sealed, as one content-named pack.

    Every item is given in the clear with its record's key; `to_bytes` seals it under the pack's
    nonce (random unless given), so two writers never produce the same bytes.
    """

    day: str
    dim: int
    nonce: bytes = field(default_factory=seal.new_nonce)
    records: list[tuple[str, bytes, str, Header, bytes]] = field(default_factory=list)
    blobs: list[tuple[str, bytes, Header, bytes, bytes]] = field(default_factory=list)
    _bytes: bytes | None = field(default=None, repr=False)
    # record id -> (offset, length) of its sealed vector's payload in the bytes, once made
    spans: dict[str, tuple[int, int]] = field(default_factory=dict, repr=False)
    # record id -> the subkey its vector was sealed under, once made (what the index keeps)
    subkeys: dict[str, bytes] = field(default_factory=dict, repr=False)

    def add_vector(
        self,
        record_id: str,
        key: bytes,
        text_hash: str,
        vec,
        dtype: str,
        unix_time: int,
        finite: bool = False,
    ) -> None:
        """`finite`: the caller checked the vector already (a write checks all of its at once)."""
        import numpy as np

        if not finite and not np.isfinite(np.asarray(vec, dtype=np.float32)).all():
            raise PackError(non_finite(record_id))  # (it would rank first for every query)
        vtype, body, scale = encode_vector(vec, dtype)
        header = Header(-1, -1, len(body), vtype, self.dim, scale, unix_time)
        self.add_encoded(record_id, key, hash16(text_hash), header, body)

    def add_encoded(
        self, record_id: str, key: bytes, h16: str, header: Header, body: bytes
    ) -> None:
        """A vector segment (plain header and payload) kept bit for bit (consolidation, upgrade)."""
        self.records.append((record_id, key, h16, header, body))
        self._bytes = None

    def add_blob(
        self,
        record_id: str,
        key: bytes,
        payload: bytes,
        data_type: int,
        manifest: dict | bytes,
        unix_time: int,
    ) -> None:
        if len(payload) > MAX_PAYLOAD:
            raise PackError("blob too large for one segment (2 GiB)")
        mbody = (
            manifest
            if isinstance(manifest, bytes)
            else json.dumps(manifest, ensure_ascii=False, sort_keys=True).encode("utf-8")
        )
        self.blobs.append(
            (
                record_id,
                key,
                Header(-1, -1, len(payload), data_type, 0, 1.0, unix_time),
                payload,
                mbody,
            )
        )
        self._bytes = None

    def __bool__(self) -> bool:
        return bool(self.records or self.blobs)

    def to_bytes(self) -> bytes:
        """The pack's bytes: manifest, then sealed vectors, then sealed blob/manifest pairs (by tag)."""
        if self._bytes is not None:
            return self._bytes
        n = self.nonce
        vecs = sorted(
            (seal.tag(key, n, seal.VECTOR), key, h16, h, body, rid)
            for rid, key, h16, h, body in self.records
        )
        blobs = sorted(
            (seal.tag(key, n, seal.BLOB), key, h, body, m) for _rid, key, h, body, m in self.blobs
        )
        rows, brows, out = [], [], []
        seg = 1
        spans: list[tuple[str, int]] = []  # (record id, its payload's length), in order
        subkeys = self.subkeys = {}
        for tg, key, h16, h, body, rid in vecs:
            plain = (
                bytes.fromhex(h16) + _INNER.pack(h.data_type, h.dim, h.scale, h.unix_time) + body
            )
            sub = subkeys[rid] = seal.vector_subkey(key)
            sealed = seal.seal_under(sub, n, plain)
            rows.append([tg, seg])
            out.append(Header(-1, -1, len(sealed), DT_SEALED, self.dim, 1.0, 0).pack() + sealed)
            spans.append((rid, len(sealed)))
            seg += 1
        for tg, key, h, body, mbody in blobs:
            sb = seal.seal(key, n, seal.BLOB, _BLOB_INNER.pack(h.data_type, h.unix_time) + body)
            sm = seal.seal(key, n, seal.BLOB_MANIFEST, mbody)
            brows.append([tg, seg, seg + 1])
            out.append(Header(seg + 1, -1, len(sb), DT_SEALED, 0, 1.0, 0).pack() + sb)
            out.append(Header(-1, seg, len(sm), DT_SEALED, 0, 1.0, 0).pack() + sm)
            seg += 2
        # the nonce first: no 64-byte run of a pack's first bytes is like another pack's
        manifest = {
            "nonce": n.hex(),
            "pack": PACK_FORMAT,
            "day": self.day,
            "dim": self.dim,
            "records": rows,
        }
        if brows:
            manifest["blobs"] = brows
        mjson = json.dumps(manifest, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        self._bytes = b"".join(
            [Header(-1, -1, len(mjson), DT_JSON, 0, 1.0, 0).pack() + mjson, *out]
        )
        at = HEADER_SIZE + len(mjson)
        self.spans = {}
        for rid, size in spans:
            self.spans[rid] = (at + HEADER_SIZE, size)
            at += HEADER_SIZE + size
        return self._bytes

    def write(self, root: Path, fsync: bool = False) -> Path:
        """Write the pack under its content name (temp file, rename)."""
        data = self.to_bytes()
        folder = day_dir(root, self.day)
        storefile.mkdirs(folder, root)
        path = folder / pack_name(data)
        if not path.exists():
            write_file_atomic(path, data, fsync)
        return path


# A consolidation merges only packs that are each at most 9/20 (45%) of the result, so a day keeps
# a few packs of geometrically growing size and a write never rewrites the day's big pack for a
# small addition (the cost of a write stays bounded, and git stores no near-copy of a big pack per
# write). Renames play no part any more: every pack's bytes are unique (its nonce), so git never
# pairs a new pack with one it replaces. Integers, so the choice never hangs on rounding.
SHARE_NUM, SHARE_DEN = 9, 20


def _small_enough(size: int, total: int) -> bool:
    return size * SHARE_DEN <= total * SHARE_NUM


def mergeable(paths: list[Path]) -> list[Path]:
    """The largest set of a day's packs (smallest first) in which no pack is over 45% of the whole.

    Fewer than two packs means nothing is worth merging; a day therefore keeps a few packs of
    geometrically growing size rather than one, and never rewrites its big pack for a small addition.
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
    root: Path, day: str, dim: int, keys: Ring, keep=None, packs: list[Path] | None = None
) -> tuple[Path | None, list[Path]]:
    """Merge `packs` (default: every pack of `day`) into one: (new pack or None, the packs it replaces).

    Only what `keys` (the day log's) open is carried over: an item whose line is gone (forgotten)
    stays behind, unreadable, and goes with its old pack. `keep(record_id, hash16)` may drop more.
    The caller removes the old packs and commits. A pack whose bytes do not match its name raises
    PackError.
    """
    old = list(packs) if packs is not None else pack_files(day_dir(root, day))
    w = merged_writer(day, dim, old, keys, keep)
    new = w.write(root) if w else None
    return new, [p for p in old if p != new]


def consolidate_safely(
    root: Path, day: str, dim: int, keys: Ring, keep=None
) -> tuple[Path | None, list[Path]]:
    """Merge the day's `mergeable` packs, checking the share against the real result; (None, []) if none.

    A day whose packs repeat each other (two clones consolidated the same packs, each under its own
    nonce) is merged whole when that drops at least a third of its bytes.
    """
    every = pack_files(day_dir(root, day))
    chosen = mergeable(every)
    while len(chosen) >= 2:
        w = merged_writer(day, dim, chosen, keys, keep)
        if w and _small_enough(max(p.stat().st_size for p in chosen), len(w.to_bytes())):
            return w.write(root), list(chosen)
        if not w:
            return None, list(chosen)  # nothing in them opens any more (every record forgotten)
        chosen = mergeable(chosen[:-1])
    if len(every) >= 2:
        w = merged_writer(day, dim, every, keys, keep)
        total = sum(p.stat().st_size for p in every)
        if not w or len(w.to_bytes()) * 3 <= total * 2:
            return (w.write(root) if w else None), list(every)
    return None, []


def merged_writer(day: str, dim: int, old: list[Path], keys: Ring, keep=None) -> PackWriter:
    """A PackWriter holding every item of `old` that `keys` open, each (record, key, hash16) once."""
    entries: dict[tuple[str, bytes | None, str], Item] = {}
    blobs: dict[tuple[str, bytes | None], tuple] = {}
    by_id = {}
    for rid, key in keys:
        by_id.setdefault(rid, key)
    for p in old:
        pk = read(
            p, verify=True
        )  # never carry a damaged pack's bytes into a new, valid-looking one
        for it in pk.items(keys):
            entries.setdefault((it.record_id, it.key, it.h16), it)
        for rid, key, bh, body, mbody in pk.blobs(keys):
            blobs.setdefault((rid, key), (bh, body, mbody))
    w, seen = PackWriter(day, dim), set()
    for (rid, key, h16), it in sorted(entries.items(), key=lambda kv: (kv[0][0], kv[0][2])):
        key = key if key is not None else by_id.get(rid)  # a format-2 item gets its line's key
        if key is not None and (rid, key, h16) not in seen and (keep is None or keep(rid, h16)):
            seen.add((rid, key, h16))
            w.add_encoded(rid, key, h16, it.header, it.payload)
    for (rid, key), (bh, body, mbody) in sorted(blobs.items(), key=lambda kv: kv[0][0]):
        key = key if key is not None else by_id.get(rid)
        if key is not None and (keep is None or keep(rid, None)):
            w.add_blob(rid, key, body, bh.data_type, mbody, bh.unix_time)
    return w
