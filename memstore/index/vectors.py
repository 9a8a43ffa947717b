"""The vector matrix: one int8 row of codes per indexed record, ordered by time, in generation files.

A generation `<gen>` is five files in `.memstore/`:

    vectors-<gen>.i8    n x dim int8 codes (row-major), memory-mapped
    scales-<gen>.f32    dim float32 scales, fixed at the generation's first write
    errors-<gen>.f32    n float32: each row's quantisation error r = ||x - x_hat||_2, rounded up
    times-<gen>.f64     n float64: each row's Unix time
    where-<gen>.bin     n x 67 bytes: each row's record (rowid) and where its exact vector lies
                        (day, location: index/exact.py), as index.db has them (`WHERE_ROW`)

x_hat = codes / scales approximates the record's float32 vector x (which its pack holds, exactly):
a scan scores every row by codes @ (q / scales), and |q.x - q.x_hat| <= ||q|| r bounds what it
may be off by, so the search (memstore/retrieve/search.py) can re-score a few rows exactly from
the packs (index/exact.py) and prove that no other row belongs in the top k.
"""

from __future__ import annotations

import mmap
import os
import re
import struct
from pathlib import Path

import numpy as np

from .. import storefile

TAKE_ROWS_MAX = 4096  # past this many rows one read of the map is cheaper than a pread per row
CODE_MAX = 127  # codes lie in [-127, 127]: a scale maps a dimension's largest |value| to 127
# A generation's scales come from the rows of its first write. When those are fewer than
# FLOOR_ROWS, a dimension is given at least SCALE_FLOOR of the largest |value| over all
# dimensions, so that a first write of a few rows does not leave later rows' larger values
# clipped hard (clipping only loosens the bound: it is counted in the row's error).
SCALE_FLOOR = 0.5
FLOOR_ROWS = 256


def matrix_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"vectors-{gen}.i8"


def ts_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"times-{gen}.f64"


def errors_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"errors-{gen}.f32"


def scales_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"scales-{gen}.f32"


def where_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"where-{gen}.bin"


# A row's record and the place of its exact vector: rowid, day ("YYYY-MM-DD"), a kind byte and up
# to 48 bytes of location. The kind is the location's length when it is bytes (a pack item), 100 +
# its length for text (a format-1 segment), NO_VECTOR_AT for none, and ASK_INDEX where this file does
# not know (written without locations, or one that does not fit): the reader asks index.db. A
# row's entry changes only with its generation (a row moved, repacked or re-read makes a new one),
# so a vector search finds its candidates' packs without a query per row.
WHERE_ROW = struct.Struct("<q10sB48s")
NO_VECTOR_AT, ASK_INDEX, TEXT_KIND = 254, 255, 100


def where_row(rowid: int, day, location) -> bytes:
    """One row of where-<gen>.bin (see WHERE_ROW)."""
    day_b = day.encode("ascii", "replace") if isinstance(day, str) else b""
    if isinstance(location, bytes) and len(location) <= 48:
        kind, loc = len(location), location
    elif isinstance(location, str) and len(location.encode("utf-8")) <= 48:
        loc = location.encode("utf-8")
        kind = TEXT_KIND + len(loc)
    elif location is None:
        kind, loc = NO_VECTOR_AT, b""
    else:
        kind, loc = ASK_INDEX, b""
    if len(day_b) != 10:
        kind, loc = ASK_INDEX, b""
    return WHERE_ROW.pack(int(rowid), day_b[:10].ljust(10, b"\0"), kind, loc)


def read_where_row(raw: bytes) -> tuple[int, str, object] | None:
    """(rowid, day, location) of one where-<gen>.bin row; None where the file does not know."""
    rowid, day_b, kind, loc = WHERE_ROW.unpack(raw)
    if kind == ASK_INDEX:
        return None
    if kind == NO_VECTOR_AT:
        return rowid, day_b.decode("ascii"), None
    if kind > TEXT_KIND:
        return rowid, day_b.decode("ascii"), loc[: kind - TEXT_KIND].decode("utf-8")
    return rowid, day_b.decode("ascii"), loc[:kind]


def row_files(meta_dir: Path, gen: int, dim: int) -> list[tuple[Path, int]]:
    """(file, bytes a row) of every per-row file of a generation."""
    return [
        (matrix_path(meta_dir, gen), dim),
        (errors_path(meta_dir, gen), 4),
        (ts_path(meta_dir, gen), 8),
        (where_path(meta_dir, gen), WHERE_ROW.size),
    ]


def _chunk(vectors, a: int, b: int) -> np.ndarray:
    """Rows a:b of `vectors` (a matrix, or a list of rows) as a float32 matrix."""
    return np.asarray(vectors[a:b], np.float32)


def make_scales(vectors) -> np.ndarray:
    """Per-dimension scales for these float32 rows (a matrix, or a list of rows, stacked a chunk
    at a time): 127 / the dimension's largest |value|."""
    if isinstance(vectors, list):
        n = len(vectors)
        dim = len(vectors[0]) if n else 0
    else:
        vectors = np.asarray(vectors, np.float32)
        n, dim = vectors.shape
    top = np.zeros(dim, np.float32)
    for s in range(0, n, 16_384):
        top = np.maximum(top, np.abs(_chunk(vectors, s, s + 16_384)).max(axis=0))
    if n < FLOOR_ROWS and top.size:
        top = np.maximum(top, SCALE_FLOOR * float(top.max()))
    return (CODE_MAX / np.maximum(top, 1e-12)).astype(np.float32)


def quantize(vectors, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(int8 codes, float32 errors) of float32 rows (a matrix, or a list of rows: stacked a chunk at
    a time, never as one matrix: a 100k import's index takes its 153 MB of vectors so, each a view
    of what the files child handed over) under `scale`: codes = round(x * scale), clipped to
    [-127, 127]; error = ||x - codes / scale||_2 computed in float64 and rounded up to the next
    float32, so it never understates the distance."""
    if not isinstance(vectors, list):
        vectors = np.asarray(vectors, np.float32)
    n = len(vectors)
    s = np.asarray(scale, np.float64)
    codes = np.empty((n, s.shape[0]), np.int8)
    errs = np.empty(n, np.float32)
    for a in range(0, n, 16_384):
        x = _chunk(vectors, a, a + 16_384).astype(np.float64)
        c = np.multiply(x, s)  # the steps of clip(rint(x * s)) and ((x - c / s) ** 2).sum(axis=1),
        np.rint(c, out=c)  # each into one buffer: the same numbers (0.36 -> 0.21 s at 100k rows)
        np.clip(c, -CODE_MAX, CODE_MAX, out=c)
        codes[a : a + 16_384] = c
        d = np.divide(c, s, out=c)
        np.subtract(x, d, out=d)
        np.square(d, out=d)
        err = np.sqrt(d.sum(axis=1))
        # float32 rounds to nearest, maybe down: one step up is never below the float64 value
        errs[a : a + 16_384] = np.nextafter(err.astype(np.float32), np.float32(np.inf))
    return codes, errs


def maxima(codes: np.ndarray, errors: np.ndarray) -> tuple[float, float]:
    """(largest code norm ||codes||_2, largest error) of some rows, rounded up (0 for none)."""
    if len(errors) == 0:
        return 0.0, 0.0
    top = 0.0
    for a in range(0, len(codes), 16_384):
        c = np.asarray(codes[a : a + 16_384], np.float64)
        top = max(top, float(np.sqrt((c * c).sum(axis=1)).max()))
    return top * (1 + 1e-9), float(np.max(errors))


class Matrix:
    """The rows of one generation: int8 codes, their scales and errors. Indexing it gives decoded
    float32 rows (x_hat, an approximation); `codes`, `scale` and `errors` are the raw parts."""

    def __init__(self, codes: np.ndarray, scale: np.ndarray, errors: np.ndarray, where=None):
        self.codes, self.scale, self.errors = codes, scale, errors
        self.where = where  # the generation's where-<gen>.bin rows (n x WHERE_ROW.size), or None
        self._xmax: float | None = None  # CODE_MAX ||1 / scales|| (see `slack`)
        self.gen: int | None = None  # the generation, when opened from its files
        self._fds: dict[str, int] = {}  # files of the mapped parts, opened on first use (`_fd`)
        self.inv = (1.0 / scale.astype(np.float64)).astype(np.float32)
        self._maxima: tuple[float, float] | None = None  # (code norm, error), at most

    def known_maxima(self, code_norm, error) -> None:
        """Take the maxima the index keeps in meta (text); a missing or odd one is computed."""
        try:
            got = (float(code_norm), float(error))
        except (TypeError, ValueError):
            return
        if all(np.isfinite(got)) and min(got) >= 0:
            self._maxima = got

    @property
    def shape(self) -> tuple[int, int]:
        return self.codes.shape

    @property
    def dim(self) -> int:
        return self.codes.shape[1]

    def __len__(self) -> int:
        return self.codes.shape[0]

    def __getitem__(self, key) -> np.ndarray:
        return np.asarray(self.codes[key], np.float32) * self.inv

    def __array__(self, dtype=None, copy=None):
        out = self[:]
        return out if dtype is None else out.astype(dtype)

    def take(self, rows) -> np.ndarray:
        """Decoded copies of some rows (read with pread when few: see `take_rows`)."""
        return take_rows(self.codes, rows).astype(np.float32) * self.inv

    def take_codes(self, rows) -> np.ndarray:
        return take_rows(self.codes, rows, self._fd("codes"))

    def _fd(self, part: str) -> int | None:
        """The file of a memory-mapped part ("codes", "where"), opened once and kept with the
        matrix (a query reads a few rows of each: an open and a close each time cost as much)."""
        arr = getattr(self, part)
        if not isinstance(arr, np.memmap) or not arr.filename:
            return None
        fd = self._fds.get(part)
        if fd is None:
            fd = self._fds[part] = os.open(arr.filename, os.O_RDONLY)
        return fd

    def locate(self, rows: list[int]) -> list[tuple[int, str, object] | None]:
        """(record rowid, day, location) of each row from where-<gen>.bin (see WHERE_ROW); None
        for a row the file does not know, or for every row when the generation has no such file.
        Read with one pread a row on a descriptor kept with the matrix (not through the map: see
        `take_rows`), ~1 us a row."""
        if self.where is None or not rows:
            return [None] * len(rows)
        fd, size, n = self._fd("where"), WHERE_ROW.size, self.where.shape[0]
        out = []
        for r in rows:
            if not 0 <= r < n:
                raise IndexError(f"row {r} of {n}")
            raw = os.pread(fd, size, r * size)
            out.append(read_where_row(raw) if len(raw) == size else None)
        return out

    def __del__(self):
        for fd in getattr(self, "_fds", {}).values():
            os.close(fd)
        self._fds = {}

    def _known(self) -> tuple[float, float]:
        if self._maxima is None:
            self._maxima = maxima(self.codes, self.errors)
        return self._maxima

    def err_max(self) -> float:
        """At least the largest row error (the index keeps it in meta; else read once)."""
        return self._known()[1]

    def code_norm_max(self) -> float:
        """At least the largest ||codes||_2 of a row (the index keeps it in meta; else read once)."""
        return self._known()[0]

    def query(self, q: np.ndarray) -> np.ndarray:
        """The query in code space: q / scales, so that codes @ it approximates x . q."""
        return (np.asarray(q, np.float64) * self.inv.astype(np.float64)).astype(np.float32)

    def slack(self, q: np.ndarray, y: np.ndarray | None = None) -> float:
        """What float32 arithmetic may add to |q.x - approximate score|: rounding in the products
        and sums of the approximate score (codes |c| <= 127), of the float32 exact score, and of
        the bound itself; a generous multiple of dim x 2^-24 of the magnitudes involved."""
        dim = self.dim
        y = np.linalg.norm((self.query(q) if y is None else y).astype(np.float64))
        qn = float(np.linalg.norm(np.asarray(q, np.float64)))
        if self._xmax is None:  # the same for every query of this matrix
            self._xmax = CODE_MAX * float(np.linalg.norm(self.inv.astype(np.float64)))
        xmax = self._xmax + self.err_max()
        return 4.0 * (dim + 4) * 2.0**-24 * (CODE_MAX * np.sqrt(dim) * y + qn * xmax) + 1e-30


def read_scales(meta_dir: Path, gen: int, dim: int) -> np.ndarray:
    """A generation's scales; ValueError when the file is not `dim` finite positive float32."""
    path = scales_path(meta_dir, gen)
    raw = path.read_bytes()
    if len(raw) != 4 * dim:
        raise ValueError(f"{path.name} is {len(raw)} bytes, not the {4 * dim} of {dim} scales")
    scale = np.frombuffer(raw, dtype="<f4").astype(np.float32)
    if not (np.all(np.isfinite(scale)) and np.all(scale > 0)):
        raise ValueError(f"{path.name} holds a scale that is not a finite positive number")
    return scale


def write_scales(meta_dir: Path, gen: int, scale: np.ndarray) -> None:
    path = scales_path(meta_dir, gen)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(np.asarray(scale, "<f4").tobytes())
        f.flush()
        os.fsync(f.fileno())
    tmp.replace(path)


def open_matrix(meta_dir: Path, gen: int, n_rows: int, dim: int):
    """(Matrix, times) memory-mapped read-only; empty arrays for an empty index. ValueError when
    the scales are not sound."""
    if n_rows == 0:
        return Matrix(
            np.zeros((0, dim), np.int8), np.ones(dim, np.float32), np.zeros(0, np.float32)
        ), np.zeros(0, np.float64)
    scale = read_scales(meta_dir, gen, dim)
    codes = np.memmap(matrix_path(meta_dir, gen), dtype=np.int8, mode="r", shape=(n_rows, dim))
    errs = np.memmap(errors_path(meta_dir, gen), dtype=np.float32, mode="r", shape=(n_rows,))
    ts = np.memmap(ts_path(meta_dir, gen), dtype=np.float64, mode="r", shape=(n_rows,))
    where = np.memmap(
        where_path(meta_dir, gen), dtype=np.uint8, mode="r", shape=(n_rows, WHERE_ROW.size)
    )
    matrix = Matrix(codes, scale, errs, where)
    matrix.gen = gen
    return matrix, ts


def take_rows(vec: np.ndarray, rows: np.ndarray, fd: int | None = None) -> np.ndarray:
    """Copies of some rows of a memory-mapped matrix, read with `pread` from its file when there
    are few of them: indexing the memory map would map whole page-cache folios around each row
    into the process (on a kernel with large folios, ~2 MB a row: 160 rows of a 1M-row matrix put
    284 MiB of it in the process's resident set). `fd`: that file, kept open by the caller."""
    rows = np.asarray(rows, np.int64)
    mapped = getattr(vec, "base", None)
    if (
        not isinstance(vec, np.memmap)
        or not isinstance(mapped, mmap.mmap)
        or vec.offset != 0
        or vec.ndim != 2
        or rows.size > TAKE_ROWS_MAX
    ):
        return np.array(vec[rows])
    n, dim = vec.shape
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise IndexError("row out of range")
    size = dim * vec.itemsize
    out = np.empty((rows.size, dim), vec.dtype)
    own = fd is None
    if own:
        fd = os.open(vec.filename, os.O_RDONLY)
    try:
        for i, r in enumerate(rows.tolist()):
            raw = os.pread(fd, size, r * size)
            if len(raw) != size:
                raise IndexError(f"{vec.filename}: row {r} is cut short")
            out[i] = np.frombuffer(raw, vec.dtype)
    finally:
        if own:
            os.close(fd)
    return out


def write_rows(
    meta_dir: Path,
    gen: int,
    start_row: int,
    codes: np.ndarray,
    errors: np.ndarray,
    times: np.ndarray,
    where: list | None = None,
) -> None:
    """Write rows [start_row, start_row+len) of generation `gen` (the files are extended as needed).

    `where` holds each row's (record rowid, day, location) for where-<gen>.bin; without it the
    rows are written as unknown there, and readers ask index.db."""
    n = len(times)
    if where is None:
        spots = WHERE_ROW.pack(0, b"\0" * 10, ASK_INDEX, b"") * n
    else:
        if len(where) != n:
            raise ValueError(f"{len(where)} locations for {n} rows")
        spots = b"".join(where_row(*w) for w in where)
    for path, arr in (
        (matrix_path(meta_dir, gen), np.asarray(codes, np.int8)),
        (errors_path(meta_dir, gen), np.asarray(errors, "<f4")),
        (ts_path(meta_dir, gen), np.asarray(times, "<f8")),
        (where_path(meta_dir, gen), np.frombuffer(spots, np.uint8).reshape(n, WHERE_ROW.size)),
    ):
        arr = np.ascontiguousarray(arr)
        row_bytes = arr.itemsize * (arr.shape[1] if arr.ndim == 2 else 1)
        storefile.check(path, meta_dir.parent)  # a link in a copied .memstore/ is not followed
        mode = "r+b" if path.exists() else "w+b"
        with open(path, mode) as f:
            f.truncate(start_row * row_bytes)
            f.seek(start_row * row_bytes)
            f.write(arr.tobytes())
            f.flush()
            os.fsync(f.fileno())


def copy_prefix(meta_dir: Path, old_gen: int, new_gen: int, n_rows: int, dim: int) -> None:
    """Start generation `new_gen` with the scales and the first `n_rows` rows of `old_gen`."""
    write_scales(meta_dir, new_gen, read_scales(meta_dir, old_gen, dim))
    for (src, row_bytes), (dst, _) in zip(
        row_files(meta_dir, old_gen, dim), row_files(meta_dir, new_gen, dim)
    ):
        with open(src, "rb") as fi, open(dst, "wb") as fo:
            remaining = n_rows * row_bytes
            while remaining > 0:
                buf = fi.read(min(remaining, 1 << 24))
                if not buf:
                    break
                fo.write(buf)
                remaining -= len(buf)


def damage(meta_dir: Path, gen: int, n_rows: int, dim: int, thorough: bool = False) -> str | None:
    """What is wrong with a generation's files for `n_rows` rows (one missing or short, scales
    that are not sound; `thorough`: an error that is no finite number >= 0, a code of -128, which
    this code never writes), named by file, or None."""
    if n_rows <= 0:
        return None
    for path, row_bytes in row_files(meta_dir, gen, dim):
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return f"{path.name} is missing (index.db has {n_rows} vector rows in it)"
        if size < n_rows * row_bytes:
            return (
                f"{path.name} is {size} bytes, shorter than the {n_rows} rows index.db has in it "
                f"({n_rows * row_bytes})"
            )
    try:
        read_scales(meta_dir, gen, dim)
    except FileNotFoundError:
        return f"{scales_path(meta_dir, gen).name} is missing (index.db has {n_rows} vector rows)"
    except ValueError as exc:
        return str(exc)
    if thorough:
        errs = np.fromfile(errors_path(meta_dir, gen), "<f4", n_rows)
        if not (np.all(np.isfinite(errs)) and np.all(errs >= 0)):
            return f"{errors_path(meta_dir, gen).name} holds an error that is not a number >= 0"
        codes = np.memmap(matrix_path(meta_dir, gen), np.int8, "r", shape=(n_rows, dim))
        for a in range(0, n_rows, 65_536):
            if int(codes[a : a + 65_536].min()) < -CODE_MAX:
                return f"{matrix_path(meta_dir, gen).name} holds a code of -128 (not written here)"
    return None


_GENERATION_FILE = re.compile(r"^(?:vectors|times|errors|scales|where|ivf)-(\d+)\.")


def remove_generations(meta_dir: Path, keep: int) -> None:
    """Delete every file of another generation: its codes, scales, errors, times and locations, and the faiss
    sidecars made from it (index/ann.py: float16 and int8 scan copies with their chunk files, IVF
    indexes); the float32 matrix an older memstore kept (`vectors-<gen>.f32`) goes the same way."""
    for p in meta_dir.iterdir():
        m = _GENERATION_FILE.match(p.name)
        if m and int(m.group(1)) != keep:
            p.unlink(missing_ok=True)
