"""Exact vectors for index rows, read from where the store keeps them: one pack item or segment.

The index's matrix holds int8 codes (index/vectors.py); a record's float32 vector lives only in the
store's files. `records.vkey` says where, as a location this module makes and reads:

- format 3 (sealed pack item), 48 bytes: the item's subkey (format/seal.py `vector_subkey`, which
  opens this item and nothing else), the first 8 bytes of the pack's name, and the sealed
  payload's byte offset and length in the pack (little-endian uint32 each);
- format 2 (pack item in the clear), 16 bytes: the pack name's first 8 bytes, the segment's
  offset (its header) and its length with the header;
- format 1 (segment file): the text `<shard>:<segment number>`, as before.

Open pack files are kept per process (`Reader`), by day and name, and dropped when the index moves
to another generation (a repacked day makes a new one).
"""

from __future__ import annotations

import os
import struct
from collections import OrderedDict

import numpy as np

from .. import storefile
from ..format import layout
from ..format import pack as packfmt
from ..format import seal
from ..format.pack import VECTOR_INNER as _INNER
from ..format.segment import DT_VEC_F32, HEADER_SIZE, Header, SegmentError, decode_vector
from ..format.segment import read_segment
from ..format.segment import segment_name

_SEALED = struct.Struct("<32s8sII")
SEALED_SIZE = _SEALED.size  # the bytes of a sealed item's location
_CLEAR = struct.Struct("<8sII")


class VectorMissing(Exception):
    """A row's vector could not be read from the store's files; the message names the file."""


def sealed_location(subkey: bytes, pack_name: str, offset: int, length: int) -> bytes:
    return _SEALED.pack(subkey, bytes.fromhex(pack_name[:16]), offset, length)


def clear_location(pack_name: str, offset: int, length: int) -> bytes:
    return _CLEAR.pack(bytes.fromhex(pack_name[:16]), offset, length)


def item_location(pk, item) -> bytes | None:
    """Where a pack's opened item lies (None when the pack was not parsed with offsets)."""
    if item.seg < 0 or item.seg >= len(pk.offsets):
        return None
    start = pk.offsets[item.seg]
    header, payload = pk.segments[item.seg]
    if pk.sealed:
        return sealed_location(
            seal.vector_subkey(item.key), pk.path.name, start + HEADER_SIZE, len(payload)
        )
    return clear_location(pk.path.name, start, HEADER_SIZE + len(payload))


def opened_items(pk, keys) -> list[tuple]:
    """(record id, key, hash16, plain header, payload, location) of each vector `keys` open in a
    pack: what `Pack.items` gives with `item_location`, for a whole day's keys at once, a sealed
    item's subkey made once for opening it and for its location (the index's build)."""
    if not pk.sealed:
        return [
            (it.record_id, it.key, it.h16, it.header, it.payload, item_location(pk, it))
            for it in pk.items(keys)
        ]
    by_tag = {row[0]: row for row in pk.manifest.get("records") or []}
    nonce = bytes.fromhex(pk.manifest["nonce"])
    name, offsets, segments = pk.path.name, pk.offsets, pk.segments
    out = []
    for rid, key in keys:
        row = by_tag.get(seal.tag(key, nonce, seal.VECTOR))
        if row is None:
            continue
        seg = row[-1]
        payload = segments[seg][1]
        subkey = seal.vector_subkey(key)
        plain = seal.unseal_vector(subkey, nonce, payload)
        opened = packfmt.opened_vector(plain) if plain is not None else None
        if opened is None:
            continue  # damaged: fsck names the pack (its bytes no longer hash to its name)
        where = (
            sealed_location(subkey, name, offsets[seg] + HEADER_SIZE, len(payload))
            if 0 <= seg < len(offsets)
            else None
        )
        out.append((rid, key, *opened, where))
    return out


def _fd_budget() -> int:
    """Open pack files a Reader keeps at most: a quarter of the process's file limit, up to 1,024
    (a store of thousands of days must not run a long-lived reader out of descriptors)."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    except (ImportError, OSError, ValueError):
        return 256
    return 1024 if soft == resource.RLIM_INFINITY else max(16, min(1024, soft // 4))


OPEN_PACKS_MAX = _fd_budget()
PREFETCH = True  # `rows` asks the kernel for every uncached row's bytes before reading the first
# A read that returns only what the page cache holds (Linux 4.14+), or None where there is none.
_NOWAIT = os.preadv if hasattr(os, "RWF_NOWAIT") and hasattr(os, "preadv") else None


class Reader:
    """Reads exact vectors by location, keeping the packs it found (per process): each one's path
    and nonce, and the most recently used ones open."""

    def __init__(self, root, dim: int):
        from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305

        self.root, self.dim = root, dim
        self._aead = ChaCha20Poly1305
        self._found: dict[tuple[str, bytes], tuple[str, bytes, str]] = {}  # path, nonce, name
        self._fds: OrderedDict[tuple[str, bytes], int] = OrderedDict()  # least recent first

    def close(self) -> None:
        for fd in self._fds.values():
            try:
                os.close(fd)
            except OSError:
                pass
        self._fds.clear()

    def __del__(self):
        self.close()

    def _find(self, day: str, prefix: bytes) -> tuple[str, bytes, str]:
        got = self._found.get((day, prefix))
        if got is not None:
            return got
        want = prefix.hex()
        found = [
            p
            for p in packfmt.pack_files(packfmt.day_dir(self.root, day))
            if p.name.startswith(want)
        ]
        if len(found) != 1:
            why = "no such pack" if not found else "the name is not unique"
            raise VectorMissing(f"{layout.pack_dir(day)}/{want}….is: {why}")
        rel = f"{layout.pack_dir(day)}/{found[0].name}"
        try:
            nonce = bytes.fromhex(str(packfmt.read_manifest(found[0]).get("nonce") or ""))
        except (OSError, ValueError) as exc:
            raise VectorMissing(f"{rel}: {exc}") from None
        self._found[(day, prefix)] = (str(found[0]), nonce, rel)
        return self._found[(day, prefix)]

    def _pack(self, day: str, prefix: bytes) -> tuple[int, bytes, str]:
        """(open file, nonce, name for messages) of the pack `prefix` names in `day`."""
        path, nonce, rel = self._find(day, prefix)
        fd = self._fds.get((day, prefix))
        if fd is not None:
            self._fds.move_to_end((day, prefix))
            return fd, nonce, rel
        while len(self._fds) >= OPEN_PACKS_MAX:
            os.close(self._fds.popitem(last=False)[1])
        try:
            fd = storefile.open_fd(path)  # never through a link, never a FIFO or device
        except OSError as exc:
            raise VectorMissing(f"{rel}: {exc}") from None
        self._fds[(day, prefix)] = fd
        return fd, nonce, rel

    def prefetch(self, where) -> None:
        """Ask the kernel to start reading these (day, location) items now, all at once: the reads
        that follow wait for the slowest of them, not for each in turn (a store's packs outgrow
        the page cache; 40 candidates at 1M took a 20 ms p99 read one by one from a cold cache)."""
        advise = getattr(os, "posix_fadvise", None)
        if advise is None:
            return
        for day, location in where:
            if type(location) is not bytes:
                continue
            if len(location) == _SEALED.size:
                _subkey, prefix, off, length = _SEALED.unpack(location)
            elif len(location) == _CLEAR.size:
                prefix, off, length = _CLEAR.unpack(location)
            else:
                continue
            try:
                fd = self._pack(day, prefix)[0]
                advise(fd, off, length, os.POSIX_FADV_WILLNEED)
            except (OSError, VectorMissing):
                continue  # the read that follows says what is wrong

    def read_into(self, out: np.ndarray, spots) -> list[int]:
        """Fill out[i] with the float32 vector at spots[i], a (day, location) pair, for the common
        case (a sealed pack item); returns the indices left for `vector`, which reads any other
        kind and says why one does not read.

        An item whose bytes the page cache holds is read at once (a read that may not wait); only
        the others are announced to the kernel together (`prefetch`) and then read: a warm store
        pays no read-ahead hint per vector, a cold one still waits for the slowest read only."""
        later: list[int] = []
        left: list[int] = []
        for i, (day, location) in enumerate(spots):
            got = self._open_sealed(out[i], day, location, wait=_NOWAIT is None)
            if got is None:
                later.append(i)
            elif not got:
                left.append(i)
        if PREFETCH and len(later) + len(left) > 1:
            self.prefetch(spots[i] for i in later + left)
        for i in later:
            if not self._open_sealed(out[i], *spots[i], wait=True):
                left.append(i)
        # one check of every row read here (a vector that opens but holds NaN or inf is damaged)
        done = np.ones(len(spots), bool)
        done[left] = False
        bad = np.flatnonzero(done & ~np.isfinite(out[: len(spots)]).all(axis=1))
        return sorted(left + bad.tolist())

    def _open_sealed(self, row: np.ndarray, day, location, wait: bool) -> bool | None:
        """A sealed float32 vector read into `row` without the general path's layers (its
        finiteness is checked by the caller); False when it is anything else or does not read,
        None when `wait` is False and its bytes are not in the page cache."""
        if day is None or type(location) is not bytes or len(location) != _SEALED.size:
            return False
        subkey, prefix, off, length = _SEALED.unpack(location)
        try:
            fd, nonce, _rel = self._pack(day, prefix)
            if wait:
                raw = os.pread(fd, length, off)
            else:
                raw = bytearray(length)
                try:
                    if _NOWAIT(fd, [raw], off, os.RWF_NOWAIT) != length:
                        return None  # partly cached: read it with the others
                except OSError:  # not cached, or a file system that cannot tell: read it later
                    return None
            plain = self._aead(subkey).decrypt(nonce, raw, seal.AAD)
        except Exception:  # noqa: BLE001 (any failure: the general path names it)
            return False
        body = 8 + _INNER.size
        dtype, dim, _scale, _unix = _INNER.unpack_from(plain, 8)
        if dtype != DT_VEC_F32 or dim != self.dim or len(plain) != body + 4 * dim:
            return False
        row[:] = np.frombuffer(plain, "<f4", dim, body)
        return True

    def vector(self, day: str, location) -> np.ndarray:
        """The float32 vector at `location` (a `records.vkey` value); VectorMissing if unreadable."""
        if isinstance(location, str):
            return self._segment_vector(location)
        if not isinstance(location, bytes) or len(location) not in (_SEALED.size, _CLEAR.size):
            raise VectorMissing(f"day {day}: the index holds no location for a vector")
        if len(location) == _SEALED.size:
            subkey, prefix, off, length = _SEALED.unpack(location)
        else:
            subkey, (prefix, off, length) = None, _CLEAR.unpack(location)
        fd, nonce, rel = self._pack(day, prefix)
        try:
            raw = os.pread(fd, length, off)
        except OSError as exc:
            raise VectorMissing(f"{rel}: {exc}") from None
        if len(raw) != length:
            raise VectorMissing(f"{rel}: cut short at byte {off + len(raw)}")
        try:
            if subkey is not None:
                plain = seal.unseal_vector(subkey, nonce, raw)
                opened = packfmt.opened_vector(plain) if plain is not None else None
                if opened is None:
                    raise VectorMissing(f"{rel}: the vector at byte {off} does not open (damaged)")
                _h16, header, body = opened
            else:
                header, body = Header.unpack(raw[:HEADER_SIZE]), raw[HEADER_SIZE:]
            vec = decode_vector(header, body)
        except (SegmentError, ValueError) as exc:
            raise VectorMissing(f"{rel}: the vector at byte {off}: {exc}") from None
        return self._checked(vec, rel)

    def _segment_vector(self, location: str) -> np.ndarray:
        shard, _, number = location.rpartition(":")
        try:
            path = layout.safe_path(self.root, shard) / segment_name(int(number))
            header, payload = read_segment(path)
            vec = decode_vector(header, payload)
        except (OSError, SegmentError, ValueError, TypeError) as exc:
            raise VectorMissing(f"{shard}/segment {number}: {exc}") from None
        return self._checked(vec, str(path))

    def _checked(self, vec, rel: str) -> np.ndarray:
        vec = np.asarray(vec, np.float32)
        if vec.shape != (self.dim,) or not np.isfinite(vec).all():
            raise VectorMissing(f"{rel}: the vector is not {self.dim} finite numbers")
        return vec


def reader(index, gen: int | None = None) -> Reader:
    """The index's Reader for its current generation (a new one after the generation changed);
    `gen`: that generation, when the caller has just read it (`index.matrix()`)."""
    if gen is None:
        index.matrix()  # the current generation (the mapping is kept: this costs one query)
        gen = index._matrix[0][0]
    cur = index.__dict__.get("_exact_reader")
    if cur is None or cur[0] != gen:
        if cur is not None:
            cur[1].close()
        cur = (gen, Reader(index.store.root, index.dim))
        index.__dict__["_exact_reader"] = cur
    return cur[1]


def locations(
    index, vrows, rowids: dict | None = None, matrix=None
) -> dict[int, tuple[str, object]]:
    """{vrow: (day, location)} of the given matrix rows; `rowids`, when given, also gets each
    row's record rowid. Read from the matrix's where-<gen>.bin (index/vectors.py), index.db
    asked only for a row that file does not know. `matrix`: the caller's `index.matrix()`."""
    vrows = [int(v) for v in vrows]
    out: dict[int, tuple[str, object]] = {}
    if matrix is None:
        matrix, _ = index.matrix()
    inside = [v for v in vrows if 0 <= v < len(matrix)]
    ask = [v for v in vrows if not 0 <= v < len(matrix)]
    for v, got in zip(inside, matrix.locate(inside)):
        if got is None:
            ask.append(v)
            continue
        out[v] = got[1:]
        if rowids is not None:
            rowids[v] = got[0]
    conn = index.conn
    for i in range(0, len(ask), 500):
        part = ask[i : i + 500]
        marks = ",".join("?" * len(part))
        for v, rowid, day, loc in conn.execute(
            f"SELECT vrow, rowid, day, vkey FROM records WHERE vrow IN ({marks})", part
        ):
            out[v] = (day, loc)
            if rowids is not None:
                rowids[v] = rowid
    return out


def rows(index, vrows, rowids: dict | None = None, matrix=None) -> tuple[np.ndarray, list[str]]:
    """(float32 vectors of the rows, in order; problems): a row whose vector cannot be read gets
    its int8 approximation instead, and a problem naming the file. `rowids`, when given, gets
    {vrow: record rowid} of the rows read (see `locations`). `matrix`: the matrix the rows are
    rows of (a search's, read once for the whole query); else the index's current one."""
    vrows = np.asarray(vrows, np.int64)
    out = np.empty((vrows.size, index.dim), np.float32)
    if matrix is None or getattr(matrix, "gen", None) is None:
        matrix, _ = index.matrix()  # one look at the current generation for the whole read
        gen = index._matrix[0][0]
    else:
        gen = matrix.gen
    where = locations(index, vrows.tolist(), rowids, matrix)
    rd = reader(index, gen)
    spots = [where.get(v, (None, None)) for v in vrows.tolist()]
    problems: list[str] = []
    for i in rd.read_into(out, spots):
        day, loc = spots[i]
        try:
            if day is None:
                raise VectorMissing(f"vector row {int(vrows[i])} is in no record of index.db")
            out[i] = rd.vector(day, loc)
        except VectorMissing as exc:
            problems.append(f"{exc} (searched with the index's approximation)")
            out[i] = matrix.take(vrows[i : i + 1])[0]
    return out, problems


SAMPLE_ROWS = 64  # rows `ct fsck` holds against the store's vectors


def sample_damage(conn, root, meta_dir, dim: int, n: int | None = None) -> str | None:
    """Rows of the matrix, evenly spaced, held against their vectors in the store: each row's
    codes must lie within its error of the vector (||x - codes / scales|| <= r). A row whose
    vector cannot be read is left to the store's own check. None, or what does not match."""
    from . import vectors as vecfiles

    n = SAMPLE_ROWS if n is None else n
    meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('gen', 'n_rows')"))
    gen, n_rows = int(meta.get("gen", 0)), int(meta.get("n_rows", 0))
    if n_rows <= 0:
        return None
    vecs, _ = vecfiles.open_matrix(meta_dir, gen, n_rows, dim)
    picks = sorted({int(v) for v in np.linspace(0, n_rows - 1, min(n, n_rows))})
    marks = ",".join("?" * len(picks))
    where, rowid_of = {}, {}
    for v, rowid, day, loc in conn.execute(
        f"SELECT vrow, rowid, day, vkey FROM records WHERE vrow IN ({marks})", picks
    ):
        where[v], rowid_of[v] = (day, loc), rowid
    # the search reads a row's record and location from where-<gen>.bin: it must say what index.db says
    for v, got in zip(picks, vecs.locate(picks)):
        if got is not None and v in where and got != (rowid_of[v], *where[v]):
            return (
                f"{vecfiles.where_path(meta_dir, gen).name}: row {v} names record {got[0]} at "
                f"{got[1]}, but index.db has record {rowid_of[v]} at {where[v][0]}"
            )
    rd = Reader(root, dim)
    try:
        for v in picks:
            if v not in where:
                return f"index.db: vector row {v} belongs to no record"
            try:
                x = rd.vector(*where[v]).astype(np.float64)
            except VectorMissing:
                continue
            c = vecs.codes[v].astype(np.float64)
            off = float(np.linalg.norm(x - c / vecs.scale.astype(np.float64)))
            if off > float(vecs.errors[v]) * (1 + 1e-6) + 1e-12:
                return (
                    f"{vecfiles.matrix_path(meta_dir, gen).name}: row {v} does not match its "
                    f"vector in the store (off by {off:.3g}, its error says at most "
                    f"{float(vecs.errors[v]):.3g})"
                )
    finally:
        rd.close()
    return None
