"""The vector matrix: one float32 row per indexed record, ordered by time, in generation files."""

from __future__ import annotations

import mmap
import os
import re
from pathlib import Path

import numpy as np


TAKE_ROWS_MAX = 4096  # past this many rows one read of the map is cheaper than a pread per row


def matrix_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"vectors-{gen}.f32"


def ts_path(meta_dir: Path, gen: int) -> Path:
    return meta_dir / f"times-{gen}.f64"


def open_matrix(meta_dir: Path, gen: int, n_rows: int, dim: int):
    """(vectors, times) memory-mapped read-only; empty arrays for an empty index."""
    if n_rows == 0:
        return np.zeros((0, dim), np.float32), np.zeros(0, np.float64)
    vec = np.memmap(matrix_path(meta_dir, gen), dtype=np.float32, mode="r", shape=(n_rows, dim))
    ts = np.memmap(ts_path(meta_dir, gen), dtype=np.float64, mode="r", shape=(n_rows,))
    return vec, ts


def take_rows(vec: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """float32 copies of some rows of a matrix opened by `open_matrix`, read with `pread` from its
    file when there are few of them: indexing the memory map would map whole page-cache folios
    around each row into the process (on a kernel with large folios, ~2 MB a row: 160 rows of a
    1M-row matrix put 284 MiB of it in the process's resident set)."""
    rows = np.asarray(rows, np.int64)
    mapped = getattr(vec, "base", None)
    if (
        not isinstance(vec, np.memmap)
        or not isinstance(mapped, mmap.mmap)
        or vec.offset != 0
        or vec.ndim != 2
        or rows.size > TAKE_ROWS_MAX
    ):
        return np.asarray(vec[rows], np.float32)
    n, dim = vec.shape
    if rows.size and (rows.min() < 0 or rows.max() >= n):
        raise IndexError("row out of range")
    size = dim * vec.itemsize
    out = np.empty((rows.size, dim), vec.dtype)
    fd = os.open(vec.filename, os.O_RDONLY)
    try:
        for i, r in enumerate(rows.tolist()):
            raw = os.pread(fd, size, r * size)
            if len(raw) != size:
                raise IndexError(f"{vec.filename}: row {r} is cut short")
            out[i] = np.frombuffer(raw, vec.dtype)
    finally:
        os.close(fd)
    return out.astype(np.float32, copy=False)


def write_rows(
    meta_dir: Path, gen: int, start_row: int, vectors: np.ndarray, times: np.ndarray
) -> None:
    """Write rows [start_row, start_row+len) of generation `gen` (the file is extended as needed)."""
    for path, arr in ((matrix_path(meta_dir, gen), vectors), (ts_path(meta_dir, gen), times)):
        arr = np.ascontiguousarray(arr)
        row_bytes = arr.itemsize * (arr.shape[1] if arr.ndim == 2 else 1)
        mode = "r+b" if path.exists() else "w+b"
        with open(path, mode) as f:
            f.truncate(start_row * row_bytes)
            f.seek(start_row * row_bytes)
            f.write(arr.tobytes())
            f.flush()
            os.fsync(f.fileno())


def copy_prefix(meta_dir: Path, old_gen: int, new_gen: int, n_rows: int, dim: int) -> None:
    """Start generation `new_gen` with the first `n_rows` rows of `old_gen`."""
    for path_fn, row_bytes in ((matrix_path, 4 * dim), (ts_path, 8)):
        src, dst = path_fn(meta_dir, old_gen), path_fn(meta_dir, new_gen)
        with open(src, "rb") as fi, open(dst, "wb") as fo:
            remaining = n_rows * row_bytes
            while remaining > 0:
                buf = fi.read(min(remaining, 1 << 24))
                if not buf:
                    break
                fo.write(buf)
                remaining -= len(buf)


_GENERATION_FILE = re.compile(r"^(?:vectors|times|ivf)-(\d+)\.")


def remove_generations(meta_dir: Path, keep: int) -> None:
    """Delete every file of another generation: its matrix and times, and the faiss sidecars made
    from it (index/ann.py: float16 and int8 scan copies with their chunk files, IVF indexes)."""
    for p in meta_dir.iterdir():
        m = _GENERATION_FILE.match(p.name)
        if m and int(m.group(1)) != keep:
            p.unlink(missing_ok=True)
