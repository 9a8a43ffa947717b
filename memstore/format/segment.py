"""ContextTape `.is` segments: the 32-byte header, text and vector payloads, and per-writer shards.

Layout of one file: header `<iiiiif8s` (next_id, prev_id, data_len, data_type, dim, scale,
8 reserved bytes holding the record's Unix time as little-endian int64), then `data_len` payload
bytes. A shard is one folder of `segment_<n>.is` files that is itself a readable ContextTape store.
"""

from __future__ import annotations

import os
import re
import struct
from dataclasses import dataclass
from pathlib import Path

from .. import storefile

HEADER = struct.Struct("<iiiiif8s")
HEADER_SIZE = HEADER.size  # 32

DT_TEXT = 0
DT_VEC_F32 = 1
DT_VEC_I8 = 2
DT_IMAGE = 10
DT_AUDIO = 11
DT_BLOB = 12
DT_JSON = 13
DT_SEALED = (
    14  # format-3 packs: a vector or an original, sealed under its record's key (format/seal.py)
)
KNOWN_TYPES = {DT_TEXT, DT_VEC_F32, DT_VEC_I8, DT_IMAGE, DT_AUDIO, DT_BLOB, DT_JSON, DT_SEALED, 100}
VECTOR_TYPES = {DT_VEC_F32, DT_VEC_I8}

_NAME = re.compile(r"^segment_(\d+)\.is$")
MAX_PAYLOAD = 2**31 - 1


class SegmentError(ValueError):
    """A segment file is truncated, has an impossible header, or does not match its pair."""


@dataclass(frozen=True)
class Header:
    next_id: int
    prev_id: int
    data_len: int
    data_type: int
    dim: int
    scale: float
    unix_time: int

    def pack(self) -> bytes:
        reserved = struct.pack("<q", int(self.unix_time))
        return HEADER.pack(
            self.next_id,
            self.prev_id,
            self.data_len,
            self.data_type,
            self.dim,
            self.scale,
            reserved,
        )

    @classmethod
    def unpack(cls, raw: bytes) -> "Header":
        if len(raw) < HEADER_SIZE:
            raise SegmentError(f"header is {len(raw)} bytes, expected {HEADER_SIZE}")
        n, p, ln, dt, dim, scale, res = HEADER.unpack(raw[:HEADER_SIZE])
        return cls(n, p, ln, dt, dim, scale, struct.unpack("<q", res)[0])


def segment_name(seg_id: int) -> str:
    return f"segment_{seg_id}.is"


def segment_ids(folder: Path) -> list[int]:
    """The ids of every segment file in `folder`, sorted."""
    try:
        names = os.listdir(folder)
    except FileNotFoundError:
        return []
    return sorted(int(m.group(1)) for m in map(_NAME.match, names) if m)


def quantize_int8(vec) -> tuple[bytes, float]:
    """ContextTape's symmetric per-vector absmax scheme: scale = max|v|/127, q = clip(round(v/scale))."""
    import numpy as np

    v = np.asarray(vec, dtype=np.float32)
    peak = float(np.max(np.abs(v))) if v.size else 0.0
    scale = peak / 127.0 if peak > 0 else 1.0
    q = np.clip(np.round(v / scale), -127, 127).astype(np.int8)
    return q.tobytes(), scale


def encode_vector(vec, dtype: str) -> tuple[int, bytes, float]:
    """(data_type, payload, scale) for a vector stored as "float32" or "int8"."""
    import numpy as np

    if dtype == "int8":
        payload, scale = quantize_int8(vec)
        return DT_VEC_I8, payload, scale
    if dtype == "float32":
        return DT_VEC_F32, np.asarray(vec, dtype="<f4").tobytes(), 1.0
    raise ValueError(f"unknown vector dtype {dtype!r} (float32 or int8)")


def decode_vector(header: Header, payload: bytes):
    import numpy as np

    if header.data_type == DT_VEC_F32:
        if len(payload) != 4 * header.dim:
            raise SegmentError(f"float32 payload is {len(payload)} bytes for dim {header.dim}")
        return np.frombuffer(payload, dtype="<f4").astype(np.float32)
    if header.data_type == DT_VEC_I8:
        if len(payload) != header.dim:
            raise SegmentError(f"int8 payload is {len(payload)} bytes for dim {header.dim}")
        return np.frombuffer(payload, dtype=np.int8).astype(np.float32) * np.float32(header.scale)
    raise SegmentError(f"data_type {header.data_type} is not a vector")


def read_segment(path: Path) -> tuple[Header, bytes]:
    """Header and payload of one file; SegmentError when truncated, padded or impossible."""
    raw = storefile.read_bytes(path)
    header = Header.unpack(raw)
    if header.data_type not in KNOWN_TYPES:
        raise SegmentError(f"unknown data_type {header.data_type}")
    if header.data_len < 0 or header.dim < 0:
        raise SegmentError("negative length or dim in header")
    actual = len(raw) - HEADER_SIZE
    if actual != header.data_len:
        raise SegmentError(f"payload is {actual} bytes, header says {header.data_len}")
    return header, raw[HEADER_SIZE:]


def write_file_atomic(path: Path, data: bytes, fsync: bool = True) -> None:
    """Write a new file completely under a temp name, then rename it into place."""
    storefile.check(path)  # not into a linked folder, nor over a link
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if fsync:
            os.fsync(fd)
    finally:
        os.close(fd)
    if os.path.lexists(path):
        os.unlink(tmp)
        raise SegmentError(f"{path} already exists; segments are never rewritten")
    os.rename(tmp, path)


class ShardWriter:
    """Allocates ids in one writer folder and writes text/vector pairs (caller holds the store lock)."""

    def __init__(self, folder: Path):
        self.folder = Path(folder)
        ids = segment_ids(self.folder)
        self.next_id = (ids[-1] + 1) if ids else 0

    def write_pair(
        self, text: str, vec, dtype: str, unix_time: int, fsync: bool = True
    ) -> tuple[int, int]:
        """Write the text segment and its vector segment, linked both ways; returns (text_id, vec_id).

        Both ids are allocated first, so each file is written once, complete, with its final header.
        """
        storefile.mkdirs(self.folder)
        tid, vid = self.next_id, self.next_id + 1
        self.next_id += 2
        body = text.encode("utf-8")
        if len(body) > MAX_PAYLOAD:
            raise SegmentError("text too large for one segment (2 GiB)")
        vtype, vbody, scale = encode_vector(vec, dtype)
        dim = len(vbody) // (4 if vtype == DT_VEC_F32 else 1)
        theader = Header(vid, -1, len(body), DT_TEXT, 0, 1.0, unix_time)
        vheader = Header(-1, tid, len(vbody), vtype, dim, scale, unix_time)
        write_file_atomic(self.folder / segment_name(tid), theader.pack() + body, fsync)
        write_file_atomic(self.folder / segment_name(vid), vheader.pack() + vbody, fsync)
        return tid, vid

    def write_blob(
        self, payload: bytes, data_type: int, manifest: dict, unix_time: int, fsync: bool = True
    ) -> tuple[int, int]:
        """A blob segment plus its DT_JSON manifest (prev_id = blob id); returns (blob_id, manifest_id)."""
        import json

        storefile.mkdirs(self.folder)
        bid, mid = self.next_id, self.next_id + 1
        self.next_id += 2
        if len(payload) > MAX_PAYLOAD:
            raise SegmentError("blob too large for one segment (2 GiB)")
        mbody = json.dumps(manifest, ensure_ascii=False, sort_keys=True).encode("utf-8")
        write_file_atomic(
            self.folder / segment_name(bid),
            Header(mid, -1, len(payload), data_type, 0, 1.0, unix_time).pack() + payload,
            fsync,
        )
        write_file_atomic(
            self.folder / segment_name(mid),
            Header(-1, bid, len(mbody), DT_JSON, 0, 1.0, unix_time).pack() + mbody,
            fsync,
        )
        return bid, mid
